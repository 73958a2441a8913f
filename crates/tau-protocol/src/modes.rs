//! How queued steering and follow-up messages are delivered.

use serde::{Deserialize, Serialize};

/// How many queued messages one delivery point takes.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum QueueMode {
    /// Everything queued.
    All,
    /// One message per delivery point (pi's default).
    #[default]
    OneAtATime,
}

/// When steering messages take effect relative to a batch of tool calls (xcsh).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum InterruptMode {
    /// After the whole batch has finished (pi 0.79's behaviour; the default).
    #[default]
    Wait,
    /// After each finished tool: the rest of the batch is aborted or skipped.
    Immediate,
}
