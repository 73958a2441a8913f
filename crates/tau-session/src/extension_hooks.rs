//! The extension events whose results change what the session does, folded by pi's rules
//! (ext §3.2): `tool_call` (first block wins; input edits carry on to the next handler and to
//! the execution).

use std::ops::ControlFlow;

use serde_json::{Map, Value, json};
use tau_extensions::{CallError, Extensions};
use tau_protocol::extension_event::{
    BeforeAgentStartResult, BeforeProviderRequestResult, ContextResult, ExtensionEvent,
    InputAction, InputResult, MessageEndResult, ResourcesDiscoverResult, ToolCallResult,
    ToolResultPatch, take_result,
};

/// pi's text for a block without a reason.
const BLOCKED: &str = "Tool execution was blocked";

/// Runs the `tool_call` handlers for a validated call. A handler that fails, times out or is
/// cut off blocks the call (pi treats a throwing `tool_call` handler as a block, and a hung
/// one must not let the call through): the error text becomes the reason.
pub(crate) async fn tool_call(
    extensions: &Extensions,
    call: &tau_protocol::ToolCall,
    arguments: Map<String, Value>,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<Map<String, Value>, String> {
    let mut input = arguments;
    for extension in extensions.subscribers("tool_call") {
        let event = ExtensionEvent::ToolCall {
            tool_call_id: &call.id,
            tool_name: &call.name,
            input: &input,
        }
        .to_value();
        let result = match extensions.call_event(&extension, event, Some(cancel)).await {
            Ok(result) => result,
            Err(CallError::TimedOut(ms)) => {
                let error = CallError::TimedOut(ms).to_string();
                extensions
                    .report(&extension.path, "tool_call", &error)
                    .await;
                return Err(error);
            }
            Err(err) => return Err(err.to_string()),
        };
        let result: ToolCallResult = take_result(result);
        if let Some(edited) = result.input {
            input = edited;
        }
        if result.block == Some(true) {
            return Err(result.reason.unwrap_or_else(|| BLOCKED.to_string()));
        }
    }
    Ok(input)
}

/// `session_start` (and the other observation-only session events): every subscriber in
/// load order, results ignored.
pub async fn notify(extensions: &Extensions, event: Value) {
    extensions
        .emit(event, None, |_, _| ControlFlow::Continue(()))
        .await;
}

/// The end of a session's extensions as tau exits: `session_shutdown` (`quit`) to the
/// subscribers while the client can still see what they do, then their processes stopped.
pub async fn quit(extensions: &Extensions, client_reachable: bool) {
    if client_reachable {
        notify(
            extensions,
            ExtensionEvent::SessionShutdown {
                reason: "quit",
                target_session_file: None,
            }
            .to_value(),
        )
        .await;
    }
    extensions.shutdown();
}

/// What the `input` handlers made of a prompt (ext §3.2).
#[derive(Debug, Clone, PartialEq)]
pub enum InputOutcome {
    /// Go on with this text and these images (transformed or not).
    Continue {
        text: String,
        images: Vec<tau_protocol::ImageContent>,
    },
    /// A handler took care of it: no run.
    Handled,
}

/// An extension's `{customType, content, display?, details?}` as the custom message it
/// becomes (ext §7.4): stamped now, shown unless it says otherwise.
pub fn custom_message(message: &Value) -> Result<tau_protocol::CustomMessage, serde_json::Error> {
    let mut message = message.clone();
    if let Value::Object(fields) = &mut message {
        fields.insert("role".into(), json!("custom"));
        fields.insert("timestamp".into(), json!(tau_ai::now_ms()));
        fields.entry("display").or_insert(json!(true));
    }
    serde_json::from_value(message)
}

/// Runs the `input` handlers: transforms chain, the first `handled` ends it. `source` is
/// `rpc` or `extension`; `streaming_behavior` is set only while a run streams.
pub async fn input(
    extensions: &Extensions,
    text: String,
    images: Vec<tau_protocol::ImageContent>,
    source: &str,
    streaming_behavior: Option<&str>,
    cancel: &tokio_util::sync::CancellationToken,
) -> InputOutcome {
    let event = ExtensionEvent::Input {
        text: &text,
        images: &images,
        source,
        streaming_behavior,
    }
    .to_value();
    let mut handled = false;
    let event = extensions
        .emit(event, Some(cancel), |event, result| {
            let result: InputResult = take_result(result);
            match result.action {
                Some(InputAction::Handled) => {
                    handled = true;
                    return ControlFlow::Break(());
                }
                Some(InputAction::Transform) => {
                    if let Some(text) = result.text {
                        event["text"] = Value::String(text);
                    }
                    if let Some(images) = result.images {
                        event["images"] = json!(images);
                    }
                }
                Some(InputAction::Continue) | None => {}
            }
            ControlFlow::Continue(())
        })
        .await;
    if handled {
        return InputOutcome::Handled;
    }
    InputOutcome::Continue {
        text: event["text"].as_str().unwrap_or_default().to_string(),
        images: event
            .get("images")
            .and_then(|i| serde_json::from_value(i.clone()).ok())
            .unwrap_or_default(),
    }
}

/// What the `before_agent_start` handlers add to a run (ext §3.2).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AgentStartChanges {
    /// Custom messages placed after the prompt.
    pub messages: Vec<tau_protocol::AgentMessage>,
    /// The system prompt for this run, when a handler changed it.
    pub system_prompt: Option<String>,
}

/// Runs the `before_agent_start` handlers: every `message` is kept, `systemPrompt` chains.
pub async fn before_agent_start(
    extensions: &Extensions,
    prompt: &str,
    images: &[tau_protocol::ImageContent],
    system_prompt: String,
    cancel: &tokio_util::sync::CancellationToken,
) -> AgentStartChanges {
    let event = ExtensionEvent::BeforeAgentStart {
        prompt,
        images,
        system_prompt: &system_prompt,
    }
    .to_value();
    let mut messages = Vec::new();
    let mut changed = false;
    let event = extensions
        .emit(event, Some(cancel), |event, result| {
            let result: BeforeAgentStartResult = take_result(result);
            // `messages` holds every message when one extension's handlers returned several
            // (`message` is then the first of them).
            let returned: Vec<Value> = match result.messages {
                Some(all) => all,
                None => result
                    .message
                    .filter(Value::is_object)
                    .into_iter()
                    .collect(),
            };
            messages.extend(
                returned
                    .iter()
                    .filter_map(|m| custom_message(m).ok())
                    .map(tau_protocol::AgentMessage::Custom),
            );
            if let Some(prompt) = result.system_prompt {
                event["systemPrompt"] = Value::String(prompt);
                changed = true;
            }
            ControlFlow::Continue(())
        })
        .await;
    AgentStartChanges {
        messages,
        system_prompt: changed
            .then(|| event["systemPrompt"].as_str().map(str::to_string))
            .flatten(),
    }
}

/// Runs the `context` handlers before a model call: each may replace the messages (chained);
/// `None` when nothing changed them. The session's own messages stay as they are.
pub(crate) async fn context(
    extensions: &Extensions,
    messages: &[std::sync::Arc<tau_protocol::AgentMessage>],
    cancel: &tokio_util::sync::CancellationToken,
) -> Option<Vec<tau_protocol::AgentMessage>> {
    let messages: Vec<&tau_protocol::AgentMessage> = messages.iter().map(|m| &**m).collect();
    let mut changed = false;
    let event = extensions
        .emit(
            ExtensionEvent::Context { messages }.to_value(),
            Some(cancel),
            |event, result| {
                if let Some(replaced) = take_result::<ContextResult>(result).messages {
                    event["messages"] = Value::Array(replaced);
                    changed = true;
                }
                ControlFlow::Continue(())
            },
        )
        .await;
    if !changed {
        return None;
    }
    serde_json::from_value(event["messages"].clone()).ok()
}

/// Runs the `tool_result` handlers: partial patches of `content`, `details` and `isError`,
/// each handler seeing the previous one's result.
pub(crate) async fn tool_result(
    extensions: &Extensions,
    call: &tau_protocol::ToolCall,
    input: &Map<String, Value>,
    result: tau_protocol::AgentToolResult,
    is_error: bool,
    cancel: &tokio_util::sync::CancellationToken,
) -> (tau_protocol::AgentToolResult, bool) {
    let event = ExtensionEvent::ToolResult {
        tool_call_id: &call.id,
        tool_name: &call.name,
        input,
        content: &result.content,
        details: result.details.as_ref(),
        is_error,
    }
    .to_value();
    let event = extensions
        .emit(event, Some(cancel), |event, patch| {
            let patch: ToolResultPatch = take_result(patch);
            if let Some(content) = patch.content {
                event["content"] = content;
            }
            if let Some(details) = patch.details {
                event["details"] = details;
            }
            if let Some(is_error) = patch.is_error {
                event["isError"] = Value::Bool(is_error);
            }
            ControlFlow::Continue(())
        })
        .await;
    let content = serde_json::from_value(event["content"].clone()).unwrap_or(result.content);
    let details = match &event["details"] {
        Value::Null => None,
        other => Some(other.clone()),
    };
    let is_error = event["isError"].as_bool().unwrap_or(is_error);
    (
        tau_protocol::AgentToolResult {
            extra: Default::default(),
            content,
            details,
            terminate: result.terminate,
        },
        is_error,
    )
}

/// Runs the `message_end` handlers (ext §3.2): each may replace the message, keeping its
/// role; the replacement is what the client sees and the session keeps. Another role is
/// pi's `extension_error` and is ignored.
pub(crate) async fn message_end(
    extensions: &Extensions,
    message: tau_protocol::AgentMessage,
    cancel: &tokio_util::sync::CancellationToken,
) -> tau_protocol::AgentMessage {
    let Ok(mut current) = serde_json::to_value(&message) else {
        return message;
    };
    let role = current.get("role").cloned();
    let mut replaced = false;
    for extension in extensions.subscribers("message_end") {
        let event = ExtensionEvent::MessageEnd { message: &current }.to_value();
        let result = match extensions.call_event(&extension, event, Some(cancel)).await {
            Ok(result) => result,
            Err(CallError::Cancelled) => break,
            Err(err) => {
                extensions
                    .report(&extension.path, "message_end", &err.to_string())
                    .await;
                continue;
            }
        };
        let Some(candidate) = take_result::<MessageEndResult>(result)
            .message
            .filter(Value::is_object)
        else {
            continue;
        };
        if candidate.get("role") != role.as_ref() {
            extensions
                .report(
                    &extension.path,
                    "message_end",
                    "message_end handlers must return a message with the same role",
                )
                .await;
            continue;
        }
        current = candidate;
        replaced = true;
    }
    if !replaced {
        return message;
    }
    serde_json::from_value(current).unwrap_or(message)
}

/// pi's `before_provider_request` (chained: each handler may replace the payload) and
/// `after_provider_response` (observation), around every model request of a run.
pub(crate) struct ProviderHooks {
    pub extensions: std::sync::Arc<Extensions>,
}

impl tau_ai::provider::RequestHooks for ProviderHooks {
    fn before_request(&self, payload: Value) -> futures_util::future::BoxFuture<'_, Value> {
        Box::pin(async move {
            if !self.extensions.subscribed("before_provider_request") {
                return payload;
            }
            let event = self
                .extensions
                .emit(
                    ExtensionEvent::BeforeProviderRequest { payload }.to_value(),
                    None,
                    |event, result| {
                        let result: BeforeProviderRequestResult = take_result(result);
                        if let Some(replaced) = result.payload {
                            event["payload"] = replaced;
                        }
                        ControlFlow::Continue(())
                    },
                )
                .await;
            event["payload"].clone()
        })
    }

    fn after_response(
        &self,
        status: u16,
        headers: Vec<(String, String)>,
    ) -> futures_util::future::BoxFuture<'_, ()> {
        Box::pin(async move {
            if !self.extensions.subscribed("after_provider_response") {
                return;
            }
            let headers: Map<String, Value> = headers
                .into_iter()
                .map(|(name, value)| (name, Value::String(value)))
                .collect();
            notify(
                &self.extensions,
                ExtensionEvent::AfterProviderResponse { status, headers }.to_value(),
            )
            .await;
        })
    }
}

/// The skill and prompt-template paths the `resources_discover` handlers named, in load
/// order; [`DiscoveredResources::join`] adds them to a session.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DiscoveredResources {
    pub skills: Vec<String>,
    pub prompts: Vec<String>,
}

/// Runs the `resources_discover` handlers (ext §3.2).
pub async fn resources_discover(
    extensions: &Extensions,
    cwd: &std::path::Path,
    reason: &str,
) -> DiscoveredResources {
    let mut skills = Vec::new();
    let mut prompts = Vec::new();
    if !extensions.subscribed("resources_discover") {
        return DiscoveredResources::default();
    }
    let cwd = cwd.display().to_string();
    let event = ExtensionEvent::ResourcesDiscover { cwd: &cwd, reason }.to_value();
    extensions
        .emit(event, None, |_, result| {
            let result: ResourcesDiscoverResult = take_result(result);
            skills.extend(result.skill_paths);
            prompts.extend(result.prompt_paths);
            ControlFlow::Continue(())
        })
        .await;
    DiscoveredResources { skills, prompts }
}

/// The start of a session's first extensions: `session_start` (reason `startup`), then
/// `resources_discover`, whose skill and prompt paths are returned for the session to join.
/// Every front-end runs it once its extensions are bound (beside its loop, so that a dialog
/// `session_start` opens can be answered).
pub async fn session_started(
    extensions: &Extensions,
    cwd: &std::path::Path,
) -> DiscoveredResources {
    let start = ExtensionEvent::SessionStart {
        reason: "startup",
        previous_session_file: None,
    };
    notify(extensions, start.to_value()).await;
    resources_discover(extensions, cwd, "startup").await
}

/// An extension command (`/name args`), run to its end: the handler, then everything it asked
/// for carried out, so that a front-end answers the `prompt` after what the command did (its
/// `sendMessage` is out before the answer, as in pi).
pub async fn run_command(
    extensions: &Extensions,
    command: &tau_extensions::CommandInfo,
    args: &str,
) {
    extensions.run_command(command, args, None).await;
    extensions.actions_applied().await;
}
