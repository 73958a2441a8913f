//! A reply with thinking, text and two tool calls, streamed in each API's format and checked
//! event by event; stop reasons; chunking; timing; a ten-thousand-delta reply.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tau_mock_llm::{Api, MockServer, Reply, StopReason};

use crate::support::{Event, call, collapsed, decode, model_of, parse_sse, post, request};

const THINKING: &str = "Let me think about it.";
const TEXT: &str = "Here is the plan.";

fn full_reply() -> Reply {
    Reply::new()
        .thinking_signed(THINKING, "sig-1")
        .with_text(TEXT)
        .tool_call("call_a", "bash", json!({"command": "ls -la"}))
        .tool_call(
            "call_b",
            "read",
            json!({"path": "src/main.rs", "limit": 20}),
        )
        .usage(100, 20, 30, 40)
}

async fn stream(api: Api, reply: Reply) -> (reqwest::header::HeaderMap, String) {
    let server = MockServer::start().await.unwrap();
    server.push(reply);
    let (path, body) = request(api, "hi");
    let response = post(&server.url(), &path, &body).await;
    assert_eq!(response.status(), 200);
    let headers = response.headers().clone();
    let text = response.text().await.unwrap();
    server.shutdown().await;
    (headers, text)
}

fn assert_full_decoded(api: Api, body: &str) {
    let d = decode(api, body);
    assert_eq!(d.thinking, THINKING);
    assert_eq!(d.text, TEXT);
    let names: Vec<&str> = d.tool_calls.iter().map(|c| c.1.as_str()).collect();
    assert_eq!(names, ["bash", "read"]);
    assert_eq!(d.tool_calls[0].2, json!({"command": "ls -la"}));
    assert_eq!(
        d.tool_calls[1].2,
        json!({"path": "src/main.rs", "limit": 20})
    );
    if api != Api::GoogleGenerativeAi {
        let ids: Vec<&str> = d.tool_calls.iter().map(|c| c.0.as_str()).collect();
        assert_eq!(ids, ["call_a", "call_b"]);
    }
}

fn types(events: &[Event]) -> Vec<Value> {
    events.iter().map(Event::json).collect()
}

#[tokio::test]
async fn anthropic_streams_every_block_kind() {
    let (headers, body) = stream(
        Api::AnthropicMessages,
        full_reply().redacted_thinking("opaque"),
    )
    .await;
    assert_eq!(headers["content-type"], "text/event-stream; charset=utf-8");
    assert!(headers.contains_key("request-id"));
    assert!(
        body.contains("event: ping\ndata: {\"type\": \"ping\"}\n\n"),
        "{body}"
    );
    let events = parse_sse(&body);
    let values = types(&events);
    for (e, v) in events.iter().zip(&values) {
        assert_eq!(
            e.name.as_deref(),
            v["type"].as_str(),
            "event name matches data.type"
        );
    }
    let names = collapsed(values.iter().map(|v| match v["type"].as_str().unwrap() {
        "content_block_delta" => format!("delta:{}", v["delta"]["type"].as_str().unwrap()),
        "content_block_start" => format!("start:{}", v["content_block"]["type"].as_str().unwrap()),
        other => other.to_owned(),
    }));
    assert_eq!(
        names,
        [
            "message_start",
            "ping",
            "start:thinking",
            "delta:thinking_delta",
            "delta:signature_delta",
            "content_block_stop",
            "start:text",
            "delta:text_delta",
            "content_block_stop",
            "start:tool_use",
            "delta:input_json_delta",
            "content_block_stop",
            "start:tool_use",
            "delta:input_json_delta",
            "content_block_stop",
            "start:redacted_thinking",
            "content_block_stop",
            "message_delta",
            "message_stop",
        ]
    );
    let start = &values[0]["message"];
    assert!(start["id"].as_str().unwrap().starts_with("msg_"));
    assert_eq!(start["type"], "message");
    assert_eq!(start["role"], "assistant");
    assert_eq!(start["model"], "claude-sonnet-4-5");
    assert_eq!(start["content"], json!([]));
    assert_eq!(start["stop_reason"], Value::Null);
    assert_eq!(start["usage"]["input_tokens"], 100);
    assert_eq!(start["usage"]["cache_read_input_tokens"], 30);
    assert_eq!(start["usage"]["cache_creation_input_tokens"], 40);
    let thinking_start = values
        .iter()
        .find(|v| v["content_block"]["type"] == "thinking")
        .unwrap();
    assert_eq!(
        thinking_start["content_block"],
        json!({"type": "thinking", "thinking": "", "signature": ""})
    );
    let signature = values
        .iter()
        .find(|v| v["delta"]["type"] == "signature_delta")
        .unwrap();
    assert_eq!(signature["delta"]["signature"], "sig-1");
    let tool_start = values
        .iter()
        .find(|v| v["content_block"]["type"] == "tool_use")
        .unwrap();
    assert_eq!(
        tool_start["content_block"],
        json!({"type": "tool_use", "id": "call_a", "name": "bash", "input": {}})
    );
    assert_eq!(tool_start["index"], 2);
    let redacted = values
        .iter()
        .find(|v| v["content_block"]["type"] == "redacted_thinking")
        .unwrap();
    assert_eq!(redacted["content_block"]["data"], "opaque");
    let delta = values
        .iter()
        .find(|v| v["type"] == "message_delta")
        .unwrap();
    assert_eq!(
        delta["delta"],
        json!({"stop_reason": "tool_use", "stop_sequence": null})
    );
    assert_eq!(delta["usage"]["output_tokens"], 20);
    assert_full_decoded(Api::AnthropicMessages, &body);
}

#[tokio::test]
async fn openai_completions_streams_chunks_usage_and_done() {
    let (headers, body) = stream(Api::OpenAiCompletions, full_reply()).await;
    assert!(
        headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let events = parse_sse(&body);
    assert!(
        events.iter().all(|e| e.name.is_none()),
        "completions has no event: lines"
    );
    assert_eq!(events.last().unwrap().data, "[DONE]");
    let chunks: Vec<Value> = events[..events.len() - 1].iter().map(Event::json).collect();
    let id = chunks[0]["id"].as_str().unwrap();
    for c in &chunks {
        assert_eq!(c["object"], "chat.completion.chunk");
        assert_eq!(c["id"], id);
        assert_eq!(c["model"], "gpt-4o");
        assert!(c["created"].is_u64());
    }
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let (usage_chunk, choice_chunks) = chunks.split_last().unwrap();
    assert_eq!(usage_chunk["choices"], json!([]));
    assert_eq!(
        usage_chunk["usage"],
        json!({
            "prompt_tokens": 130, "completion_tokens": 20, "total_tokens": 150,
            "prompt_tokens_details": {"cached_tokens": 30, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 6, "audio_tokens": 0,
                "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0},
        })
    );
    for c in choice_chunks {
        assert_eq!(
            c["usage"],
            Value::Null,
            "usage is null until the usage chunk"
        );
        assert!(c.as_object().unwrap().contains_key("usage"));
    }
    let finishes: Vec<&Value> = choice_chunks
        .iter()
        .map(|c| &c["choices"][0]["finish_reason"])
        .filter(|f| !f.is_null())
        .collect();
    assert_eq!(finishes, [&json!("tool_calls")]);
    assert_eq!(
        choice_chunks.last().unwrap()["choices"][0]["finish_reason"],
        "tool_calls"
    );
    let first_call = choice_chunks
        .iter()
        .find_map(|c| {
            c["choices"][0]["delta"]["tool_calls"]
                .get(0)
                .filter(|t| t.get("id").is_some())
        })
        .unwrap();
    assert_eq!(
        *first_call,
        json!({"index": 0, "id": "call_a", "type": "function", "function": {"name": "bash", "arguments": ""}})
    );
    let second_index = choice_chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["tool_calls"].get(0))
        .find(|t| t["id"] == "call_b")
        .unwrap();
    assert_eq!(second_index["index"], 1);
    assert_full_decoded(Api::OpenAiCompletions, &body);
}

#[tokio::test]
async fn openai_completions_sends_usage_only_when_asked() {
    let server = MockServer::start().await.unwrap();
    server.push(Reply::text("hi"));
    let (path, mut body) = request(Api::OpenAiCompletions, "x");
    body.as_object_mut().unwrap().remove("stream_options");
    let text = post(&server.url(), &path, &body)
        .await
        .text()
        .await
        .unwrap();
    let events = parse_sse(&text);
    assert_eq!(events.last().unwrap().data, "[DONE]");
    for e in &events[..events.len() - 1] {
        let v = e.json();
        assert!(v.get("usage").is_none(), "{v}");
        assert_eq!(v["choices"].as_array().unwrap().len(), 1);
    }
}

#[tokio::test]
async fn openai_responses_streams_semantic_events() {
    let (headers, body) = stream(Api::OpenAiResponses, full_reply()).await;
    assert!(
        headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let events = parse_sse(&body);
    let values = types(&events);
    for (i, (e, v)) in events.iter().zip(&values).enumerate() {
        assert_eq!(e.name.as_deref(), v["type"].as_str());
        assert_eq!(
            v["sequence_number"], i,
            "sequence numbers count from 0 without gaps"
        );
    }
    let names = collapsed(values.iter().map(|v| {
        let t = v["type"].as_str().unwrap().trim_start_matches("response.");
        match v.get("item") {
            Some(item) => format!("{t}:{}", item["type"].as_str().unwrap()),
            None => t.to_owned(),
        }
    }));
    assert_eq!(
        names,
        [
            "created",
            "in_progress",
            "output_item.added:reasoning",
            "reasoning_summary_part.added",
            "reasoning_summary_text.delta",
            "reasoning_summary_text.done",
            "reasoning_summary_part.done",
            "output_item.done:reasoning",
            "output_item.added:message",
            "content_part.added",
            "output_text.delta",
            "output_text.done",
            "content_part.done",
            "output_item.done:message",
            "output_item.added:function_call",
            "function_call_arguments.delta",
            "function_call_arguments.done",
            "output_item.done:function_call",
            "output_item.added:function_call",
            "function_call_arguments.delta",
            "function_call_arguments.done",
            "output_item.done:function_call",
            "completed",
        ]
    );
    assert_eq!(values[0]["response"]["status"], "in_progress");
    assert_eq!(values[0]["response"]["model"], "gpt-5");
    let find = |t: &'static str| values.iter().filter(move |v| v["type"] == t);
    let reasoning_done = find("response.output_item.done").next().unwrap();
    assert_eq!(
        reasoning_done["item"]["summary"],
        json!([{"type": "summary_text", "text": THINKING}])
    );
    assert_eq!(reasoning_done["item"]["encrypted_content"], "sig-1");
    let text_done = find("response.output_text.done").next().unwrap();
    assert_eq!(text_done["text"], TEXT);
    let calls: Vec<&Value> = find("response.output_item.done")
        .map(|v| &v["item"])
        .filter(|i| i["type"] == "function_call")
        .collect();
    assert_eq!(calls[0]["call_id"], "call_a");
    assert_eq!(calls[0]["name"], "bash");
    assert_eq!(calls[0]["status"], "completed");
    assert_eq!(
        calls[1]["arguments"],
        r#"{"path":"src/main.rs","limit":20}"#
    );
    let args_done: Vec<&Value> = find("response.function_call_arguments.done")
        .map(|v| &v["arguments"])
        .collect();
    assert_eq!(
        args_done,
        [
            &json!(r#"{"command":"ls -la"}"#),
            &json!(r#"{"path":"src/main.rs","limit":20}"#)
        ]
    );
    let completed = &values.last().unwrap()["response"];
    assert_eq!(completed["status"], "completed");
    assert!(completed["id"].as_str().unwrap().starts_with("resp_"));
    assert_eq!(completed["output"].as_array().unwrap().len(), 4);
    assert_eq!(
        completed["usage"],
        json!({"input_tokens": 130, "input_tokens_details": {"cached_tokens": 30},
               "output_tokens": 20, "output_tokens_details": {"reasoning_tokens": 6},
               "total_tokens": 150})
    );
    assert_full_decoded(Api::OpenAiResponses, &body);
}

#[tokio::test]
async fn openai_responses_leaves_out_encrypted_reasoning_unless_included() {
    let server = MockServer::start().await.unwrap();
    server.push(Reply::new().thinking_signed("t", "secret").with_text("x"));
    let (path, mut body) = request(Api::OpenAiResponses, "x");
    body.as_object_mut().unwrap().remove("include");
    let text = post(&server.url(), &path, &body)
        .await
        .text()
        .await
        .unwrap();
    assert!(!text.contains("encrypted_content"), "{text}");
    assert!(text.contains("\"type\":\"reasoning\""));
}

#[tokio::test]
async fn google_streams_parts_with_finish_and_usage_on_the_last_chunk() {
    let (headers, body) =
        stream(Api::GoogleGenerativeAi, full_reply().redacted_thinking("x")).await;
    assert_eq!(headers["content-type"], "text/event-stream");
    assert!(body.ends_with("\r\n\r\n"));
    assert!(
        !body.replace("\r\n", "").contains('\n'),
        "CRLF framing only"
    );
    assert!(!headers.contains_key("x-request-id"));
    let events = parse_sse(&body);
    let values = types(&events);
    let (last, rest) = values.split_last().unwrap();
    for v in &values {
        assert_eq!(v["modelVersion"], "gemini-2.5-flash");
        assert_eq!(v["responseId"], values[0]["responseId"]);
        assert_eq!(v["candidates"][0]["content"]["role"], "model");
        assert_eq!(v["candidates"][0]["index"], 0);
        assert_eq!(
            v["candidates"][0]["content"]["parts"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
    }
    for v in rest {
        assert!(v["candidates"][0].get("finishReason").is_none(), "{v}");
    }
    assert_eq!(last["candidates"][0]["finishReason"], "STOP");
    assert_eq!(
        last["usageMetadata"],
        json!({"promptTokenCount": 130, "candidatesTokenCount": 14, "totalTokenCount": 150,
               "cachedContentTokenCount": 30,
               "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 130}],
               "thoughtsTokenCount": 6})
    );
    let parts: Vec<&Value> = values
        .iter()
        .map(|v| &v["candidates"][0]["content"]["parts"][0])
        .collect();
    let thoughts: Vec<&&Value> = parts.iter().filter(|p| p["thought"] == true).collect();
    assert!(thoughts.len() > 1);
    assert_eq!(thoughts.last().unwrap()["thoughtSignature"], "sig-1");
    assert!(
        thoughts[..thoughts.len() - 1]
            .iter()
            .all(|p| p.get("thoughtSignature").is_none())
    );
    let calls: Vec<&Value> = parts.iter().filter_map(|p| p.get("functionCall")).collect();
    assert_eq!(
        calls,
        [
            &json!({"name": "bash", "args": {"command": "ls -la"}}),
            &json!({"name": "read", "args": {"path": "src/main.rs", "limit": 20}})
        ]
    );
    assert!(
        last["candidates"][0]["content"]["parts"][0]
            .get("functionCall")
            .is_some()
    );
    assert_full_decoded(Api::GoogleGenerativeAi, &body);
}

#[tokio::test]
async fn stop_reasons_map_to_each_api() {
    let server = MockServer::start().await.unwrap();
    let cases = [
        (
            Reply::text("a"),
            ["end_turn", "stop", "completed", "STOP", "completed", "STOP"],
        ),
        (
            Reply::text("a").stop_reason(StopReason::Length),
            [
                "max_tokens",
                "length",
                "incomplete",
                "MAX_TOKENS",
                "incomplete",
                "MAX_TOKENS",
            ],
        ),
        (
            Reply::new().tool_call("c", "bash", json!({})),
            [
                "tool_use",
                "tool_calls",
                "completed",
                "STOP",
                "completed",
                "STOP",
            ],
        ),
    ];
    for (reply, expected) in cases {
        for (api, want) in Api::SSE.into_iter().zip(expected) {
            server.push(reply.clone());
            let (status, body) = call(&server.url(), api, "x").await;
            assert_eq!(status, 200);
            assert_eq!(decode(api, &body).stop, want, "{api}");
            if api.stream_format() == Api::OpenAiResponses && want == "incomplete" {
                let last = parse_sse(&body).last().unwrap().json();
                assert_eq!(last["type"], "response.incomplete");
                assert_eq!(
                    last["response"]["incomplete_details"]["reason"],
                    "max_output_tokens"
                );
            }
        }
    }
}

#[tokio::test]
async fn text_is_cut_into_chunk_size_deltas_unless_chunks_are_given() {
    let server = MockServer::start().await.unwrap();
    server.push(Reply::text("abcdefghijklmnopqrst"));
    server.push(Reply::text("abcdefghij").chunk_size(3));
    server.push(Reply::new().text_chunks(["one ", "two ", "three"]));
    let mut deltas = Vec::new();
    for _ in 0..3 {
        let (_, body) = call(&server.url(), Api::AnthropicMessages, "x").await;
        let pieces: Vec<String> = parse_sse(&body)
            .iter()
            .map(Event::json)
            .filter(|v| v["delta"]["type"] == "text_delta")
            .map(|v| v["delta"]["text"].as_str().unwrap().to_owned())
            .collect();
        deltas.push(pieces);
    }
    assert_eq!(deltas[0], ["abcdefgh", "ijklmnop", "qrst"]);
    assert_eq!(deltas[1], ["abc", "def", "ghi", "j"]);
    assert_eq!(deltas[2], ["one ", "two ", "three"]);
}

#[tokio::test]
async fn model_is_echoed_or_overridden() {
    let server = MockServer::start().await.unwrap();
    for api in Api::SSE {
        server.push(Reply::text("a"));
        server.push(Reply::text("a").model("custom-model"));
        let (_, echoed) = call(&server.url(), api, "x").await;
        let (_, custom) = call(&server.url(), api, "x").await;
        assert!(
            echoed.contains(&format!("\"{}\"", model_of(api))),
            "{api}: {echoed}"
        );
        assert!(custom.contains("\"custom-model\""), "{api}: {custom}");
    }
}

#[tokio::test]
async fn delay_holds_back_the_first_byte_and_chunk_delay_spaces_events() {
    let server = MockServer::start().await.unwrap();
    server.push(Reply::text("x").delay_ms(300));
    let (path, body) = request(Api::OpenAiCompletions, "x");
    let started = Instant::now();
    let response = post(&server.url(), &path, &body).await;
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(response.status(), 200);

    server.push(Reply::text("abcde").chunk_size(1).chunk_delay_ms(60));
    let started = Instant::now();
    let response = post(&server.url(), &path, &body).await;
    let headers_at = started.elapsed();
    let text = response.text().await.unwrap();
    let events = parse_sse(&text).len();
    assert_eq!(events, 9, "role, 5 deltas, finish, usage, [DONE]");
    assert!(
        headers_at < Duration::from_millis(250),
        "headers come before the delays"
    );
    assert!(
        started.elapsed() >= Duration::from_millis(60 * 8),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn ten_thousand_deltas_arrive_complete_in_every_format() {
    let pieces: Vec<String> = (0..10_000).map(|i| format!("{i},")).collect();
    let expected = pieces.concat();
    let server = MockServer::start().await.unwrap();
    for api in Api::SSE {
        // Completeness only: how fast is for the benchmarks (bench/provider-stream.sh).
        server.push(Reply::new().text_chunks(pieces.clone()));
        let (status, body) = call(&server.url(), api, "x").await;
        assert_eq!(status, 200);
        let decoded = decode(api, &body);
        assert_eq!(decoded.deltas, 10_000, "{api}");
        assert_eq!(decoded.text, expected, "{api}");
    }
}
