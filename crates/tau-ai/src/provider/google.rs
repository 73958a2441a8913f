//! `google-generative-ai`: Gemini's `streamGenerateContent` with SSE, thought parts, function
//! calls and thought signatures.

use serde_json::{Map, Value, json};
use tau_protocol::content::text_of;
use tau_protocol::{
    AssistantContent, ImageContent, Message, Model, StopReason, ThinkingLevel, UserContent,
    UserContentBlock,
};

use super::sse::SseEvent;
use super::{
    Adapter, Context, Flow, HttpRequest, Op, ProviderError, StreamOptions, transform,
    usage_with_cached_prompt,
};

pub(crate) fn build(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
) -> Result<(HttpRequest, Box<dyn Adapter>), ProviderError> {
    let key = options.require_key(|| format!("No API key for provider: {}", model.provider))?;
    let body = request_body(model, context, options);
    let headers = vec![
        ("content-type".to_string(), "application/json".to_string()),
        ("x-goog-api-key".to_string(), key),
    ];
    let path = format!("/models/{}:streamGenerateContent?alt=sse", model.id);
    let request = HttpRequest::post_json(model, options, &path, headers, &body, false)?;
    Ok((request, Box::new(Decoder::default())))
}

fn gemini_generation(id: &str) -> (bool, bool, bool) {
    let id = id.to_ascii_lowercase();
    let gemini3 = id.contains("gemini-3");
    (
        gemini3 && id.contains("pro"),
        gemini3 && id.contains("flash"),
        id.contains("gemma-4"),
    )
}

fn thinking_config(model: &Model, options: &StreamOptions) -> Option<Value> {
    if !model.reasoning {
        return None;
    }
    let (pro3, flash3, gemma4) = gemini_generation(&model.id);
    let Some(level) = options.thinking() else {
        return Some(if pro3 {
            json!({"thinkingLevel": "LOW"})
        } else if flash3 || gemma4 {
            json!({"thinkingLevel": "MINIMAL"})
        } else {
            json!({"thinkingBudget": 0})
        });
    };
    let named = |l: &str| json!({"includeThoughts": true, "thinkingLevel": l});
    if pro3 {
        return Some(named(match level {
            ThinkingLevel::Minimal | ThinkingLevel::Low => "LOW",
            _ => "HIGH",
        }));
    }
    if flash3 {
        return Some(named(match level {
            ThinkingLevel::Minimal => "MINIMAL",
            ThinkingLevel::Low => "LOW",
            ThinkingLevel::Medium => "MEDIUM",
            _ => "HIGH",
        }));
    }
    if gemma4 {
        return Some(named(match level {
            ThinkingLevel::Minimal | ThinkingLevel::Low => "MINIMAL",
            _ => "HIGH",
        }));
    }
    let id = model.id.to_ascii_lowercase();
    let table: [i64; 4] = if id.contains("2.5-pro") {
        [128, 2048, 8192, 32768]
    } else if id.contains("2.5-flash-lite") {
        [512, 2048, 8192, 24576]
    } else if id.contains("2.5-flash") {
        [128, 2048, 8192, 24576]
    } else {
        [-1, -1, -1, -1]
    };
    let b = &options.thinking_budgets;
    let custom = match level {
        ThinkingLevel::Minimal => b.minimal,
        ThinkingLevel::Low => b.low,
        ThinkingLevel::Medium => b.medium,
        _ => b.high,
    };
    let slot = match level {
        ThinkingLevel::Minimal => 0,
        ThinkingLevel::Low => 1,
        ThinkingLevel::Medium => 2,
        _ => 3,
    };
    let budget = custom.map_or(table[slot], |v| i64::try_from(v).unwrap_or(i64::MAX));
    Some(json!({"includeThoughts": true, "thinkingBudget": budget}))
}

pub(crate) fn request_body(model: &Model, context: &Context, options: &StreamOptions) -> Value {
    let mut body = Map::new();
    body.insert("contents".into(), Value::Array(contents(model, context)));
    if let Some(system) = context.system_prompt.as_deref().filter(|s| !s.is_empty()) {
        body.insert(
            "systemInstruction".into(),
            json!({"role": "user", "parts": [{"text": system}]}),
        );
    }
    if !context.tools.is_empty() {
        let declarations: Vec<Value> = context
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "parametersJsonSchema": t.parameters}))
            .collect();
        body.insert(
            "tools".into(),
            json!([{"functionDeclarations": declarations}]),
        );
    }
    let mut generation = Map::new();
    if let Some(t) = options.temperature {
        generation.insert("temperature".into(), json!(t));
    }
    generation.insert(
        "maxOutputTokens".into(),
        json!(options.max_tokens_for(model)),
    );
    if let Some(config) = thinking_config(model, options) {
        generation.insert("thinkingConfig".into(), config);
    }
    body.insert("generationConfig".into(), Value::Object(generation));
    Value::Object(body)
}

fn inline_data(image: &ImageContent) -> Value {
    json!({"inlineData": {"mimeType": image.mime_type, "data": image.data}})
}

fn contents(model: &Model, context: &Context) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    let mut responses: Vec<Value> = Vec::new();
    let mut images: Vec<Value> = Vec::new();
    let flush = |out: &mut Vec<Value>, responses: &mut Vec<Value>, images: &mut Vec<Value>| {
        if !responses.is_empty() {
            out.push(json!({"role": "user", "parts": std::mem::take(responses)}));
        }
        if !images.is_empty() {
            let mut parts = vec![json!({"text": "Tool result image:"})];
            parts.append(images);
            out.push(json!({"role": "user", "parts": parts}));
        }
    };
    let with_call_ids = {
        let id = model.id.to_ascii_lowercase();
        id.starts_with("claude-") || id.starts_with("gpt-oss-")
    };
    for message in transform::prepare(model, &context.messages) {
        match message {
            Message::ToolResult(result) => {
                let key = if result.is_error { "error" } else { "output" };
                let text = text_of(&result.content, "\n");
                let mut response = json!({"name": result.tool_name, "response": {key: text}});
                if with_call_ids {
                    response["id"] = json!(result.tool_call_id);
                }
                responses.push(json!({"functionResponse": response}));
                for block in &result.content {
                    if let UserContentBlock::Image(i) = block {
                        images.push(inline_data(i));
                    }
                }
            }
            Message::User(user) => {
                flush(&mut out, &mut responses, &mut images);
                let parts: Vec<Value> = match &user.content {
                    UserContent::Text(text) => vec![json!({"text": text})],
                    UserContent::Blocks(blocks) => blocks
                        .iter()
                        .map(|b| match b {
                            UserContentBlock::Text(t) => json!({"text": t.text}),
                            UserContentBlock::Image(i) => inline_data(i),
                        })
                        .collect(),
                };
                if !parts.is_empty() {
                    out.push(json!({"role": "user", "parts": parts}));
                }
            }
            Message::Assistant(a) => {
                flush(&mut out, &mut responses, &mut images);
                let parts: Vec<Value> = a
                    .content
                    .iter()
                    .filter_map(|c| match c {
                        AssistantContent::Text(t) if t.text.is_empty() => None,
                        AssistantContent::Text(t) => {
                            let mut part = json!({"text": t.text});
                            if let Some(sig) = &t.text_signature {
                                part["thoughtSignature"] = json!(sig);
                            }
                            Some(part)
                        }
                        AssistantContent::Thinking(t) if t.thinking.is_empty() => None,
                        AssistantContent::Thinking(t) => {
                            let mut part = json!({"thought": true, "text": t.thinking});
                            if let Some(sig) = &t.thinking_signature {
                                part["thoughtSignature"] = json!(sig);
                            }
                            Some(part)
                        }
                        AssistantContent::ToolCall(call) => {
                            let mut function = json!({"name": call.name, "args": Value::Object(call.arguments.clone())});
                            if with_call_ids {
                                function["id"] = json!(call.id);
                            }
                            let mut part = json!({"functionCall": function});
                            if let Some(sig) = &call.thought_signature {
                                part["thoughtSignature"] = json!(sig);
                            }
                            Some(part)
                        }
                    })
                    .collect();
                if !parts.is_empty() {
                    out.push(json!({"role": "model", "parts": parts}));
                }
            }
        }
    }
    flush(&mut out, &mut responses, &mut images);
    out
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    Text(usize),
    Thinking(usize),
}

#[derive(Debug, Default)]
pub(crate) struct Decoder {
    next_index: usize,
    open: Option<Open>,
    saw_chunk: bool,
    tool_ids: Vec<String>,
    finish: Option<String>,
    counter: u64,
}

impl Decoder {
    fn close(&mut self, ops: &mut Vec<Op>) {
        match self.open.take() {
            Some(Open::Text(index)) => ops.push(Op::TextEnd { index }),
            Some(Open::Thinking(index)) => ops.push(Op::ThinkingEnd { index }),
            None => {}
        }
    }

    fn next(&mut self) -> usize {
        let index = self.next_index;
        self.next_index += 1;
        index
    }
}

impl Adapter for Decoder {
    fn on_event(&mut self, event: SseEvent, ops: &mut Vec<Op>) -> Result<Flow, ProviderError> {
        if event.data.trim().is_empty() {
            return Ok(Flow::Continue);
        }
        let chunk: Value = serde_json::from_str(&event.data)
            .map_err(|e| ProviderError::Stream(format!("Invalid stream chunk: {e}")))?;
        if let Some(error) = chunk.get("error") {
            return Err(ProviderError::in_stream(error));
        }
        if !self.saw_chunk {
            self.saw_chunk = true;
            ops.push(Op::Start);
            if let Some(id) = chunk.get("responseId").and_then(Value::as_str) {
                ops.push(Op::ResponseId(id.to_string()));
            }
            if let Some(version) = chunk.get("modelVersion").and_then(Value::as_str) {
                ops.push(Op::ResponseModel(version.to_string()));
            }
        }
        if let Some(usage) = chunk.get("usageMetadata") {
            let n = |k: &str| usage.get(k).and_then(Value::as_u64).unwrap_or(0);
            ops.push(Op::Usage(usage_with_cached_prompt(
                n("promptTokenCount"),
                n("cachedContentTokenCount"),
                n("candidatesTokenCount") + n("thoughtsTokenCount"),
                n("totalTokenCount"),
            )));
        }
        let Some(candidate) = chunk.get("candidates").and_then(|c| c.get(0)) else {
            return Ok(Flow::Continue);
        };
        let parts = candidate
            .get("content")
            .and_then(|c| c.get("parts"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for part in parts {
            let signature = part
                .get("thoughtSignature")
                .and_then(Value::as_str)
                .map(str::to_string);
            if let Some(call) = part.get("functionCall") {
                self.close(ops);
                let name = call
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                let mut id = call
                    .get("id")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                if id.is_empty() || self.tool_ids.contains(&id) {
                    self.counter += 1;
                    id = format!("{name}_{}_{}", crate::now_ms(), self.counter);
                }
                self.tool_ids.push(id.clone());
                let index = self.next();
                ops.push(Op::ToolCallStart { id, name });
                let args = call.get("args").cloned().unwrap_or_else(|| json!({}));
                ops.push(Op::ToolCallDelta {
                    index,
                    json: args.to_string(),
                });
                if let Some(signature) = signature {
                    ops.push(Op::ToolCallSignature { index, signature });
                }
                ops.push(Op::ToolCallEnd { index });
                continue;
            }
            let Some(text) = part.get("text").and_then(Value::as_str) else {
                continue;
            };
            let thought = part.get("thought").and_then(Value::as_bool) == Some(true);
            let index = match (self.open, thought) {
                (Some(Open::Thinking(i)), true) | (Some(Open::Text(i)), false) => i,
                _ => {
                    self.close(ops);
                    let index = self.next();
                    if thought {
                        ops.push(Op::ThinkingStart { redacted: false });
                        self.open = Some(Open::Thinking(index));
                    } else {
                        ops.push(Op::TextStart);
                        self.open = Some(Open::Text(index));
                    }
                    index
                }
            };
            if !text.is_empty() {
                ops.push(if thought {
                    Op::ThinkingDelta {
                        index,
                        text: text.to_string(),
                    }
                } else {
                    Op::TextDelta {
                        index,
                        text: text.to_string(),
                    }
                });
            }
            if let Some(signature) = signature {
                ops.push(if thought {
                    Op::ThinkingSignature {
                        index,
                        signature,
                        append: false,
                    }
                } else {
                    Op::TextSignature { index, signature }
                });
            }
        }
        if let Some(reason) = candidate.get("finishReason").and_then(Value::as_str) {
            self.finish = Some(reason.to_string());
        }
        Ok(Flow::Continue)
    }

    fn on_end(&mut self, ops: &mut Vec<Op>) -> Result<(), ProviderError> {
        if !self.saw_chunk {
            return Err(ProviderError::Stream(
                "The stream ended without any data".into(),
            ));
        }
        self.close(ops);
        let reason = match self.finish.as_deref() {
            None | Some("STOP") => StopReason::Stop,
            Some("MAX_TOKENS") => StopReason::Length,
            Some(other) => {
                return Err(ProviderError::Stream(format!(
                    "Provider finish reason: {other}"
                )));
            }
        };
        let reason = if self.tool_ids.is_empty() {
            reason
        } else {
            StopReason::ToolUse
        };
        ops.push(Op::StopReason(reason));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{data, decode, decode_error, final_usage, token_counts};
    use super::*;

    #[test]
    fn thoughts_text_and_calls() {
        let events = [
            r#"{"candidates":[{"content":{"role":"model","parts":[{"text":"think","thought":true}]}}],"responseId":"r1","modelVersion":"gemini-x"}"#,
            r#"{"candidates":[{"content":{"role":"model","parts":[{"text":"Hello"},{"functionCall":{"name":"bash","args":{"command":"ls"}},"thoughtSignature":"c2ln"}]}}]}"#,
            r#"{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"read","args":{"path":"a"}}}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":100,"candidatesTokenCount":10,"thoughtsTokenCount":5,"cachedContentTokenCount":40,"totalTokenCount":115}}"#,
        ];
        let (ops, end) = decode(&mut Decoder::default(), events.map(data));
        end.unwrap();
        assert!(ops.contains(&Op::ThinkingEnd { index: 0 }));
        assert!(ops.contains(&Op::TextEnd { index: 1 }));
        assert!(ops.contains(&Op::ToolCallSignature {
            index: 2,
            signature: "c2ln".into()
        }));
        assert!(ops.contains(&Op::ToolCallDelta {
            index: 3,
            json: r#"{"path":"a"}"#.into()
        }));
        assert_eq!(ops.last(), Some(&Op::StopReason(StopReason::ToolUse)));
        assert_eq!(token_counts(&final_usage(&ops)), (60, 15, 40, 0, 115));
    }

    #[test]
    fn safety_stop_is_an_error() {
        let error = decode_error(
            &mut Decoder::default(),
            [data(r#"{"candidates":[{"finishReason":"SAFETY"}]}"#)],
        );
        assert_eq!(error, "Provider finish reason: SAFETY");
    }
}
