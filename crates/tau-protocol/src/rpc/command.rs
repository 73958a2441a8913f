//! Commands a host sends on stdin, one JSON object per line, tagged by `type`.

use crate::{HostToolDefinition, TodoPhase};
use crate::{ImageContent, ThinkingLevel};
use crate::{InterruptMode, QueueMode};
use serde::{Deserialize, Serialize};

use super::payloads::*;
use serde_json::Value;

/// How a prompt sent during a run is queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum StreamingBehavior {
    Steer,
    FollowUp,
}

/// A command without fields.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NoFields {}

/// `prompt`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PromptCommand {
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub images: Option<Vec<ImageContent>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streaming_behavior: Option<StreamingBehavior>,
    /// xcsh: locale for the system prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locale: Option<String>,
}

/// `steer`, `follow_up` and `abort_and_prompt`: a message with optional images.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct QueueMessageCommand {
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub images: Option<Vec<ImageContent>>,
}

/// `new_session`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NewSessionCommand {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_session: Option<String>,
}

/// `set_model`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SetModelCommand {
    pub provider: String,
    pub model_id: String,
}

/// `set_thinking_level`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SetThinkingLevelCommand {
    pub level: ThinkingLevel,
}

/// `set_steering_mode` and `set_follow_up_mode`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SetQueueModeCommand {
    pub mode: QueueMode,
}

/// `set_interrupt_mode` (xcsh).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SetInterruptModeCommand {
    pub mode: InterruptMode,
}

/// `compact`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CompactCommand {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_instructions: Option<String>,
}

/// `set_auto_compaction`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SetAutoCompactionCommand {
    pub enabled: bool,
}

/// `set_auto_retry`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SetAutoRetryCommand {
    pub enabled: bool,
}

/// `bash`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BashCommand {
    pub command: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclude_from_context: Option<bool>,
}

/// `export_html`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExportHtmlCommand {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_path: Option<String>,
}

/// `switch_session`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SwitchSessionCommand {
    pub session_path: String,
}

/// `fork` (pi).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ForkCommand {
    pub entry_id: String,
}

/// `branch` (xcsh).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BranchCommand {
    pub entry_id: String,
}

/// `set_session_name`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SetSessionNameCommand {
    pub name: String,
}

/// `set_todos` (xcsh).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SetTodosCommand {
    pub phases: Vec<TodoPhase>,
}

/// `set_host_tools` (xcsh).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SetHostToolsCommand {
    pub tools: Vec<HostToolDefinition>,
}

/// `get_entries` (pi 1.x).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GetEntriesCommand {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
}

/// `set_locale` (xcsh).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SetLocaleCommand {
    pub locale: String,
}

/// `restart_mcp_server` (tau): start an MCP server again, its count of restarts reset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RestartMcpServerCommand {
    /// The server's name in the configuration.
    pub server: String,
}

/// `complete_mcp_argument` (tau): the line typed so far, `/mcp:<server>:<prompt> words…`;
/// the last word (empty after a space) is the argument being completed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CompleteMcpArgumentCommand {
    pub text: String,
}

/// `navigate_tree` (tau): move the session's leaf to another entry of its tree, as an
/// extension's `ctx.navigateTree` does (decision T69), optionally summarising the branch left.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NavigateTreeCommand {
    /// The entry to go to (an id from `get_tree`).
    pub target_id: String,
    #[serde(default)]
    pub summarize: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_instructions: Option<String>,
    #[serde(default)]
    pub replace_instructions: bool,
    /// A label put on the entry navigated to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

/// `set_permission_mode` (tau): what tools may do without asking (decision T123).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SetPermissionModeCommand {
    pub mode: crate::PermissionMode,
}

/// `run_shortcut` (tau): run the handler an extension bound to a key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunShortcutCommand {
    /// pi's key id (`ctrl+shift+p`), as `get_shortcuts` lists it; modifiers in any order.
    pub key: String,
}

/// Why a command object could not become an [`RpcCommand`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommandError {
    #[error("Unknown command: {0}")]
    Unknown(String),
    /// A field is missing or has the wrong type; the text names the field.
    #[error("Invalid {command} command: {detail}")]
    InvalidField {
        command: &'static str,
        detail: String,
    },
}

/// Decodes one command's fields, naming the offending field on failure.
fn decode<T: serde::de::DeserializeOwned>(
    command: &'static str,
    fields: Value,
) -> Result<T, CommandError> {
    serde_path_to_error::deserialize(fields).map_err(|err| CommandError::InvalidField {
        command,
        detail: describe_field_error(err),
    })
}

/// `<path>: <problem>`, or just the problem when it concerns the whole object (a missing
/// top-level field).
pub(crate) fn describe_field_error(err: serde_path_to_error::Error<serde_json::Error>) -> String {
    let path = err.path().to_string();
    let inner = err.into_inner();
    if path == "." {
        inner.to_string()
    } else {
        format!("{path}: {inner}")
    }
}

/// Declares every command once: its wire name, its variant and its fields.
macro_rules! commands {
    ($( $(#[$doc:meta])* $name:literal => $variant:ident($fields:ty) $(-> $data:ty)?, )*) => {
        /// Every command tau understands, tagged by `type`.
        #[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
        #[serde(tag = "type")]
        pub enum RpcCommand {
            $( $(#[$doc])* #[serde(rename = $name)] $variant($fields), )*
        }

        impl RpcCommand {
            /// Every command name, in declaration order.
            pub const NAMES: &'static [&'static str] = &[$($name),*];

            /// Each command's name and the schema of its successful response's `data`
            /// (`None`: the response has no `data`).
            pub fn response_data_schemas(
                generator: &mut schemars::SchemaGenerator,
            ) -> Vec<(&'static str, Option<schemars::Schema>)> {
                vec![$(
                    ($name, {
                        #[allow(unused_mut, unused_assignments)]
                        let mut data = None;
                        $( data = Some(generator.subschema_for::<$data>()); )?
                        data
                    }),
                )*]
            }

            /// The command's `type` on the wire.
            pub fn name(&self) -> &'static str {
                match self {
                    $( RpcCommand::$variant(_) => $name, )*
                }
            }

            /// Decodes the fields of the command named `kind` from the whole command object.
            /// Extra keys (`type`, `id`, anything unknown) are ignored, as pi does.
            pub fn decode(kind: &str, object: Value) -> Result<RpcCommand, CommandError> {
                match kind {
                    $( $name => decode::<$fields>($name, object).map(RpcCommand::$variant), )*
                    other => Err(CommandError::Unknown(other.to_string())),
                }
            }
        }
    };
}

commands! {
    "prompt" => Prompt(PromptCommand) -> PromptData,
    "steer" => Steer(QueueMessageCommand) -> PromptData,
    "follow_up" => FollowUp(QueueMessageCommand) -> PromptData,
    "abort" => Abort(NoFields),
    /// xcsh: abort the run, then prompt, in one round trip.
    "abort_and_prompt" => AbortAndPrompt(QueueMessageCommand) -> PromptData,
    "new_session" => NewSession(NewSessionCommand) -> CancelledData,
    "get_state" => GetState(NoFields) -> RpcSessionState,
    "get_messages" => GetMessages(NoFields) -> MessagesData,
    "set_model" => SetModel(SetModelCommand) -> crate::Model,
    "cycle_model" => CycleModel(NoFields) -> Option<CycleModelData>,
    "get_available_models" => GetAvailableModels(NoFields) -> ModelsData,
    "set_thinking_level" => SetThinkingLevel(SetThinkingLevelCommand),
    "cycle_thinking_level" => CycleThinkingLevel(NoFields) -> Option<ThinkingLevelData>,
    /// pi 1.x.
    "get_available_thinking_levels" => GetAvailableThinkingLevels(NoFields) -> ThinkingLevelsData,
    "set_steering_mode" => SetSteeringMode(SetQueueModeCommand),
    "set_follow_up_mode" => SetFollowUpMode(SetQueueModeCommand),
    /// xcsh.
    "set_interrupt_mode" => SetInterruptMode(SetInterruptModeCommand),
    "compact" => Compact(CompactCommand) -> crate::CompactionResult,
    "set_auto_compaction" => SetAutoCompaction(SetAutoCompactionCommand),
    "set_auto_retry" => SetAutoRetry(SetAutoRetryCommand),
    "abort_retry" => AbortRetry(NoFields),
    "bash" => Bash(BashCommand) -> BashResult,
    "abort_bash" => AbortBash(NoFields),
    "get_session_stats" => GetSessionStats(NoFields) -> SessionStats,
    "export_html" => ExportHtml(ExportHtmlCommand) -> PathData,
    "switch_session" => SwitchSession(SwitchSessionCommand) -> CancelledData,
    "fork" => Fork(ForkCommand) -> ForkData,
    "clone" => Clone(NoFields) -> CancelledData,
    "get_fork_messages" => GetForkMessages(NoFields) -> ForkMessagesData,
    /// xcsh's name for a fork from a user message (whole-file listing).
    "branch" => Branch(BranchCommand) -> ForkData,
    "get_branch_messages" => GetBranchMessages(NoFields) -> ForkMessagesData,
    "get_last_assistant_text" => GetLastAssistantText(NoFields) -> LastAssistantTextData,
    "set_session_name" => SetSessionName(SetSessionNameCommand),
    "get_commands" => GetCommands(NoFields) -> CommandsData,
    /// xcsh.
    "set_todos" => SetTodos(SetTodosCommand) -> TodosData,
    /// xcsh.
    "set_host_tools" => SetHostTools(SetHostToolsCommand) -> HostToolsData,
    /// pi 1.x: empty both queues and return what they held.
    "clear_queue" => ClearQueue(NoFields) -> QueueData,
    /// pi 1.x.
    "get_entries" => GetEntries(GetEntriesCommand) -> EntriesData,
    /// pi 1.x.
    "get_tree" => GetTree(NoFields) -> TreeData,
    /// xcsh.
    "set_locale" => SetLocale(SetLocaleCommand),
    /// xcsh.
    "get_integrations" => GetIntegrations(NoFields) -> IntegrationsData,
    /// tau: the MCP servers with their states and tools.
    "get_mcp_servers" => GetMcpServers(NoFields) -> McpServersData,
    /// tau.
    "restart_mcp_server" => RestartMcpServer(RestartMcpServerCommand),
    /// tau: the terminal UI's `/tree`.
    "navigate_tree" => NavigateTree(NavigateTreeCommand) -> NavigateTreeData,
    /// tau: the keys extensions bound with `registerShortcut`.
    "get_shortcuts" => GetShortcuts(NoFields) -> ShortcutsData,
    /// tau: press one of them; answered once its handler has finished.
    "run_shortcut" => RunShortcut(RunShortcutCommand),
    /// tau: the permission mode (decision T123).
    "set_permission_mode" => SetPermissionMode(SetPermissionModeCommand),
    /// tau: the MCP servers' resources and templates, as last listed (decision T129).
    "get_mcp_resources" => GetMcpResources(NoFields) -> McpResourcesData,
    /// tau: the server's completions of the argument being typed in `/mcp:<server>:<prompt>`.
    "complete_mcp_argument" => CompleteMcpArgument(CompleteMcpArgumentCommand) -> McpCompletionData,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_name_decodes_or_names_a_field() {
        for name in RpcCommand::NAMES {
            match RpcCommand::decode(name, json!({"type": name})) {
                Ok(cmd) => assert_eq!(cmd.name(), *name),
                Err(CommandError::InvalidField { command, detail }) => {
                    assert_eq!(command, *name);
                    assert!(detail.contains("missing field"), "{name}: {detail}");
                }
                Err(other) => panic!("{name}: {other}"),
            }
        }
    }

    #[test]
    fn errors_name_the_field_and_allowed_values() {
        let err = RpcCommand::decode("set_steering_mode", json!({"mode": "sometimes"}))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("Invalid set_steering_mode command: mode: unknown variant"));
        assert!(
            err.contains("`all`") && err.contains("`one-at-a-time`"),
            "{err}"
        );

        let err = RpcCommand::decode(
            "prompt",
            json!({"message": "x", "images": [{"type": "image", "data": "AA=="}]}),
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            err,
            "Invalid prompt command: images[0]: missing field `mimeType`"
        );

        let err = RpcCommand::decode("set_auto_retry", json!({"enabled": "yes"}))
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "Invalid set_auto_retry command: enabled: invalid type: string \"yes\", expected a boolean"
        );
    }

    #[test]
    fn serialises_with_type_first() {
        let cmd =
            RpcCommand::decode("set_model", json!({"provider": "p", "modelId": "m"})).unwrap();
        assert_eq!(
            serde_json::to_string(&cmd).unwrap(),
            r#"{"type":"set_model","provider":"p","modelId":"m"}"#
        );
    }
}
