//! A session replacement as every front-end must carry it out: the extensions asked first
//! (`session_before_switch` / `session_before_fork`, which may cancel), told of the end
//! (`session_shutdown`), the session replaced, then the extensions started afresh for the new
//! one (`reinitialize`, `session_start`, `resources_discover`). Typed end to end: an RPC
//! command and an extension's `ctx.newSession()` reach the same call.

use std::ops::ControlFlow;

use serde_json::Value;
use tau_extensions::Extensions;
use tau_protocol::extension_event::{CancelResult, ExtensionEvent, take_result};
use tokio_util::sync::CancellationToken;

use crate::{AgentSession, Replacement, SessionError};

/// What came of a replacement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Replaced {
    /// An extension's `session_before_*` handler cancelled it; nothing changed.
    Cancelled,
    /// Done; for a fork or branch, the text of the user message it was made before.
    Done(String),
}

impl Replaced {
    pub fn cancelled(&self) -> bool {
        matches!(self, Self::Cancelled)
    }
}

/// Replaces the session (`how`), with the extensions' events around it when there are any.
/// `cancel` cuts off the `session_before_*` handlers (an `abort`).
pub async fn replace(
    session: &mut AgentSession,
    how: Replacement,
    cancel: &CancellationToken,
) -> Result<Replaced, SessionError> {
    let Some(extensions) = session.extension_binding().extensions().cloned() else {
        return session.replace_session(how).await.map(Replaced::Done);
    };
    let leaf = session.conversation().leaf_id();
    let (before, reason, target) = match &how {
        Replacement::New { .. } => (
            ExtensionEvent::SessionBeforeSwitch {
                reason: "new",
                target_session_file: None,
            }
            .to_value(),
            "new",
            None,
        ),
        Replacement::Switch(path) => (
            ExtensionEvent::SessionBeforeSwitch {
                reason: "resume",
                target_session_file: Some(path),
            }
            .to_value(),
            "resume",
            Some(path.clone()),
        ),
        Replacement::Fork(entry_id) | Replacement::Branch(entry_id) => (
            ExtensionEvent::SessionBeforeFork {
                entry_id,
                position: "before",
            }
            .to_value(),
            "fork",
            None,
        ),
        Replacement::Clone => (
            ExtensionEvent::SessionBeforeFork {
                entry_id: leaf.as_deref().unwrap_or_default(),
                position: "at",
            }
            .to_value(),
            "fork",
            None,
        ),
    };
    let mut cancelled = false;
    extensions
        .emit(before, Some(cancel), |_, result| {
            if take_result::<CancelResult>(result).cancel == Some(true) {
                cancelled = true;
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        })
        .await;
    if cancelled {
        return Ok(Replaced::Cancelled);
    }
    let previous_id = session.conversation().session_id();
    let previous_file = session.conversation().session_file();
    let shutdown = ExtensionEvent::SessionShutdown {
        reason,
        target_session_file: target.as_deref(),
    };
    crate::extension_hooks::notify(&extensions, shutdown.to_value()).await;
    let outcome = session.replace_session(how).await;
    session.settle();
    if session.conversation().session_id() != previous_id {
        let previous_file = previous_file.map(|file| file.display().to_string());
        let start = ExtensionEvent::SessionStart {
            reason,
            previous_session_file: previous_file.as_deref(),
        };
        restart_extensions(session, &extensions, reason, start.to_value(), "startup").await;
    }
    outcome.map(Replaced::Done)
}

/// New extension instances for the session as it now is (`reinitialize` with `reason`), then
/// `start` (`session_start`) and `resources_discover`, whose paths join the session's
/// sources: what follows a session replacement and a reload alike.
pub async fn restart_extensions(
    session: &mut AgentSession,
    extensions: &Extensions,
    reason: &str,
    start: Value,
    discover_reason: &str,
) {
    session.refresh_extension_state();
    extensions.reinitialize(reason).await;
    crate::extension_hooks::notify(extensions, start).await;
    crate::extension_hooks::resources_discover(
        extensions,
        session.workspace().cwd(),
        discover_reason,
    )
    .await
    .join(session);
}
