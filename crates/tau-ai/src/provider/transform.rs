//! Prepares a context's messages for any provider (pi's shared transform): failed and aborted
//! replies are left out, images become a notice for text-only models, another model's thinking
//! becomes plain text, and every tool call gets a result (providers reject dangling calls).

use std::collections::HashSet;

use tau_protocol::{
    AssistantContent, AssistantMessage, InputModality, Message, Model, StopReason, TextContent,
    ToolResultMessage, UserContent, UserContentBlock,
};

const USER_IMAGE_OMITTED: &str = "(image omitted: model does not support images)";
const TOOL_IMAGE_OMITTED: &str = "(tool image omitted: model does not support images)";
const NO_RESULT: &str = "No result provided";

/// The messages to send to `model`.
pub(crate) fn prepare(model: &Model, messages: &[Message]) -> Vec<Message> {
    let images = model.input.contains(&InputModality::Image);
    let mut out: Vec<Message> = Vec::with_capacity(messages.len());
    let mut pending: Vec<(String, String)> = Vec::new();
    let mut answered: HashSet<String> = HashSet::new();
    for message in messages {
        match message {
            Message::Assistant(a)
                if matches!(a.stop_reason, StopReason::Error | StopReason::Aborted) => {}
            Message::Assistant(a) => {
                close_pending(&mut out, &mut pending, &answered);
                let a = same_or_foreign(model, a);
                for block in &a.content {
                    if let AssistantContent::ToolCall(call) = block {
                        pending.push((call.id.clone(), call.name.clone()));
                    }
                }
                out.push(Message::Assistant(a));
            }
            Message::ToolResult(result) => {
                answered.insert(result.tool_call_id.clone());
                let mut result = result.clone();
                if !images {
                    result.content = without_images(result.content, TOOL_IMAGE_OMITTED);
                }
                out.push(Message::ToolResult(result));
            }
            Message::User(user) => {
                close_pending(&mut out, &mut pending, &answered);
                let mut user = user.clone();
                if !images && let UserContent::Blocks(blocks) = user.content {
                    user.content = UserContent::Blocks(without_images(blocks, USER_IMAGE_OMITTED));
                }
                out.push(Message::User(user));
            }
        }
    }
    close_pending(&mut out, &mut pending, &answered);
    out
}

/// Adds `No result provided` results for calls of the previous assistant message that got none.
fn close_pending(
    out: &mut Vec<Message>,
    pending: &mut Vec<(String, String)>,
    answered: &HashSet<String>,
) {
    for (id, name) in pending.drain(..) {
        if !answered.contains(&id) {
            out.push(Message::ToolResult(ToolResultMessage {
                tool_call_id: id,
                tool_name: name,
                content: vec![UserContentBlock::Text(TextContent {
                    text: NO_RESULT.to_string(),
                    text_signature: None,
                })],
                details: None,
                is_error: true,
                timestamp: crate::now_ms(),
            }));
        }
    }
}

/// Another model cannot use this one's thinking signatures: its thinking becomes text.
fn same_or_foreign(model: &Model, a: &AssistantMessage) -> AssistantMessage {
    let same = a.provider == model.provider && a.api == model.api && a.model == model.id;
    if same {
        return a.clone();
    }
    let mut a = a.clone();
    a.content = a
        .content
        .into_iter()
        .filter_map(|block| match block {
            AssistantContent::Thinking(t) if t.redacted == Some(true) => None,
            AssistantContent::Thinking(t) if t.thinking.trim().is_empty() => None,
            AssistantContent::Thinking(t) => Some(AssistantContent::Text(TextContent {
                text: t.thinking,
                text_signature: None,
            })),
            AssistantContent::ToolCall(mut call) => {
                call.thought_signature = None;
                Some(AssistantContent::ToolCall(call))
            }
            other => Some(other),
        })
        .collect();
    a
}

/// Replaces images by a notice, collapsing consecutive notices.
fn without_images(blocks: Vec<UserContentBlock>, notice: &str) -> Vec<UserContentBlock> {
    let mut out: Vec<UserContentBlock> = Vec::with_capacity(blocks.len());
    for block in blocks {
        match block {
            UserContentBlock::Image(_) => {
                let repeated =
                    matches!(out.last(), Some(UserContentBlock::Text(t)) if t.text == notice);
                if !repeated {
                    out.push(UserContentBlock::Text(TextContent {
                        text: notice.to_string(),
                        text_signature: None,
                    }));
                }
            }
            other => out.push(other),
        }
    }
    out
}
