//! `anthropic-messages`: Anthropic's Messages API with streaming, thinking (budgeted or
//! adaptive), signatures, redacted thinking, tool use with streamed input JSON, and
//! prompt-caching markers.

use std::collections::HashMap;

use serde_json::{Map, Value, json};
use tau_protocol::content::{has_images, text_of, texts};
use tau_protocol::{
    AssistantContent, Message, Model, StopReason, ThinkingLevel, Usage, UserContent,
    UserContentBlock,
};

use super::sse::SseEvent;
use super::{
    Adapter, CacheRetention, Context, Flow, HttpRequest, Op, ProviderError, StreamOptions,
    transform, user_blocks,
};

const API_VERSION: &str = "2023-06-01";
const INTERLEAVED_THINKING_BETA: &str = "interleaved-thinking-2025-05-14";
/// The beta Anthropic requires of requests made with an OAuth access token.
const OAUTH_BETA: &str = "oauth-2025-04-20";
const FINE_GRAINED_TOOL_STREAMING_BETA: &str = "fine-grained-tool-streaming-2025-05-14";

/// Models that take `thinking:{type:"adaptive"}` plus an effort instead of a token budget.
fn is_adaptive(model: &Model) -> bool {
    let id = model.id.to_ascii_lowercase();
    [
        "opus-4-6",
        "opus-4.6",
        "opus-4-7",
        "opus-4.7",
        "sonnet-4-6",
        "sonnet-4.6",
    ]
    .iter()
    .any(|p| id.contains(p))
}

fn compat_flag(model: &Model, key: &str) -> Option<bool> {
    model.compat.as_ref()?.get(key)?.as_bool()
}

pub(crate) fn build(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
) -> Result<(HttpRequest, Box<dyn Adapter>), ProviderError> {
    let key = options.require_key(|| format!("No API key for provider: {}", model.provider))?;
    let eager_tools = compat_flag(model, "supportsEagerToolInputStreaming") != Some(false);
    let body = request_body(model, context, options, eager_tools);
    let mut headers = vec![
        ("content-type".to_string(), "application/json".to_string()),
        ("accept".to_string(), "application/json".to_string()),
        ("anthropic-version".to_string(), API_VERSION.to_string()),
        (
            "anthropic-dangerous-direct-browser-access".to_string(),
            "true".to_string(),
        ),
    ];
    let mut betas = Vec::new();
    // A subscription (OAuth) token goes as a bearer token with Anthropic's OAuth beta, as pi
    // sends it; an API key as `x-api-key`.
    if key.contains("sk-ant-oat") {
        headers.push(("authorization".to_string(), format!("Bearer {key}")));
        betas.push(OAUTH_BETA);
    } else {
        headers.push(("x-api-key".to_string(), key));
    }
    if model.reasoning && !is_adaptive(model) {
        betas.push(INTERLEAVED_THINKING_BETA);
    }
    if !context.tools.is_empty() && !eager_tools {
        betas.push(FINE_GRAINED_TOOL_STREAMING_BETA);
    }
    if !betas.is_empty() {
        headers.push(("anthropic-beta".to_string(), betas.join(",")));
    }
    let request = HttpRequest::post_json(model, options, "/v1/messages", headers, &body, true)?;
    Ok((request, Box::new(Decoder::default())))
}

fn cache_control(retention: CacheRetention, model: &Model) -> Option<Value> {
    match retention {
        CacheRetention::None => None,
        CacheRetention::Short => Some(json!({"type": "ephemeral"})),
        CacheRetention::Long if compat_flag(model, "supportsLongCacheRetention") != Some(false) => {
            Some(json!({"type": "ephemeral", "ttl": "1h"}))
        }
        CacheRetention::Long => Some(json!({"type": "ephemeral"})),
    }
}

fn budget(level: ThinkingLevel, options: &StreamOptions) -> u64 {
    let b = &options.thinking_budgets;
    match level {
        ThinkingLevel::Off => 0,
        ThinkingLevel::Minimal => b.minimal.unwrap_or(1024),
        ThinkingLevel::Low => b.low.unwrap_or(2048),
        ThinkingLevel::Medium => b.medium.unwrap_or(8192),
        ThinkingLevel::High | ThinkingLevel::Xhigh => b.high.unwrap_or(16384),
    }
}

/// Tool-call ids Anthropic accepts: `[a-zA-Z0-9_-]`, at most 64 characters.
fn normalize_id(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect()
}

pub(crate) fn request_body(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
    eager_tools: bool,
) -> Value {
    let cache = cache_control(options.cache_retention, model);
    let mut body = Map::new();
    body.insert("model".into(), json!(model.id));
    let mut messages = messages(model, context);
    if let Some(cache) = &cache {
        mark_last_user_block(&mut messages, cache);
    }
    body.insert("messages".into(), Value::Array(messages));
    let mut max_tokens = options.max_tokens_for(model);
    let level = options.thinking();
    if model.reasoning {
        match level {
            Some(level) if is_adaptive(model) => {
                let effort = model
                    .thinking_level_map
                    .as_ref()
                    .and_then(|m| m.get(level.as_str()))
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .unwrap_or_else(|| {
                        match level {
                            ThinkingLevel::Minimal | ThinkingLevel::Low => "low",
                            ThinkingLevel::Medium => "medium",
                            _ => "high",
                        }
                        .to_string()
                    });
                body.insert(
                    "thinking".into(),
                    json!({"type": "adaptive", "display": "summarized"}),
                );
                body.insert("output_config".into(), json!({"effort": effort}));
            }
            Some(level) => {
                let mut budget_tokens = budget(level, options);
                max_tokens = (max_tokens + budget_tokens).min(model.max_tokens.max(1));
                if max_tokens <= budget_tokens {
                    budget_tokens = max_tokens.saturating_sub(1024);
                }
                body.insert(
                    "thinking".into(),
                    json!({"type": "enabled", "budget_tokens": budget_tokens, "display": "summarized"}),
                );
            }
            None => {
                body.insert("thinking".into(), json!({"type": "disabled"}));
            }
        }
    }
    body.insert("max_tokens".into(), json!(max_tokens));
    body.insert("stream".into(), json!(true));
    if let Some(system) = context.system_prompt.as_deref().filter(|s| !s.is_empty()) {
        let mut block = json!({"type": "text", "text": system});
        if let Some(cache) = &cache {
            block["cache_control"] = cache.clone();
        }
        body.insert("system".into(), json!([block]));
    }
    if level.is_none()
        && let Some(t) = options.temperature
    {
        body.insert("temperature".into(), json!(t));
    }
    if !context.tools.is_empty() {
        let last = context.tools.len() - 1;
        let tools: Vec<Value> = context
            .tools
            .iter()
            .enumerate()
            .map(|(i, tool)| {
                let schema = &tool.parameters;
                let mut entry = json!({
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": {
                        "type": "object",
                        "properties": schema.get("properties").cloned().unwrap_or_else(|| json!({})),
                        "required": schema.get("required").cloned().unwrap_or_else(|| json!([])),
                    },
                });
                if eager_tools {
                    entry["eager_input_streaming"] = json!(true);
                }
                if i == last
                    && let Some(cache) = &cache
                {
                    entry["cache_control"] = cache.clone();
                }
                entry
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(session) = &options.session_id {
        body.insert("metadata".into(), json!({"user_id": session}));
    }
    Value::Object(body)
}

fn image_block(mime: &str, data: &str) -> Value {
    json!({"type": "image", "source": {"type": "base64", "media_type": mime, "data": data}})
}

fn messages(model: &Model, context: &Context) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    let mut results: Vec<Value> = Vec::new();
    let flush = |out: &mut Vec<Value>, results: &mut Vec<Value>| {
        if !results.is_empty() {
            out.push(json!({"role": "user", "content": std::mem::take(results)}));
        }
    };
    for message in transform::prepare(model, &context.messages) {
        match message {
            Message::ToolResult(result) => {
                let content = if has_images(&result.content) {
                    let mut blocks = Vec::new();
                    if texts(&result.content).next().is_none() {
                        blocks.push(json!({"type": "text", "text": "(see attached image)"}));
                    }
                    for block in &result.content {
                        blocks.push(match block {
                            UserContentBlock::Text(t) => json!({"type": "text", "text": t.text}),
                            UserContentBlock::Image(i) => image_block(&i.mime_type, &i.data),
                        });
                    }
                    Value::Array(blocks)
                } else {
                    json!(text_of(&result.content, "\n"))
                };
                results.push(json!({
                    "type": "tool_result",
                    "tool_use_id": normalize_id(&result.tool_call_id),
                    "content": content,
                    "is_error": result.is_error,
                }));
            }
            Message::User(user) => {
                flush(&mut out, &mut results);
                let content = match user.content {
                    UserContent::Text(text) if text.trim().is_empty() => continue,
                    UserContent::Text(text) => json!(text),
                    UserContent::Blocks(blocks) => {
                        let blocks = user_blocks(&blocks, image_block);
                        if blocks.is_empty() {
                            continue;
                        }
                        Value::Array(blocks)
                    }
                };
                out.push(json!({"role": "user", "content": content}));
            }
            Message::Assistant(a) => {
                flush(&mut out, &mut results);
                let blocks: Vec<Value> = a
                    .content
                    .iter()
                    .filter_map(|c| match c {
                        AssistantContent::Text(t) if t.text.is_empty() => None,
                        AssistantContent::Text(t) => Some(json!({"type": "text", "text": t.text})),
                        AssistantContent::Thinking(t) if t.redacted == Some(true) => t
                            .thinking_signature
                            .as_ref()
                            .map(|data| json!({"type": "redacted_thinking", "data": data})),
                        AssistantContent::Thinking(t) => match &t.thinking_signature {
                            Some(sig) if !sig.is_empty() => {
                                Some(json!({"type": "thinking", "thinking": t.thinking, "signature": sig}))
                            }
                            _ if t.thinking.is_empty() => None,
                            _ => Some(json!({"type": "text", "text": t.thinking})),
                        },
                        AssistantContent::ToolCall(call) => Some(json!({
                            "type": "tool_use",
                            "id": normalize_id(&call.id),
                            "name": call.name,
                            "input": Value::Object(call.arguments.clone()),
                        })),
                    })
                    .collect();
                if !blocks.is_empty() {
                    out.push(json!({"role": "assistant", "content": blocks}));
                }
            }
        }
    }
    flush(&mut out, &mut results);
    out
}

/// Puts the cache marker on the last block of the final user message.
fn mark_last_user_block(messages: &mut [Value], cache: &Value) {
    let Some(last) = messages.last_mut() else {
        return;
    };
    if last["role"] != "user" {
        return;
    }
    if let Some(text) = last["content"].as_str() {
        last["content"] = json!([{"type": "text", "text": text}]);
    }
    if let Some(block) = last["content"].as_array_mut().and_then(|b| b.last_mut()) {
        block["cache_control"] = cache.clone();
    }
}

#[derive(Debug, Default)]
struct Decoder {
    next_index: usize,
    /// Anthropic's block index → content index.
    blocks: HashMap<u64, (usize, BlockKind)>,
    usage: Usage,
    stopped: bool,
    started: bool,
    stop_reason: Option<StopReason>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BlockKind {
    Text,
    Thinking,
    ToolUse,
}

fn n(value: &Value, key: &str) -> Option<u64> {
    value.get(key).and_then(Value::as_u64)
}

impl Decoder {
    fn update_usage(&mut self, usage: &Value) {
        if let Some(v) = n(usage, "input_tokens") {
            self.usage.input = v;
        }
        if let Some(v) = n(usage, "output_tokens") {
            self.usage.output = v;
        }
        if let Some(v) = n(usage, "cache_read_input_tokens") {
            self.usage.cache_read = v;
        }
        if let Some(v) = n(usage, "cache_creation_input_tokens") {
            self.usage.cache_write = v;
        }
        let u = &mut self.usage;
        u.total_tokens = u.input + u.output + u.cache_read + u.cache_write;
    }

    fn block(&self, event: &Value) -> Result<(usize, BlockKind), ProviderError> {
        let index = n(event, "index").unwrap_or(0);
        self.blocks.get(&index).copied().ok_or_else(|| {
            ProviderError::Stream(format!(
                "Anthropic stream referred to unknown block {index}"
            ))
        })
    }
}

/// A `content_block_delta` event, read without building a JSON tree: one arrives per delta,
/// so it is the stream's hot path.
#[derive(serde::Deserialize)]
struct DeltaEvent<'a> {
    #[serde(default)]
    index: u64,
    #[serde(borrow)]
    delta: DeltaBody<'a>,
}

#[derive(serde::Deserialize)]
struct DeltaBody<'a> {
    #[serde(rename = "type", borrow)]
    kind: std::borrow::Cow<'a, str>,
    #[serde(borrow, default)]
    text: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    thinking: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    signature: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    partial_json: Option<std::borrow::Cow<'a, str>>,
}

impl Decoder {
    fn on_delta(&mut self, data: &str, ops: &mut Vec<Op>) -> Result<Flow, ProviderError> {
        let event: DeltaEvent<'_> = serde_json::from_str(data)
            .map_err(|e| ProviderError::Stream(format!("Invalid stream event: {e}")))?;
        let Some((index, _)) = self.blocks.get(&event.index).copied() else {
            return Ok(Flow::Continue);
        };
        let owned =
            |v: Option<std::borrow::Cow<'_, str>>| v.map(|c| c.into_owned()).unwrap_or_default();
        let delta = event.delta;
        match delta.kind.as_ref() {
            "text_delta" => ops.push(Op::TextDelta {
                index,
                text: owned(delta.text),
            }),
            "thinking_delta" => ops.push(Op::ThinkingDelta {
                index,
                text: owned(delta.thinking),
            }),
            "signature_delta" => ops.push(Op::ThinkingSignature {
                index,
                signature: owned(delta.signature),
                append: true,
            }),
            "input_json_delta" => {
                let json = owned(delta.partial_json);
                if !json.is_empty() {
                    ops.push(Op::ToolCallDelta { index, json });
                }
            }
            _ => {}
        }
        Ok(Flow::Continue)
    }
}

impl Adapter for Decoder {
    fn on_event(&mut self, event: SseEvent, ops: &mut Vec<Op>) -> Result<Flow, ProviderError> {
        let kind = event.event.as_deref().unwrap_or("");
        if kind == "error" {
            return Err(ProviderError::Stream(event.data));
        }
        if kind == "ping" || event.data.trim().is_empty() {
            return Ok(Flow::Continue);
        }
        if kind == "content_block_delta" {
            return self.on_delta(&event.data, ops);
        }
        let data: Value = serde_json::from_str(&event.data)
            .map_err(|e| ProviderError::Stream(format!("Invalid stream event: {e}")))?;
        let kind = if kind.is_empty() {
            data.get("type").and_then(Value::as_str).unwrap_or("")
        } else {
            kind
        };
        match kind {
            "message_start" => {
                self.started = true;
                let message = data.get("message").cloned().unwrap_or(Value::Null);
                if let Some(id) = message.get("id").and_then(Value::as_str) {
                    ops.push(Op::ResponseId(id.to_string()));
                }
                if let Some(model) = message.get("model").and_then(Value::as_str) {
                    ops.push(Op::ResponseModel(model.to_string()));
                }
                let usage = message.get("usage").unwrap_or(&Value::Null);
                self.update_usage(usage);
                // Only `message_start` carries the one-hour breakdown; 0 without one.
                self.usage.cache_write_1h = Some(
                    usage
                        .get("cache_creation")
                        .and_then(|c| n(c, "ephemeral_1h_input_tokens"))
                        .unwrap_or(0),
                );
                ops.push(Op::Usage(self.usage.clone()));
                // After the usage, so the `start` event's message carries it.
                ops.push(Op::Start);
            }
            "content_block_start" => {
                let index = n(&data, "index").unwrap_or(0);
                let block = data.get("content_block").cloned().unwrap_or(Value::Null);
                let content_index = self.next_index;
                let kind = match block.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        ops.push(Op::TextStart);
                        if let Some(text) = block
                            .get("text")
                            .and_then(Value::as_str)
                            .filter(|t| !t.is_empty())
                        {
                            ops.push(Op::TextDelta {
                                index: content_index,
                                text: text.into(),
                            });
                        }
                        BlockKind::Text
                    }
                    Some("thinking") => {
                        ops.push(Op::ThinkingStart { redacted: false });
                        BlockKind::Thinking
                    }
                    Some("redacted_thinking") => {
                        ops.push(Op::ThinkingStart { redacted: true });
                        ops.push(Op::ThinkingDelta {
                            index: content_index,
                            text: "[Reasoning redacted]".into(),
                        });
                        let data = block
                            .get("data")
                            .and_then(Value::as_str)
                            .unwrap_or_default();
                        ops.push(Op::ThinkingSignature {
                            index: content_index,
                            signature: data.to_string(),
                            append: false,
                        });
                        BlockKind::Thinking
                    }
                    Some("tool_use") => {
                        let id = block.get("id").and_then(Value::as_str).unwrap_or_default();
                        let name = block
                            .get("name")
                            .and_then(Value::as_str)
                            .unwrap_or_default();
                        ops.push(Op::ToolCallStart {
                            id: id.into(),
                            name: name.into(),
                        });
                        BlockKind::ToolUse
                    }
                    // Server tools and other block kinds are not part of tau's message model.
                    _ => return Ok(Flow::Continue),
                };
                self.next_index += 1;
                self.blocks.insert(index, (content_index, kind));
            }
            // Only when the server leaves out `event:` lines; named deltas never get here.
            "content_block_delta" => return self.on_delta(&event.data, ops),
            "content_block_stop" => {
                if let Ok((index, kind)) = self.block(&data) {
                    ops.push(match kind {
                        BlockKind::Text => Op::TextEnd { index },
                        BlockKind::Thinking => Op::ThinkingEnd { index },
                        BlockKind::ToolUse => Op::ToolCallEnd { index },
                    });
                }
            }
            "message_delta" => {
                if let Some(usage) = data.get("usage") {
                    self.update_usage(usage);
                    ops.push(Op::Usage(self.usage.clone()));
                }
                if let Some(reason) = data
                    .get("delta")
                    .and_then(|d| d.get("stop_reason"))
                    .and_then(Value::as_str)
                {
                    let mapped = match reason {
                        "end_turn" | "pause_turn" | "stop_sequence" => StopReason::Stop,
                        "max_tokens" => StopReason::Length,
                        "tool_use" => StopReason::ToolUse,
                        "refusal" | "sensitive" => StopReason::Error,
                        other => {
                            return Err(ProviderError::Stream(format!(
                                "Unhandled stop reason: {other}"
                            )));
                        }
                    };
                    self.stop_reason = Some(mapped);
                    ops.push(Op::StopReason(mapped));
                }
            }
            "message_stop" => {
                self.stopped = true;
                return Ok(Flow::Done);
            }
            _ => {}
        }
        Ok(Flow::Continue)
    }

    fn on_end(&mut self, _ops: &mut Vec<Op>) -> Result<(), ProviderError> {
        if !self.stopped {
            return Err(ProviderError::Stream(
                "Anthropic stream ended before message_stop".into(),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{
        self, decode, decode_error, final_usage, named, token_counts, user_text,
    };
    use super::*;
    use tau_protocol::InputModality;

    fn model(id: &str, reasoning: bool) -> Model {
        Model {
            id: id.into(),
            name: id.into(),
            provider: "anthropic".into(),
            base_url: "https://api.anthropic.com".into(),
            reasoning,
            input: vec![InputModality::Text, InputModality::Image],
            context_window: 200_000,
            max_tokens: 64_000,
            ..test_support::model("anthropic-messages")
        }
    }

    fn run(events: &[(&str, &str)]) -> (Vec<Op>, Result<(), ProviderError>) {
        let events = events.iter().map(|(event, data)| named(event, data));
        decode(&mut Decoder::default(), events)
    }

    #[test]
    fn thinking_text_and_tool_use() {
        let (ops, end) = run(&[
            (
                "message_start",
                r#"{"type":"message_start","message":{"id":"msg_1","model":"claude-x","usage":{"input_tokens":100,"output_tokens":1,"cache_read_input_tokens":50,"cache_creation_input_tokens":10}}}"#,
            ),
            (
                "content_block_start",
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"plan"}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sig"}}"#,
            ),
            (
                "content_block_stop",
                r#"{"type":"content_block_stop","index":0}"#,
            ),
            (
                "content_block_start",
                r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"bash","input":{}}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"command\":"}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\"ls\"}"}}"#,
            ),
            (
                "content_block_stop",
                r#"{"type":"content_block_stop","index":1}"#,
            ),
            (
                "message_delta",
                r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":30}}"#,
            ),
            ("message_stop", r#"{"type":"message_stop"}"#),
        ]);
        end.unwrap();
        assert!(ops.contains(&Op::ThinkingSignature {
            index: 0,
            signature: "sig".into(),
            append: true
        }));
        assert!(ops.contains(&Op::ToolCallStart {
            id: "toolu_1".into(),
            name: "bash".into()
        }));
        assert!(ops.contains(&Op::ToolCallEnd { index: 1 }));
        assert!(ops.contains(&Op::StopReason(StopReason::ToolUse)));
        let usage = final_usage(&ops);
        assert_eq!(token_counts(&usage), (100, 30, 50, 10, 190));
        // No breakdown from the provider: pi's 0.
        assert_eq!(usage.cache_write_1h, Some(0));
    }

    #[test]
    fn the_one_hour_cache_breakdown_is_read_and_usage_comes_before_start() {
        let (ops, _) = run(&[(
            "message_start",
            r#"{"type":"message_start","message":{"id":"m","usage":{"input_tokens":7,"cache_creation_input_tokens":30,"cache_creation":{"ephemeral_5m_input_tokens":10,"ephemeral_1h_input_tokens":20}}}}"#,
        )]);
        let usage_at = ops.iter().position(|o| matches!(o, Op::Usage(_)));
        let start_at = ops.iter().position(|o| matches!(o, Op::Start));
        assert!(usage_at < start_at && start_at.is_some(), "{ops:?}");
        let Some(Op::Usage(usage)) = usage_at.map(|i| &ops[i]) else {
            panic!("no usage in {ops:?}");
        };
        assert_eq!((usage.cache_write, usage.cache_write_1h), (30, Some(20)));
    }

    #[test]
    fn a_stream_without_message_stop_fails() {
        let error = decode_error(
            &mut Decoder::default(),
            [named(
                "message_start",
                r#"{"type":"message_start","message":{"id":"m","usage":{}}}"#,
            )],
        );
        assert_eq!(error, "Anthropic stream ended before message_stop");
    }

    #[test]
    fn budget_thinking_and_cache_markers() {
        let ctx = Context {
            system_prompt: Some("sys".into()),
            messages: vec![user_text("hi")],
            tools: vec![],
        };
        let options = StreamOptions {
            reasoning: Some(ThinkingLevel::Medium),
            ..Default::default()
        };
        let body = request_body(&model("claude-sonnet-4-5", true), &ctx, &options, true);
        assert_eq!(
            body["thinking"],
            json!({"type": "enabled", "budget_tokens": 8192, "display": "summarized"})
        );
        assert_eq!(body["max_tokens"], json!(32000 + 8192));
        assert_eq!(
            body["system"][0]["cache_control"],
            json!({"type": "ephemeral"})
        );
        assert_eq!(
            body["messages"][0]["content"][0]["cache_control"],
            json!({"type": "ephemeral"})
        );
        let adaptive = request_body(&model("claude-opus-4-7", true), &ctx, &options, true);
        assert_eq!(adaptive["thinking"]["type"], json!("adaptive"));
        assert_eq!(adaptive["output_config"], json!({"effort": "medium"}));
        let off = request_body(
            &model("claude-sonnet-4-5", true),
            &ctx,
            &StreamOptions::default(),
            true,
        );
        assert_eq!(off["thinking"], json!({"type": "disabled"}));
    }

    #[test]
    fn consecutive_tool_results_share_one_user_message() {
        use tau_protocol::{AssistantMessage, TextContent, ToolCall, ToolResultMessage};
        let m = model("claude-sonnet-4-5", false);
        let call = |id: &str| {
            AssistantContent::ToolCall(ToolCall {
                id: id.into(),
                name: "bash".into(),
                arguments: Map::new(),
                thought_signature: None,
            })
        };
        let result = |id: &str| {
            Message::ToolResult(ToolResultMessage {
                tool_call_id: id.into(),
                tool_name: "bash".into(),
                content: vec![UserContentBlock::Text(TextContent {
                    text: format!("out {id}"),
                    text_signature: None,
                })],
                details: None,
                is_error: false,
                timestamp: 0,
            })
        };
        let assistant = Message::Assistant(AssistantMessage {
            content: vec![call("a"), call("b.c")],
            api: m.api.clone(),
            provider: m.provider.clone(),
            model: m.id.clone(),
            usage: Usage::default(),
            stop_reason: StopReason::ToolUse,
            timestamp: 0,
            response_id: None,
            response_model: None,
            diagnostics: None,
            error_message: None,
            retry_after_ms: None,
        });
        let ctx = Context {
            system_prompt: None,
            messages: vec![assistant, result("a"), result("b.c")],
            tools: vec![],
        };
        let msgs = messages(&m, &ctx);
        assert_eq!(msgs.len(), 2);
        assert_eq!(msgs[1]["content"].as_array().unwrap().len(), 2);
        assert_eq!(msgs[1]["content"][1]["tool_use_id"], json!("b_c"));
    }
}
