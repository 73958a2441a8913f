//! The servers' resources offered to the model (decision T129): `list_mcp_resources` lists
//! what the servers offer (resources and templates), `read_mcp_resource` reads one by server
//! and URI, including the URI of a resource link a tool returned. Offered only while some
//! server has resources.

use futures_util::future::BoxFuture;
use serde_json::{Map, Value, json};
use tau_agent::{AgentTool, ToolContext};
use tau_protocol::AgentToolResult;

use crate::content::text;
use crate::manager::McpManager;

/// The list tool's name.
pub const LIST_RESOURCES: &str = "list_mcp_resources";
/// The read tool's name.
pub const READ_RESOURCE: &str = "read_mcp_resource";

/// `list_mcp_resources`.
pub struct ListResources {
    manager: McpManager,
    parameters: Value,
}

/// `read_mcp_resource`.
pub struct ReadResource {
    manager: McpManager,
    parameters: Value,
}

/// Both tools over `manager`.
pub fn resource_tools(manager: &McpManager) -> (ListResources, ReadResource) {
    (
        ListResources {
            manager: manager.clone(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "server": {"type": "string", "description": "Only this server's resources"}
                }
            }),
        },
        ReadResource {
            manager: manager.clone(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "server": {"type": "string", "description": "The MCP server that has the resource"},
                    "uri": {"type": "string", "description": "The resource's URI (a template filled in)"}
                },
                "required": ["server", "uri"]
            }),
        },
    )
}

fn result(text_block: String) -> AgentToolResult {
    AgentToolResult {
        extra: Default::default(),
        content: vec![text(text_block)],
        details: None,
        terminate: None,
    }
}

impl AgentTool for ListResources {
    fn name(&self) -> &str {
        LIST_RESOURCES
    }

    fn description(&self) -> &str {
        "Lists the resources (files, records, documents) the connected MCP servers offer, with \
         their URIs; URI templates have {placeholders} to fill in before reading."
    }

    fn parameters(&self) -> &Value {
        &self.parameters
    }

    fn execute<'a>(
        &'a self,
        _call_id: &'a str,
        arguments: Map<String, Value>,
        _context: ToolContext,
    ) -> BoxFuture<'a, Result<AgentToolResult, String>> {
        Box::pin(async move {
            let only = arguments.get("server").and_then(Value::as_str);
            let entries: Vec<_> = self
                .manager
                .current_resources()
                .into_iter()
                .filter(|entry| only.is_none_or(|server| entry.server == server))
                .collect();
            if entries.is_empty() {
                return Ok(result(match only {
                    Some(server) => format!("MCP server \"{server}\" offers no resources."),
                    None => "No MCP server offers resources.".to_string(),
                }));
            }
            let lines: Vec<String> = entries
                .iter()
                .map(|entry| {
                    let mut line = format!(
                        "{} {} {}{}",
                        entry.server,
                        if entry.template {
                            "template"
                        } else {
                            "resource"
                        },
                        entry.uri,
                        entry
                            .mime_type
                            .as_deref()
                            .map(|mime| format!(" ({mime})"))
                            .unwrap_or_default()
                    );
                    line.push_str(&format!(": {}", entry.name));
                    if let Some(description) = &entry.description {
                        line.push_str(&format!(" - {}", description.lines().next().unwrap_or("")));
                    }
                    line
                })
                .collect();
            let mut listed = result(lines.join("\n"));
            listed.details = Some(json!({
                "resources": entries.iter().map(|entry| json!({
                    "server": entry.server,
                    "uri": entry.uri,
                    "name": entry.name,
                    "mimeType": entry.mime_type,
                    "template": entry.template,
                })).collect::<Vec<_>>()
            }));
            Ok(listed)
        })
    }
}

impl AgentTool for ReadResource {
    fn name(&self) -> &str {
        READ_RESOURCE
    }

    fn description(&self) -> &str {
        "Reads an MCP server's resource by its URI (from list_mcp_resources, a filled-in \
         template, or a resource link in a tool's result)."
    }

    fn parameters(&self) -> &Value {
        &self.parameters
    }

    fn execute<'a>(
        &'a self,
        _call_id: &'a str,
        arguments: Map<String, Value>,
        context: ToolContext,
    ) -> BoxFuture<'a, Result<AgentToolResult, String>> {
        Box::pin(async move {
            let field = |name: &str| {
                arguments
                    .get(name)
                    .and_then(Value::as_str)
                    .filter(|value| !value.is_empty())
                    .ok_or_else(|| format!("\"{name}\" is required"))
            };
            let (server, uri) = (field("server")?, field("uri")?);
            let content = self
                .manager
                .read_resource(server, uri, &context.cancel)
                .await?;
            Ok(AgentToolResult {
                extra: Default::default(),
                content,
                details: Some(json!({"server": server, "uri": uri})),
                terminate: None,
            })
        })
    }
}
