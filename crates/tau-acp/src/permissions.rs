//! Permissions in ACP (decision T123): the core's modes offered as the session's modes
//! (`modes` in `session/new` and `session/load`, `session/set_mode`, `current_mode_update`),
//! and each `permission_request` the core makes turned into a `session/request_permission`
//! on the tool call it is about, its answer handed back to the core. A request the core
//! withdraws (the run was aborted) is withdrawn on the wire too. The requests wait beside the
//! server's loop, which keeps serving the session meanwhile.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    PermissionOption, PermissionOptionKind, RequestPermissionOutcome, RequestPermissionRequest,
    SessionMode, SessionModeState, ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields, ToolKind,
};
use serde_json::Value;
use tau_protocol::{PermissionMode, PermissionOutcome};
use tau_session::permissions::Permissions;
use tokio::task::AbortHandle;

/// The modes as an editor shows them, the session's current one selected.
pub fn modes(current: PermissionMode) -> SessionModeState {
    let available = PermissionMode::ALL
        .into_iter()
        .map(|mode| {
            let (name, description) = match mode {
                PermissionMode::Ask => (
                    "Ask",
                    "Ask before editing files, running commands or using other tools",
                ),
                PermissionMode::AcceptEdits => (
                    "Accept edits",
                    "Edit files without asking; ask before commands and other tools",
                ),
                PermissionMode::Plan => (
                    "Plan",
                    "Read-only: read and search, change nothing, run no commands",
                ),
                PermissionMode::AllowAll => ("Allow all", "Run every tool without asking"),
            };
            SessionMode::new(mode.as_str(), name).description(description.to_string())
        })
        .collect();
    SessionModeState::new(current.as_str(), available)
}

/// What a `permission_request` asks about.
pub struct Asked {
    pub id: String,
    pub tool_call_id: String,
    pub args: Value,
    pub kind: tau_protocol::ToolKind,
    pub title: String,
    pub rule: String,
}

/// The permission requests open on the wire, by the core's request id: their session and
/// their task.
#[derive(Default)]
pub struct Prompts {
    open: Mutex<HashMap<String, (String, AbortHandle)>>,
}

impl Prompts {
    /// Asks the client about `asked` on `session`; the answer goes to `permissions`.
    pub fn ask(
        self: &Arc<Self>,
        cx: &ConnectionTo<Client>,
        session: &str,
        permissions: Arc<Permissions>,
        asked: Asked,
    ) {
        let options = vec![
            PermissionOption::new("allow", "Allow", PermissionOptionKind::AllowOnce),
            PermissionOption::new(
                "always",
                format!("Always allow {} in this session", asked.rule),
                PermissionOptionKind::AllowAlways,
            ),
            PermissionOption::new(
                "remember",
                format!("Always allow {} (saved in settings)", asked.rule),
                PermissionOptionKind::AllowAlways,
            ),
            PermissionOption::new("reject", "Reject", PermissionOptionKind::RejectOnce),
        ];
        let request = RequestPermissionRequest::new(
            session.to_string(),
            ToolCallUpdate::new(
                asked.tool_call_id.clone(),
                ToolCallUpdateFields::new()
                    .title(asked.title)
                    .kind(kind_of(asked.kind))
                    .status(ToolCallStatus::Pending)
                    .raw_input(asked.args),
            ),
            options,
        );
        let id = asked.id;
        // Held while the task is made and recorded, so a fast answer finds it recorded.
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let task = {
            let cx = cx.clone();
            let prompts = Arc::clone(self);
            let id = id.clone();
            tokio::spawn(async move {
                let outcome = cx.send_request(request).block_task().await;
                prompts
                    .open
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&id);
                let (outcome, remember) = match outcome {
                    Ok(response) => match response.outcome {
                        RequestPermissionOutcome::Selected(selected) => {
                            match &*selected.option_id.0 {
                                "allow" => (PermissionOutcome::Allow, false),
                                "always" => (PermissionOutcome::AllowAlways, false),
                                "remember" => (PermissionOutcome::AllowAlways, true),
                                _ => (PermissionOutcome::Reject, false),
                            }
                        }
                        // The client cancelled the request: nothing was allowed.
                        _ => (PermissionOutcome::Reject, false),
                    },
                    Err(err) => {
                        tracing::warn!("session/request_permission failed: {err}");
                        (PermissionOutcome::Reject, false)
                    }
                };
                permissions.answer(&id, outcome, remember);
            })
        };
        open.insert(id, (session.to_string(), task.abort_handle()));
    }

    /// `session/cancel`: the session's requests are withdrawn on the wire at once (the core
    /// withdraws its side as the aborted run ends).
    pub fn cancel_session(&self, session: &str) {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        open.retain(|_, (owner, task)| {
            let keep = owner != session;
            if !keep {
                task.abort();
            }
            keep
        });
    }

    /// The core withdrew request `id`: the task ends, which cancels the request on the wire.
    pub fn withdraw(&self, id: &str) {
        if let Some(task) = self
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id)
        {
            task.1.abort();
        }
    }
}

fn kind_of(kind: tau_protocol::ToolKind) -> ToolKind {
    match kind {
        tau_protocol::ToolKind::Read => ToolKind::Read,
        tau_protocol::ToolKind::Edit => ToolKind::Edit,
        tau_protocol::ToolKind::Command => ToolKind::Execute,
        tau_protocol::ToolKind::Other => ToolKind::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mode_is_offered_with_the_current_one_selected() {
        let state = modes(PermissionMode::Plan);
        let value = serde_json::to_value(&state).unwrap();
        assert_eq!(value["currentModeId"], "plan");
        let ids: Vec<&str> = value["availableModes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["ask", "acceptEdits", "plan", "allowAll"]);
    }
}
