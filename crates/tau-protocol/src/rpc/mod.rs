//! The whole wire surface of `tau --mode rpc`, readable in one place.
//!
//! * stdin carries [`RpcCommand`]s (each with an optional `id`) and the inbound frames
//!   [`ExtensionUiResponse`], [`HostToolResult`], [`HostToolUpdate`] and
//!   [`PermissionResponse`].
//! * stdout carries [`Ready`] first, then [`Response`]s, [`SessionEvent`]s (which include the
//!   agent-run [`AgentEvent`]s), [`ExtensionUiRequest`]s, [`HostToolCall`]s and
//!   [`HostToolCancel`]s; [`OutboundRecord`] is the union of them.
//!
//! Field names and field order are pi's (`004` document, `rpc.md`), with the xcsh and pi 1.x
//! additions of `decisions.md`. The data types that other layers own (messages, models,
//! session events) are re-exported here so the surface is complete.

pub mod command;
mod frames;
mod payloads;

pub use command::{
    BashCommand, BranchCommand, CommandError, CompactCommand, CompleteMcpArgumentCommand,
    ExportHtmlCommand, ForkCommand, GetEntriesCommand, NavigateTreeCommand, NewSessionCommand,
    NoFields, PromptCommand, QueueMessageCommand, RestartMcpServerCommand, RpcCommand,
    RunShortcutCommand, SetAutoCompactionCommand, SetAutoRetryCommand, SetHostToolsCommand,
    SetInterruptModeCommand, SetLocaleCommand, SetModelCommand, SetPermissionModeCommand,
    SetQueueModeCommand, SetSessionNameCommand, SetThinkingLevelCommand, SetTodosCommand,
    StreamingBehavior, SwitchSessionCommand,
};
pub use frames::{
    ExtensionUiRequest, ExtensionUiResponse, HostToolResult, HostToolUpdate, OutboundRecord,
    PermissionResponse, Ready, Response, ResponseType, UiMethod,
};
pub use payloads::{
    BashResult, CancelledData, CommandInfo, CommandsData, ContextUsage, CycleModelData,
    Disposition, DumpedTool, EntriesData, ForkData, ForkMessage, ForkMessagesData, HostToolsData,
    IntegrationModel, IntegrationService, IntegrationsData, LastAssistantTextData,
    McpCompletionData, McpResourceInfo, McpResourcesData, McpServerInfo, McpServersData,
    MessagesData, ModelsData, NavigateTreeData, PathData, PromptData, QueueData, RpcSessionState,
    SessionStats, ShortcutInfo, ShortcutsData, SourceInfo, ThinkingLevelData, ThinkingLevelsData,
    TodosData, TokenTotals, TreeData,
};

pub use crate::{
    AgentEvent, AgentMessage, AgentToolResult, AssistantContent, AssistantMessage,
    AssistantMessageEvent, BashExecutionMessage, BranchSummaryMessage, CompactionReason,
    CompactionResult, CompactionSummaryMessage, Cost, CustomMessage, HostToolCall, HostToolCancel,
    HostToolDefinition, HostToolOutput, ImageContent, InterruptMode, Message, Model, ModelCost,
    PermissionMode, PermissionOutcome, QueueMode, SessionEvent, StopReason, TextContent,
    ThinkingContent, ThinkingLevel, TodoItem, TodoPhase, TodoReminderItem, TodoStatus, ToolCall,
    ToolKind, ToolResultMessage, Usage, UserContent, UserContentBlock, UserMessage,
};
