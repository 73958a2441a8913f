//! Extension dialogs in ACP: a `confirm` or `select` becomes a `session/request_permission`
//! on the session whose extensions asked (each session has its own; decision T103), shown as
//! a tool call of its own, and its
//! answer goes back to the extension; `input` and `editor`, which ACP has no request for, are
//! answered `cancelled` at once. Everything else extensions write for RPC clients
//! (notifications, status, widgets) is dropped. This runs beside the server's loop, since the
//! loop may itself be waiting on the handler that opened the dialog; a `session/cancel`
//! withdraws the session's open requests and answers their dialogs `cancelled`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    ContentBlock, PermissionOption, PermissionOptionKind, RequestPermissionOutcome,
    RequestPermissionRequest, SessionNotification, SessionUpdate, ToolCall, ToolCallContent,
    ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields, ToolKind,
};
use tau_protocol::rpc::{ExtensionUiRequest, ExtensionUiResponse, OutboundRecord, UiMethod};
use tau_session::Outbound;
use tokio::sync::mpsc;
use tokio::task::AbortHandle;

/// What the dialog tasks and the connection's `session/cancel` handler share.
#[derive(Default)]
pub struct Dialogs {
    /// Each session's extensions, once they are bound to it.
    sets: Mutex<HashMap<String, Arc<tau_extensions::Extensions>>>,
    /// Open permission requests by dialog id: their session and their task.
    open: Mutex<HashMap<String, (String, AbortHandle)>>,
    /// Sessions a `session/cancel` came for, until the server's loop has seen it: a prompt
    /// still in the input path (an `input` handler's dialog) ends `cancelled`.
    cancelled: Mutex<std::collections::HashSet<String>>,
}

impl Dialogs {
    /// Notes the extensions bound to `session`, whose dialogs a `session/cancel` withdraws.
    pub fn bind(&self, session: &str, extensions: Arc<tau_extensions::Extensions>) {
        self.sets
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(session.to_string(), extensions);
    }

    /// Notes a `session/cancel` for `session`.
    pub fn mark_cancelled(&self, session: &str) {
        self.cancelled
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(session.to_string());
    }

    /// Whether a `session/cancel` came for `session` since the last call.
    pub fn take_cancelled(&self, session: &str) -> bool {
        self.cancelled
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(session)
    }

    /// Withdraws the session's open requests (their tasks end, which cancels the request on
    /// the wire) and answers their dialogs `cancelled`.
    pub fn cancel_session(&self, session: &str) {
        let Some(extensions) = self
            .sets
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(session)
            .cloned()
        else {
            return;
        };
        let withdrawn: Vec<(String, AbortHandle)> = {
            let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
            let ids: Vec<String> = open
                .iter()
                .filter(|(_, (owner, _))| owner == session)
                .map(|(id, _)| id.clone())
                .collect();
            ids.into_iter()
                .filter_map(|id| open.remove(&id).map(|(_, task)| (id, task)))
                .collect()
        };
        for (id, task) in withdrawn {
            task.abort();
            extensions.resolve_ui(&cancelled(&id));
        }
    }
}

fn cancelled(id: &str) -> ExtensionUiResponse {
    ExtensionUiResponse {
        id: id.to_string(),
        value: None,
        confirmed: None,
        cancelled: Some(true),
        timed_out: None,
    }
}

/// Reads what `session`'s extensions write until every writer is gone.
pub async fn serve(
    mut records: mpsc::Receiver<Outbound>,
    cx: ConnectionTo<Client>,
    extensions: Arc<tau_extensions::Extensions>,
    dialogs: Arc<Dialogs>,
    session: String,
) {
    while let Some(outbound) = records.recv().await {
        let Outbound::Record(record) = outbound else {
            continue;
        };
        let OutboundRecord::ExtensionUiRequest(request) = *record else {
            continue;
        };
        open(request, &cx, &extensions, &dialogs, &session);
    }
}

fn open(
    request: ExtensionUiRequest,
    cx: &ConnectionTo<Client>,
    extensions: &Arc<tau_extensions::Extensions>,
    dialogs: &Arc<Dialogs>,
    session: &str,
) {
    let (title, message, options, choices) = match request.method {
        UiMethod::Confirm { title, message, .. } => (
            title,
            Some(message),
            vec![
                PermissionOption::new("yes", "Yes", PermissionOptionKind::AllowOnce),
                PermissionOption::new("no", "No", PermissionOptionKind::RejectOnce),
            ],
            None,
        ),
        UiMethod::Select { title, options, .. } => (
            title,
            None,
            options
                .iter()
                .enumerate()
                .map(|(i, option)| {
                    PermissionOption::new(
                        i.to_string(),
                        option.clone(),
                        PermissionOptionKind::AllowOnce,
                    )
                })
                .collect(),
            Some(options),
        ),
        UiMethod::Input { .. } | UiMethod::Editor { .. } => {
            extensions.resolve_ui(&cancelled(&request.id));
            return;
        }
        _ => return,
    };
    let session = session.to_string();
    let call_id = format!("dialog-{}", request.id);
    let content: Vec<ToolCallContent> = message
        .iter()
        .map(|m| ToolCallContent::from(ContentBlock::from(m.clone())))
        .collect();
    // Shown in the thread as a call of its own, then asked about.
    let shown = ToolCall::new(call_id.clone(), title.clone())
        .kind(ToolKind::Other)
        .status(ToolCallStatus::Pending)
        .content(content.clone());
    let _ = cx.send_notification(SessionNotification::new(
        session.clone(),
        SessionUpdate::ToolCall(shown),
    ));
    let asked = RequestPermissionRequest::new(
        session.clone(),
        ToolCallUpdate::new(
            call_id.clone(),
            ToolCallUpdateFields::new()
                .title(title)
                .kind(ToolKind::Other)
                .status(ToolCallStatus::Pending)
                .content(content),
        ),
        options,
    );
    let id = request.id;
    // Held while the task is made and recorded, so a fast answer finds it recorded.
    let mut open = dialogs.open.lock().unwrap_or_else(PoisonError::into_inner);
    let task = {
        let cx = cx.clone();
        let extensions = Arc::clone(extensions);
        let dialogs = Arc::clone(dialogs);
        let id = id.clone();
        let session = session.clone();
        tokio::spawn(async move {
            let outcome = cx.send_request(asked).block_task().await;
            // Answered: no longer withdrawable.
            let still_open = dialogs
                .open
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&id)
                .is_some();
            if !still_open {
                return;
            }
            let selected = match outcome {
                Ok(response) => match response.outcome {
                    RequestPermissionOutcome::Selected(selected) => {
                        Some(selected.option_id.0.to_string())
                    }
                    _ => None,
                },
                Err(err) => {
                    tracing::warn!("session/request_permission failed: {err}");
                    None
                }
            };
            let response = match (selected, &choices) {
                (None, _) => cancelled(&id),
                (Some(option), None) => ExtensionUiResponse {
                    id: id.clone(),
                    value: None,
                    confirmed: Some(option == "yes"),
                    cancelled: None,
                    timed_out: None,
                },
                (Some(option), Some(choices)) => {
                    match option.parse::<usize>().ok().and_then(|i| choices.get(i)) {
                        Some(value) => ExtensionUiResponse {
                            id: id.clone(),
                            value: Some(value.clone()),
                            confirmed: None,
                            cancelled: None,
                            timed_out: None,
                        },
                        None => cancelled(&id),
                    }
                }
            };
            let status = if response.cancelled == Some(true) {
                ToolCallStatus::Failed
            } else {
                ToolCallStatus::Completed
            };
            extensions.resolve_ui(&response);
            let _ = cx.send_notification(SessionNotification::new(
                session,
                SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                    call_id,
                    ToolCallUpdateFields::new().status(status),
                )),
            ));
        })
    };
    open.insert(id, (session, task.abort_handle()));
}
