//! Provider-neutral LLM types: the [`Model`] description, the messages a model sees
//! (user, assistant, tool result) with their content blocks, token [`Usage`] and cost,
//! [`StopReason`], and the [`AssistantMessageEvent`] stream a provider produces.
//!
//! These types are also wire types: pi's RPC mode forwards them verbatim, so field names and
//! field order follow pi's output exactly. `provider` streams them from the four wire APIs, `registry`
//! resolves models and keys, and `skim` reads JSON without building it on hot paths.
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

pub mod js_number;
#[macro_use]
mod macros;
mod message;
mod model;
pub mod provider;
pub mod registry;
pub mod skim;
mod stream;

pub use message::{
    AssistantContent, AssistantMessage, Cost, ImageContent, Message, StopReason, TextContent,
    ThinkingContent, ToolCall, ToolResultMessage, Usage, UserContent, UserContentBlock,
    UserMessage,
};
pub use model::{
    InputModality, Model, ModelCost, ThinkingLevel, ThinkingLevelMap, UnknownThinkingLevel,
    clamp_thinking_level,
};
pub use stream::AssistantMessageEvent;

/// Milliseconds since the Unix epoch: the timestamp of messages on the wire.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
