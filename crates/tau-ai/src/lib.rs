//! Provider-neutral LLM types: the [`Model`] description, the messages a model sees
//! (user, assistant, tool result) with their content blocks, token [`Usage`] and cost,
//! [`StopReason`], and the [`AssistantMessageEvent`] stream a provider produces.
//!
//! These types are also wire types: pi's RPC mode forwards them verbatim, so field names and
//! field order follow pi's output exactly. `provider` streams them from the four wire APIs, `registry`
//! resolves models and keys, and `skim` reads JSON without building it on hot paths.
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

pub mod provider;
pub mod registry;

// The message, model and stream-event types are wire types, owned by `tau-protocol`.
pub use tau_protocol::{
    AssistantContent, AssistantMessage, AssistantMessageEvent, Cost, ImageContent, InputModality,
    Message, Model, ModelCost, StopReason, TextContent, ThinkingContent, ThinkingLevel,
    ThinkingLevelMap, ToolCall, ToolResultMessage, UnknownThinkingLevel, Usage, UserContent,
    UserContentBlock, UserMessage, clamp_thinking_level, js_number, serialize_by_variant,
};

/// Milliseconds since the Unix epoch: the timestamp of messages on the wire.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
