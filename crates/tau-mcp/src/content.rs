//! MCP content as tau's: `tools/call` results and prompt messages mapped to text and image
//! blocks (embedded resources as text, `structuredContent` in `details`, `isError` as an error
//! result). Shared by tools and prompts.

use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};
use serde_json::json;
use tau_protocol::{AgentToolResult, ImageContent, TextContent, UserContentBlock};

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

pub(crate) fn text(text: String) -> UserContentBlock {
    UserContentBlock::Text(TextContent {
        text,
        text_signature: None,
    })
}
