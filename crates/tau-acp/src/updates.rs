//! The session's events as `session/update` notifications: text and thinking deltas as
//! message and thought chunks, tool calls with their kind, title, locations, raw input and
//! output and content (an `edit` or `write` as diffs, a `bash` command's output as it comes),
//! the todo list as a plan, usage. The same mapping replays a loaded session's history.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, Diff, Plan, PlanEntry, PlanEntryPriority, PlanEntryStatus,
    SessionInfoUpdate, SessionUpdate, ToolCall as AcpToolCall, ToolCallContent, ToolCallLocation,
    ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields, ToolKind, UsageUpdate,
};
use serde_json::{Map, Value};
use tau_protocol::{
    AgentEvent, AgentMessage, AgentToolResult, AssistantContent, AssistantMessageEvent,
    SessionEvent, StopReason, TodoPhase, TodoStatus, ToolCall, UserContentBlock,
};

/// How the last reply of a run ended, for the prompt's `stopReason`.
#[derive(Debug, Clone, Default)]
pub struct LastReply {
    pub stop_reason: Option<StopReason>,
    pub error: Option<String>,
}

/// Per-session state of the translation: the tool calls announced so far.
#[derive(Debug)]
pub struct Translator {
    cwd: PathBuf,
    calls: HashMap<String, Announced>,
    pub last_reply: LastReply,
}

#[derive(Debug, Clone)]
struct Announced {
    name: String,
    path: Option<PathBuf>,
}

/// What the translation needs from the session besides the event.
pub struct Context<'a> {
    /// The todo list after a `todo_write`.
    pub todos: &'a dyn Fn() -> Vec<TodoPhase>,
    /// The model's context window, for usage.
    pub context_window: Option<u64>,
}

impl Translator {
    pub fn new(cwd: PathBuf) -> Self {
        Self {
            cwd,
            calls: HashMap::new(),
            last_reply: LastReply::default(),
        }
    }

    /// The updates one event makes (often none).
    pub fn event(&mut self, event: &SessionEvent, context: &Context<'_>) -> Vec<SessionUpdate> {
        let event = match event {
            SessionEvent::Agent(event) => event,
            // The session's name is its title in the client's list.
            SessionEvent::SessionInfoChanged { name } => {
                return vec![SessionUpdate::SessionInfoUpdate(
                    SessionInfoUpdate::new().title(name.clone()),
                )];
            }
            // ACP has no update for it: a thought is shown beside the answer without joining
            // its text (decision T119).
            SessionEvent::SessionSaveStatus {
                state,
                error,
                unsaved,
                ..
            } => {
                let text = match state {
                    tau_protocol::SessionSaveState::Failing => format!(
                        "\n[tau] The session cannot be saved ({}); {} entries wait and are written as soon as the disk accepts them.\n",
                        error.as_deref().unwrap_or("unknown error"),
                        unsaved.unwrap_or(0)
                    ),
                    tau_protocol::SessionSaveState::Saved => {
                        "\n[tau] The session is saved again.\n".to_string()
                    }
                };
                return vec![SessionUpdate::AgentThoughtChunk(chunk(&text))];
            }
            _ => return Vec::new(),
        };
        match event {
            AgentEvent::AgentStart => {
                // A run's calls end within it: what the last run announced is done with.
                self.calls.clear();
                self.last_reply = LastReply::default();
                Vec::new()
            }
            AgentEvent::MessageUpdate {
                assistant_message_event,
                ..
            } => match assistant_message_event.as_ref() {
                AssistantMessageEvent::TextDelta { delta, .. } => {
                    vec![SessionUpdate::AgentMessageChunk(chunk(delta))]
                }
                AssistantMessageEvent::ThinkingDelta { delta, .. } => {
                    vec![SessionUpdate::AgentThoughtChunk(chunk(delta))]
                }
                AssistantMessageEvent::ToolCallEnd { tool_call, .. } => {
                    vec![self.announce(tool_call, ToolCallStatus::Pending)]
                }
                _ => Vec::new(),
            },
            AgentEvent::MessageEnd {
                message: AgentMessage::Assistant(reply),
            } => {
                self.last_reply = LastReply {
                    stop_reason: Some(reply.stop_reason),
                    error: reply.error_message.clone(),
                };
                let usage = &reply.usage;
                let used = usage.input + usage.output + usage.cache_read + usage.cache_write;
                match context.context_window {
                    Some(size) if used > 0 => {
                        vec![SessionUpdate::UsageUpdate(UsageUpdate::new(used, size))]
                    }
                    _ => Vec::new(),
                }
            }
            AgentEvent::ToolExecutionStart {
                tool_call_id,
                tool_name,
                args,
                ..
            } => {
                if self.calls.contains_key(tool_call_id) {
                    vec![status_update(tool_call_id, ToolCallStatus::InProgress)]
                } else {
                    let call = ToolCall {
                        id: tool_call_id.clone(),
                        name: tool_name.clone(),
                        arguments: args.as_object().cloned().unwrap_or_default(),
                        thought_signature: None,
                    };
                    vec![self.announce(&call, ToolCallStatus::InProgress)]
                }
            }
            AgentEvent::ToolExecutionUpdate {
                tool_call_id,
                partial_result,
                ..
            } => {
                // The diffs of `edit` and `write` stay what the call shows while it runs.
                if self.shows_diff(tool_call_id) {
                    return Vec::new();
                }
                let fields = ToolCallUpdateFields::new().content(result_content(partial_result));
                vec![SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                    tool_call_id.clone(),
                    fields,
                ))]
            }
            AgentEvent::ToolExecutionEnd {
                tool_call_id,
                tool_name,
                result,
                is_error,
                ..
            } => {
                let mut updates = vec![self.finish(tool_call_id, result, *is_error)];
                if tool_name == "todo_write" && !is_error {
                    updates.push(SessionUpdate::Plan(plan(&(context.todos)())));
                }
                updates
            }
            _ => Vec::new(),
        }
    }

    /// The history of a loaded session, as the updates it would have made live.
    pub fn replay(&mut self, messages: &[std::sync::Arc<AgentMessage>]) -> Vec<SessionUpdate> {
        let mut updates = Vec::new();
        for message in messages {
            match message.as_ref() {
                AgentMessage::User(user) => {
                    let text = user.content.text("\n");
                    if !text.is_empty() {
                        updates.push(SessionUpdate::UserMessageChunk(chunk(&text)));
                    }
                    for image in user.content.images() {
                        updates.push(SessionUpdate::UserMessageChunk(ContentChunk::new(
                            ContentBlock::Image(
                                agent_client_protocol::v1::schema::ImageContent::new(
                                    image.data,
                                    image.mime_type,
                                ),
                            ),
                        )));
                    }
                }
                AgentMessage::Assistant(reply) => {
                    for content in &reply.content {
                        match content {
                            AssistantContent::Text(text) if !text.text.is_empty() => {
                                updates.push(SessionUpdate::AgentMessageChunk(chunk(&text.text)))
                            }
                            AssistantContent::Thinking(thinking)
                                if !thinking.thinking.is_empty() =>
                            {
                                updates.push(SessionUpdate::AgentThoughtChunk(chunk(
                                    &thinking.thinking,
                                )));
                            }
                            AssistantContent::ToolCall(call) => {
                                updates.push(self.announce(call, ToolCallStatus::Pending));
                            }
                            _ => {}
                        }
                    }
                }
                AgentMessage::ToolResult(result) => {
                    let result_value = AgentToolResult {
                        extra: Default::default(),
                        content: result.content.clone(),
                        details: result.details.clone(),
                        terminate: None,
                    };
                    updates.push(self.finish(&result.tool_call_id, &result_value, result.is_error));
                }
                AgentMessage::BashExecution(_)
                | AgentMessage::Custom(_)
                | AgentMessage::CompactionSummary(_)
                | AgentMessage::BranchSummary(_) => {}
            }
        }
        updates
    }

    fn shows_diff(&self, id: &str) -> bool {
        self.calls
            .get(id)
            .is_some_and(|call| matches!(call.name.as_str(), "edit" | "write"))
    }

    /// A `tool_call` for a call the model made.
    fn announce(&mut self, call: &ToolCall, status: ToolCallStatus) -> SessionUpdate {
        let described = describe(&call.name, &call.arguments, &self.cwd);
        self.calls.insert(
            call.id.clone(),
            Announced {
                name: call.name.clone(),
                path: described.path.clone(),
            },
        );
        let locations = described
            .path
            .iter()
            .map(|path| ToolCallLocation::new(path.clone()).line(described.line))
            .collect();
        SessionUpdate::ToolCall(
            AcpToolCall::new(call.id.clone(), described.title)
                .kind(described.kind)
                .status(status)
                .content(described.content)
                .locations(locations)
                .raw_input(Value::Object(call.arguments.clone())),
        )
    }

    /// The `tool_call_update` that ends a call.
    fn finish(&mut self, id: &str, result: &AgentToolResult, is_error: bool) -> SessionUpdate {
        let status = if is_error {
            ToolCallStatus::Failed
        } else {
            ToolCallStatus::Completed
        };
        let mut fields = ToolCallUpdateFields::new()
            .status(status)
            .raw_output(serde_json::to_value(result).unwrap_or(Value::Null));
        if is_error || !self.shows_diff(id) {
            fields = fields.content(result_content(result));
        }
        let first_line = result
            .details
            .as_ref()
            .and_then(|d| d.get("firstChangedLine"))
            .and_then(Value::as_u64)
            .and_then(|line| u32::try_from(line).ok());
        if let (Some(line), Some(path)) = (
            first_line,
            self.calls.get(id).and_then(|call| call.path.clone()),
        ) {
            fields = fields.locations(vec![ToolCallLocation::new(path).line(line)]);
        }
        SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(id.to_string(), fields))
    }
}

fn chunk(text: &str) -> ContentChunk {
    ContentChunk::new(ContentBlock::from(text.to_string()))
}

fn status_update(id: &str, status: ToolCallStatus) -> SessionUpdate {
    SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
        id.to_string(),
        ToolCallUpdateFields::new().status(status),
    ))
}

/// A tool result's blocks as tool call content.
fn result_content(result: &AgentToolResult) -> Vec<ToolCallContent> {
    result
        .content
        .iter()
        .map(|block| match block {
            UserContentBlock::Text(text) => ContentBlock::from(text.text.clone()),
            UserContentBlock::Image(image) => {
                ContentBlock::Image(agent_client_protocol::v1::schema::ImageContent::new(
                    image.data.clone(),
                    image.mime_type.clone(),
                ))
            }
        })
        .map(ToolCallContent::from)
        .collect()
}

/// What a call shows before it runs.
struct Described {
    kind: ToolKind,
    title: String,
    path: Option<PathBuf>,
    line: Option<u32>,
    content: Vec<ToolCallContent>,
}

/// The kind, title, location and (for `edit` and `write`) the diffs of a built-in tool's
/// call; any other tool is shown by its name.
fn describe(name: &str, args: &Map<String, Value>, cwd: &Path) -> Described {
    let text = |key: &str| args.get(key).and_then(Value::as_str).unwrap_or_default();
    let path = args
        .get("path")
        .and_then(Value::as_str)
        .filter(|p| !p.is_empty())
        .map(|p| cwd.join(p));
    let shown = |path: &Option<PathBuf>| {
        path.as_ref()
            .map(|p| p.strip_prefix(cwd).unwrap_or(p).display().to_string())
            .unwrap_or_default()
    };
    let mut described = Described {
        kind: ToolKind::Other,
        title: name.to_string(),
        path: path.clone(),
        line: None,
        content: Vec::new(),
    };
    match name {
        "read" => {
            described.kind = ToolKind::Read;
            described.title = format!("Read {}", shown(&path));
            described.line = args
                .get("offset")
                .and_then(Value::as_u64)
                .and_then(|n| u32::try_from(n).ok());
        }
        "edit" => {
            described.kind = ToolKind::Edit;
            described.title = format!("Edit {}", shown(&path));
            let prepared = tau_tools::edit::prepare_arguments(args.clone());
            if let (Some(path), Some(Value::Array(edits))) = (&path, prepared.get("edits")) {
                described.content = edits
                    .iter()
                    .map(|edit| {
                        let part = |key: &str| {
                            edit.get(key)
                                .and_then(Value::as_str)
                                .unwrap_or_default()
                                .to_string()
                        };
                        ToolCallContent::Diff(
                            Diff::new(path.clone(), part("newText")).old_text(part("oldText")),
                        )
                    })
                    .collect();
            }
        }
        "write" => {
            described.kind = ToolKind::Edit;
            described.title = format!("Write {}", shown(&path));
            if let Some(path) = &path {
                described.content = vec![ToolCallContent::Diff(Diff::new(
                    path.clone(),
                    text("content").to_string(),
                ))];
            }
        }
        "bash" => {
            described.kind = ToolKind::Execute;
            let command = text("command");
            let first = command.lines().next().unwrap_or_default();
            described.title = if first.chars().count() > 80 || command.contains('\n') {
                format!("`{}…`", first.chars().take(80).collect::<String>())
            } else {
                format!("`{first}`")
            };
        }
        "grep" => {
            described.kind = ToolKind::Search;
            described.title = format!("grep {}", text("pattern"));
        }
        "find" => {
            described.kind = ToolKind::Search;
            described.title = format!("find {}", text("pattern"));
        }
        "ls" => {
            described.kind = ToolKind::Search;
            described.title = format!("List {}", shown(&path));
        }
        "todo_write" => {
            described.kind = ToolKind::Think;
            described.title = "Update the todo list".to_string();
        }
        _ => {}
    }
    described
}

/// The todo list as a plan: every task of every phase, in order; abandoned ones left out.
pub fn plan(phases: &[TodoPhase]) -> Plan {
    let entries = phases
        .iter()
        .flat_map(|phase| phase.tasks.iter())
        .filter_map(|task| {
            let status = match task.status {
                TodoStatus::Pending => PlanEntryStatus::Pending,
                TodoStatus::InProgress => PlanEntryStatus::InProgress,
                TodoStatus::Completed => PlanEntryStatus::Completed,
                TodoStatus::Abandoned => return None,
            };
            Some(PlanEntry::new(
                task.content.clone(),
                PlanEntryPriority::Medium,
                status,
            ))
        })
        .collect();
    Plan::new(entries)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn an_edit_shows_one_diff_per_replacement_at_its_absolute_path() {
        let d = describe(
            "edit",
            &args(json!({"path": "src/a.rs", "edits": [{"oldText": "x", "newText": "y"}]})),
            Path::new("/p"),
        );
        assert_eq!(d.kind, ToolKind::Edit);
        assert_eq!(d.title, "Edit src/a.rs");
        let wire = serde_json::to_value(&d.content).unwrap_or_default();
        assert_eq!(
            wire,
            json!([{"type": "diff", "path": "/p/src/a.rs", "oldText": "x", "newText": "y"}])
        );
    }

    #[test]
    fn a_session_file_that_cannot_be_saved_is_told_as_a_thought() {
        let mut translator = Translator::new(PathBuf::from("/p"));
        let todos = Vec::new;
        let context = Context {
            todos: &todos,
            context_window: None,
        };
        let failing = SessionEvent::SessionSaveStatus {
            state: tau_protocol::SessionSaveState::Failing,
            file: "/s.jsonl".into(),
            error: Some("No space left on device".into()),
            unsaved: Some(3),
        };
        let wire = serde_json::to_value(translator.event(&failing, &context)).unwrap_or_default();
        assert_eq!(wire[0]["sessionUpdate"], "agent_thought_chunk", "{wire}");
        let text = wire[0]["content"]["text"].as_str().unwrap_or_default();
        assert!(
            text.contains("cannot be saved (No space left on device); 3 entries"),
            "{text}"
        );
        let saved = SessionEvent::SessionSaveStatus {
            state: tau_protocol::SessionSaveState::Saved,
            file: "/s.jsonl".into(),
            error: None,
            unsaved: None,
        };
        let wire = serde_json::to_value(translator.event(&saved, &context)).unwrap_or_default();
        assert!(
            wire[0]["content"]["text"]
                .as_str()
                .is_some_and(|t| t.contains("saved again")),
            "{wire}"
        );
    }

    #[test]
    fn a_renamed_session_gets_a_title_and_a_cleared_name_none() {
        let mut translator = Translator::new(PathBuf::from("/p"));
        let todos = Vec::new;
        let context = Context {
            todos: &todos,
            context_window: None,
        };
        let named = SessionEvent::SessionInfoChanged {
            name: Some("fix the parser".into()),
        };
        let wire = serde_json::to_value(translator.event(&named, &context)).unwrap_or_default();
        assert_eq!(
            wire,
            json!([{"sessionUpdate": "session_info_update", "title": "fix the parser"}])
        );
        let cleared = SessionEvent::SessionInfoChanged { name: None };
        let wire = serde_json::to_value(translator.event(&cleared, &context)).unwrap_or_default();
        assert_eq!(
            wire,
            json!([{"sessionUpdate": "session_info_update", "title": null}])
        );
    }

    #[test]
    fn bash_is_executed_and_titled_by_its_first_line() {
        let d = describe(
            "bash",
            &args(json!({"command": "ls\nrm x"})),
            Path::new("/p"),
        );
        assert_eq!(d.kind, ToolKind::Execute);
        assert_eq!(d.title, "`ls…`");
        assert!(d.path.is_none());
    }
}
