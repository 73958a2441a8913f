//! The LLM layer: `provider` streams a model's reply from the seven wire APIs as
//! [`AssistantMessageEvent`](tau_protocol::AssistantMessageEvent)s, and `registry` resolves
//! models and keys.
//!
//! The types it works with (the [`Model`](tau_protocol::Model) description, the messages a
//! model sees with their content blocks, token usage and cost, the stop reason, the stream
//! events) are wire types: pi's RPC mode forwards them verbatim. They live in `tau-protocol`,
//! and every crate imports them from there.
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

pub mod provider;
pub mod registry;

/// Milliseconds since the Unix epoch: the timestamp of messages on the wire.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
