//! The session's events as `session/update` notifications: text and thinking deltas as
//! message and thought chunks, tool calls with their kind, title, locations, raw input and
//! output and content (an `edit` or `write` as diffs, a `bash` command's output as it comes, or
//! the editor's terminal it runs in), the todo list as a plan, usage, and retries and
//! compaction as short thoughts. A tool call is announced as soon as the model starts writing
//! it, and its arguments follow as they stream. The same mapping replays a loaded session's
//! history.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, Diff, Plan, PlanEntry, PlanEntryPriority, PlanEntryStatus,
    SessionInfoUpdate, SessionUpdate, Terminal, ToolCall as AcpToolCall, ToolCallContent,
    ToolCallLocation, ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields, ToolKind, UsageUpdate,
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

/// How often the arguments of a tool call the model is still writing are sent again: often
/// enough to watch a long `write` grow, rarely enough that a call is not re-sent per token.
pub const STREAMED_INPUT_INTERVAL: Duration = Duration::from_millis(100);

/// Per-session state of the translation: the tool calls announced so far, and those the
/// model is still writing.
#[derive(Debug)]
pub struct Translator {
    cwd: PathBuf,
    calls: HashMap<String, Announced>,
    /// Calls announced while they stream, by their index in the reply's content.
    streaming: HashMap<usize, Streaming>,
    /// [`STREAMED_INPUT_INTERVAL`], shorter in tests.
    input_interval: Duration,
    pub last_reply: LastReply,
}

#[derive(Debug, Clone)]
struct Announced {
    name: String,
    path: Option<PathBuf>,
    /// Runs in the editor's terminal, which the call shows instead of text.
    terminal: bool,
}

/// A tool call whose arguments are still arriving.
#[derive(Debug)]
struct Streaming {
    id: String,
    name: String,
    /// The arguments' JSON text so far.
    text: String,
    /// When it was announced or its arguments last sent.
    sent: Instant,
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
            streaming: HashMap::new(),
            input_interval: STREAMED_INPUT_INTERVAL,
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
            // Waits and pauses the person would otherwise take for a hang: told as thoughts,
            // beside the answer, as the save status is (decision T122).
            other => {
                return notice(other)
                    .map(|text| {
                        SessionUpdate::AgentThoughtChunk(chunk(&format!("\n[tau] {text}\n")))
                    })
                    .into_iter()
                    .collect();
            }
        };
        match event {
            AgentEvent::AgentStart => {
                // A run's calls end within it: what the last run announced is done with.
                self.calls.clear();
                self.streaming.clear();
                self.last_reply = LastReply::default();
                Vec::new()
            }
            AgentEvent::MessageStart {
                message: AgentMessage::Assistant(_),
            } => {
                // Content indexes are per reply.
                self.streaming.clear();
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
                AssistantMessageEvent::ToolCallStart {
                    content_index,
                    id: Some(id),
                    tool_name: Some(name),
                    ..
                } => self.start_streaming(*content_index, id, name),
                AssistantMessageEvent::ToolCallDelta {
                    content_index,
                    delta,
                    ..
                } => self.stream_delta(*content_index, delta),
                AssistantMessageEvent::ToolCallEnd {
                    content_index,
                    tool_call,
                    ..
                } => {
                    let streamed = self
                        .streaming
                        .remove(content_index)
                        .is_some_and(|s| s.id == tool_call.id);
                    if streamed && self.calls.contains_key(&tool_call.id) {
                        vec![self.refresh(&tool_call.id, &tool_call.name, &tool_call.arguments)]
                    } else {
                        vec![self.announce(tool_call, ToolCallStatus::Pending)]
                    }
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
                // Calls the reply stopped in the middle of (an abort, a failed stream) never
                // run: they end here rather than stay pending in the editor.
                let mut updates: Vec<SessionUpdate> = self
                    .streaming
                    .drain()
                    .map(|(_, call)| status_update(&call.id, ToolCallStatus::Failed))
                    .collect();
                let usage = &reply.usage;
                let used = usage.input + usage.output + usage.cache_read + usage.cache_write;
                if let Some(size) = context.context_window
                    && used > 0
                {
                    updates.push(SessionUpdate::UsageUpdate(UsageUpdate::new(used, size)));
                }
                updates
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
                tool_name,
                partial_result,
                ..
            } => {
                // Only tau's own `bash` names a client terminal; another tool's `details` may
                // hold anything.
                if let Some(terminal) = partial_result
                    .details
                    .as_ref()
                    .filter(|_| tool_name == "bash")
                    .and_then(|d| d.get("terminalId"))
                    .and_then(Value::as_str)
                {
                    // The command runs in the editor's terminal: the call shows it live.
                    if let Some(call) = self.calls.get_mut(tool_call_id) {
                        call.terminal = true;
                    }
                    let content = vec![ToolCallContent::Terminal(Terminal::new(
                        terminal.to_string(),
                    ))];
                    return vec![SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                        tool_call_id.clone(),
                        ToolCallUpdateFields::new().content(content),
                    ))];
                }
                // The diffs of `edit` and `write`, and a terminal, stay what the call shows
                // while it runs.
                if self.shows_diff(tool_call_id) || self.in_terminal(tool_call_id) {
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

    fn in_terminal(&self, id: &str) -> bool {
        self.calls.get(id).is_some_and(|call| call.terminal)
    }

    /// Announces a call the model has started writing, before any argument has arrived.
    fn start_streaming(&mut self, index: usize, id: &str, name: &str) -> Vec<SessionUpdate> {
        let call = ToolCall {
            id: id.to_string(),
            name: name.to_string(),
            arguments: Map::new(),
            thought_signature: None,
        };
        self.streaming.insert(
            index,
            Streaming {
                id: id.to_string(),
                name: name.to_string(),
                text: String::new(),
                sent: Instant::now(),
            },
        );
        vec![self.announce(&call, ToolCallStatus::Pending)]
    }

    /// The call's arguments as far as they parse, at most once per input interval; a delta
    /// held back is sent with a later one or with the call's end.
    fn stream_delta(&mut self, index: usize, delta: &str) -> Vec<SessionUpdate> {
        let interval = self.input_interval;
        let Some(call) = self.streaming.get_mut(&index) else {
            return Vec::new();
        };
        call.text.push_str(delta);
        if call.sent.elapsed() < interval {
            return Vec::new();
        }
        call.sent = Instant::now();
        let arguments = tau_ai::provider::parse_arguments(&call.text);
        if arguments.is_empty() {
            return Vec::new();
        }
        let (id, name) = (call.id.clone(), call.name.clone());
        vec![self.refresh(&id, &name, &arguments)]
    }

    /// A `tool_call_update` with what a call's (streamed or final) arguments show: title,
    /// kind, content, locations and raw input.
    fn refresh(&mut self, id: &str, name: &str, arguments: &Map<String, Value>) -> SessionUpdate {
        let described = describe(name, arguments, &self.cwd);
        if let Some(call) = self.calls.get_mut(id) {
            call.path.clone_from(&described.path);
        }
        let locations: Vec<ToolCallLocation> = described
            .path
            .iter()
            .map(|path| ToolCallLocation::new(path.clone()).line(described.line))
            .collect();
        SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
            id.to_string(),
            ToolCallUpdateFields::new()
                .title(described.title)
                .kind(described.kind)
                .content(described.content)
                .locations(locations)
                .raw_input(Value::Object(arguments.clone())),
        ))
    }

    /// A `tool_call` for a call the model made.
    fn announce(&mut self, call: &ToolCall, status: ToolCallStatus) -> SessionUpdate {
        let described = describe(&call.name, &call.arguments, &self.cwd);
        self.calls.insert(
            call.id.clone(),
            Announced {
                name: call.name.clone(),
                path: described.path.clone(),
                terminal: false,
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
        // A terminal stays the content: it shows the output and how the command ended.
        if !self.in_terminal(id) && (is_error || !self.shows_diff(id)) {
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

/// The words for a retry or a compaction, when the event is one.
fn notice(event: &SessionEvent) -> Option<String> {
    match event {
        SessionEvent::AutoRetryStart {
            attempt,
            max_attempts,
            delay_ms,
            error_message,
        } => Some(format!(
            "Retrying in {} (attempt {attempt}/{max_attempts}): {error_message}",
            delay(*delay_ms)
        )),
        SessionEvent::AutoRetryEnd {
            success: false,
            attempt,
            final_error,
        } => Some(format!(
            "Gave up after {attempt} {}: {}",
            if *attempt == 1 { "retry" } else { "retries" },
            final_error.as_deref().unwrap_or("the model call failed")
        )),
        SessionEvent::CompactionStart { .. } => Some("Compacting the conversation…".to_string()),
        SessionEvent::CompactionEnd {
            result: Some(result),
            ..
        } => Some(format!(
            "Compacted: {} tokens summarised",
            result.tokens_before
        )),
        SessionEvent::CompactionEnd { aborted: true, .. } => {
            Some("Compaction cancelled".to_string())
        }
        SessionEvent::CompactionEnd { error_message, .. } => Some(
            error_message
                .clone()
                .unwrap_or_else(|| "Compaction failed".to_string()),
        ),
        _ => None,
    }
}

/// A back-off delay in words: `2s`, `1.5s`, `250 ms`.
fn delay(ms: u64) -> String {
    if ms < 1000 {
        return format!("{ms} ms");
    }
    let tenths = (ms + 50) / 100;
    if tenths.is_multiple_of(10) {
        format!("{}s", tenths / 10)
    } else {
        format!("{}.{}s", tenths / 10, tenths % 10)
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
    // A call announced before its arguments arrive has no subject yet: its verb alone.
    if described.title.ends_with(' ') || described.title == "``" {
        described.title = match name {
            "bash" => "bash".to_string(),
            _ => described.title.trim_end().to_string(),
        };
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

    fn event(value: Value) -> SessionEvent {
        serde_json::from_value(value.clone()).unwrap_or_else(|e| panic!("{e}: {value}"))
    }

    fn translate(translator: &mut Translator, value: Value) -> Value {
        let todos = Vec::new;
        let context = Context {
            todos: &todos,
            context_window: None,
        };
        serde_json::to_value(translator.event(&event(value), &context)).unwrap_or_default()
    }

    fn streamed(event: Value) -> Value {
        json!({"type": "message_update", "assistantMessageEvent": event})
    }

    fn reply_end(stop_reason: &str) -> Value {
        json!({"type": "message_end", "message": {
            "role": "assistant", "content": [], "api": "a", "provider": "p", "model": "m",
            "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
                      "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
            "stopReason": stop_reason, "timestamp": 0}})
    }

    #[test]
    fn a_tool_call_is_announced_when_it_starts_streaming_and_filled_in_as_it_streams() {
        let mut t = Translator::new(PathBuf::from("/p"));
        t.input_interval = Duration::ZERO;
        translate(&mut t, json!({"type": "agent_start"}));
        let start = translate(
            &mut t,
            streamed(
                json!({"type": "toolcall_start", "contentIndex": 1, "id": "c1", "toolName": "read"}),
            ),
        );
        assert_eq!(start[0]["sessionUpdate"], "tool_call", "{start}");
        // Pending is the status a tool_call has when it names none.
        assert!(
            start[0].get("status").is_none_or(|s| s == "pending"),
            "{start}"
        );
        assert_eq!(start[0]["title"], "Read");
        assert_eq!(start[0]["kind"], "read");
        assert_eq!(start[0]["rawInput"], json!({}));
        // A fragment that parses to nothing yet sends nothing.
        let nothing = translate(
            &mut t,
            streamed(json!({"type": "toolcall_delta", "contentIndex": 1, "delta": "{\"pa"})),
        );
        assert_eq!(nothing, json!([]));
        let partial = translate(
            &mut t,
            streamed(
                json!({"type": "toolcall_delta", "contentIndex": 1, "delta": "th\": \"src/ma"}),
            ),
        );
        assert_eq!(partial[0]["sessionUpdate"], "tool_call_update", "{partial}");
        assert_eq!(partial[0]["toolCallId"], "c1");
        assert_eq!(partial[0]["rawInput"], json!({"path": "src/ma"}));
        assert_eq!(partial[0]["title"], "Read src/ma");
        let end = translate(
            &mut t,
            streamed(json!({"type": "toolcall_end", "contentIndex": 1,
                            "toolCall": {"type": "toolCall", "id": "c1", "name": "read",
                                         "arguments": {"path": "src/main.rs"}}})),
        );
        assert_eq!(end[0]["sessionUpdate"], "tool_call_update", "{end}");
        assert_eq!(end[0]["rawInput"], json!({"path": "src/main.rs"}));
        assert_eq!(end[0]["locations"][0]["path"], "/p/src/main.rs");
        let run = translate(
            &mut t,
            json!({"type": "tool_execution_start", "toolCallId": "c1", "toolName": "read",
                   "args": {"path": "src/main.rs"}}),
        );
        assert_eq!(
            run,
            json!([{"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "in_progress"}])
        );
    }

    #[test]
    fn streamed_arguments_are_sent_at_most_once_per_interval() {
        let mut t = Translator::new(PathBuf::from("/p"));
        t.input_interval = Duration::from_secs(3600);
        translate(
            &mut t,
            streamed(
                json!({"type": "toolcall_start", "contentIndex": 0, "id": "w", "toolName": "write"}),
            ),
        );
        for part in ["{\"path\": \"a.txt\", ", "\"content\": \"x", "yz"] {
            let held = translate(
                &mut t,
                streamed(json!({"type": "toolcall_delta", "contentIndex": 0, "delta": part})),
            );
            assert_eq!(held, json!([]), "held back within the interval");
        }
        let end = translate(
            &mut t,
            streamed(json!({"type": "toolcall_end", "contentIndex": 0,
                            "toolCall": {"type": "toolCall", "id": "w", "name": "write",
                                         "arguments": {"path": "a.txt", "content": "xyz"}}})),
        );
        assert_eq!(end.as_array().map(Vec::len), Some(1), "{end}");
        assert_eq!(end[0]["content"][0]["newText"], "xyz");
    }

    #[test]
    fn a_call_the_reply_stopped_in_the_middle_of_ends_failed() {
        let mut t = Translator::new(PathBuf::from("/p"));
        translate(
            &mut t,
            streamed(
                json!({"type": "toolcall_start", "contentIndex": 0, "id": "b", "toolName": "bash"}),
            ),
        );
        let end = translate(&mut t, reply_end("aborted"));
        assert_eq!(
            end,
            json!([{"sessionUpdate": "tool_call_update", "toolCallId": "b", "status": "failed"}])
        );
    }

    #[test]
    fn a_command_in_the_editor_s_terminal_shows_the_terminal_to_the_end() {
        let mut t = Translator::new(PathBuf::from("/p"));
        translate(
            &mut t,
            json!({"type": "tool_execution_start", "toolCallId": "b", "toolName": "bash",
                   "args": {"command": "ls"}}),
        );
        let embedded = translate(
            &mut t,
            json!({"type": "tool_execution_update", "toolCallId": "b", "toolName": "bash",
                   "args": {"command": "ls"},
                   "partialResult": {"content": [], "details": {"terminalId": "term-7"}}}),
        );
        assert_eq!(
            embedded[0]["content"],
            json!([{"type": "terminal", "terminalId": "term-7"}]),
            "{embedded}"
        );
        let later = translate(
            &mut t,
            json!({"type": "tool_execution_update", "toolCallId": "b", "toolName": "bash",
                   "args": {"command": "ls"},
                   "partialResult": {"content": [{"type": "text", "text": "a"}]}}),
        );
        assert_eq!(later, json!([]));
        let done = translate(
            &mut t,
            json!({"type": "tool_execution_end", "toolCallId": "b", "toolName": "bash",
                   "result": {"content": [{"type": "text", "text": "a\n"}]}, "isError": false}),
        );
        assert_eq!(done[0]["status"], "completed");
        assert!(done[0].get("content").is_none(), "{done}");
        assert_eq!(done[0]["rawOutput"]["content"][0]["text"], "a\n");
    }

    #[test]
    fn retries_and_compaction_are_told_as_thoughts() {
        let mut t = Translator::new(PathBuf::from("/p"));
        let text = |wire: &Value| {
            wire[0]["content"]["text"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        };
        let retry = translate(
            &mut t,
            json!({"type": "auto_retry_start", "attempt": 1, "maxAttempts": 3, "delayMs": 2000,
                   "errorMessage": "429 rate limited"}),
        );
        assert_eq!(retry[0]["sessionUpdate"], "agent_thought_chunk");
        assert_eq!(
            text(&retry),
            "\n[tau] Retrying in 2s (attempt 1/3): 429 rate limited\n"
        );
        let recovered = translate(
            &mut t,
            json!({"type": "auto_retry_end", "success": true, "attempt": 1}),
        );
        assert_eq!(recovered, json!([]));
        let gave_up = translate(
            &mut t,
            json!({"type": "auto_retry_end", "success": false, "attempt": 3, "finalError": "overloaded"}),
        );
        assert!(
            text(&gave_up).contains("Gave up after 3 retries: overloaded"),
            "{gave_up}"
        );
        let start = translate(
            &mut t,
            json!({"type": "compaction_start", "reason": "threshold"}),
        );
        assert!(text(&start).contains("Compacting the conversation…"));
        let end = translate(
            &mut t,
            json!({"type": "compaction_end", "reason": "threshold", "aborted": false, "willRetry": false,
                   "result": {"summary": "s", "firstKeptEntryId": "e", "tokensBefore": 51234}}),
        );
        assert!(
            text(&end).contains("Compacted: 51234 tokens summarised"),
            "{end}"
        );
        let failed = translate(
            &mut t,
            json!({"type": "compaction_end", "reason": "manual", "result": null, "aborted": false,
                   "willRetry": false, "errorMessage": "Compaction failed: no model"}),
        );
        assert!(text(&failed).contains("Compaction failed: no model"));
    }

    #[test]
    fn delays_read_as_seconds_or_milliseconds() {
        assert_eq!(delay(2000), "2s");
        assert_eq!(delay(1500), "1.5s");
        assert_eq!(delay(250), "250 ms");
        assert_eq!(delay(4000), "4s");
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
