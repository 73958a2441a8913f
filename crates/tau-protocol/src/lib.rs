//! The wire surface of tau, owned in one place: every record that crosses stdin or stdout in
//! RPC mode (commands, responses and their data, events, messages and content blocks,
//! host-tool and todo frames, extension UI records) as plain serde types, with pi's field
//! names and field order. Nothing here does I/O; the other crates produce and consume these
//! types, and the RPC writer alone serialises them.
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

pub mod js_number;
#[macro_use]
mod macros;
mod agent_event;
mod agent_message;
mod assistant_event;
pub mod content;
pub mod extension;
pub mod extension_event;
mod host_tools;
mod message;
mod model;
mod modes;
mod permissions;
pub mod rpc;
pub mod schema;
mod session_event;
mod todos;
mod tool_details;

pub use agent_event::{AgentEvent, AgentToolResult};
pub use agent_message::{
    AgentMessage, BashExecutionMessage, BranchSummaryMessage, CompactionSummaryMessage,
    CustomMessage,
};
pub use assistant_event::AssistantMessageEvent;
pub use host_tools::{HostToolCall, HostToolCancel, HostToolDefinition, HostToolOutput};
pub use message::{
    AssistantContent, AssistantMessage, Cost, ImageContent, Message, StopReason, TextContent,
    ThinkingContent, ToolCall, ToolResultMessage, Usage, UserContent, UserContentBlock,
    UserMessage,
};
pub use model::{
    InputModality, Model, ModelCost, ThinkingLevel, ThinkingLevelMap, UnknownThinkingLevel,
    clamp_thinking_level,
};
pub use modes::{InterruptMode, QueueMode};
pub use permissions::{PermissionMode, PermissionOutcome, ToolKind};
pub use session_event::{
    CompactionDetails, CompactionReason, CompactionResult, McpServerState, McpTransport,
    SessionEvent, SessionSaveState, TodoReminderItem,
};
pub use todos::{TodoItem, TodoPhase, TodoStatus};
pub use tool_details::{TruncatedBy, Truncation};
