//! `openai-completions`: OpenAI's Chat Completions API, which most OpenAI-compatible servers
//! (OpenRouter, Groq, xAI, DeepSeek, Ollama, llama.cpp, vLLM, …) also speak. The `compat`
//! flags of a model (or auto-detection from its provider and base URL) cover their
//! differences.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};
use tau_protocol::content::{has_images, text_of};
use tau_protocol::{
    AssistantContent, Message, Model, StopReason, ThinkingLevel, Usage, UserContent,
    UserContentBlock,
};

use super::sse::SseEvent;
use super::{
    Adapter, Context, Flow, HttpRequest, Op, ProviderError, StreamOptions, transform, user_blocks,
};

/// Differences between OpenAI-compatible servers.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Compat {
    pub supports_store: bool,
    pub supports_developer_role: bool,
    pub supports_reasoning_effort: bool,
    pub supports_usage_in_streaming: bool,
    pub max_tokens_field: String,
    pub requires_tool_result_name: bool,
    pub requires_assistant_after_tool_result: bool,
    pub requires_thinking_as_text: bool,
    pub requires_reasoning_content: bool,
    pub thinking_format: String,
    pub supports_strict_mode: bool,
    pub reasoning_effort_map: Map<String, Value>,
}

impl Compat {
    /// Auto-detection from the provider and base URL, then the model's explicit `compat`.
    pub fn for_model(model: &Model) -> Self {
        let provider = model.provider.to_ascii_lowercase();
        let url = model.base_url.to_ascii_lowercase();
        let is = |names: &[&str]| {
            names
                .iter()
                .any(|n| provider.contains(n) || url.contains(n))
        };
        let official = provider == "openai" || url.contains("api.openai.com");
        let cloudflare_gateway =
            provider == "cloudflare-ai-gateway" || url.contains("gateway.ai.cloudflare");
        let non_standard = is(&[
            "cerebras",
            "x.ai",
            "xai",
            "chutes",
            "deepseek",
            "z.ai",
            "zai",
            "moonshot",
            "opencode",
            "cloudflare",
        ]);
        let thinking_format = if is(&["deepseek"]) {
            "deepseek"
        } else if is(&["z.ai", "zai"]) {
            "zai"
        } else if is(&["openrouter"]) {
            "openrouter"
        } else {
            "openai"
        };
        let mut compat = Compat {
            // Only OpenAI itself is known to accept `store` and the `developer` role; other
            // servers (local ones especially) may reject them.
            supports_store: official,
            supports_developer_role: official && !non_standard,
            supports_reasoning_effort: !is(&["grok", "x.ai", "xai", "z.ai", "zai", "moonshot"])
                && !cloudflare_gateway,
            supports_usage_in_streaming: true,
            max_tokens_field: if is(&["chutes", "moonshot"]) || cloudflare_gateway {
                "max_tokens".into()
            } else {
                "max_completion_tokens".into()
            },
            requires_tool_result_name: false,
            requires_assistant_after_tool_result: false,
            requires_thinking_as_text: false,
            requires_reasoning_content: is(&["deepseek"]),
            thinking_format: thinking_format.into(),
            supports_strict_mode: !is(&["moonshot"]) && !cloudflare_gateway,
            reasoning_effort_map: Map::new(),
        };
        if let Some(Value::Object(explicit)) = &model.compat {
            let flag = |key: &str, slot: &mut bool| {
                if let Some(Value::Bool(b)) = explicit.get(key) {
                    *slot = *b;
                }
            };
            flag("supportsStore", &mut compat.supports_store);
            flag("supportsDeveloperRole", &mut compat.supports_developer_role);
            flag(
                "supportsReasoningEffort",
                &mut compat.supports_reasoning_effort,
            );
            flag(
                "supportsUsageInStreaming",
                &mut compat.supports_usage_in_streaming,
            );
            flag(
                "requiresToolResultName",
                &mut compat.requires_tool_result_name,
            );
            flag(
                "requiresAssistantAfterToolResult",
                &mut compat.requires_assistant_after_tool_result,
            );
            flag(
                "requiresThinkingAsText",
                &mut compat.requires_thinking_as_text,
            );
            flag(
                "requiresReasoningContentOnAssistantMessages",
                &mut compat.requires_reasoning_content,
            );
            flag("supportsStrictMode", &mut compat.supports_strict_mode);
            if let Some(Value::String(field)) = explicit.get("maxTokensField") {
                compat.max_tokens_field = field.clone();
            }
            if let Some(Value::String(format)) = explicit.get("thinkingFormat") {
                compat.thinking_format = format.clone();
            }
            if let Some(Value::Object(map)) = explicit.get("reasoningEffortMap") {
                compat.reasoning_effort_map = map.clone();
            }
        }
        compat
    }
}

pub(crate) fn build(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
) -> Result<(HttpRequest, Box<dyn Adapter>), ProviderError> {
    let headers = super::openai_headers(options)?;
    let compat = Compat::for_model(model);
    let body = request_body(model, context, options, &compat);
    let request =
        HttpRequest::post_json(model, options, "/chat/completions", headers, &body, false)?;
    Ok((request, Box::new(Decoder::default())))
}

/// The JSON body of a Chat Completions request.
pub(crate) fn request_body(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
    compat: &Compat,
) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(model.id));
    body.insert(
        "messages".into(),
        Value::Array(messages(model, context, compat)),
    );
    body.insert("stream".into(), json!(true));
    if compat.supports_usage_in_streaming {
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    if compat.supports_store {
        body.insert("store".into(), json!(false));
    }
    body.insert(
        compat.max_tokens_field.clone(),
        json!(options.max_tokens_for(model)),
    );
    if let Some(t) = options.temperature {
        body.insert("temperature".into(), json!(t));
    }
    let history_has_calls = context.messages.iter().any(|m| {
        matches!(m, Message::Assistant(a) if a.content.iter().any(|c| matches!(c, AssistantContent::ToolCall(_))))
    });
    if !context.tools.is_empty() || history_has_calls {
        let tools: Vec<Value> = context
            .tools
            .iter()
            .map(|tool| {
                let mut function = json!({
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                });
                if compat.supports_strict_mode {
                    function["strict"] = json!(false);
                }
                json!({"type": "function", "function": function})
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if model.reasoning {
        add_reasoning(&mut body, model, options.thinking(), compat);
    }
    Value::Object(body)
}

fn level_value(model: &Model, compat: &Compat, level: ThinkingLevel) -> Option<Value> {
    let key = level.as_str();
    let mapped = model
        .thinking_level_map
        .as_ref()
        .and_then(|m| m.get(key))
        .or_else(|| compat.reasoning_effort_map.get(key));
    match mapped {
        Some(Value::Null) => None,
        Some(v) => Some(v.clone()),
        None if level == ThinkingLevel::Off => None,
        None => Some(json!(key)),
    }
}

fn add_reasoning(
    body: &mut Map<String, Value>,
    model: &Model,
    level: Option<ThinkingLevel>,
    compat: &Compat,
) {
    let on = level.is_some();
    let effort = level_value(model, compat, level.unwrap_or(ThinkingLevel::Off));
    match compat.thinking_format.as_str() {
        "openrouter" => {
            let effort = effort.or_else(|| (!on).then(|| json!("none")));
            if let Some(effort) = effort {
                body.insert("reasoning".into(), json!({"effort": effort}));
            }
        }
        "deepseek" => {
            body.insert(
                "thinking".into(),
                json!({"type": if on { "enabled" } else { "disabled" }}),
            );
            if let (true, Some(effort)) = (on && compat.supports_reasoning_effort, effort) {
                body.insert("reasoning_effort".into(), effort);
            }
        }
        "zai" | "qwen" => {
            body.insert("enable_thinking".into(), json!(on));
        }
        "qwen-chat-template" => {
            body.insert(
                "chat_template_kwargs".into(),
                json!({"enable_thinking": on, "preserve_thinking": true}),
            );
        }
        _ => {
            if compat.supports_reasoning_effort
                && let Some(effort) = effort
            {
                body.insert("reasoning_effort".into(), effort);
            }
        }
    }
}

fn image_part(mime: &str, data: &str) -> Value {
    json!({"type": "image_url", "image_url": {"url": format!("data:{mime};base64,{data}")}})
}

fn messages(model: &Model, context: &Context, compat: &Compat) -> Vec<Value> {
    let mut out = Vec::new();
    if let Some(system) = context.system_prompt.as_deref().filter(|s| !s.is_empty()) {
        let role = if model.reasoning && compat.supports_developer_role {
            "developer"
        } else {
            "system"
        };
        out.push(json!({"role": role, "content": system}));
    }
    let prepared = transform::prepare(model, &context.messages);
    let mut pending_images: Vec<Value> = Vec::new();
    let mut last_was_tool = false;
    for message in &prepared {
        if !matches!(message, Message::ToolResult(_)) {
            flush_images(&mut out, &mut pending_images);
        }
        match message {
            Message::User(user) => {
                if last_was_tool && compat.requires_assistant_after_tool_result {
                    out.push(json!({"role": "assistant", "content": "I have processed the tool results."}));
                }
                let content = match &user.content {
                    UserContent::Text(text) => json!(text),
                    UserContent::Blocks(blocks) => Value::Array(user_blocks(blocks, image_part)),
                };
                out.push(json!({"role": "user", "content": content}));
            }
            Message::Assistant(a) => {
                let text: Vec<&str> = a
                    .content
                    .iter()
                    .filter_map(|c| match c {
                        AssistantContent::Text(t) if !t.text.is_empty() => Some(t.text.as_str()),
                        _ => None,
                    })
                    .collect();
                let thinking: Vec<&tau_protocol::ThinkingContent> = a
                    .content
                    .iter()
                    .filter_map(|c| match c {
                        AssistantContent::Thinking(t) if !t.thinking.is_empty() => Some(t),
                        _ => None,
                    })
                    .collect();
                let calls: Vec<Value> = a
                    .content
                    .iter()
                    .filter_map(|c| match c {
                        AssistantContent::ToolCall(call) => Some(json!({
                            "id": call.id,
                            "type": "function",
                            "function": {
                                "name": call.name,
                                "arguments": Value::Object(call.arguments.clone()).to_string(),
                            },
                        })),
                        _ => None,
                    })
                    .collect();
                let mut content = text.join("");
                let mut entry = Map::new();
                entry.insert("role".into(), json!("assistant"));
                if !thinking.is_empty() {
                    let joined: String = thinking
                        .iter()
                        .map(|t| t.thinking.as_str())
                        .collect::<Vec<_>>()
                        .join("\n");
                    if compat.requires_thinking_as_text {
                        content = format!("{joined}\n\n{content}");
                    } else {
                        let field = thinking[0]
                            .thinking_signature
                            .clone()
                            .filter(|s| {
                                matches!(
                                    s.as_str(),
                                    "reasoning_content" | "reasoning" | "reasoning_text"
                                )
                            })
                            .unwrap_or_else(|| "reasoning_content".into());
                        entry.insert(field, json!(joined));
                    }
                } else if compat.requires_reasoning_content {
                    entry.insert("reasoning_content".into(), json!(""));
                }
                if content.is_empty()
                    && calls.is_empty()
                    && !entry.contains_key("reasoning_content")
                {
                    continue;
                }
                entry.insert(
                    "content".into(),
                    if content.is_empty() {
                        Value::Null
                    } else {
                        json!(content)
                    },
                );
                if !calls.is_empty() {
                    entry.insert("tool_calls".into(), Value::Array(calls));
                }
                out.push(Value::Object(entry));
            }
            Message::ToolResult(result) => {
                let text = text_of(&result.content, "\n");
                let content = if text.is_empty() && has_images(&result.content) {
                    "(see attached image)".to_string()
                } else {
                    text
                };
                let mut entry = json!({"role": "tool", "content": content, "tool_call_id": result.tool_call_id});
                if compat.requires_tool_result_name {
                    entry["name"] = json!(result.tool_name);
                }
                out.push(entry);
                for block in &result.content {
                    if let UserContentBlock::Image(i) = block {
                        pending_images.push(image_part(&i.mime_type, &i.data));
                    }
                }
            }
        }
        last_was_tool = matches!(message, Message::ToolResult(_));
    }
    flush_images(&mut out, &mut pending_images);
    out
}

/// Tool results carry text only in this API, so their images follow as one user message
/// once the run of results ends.
fn flush_images(out: &mut Vec<Value>, images: &mut Vec<Value>) {
    if !images.is_empty() {
        let mut content =
            vec![json!({"type": "text", "text": "Attached image(s) from tool result:"})];
        content.append(images);
        out.push(json!({"role": "user", "content": content}));
    }
}

/// The parts of a `chat.completion.chunk` tau reads. Strings borrow from the event text
/// where they can: one chunk per delta makes this the provider's hot path.
mod wire {
    use std::borrow::Cow;

    use serde::Deserialize;
    use serde_json::Value;

    use tau_base::skim::{Cursor, Unreadable};

    #[derive(Debug, PartialEq, Deserialize)]
    pub struct Chunk<'a> {
        #[serde(borrow, default)]
        pub id: Option<Cow<'a, str>>,
        #[serde(borrow, default)]
        pub model: Option<Cow<'a, str>>,
        /// The first of `choices`, the only one tau reads; holding no `Vec` spares an
        /// allocation per chunk.
        #[serde(borrow, default, rename = "choices", deserialize_with = "first_choice")]
        pub choice: Option<Choice<'a>>,
        #[serde(default)]
        pub usage: Option<Value>,
        #[serde(default)]
        pub error: Option<Value>,
    }

    #[derive(Debug, PartialEq, Deserialize)]
    pub struct Choice<'a> {
        #[serde(borrow, default)]
        pub delta: Option<Delta<'a>>,
        #[serde(borrow, default)]
        pub finish_reason: Option<Cow<'a, str>>,
        #[serde(default)]
        pub usage: Option<Value>,
    }

    #[derive(Debug, PartialEq, Deserialize)]
    pub struct Delta<'a> {
        #[serde(borrow, default)]
        pub content: Option<Cow<'a, str>>,
        #[serde(borrow, default)]
        pub reasoning_content: Option<Cow<'a, str>>,
        #[serde(borrow, default)]
        pub reasoning: Option<Cow<'a, str>>,
        #[serde(borrow, default)]
        pub reasoning_text: Option<Cow<'a, str>>,
        #[serde(borrow, default)]
        pub tool_calls: Option<Vec<ToolCallDelta<'a>>>,
    }

    impl<'a> Chunk<'a> {
        /// The same chunk as `serde_json` would give, read with the skimmer; `Unreadable`
        /// sends the caller to `serde_json`.
        pub fn skim(data: &'a str) -> Result<Self, Unreadable> {
            let mut chunk = Chunk {
                id: None,
                model: None,
                choice: None,
                usage: None,
                error: None,
            };
            Cursor::document(data, |c| {
                c.object(|c, key| {
                    match key {
                        "id" => chunk.id = c.string()?,
                        "model" => chunk.model = c.string()?,
                        "choices" => {
                            chunk.choice = None;
                            c.array(|c, index| {
                                // Only the first choice is ever read.
                                if index == 0 {
                                    chunk.choice = Some(Choice::skim(c)?);
                                    Ok(())
                                } else {
                                    c.skip()
                                }
                            })?;
                        }
                        "usage" => chunk.usage = value(c)?,
                        "error" => chunk.error = value(c)?,
                        _ => c.skip()?,
                    }
                    Ok(())
                })
            })?;
            Ok(chunk)
        }
    }

    impl<'a> Choice<'a> {
        fn skim(c: &mut Cursor<'a>) -> Result<Self, Unreadable> {
            let mut choice = Choice {
                delta: None,
                finish_reason: None,
                usage: None,
            };
            c.object(|c, key| {
                match key {
                    "delta" => choice.delta = Delta::skim(c)?,
                    "finish_reason" => choice.finish_reason = c.string()?,
                    "usage" => choice.usage = value(c)?,
                    _ => c.skip()?,
                }
                Ok(())
            })?;
            Ok(choice)
        }
    }

    impl<'a> Delta<'a> {
        fn skim(c: &mut Cursor<'a>) -> Result<Option<Self>, Unreadable> {
            let mut delta = Delta {
                content: None,
                reasoning_content: None,
                reasoning: None,
                reasoning_text: None,
                tool_calls: None,
            };
            let present = c.object(|c, key| {
                match key {
                    "content" => delta.content = c.string()?,
                    "reasoning_content" => delta.reasoning_content = c.string()?,
                    "reasoning" => delta.reasoning = c.string()?,
                    "reasoning_text" => delta.reasoning_text = c.string()?,
                    "tool_calls" => {
                        delta.tool_calls =
                            serde_json::from_str(c.raw()?).map_err(|_| Unreadable)?;
                    }
                    _ => c.skip()?,
                }
                Ok(())
            })?;
            Ok(present.then_some(delta))
        }
    }

    /// `choices` (an array or `null`) to its first element. The others are still read as
    /// choices and dropped, so that serde_json refuses the same documents as before.
    fn first_choice<'de: 'a, 'a, D>(deserializer: D) -> Result<Option<Choice<'a>>, D::Error>
    where
        D: serde::Deserializer<'de>,
    {
        struct First<'a>(std::marker::PhantomData<Choice<'a>>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for First<'a> {
            type Value = Option<Choice<'a>>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an array of choices or null")
            }
            fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_some<D: serde::Deserializer<'de>>(
                self,
                deserializer: D,
            ) -> Result<Self::Value, D::Error> {
                deserializer.deserialize_seq(self)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Self::Value, A::Error> {
                let first = seq.next_element::<Choice<'a>>()?;
                while seq.next_element::<Choice<'a>>()?.is_some() {}
                Ok(first)
            }
        }
        deserializer.deserialize_option(First(std::marker::PhantomData))
    }

    /// `null` is absent, as serde's `Option<Value>` has it.
    fn value(c: &mut Cursor<'_>) -> Result<Option<Value>, Unreadable> {
        if c.null() {
            return Ok(None);
        }
        serde_json::from_str(c.raw()?)
            .map(Some)
            .map_err(|_| Unreadable)
    }

    #[derive(Debug, PartialEq, Deserialize)]
    pub struct ToolCallDelta<'a> {
        #[serde(default)]
        pub index: Option<u64>,
        #[serde(borrow, default)]
        pub id: Option<Cow<'a, str>>,
        #[serde(borrow, default)]
        pub function: Option<FunctionDelta<'a>>,
    }

    #[derive(Debug, PartialEq, Deserialize)]
    pub struct FunctionDelta<'a> {
        #[serde(borrow, default)]
        pub name: Option<Cow<'a, str>>,
        #[serde(borrow, default)]
        pub arguments: Option<Cow<'a, str>>,
    }
}

/// Stream decoding state.
#[derive(Debug, Default)]
struct Decoder {
    next_index: usize,
    text: Option<usize>,
    thinking: Option<usize>,
    /// Tool calls by the server's `index` (or id): content index.
    tools: BTreeMap<String, usize>,
    finish_reason: Option<String>,
    saw_chunk: bool,
}

impl Decoder {
    fn start_block(&mut self) -> usize {
        let index = self.next_index;
        self.next_index += 1;
        index
    }
}

fn usage_from(value: &Value) -> Usage {
    let n = |v: Option<&Value>| v.and_then(Value::as_u64);
    let prompt = n(value.get("prompt_tokens")).unwrap_or(0);
    let completion = n(value.get("completion_tokens")).unwrap_or(0);
    let details = value.get("prompt_tokens_details");
    let cache_write = n(details.and_then(|d| d.get("cache_write_tokens"))).unwrap_or(0);
    let cached = n(details.and_then(|d| d.get("cached_tokens")))
        .or_else(|| n(value.get("prompt_cache_hit_tokens")))
        .unwrap_or(0);
    let cache_read = cached.saturating_sub(cache_write);
    let input = prompt
        .saturating_sub(cache_read)
        .saturating_sub(cache_write);
    Usage {
        input,
        output: completion,
        cache_read,
        cache_write,
        cache_write_1h: None,
        total_tokens: input + completion + cache_read + cache_write,
        cost: Default::default(),
    }
}

impl Adapter for Decoder {
    fn on_event(&mut self, event: SseEvent, ops: &mut Vec<Op>) -> Result<Flow, ProviderError> {
        let data = event.data.trim();
        if data == "[DONE]" {
            return Ok(Flow::Done);
        }
        if data.is_empty() {
            return Ok(Flow::Continue);
        }
        let chunk = match wire::Chunk::skim(data) {
            Ok(chunk) => chunk,
            Err(_) => serde_json::from_str(data)
                .map_err(|e| ProviderError::Stream(format!("Invalid stream chunk: {e}")))?,
        };
        if let Some(error) = &chunk.error {
            return Err(ProviderError::in_stream(error));
        }
        if !self.saw_chunk {
            self.saw_chunk = true;
            ops.push(Op::Start);
            if let Some(id) = &chunk.id {
                ops.push(Op::ResponseId(id.to_string()));
            }
            if let Some(model) = &chunk.model {
                ops.push(Op::ResponseModel(model.to_string()));
            }
        }
        let choice = chunk.choice;
        if let Some(usage) = chunk
            .usage
            .as_ref()
            .or_else(|| choice.as_ref().and_then(|c| c.usage.as_ref()))
            && usage.is_object()
        {
            ops.push(Op::Usage(usage_from(usage)));
        }
        let Some(choice) = choice else {
            return Ok(Flow::Continue);
        };
        if let Some(reason) = &choice.finish_reason {
            self.finish_reason = Some(reason.to_string());
        }
        let Some(delta) = choice.delta else {
            return Ok(Flow::Continue);
        };
        let thinking = [
            ("reasoning_content", delta.reasoning_content),
            ("reasoning", delta.reasoning),
            ("reasoning_text", delta.reasoning_text),
        ]
        .into_iter()
        .find_map(|(field, text)| text.filter(|t| !t.is_empty()).map(|t| (field, t)));
        if let Some((field, text)) = thinking {
            let index = match self.thinking {
                Some(index) => index,
                None => {
                    let index = self.start_block();
                    self.thinking = Some(index);
                    ops.push(Op::ThinkingStart { redacted: false });
                    ops.push(Op::ThinkingSignature {
                        index,
                        signature: field.to_string(),
                        append: false,
                    });
                    index
                }
            };
            ops.push(Op::ThinkingDelta {
                index,
                text: text.into_owned(),
            });
        }
        if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
            let index = match self.text {
                Some(index) => index,
                None => {
                    let index = self.start_block();
                    self.text = Some(index);
                    ops.push(Op::TextStart);
                    index
                }
            };
            ops.push(Op::TextDelta {
                index,
                text: text.into_owned(),
            });
        }
        for call in delta.tool_calls.unwrap_or_default() {
            let key = match (call.index, &call.id) {
                (Some(i), _) => i.to_string(),
                (None, Some(id)) => id.to_string(),
                (None, None) => String::new(),
            };
            let index = match self.tools.get(&key) {
                Some(index) => *index,
                None => {
                    let index = self.start_block();
                    self.tools.insert(key, index);
                    let name = call
                        .function
                        .as_ref()
                        .and_then(|f| f.name.as_deref())
                        .unwrap_or_default();
                    ops.push(Op::ToolCallStart {
                        id: call.id.as_deref().unwrap_or_default().to_string(),
                        name: name.to_string(),
                    });
                    index
                }
            };
            if let Some(args) = call
                .function
                .and_then(|f| f.arguments)
                .filter(|a| !a.is_empty())
            {
                ops.push(Op::ToolCallDelta {
                    index,
                    json: args.into_owned(),
                });
            }
        }
        Ok(Flow::Continue)
    }

    fn on_end(&mut self, ops: &mut Vec<Op>) -> Result<(), ProviderError> {
        if !self.saw_chunk {
            return Err(ProviderError::Stream(
                "The stream ended without any data".into(),
            ));
        }
        // Chat Completions has no block boundaries: every block ends with the stream.
        let mut ends: Vec<(usize, Op)> = Vec::new();
        if let Some(index) = self.thinking {
            ends.push((index, Op::ThinkingEnd { index }));
        }
        if let Some(index) = self.text {
            ends.push((index, Op::TextEnd { index }));
        }
        for index in self.tools.values() {
            ends.push((*index, Op::ToolCallEnd { index: *index }));
        }
        ends.sort_by_key(|(index, _)| *index);
        ops.extend(ends.into_iter().map(|(_, op)| op));
        let reason = match self.finish_reason.as_deref() {
            None | Some("stop") | Some("end") => {
                if self.tools.is_empty() {
                    StopReason::Stop
                } else {
                    StopReason::ToolUse
                }
            }
            Some("length") => StopReason::Length,
            Some("tool_calls") | Some("function_call") => StopReason::ToolUse,
            Some(other) => {
                return Err(ProviderError::Stream(format!(
                    "Provider finish_reason: {other}"
                )));
            }
        };
        ops.push(Op::StopReason(reason));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{
        self, data, decode_error, final_usage, token_counts, user_text,
    };
    use super::*;

    fn model(provider: &str, url: &str, reasoning: bool) -> Model {
        Model {
            provider: provider.into(),
            base_url: url.into(),
            reasoning,
            ..test_support::model("openai-completions")
        }
    }

    fn decode(lines: &[&str]) -> (Vec<Op>, Result<(), ProviderError>) {
        test_support::decode(&mut Decoder::default(), lines.iter().map(|line| data(line)))
    }

    #[test]
    fn text_thinking_and_two_tool_calls() {
        let (ops, end) = decode(&[
            r#"{"id":"c1","model":"m","choices":[{"delta":{"role":"assistant","reasoning_content":"hmm"}}]}"#,
            r#"{"id":"c1","choices":[{"delta":{"content":"Hi"}}]}"#,
            r#"{"id":"c1","choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"bash","arguments":"{\"command\""}}]}}]}"#,
            r#"{"id":"c1","choices":[{"delta":{"tool_calls":[{"index":1,"id":"b","type":"function","function":{"name":"read","arguments":"{}"}}]}}]}"#,
            r#"{"id":"c1","choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":":\"ls\"}"}}]}}]}"#,
            r#"{"id":"c1","choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
            r#"{"id":"c1","choices":[],"usage":{"prompt_tokens":100,"completion_tokens":20,"total_tokens":120,"prompt_tokens_details":{"cached_tokens":30}}}"#,
            "[DONE]",
        ]);
        end.unwrap();
        assert!(ops.contains(&Op::ThinkingSignature {
            index: 0,
            signature: "reasoning_content".into(),
            append: false
        }));
        assert!(ops.contains(&Op::ToolCallStart {
            id: "a".into(),
            name: "bash".into()
        }));
        assert!(ops.contains(&Op::ToolCallDelta {
            index: 2,
            json: ":\"ls\"}".into()
        }));
        let tail: Vec<&Op> = ops.iter().rev().take(5).collect();
        assert_eq!(
            tail,
            vec![
                &Op::StopReason(StopReason::ToolUse),
                &Op::ToolCallEnd { index: 3 },
                &Op::ToolCallEnd { index: 2 },
                &Op::TextEnd { index: 1 },
                &Op::ThinkingEnd { index: 0 },
            ]
        );
        assert_eq!(token_counts(&final_usage(&ops)), (70, 20, 30, 0, 120));
    }

    #[test]
    fn unknown_finish_reason_is_an_error() {
        let error = decode_error(
            &mut Decoder::default(),
            [data(
                r#"{"choices":[{"delta":{"content":"x"},"finish_reason":"content_filter"}]}"#,
            )],
        );
        assert_eq!(error, "Provider finish_reason: content_filter");
    }

    #[test]
    fn request_body_for_a_local_server() {
        let m = model("llama", "http://127.0.0.1:8080/v1", false);
        let ctx = Context {
            system_prompt: Some("be brief".into()),
            messages: vec![user_text("hi")],
            tools: vec![super::super::Tool {
                name: "bash".into(),
                description: "run".into(),
                parameters: json!({"type":"object"}),
            }],
        };
        let body = request_body(&m, &ctx, &StreamOptions::default(), &Compat::for_model(&m));
        assert_eq!(
            body["messages"][0],
            json!({"role": "system", "content": "be brief"})
        );
        assert_eq!(
            body["messages"][1],
            json!({"role": "user", "content": "hi"})
        );
        assert_eq!(body["stream_options"], json!({"include_usage": true}));
        assert_eq!(body["max_completion_tokens"], json!(100));
        assert!(body.get("store").is_none());
        assert_eq!(body["tools"][0]["function"]["strict"], json!(false));
    }

    #[test]
    fn reasoning_effort_for_openai() {
        let m = model("openai", "https://api.openai.com/v1", true);
        let options = StreamOptions {
            reasoning: Some(ThinkingLevel::High),
            ..Default::default()
        };
        let body = request_body(&m, &Context::default(), &options, &Compat::for_model(&m));
        assert_eq!(body["reasoning_effort"], json!("high"));
        assert_eq!(body["store"], json!(false));
    }
}

#[cfg(test)]
mod skim_tests {
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::wire::Chunk;

    /// Any JSON value, small; strings include escapes, quotes, brackets and U+2028.
    fn any_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i32>().prop_map(|n| json!(n)),
            (-1.0e6f64..1.0e6).prop_map(|n| json!(n)),
            "[a-z\"\\\\{}\\[\\],:\u{2028}é\n\t ]{0,8}".prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 16, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map("[a-z_]{1,6}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// A field that is usually of the right type and sometimes anything at all.
    fn text_or_any() -> impl Strategy<Value = Value> {
        prop_oneof![
            4 => "[a-z0-9 \"\\\\\u{2028}\n]{0,6}".prop_map(Value::String),
            1 => Just(Value::Null),
            1 => any_value(),
        ]
    }

    fn delta() -> impl Strategy<Value = Value> {
        (
            prop::option::of(text_or_any()),
            prop::option::of(text_or_any()),
            prop::option::of(text_or_any()),
            prop::option::of(any_value()),
        )
            .prop_map(|(content, reasoning_content, role, extra)| {
                let mut map = serde_json::Map::new();
                if let Some(v) = role {
                    map.insert("role".into(), v);
                }
                if let Some(v) = content {
                    map.insert("content".into(), v);
                }
                if let Some(v) = reasoning_content {
                    map.insert("reasoning_content".into(), v);
                }
                if let Some(v) = extra {
                    map.insert("tool_calls".into(), v);
                }
                Value::Object(map)
            })
    }

    fn chunk() -> impl Strategy<Value = Value> {
        (
            prop::option::of(text_or_any()),
            prop::option::of(any_value()),
            prop::option::of(delta()),
            prop::option::of(text_or_any()),
            prop::option::of(any_value()),
            any::<bool>(),
        )
            .prop_map(|(id, noise, delta, finish, usage, array_choices)| {
                let mut choice = serde_json::Map::new();
                choice.insert("index".into(), json!(0));
                if let Some(d) = delta {
                    choice.insert("delta".into(), d);
                }
                if let Some(f) = finish {
                    choice.insert("finish_reason".into(), f);
                }
                let mut map = serde_json::Map::new();
                if let Some(v) = id {
                    map.insert("id".into(), v);
                }
                if let Some(v) = noise {
                    map.insert("object".into(), v);
                }
                map.insert(
                    "choices".into(),
                    if array_choices {
                        json!([choice])
                    } else {
                        Value::Object(choice)
                    },
                );
                if let Some(v) = usage {
                    map.insert("usage".into(), v);
                }
                Value::Object(map)
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// The skimmer never disagrees with serde_json: it reads what serde_json reads, the
        /// same way, or it declines.
        #[test]
        fn skim_agrees_with_serde(doc in chunk(), pretty in any::<bool>()) {
            let text = if pretty {
                serde_json::to_string_pretty(&doc)
            } else {
                serde_json::to_string(&doc)
            }.map_err(|e| TestCaseError::fail(e.to_string()))?;
            let by_serde = serde_json::from_str::<Chunk<'_>>(&text).ok();
            if let Ok(skimmed) = Chunk::skim(&text) {
                prop_assert_eq!(Some(skimmed), by_serde, "{}", text);
            }
        }

        /// Truncated or extended documents are never read by the skimmer when serde_json
        /// refuses them.
        #[test]
        fn skim_declines_what_serde_refuses(doc in chunk(), cut in 0usize..400, junk in "[\\]}\"x, ]{1,3}") {
            let text = serde_json::to_string(&doc).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let cut = text.char_indices().map(|(i, _)| i).take_while(|&i| i <= cut).last().unwrap_or(0);
            for broken in [text[..cut].to_string(), format!("{text}{junk}")] {
                if serde_json::from_str::<Chunk<'_>>(&broken).is_err() {
                    prop_assert!(Chunk::skim(&broken).is_err(), "{}", broken);
                }
            }
        }
    }

    #[test]
    fn skims_the_common_chunks_without_falling_back() {
        for text in [
            r#"{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","system_fingerprint":"fp","choices":[{"index":0,"delta":{"content":"0001"},"logprobs":null,"finish_reason":null}]}"#,
            r#"{"id":"c1","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"finish_reason":null}]}"#,
            r#"{"id":"c1","choices":[{"index":0,"delta":{"reasoning_content":"hm \"q\""}}]}"#,
            r#"{"id":"c1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"t","function":{"name":"ls","arguments":"{\"a\""}}]}}]}"#,
            r#"{"id":"c1","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4}}"#,
        ] {
            let skimmed = Chunk::skim(text);
            assert!(skimmed.is_ok(), "{text}");
            assert_eq!(skimmed.ok(), serde_json::from_str::<Chunk<'_>>(text).ok());
        }
    }
}
