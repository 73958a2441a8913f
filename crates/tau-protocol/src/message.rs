//! The messages a model sees and produces, with their content blocks, usage and stop reason.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// `{"type":"text","text":…}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename = "text", rename_all = "camelCase")]
#[schemars(rename = "TextContent", extend("x-tag" = {"type": "text"}))]
pub struct TextContent {
    pub text: String,
    /// Provider metadata carried across turns (OpenAI Responses message ids).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_signature: Option<String>,
}

/// `{"type":"thinking","thinking":…}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename = "thinking", rename_all = "camelCase")]
#[schemars(rename = "ThinkingContent", extend("x-tag" = {"type": "thinking"}))]
pub struct ThinkingContent {
    pub thinking: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_signature: Option<String>,
    /// Set when a safety filter redacted the thinking; the opaque payload is then in
    /// `thinking_signature` so it can be sent back for multi-turn continuity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redacted: Option<bool>,
}

/// `{"type":"image","data":<base64>,"mimeType":…}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename = "image", rename_all = "camelCase")]
#[schemars(rename = "ImageContent", extend("x-tag" = {"type": "image"}))]
pub struct ImageContent {
    pub data: String,
    pub mime_type: String,
}

/// `{"type":"toolCall","id":…,"name":…,"arguments":{…}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename = "toolCall", rename_all = "camelCase")]
#[schemars(rename = "ToolCall", extend("x-tag" = {"type": "toolCall"}))]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: Map<String, Value>,
    /// Gemini's opaque signature for reusing thought context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thought_signature: Option<String>,
}

/// A block of user or tool-result content.
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum UserContentBlock {
    Text(TextContent),
    Image(ImageContent),
}

/// A block of assistant content.
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum AssistantContent {
    Text(TextContent),
    Thinking(ThinkingContent),
    ToolCall(ToolCall),
}

/// User content is either a plain string or a list of blocks; pi itself always writes blocks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum UserContent {
    Text(String),
    Blocks(Vec<UserContentBlock>),
}

/// Why an assistant message ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum StopReason {
    Stop,
    Length,
    ToolUse,
    Error,
    Aborted,
}

/// Cost in dollars, per usage category.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Cost {
    #[serde(serialize_with = "crate::js_number::serialize")]
    pub input: f64,
    #[serde(serialize_with = "crate::js_number::serialize")]
    pub output: f64,
    #[serde(serialize_with = "crate::js_number::serialize")]
    pub cache_read: f64,
    #[serde(serialize_with = "crate::js_number::serialize")]
    pub cache_write: f64,
    #[serde(serialize_with = "crate::js_number::serialize")]
    pub total: f64,
}

/// Token usage of one assistant message.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    /// Always written by pi; older documents omit it, hence the default.
    #[serde(default)]
    pub total_tokens: u64,
    pub cost: Cost,
    /// Subset of `cache_write` written with one-hour retention. Present (0 when the
    /// provider gave no breakdown) on every `anthropic-messages` reply, absent on the other
    /// APIs, and written after `cost`, all as pi 0.79 does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_1h: Option<u64>,
}

/// `{"role":"user",…}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "role", rename = "user")]
#[schemars(rename = "UserMessage", extend("x-tag" = {"role": "user"}))]
pub struct UserMessage {
    pub content: UserContent,
    pub timestamp: i64,
    /// Obsolete field from document 004's examples; kept so such messages survive a round trip.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attachments: Option<Vec<Value>>,
}

/// `{"role":"assistant",…}`. Field order follows pi: the fields a provider sets while
/// streaming (`responseId`, `errorMessage`, …) come after `timestamp`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "role", rename = "assistant", rename_all = "camelCase")]
#[schemars(rename = "AssistantMessage", extend("x-tag" = {"role": "assistant"}))]
pub struct AssistantMessage {
    pub content: Vec<AssistantContent>,
    pub api: String,
    pub provider: String,
    pub model: String,
    pub usage: Usage,
    pub stop_reason: StopReason,
    pub timestamp: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnostics: Option<Vec<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
    /// How long the provider asked to wait before trying again (`retry-after`), for the
    /// session's automatic retry. Not part of the message: never written or read.
    #[serde(skip)]
    pub retry_after_ms: Option<u64>,
}

/// `{"role":"toolResult",…}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "role", rename = "toolResult", rename_all = "camelCase")]
#[schemars(rename = "ToolResultMessage", extend("x-tag" = {"role": "toolResult"}))]
pub struct ToolResultMessage {
    pub tool_call_id: String,
    pub tool_name: String,
    pub content: Vec<UserContentBlock>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    pub is_error: bool,
    pub timestamp: i64,
}

/// A message in an LLM context.
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(tag = "role", rename_all = "camelCase")]
pub enum Message {
    User(UserMessage),
    Assistant(AssistantMessage),
    ToolResult(ToolResultMessage),
}

// Each variant's struct writes its own tag (so a message or block written on its own, like
// `toolcall_end.toolCall` or `turn_end.toolResults`, carries it too); the enums only delegate.
crate::serialize_by_variant!(UserContentBlock { Text, Image });
crate::serialize_by_variant!(AssistantContent {
    Text,
    Thinking,
    ToolCall
});
crate::serialize_by_variant!(Message {
    User,
    Assistant,
    ToolResult
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assistant_message_keeps_pi_field_order() {
        let msg = Message::Assistant(AssistantMessage {
            content: vec![AssistantContent::Text(TextContent {
                text: "hi".into(),
                text_signature: None,
            })],
            api: "openai-completions".into(),
            provider: "mock".into(),
            model: "m".into(),
            usage: Usage::default(),
            stop_reason: StopReason::Error,
            timestamp: 1,
            response_id: None,
            response_model: None,
            diagnostics: None,
            error_message: Some("529 Overloaded".into()),
            retry_after_ms: None,
        });
        let json = serde_json::to_string(&msg).unwrap();
        assert_eq!(
            json,
            r#"{"role":"assistant","content":[{"type":"text","text":"hi"}],"api":"openai-completions","provider":"mock","model":"m","usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":0,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"error","timestamp":1,"errorMessage":"529 Overloaded"}"#
        );
    }

    #[test]
    fn user_content_accepts_string_and_blocks() {
        let a: UserMessage = serde_json::from_str(r#"{"content":"hello","timestamp":5}"#).unwrap();
        assert_eq!(a.content, UserContent::Text("hello".into()));
        let b: UserMessage = serde_json::from_str(
            r#"{"content":[{"type":"text","text":"x"},{"type":"image","data":"AA==","mimeType":"image/png"}],"timestamp":5}"#,
        )
        .unwrap();
        match b.content {
            UserContent::Blocks(blocks) => assert_eq!(blocks.len(), 2),
            UserContent::Text(_) => panic!("expected blocks"),
        }
    }

    #[test]
    fn standalone_structs_carry_their_tag() {
        let call = ToolCall {
            id: "c".into(),
            name: "bash".into(),
            arguments: serde_json::Map::new(),
            thought_signature: None,
        };
        assert_eq!(
            serde_json::to_string(&call).unwrap(),
            r#"{"type":"toolCall","id":"c","name":"bash","arguments":{}}"#
        );
        let block = AssistantContent::ToolCall(call);
        assert_eq!(serde_json::to_value(&block).unwrap()["type"], "toolCall");
        let back: AssistantContent =
            serde_json::from_value(serde_json::to_value(&block).unwrap()).unwrap();
        assert_eq!(back, block);
    }

    #[test]
    fn unknown_stop_reason_is_rejected() {
        let err = serde_json::from_str::<StopReason>(r#""finished""#).unwrap_err();
        assert!(err.to_string().contains("unknown variant"), "{err}");
    }
}
