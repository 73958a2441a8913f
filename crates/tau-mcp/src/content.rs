//! MCP content as tau's: `tools/call` results and prompt messages mapped to text and image
//! blocks (embedded resources as text, `structuredContent` in `details`, `isError` as an error
//! result). Shared by tools and prompts.

use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};
use serde_json::json;
use tau_protocol::{AgentToolResult, ImageContent, TextContent, UserContentBlock};

/// Maps a `tools/call` result; an `isError` result becomes `Err` with its text.
///
/// `structuredContent` (MCP 2025-06-18) stays in `details`. The model gets `content`, where
/// the specification tells servers to put the same JSON as text; only when `content` is empty
/// does the model get the JSON itself, as one text block. It is not checked against the
/// tool's `outputSchema`: the server's answer passes as it is (decision T128).
pub fn map_result(result: CallToolResult) -> Result<AgentToolResult, String> {
    let mut content: Vec<UserContentBlock> = result.content.into_iter().map(map_block).collect();
    // rmcp keeps an explicit `null` apart from an absent field; neither is structured output.
    let structured = result.structured_content.filter(|value| !value.is_null());
    if content.is_empty()
        && let Some(structured) = &structured
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
        details: structured.map(|structured| json!({ "structuredContent": structured })),
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

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn result(value: Value) -> CallToolResult {
        serde_json::from_value(value).unwrap()
    }

    fn texts(result: &AgentToolResult) -> Vec<&str> {
        result
            .content
            .iter()
            .map(|block| match block {
                UserContentBlock::Text(text) => text.text.as_str(),
                UserContentBlock::Image(_) => "[image]",
            })
            .collect()
    }

    #[test]
    fn structured_content_beside_content_goes_to_details_and_the_model_gets_the_content() {
        let mapped = map_result(result(json!({
            "content": [{"type": "text", "text": "{\"temperature\":22}"}],
            "structuredContent": {"temperature": 22},
        })))
        .unwrap();
        assert_eq!(texts(&mapped), ["{\"temperature\":22}"]);
        assert_eq!(
            mapped.details,
            Some(json!({"structuredContent": {"temperature": 22}}))
        );
    }

    #[test]
    fn structured_content_alone_reaches_the_model_as_its_json() {
        let mapped = map_result(result(json!({
            "content": [],
            "structuredContent": {"temperature": 22, "conditions": "rain"},
        })))
        .unwrap();
        assert_eq!(
            texts(&mapped),
            [r#"{"temperature":22,"conditions":"rain"}"#]
        );
        assert_eq!(
            mapped.details,
            Some(json!({"structuredContent": {"temperature": 22, "conditions": "rain"}}))
        );
        // Without `content` at all, the same.
        let mapped = map_result(result(json!({"structuredContent": {"ok": true}}))).unwrap();
        assert_eq!(texts(&mapped), [r#"{"ok":true}"#]);
        assert_eq!(
            mapped.details,
            Some(json!({"structuredContent": {"ok": true}}))
        );
    }

    #[test]
    fn a_result_without_structured_content_has_no_details() {
        let mapped =
            map_result(CallToolResult::success(vec![ContentBlock::text("plain")])).unwrap();
        assert_eq!(texts(&mapped), ["plain"]);
        assert_eq!(mapped.details, None);
        // An explicit null is no structured output either.
        let mapped = map_result(result(json!({"content": [], "structuredContent": null}))).unwrap();
        assert!(mapped.content.is_empty());
        assert_eq!(mapped.details, None);
    }

    #[test]
    fn an_error_result_says_its_text_or_its_structured_content() {
        let error = map_result(result(json!({
            "content": [{"type": "text", "text": "no such city"}],
            "structuredContent": {"code": 404},
            "isError": true,
        })))
        .unwrap_err();
        assert_eq!(error, "no such city");
        let error = map_result(result(json!({
            "structuredContent": {"code": 404},
            "isError": true,
        })))
        .unwrap_err();
        assert_eq!(error, r#"{"code":404}"#);
        let error = map_result(result(json!({"content": [], "isError": true}))).unwrap_err();
        assert_eq!(error, "The MCP tool reported an error");
    }
}
