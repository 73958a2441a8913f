//! The script language: a [`Reply`] is what the mock answers to one request (content blocks,
//! usage, stop reason, timing, or a [`Fault`]), with builders for Rust and a camelCase JSON
//! form so scripts can live in files.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Characters per streamed delta when a block gives no explicit `chunks`.
pub const DEFAULT_CHUNK_SIZE: usize = 8;

/// One scripted answer. Every request to an LLM endpoint consumes one reply from the queue.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Reply {
    /// The assistant's content, streamed in this order.
    pub content: Vec<Block>,
    pub usage: Usage,
    /// Overrides the stop reason; by default `toolUse` when a tool call is present, else `stop`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<StopReason>,
    /// Milliseconds to wait before the response's first byte (headers included).
    #[serde(skip_serializing_if = "is_zero")]
    pub delay_ms: u64,
    /// Milliseconds to wait between two SSE events.
    #[serde(skip_serializing_if = "is_zero")]
    pub chunk_delay_ms: u64,
    /// Characters per delta for blocks without explicit `chunks` (default 8).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chunk_size: Option<usize>,
    /// The model name to report; by default the one the request named.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Makes the request fail (or the stream break) instead of answering normally.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fault: Option<Fault>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One content block of a reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum Block {
    Text {
        #[serde(default)]
        text: String,
        /// The exact deltas to stream; their concatenation is the block's text.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        chunks: Option<Vec<String>>,
    },
    Thinking {
        #[serde(default)]
        text: String,
        /// Anthropic's `signature`, Google's `thoughtSignature`, OpenAI Responses'
        /// `encrypted_content`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        chunks: Option<Vec<String>>,
    },
    /// Anthropic only; the other APIs have no such block and leave it out.
    RedactedThinking { data: String },
    ToolCall {
        /// The call id. For OpenAI Responses, `call_id|item_id` sets both ids.
        id: String,
        name: String,
        #[serde(default = "empty_object")]
        arguments: Value,
        /// The exact argument fragments to stream; by default the compact JSON of
        /// `arguments` cut into `chunkSize`-character pieces.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        chunks: Option<Vec<String>>,
    },
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

/// Token counts a reply reports, mapped onto each API's usage fields.
///
/// `input` is the uncached prompt. The OpenAI and Google APIs count cached tokens inside the
/// prompt total, so there the reported prompt is `input + cacheRead` and `cacheWrite`, which
/// they cannot express, is left out. Where an API reports reasoning tokens separately, they
/// are estimated from the thinking text (characters / 4, at most `output`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Usage {
    pub input: u64,
    /// All generated tokens, reasoning included.
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    /// The part of `cacheWrite` kept for an hour (Anthropic's `cache_creation` breakdown;
    /// the other APIs cannot express it).
    #[serde(rename = "cacheWrite1h", skip_serializing_if = "is_zero")]
    pub cache_write_1h: u64,
}

impl Default for Usage {
    fn default() -> Self {
        Self {
            input: 10,
            output: 5,
            cache_read: 0,
            cache_write: 0,
            cache_write_1h: 0,
        }
    }
}

/// Why the scripted message ended, in tau's own terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StopReason {
    Stop,
    Length,
    ToolUse,
}

/// A failure to inject instead of (or in the middle of) a normal answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum Fault {
    /// Any status with a raw body (by default the API's error shape for that status).
    Http {
        status: u16,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        body: Option<String>,
        /// Seconds for a `retry-after` header.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry_after: Option<u64>,
    },
    /// 529 `overloaded_error` on Anthropic; 503 in the API's own shape elsewhere.
    Overloaded,
    /// 429 with a `retry-after` header when `retryAfter` is given.
    RateLimited {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry_after: Option<u64>,
    },
    /// 500.
    ServerError,
    /// 503.
    ServiceUnavailable,
    /// 400 with the API's own context-window wording.
    ContextOverflow,
    /// Sends this many SSE events, then closes the connection without ending the body.
    DropAfter { events: usize },
    /// Sends this many SSE events, then sends nothing more and keeps the connection open.
    StallAfter { events: usize },
    /// Sends this many events, then the API's own in-stream error (Anthropic's
    /// `overloaded_error` event, OpenAI's `server_error`, Gemini's 503 chunk, Bedrock's
    /// `throttlingException` message), and ends the body.
    ErrorEventAfter { events: usize },
}

impl Reply {
    /// An empty reply (no content, default usage); add blocks with the builder methods.
    pub fn new() -> Self {
        Self::default()
    }

    /// A reply made of one text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self::new().with_text(text)
    }

    /// A reply that fails with `fault`.
    pub fn fault(fault: Fault) -> Self {
        Self::new().with_fault(fault)
    }

    /// Appends a text block (named so because [`Reply::text`] is the constructor).
    pub fn with_text(mut self, text: impl Into<String>) -> Self {
        self.content.push(Block::Text {
            text: text.into(),
            chunks: None,
        });
        self
    }

    /// Appends a text block streamed as exactly these deltas.
    pub fn text_chunks<S: Into<String>>(mut self, chunks: impl IntoIterator<Item = S>) -> Self {
        let chunks: Vec<String> = chunks.into_iter().map(Into::into).collect();
        self.content.push(Block::Text {
            text: chunks.concat(),
            chunks: Some(chunks),
        });
        self
    }

    /// Appends an unsigned thinking block.
    pub fn thinking(mut self, text: impl Into<String>) -> Self {
        self.content.push(Block::Thinking {
            text: text.into(),
            signature: None,
            chunks: None,
        });
        self
    }

    /// Appends a thinking block carrying a signature.
    pub fn thinking_signed(
        mut self,
        text: impl Into<String>,
        signature: impl Into<String>,
    ) -> Self {
        self.content.push(Block::Thinking {
            text: text.into(),
            signature: Some(signature.into()),
            chunks: None,
        });
        self
    }

    /// Appends an Anthropic `redacted_thinking` block.
    pub fn redacted_thinking(mut self, data: impl Into<String>) -> Self {
        self.content
            .push(Block::RedactedThinking { data: data.into() });
        self
    }

    /// Appends a tool call whose arguments stream as JSON fragments.
    pub fn tool_call(
        mut self,
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: Value,
    ) -> Self {
        self.content.push(Block::ToolCall {
            id: id.into(),
            name: name.into(),
            arguments,
            chunks: None,
        });
        self
    }

    /// Sets the reported token counts.
    pub fn usage(mut self, input: u64, output: u64, cache_read: u64, cache_write: u64) -> Self {
        self.usage = Usage {
            input,
            output,
            cache_read,
            cache_write,
            cache_write_1h: self.usage.cache_write_1h,
        };
        self
    }

    /// Sets how many of the cache writes are kept for an hour (Anthropic only).
    pub fn cache_write_1h(mut self, tokens: u64) -> Self {
        self.usage.cache_write_1h = tokens;
        self
    }

    pub fn stop_reason(mut self, reason: StopReason) -> Self {
        self.stop_reason = Some(reason);
        self
    }

    pub fn delay_ms(mut self, ms: u64) -> Self {
        self.delay_ms = ms;
        self
    }

    pub fn chunk_delay_ms(mut self, ms: u64) -> Self {
        self.chunk_delay_ms = ms;
        self
    }

    pub fn chunk_size(mut self, chars: usize) -> Self {
        self.chunk_size = Some(chars);
        self
    }

    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// Sets the fault (named so because [`Reply::fault`] is the constructor).
    pub fn with_fault(mut self, fault: Fault) -> Self {
        self.fault = Some(fault);
        self
    }

    /// The stop reason the stream reports.
    pub fn effective_stop_reason(&self) -> StopReason {
        self.stop_reason.unwrap_or_else(|| {
            if self
                .content
                .iter()
                .any(|b| matches!(b, Block::ToolCall { .. }))
            {
                StopReason::ToolUse
            } else {
                StopReason::Stop
            }
        })
    }
}

/// Why a script could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    #[error("cannot read script {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid script: {0}")]
    Json(#[from] serde_json::Error),
}

/// Parses a script: a JSON array of replies, or a single reply; a bare string anywhere a reply
/// may stand is shorthand for a text reply.
pub fn parse_script(json: &str) -> Result<Vec<Reply>, ScriptError> {
    // Going through Value first keeps serde's error precise: the untagged enums alone would
    // only say that nothing matched.
    let value: Value = serde_json::from_str(json)?;
    script_from_value(value)
}

pub(crate) fn script_from_value(value: Value) -> Result<Vec<Reply>, ScriptError> {
    match value {
        Value::Array(items) => items.into_iter().map(entry_from_value).collect(),
        other => Ok(vec![entry_from_value(other)?]),
    }
}

fn entry_from_value(value: Value) -> Result<Reply, ScriptError> {
    match value {
        Value::String(text) => Ok(Reply::text(text)),
        other => Ok(serde_json::from_value(other)?),
    }
}

/// Reads a script file (see [`parse_script`]).
pub fn load_script(path: &Path) -> Result<Vec<Reply>, ScriptError> {
    let text = std::fs::read_to_string(path).map_err(|source| ScriptError::Read {
        path: path.display().to_string(),
        source,
    })?;
    parse_script(&text)
}

/// Splits `text` into pieces of at most `size` characters (never inside a character).
pub(crate) fn split_chars(text: &str, size: usize) -> Vec<String> {
    let size = size.max(1);
    let mut out = Vec::with_capacity(text.len() / size + 1);
    let mut start = 0;
    let mut count = 0;
    for (i, _) in text.char_indices() {
        if count == size {
            out.push(text[start..i].to_owned());
            start = i;
            count = 0;
        }
        count += 1;
    }
    if start < text.len() {
        out.push(text[start..].to_owned());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn split_respects_characters() {
        assert_eq!(split_chars("abcdefghij", 4), ["abcd", "efgh", "ij"]);
        assert_eq!(split_chars("héllo wörld", 3), ["hél", "lo ", "wör", "ld"]);
        assert!(split_chars("", 8).is_empty());
        assert_eq!(split_chars("ab", 0), ["a", "b"]);
    }

    #[test]
    fn json_form_is_camel_case_and_round_trips() {
        let reply = Reply::new()
            .thinking_signed("hmm", "sig")
            .with_text("hi")
            .redacted_thinking("opaque")
            .tool_call("call_1", "bash", json!({"command": "ls"}))
            .usage(100, 20, 3, 4)
            .stop_reason(StopReason::Length)
            .chunk_delay_ms(5)
            .with_fault(Fault::RateLimited {
                retry_after: Some(7),
            });
        let value = serde_json::to_value(&reply).unwrap();
        assert_eq!(
            value["content"][0],
            json!({"type": "thinking", "text": "hmm", "signature": "sig"})
        );
        assert_eq!(
            value["content"][2],
            json!({"type": "redactedThinking", "data": "opaque"})
        );
        assert_eq!(value["content"][3]["type"], "toolCall");
        assert_eq!(
            value["usage"],
            json!({"input": 100, "output": 20, "cacheRead": 3, "cacheWrite": 4})
        );
        assert_eq!(value["stopReason"], "length");
        assert_eq!(value["chunkDelayMs"], 5);
        assert_eq!(
            value["fault"],
            json!({"type": "rateLimited", "retryAfter": 7})
        );
        let back: Reply = serde_json::from_value(value).unwrap();
        assert_eq!(back, reply);
    }

    #[test]
    fn scripts_accept_strings_single_replies_and_defaults() {
        let script = parse_script(
            r#"["plain", {"content": [{"type": "toolCall", "id": "c", "name": "bash"}]},
                {"fault": {"type": "dropAfter", "events": 3}}]"#,
        )
        .unwrap();
        assert_eq!(script.len(), 3);
        assert_eq!(script[0], Reply::text("plain"));
        assert_eq!(script[1].usage, Usage::default());
        assert_eq!(script[1].effective_stop_reason(), StopReason::ToolUse);
        assert!(
            matches!(&script[1].content[0], Block::ToolCall { arguments, .. } if *arguments == json!({}))
        );
        assert_eq!(script[2].fault, Some(Fault::DropAfter { events: 3 }));
        assert_eq!(parse_script(r#"{"content": []}"#).unwrap().len(), 1);
        let err = parse_script(r#"[{"fault": {"type": "nope"}}]"#).unwrap_err();
        assert!(err.to_string().contains("nope"), "{err}");
    }

    #[test]
    fn the_readme_script_parses() {
        let readme = include_str!("../README.md");
        let start = readme.find("```json\n").unwrap() + "```json\n".len();
        let end = start + readme[start..].find("```").unwrap();
        let script = parse_script(&readme[start..end]).unwrap();
        assert_eq!(script.len(), 5);
        assert_eq!(script[1].content.len(), 3);
        assert_eq!(script[2].stop_reason, Some(StopReason::Length));
        assert_eq!(script[4].fault, Some(Fault::DropAfter { events: 3 }));
    }
}
