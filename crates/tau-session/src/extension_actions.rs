//! The extension actions that touch only the session's record and output (`appendEntry`,
//! `setLabel`, `setSessionName`, `sendMessage` without a new turn), carried out where their
//! frame arrives instead of in the RPC input loop (issue 21, docs/extensions.md §4).
//!
//! Why: pi runs these synchronously inside the extension's handler, so what they write comes
//! out before whatever the handler does next (`ctx.ui.notify`, `ctx.ui.setStatus`) and before
//! the run goes on. Queued for an input loop that may be busy, they came out after. Everything
//! here needs only the conversation (its lock) and the event sink, which the extension
//! process's reader task can reach; actions that need the rest of the session (a new turn, the
//! model, the session file) still go to the loop.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde_json::{Value, json};
use tau_protocol::extension::{ActionFrame, ExtensionAction};
use tau_protocol::{AgentEvent, AgentMessage, SessionEvent};

use crate::EventSink;
use crate::conversation::{Conversation, Queued};
use crate::error::SessionError;

/// Carries out the session-only actions for the extensions' reader tasks.
pub(crate) struct ImmediateActions {
    pub conversation: Arc<Conversation>,
    pub events: EventSink,
}

impl tau_extensions::ActionApplier for ImmediateActions {
    fn apply<'a>(&'a self, frame: &'a ActionFrame) -> BoxFuture<'a, Option<Result<Value, String>>> {
        Box::pin(async move {
            // A frame that does not parse is refused by the loop with the same error.
            let action = frame.parse().ok()?;
            self.carry_out(&action).await
        })
    }
}

impl ImmediateActions {
    /// Carries out `action` when it needs only the record and the output; `None` otherwise.
    pub(crate) async fn carry_out(
        &self,
        action: &ExtensionAction,
    ) -> Option<Result<Value, String>> {
        Some(match action {
            ExtensionAction::AppendEntry {
                custom_type,
                data,
                entry_id,
            } => append_custom_entry(
                &self.conversation,
                custom_type,
                data.clone(),
                entry_id.as_deref(),
            )
            .map(|id| json!({ "id": id }))
            .map_err(|e| e.to_string()),
            ExtensionAction::SetLabel { entry_id, label } => {
                set_label(&self.conversation, entry_id, label.as_deref())
                    .map(|()| Value::Null)
                    .map_err(|e| e.to_string())
            }
            ExtensionAction::SetSessionName { name } => {
                set_session_name(&self.conversation, &self.events, name)
                    .await
                    .map(|()| Value::Null)
                    .map_err(|e| e.to_string())
            }
            ExtensionAction::SendMessage {
                message,
                trigger_turn,
                deliver_as,
            } => {
                return self
                    .send_message(message, *trigger_turn, deliver_as.as_deref())
                    .await;
            }
            _ => return None,
        })
    }

    /// `sendMessage` while a run streams (queued for it) or, without `triggerTurn`, while
    /// none does (recorded at once); a new turn and `nextTurn` need the session.
    async fn send_message(
        &self,
        message: &Value,
        trigger_turn: bool,
        deliver_as: Option<&str>,
    ) -> Option<Result<Value, String>> {
        let message = match crate::extension_hooks::custom_message(message) {
            Ok(message) => message,
            Err(err) => return Some(Err(format!("send_message: malformed message: {err}"))),
        };
        if deliver_as == Some("nextTurn") {
            return None;
        }
        let message = AgentMessage::Custom(message);
        if self.conversation.is_streaming() {
            queue_for_run(&self.conversation, message, deliver_as);
            return Some(Ok(Value::Null));
        }
        if trigger_turn {
            return None;
        }
        record_custom_message(&self.conversation, &self.events, message).await;
        Some(Ok(Value::Null))
    }
}

/// An extension's `appendEntry`: a `custom` entry at the leaf (never LLM context), under the
/// id the extension host chose when it is free. Returns its id.
fn append_custom_entry(
    conversation: &Conversation,
    custom_type: &str,
    data: Option<Value>,
    proposed_id: Option<&str>,
) -> Result<String, SessionError> {
    conversation
        .store()
        .append_custom_as(custom_type, data, proposed_id)
        .map_err(|err| SessionError::Store(err.to_string()))
}

/// An extension's `setLabel`: labels an entry (`None` clears).
fn set_label(
    conversation: &Conversation,
    entry_id: &str,
    label: Option<&str>,
) -> Result<(), SessionError> {
    conversation
        .store()
        .append_label(entry_id, label)
        .map(|_| ())
        .map_err(|err| SessionError::Store(err.to_string()))
}

/// Names the session (`set_session_name`, `pi.setSessionName`) and says so.
pub(crate) async fn set_session_name(
    conversation: &Conversation,
    events: &EventSink,
    name: &str,
) -> Result<(), SessionError> {
    let name = name.trim();
    if name.is_empty() {
        return Err(SessionError::EmptySessionName);
    }
    conversation.persist(|store| store.append_session_info(name));
    events
        .emit(SessionEvent::SessionInfoChanged {
            name: Some(name.to_string()),
        })
        .await;
    Ok(())
}

/// A custom message for the running run: steering unless it asked to follow up.
pub(crate) fn queue_for_run(
    conversation: &Conversation,
    message: AgentMessage,
    deliver_as: Option<&str>,
) {
    let queued = Queued {
        text: None,
        message,
    };
    let mut state = conversation.lock();
    if deliver_as == Some("followUp") {
        state.follow_up.push_back(queued);
    } else {
        state.steering.push_back(queued);
    }
}

/// A custom message recorded while no run streams: in the context, the file, and on the
/// wire as its `message_start`/`message_end`.
pub(crate) async fn record_custom_message(
    conversation: &Conversation,
    events: &EventSink,
    message: AgentMessage,
) {
    conversation.lock().messages.push(Arc::new(message.clone()));
    conversation.persist(|store| store.append_message(message.clone()));
    for event in [
        AgentEvent::MessageStart {
            message: message.clone(),
        },
        AgentEvent::MessageEnd { message },
    ] {
        events.emit(SessionEvent::Agent(event)).await;
    }
}
