//! The server's records as the screen shows them: the run's events (messages streaming in,
//! tool calls, retries, compaction, the save status) become blocks and notices, and a session's
//! history (`get_messages`) is shown the same way.

use serde_json::{Map, Value};
use tau_protocol::rpc::{
    AgentEvent, AgentMessage, AssistantContent, AssistantMessageEvent, OutboundRecord,
    SessionEvent, StopReason,
};
use tau_protocol::{AgentToolResult, SessionSaveState};

use super::App;
use crate::text::{assistant_text, content_text, shown_content, shown_user_content};
use crate::transcript::{BlockKind, NoticeKind, ToolStatus};

/// A record of the server as the App takes it; `None` for one that is not the protocol's.
/// Such a record is skipped rather than ending the session: the screen loses at most what that
/// one record would have shown.
pub fn decode(record: Value) -> Option<OutboundRecord> {
    OutboundRecord::from_value(record).ok()
}

impl App {
    /// Takes one record of the server other than the joined deltas (see [`decode`]).
    pub fn on_record(&mut self, record: OutboundRecord) {
        self.dirty = true;
        match record {
            OutboundRecord::Response(response) => self.on_response(response),
            OutboundRecord::ExtensionUiRequest(request) => self.on_ui_request(request),
            OutboundRecord::Event(event) => self.on_event(*event),
            _ => self.dirty = false,
        }
    }

    fn on_event(&mut self, event: SessionEvent) {
        match event {
            SessionEvent::Agent(event) => self.on_agent_event(event),
            // The run's last record (T28): until then (retries, compaction, the extensions'
            // post-run work) Enter steers the run rather than starting another.
            SessionEvent::AgentSettled { .. } => {
                self.streaming = false;
                self.refresh_footer();
                // A run's handlers may have registered commands or keys.
                self.refresh_registrations();
            }
            SessionEvent::QueueUpdate {
                steering,
                follow_up,
            } => {
                self.queued_steering = steering;
                self.queued_follow_up = follow_up;
            }
            SessionEvent::AutoRetryStart {
                attempt,
                max_attempts,
                delay_ms,
                error_message,
            } => {
                let seconds = delay_ms as f64 / 1000.0;
                self.notice(
                    format!(
                        "Retrying ({attempt}/{max_attempts}) in {seconds:.0}s: {error_message}"
                    ),
                    NoticeKind::Warning,
                );
            }
            SessionEvent::AutoRetryEnd {
                success: false,
                final_error,
                ..
            } => {
                self.notice(
                    format!("Retry failed: {}", final_error.unwrap_or_default()),
                    NoticeKind::Error,
                );
            }
            SessionEvent::CompactionStart { .. } => {
                self.compacting = true;
                self.notice("Compacting the conversation…", NoticeKind::Info);
            }
            SessionEvent::CompactionEnd {
                result,
                aborted,
                error_message,
                ..
            } => {
                self.compacting = false;
                if aborted {
                    self.notice("Compaction aborted", NoticeKind::Warning);
                } else if let Some(error) = error_message {
                    self.notice(format!("Compaction failed: {error}"), NoticeKind::Error);
                } else {
                    let tokens = result.map_or(0, |r| r.tokens_before);
                    self.notice(
                        format!("── Compacted ({tokens} tokens summarised) ──"),
                        NoticeKind::Info,
                    );
                }
                self.refresh_footer();
            }
            SessionEvent::ExtensionError {
                extension_path,
                error,
                ..
            } => {
                self.notice(
                    format!("Extension error ({extension_path}): {error}"),
                    NoticeKind::Error,
                );
            }
            // The conversation goes on in memory; the user must know it is not kept.
            SessionEvent::SessionSaveStatus {
                state: SessionSaveState::Failing,
                error,
                unsaved,
                ..
            } => self.notice(
                format!(
                    "The session cannot be saved ({}): {} entries wait and are written as soon as the disk accepts them",
                    error.unwrap_or_default(),
                    unsaved.unwrap_or(0)
                ),
                NoticeKind::Error,
            ),
            SessionEvent::SessionSaveStatus { .. } => {
                self.notice("The session is saved again", NoticeKind::Info)
            }
            SessionEvent::SessionInfoChanged { .. }
            | SessionEvent::ThinkingLevelChanged { .. }
            | SessionEvent::PermissionModeChanged { .. } => self.refresh_footer(),
            SessionEvent::PermissionRequest {
                id, title, rule, ..
            } => self.open_permission(id, title, rule),
            SessionEvent::PermissionWithdrawn { id } => self.close_permission(&id),
            // A server that is (again) ready may list other resources.
            SessionEvent::McpServerStatus {
                state: tau_protocol::McpServerState::Ready,
                ..
            } => self.refresh_resources(),
            _ => self.dirty = false,
        }
    }

    fn on_agent_event(&mut self, event: AgentEvent) {
        match event {
            AgentEvent::AgentStart => {
                self.streaming = true;
            }
            AgentEvent::AgentEnd { .. } => {
                self.current_assistant = None;
                self.refresh_footer();
            }
            AgentEvent::MessageStart { message } => self.on_message_start(&message),
            AgentEvent::MessageUpdate {
                assistant_message_event,
                ..
            } => self.on_message_update(&assistant_message_event),
            AgentEvent::MessageEnd { message } => self.on_message_end(&message),
            AgentEvent::ToolExecutionStart {
                tool_call_id,
                tool_name,
                args,
                ..
            } => {
                self.transcript.push(BlockKind::Tool {
                    id: tool_call_id,
                    name: tool_name,
                    args,
                    output: String::new(),
                    diff: None,
                    status: ToolStatus::Running,
                });
            }
            AgentEvent::ToolExecutionUpdate {
                tool_call_id,
                partial_result,
                ..
            } => {
                if let Some(block) = self.transcript.tool_mut(&tool_call_id)
                    && let BlockKind::Tool { output, .. } = &mut block.kind
                {
                    *output = shown_content(&partial_result.content);
                    block.touch();
                }
            }
            AgentEvent::ToolExecutionEnd {
                tool_call_id,
                result,
                is_error,
                ..
            } => {
                if let Some(block) = self.transcript.tool_mut(&tool_call_id)
                    && let BlockKind::Tool {
                        output,
                        diff,
                        status,
                        ..
                    } = &mut block.kind
                {
                    *output = shown_content(&result.content);
                    *diff = diff_of(&result);
                    *status = if is_error {
                        ToolStatus::Failed
                    } else {
                        ToolStatus::Done
                    };
                    block.touch();
                }
            }
            _ => self.dirty = false,
        }
    }

    fn on_message_start(&mut self, message: &AgentMessage) {
        match message {
            AgentMessage::User(message) => {
                let text = shown_user_content(&message.content);
                self.transcript.push(BlockKind::User { text });
            }
            AgentMessage::Assistant(_) => {
                let index = self.transcript.push(BlockKind::Assistant {
                    text: String::new(),
                    thinking: String::new(),
                    error: None,
                });
                self.current_assistant = Some(index);
            }
            AgentMessage::Custom(message) if message.display => {
                self.transcript
                    .notice(content_text(&message.content), NoticeKind::Info);
            }
            AgentMessage::BashExecution(message) => {
                // Shown as the tool block a `bash` call gets, named `!` as it was typed.
                let args = Map::from_iter([(
                    "command".to_string(),
                    Value::String(message.command.clone()),
                )]);
                self.transcript.push(BlockKind::Tool {
                    id: String::new(),
                    name: "!".into(),
                    args: Value::Object(args),
                    output: message.output.clone(),
                    diff: None,
                    status: ToolStatus::Done,
                });
            }
            _ => {}
        }
    }

    fn on_message_update(&mut self, event: &AssistantMessageEvent) {
        match event {
            AssistantMessageEvent::TextDelta { delta, .. } => self.on_delta(false, delta),
            AssistantMessageEvent::ThinkingDelta { delta, .. } => self.on_delta(true, delta),
            _ => {}
        }
    }

    /// Text (or thinking) streamed into the reply being written.
    pub fn on_delta(&mut self, is_thinking: bool, delta: &str) {
        let Some(index) = self.current_assistant else {
            return;
        };
        let Some(block) = self.transcript.blocks.get_mut(index) else {
            return;
        };
        let BlockKind::Assistant { text, thinking, .. } = &mut block.kind else {
            return;
        };
        if is_thinking {
            thinking.push_str(delta);
        } else {
            text.push_str(delta);
        }
        block.touch();
        self.dirty = true;
    }

    fn on_message_end(&mut self, message: &AgentMessage) {
        let AgentMessage::Assistant(message) = message else {
            return;
        };
        let Some(index) = self.current_assistant.take() else {
            return;
        };
        let Some(block) = self.transcript.blocks.get_mut(index) else {
            return;
        };
        if let BlockKind::Assistant {
            text,
            thinking,
            error,
        } = &mut block.kind
        {
            // The whole message replaces what the deltas built: it is what the session keeps.
            *text = assistant_text(&message.content);
            *thinking = message
                .content
                .iter()
                .filter_map(|block| match block {
                    AssistantContent::Thinking(t) => Some(t.thinking.as_str()),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join("\n");
            *error = match message.stop_reason {
                StopReason::Aborted => Some("aborted".into()),
                StopReason::Error => Some(
                    message
                        .error_message
                        .clone()
                        .unwrap_or_else(|| "the request failed".into()),
                ),
                _ => None,
            };
            block.touch();
        }
        // An answer with nothing to show (only tool calls) takes no room.
        if let Some(BlockKind::Assistant {
            text,
            thinking,
            error,
        }) = self.transcript.blocks.get(index).map(|b| &b.kind)
            && text.is_empty()
            && thinking.is_empty()
            && error.is_none()
        {
            self.transcript.blocks.remove(index);
        }
    }

    /// A session's history, shown after `/resume` or at start.
    pub fn show_messages(&mut self, messages: &[AgentMessage]) {
        for message in messages {
            match message {
                AgentMessage::User(user) => {
                    self.transcript.push(BlockKind::User {
                        text: shown_user_content(&user.content),
                    });
                }
                AgentMessage::Assistant(assistant) => {
                    self.on_message_start(message);
                    self.on_message_end(message);
                    for block in &assistant.content {
                        let AssistantContent::ToolCall(call) = block else {
                            continue;
                        };
                        self.transcript.push(BlockKind::Tool {
                            id: call.id.clone(),
                            name: call.name.clone(),
                            args: Value::Object(call.arguments.clone()),
                            output: String::new(),
                            diff: None,
                            status: ToolStatus::Done,
                        });
                    }
                }
                AgentMessage::ToolResult(result) => {
                    if let Some(block) = self.transcript.tool_mut(&result.tool_call_id)
                        && let BlockKind::Tool {
                            output,
                            diff,
                            status,
                            ..
                        } = &mut block.kind
                    {
                        *output = shown_content(&result.content);
                        *diff = result.details.as_ref().and_then(diff_in);
                        if result.is_error {
                            *status = ToolStatus::Failed;
                        }
                        block.touch();
                    }
                }
                AgentMessage::CompactionSummary(_) => {
                    self.transcript.notice("── Compacted ──", NoticeKind::Info)
                }
                _ => {}
            }
        }
        self.dirty = true;
    }
}

/// The diff an edit tool reports in its result's `details` (free-form JSON: each tool
/// chooses its own).
fn diff_of(result: &AgentToolResult) -> Option<String> {
    result.details.as_ref().and_then(diff_in)
}

fn diff_in(details: &Value) -> Option<String> {
    details
        .get("diff")
        .and_then(Value::as_str)
        .map(str::to_string)
}
