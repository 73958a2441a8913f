//! The event stream a provider produces while an assistant message streams in.
//!
//! In pi 0.79's shape every content event carries `partial`, the whole message so far. pi 1.x's
//! lean shape drops `partial` and adds `id`/`toolName` to `toolcall_start`; both fit these
//! types because those fields are optional.

use serde::{Deserialize, Serialize};

use crate::{AssistantMessage, StopReason, ToolCall};

/// One event of an assistant message stream (`assistantMessageEvent` on the wire).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum AssistantMessageEvent {
    Start {
        partial: AssistantMessage,
    },
    TextStart {
        content_index: usize,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        partial: Option<AssistantMessage>,
    },
    TextDelta {
        content_index: usize,
        delta: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        partial: Option<AssistantMessage>,
    },
    TextEnd {
        content_index: usize,
        content: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        partial: Option<AssistantMessage>,
    },
    ThinkingStart {
        content_index: usize,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        partial: Option<AssistantMessage>,
    },
    ThinkingDelta {
        content_index: usize,
        delta: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        partial: Option<AssistantMessage>,
    },
    ThinkingEnd {
        content_index: usize,
        content: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        partial: Option<AssistantMessage>,
    },
    // pi writes `toolcall` as one word in these three tags; snake_case would give
    // `tool_call_start`, `tool_call_delta` and `tool_call_end`.
    #[serde(rename = "toolcall_start")]
    ToolCallStart {
        content_index: usize,
        /// Lean shape only: the call's id.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// Lean shape only: the called tool.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool_name: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        partial: Option<AssistantMessage>,
    },
    #[serde(rename = "toolcall_delta")]
    ToolCallDelta {
        content_index: usize,
        /// A raw fragment of the arguments' JSON text.
        delta: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        partial: Option<AssistantMessage>,
    },
    #[serde(rename = "toolcall_end")]
    ToolCallEnd {
        content_index: usize,
        tool_call: ToolCall,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        partial: Option<AssistantMessage>,
    },
    Done {
        reason: StopReason,
        message: AssistantMessage,
    },
    Error {
        reason: StopReason,
        error: AssistantMessage,
    },
}
