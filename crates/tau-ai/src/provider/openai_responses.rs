//! `openai-responses`: OpenAI's Responses API with reasoning items (their encrypted content
//! carried across turns in the thinking signature), function calls and output messages.

use std::collections::HashMap;

use serde_json::{Map, Value, json};
use tau_protocol::content::{has_images, text_of};
use tau_protocol::{
    AssistantContent, Message, Model, StopReason, ThinkingLevel, UserContent, UserContentBlock,
};

use super::sse::SseEvent;
use super::{
    Adapter, CacheRetention, Context, Flow, HttpRequest, Op, ProviderError, StreamOptions,
    transform, usage_with_cached_prompt,
};

pub(crate) fn build(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
) -> Result<(HttpRequest, Box<dyn Adapter>), ProviderError> {
    let mut headers = super::openai_headers(options)?;
    let body = request_body(model, context, options);
    if let (Some(session), false) = (
        &options.session_id,
        options.cache_retention == CacheRetention::None,
    ) {
        let send_session = model
            .compat
            .as_ref()
            .and_then(|c| c.get("sendSessionIdHeader"))
            .and_then(Value::as_bool)
            != Some(false);
        if send_session {
            headers.push(("session_id".to_string(), session.clone()));
        }
        headers.push(("x-client-request-id".to_string(), session.clone()));
    }
    let request = HttpRequest::post_json(model, options, "/responses", headers, &body, false)?;
    Ok((request, Box::new(Decoder::default())))
}

fn mapped(model: &Model, level: ThinkingLevel) -> Option<Option<Value>> {
    model
        .thinking_level_map
        .as_ref()?
        .get(level.as_str())
        .map(|v| (!v.is_null()).then(|| v.clone()))
}

pub(crate) fn request_body(model: &Model, context: &Context, options: &StreamOptions) -> Value {
    request_body_for(model, context, options, None)
}

/// The longest prompt-cache key the Responses API takes, in characters.
const PROMPT_CACHE_KEY_MAX: usize = 64;

/// The request body; `azure_deployment` makes it Azure's: the deployment named as the model,
/// the session always as the (shortened) cache key, and a mapped effort of `null` meaning the
/// level itself, as pi's Azure provider builds it.
pub(crate) fn request_body_for(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
    azure_deployment: Option<&str>,
) -> Value {
    let azure = azure_deployment.is_some();
    let mut body = Map::new();
    body.insert("model".into(), json!(azure_deployment.unwrap_or(&model.id)));
    body.insert("input".into(), Value::Array(input(model, context)));
    body.insert("stream".into(), json!(true));
    body.insert("store".into(), json!(false));
    if azure {
        if let Some(session) = &options.session_id {
            let key: String = session.chars().take(PROMPT_CACHE_KEY_MAX).collect();
            body.insert("prompt_cache_key".into(), json!(key));
        }
    } else if options.cache_retention != CacheRetention::None
        && let Some(session) = &options.session_id
    {
        body.insert("prompt_cache_key".into(), json!(session));
        if options.cache_retention == CacheRetention::Long {
            body.insert("prompt_cache_retention".into(), json!("24h"));
        }
    }
    body.insert(
        "max_output_tokens".into(),
        json!(options.max_tokens_for(model)),
    );
    if let Some(t) = options.temperature {
        body.insert("temperature".into(), json!(t));
    }
    if !context.tools.is_empty() {
        let tools: Vec<Value> = context
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "name": t.name, "description": t.description,
                       "parameters": t.parameters, "strict": false})
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if model.reasoning {
        match options.thinking() {
            Some(level) => {
                let effort = match mapped(model, level) {
                    Some(Some(v)) => Some(v),
                    Some(None) if !azure => None,
                    Some(None) | None => Some(json!(level.as_str())),
                };
                if let Some(effort) = effort {
                    body.insert(
                        "reasoning".into(),
                        json!({"effort": effort, "summary": "auto"}),
                    );
                    body.insert("include".into(), json!(["reasoning.encrypted_content"]));
                }
            }
            None if azure || model.provider != "github-copilot" => {
                match mapped(model, ThinkingLevel::Off) {
                    Some(None) => {}
                    Some(Some(v)) => {
                        body.insert("reasoning".into(), json!({"effort": v}));
                    }
                    None => {
                        body.insert("reasoning".into(), json!({"effort": "none"}));
                    }
                }
            }
            None => {}
        }
    }
    Value::Object(body)
}

/// A user or tool-result block as a Responses input part (the API takes the same parts for
/// both).
fn input_part(block: &UserContentBlock) -> Value {
    match block {
        UserContentBlock::Text(t) => json!({"type": "input_text", "text": t.text}),
        UserContentBlock::Image(img) => json!({"type": "input_image", "detail": "auto",
            "image_url": format!("data:{};base64,{}", img.mime_type, img.data)}),
    }
}

fn input(model: &Model, context: &Context) -> Vec<Value> {
    let mut out = Vec::new();
    if let Some(system) = context.system_prompt.as_deref().filter(|s| !s.is_empty()) {
        let role = if model.reasoning {
            "developer"
        } else {
            "system"
        };
        out.push(json!({"role": role, "content": system}));
    }
    for (i, message) in transform::prepare(model, &context.messages)
        .into_iter()
        .enumerate()
    {
        match message {
            Message::User(user) => {
                let content: Vec<Value> = match &user.content {
                    UserContent::Text(text) => vec![json!({"type": "input_text", "text": text})],
                    UserContent::Blocks(blocks) => blocks.iter().map(input_part).collect(),
                };
                out.push(json!({"role": "user", "content": content}));
            }
            Message::Assistant(a) => {
                let same = a.provider == model.provider && a.model == model.id;
                for block in &a.content {
                    match block {
                        AssistantContent::Thinking(t) => {
                            if let Some(item) = t
                                .thinking_signature
                                .as_deref()
                                .and_then(|s| serde_json::from_str::<Value>(s).ok())
                                .filter(|v| {
                                    v.get("type").and_then(Value::as_str) == Some("reasoning")
                                })
                            {
                                out.push(item);
                            }
                        }
                        AssistantContent::Text(t) if t.text.is_empty() => {}
                        AssistantContent::Text(t) => {
                            let signature = t
                                .text_signature
                                .as_deref()
                                .and_then(|s| serde_json::from_str::<Value>(s).ok());
                            let id = signature
                                .as_ref()
                                .and_then(|s| s.get("id"))
                                .and_then(Value::as_str)
                                .map(str::to_string)
                                .or_else(|| {
                                    t.text_signature.clone().filter(|s| s.starts_with("msg_"))
                                })
                                .unwrap_or_else(|| format!("msg_{i}"));
                            let mut item = json!({"type": "message", "role": "assistant",
                                "content": [{"type": "output_text", "text": t.text, "annotations": []}],
                                "status": "completed", "id": id});
                            if let Some(phase) = signature.as_ref().and_then(|s| s.get("phase")) {
                                item["phase"] = phase.clone();
                            }
                            out.push(item);
                        }
                        AssistantContent::ToolCall(call) => {
                            let (call_id, item_id) = match call.id.split_once('|') {
                                Some((c, item)) => (c.to_string(), Some(item.to_string())),
                                None => (call.id.clone(), None),
                            };
                            let mut item = json!({"type": "function_call", "call_id": call_id, "name": call.name,
                                "arguments": Value::Object(call.arguments.clone()).to_string()});
                            if let (Some(item_id), true) = (item_id, same) {
                                item["id"] = json!(item_id);
                            }
                            out.push(item);
                        }
                    }
                }
            }
            Message::ToolResult(result) => {
                let call_id = result
                    .tool_call_id
                    .split('|')
                    .next()
                    .unwrap_or_default()
                    .to_string();
                let output = if has_images(&result.content) {
                    Value::Array(result.content.iter().map(input_part).collect())
                } else {
                    json!(text_of(&result.content, "\n"))
                };
                out.push(
                    json!({"type": "function_call_output", "call_id": call_id, "output": output}),
                );
            }
        }
    }
    out
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Reasoning,
    Message,
    FunctionCall,
}

#[derive(Debug, Default)]
pub(crate) struct Decoder {
    next_index: usize,
    /// Output index → (content index, kind, whether deltas arrived).
    items: HashMap<u64, (usize, Kind, bool)>,
    saw_tool: bool,
    completed: bool,
    started: bool,
}

impl Decoder {
    fn item(&mut self, data: &Value) -> Option<&mut (usize, Kind, bool)> {
        let key = data.get("output_index").and_then(Value::as_u64)?;
        self.items.get_mut(&key)
    }
}

fn s<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or_default()
}

impl Adapter for Decoder {
    fn on_event(&mut self, event: SseEvent, ops: &mut Vec<Op>) -> Result<Flow, ProviderError> {
        if event.data.trim().is_empty() || event.data.trim() == "[DONE]" {
            return Ok(Flow::Continue);
        }
        let data: Value = serde_json::from_str(&event.data)
            .map_err(|e| ProviderError::Stream(format!("Invalid stream event: {e}")))?;
        let kind = data
            .get("type")
            .and_then(Value::as_str)
            .or(event.event.as_deref())
            .unwrap_or("");
        if !self.started && kind != "error" {
            self.started = true;
            ops.push(Op::Start);
        }
        match kind {
            "response.created" => {
                if let Some(id) = data
                    .get("response")
                    .and_then(|r| r.get("id"))
                    .and_then(Value::as_str)
                {
                    ops.push(Op::ResponseId(id.to_string()));
                }
            }
            "response.output_item.added" => {
                let item = data.get("item").cloned().unwrap_or(Value::Null);
                let output_index = data
                    .get("output_index")
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
                let index = self.next_index;
                let kind = match s(&item, "type") {
                    "reasoning" => {
                        ops.push(Op::ThinkingStart { redacted: false });
                        Kind::Reasoning
                    }
                    "message" => {
                        ops.push(Op::TextStart);
                        Kind::Message
                    }
                    "function_call" => {
                        self.saw_tool = true;
                        let id = format!("{}|{}", s(&item, "call_id"), s(&item, "id"));
                        ops.push(Op::ToolCallStart {
                            id,
                            name: s(&item, "name").to_string(),
                        });
                        Kind::FunctionCall
                    }
                    _ => return Ok(Flow::Continue),
                };
                self.next_index += 1;
                self.items.insert(output_index, (index, kind, false));
            }
            "response.reasoning_summary_part.added" => {
                if let Some((index, _, has_text)) = self.item(&data).copied()
                    && has_text
                {
                    ops.push(Op::ThinkingDelta {
                        index,
                        text: "\n\n".into(),
                    });
                }
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                if let Some(entry) = self.item(&data) {
                    entry.2 = true;
                    let index = entry.0;
                    ops.push(Op::ThinkingDelta {
                        index,
                        text: s(&data, "delta").to_string(),
                    });
                }
            }
            "response.output_text.delta" | "response.refusal.delta" => {
                if let Some(entry) = self.item(&data) {
                    entry.2 = true;
                    let index = entry.0;
                    ops.push(Op::TextDelta {
                        index,
                        text: s(&data, "delta").to_string(),
                    });
                }
            }
            "response.function_call_arguments.delta" => {
                if let Some(entry) = self.item(&data) {
                    entry.2 = true;
                    let index = entry.0;
                    ops.push(Op::ToolCallDelta {
                        index,
                        json: s(&data, "delta").to_string(),
                    });
                }
            }
            "response.output_item.done" => {
                let item = data.get("item").cloned().unwrap_or(Value::Null);
                if let Some((index, kind, had_deltas)) = self.item(&data).copied() {
                    match kind {
                        Kind::Reasoning => {
                            ops.push(Op::ThinkingSignature {
                                index,
                                signature: item.to_string(),
                                append: false,
                            });
                            ops.push(Op::ThinkingEnd { index });
                        }
                        Kind::Message => {
                            let mut signature = json!({"v": 1, "id": s(&item, "id")});
                            if let Some(phase) = item.get("phase") {
                                signature["phase"] = phase.clone();
                            }
                            ops.push(Op::TextSignature {
                                index,
                                signature: signature.to_string(),
                            });
                            ops.push(Op::TextEnd { index });
                        }
                        Kind::FunctionCall => {
                            if !had_deltas {
                                ops.push(Op::ToolCallDelta {
                                    index,
                                    json: s(&item, "arguments").to_string(),
                                });
                            }
                            ops.push(Op::ToolCallEnd { index });
                        }
                    }
                }
            }
            "response.completed" | "response.incomplete" => {
                let response = data.get("response").cloned().unwrap_or(Value::Null);
                if let Some(usage) = response.get("usage") {
                    let n = |v: Option<&Value>| v.and_then(Value::as_u64).unwrap_or(0);
                    ops.push(Op::Usage(usage_with_cached_prompt(
                        n(usage.get("input_tokens")),
                        n(usage
                            .get("input_tokens_details")
                            .and_then(|d| d.get("cached_tokens"))),
                        n(usage.get("output_tokens")),
                        n(usage.get("total_tokens")),
                    )));
                }
                let reason = match s(&response, "status") {
                    "incomplete" => StopReason::Length,
                    "failed" | "cancelled" => StopReason::Error,
                    _ if self.saw_tool => StopReason::ToolUse,
                    _ => StopReason::Stop,
                };
                ops.push(Op::StopReason(reason));
                self.completed = true;
                return Ok(Flow::Done);
            }
            "error" => {
                return Err(ProviderError::Stream(format!(
                    "Error Code {}: {}",
                    data.get("code")
                        .map(|c| c.as_str().map_or_else(|| c.to_string(), str::to_string))
                        .unwrap_or_default(),
                    s(&data, "message")
                )));
            }
            "response.failed" => {
                let response = data.get("response").cloned().unwrap_or(Value::Null);
                let message = match response.get("error") {
                    Some(error) if !error.is_null() => {
                        format!("{}: {}", s(error, "code"), s(error, "message"))
                    }
                    _ => format!(
                        "incomplete: {}",
                        response
                            .get("incomplete_details")
                            .map(|d| s(d, "reason").to_string())
                            .unwrap_or_default()
                    ),
                };
                return Err(ProviderError::Stream(message));
            }
            _ => {}
        }
        Ok(Flow::Continue)
    }

    fn on_end(&mut self, _ops: &mut Vec<Op>) -> Result<(), ProviderError> {
        if self.completed {
            Ok(())
        } else {
            Err(ProviderError::Stream(
                "The stream ended before response.completed".into(),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{data, decode};
    use super::*;

    #[test]
    fn reasoning_message_and_call() {
        let events = [
            r#"{"type":"response.created","response":{"id":"resp_1"}}"#,
            r#"{"type":"response.output_item.added","output_index":0,"item":{"type":"reasoning","id":"rs_1"}}"#,
            r#"{"type":"response.reasoning_summary_part.added","output_index":0}"#,
            r#"{"type":"response.reasoning_summary_text.delta","output_index":0,"delta":"think"}"#,
            r#"{"type":"response.reasoning_summary_part.added","output_index":0}"#,
            r#"{"type":"response.reasoning_summary_text.delta","output_index":0,"delta":"more"}"#,
            r#"{"type":"response.output_item.done","output_index":0,"item":{"type":"reasoning","id":"rs_1","encrypted_content":"enc"}}"#,
            r#"{"type":"response.output_item.added","output_index":1,"item":{"type":"message","id":"msg_1"}}"#,
            r#"{"type":"response.output_text.delta","output_index":1,"delta":"Hi"}"#,
            r#"{"type":"response.output_item.done","output_index":1,"item":{"type":"message","id":"msg_1"}}"#,
            r#"{"type":"response.output_item.added","output_index":2,"item":{"type":"function_call","id":"fc_1","call_id":"call_1","name":"bash"}}"#,
            r#"{"type":"response.function_call_arguments.delta","output_index":2,"delta":"{\"command\":\"ls\"}"}"#,
            r#"{"type":"response.output_item.done","output_index":2,"item":{"type":"function_call","id":"fc_1","call_id":"call_1","name":"bash","arguments":"{\"command\":\"ls\"}"}}"#,
            r#"{"type":"response.completed","response":{"status":"completed","usage":{"input_tokens":50,"input_tokens_details":{"cached_tokens":20},"output_tokens":9,"total_tokens":59}}}"#,
        ];
        let (ops, end) = decode(&mut Decoder::default(), events.map(data));
        end.unwrap();
        assert!(ops.contains(&Op::ThinkingDelta {
            index: 0,
            text: "\n\n".into()
        }));
        assert!(ops.contains(&Op::ToolCallStart {
            id: "call_1|fc_1".into(),
            name: "bash".into()
        }));
        assert!(ops.contains(&Op::TextSignature {
            index: 1,
            signature: r#"{"v":1,"id":"msg_1"}"#.into()
        }));
        assert!(ops.iter().any(|o| matches!(o, Op::ThinkingSignature { signature, .. } if signature.contains("\"encrypted_content\":\"enc\""))));
        assert!(ops.contains(&Op::StopReason(StopReason::ToolUse)));
    }

    #[test]
    fn failures_use_pi_texts() {
        // Both fail at the event itself, not at the end of the body.
        let err = Decoder::default()
            .on_event(
                data(r#"{"type":"error","code":"server_error","message":"boom"}"#),
                &mut Vec::new(),
            )
            .unwrap_err();
        assert_eq!(err.to_string(), "Error Code server_error: boom");
        let err = Decoder::default()
            .on_event(
                data(r#"{"type":"response.failed","response":{"error":{"code":"rate_limit_exceeded","message":"slow down"}}}"#),
                &mut Vec::new(),
            )
            .unwrap_err();
        assert_eq!(err.to_string(), "rate_limit_exceeded: slow down");
    }
}
