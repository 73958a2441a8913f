//! Events of an agent run, forwarded verbatim to RPC clients.

use crate::{AssistantMessageEvent, ToolResultMessage, Usage, UserContentBlock};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::AgentMessage;

/// What a tool returns: content for the model plus tool-specific `details` for clients.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AgentToolResult {
    pub content: Vec<UserContentBlock>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    /// Set by a tool that ends the run after this batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminate: Option<bool>,
    /// Other keys an extension's tool returned (its own `isError: true`, say): pi keeps the
    /// returned object whole in `tool_execution_end.result`, and so does tau (issue 39). The
    /// model sees only `content`.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, Value>,
}

/// One event of an agent run. A run is `agent_start … agent_end`; a turn is one assistant
/// reply plus its tool calls and results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum AgentEvent {
    AgentStart,
    AgentEnd {
        /// The messages produced in this run.
        messages: Vec<AgentMessage>,
        /// True when an automatic retry follows.
        #[serde(default)]
        will_retry: bool,
    },
    TurnStart,
    TurnEnd {
        message: AgentMessage,
        tool_results: Vec<ToolResultMessage>,
    },
    MessageStart {
        message: AgentMessage,
    },
    /// pi 0.79 shape: `assistantMessageEvent` then `message` (the snapshot). Lean shape (pi
    /// 1.x): `usage` then `assistantMessageEvent`, no `message`.
    MessageUpdate {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Usage>,
        assistant_message_event: Box<AssistantMessageEvent>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<Box<AgentMessage>>,
    },
    MessageEnd {
        message: AgentMessage,
    },
    ToolExecutionStart {
        tool_call_id: String,
        tool_name: String,
        args: Value,
        /// xcsh: the model's stated intent for the call.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        intent: Option<String>,
    },
    ToolExecutionUpdate {
        tool_call_id: String,
        tool_name: String,
        args: Value,
        /// The accumulated result so far, not a delta.
        partial_result: AgentToolResult,
    },
    ToolExecutionEnd {
        tool_call_id: String,
        tool_name: String,
        result: AgentToolResult,
        is_error: bool,
        /// xcsh: a successful result the tool flagged as a warning.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        is_warning: Option<bool>,
        /// pi 1.x: how long the tool ran.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        duration_ms: Option<u64>,
    },
}

impl AgentEvent {
    /// The event's `type` on the wire, without serialising it.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::AgentStart => "agent_start",
            Self::AgentEnd { .. } => "agent_end",
            Self::TurnStart => "turn_start",
            Self::TurnEnd { .. } => "turn_end",
            Self::MessageStart { .. } => "message_start",
            Self::MessageUpdate { .. } => "message_update",
            Self::MessageEnd { .. } => "message_end",
            Self::ToolExecutionStart { .. } => "tool_execution_start",
            Self::ToolExecutionUpdate { .. } => "tool_execution_update",
            Self::ToolExecutionEnd { .. } => "tool_execution_end",
        }
    }
}
