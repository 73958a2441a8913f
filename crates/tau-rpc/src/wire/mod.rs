//! The whole wire surface of `tau --mode rpc`, readable in one place.
//!
//! * stdin carries [`RpcCommand`]s (each with an optional `id`) and the inbound frames
//!   [`ExtensionUiResponse`], [`HostToolResult`] and [`HostToolUpdate`].
//! * stdout carries [`Ready`] first, then [`Response`]s, [`SessionEvent`]s (which include the
//!   agent-run [`AgentEvent`]s), [`ExtensionUiRequest`]s, [`HostToolCall`]s and
//!   [`HostToolCancel`]s; [`OutboundRecord`] is the union of them.
//!
//! Field names and field order are pi's (`004` document, `rpc.md`), with the xcsh and pi 1.x
//! additions of `decisions.md`. The data types that other layers own (messages, models,
//! session events) are re-exported here so the surface is complete.

pub(crate) mod command;
mod frames;
mod payloads;

pub use command::{
    BashCommand, BranchCommand, CommandError, CompactCommand, ExportHtmlCommand, ForkCommand,
    GetEntriesCommand, NewSessionCommand, NoFields, PromptCommand, QueueMessageCommand, RpcCommand,
    SetAutoCompactionCommand, SetAutoRetryCommand, SetHostToolsCommand, SetInterruptModeCommand,
    SetLocaleCommand, SetModelCommand, SetQueueModeCommand, SetSessionNameCommand,
    SetThinkingLevelCommand, SetTodosCommand, StreamingBehavior, SwitchSessionCommand,
};
pub use frames::{
    ExtensionUiRequest, ExtensionUiResponse, HostToolResult, HostToolUpdate, OutboundRecord, Ready,
    Response, ResponseType, UiMethod,
};
pub use payloads::{
    BashResult, CancelledData, CommandInfo, CommandsData, ContextUsage, CycleModelData,
    Disposition, EntriesData, ForkData, ForkMessage, ForkMessagesData, HostToolsData,
    IntegrationModel, IntegrationService, IntegrationsData, LastAssistantTextData, MessagesData,
    ModelsData, PathData, PromptData, QueueData, RpcSessionState, SessionStats, ThinkingLevelData,
    ThinkingLevelsData, TodosData, TokenTotals, TreeData,
};

pub use tau_agent::{
    AgentEvent, AgentMessage, AgentToolResult, BashExecutionMessage, BranchSummaryMessage,
    CompactionSummaryMessage, CustomMessage, InterruptMode, QueueMode,
};
pub use tau_ai::{
    AssistantContent, AssistantMessage, AssistantMessageEvent, Cost, ImageContent, Message, Model,
    ModelCost, StopReason, TextContent, ThinkingContent, ThinkingLevel, ToolCall,
    ToolResultMessage, Usage, UserContent, UserContentBlock, UserMessage,
};
pub use tau_session::{
    CompactionReason, CompactionResult, HostToolCall, HostToolCancel, HostToolDefinition,
    HostToolOutput, SessionEvent, TodoItem, TodoPhase, TodoReminderItem, TodoStatus,
};
