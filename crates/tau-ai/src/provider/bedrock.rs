//! `bedrock-converse-stream`: Amazon Bedrock's Converse stream API
//! (`POST /model/{modelId}/converse-stream`). The request is Converse's JSON (messages of
//! content blocks, the system prompt, tool specs, cache points, Claude's thinking in the
//! additional model fields), signed per attempt ([`super::sigv4`]); the reply is AWS's binary
//! event stream ([`super::event_stream`]), whose events map onto tau's as pi maps them: text,
//! reasoning content with its signature, tool uses with streamed input JSON, the stop reason
//! and the usage, and the modelled exceptions with pi's wording.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Map, Value, json};
use tau_protocol::{
    AssistantContent, Message, Model, StopReason, ThinkingLevel, Usage, UserContent,
    UserContentBlock,
};

use super::sse::SseEvent;
use super::{
    Adapter, CacheRetention, Context, ErrorStyle, Flow, Framing, HttpRequest, Op, ProviderEnv,
    ProviderError, StreamOptions, error, sigv4, transform,
};

/// What Bedrock gets in place of text it would reject as blank.
const EMPTY_TEXT: &str = "<empty>";
const INTERLEAVED_THINKING_BETA: &str = "interleaved-thinking-2025-05-14";

/// The model's id and name, lower-cased and with separators made `-`, for pi's name checks
/// (an application inference profile's ARN names no model; its `name` may).
fn candidates(model: &Model) -> Vec<String> {
    [model.id.as_str(), model.name.as_str()]
        .iter()
        .filter(|s| !s.is_empty())
        .flat_map(|s| {
            let lower = s.to_lowercase();
            let dashed: String = lower
                .chars()
                .map(|c| {
                    if c.is_whitespace() || "_.:".contains(c) {
                        '-'
                    } else {
                        c
                    }
                })
                .collect();
            [lower, dashed]
        })
        .collect()
}

fn is_claude(model: &Model) -> bool {
    let id = model.id.to_lowercase();
    let name = model.name.to_lowercase();
    id.contains("anthropic.claude") || id.contains("anthropic/claude") || name.contains("claude")
}

fn any_candidate(model: &Model, needles: &[&str]) -> bool {
    candidates(model)
        .iter()
        .any(|c| needles.iter().any(|n| c.contains(n)))
}

fn adaptive_thinking(model: &Model) -> bool {
    any_candidate(
        model,
        &["opus-4-6", "opus-4-7", "opus-4-8", "sonnet-4-6", "fable-5"],
    )
}

fn prompt_caching(model: &Model, env: &ProviderEnv) -> bool {
    if !any_candidate(model, &["claude"]) {
        // Application inference profiles hide the model; the user can force cache points.
        return env.get("AWS_BEDROCK_FORCE_CACHE").as_deref() == Some("1");
    }
    any_candidate(model, &["-4-", "claude-3-7-sonnet", "claude-3-5-haiku"])
}

/// Tool-use ids Bedrock accepts: `[a-zA-Z0-9_-]`, at most 64 characters.
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

/// A path label as the AWS SDKs escape it: everything but unreserved characters.
fn escape_label(label: &str) -> String {
    let mut out = String::with_capacity(label.len());
    for byte in label.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

pub(crate) fn build(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
) -> Result<(HttpRequest, Box<dyn Adapter>), ProviderError> {
    let env = &options.env;
    // The shared files matter only for a named profile or when nothing else gives keys; an
    // unreadable one must not fail a request that does not need it.
    let needs_profile = env.get("AWS_PROFILE").is_some()
        || !(env.get("AWS_BEARER_TOKEN_BEDROCK").is_some()
            || env.get("AWS_BEDROCK_SKIP_AUTH").as_deref() == Some("1")
            || (env.get("AWS_ACCESS_KEY_ID").is_some()
                && env.get("AWS_SECRET_ACCESS_KEY").is_some()));
    let profile = if needs_profile {
        sigv4::load_profile(env)?
    } else {
        sigv4::Profile::new()
    };
    let (endpoint, region) = sigv4::endpoint_and_region(&model.id, &model.base_url, env, &profile);
    let auth = sigv4::resolve(env, &profile, region.clone())?;
    let body = request_body(model, context, options, &region)?;
    let mut headers = vec![
        ("content-type".to_string(), "application/json".to_string()),
        (
            "accept".to_string(),
            "application/vnd.amazon.eventstream".to_string(),
        ),
    ];
    let mut extra = Vec::new();
    super::add_request_headers(&mut extra, model, options);
    // The signature and the credentials own these; the caller's may not replace them.
    headers.extend(extra.into_iter().filter(|(name, _)| {
        let name = name.to_ascii_lowercase();
        !(name.starts_with("x-amz-") || name == "authorization" || name == "host")
    }));
    let url = format!(
        "{endpoint}/model/{}/converse-stream",
        escape_label(&model.id)
    );
    let mut request = HttpRequest::post_json_to(url, headers, &body, ErrorStyle::Bedrock)?;
    request.auth = Some(Arc::new(auth));
    request.framing = Framing::EventStream;
    Ok((request, Box::new(Decoder::default())))
}

fn cache_point(retention: CacheRetention) -> Value {
    match retention {
        CacheRetention::Long => json!({"cachePoint": {"type": "default", "ttl": "1h"}}),
        _ => json!({"cachePoint": {"type": "default"}}),
    }
}

fn image(mime: &str, data: &str) -> Result<Value, ProviderError> {
    let format = match mime {
        "image/jpeg" | "image/jpg" => "jpeg",
        "image/png" => "png",
        "image/gif" => "gif",
        "image/webp" => "webp",
        other => {
            return Err(ProviderError::Config(format!(
                "Unknown image type: {other}"
            )));
        }
    };
    // Converse's JSON carries the image's bytes as base64, which the data already is.
    Ok(json!({"image": {"format": format, "source": {"bytes": data}}}))
}

fn text_block(text: &str) -> Option<Value> {
    (!text.trim().is_empty()).then(|| json!({"text": text}))
}

fn tool_result_content(blocks: &[UserContentBlock]) -> Result<Vec<Value>, ProviderError> {
    let mut out = Vec::new();
    for block in blocks {
        match block {
            UserContentBlock::Image(i) => out.push(image(&i.mime_type, &i.data)?),
            UserContentBlock::Text(t) => out.extend(text_block(&t.text)),
        }
    }
    if out.is_empty() {
        out.push(json!({"text": EMPTY_TEXT}));
    }
    Ok(out)
}

fn messages(model: &Model, context: &Context) -> Result<Vec<Value>, ProviderError> {
    let claude = is_claude(model);
    let mut out: Vec<Value> = Vec::new();
    // Consecutive tool results go back as one user message, as Bedrock requires.
    let mut results: Vec<Value> = Vec::new();
    let flush = |out: &mut Vec<Value>, results: &mut Vec<Value>| {
        if !results.is_empty() {
            out.push(json!({"role": "user", "content": std::mem::take(results)}));
        }
    };
    for message in transform::prepare(model, &context.messages) {
        match message {
            Message::ToolResult(result) => {
                let status = if result.is_error { "error" } else { "success" };
                results.push(json!({"toolResult": {
                    "toolUseId": normalize_id(&result.tool_call_id),
                    "content": tool_result_content(&result.content)?,
                    "status": status,
                }}));
            }
            Message::User(user) => {
                flush(&mut out, &mut results);
                let content = match &user.content {
                    UserContent::Text(text) => {
                        vec![text_block(text).unwrap_or_else(|| json!({"text": EMPTY_TEXT}))]
                    }
                    UserContent::Blocks(blocks) => {
                        let mut content = Vec::new();
                        for block in blocks {
                            match block {
                                UserContentBlock::Text(t) => content.extend(text_block(&t.text)),
                                UserContentBlock::Image(i) => {
                                    content.push(image(&i.mime_type, &i.data)?);
                                }
                            }
                        }
                        if content.is_empty() {
                            content.push(json!({"text": EMPTY_TEXT}));
                        }
                        content
                    }
                };
                out.push(json!({"role": "user", "content": content}));
            }
            Message::Assistant(a) => {
                flush(&mut out, &mut results);
                let mut content = Vec::new();
                for block in &a.content {
                    match block {
                        AssistantContent::Text(t) => content.extend(text_block(&t.text)),
                        AssistantContent::ToolCall(call) => content.push(json!({"toolUse": {
                            "toolUseId": normalize_id(&call.id),
                            "name": call.name,
                            "input": Value::Object(call.arguments.clone()),
                        }})),
                        AssistantContent::Thinking(t) if t.thinking.trim().is_empty() => {}
                        AssistantContent::Thinking(t) => {
                            // Only Claude takes a signature here, and rejects a replayed
                            // reasoning block without one: that goes back as text (pi's rule).
                            let signature = t
                                .thinking_signature
                                .as_deref()
                                .filter(|s| !s.trim().is_empty());
                            content.push(match (claude, signature) {
                                (true, Some(signature)) => json!({"reasoningContent": {
                                    "reasoningText": {"text": t.thinking, "signature": signature}}}),
                                (true, None) => json!({"text": t.thinking}),
                                (false, _) => json!({"reasoningContent": {
                                    "reasoningText": {"text": t.thinking}}}),
                            });
                        }
                    }
                }
                if !content.is_empty() {
                    out.push(json!({"role": "assistant", "content": content}));
                }
            }
        }
    }
    flush(&mut out, &mut results);
    Ok(out)
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

fn effort(model: &Model, level: ThinkingLevel) -> String {
    if level == ThinkingLevel::Xhigh && any_candidate(model, &["opus-4-7", "opus-4-8", "fable-5"]) {
        return "xhigh".into();
    }
    if let Some(mapped) = model
        .thinking_level_map
        .as_ref()
        .and_then(|m| m.get(level.as_str()))
        .and_then(Value::as_str)
    {
        return mapped.to_string();
    }
    match level {
        ThinkingLevel::Minimal | ThinkingLevel::Low => "low",
        ThinkingLevel::Medium => "medium",
        _ => "high",
    }
    .into()
}

pub(crate) fn request_body(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
    region: &str,
) -> Result<Value, ProviderError> {
    let env = &options.env;
    let caching = options.cache_retention != CacheRetention::None && prompt_caching(model, env);
    let mut body = Map::new();
    let mut messages = messages(model, context)?;
    if caching
        && let Some(last) = messages.last_mut()
        && last["role"] == "user"
        && let Some(content) = last["content"].as_array_mut()
    {
        content.push(cache_point(options.cache_retention));
    }
    body.insert("messages".into(), Value::Array(messages));
    if let Some(system) = context.system_prompt.as_deref().filter(|s| !s.is_empty()) {
        let mut blocks = vec![json!({"text": system})];
        if caching {
            blocks.push(cache_point(options.cache_retention));
        }
        body.insert("system".into(), Value::Array(blocks));
    }
    let mut max_tokens = options.max_tokens_for(model);
    let mut additional = None;
    if let (Some(level), true, true) = (options.thinking(), model.reasoning, is_claude(model)) {
        // GovCloud's Converse schema rejects Claude's `display` field (pi leaves it out there).
        let gov = region.to_ascii_lowercase().starts_with("us-gov-") || {
            let id = model.id.to_ascii_lowercase();
            id.starts_with("us-gov.") || id.starts_with("arn:aws-us-gov:")
        };
        let mut thinking = if adaptive_thinking(model) {
            json!({"type": "adaptive"})
        } else {
            let mut budget_tokens = budget(level, options);
            max_tokens = (max_tokens + budget_tokens).min(model.max_tokens.max(1));
            if max_tokens <= budget_tokens {
                budget_tokens = max_tokens.saturating_sub(1024);
            }
            json!({"type": "enabled", "budget_tokens": budget_tokens})
        };
        if !gov {
            thinking["display"] = json!("summarized");
        }
        let mut fields = json!({"thinking": thinking});
        if adaptive_thinking(model) {
            fields["output_config"] = json!({"effort": effort(model, level)});
        } else {
            fields["anthropic_beta"] = json!([INTERLEAVED_THINKING_BETA]);
        }
        additional = Some(fields);
    }
    let mut inference = Map::new();
    inference.insert("maxTokens".into(), json!(max_tokens));
    if let Some(t) = options.temperature {
        inference.insert("temperature".into(), json!(t));
    }
    body.insert("inferenceConfig".into(), Value::Object(inference));
    if !context.tools.is_empty() {
        let tools: Vec<Value> = context
            .tools
            .iter()
            .map(|t| {
                json!({"toolSpec": {"name": t.name, "description": t.description,
                "inputSchema": {"json": t.parameters}}})
            })
            .collect();
        body.insert("toolConfig".into(), json!({"tools": tools}));
    }
    if let Some(fields) = additional {
        body.insert("additionalModelRequestFields".into(), fields);
    }
    Ok(Value::Object(body))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Text,
    Thinking,
    ToolCall,
}

#[derive(Debug, Default)]
pub(crate) struct Decoder {
    next_index: usize,
    /// Bedrock's block index → (content index, kind).
    blocks: HashMap<u64, (usize, Kind)>,
    stop: Option<StopReason>,
    finished: bool,
}

fn s<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or_default()
}

impl Decoder {
    fn open(&mut self, at: u64, kind: Kind, ops: &mut Vec<Op>, start: Op) -> usize {
        let index = self.next_index;
        self.next_index += 1;
        self.blocks.insert(at, (index, kind));
        ops.push(start);
        index
    }

    fn close(&mut self, at: u64, ops: &mut Vec<Op>) {
        if let Some((index, kind)) = self.blocks.remove(&at) {
            ops.push(match kind {
                Kind::Text => Op::TextEnd { index },
                Kind::Thinking => Op::ThinkingEnd { index },
                Kind::ToolCall => Op::ToolCallEnd { index },
            });
        }
    }

    /// A `contentBlockDelta`, read into borrowed fields: it is nearly every event, and a
    /// JSON tree per delta (with Bedrock's padding field) cost a dozen allocations.
    fn delta(&mut self, data: &str, ops: &mut Vec<Op>) -> Result<(), ProviderError> {
        let event: BlockDelta<'_> = serde_json::from_str(data)
            .map_err(|e| ProviderError::Stream(format!("Invalid stream event: {e}")))?;
        let at = event.index;
        let Some(delta) = event.delta else {
            return Ok(());
        };
        let open = self.blocks.get(&at).copied();
        if let Some(text) = delta.text {
            // Bedrock starts no block for text: its first delta does.
            let index = match open {
                Some((index, Kind::Text)) => index,
                Some(_) => return Ok(()),
                None => self.open(at, Kind::Text, ops, Op::TextStart),
            };
            ops.push(Op::TextDelta {
                index,
                text: text.into_owned(),
            });
        } else if let Some(tool) = delta.tool_use {
            if let Some((index, Kind::ToolCall)) = open {
                ops.push(Op::ToolCallDelta {
                    index,
                    json: tool.input.map(Cow::into_owned).unwrap_or_default(),
                });
            }
        } else if let Some(reasoning) = delta.reasoning {
            let index = match open {
                Some((index, Kind::Thinking)) => index,
                Some(_) => return Ok(()),
                None => self.open(
                    at,
                    Kind::Thinking,
                    ops,
                    Op::ThinkingStart { redacted: false },
                ),
            };
            if let Some(text) = reasoning.text.filter(|t| !t.is_empty()) {
                ops.push(Op::ThinkingDelta {
                    index,
                    text: text.into_owned(),
                });
            }
            if let Some(signature) = reasoning.signature.filter(|s| !s.is_empty()) {
                ops.push(Op::ThinkingSignature {
                    index,
                    signature: signature.into_owned(),
                    append: true,
                });
            }
        }
        Ok(())
    }
}

/// `contentBlockDelta`'s payload; other fields (Bedrock's `p` padding) are skipped.
#[derive(Deserialize)]
struct BlockDelta<'a> {
    #[serde(rename = "contentBlockIndex", default)]
    index: u64,
    #[serde(borrow, default)]
    delta: Option<DeltaBody<'a>>,
}

#[derive(Deserialize)]
struct DeltaBody<'a> {
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
    #[serde(rename = "toolUse", borrow, default)]
    tool_use: Option<ToolUseDelta<'a>>,
    #[serde(rename = "reasoningContent", borrow, default)]
    reasoning: Option<ReasoningDelta<'a>>,
}

#[derive(Deserialize)]
struct ToolUseDelta<'a> {
    #[serde(borrow, default)]
    input: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct ReasoningDelta<'a> {
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    signature: Option<Cow<'a, str>>,
}

/// An exception's type as its SDK class is named (`throttlingException` →
/// `ThrottlingException`), for pi's prefixes.
fn exception_name(kind: &str) -> String {
    let mut chars = kind.chars();
    chars
        .next()
        .map(|first| first.to_ascii_uppercase().to_string() + chars.as_str())
        .unwrap_or_default()
}

impl Adapter for Decoder {
    fn on_event(&mut self, event: SseEvent, ops: &mut Vec<Op>) -> Result<Flow, ProviderError> {
        let name = event.event.as_deref().unwrap_or_default();
        if let Some(kind) = name.strip_prefix("exception:") {
            let payload: Value = serde_json::from_str(&event.data).unwrap_or(Value::Null);
            let message = payload
                .get("message")
                .or_else(|| payload.get("Message"))
                .and_then(Value::as_str)
                .map_or_else(|| event.data.clone(), str::to_string);
            return Err(ProviderError::Stream(error::bedrock_text(
                &exception_name(kind),
                &message,
            )));
        }
        if let Some(code) = name.strip_prefix("error:") {
            return Err(ProviderError::Stream(format!("{code}: {}", event.data)));
        }
        if name == "contentBlockDelta" {
            self.delta(&event.data, ops)?;
            return Ok(Flow::Continue);
        }
        let data: Value = serde_json::from_str(&event.data)
            .map_err(|e| ProviderError::Stream(format!("Invalid stream event: {e}")))?;
        match name {
            "messageStart" => {
                if s(&data, "role") != "assistant" {
                    return Err(ProviderError::Stream(
                        "Unexpected assistant message start but got user message start instead"
                            .into(),
                    ));
                }
                ops.push(Op::Start);
            }
            "contentBlockStart" => {
                let at = data
                    .get("contentBlockIndex")
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
                if let Some(tool) = data.pointer("/start/toolUse") {
                    let start = Op::ToolCallStart {
                        id: s(tool, "toolUseId").to_string(),
                        name: s(tool, "name").to_string(),
                    };
                    self.open(at, Kind::ToolCall, ops, start);
                }
            }
            "contentBlockStop" => {
                let at = data
                    .get("contentBlockIndex")
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
                self.close(at, ops);
            }
            "messageStop" => {
                let mut open: Vec<u64> = self.blocks.keys().copied().collect();
                open.sort_unstable();
                for at in open {
                    self.close(at, ops);
                }
                self.stop = Some(match s(&data, "stopReason") {
                    "end_turn" | "stop_sequence" => StopReason::Stop,
                    "max_tokens" | "model_context_window_exceeded" => StopReason::Length,
                    "tool_use" => StopReason::ToolUse,
                    other => {
                        return Err(ProviderError::Stream(format!(
                            "Provider finish reason: {other}"
                        )));
                    }
                });
            }
            "metadata" => {
                if let Some(usage) = data.get("usage") {
                    let n = |k: &str| usage.get(k).and_then(Value::as_u64).unwrap_or(0);
                    let (input, output) = (n("inputTokens"), n("outputTokens"));
                    ops.push(Op::Usage(Usage {
                        input,
                        output,
                        cache_read: n("cacheReadInputTokens"),
                        cache_write: n("cacheWriteInputTokens"),
                        total_tokens: match n("totalTokens") {
                            0 => input + output,
                            total => total,
                        },
                        ..Usage::default()
                    }));
                }
                // Metadata comes last; the stream ends after it.
                if let Some(stop) = self.stop {
                    ops.push(Op::StopReason(stop));
                    self.finished = true;
                }
            }
            _ => {}
        }
        Ok(Flow::Continue)
    }

    fn on_end(&mut self, ops: &mut Vec<Op>) -> Result<(), ProviderError> {
        match (self.finished, self.stop) {
            (true, _) => Ok(()),
            (false, Some(stop)) => {
                ops.push(Op::StopReason(stop));
                Ok(())
            }
            (false, None) => Err(ProviderError::Stream(
                "The stream ended without a messageStop event".into(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{
        decode, decode_error, final_usage, model, named, token_counts, user_text,
    };
    use super::*;

    fn claude(id: &str) -> Model {
        Model {
            id: id.into(),
            name: "Claude".into(),
            reasoning: true,
            max_tokens: 64000,
            ..model("bedrock-converse-stream")
        }
    }

    #[test]
    fn thinking_text_and_a_tool_use() {
        let events = [
            named("messageStart", r#"{"role":"assistant","p":"abc"}"#),
            named(
                "contentBlockDelta",
                r#"{"contentBlockIndex":0,"delta":{"reasoningContent":{"text":"hmm"}}}"#,
            ),
            named(
                "contentBlockDelta",
                r#"{"contentBlockIndex":0,"delta":{"reasoningContent":{"signature":"c2ln"}}}"#,
            ),
            named("contentBlockStop", r#"{"contentBlockIndex":0}"#),
            named(
                "contentBlockDelta",
                r#"{"contentBlockIndex":1,"delta":{"text":"Hi"}}"#,
            ),
            named("contentBlockStop", r#"{"contentBlockIndex":1}"#),
            named(
                "contentBlockStart",
                r#"{"contentBlockIndex":2,"start":{"toolUse":{"toolUseId":"tooluse_1","name":"bash"}}}"#,
            ),
            named(
                "contentBlockDelta",
                r#"{"contentBlockIndex":2,"delta":{"toolUse":{"input":"{\"command\":"}}}"#,
            ),
            named(
                "contentBlockDelta",
                r#"{"contentBlockIndex":2,"delta":{"toolUse":{"input":"\"ls\"}"}}}"#,
            ),
            named("contentBlockStop", r#"{"contentBlockIndex":2}"#),
            named("messageStop", r#"{"stopReason":"tool_use"}"#),
            named(
                "metadata",
                r#"{"usage":{"inputTokens":10,"outputTokens":5,"cacheReadInputTokens":100,"cacheWriteInputTokens":7,"totalTokens":122},"metrics":{"latencyMs":9}}"#,
            ),
        ];
        let (ops, end) = decode(&mut Decoder::default(), events);
        end.unwrap();
        assert!(ops.contains(&Op::ThinkingSignature {
            index: 0,
            signature: "c2ln".into(),
            append: true
        }));
        assert!(ops.contains(&Op::TextDelta {
            index: 1,
            text: "Hi".into()
        }));
        assert!(ops.contains(&Op::ToolCallStart {
            id: "tooluse_1".into(),
            name: "bash".into()
        }));
        assert!(ops.contains(&Op::ToolCallEnd { index: 2 }));
        assert_eq!(ops.last(), Some(&Op::StopReason(StopReason::ToolUse)));
        assert_eq!(token_counts(&final_usage(&ops)), (10, 5, 100, 7, 122));
    }

    #[test]
    fn exceptions_and_odd_stops_use_pi_texts() {
        let error = decode_error(
            &mut Decoder::default(),
            [named(
                "exception:modelStreamErrorException",
                r#"{"message":"The model failed"}"#,
            )],
        );
        assert_eq!(error, "Model stream error: The model failed");
        let error = decode_error(
            &mut Decoder::default(),
            [
                named("messageStart", r#"{"role":"assistant"}"#),
                named("messageStop", r#"{"stopReason":"guardrail_intervened"}"#),
            ],
        );
        assert_eq!(error, "Provider finish reason: guardrail_intervened");
        let (_, end) = decode(
            &mut Decoder::default(),
            [named("messageStart", r#"{"role":"assistant"}"#)],
        );
        assert_eq!(
            end.unwrap_err().to_string(),
            "The stream ended without a messageStop event"
        );
    }

    #[test]
    fn requests_follow_converse() {
        use tau_protocol::{AssistantMessage, TextContent, ThinkingContent, ToolCall};
        let m = claude("us.anthropic.claude-sonnet-4-5-20250929-v1:0");
        let call = ToolCall {
            id: "call|with:odd".into(),
            name: "bash".into(),
            arguments: serde_json::Map::new(),
            thought_signature: None,
        };
        let assistant = AssistantMessage {
            content: vec![
                AssistantContent::Thinking(ThinkingContent {
                    thinking: "plan".into(),
                    thinking_signature: Some("sig".into()),
                    redacted: None,
                }),
                AssistantContent::Text(TextContent {
                    text: "  ".into(),
                    text_signature: None,
                }),
                AssistantContent::ToolCall(call),
            ],
            api: m.api.clone(),
            provider: m.provider.clone(),
            model: m.id.clone(),
            stop_reason: StopReason::ToolUse,
            ..super::super::empty_message()
        };
        let context = Context {
            system_prompt: Some("sys".into()),
            messages: vec![user_text(" "), Message::Assistant(assistant)],
            tools: Vec::new(),
        };
        let body = request_body(&m, &context, &StreamOptions::default(), "us-east-1").unwrap();
        assert_eq!(body["messages"][0]["content"], json!([{"text": "<empty>"}]));
        assert_eq!(
            body["messages"][1]["content"],
            json!([
                {"reasoningContent": {"reasoningText": {"text": "plan", "signature": "sig"}}},
                {"toolUse": {"toolUseId": "call_with_odd", "name": "bash", "input": {}}}
            ])
        );
        // The unanswered call gets its result, with the same id, and the cache point.
        assert_eq!(
            body["messages"][2]["content"][0]["toolResult"]["toolUseId"],
            "call_with_odd"
        );
        assert_eq!(
            body["messages"][2]["content"]
                .as_array()
                .unwrap()
                .last()
                .unwrap(),
            &json!({"cachePoint": {"type": "default"}})
        );
        assert_eq!(
            body["system"],
            json!([{"text": "sys"}, {"cachePoint": {"type": "default"}}])
        );
        assert!(body.get("toolConfig").is_none());
        assert!(body.get("additionalModelRequestFields").is_none());

        // Adaptive models take an effort; GovCloud gets no `display`.
        let opus = claude("us.anthropic.claude-opus-4-6-v1");
        let options = StreamOptions {
            reasoning: Some(ThinkingLevel::Minimal),
            ..StreamOptions::default()
        };
        let body = request_body(&opus, &context, &options, "us-gov-west-1").unwrap();
        assert_eq!(
            body["additionalModelRequestFields"],
            json!({"thinking": {"type": "adaptive"}, "output_config": {"effort": "low"}})
        );
        // Other vendors' models get no thinking fields, no cache points, and no signature
        // (their own reasoning goes back unsigned; another model's becomes text).
        let nova = Model {
            id: "amazon.nova-pro-v1:0".into(),
            name: "Nova Pro".into(),
            ..claude("x")
        };
        let body = request_body(&nova, &context, &options, "us-east-1").unwrap();
        assert!(body.get("additionalModelRequestFields").is_none());
        assert_eq!(body["system"], json!([{"text": "sys"}]));
        assert_eq!(body["messages"][1]["content"][0], json!({"text": "plan"}));
        let mut own = context.clone();
        if let Message::Assistant(a) = &mut own.messages[1] {
            a.model = nova.id.clone();
        }
        let body = request_body(&nova, &own, &options, "us-east-1").unwrap();
        assert_eq!(
            body["messages"][1]["content"][0],
            json!({"reasoningContent": {"reasoningText": {"text": "plan"}}})
        );
    }

    #[test]
    fn unknown_images_and_escaped_ids() {
        assert_eq!(
            image("image/bmp", "x").unwrap_err().to_string(),
            "Unknown image type: image/bmp"
        );
        assert_eq!(
            escape_label("arn:aws:bedrock:us-east-1:1:inference-profile/x"),
            "arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Ainference-profile%2Fx"
        );
    }
}
