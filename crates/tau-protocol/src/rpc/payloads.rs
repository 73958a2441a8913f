//! The `data` of successful responses, one type per command family.

use crate::TodoPhase;
use crate::{AgentMessage, InterruptMode, QueueMode};
use crate::{Model, ThinkingLevel};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `get_state`: pi's fields plus xcsh's (`interruptMode`, `queuedMessageCount`,
/// `todoPhases`) and tau's `autoRetryEnabled` (decision 2 and tau's decisions).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RpcSessionState {
    /// `null` when no model is usable (decision 1).
    pub model: Option<Model>,
    pub thinking_level: ThinkingLevel,
    pub is_streaming: bool,
    pub is_compacting: bool,
    pub steering_mode: QueueMode,
    pub follow_up_mode: QueueMode,
    #[serde(default)]
    pub interrupt_mode: InterruptMode,
    /// Absent with `--no-session`; named before the file exists (it is written lazily).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_file: Option<String>,
    pub session_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_name: Option<String>,
    pub auto_compaction_enabled: bool,
    #[serde(default = "default_true")]
    pub auto_retry_enabled: bool,
    pub message_count: usize,
    #[serde(default)]
    pub pending_message_count: usize,
    #[serde(default)]
    pub queued_message_count: usize,
    #[serde(default)]
    pub todo_phases: Vec<TodoPhase>,
    /// tau: what tools may do without asking (decision T123); absent in `allowAll`, so a pi
    /// client's `get_state` is pi's.
    #[serde(default, skip_serializing_if = "crate::PermissionMode::is_allow_all")]
    pub permission_mode: crate::PermissionMode,
    /// xcsh: the system prompt the next model call gets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    /// xcsh: the tools the next model call offers, host tools included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dump_tools: Option<Vec<DumpedTool>>,
}

/// A tool as `get_state.dumpTools` lists it (xcsh).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DumpedTool {
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

fn default_true() -> bool {
    true
}

/// `get_messages`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MessagesData {
    pub messages: Vec<AgentMessage>,
}

/// `cycle_model` (the response `data` is `null` when there is nothing to cycle to).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CycleModelData {
    pub model: Model,
    pub thinking_level: ThinkingLevel,
    pub is_scoped: bool,
}

/// `get_available_models`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ModelsData {
    pub models: Vec<Model>,
}

/// `cycle_thinking_level` (`data` is `null` for a model without reasoning).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ThinkingLevelData {
    pub level: ThinkingLevel,
}

/// `get_available_thinking_levels`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ThinkingLevelsData {
    pub levels: Vec<ThinkingLevel>,
}

/// `bash`: pi's fields plus xcsh's counters (decision 2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BashResult {
    pub output: String,
    /// Absent when cancelled or killed by a signal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    pub cancelled: bool,
    pub truncated: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full_output_path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_lines: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_lines: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_cwd: Option<String>,
}

/// Token totals in `get_session_stats`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TokenTotals {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub total: u64,
}

/// Current context-window use; `tokens`/`percent` are `null` right after a compaction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContextUsage {
    pub tokens: Option<u64>,
    pub context_window: u64,
    #[serde(serialize_with = "crate::js_number::serialize_option")]
    pub percent: Option<f64>,
}

/// `get_session_stats`: pi's fields plus xcsh's `premiumRequests`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionStats {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_file: Option<String>,
    pub session_id: String,
    pub user_messages: u64,
    pub assistant_messages: u64,
    pub tool_calls: u64,
    pub tool_results: u64,
    pub total_messages: u64,
    pub tokens: TokenTotals,
    #[serde(serialize_with = "crate::js_number::serialize")]
    pub cost: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_usage: Option<ContextUsage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub premium_requests: Option<u64>,
}

/// `export_html`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PathData {
    pub path: String,
}

/// `new_session`, `switch_session`, `clone`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CancelledData {
    pub cancelled: bool,
}

/// `fork` and `branch`: the text of the message forked from (always present, decision 1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ForkData {
    /// Absent only when an extension cancelled the fork.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    pub cancelled: bool,
}

/// One user message that can be forked from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ForkMessage {
    pub entry_id: String,
    pub text: String,
}

/// `get_fork_messages` and `get_branch_messages`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ForkMessagesData {
    pub messages: Vec<ForkMessage>,
}

/// `get_last_assistant_text`: `{}` when there is none, as pi 0.79 sends it and its client
/// tests assert (decision T83, in place of decision 1's `{"text":null}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LastAssistantTextData {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// A slash command a prompt can invoke.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommandInfo {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// `extension`, `prompt`, `skill`, or `mcp` (a prompt of an MCP server, decision T95).
    pub source: String,
    /// pi 0.79's description of where the command came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_info: Option<SourceInfo>,
    /// Document 004's older shape.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// Where a command came from (`sourceInfo` of `get_commands`), pi 0.79's shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SourceInfo {
    pub path: String,
    /// `auto` (found in a known folder), `local` (listed in a settings file, or a template or
    /// skill named on the command line), `cli` (an extension named on the command line), or
    /// the source of the pi package it came from (`npm:…`, `git:…`, a path).
    pub source: String,
    /// `user`, `project` or `temporary` (command line).
    pub scope: String,
    /// `top-level`, or `package` for what a pi package gave (then `baseDir` is its folder).
    pub origin: String,
    #[serde(rename = "baseDir", skip_serializing_if = "Option::is_none")]
    pub base_dir: Option<String>,
}

/// `get_commands`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CommandsData {
    pub commands: Vec<CommandInfo>,
}

/// `set_todos`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TodosData {
    pub todo_phases: Vec<TodoPhase>,
}

/// `set_host_tools`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HostToolsData {
    pub tool_names: Vec<String>,
}

/// `clear_queue`: what the queues held.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueueData {
    pub steering: Vec<String>,
    pub follow_up: Vec<String>,
}

/// `get_entries`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EntriesData {
    pub entries: Vec<Value>,
    pub leaf_id: Option<String>,
}

/// `get_tree`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TreeData {
    pub tree: Vec<Value>,
    pub leaf_id: Option<String>,
}

/// `navigate_tree` (tau): pi's answer to `navigateTree`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NavigateTreeData {
    /// An extension's `session_before_tree` cancelled it.
    pub cancelled: bool,
    /// The branch summary was aborted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aborted: Option<bool>,
    /// The text of the user message navigated to: the leaf is its parent, and a UI puts the
    /// text back in its editor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub editor_text: Option<String>,
    /// The `branch_summary` entry written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary_entry: Option<Value>,
}

/// `get_shortcuts` (tau).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ShortcutsData {
    pub shortcuts: Vec<ShortcutInfo>,
}

/// A key an extension bound.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ShortcutInfo {
    /// pi's key id, as the extension registered it (`ctrl+shift+p`).
    pub key: String,
    /// The extension's path.
    pub extension: String,
}

/// What became of a prompt (pi 1.x, decision 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Disposition {
    Started,
    Queued,
    Handled,
}

/// `prompt`, `steer`, `follow_up`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PromptData {
    pub disposition: Disposition,
}

/// The model's reachability in `get_integrations`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IntegrationModel {
    /// `no_provider`, `connected` or `auth_error`.
    pub state: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<u64>,
}

/// One service in `get_integrations`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct IntegrationService {
    pub name: String,
    pub state: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

/// `get_mcp_servers` (tau): each configured MCP server as its last `mcp_server_status` said.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct McpServersData {
    pub servers: Vec<McpServerInfo>,
}

/// One MCP server: the fields of its `mcp_server_status` event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct McpServerInfo {
    pub server: String,
    pub transport: crate::McpTransport,
    pub state: crate::McpServerState,
    /// The server's own names of its tools, as last listed.
    pub tools: Vec<String>,
    pub restarts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// `get_mcp_resources` (tau).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct McpResourcesData {
    pub resources: Vec<McpResourceInfo>,
}

/// One resource, or one resource template, of an MCP server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpResourceInfo {
    pub server: String,
    /// The URI, or a template's URI template (RFC 6570).
    pub uri: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    pub template: bool,
}

/// `complete_mcp_argument` (tau): the values the server suggests for the argument named.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct McpCompletionData {
    /// The prompt argument completed; absent when the line names no prompt argument.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argument: Option<String>,
    pub values: Vec<String>,
}

/// `get_integrations` (xcsh).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct IntegrationsData {
    pub version: String,
    pub model: IntegrationModel,
    pub services: Vec<IntegrationService>,
}
