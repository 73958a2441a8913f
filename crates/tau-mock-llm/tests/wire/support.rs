//! Shared helpers: requests for each API, an SSE parser, and a small decoder per API that
//! rebuilds the assistant message from the events, the way a client would.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};
use tau_mock_llm::Api;

pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

/// The path (with query) and a minimal streaming body for `api`, asking for usage and
/// encrypted reasoning where the API needs asking.
pub fn request(api: Api, user: &str) -> (String, Value) {
    match api {
        Api::AzureOpenAiResponses => {
            let (_, body) = request(Api::OpenAiResponses, user);
            ("/openai/v1/responses?api-version=v1".into(), body)
        }
        Api::GoogleVertex => {
            let (_, body) = request(Api::GoogleGenerativeAi, user);
            (
                "/v1/projects/mock-project/locations/us-central1/publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse".into(),
                body,
            )
        }
        Api::BedrockConverseStream => (
            "/model/anthropic.claude-sonnet-4-5%3A0/converse-stream".into(),
            json!({"messages": [{"role": "user", "content": [{"text": user}]}],
                   "inferenceConfig": {"maxTokens": 1024}}),
        ),
        Api::AnthropicMessages => (
            "/v1/messages".into(),
            json!({"model": "claude-sonnet-4-5", "max_tokens": 1024, "stream": true,
                   "messages": [{"role": "user", "content": user}]}),
        ),
        Api::OpenAiCompletions => (
            "/v1/chat/completions".into(),
            json!({"model": "gpt-4o", "stream": true, "stream_options": {"include_usage": true},
                   "messages": [{"role": "user", "content": user}]}),
        ),
        Api::OpenAiResponses => (
            "/v1/responses".into(),
            json!({"model": "gpt-5", "stream": true, "include": ["reasoning.encrypted_content"],
                   "input": [{"role": "user", "content": [{"type": "input_text", "text": user}]}]}),
        ),
        Api::GoogleGenerativeAi => (
            "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse".into(),
            json!({"contents": [{"role": "user", "parts": [{"text": user}]}]}),
        ),
    }
}

pub fn model_of(api: Api) -> &'static str {
    match api {
        Api::AnthropicMessages => "claude-sonnet-4-5",
        Api::OpenAiCompletions => "gpt-4o",
        Api::OpenAiResponses | Api::AzureOpenAiResponses => "gpt-5",
        Api::GoogleGenerativeAi | Api::GoogleVertex => "gemini-2.5-flash",
        Api::BedrockConverseStream => "anthropic.claude-sonnet-4-5:0",
    }
}

/// Posts `body` as JSON with credentials of every kind the mock looks for when it is not
/// told to check them (Azure's `api-key`, a bearer token for Vertex, Bedrock's bearer key).
pub async fn post(base: &str, path: &str, body: &Value) -> reqwest::Response {
    client()
        .post(format!("{base}{path}"))
        .header("content-type", "application/json")
        .header("api-key", "test-key")
        .header("authorization", "Bearer test-token")
        .body(body.to_string())
        .send()
        .await
        .unwrap()
}

/// Sends `api`'s request and returns the status and raw body text.
pub async fn call(base: &str, api: Api, user: &str) -> (u16, String) {
    let (path, body) = request(api, user);
    let response = post(base, &path, &body).await;
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub name: Option<String>,
    pub data: String,
}

impl Event {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.data).unwrap_or_else(|e| panic!("{e}: {}", self.data))
    }
}

/// Parses an SSE body (LF or CRLF line ends) into its events.
pub fn parse_sse(text: &str) -> Vec<Event> {
    let normalized = text.replace("\r\n", "\n");
    assert!(
        normalized.is_empty() || normalized.ends_with("\n\n"),
        "body does not end with a blank line: {:?}",
        &normalized[normalized.len().saturating_sub(80)..]
    );
    normalized
        .split("\n\n")
        .filter(|block| !block.is_empty())
        .map(|block| {
            let mut name = None;
            let mut data = Vec::new();
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("event: ") {
                    name = Some(v.to_owned());
                } else if let Some(v) = line.strip_prefix("data: ") {
                    data.push(v);
                } else {
                    panic!("unexpected SSE line {line:?}");
                }
            }
            Event {
                name,
                data: data.join("\n"),
            }
        })
        .collect()
}

/// An assistant message rebuilt from a stream.
#[derive(Debug, Default, PartialEq)]
pub struct Decoded {
    pub thinking: String,
    pub text: String,
    /// (id, name, arguments JSON)
    pub tool_calls: Vec<(String, String, Value)>,
    pub stop: String,
    pub deltas: usize,
}

/// Rebuilds the message from `api`'s stream, the way a client would.
pub fn decode(api: Api, body: &str) -> Decoded {
    let events = parse_sse(body);
    let mut d = Decoded::default();
    match api.stream_format() {
        Api::AnthropicMessages => {
            let mut calls: BTreeMap<u64, (String, String, String)> = BTreeMap::new();
            for e in &events {
                let v = e.json();
                match v["type"].as_str().unwrap() {
                    "content_block_start" if v["content_block"]["type"] == "tool_use" => {
                        let b = &v["content_block"];
                        calls.insert(
                            v["index"].as_u64().unwrap(),
                            (
                                b["id"].as_str().unwrap().into(),
                                b["name"].as_str().unwrap().into(),
                                String::new(),
                            ),
                        );
                    }
                    "content_block_delta" => {
                        let delta = &v["delta"];
                        d.deltas += 1;
                        match delta["type"].as_str().unwrap() {
                            "text_delta" => d.text += delta["text"].as_str().unwrap(),
                            "thinking_delta" => d.thinking += delta["thinking"].as_str().unwrap(),
                            "input_json_delta" => {
                                let call = calls.get_mut(&v["index"].as_u64().unwrap()).unwrap();
                                call.2 += delta["partial_json"].as_str().unwrap();
                            }
                            _ => d.deltas -= 1,
                        }
                    }
                    "message_delta" => d.stop = v["delta"]["stop_reason"].as_str().unwrap().into(),
                    _ => {}
                }
            }
            d.tool_calls = finish_calls(calls);
        }
        Api::OpenAiCompletions => {
            let mut calls: BTreeMap<u64, (String, String, String)> = BTreeMap::new();
            for e in &events {
                if e.data == "[DONE]" {
                    continue;
                }
                let v = e.json();
                let Some(choice) = v["choices"].get(0) else {
                    continue;
                };
                let delta = &choice["delta"];
                if let Some(t) = delta["content"].as_str().filter(|t| !t.is_empty()) {
                    d.text += t;
                    d.deltas += 1;
                }
                if let Some(t) = delta["reasoning_content"].as_str() {
                    d.thinking += t;
                    d.deltas += 1;
                }
                for call in delta["tool_calls"].as_array().into_iter().flatten() {
                    let entry = calls.entry(call["index"].as_u64().unwrap()).or_default();
                    if let Some(id) = call["id"].as_str() {
                        entry.0 = id.into();
                    }
                    if let Some(name) = call["function"]["name"].as_str() {
                        entry.1 = name.into();
                    }
                    let args = call["function"]["arguments"].as_str().unwrap();
                    if !args.is_empty() {
                        d.deltas += 1;
                    }
                    entry.2 += args;
                }
                if let Some(f) = choice["finish_reason"].as_str() {
                    d.stop = f.into();
                }
            }
            d.tool_calls = finish_calls(calls);
        }
        Api::OpenAiResponses => {
            let mut calls = BTreeMap::new();
            for e in &events {
                let v = e.json();
                match v["type"].as_str().unwrap() {
                    "response.output_text.delta" => {
                        d.text += v["delta"].as_str().unwrap();
                        d.deltas += 1;
                    }
                    "response.reasoning_summary_text.delta" => {
                        d.thinking += v["delta"].as_str().unwrap();
                        d.deltas += 1;
                    }
                    "response.output_item.added" if v["item"]["type"] == "function_call" => {
                        let item = &v["item"];
                        calls.insert(
                            v["output_index"].as_u64().unwrap(),
                            (
                                item["call_id"].as_str().unwrap().into(),
                                item["name"].as_str().unwrap().into(),
                                String::new(),
                            ),
                        );
                    }
                    "response.function_call_arguments.delta" => {
                        calls
                            .get_mut(&v["output_index"].as_u64().unwrap())
                            .unwrap()
                            .2 += v["delta"].as_str().unwrap();
                        d.deltas += 1;
                    }
                    "response.completed" | "response.incomplete" => {
                        d.stop = v["response"]["status"].as_str().unwrap().into();
                    }
                    _ => {}
                }
            }
            d.tool_calls = finish_calls(calls);
        }
        Api::GoogleGenerativeAi => {
            for e in &events {
                let v = e.json();
                let candidate = &v["candidates"][0];
                for part in candidate["content"]["parts"].as_array().unwrap() {
                    if let Some(call) = part.get("functionCall") {
                        d.tool_calls.push((
                            String::new(),
                            call["name"].as_str().unwrap().into(),
                            call["args"].clone(),
                        ));
                    } else if let Some(t) = part["text"].as_str() {
                        if t.is_empty() {
                            continue;
                        }
                        d.deltas += 1;
                        if part["thought"] == true {
                            d.thinking += t;
                        } else {
                            d.text += t;
                        }
                    }
                }
                if let Some(f) = candidate["finishReason"].as_str() {
                    d.stop = f.into();
                }
            }
        }
        other => panic!("{other} does not stream SSE"),
    }
    d
}

fn finish_calls(calls: BTreeMap<u64, (String, String, String)>) -> Vec<(String, String, Value)> {
    calls
        .into_values()
        .map(|(id, name, args)| {
            let args = serde_json::from_str(&args).unwrap_or_else(|e| panic!("{e}: {args}"));
            (id, name, args)
        })
        .collect()
}

/// Event names (or `data.type`), with runs of the same name collapsed to one.
pub fn collapsed(names: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for name in names {
        if out.last() != Some(&name) {
            out.push(name);
        }
    }
    out
}

/// The body of a request to `api` that returns `tool_output` for the previous bash call.
pub fn tool_result_request(api: Api, tool_output: &str) -> (String, Value) {
    let (path, mut body) = request(api, "please list files");
    match api.stream_format() {
        Api::AnthropicMessages => {
            body["tools"] = json!([{"name": "bash", "input_schema": {"type": "object"}}]);
            let messages = body["messages"].as_array_mut().unwrap();
            messages.push(json!({"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": "ls"}}]}));
            messages.push(json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": tool_output}]}));
        }
        Api::OpenAiCompletions => {
            body["tools"] =
                json!([{"type": "function", "function": {"name": "bash", "parameters": {}}}]);
            let messages = body["messages"].as_array_mut().unwrap();
            messages.push(json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]}));
            messages
                .push(json!({"role": "tool", "tool_call_id": "call_1", "content": tool_output}));
        }
        Api::OpenAiResponses => {
            body["tools"] = json!([{"type": "function", "name": "bash", "parameters": {}}]);
            let input = body["input"].as_array_mut().unwrap();
            input.push(json!({"type": "function_call", "call_id": "call_1", "name": "bash", "arguments": "{}"}));
            input.push(
                json!({"type": "function_call_output", "call_id": "call_1", "output": tool_output}),
            );
        }
        Api::GoogleGenerativeAi => {
            body["tools"] = json!([{"functionDeclarations": [{"name": "bash"}]}]);
            let contents = body["contents"].as_array_mut().unwrap();
            contents.push(
                json!({"role": "model", "parts": [{"functionCall": {"name": "bash", "args": {}}}]}),
            );
            contents.push(json!({"role": "user", "parts": [
                {"functionResponse": {"name": "bash", "response": {"output": tool_output}}}]}));
        }
        _ => {
            body["toolConfig"] = json!({"tools": [{"toolSpec": {"name": "bash"}}]});
            let messages = body["messages"].as_array_mut().unwrap();
            messages.push(json!({"role": "assistant", "content": [
                {"toolUse": {"toolUseId": "tooluse_1", "name": "bash", "input": {}}}]}));
            messages.push(json!({"role": "user", "content": [{"toolResult": {
                "toolUseId": "tooluse_1", "content": [{"text": tool_output}], "status": "success"}}]}));
        }
    }
    (path, body)
}

/// `api`'s request for `user`, offering a `bash` tool.
pub fn request_with_bash(api: Api, user: &str) -> (String, Value) {
    let (path, mut body) = request(api, user);
    let tools = match api.stream_format() {
        Api::AnthropicMessages => json!([{"name": "bash", "input_schema": {"type": "object"}}]),
        Api::OpenAiCompletions => json!([{"type": "function", "function": {"name": "bash"}}]),
        Api::OpenAiResponses => json!([{"type": "function", "name": "bash"}]),
        Api::GoogleGenerativeAi => json!([{"functionDeclarations": [{"name": "bash"}]}]),
        _ => {
            body["toolConfig"] = json!({"tools": [{"toolSpec": {"name": "bash"}}]});
            return (path, body);
        }
    };
    body["tools"] = tools;
    (path, body)
}

/// How many SSE events a raw (possibly cut, possibly chunk-framed) body holds: every event
/// of every API has exactly one `data:` line.
pub fn count_events(body: &str) -> usize {
    body.matches("data: ").count()
}
