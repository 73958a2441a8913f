//! Every extension action (docs/extensions.md §4), carried out by the core: a front-end hands
//! over the typed `ExtensionAction` and gets back what is left for it, the answer now or later,
//! or the one action that is about the front-end itself (ending the process). An extension's `sendUserMessage` reaches the session's one input
//! path from here, and `ctx.newSession()` the one replacement, with no front-end code between.

use futures_util::future::BoxFuture;
use serde_json::Value;
use tau_protocol::extension::ExtensionAction;
use tau_protocol::extension_event::ExtensionEvent;
use tokio_util::sync::CancellationToken;

use crate::replacing::{replace, restart_extensions};
use crate::{AgentSession, InputSource, NavigateOptions, QueueAs, Replacement, Submitted};

/// What carrying out an action leaves to the front-end.
pub enum Carried {
    /// The answer for the extension.
    Answered(Result<Value, String>),
    /// The answer, once the future resolves; to be awaited beside the front-end's loop (a
    /// `waitForIdle` waits for a run the loop must keep serving, `compact` for the
    /// compaction it started there).
    Later(BoxFuture<'static, Result<Value, String>>),
    /// The front-end's own: `shutdown` (how the process ends).
    FrontEnd(ExtensionAction),
}

impl std::fmt::Debug for Carried {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Answered(outcome) => f.debug_tuple("Answered").field(outcome).finish(),
            Self::Later(_) => f.write_str("Later"),
            Self::FrontEnd(action) => f.debug_tuple("FrontEnd").field(action).finish(),
        }
    }
}

/// Carries out `action` for `session`; `cancel` cuts off the extension events it runs (an
/// `abort` read meanwhile).
pub async fn carry_out(
    session: &mut AgentSession,
    action: ExtensionAction,
    cancel: &CancellationToken,
) -> Carried {
    Carried::Answered(match action {
        ExtensionAction::SendUserMessage {
            content,
            deliver_as,
        } => send_user_message(session, content, deliver_as.as_deref(), cancel).await,
        ExtensionAction::Abort => {
            session.runs_mut().abort().await;
            Ok(Value::Null)
        }
        // The command context's session calls (ext §4.2): the same replacement as the RPC
        // commands, with the same extension events around it.
        ExtensionAction::NewSession { parent_session } => {
            replaced(session, Replacement::New { parent_session }, cancel).await
        }
        ExtensionAction::SwitchSession { session_path } => {
            replaced(session, Replacement::Switch(session_path), cancel).await
        }
        ExtensionAction::Fork { entry_id, position } => {
            let how = if position.as_deref() == Some("at") {
                Replacement::Clone
            } else {
                Replacement::Fork(entry_id.unwrap_or_default())
            };
            replaced(session, how, cancel).await
        }
        ExtensionAction::NavigateTree {
            target_id,
            summarize,
            custom_instructions,
            replace_instructions,
            label,
        } => {
            let options = NavigateOptions {
                summarize,
                custom_instructions,
                replace_instructions,
                label,
            };
            session
                .navigate_tree(&target_id, options)
                .await
                .map(|outcome| outcome.to_value())
                .map_err(|e| e.to_string())
        }
        ExtensionAction::Reload => {
            reload(session).await;
            Ok(Value::Null)
        }
        ExtensionAction::WaitForIdle => {
            // Answered beside the loop: the run goes on, and what the extension does
            // meanwhile (a `notify`, a `steer`) takes effect at once.
            let conversation = std::sync::Arc::clone(session.conversation());
            return Carried::Later(Box::pin(async move {
                conversation.idle().await;
                Ok(Value::Null)
            }));
        }
        ExtensionAction::Compact {
            custom_instructions,
        } => return compact(session, custom_instructions).await,
        other @ ExtensionAction::Shutdown => return Carried::FrontEnd(other),
        // The session-only ones (when they queued behind an earlier action of their process,
        // rather than being applied where the frame arrived), then what changes the session's
        // state without replacing it.
        other => {
            if let Some(outcome) = session
                .extension_binding()
                .apply_session_action(&other)
                .await
            {
                return Carried::Answered(outcome);
            }
            match session.apply_extension_action(other).await {
                Ok(outcome) => outcome,
                // Every other kind has its arm above.
                Err(_) => Err("the action was not carried out".to_string()),
            }
        }
    })
}

/// `pi.sendUserMessage`: the same path as a typed prompt (`input` with source "extension",
/// expansion, then `before_agent_start` when it starts a run), as in pi.
async fn send_user_message(
    session: &mut AgentSession,
    content: tau_protocol::UserContent,
    deliver_as: Option<&str>,
    cancel: &CancellationToken,
) -> Result<Value, String> {
    // pi flattens a content array: its texts joined by newlines, its images kept.
    let (text, images) = (content.text("\n"), content.images());
    let queue_as = match deliver_as {
        Some("steer") => Some(QueueAs::Steer),
        Some("followUp") => Some(QueueAs::FollowUp),
        _ => None,
    };
    match session
        .submit(&text, images, queue_as, InputSource::Extension, cancel)
        .await
    {
        Ok(Submitted::Start(launch)) => {
            session.launch(*launch);
            Ok(Value::Null)
        }
        Ok(Submitted::Queued | Submitted::Handled) => Ok(Value::Null),
        // Sent after the run's `agent_end` (from an `agent_end` handler): it continues that
        // run, as in pi.
        Ok(Submitted::Held(message)) => {
            session
                .enqueue(QueueAs::FollowUp, &message.text, message.images)
                .await;
            Ok(Value::Null)
        }
        Err(err) => Err(err.to_string()),
    }
}

/// `ctx.compact()`: ends a running turn first, as pi does (ext §10.3.8), then compacts beside
/// the front-end's loop like the `compact` command; answered when the compaction ends.
async fn compact(session: &mut AgentSession, instructions: Option<String>) -> Carried {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let done: crate::CompactDone = Box::new(move |outcome| {
        Box::pin(async move {
            let outcome = outcome
                .map(|result| serde_json::to_value(result).unwrap_or_default())
                .map_err(|e| e.to_string());
            let _ = tx.send(outcome);
        })
    });
    session.start_compact(instructions, done).await;
    Carried::Later(Box::pin(async move {
        rx.await
            .unwrap_or_else(|_| Err("the compaction ended without an outcome".to_string()))
    }))
}

/// A replacement an extension asked for, answered with `{"cancelled"}`.
async fn replaced(
    session: &mut AgentSession,
    how: Replacement,
    cancel: &CancellationToken,
) -> Result<Value, String> {
    session.settle();
    replace(session, how, cancel)
        .await
        .map(|replaced| serde_json::json!({"cancelled": replaced.cancelled()}))
        .map_err(|err| err.to_string())
}

/// `ctx.reload()`: the extensions told the session ends, the resources read again, the
/// extensions started afresh (as pi's `/reload`).
pub async fn reload(session: &mut AgentSession) {
    let Some(extensions) = session.extension_binding().extensions().cloned() else {
        return;
    };
    let shutdown = ExtensionEvent::SessionShutdown {
        reason: "reload",
        target_session_file: None,
    };
    crate::extension_hooks::notify(&extensions, shutdown.to_value()).await;
    session.reload_resources();
    let start = ExtensionEvent::SessionStart {
        reason: "reload",
        previous_session_file: None,
    };
    restart_extensions(session, &extensions, "reload", start.to_value(), "reload").await;
}
