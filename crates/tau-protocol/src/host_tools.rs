//! xcsh's host tools on the wire: the definitions a host registers (`set_host_tools`), the
//! `host_tool_call`/`host_tool_cancel` frames tau writes, and the output a host sends back.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::UserContentBlock;

/// A host tool as the host describes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HostToolDefinition {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    pub description: String,
    /// A JSON Schema object for the arguments.
    pub parameters: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hidden: Option<bool>,
}

/// The output of a host tool, final or partial.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HostToolOutput {
    pub content: Vec<UserContentBlock>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_warning: Option<bool>,
}

/// `{"type":"host_tool_call",…}` (stdout): run a host tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename = "host_tool_call", rename_all = "camelCase")]
#[schemars(rename = "HostToolCall", extend("x-tag" = {"type": "host_tool_call"}))]
pub struct HostToolCall {
    pub id: String,
    pub tool_call_id: String,
    pub tool_name: String,
    pub arguments: Value,
}

/// `{"type":"host_tool_cancel","id":…,"targetId":…}` (stdout).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename = "host_tool_cancel", rename_all = "camelCase")]
#[schemars(rename = "HostToolCancel", extend("x-tag" = {"type": "host_tool_cancel"}))]
pub struct HostToolCancel {
    pub id: String,
    pub target_id: String,
}
