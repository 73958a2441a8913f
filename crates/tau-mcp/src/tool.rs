//! An MCP tool as a `tau_agent::AgentTool`: its schema passed through, its calls made
//! through its server, their results mapped by [`crate::content`].

use std::sync::Arc;

use futures_util::future::BoxFuture;
use rmcp::model::{CallToolResult, Tool};
use serde_json::{Map, Value, json};
use tau_agent::{AgentTool, ToolContext};
use tau_protocol::AgentToolResult;
use tokio_util::sync::CancellationToken;

use crate::connection::Progress;
use crate::content::{map_result, text};

/// What a tool needs of its server: its name, a `tools/call`, and its secrets kept out of an
/// error message. The manager's server is one; the tool does not know the manager.
pub(crate) trait ToolServer: Send + Sync {
    fn name(&self) -> &str;
    fn call<'a>(
        self: Arc<Self>,
        tool: &'a str,
        arguments: Map<String, Value>,
        cancel: &'a CancellationToken,
        on_progress: Box<dyn FnMut(Progress) + Send + 'a>,
    ) -> BoxFuture<'a, Result<CallToolResult, String>>;
    fn redact(&self, message: String) -> String;
}

/// One tool of one server.
pub struct McpTool {
    server: Arc<dyn ToolServer>,
    /// The server's own name for it.
    remote_name: String,
    /// The name the model sees (see [`crate::names`]).
    name: String,
    description: String,
    parameters: Value,
}

impl std::fmt::Debug for McpTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTool")
            .field("server", &self.server.name())
            .field("remote_name", &self.remote_name)
            .field("name", &self.name)
            .finish()
    }
}

impl McpTool {
    pub(crate) fn new(server: Arc<dyn ToolServer>, name: String, tool: &Tool) -> Self {
        let description = tool
            .description
            .as_deref()
            .filter(|text| !text.trim().is_empty())
            .map(str::to_string)
            .or_else(|| tool.title.clone())
            .unwrap_or_else(|| format!("{} (MCP server {})", tool.name, server.name()));
        Self {
            remote_name: tool.name.to_string(),
            description,
            parameters: parameters_schema(tool),
            name,
            server,
        }
    }

    /// The server this tool belongs to.
    pub fn server_name(&self) -> &str {
        self.server.name()
    }

    /// The server's own name of the tool.
    pub fn remote_name(&self) -> &str {
        &self.remote_name
    }
}

/// The tool's `inputSchema` as it came, with `"type":"object"` added when missing (some
/// servers leave it out; providers require it).
fn parameters_schema(tool: &Tool) -> Value {
    let mut schema = (*tool.input_schema).clone();
    if !schema.contains_key("type") {
        schema.insert("type".into(), Value::String("object".into()));
    }
    Value::Object(schema)
}

impl AgentTool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
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
            let cancel = context.cancel.clone();
            let on_progress = move |progress: Progress| {
                let line = match (progress.total, &progress.message) {
                    (Some(total), Some(message)) => {
                        format!("{}/{total}: {message}", progress.progress)
                    }
                    (Some(total), None) => format!("{}/{total}", progress.progress),
                    (None, Some(message)) => format!("{}: {message}", progress.progress),
                    (None, None) => progress.progress.to_string(),
                };
                context.update(AgentToolResult {
                    extra: Default::default(),
                    content: vec![text(line)],
                    details: Some(json!({
                        "progress": progress.progress,
                        "total": progress.total,
                        "message": progress.message,
                    })),
                    terminate: None,
                });
            };
            let result = Arc::clone(&self.server)
                .call(&self.remote_name, arguments, &cancel, Box::new(on_progress))
                .await?;
            // An error result is a message about the server: its secrets stay out of it. A
            // successful one is the server's answer and goes as it is (decision T96).
            map_result(result).map_err(|message| self.server.redact(message))
        })
    }
}
