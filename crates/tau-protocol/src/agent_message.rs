//! Messages held in an agent's context. Besides the LLM roles, the coding agent keeps
//! `bashExecution` (the RPC `bash` command), `custom` (extensions), and the two summaries;
//! they are converted to user messages before an LLM call.

use crate::{AssistantMessage, ToolResultMessage, UserContent, UserMessage};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Output of a `bash` RPC command, kept in the context until the next prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "role", rename = "bashExecution", rename_all = "camelCase")]
#[schemars(rename = "BashExecutionMessage", extend("x-tag" = {"role": "bashExecution"}))]
pub struct BashExecutionMessage {
    pub command: String,
    pub output: String,
    /// Absent when the command was cancelled or killed by a signal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    pub cancelled: bool,
    pub truncated: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full_output_path: Option<String>,
    pub timestamp: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclude_from_context: Option<bool>,
}

/// A message an extension put into the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "role", rename = "custom", rename_all = "camelCase")]
#[schemars(rename = "CustomMessage", extend("x-tag" = {"role": "custom"}))]
pub struct CustomMessage {
    pub custom_type: String,
    pub content: UserContent,
    pub display: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    pub timestamp: i64,
}

/// Stands in for everything before a compaction's cut point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "role", rename = "compactionSummary", rename_all = "camelCase")]
#[schemars(rename = "CompactionSummaryMessage", extend("x-tag" = {"role": "compactionSummary"}))]
pub struct CompactionSummaryMessage {
    pub summary: String,
    pub tokens_before: u64,
    pub timestamp: i64,
}

/// Summary of a branch the conversation came back from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "role", rename = "branchSummary", rename_all = "camelCase")]
#[schemars(rename = "BranchSummaryMessage", extend("x-tag" = {"role": "branchSummary"}))]
pub struct BranchSummaryMessage {
    pub summary: String,
    pub from_id: String,
    pub timestamp: i64,
}

/// A message in an agent's context, tagged by `role`. Each inner struct writes its own
/// `role`, so a message serialises the same inside the enum and on its own.
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(tag = "role", rename_all = "camelCase")]
pub enum AgentMessage {
    User(UserMessage),
    Assistant(AssistantMessage),
    ToolResult(ToolResultMessage),
    BashExecution(BashExecutionMessage),
    Custom(CustomMessage),
    CompactionSummary(CompactionSummaryMessage),
    BranchSummary(BranchSummaryMessage),
}

crate::serialize_by_variant!(AgentMessage {
    User,
    Assistant,
    ToolResult,
    BashExecution,
    Custom,
    CompactionSummary,
    BranchSummary,
});
