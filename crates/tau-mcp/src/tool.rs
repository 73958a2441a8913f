//! An MCP tool as a `tau_agent::AgentTool`: its schema passed through, and `tools/call`
//! results mapped to tau's content (text, images, embedded resources as text,
//! `structuredContent` in `details`, `isError` as an error result).

use std::sync::Arc;

use futures_util::future::BoxFuture;
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents, Tool};
use serde_json::{Map, Value, json};
use tau_agent::{AgentTool, ToolContext};
use tau_protocol::{AgentToolResult, ImageContent, TextContent, UserContentBlock};

use crate::manager::Server;

/// One tool of one server.
pub struct McpTool {
    server: Arc<Server>,
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
            .field("server", &self.server.name)
            .field("remote_name", &self.remote_name)
            .field("name", &self.name)
            .finish()
    }
}

impl McpTool {
    pub(crate) fn new(server: Arc<Server>, name: String, tool: &Tool) -> Self {
        let description = tool
            .description
            .as_deref()
            .filter(|text| !text.trim().is_empty())
            .map(str::to_string)
            .or_else(|| tool.title.clone())
            .unwrap_or_else(|| format!("{} (MCP server {})", tool.name, server.name));
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
        &self.server.name
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
            let on_progress = |progress: crate::connection::Progress| {
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
            let result = self
                .server
                .call(&self.remote_name, arguments, &context.cancel, on_progress)
                .await?;
            // An error result is a message about the server: its secrets stay out of it. A
            // successful one is the server's answer and goes as it is (decision T96).
            map_result(result).map_err(|message| self.server.redactor.redact_owned(message))
        })
    }
}

/// Maps a `tools/call` result; an `isError` result becomes `Err` with its text.
pub fn map_result(result: CallToolResult) -> Result<AgentToolResult, String> {
    let mut content: Vec<UserContentBlock> = result.content.into_iter().map(map_block).collect();
    if content.is_empty()
        && let Some(structured) = &result.structured_content
    {
        // A server SHOULD also send structured output as text; when it does not, the model
        // still gets to see it.
        content.push(text(structured.to_string()));
    }
    if result.is_error == Some(true) {
        let message: Vec<&str> = content
            .iter()
            .filter_map(|block| match block {
                UserContentBlock::Text(text) => Some(text.text.as_str()),
                UserContentBlock::Image(_) => None,
            })
            .collect();
        let message = message.join("\n");
        return Err(if message.is_empty() {
            "The MCP tool reported an error".to_string()
        } else {
            message
        });
    }
    Ok(AgentToolResult {
        extra: Default::default(),
        content,
        details: result
            .structured_content
            .map(|structured| json!({ "structuredContent": structured })),
        terminate: None,
    })
}

pub(crate) fn map_block(block: ContentBlock) -> UserContentBlock {
    match block {
        ContentBlock::Text(content) => text(content.text),
        ContentBlock::Image(image) => UserContentBlock::Image(ImageContent {
            data: image.data,
            mime_type: image.mime_type,
        }),
        ContentBlock::Audio(audio) => text(format!(
            "[audio: {}, {} bytes of base64]",
            audio.mime_type,
            audio.data.len()
        )),
        ContentBlock::Resource(embedded) => match embedded.resource {
            ResourceContents::TextResourceContents { text: body, .. } => text(body),
            ResourceContents::BlobResourceContents {
                uri,
                mime_type,
                blob,
                ..
            } => match mime_type {
                Some(mime) if mime.starts_with("image/") => UserContentBlock::Image(ImageContent {
                    data: blob,
                    mime_type: mime,
                }),
                mime => text(format!(
                    "[resource {uri} ({}): {} bytes of base64]",
                    mime.as_deref().unwrap_or("binary"),
                    blob.len()
                )),
            },
            other => text(serde_json::to_string(&other).unwrap_or_default()),
        },
        ContentBlock::ResourceLink(link) => {
            text(format!("[resource link: {} {}]", link.name, link.uri))
        }
        // A content type newer than this code: its JSON is better than losing it.
        other => text(serde_json::to_string(&other).unwrap_or_default()),
    }
}

fn text(text: String) -> UserContentBlock {
    UserContentBlock::Text(TextContent {
        text,
        text_signature: None,
    })
}
