//! Every provider adapter against tau-mock-llm over real loopback HTTP: text, thinking, two
//! tool calls in one reply, usage and cost, every fault the mock injects, abort mid-stream,
//! and a 10,000-delta reply.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use serde_json::json;
use tau_ai::provider::{
    CancellationToken, Context, StreamOptions, Tool, http_client, is_overflow_error,
    is_retryable_error, stream,
};
use tau_mock_llm::{Fault, MockServer, Reply};
use tau_protocol::{
    AssistantContent, AssistantMessage, AssistantMessageEvent, InputModality, Message, Model,
    ModelCost, StopReason, UserContent, UserMessage,
};

const APIS: [&str; 4] = [
    "anthropic-messages",
    "openai-completions",
    "openai-responses",
    "google-generative-ai",
];

fn model(api: &str, url: &str) -> Model {
    let base_url = match api {
        "anthropic-messages" => url.to_string(),
        "google-generative-ai" => format!("{url}/v1beta"),
        _ => format!("{url}/v1"),
    };
    Model {
        id: "mock-model".into(),
        name: "Mock".into(),
        api: api.into(),
        provider: "mock".into(),
        base_url,
        reasoning: true,
        thinking_level_map: None,
        input: vec![InputModality::Text, InputModality::Image],
        cost: ModelCost {
            input: 3.0,
            output: 15.0,
            cache_read: 0.3,
            cache_write: 3.75,
        },
        context_window: 200_000,
        max_tokens: 8192,
        headers: None,
        compat: None,
    }
}

fn context() -> Context {
    Context {
        system_prompt: Some("You are terse.".into()),
        messages: vec![Message::User(UserMessage {
            content: UserContent::Text("list the files".into()),
            timestamp: 1,
            attachments: None,
        })],
        tools: vec![Tool {
            name: "bash".into(),
            description: "Run a command".into(),
            parameters: json!({"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}),
        }],
    }
}

fn options() -> StreamOptions {
    StreamOptions {
        api_key: Some("test-key".into()),
        include_partial: true,
        idle_timeout: Duration::from_secs(10),
        ..StreamOptions::default()
    }
}

async fn collect(
    api: &str,
    server: &MockServer,
    options: StreamOptions,
) -> (Vec<AssistantMessageEvent>, AssistantMessage) {
    let client = http_client();
    let mut s = stream(&client, &model(api, &server.url()), &context(), options);
    let mut events = Vec::new();
    while let Some(event) = s.next().await {
        events.push(event);
    }
    let last = match events.last() {
        Some(AssistantMessageEvent::Done { message, .. }) => message.clone(),
        Some(AssistantMessageEvent::Error { error, .. }) => error.clone(),
        other => panic!("{api}: stream did not end with done/error: {other:?}"),
    };
    (events, last)
}

fn kind(event: &AssistantMessageEvent) -> &'static str {
    match event {
        AssistantMessageEvent::Start { .. } => "start",
        AssistantMessageEvent::TextStart { .. } => "text_start",
        AssistantMessageEvent::TextDelta { .. } => "text_delta",
        AssistantMessageEvent::TextEnd { .. } => "text_end",
        AssistantMessageEvent::ThinkingStart { .. } => "thinking_start",
        AssistantMessageEvent::ThinkingDelta { .. } => "thinking_delta",
        AssistantMessageEvent::ThinkingEnd { .. } => "thinking_end",
        AssistantMessageEvent::ToolCallStart { .. } => "toolcall_start",
        AssistantMessageEvent::ToolCallDelta { .. } => "toolcall_delta",
        AssistantMessageEvent::ToolCallEnd { .. } => "toolcall_end",
        AssistantMessageEvent::Done { .. } => "done",
        AssistantMessageEvent::Error { .. } => "error",
    }
}

#[tokio::test]
async fn thinking_text_and_two_tool_calls_on_every_api() {
    let server = MockServer::start().await.unwrap();
    for api in APIS {
        server.clear();
        server.push(
            Reply::new()
                .thinking_signed("Let me look.", "sig-1")
                .with_text("Listing now.")
                .tool_call("call_1", "bash", json!({"command": "ls -la"}))
                .tool_call("call_2", "bash", json!({"command": "pwd"}))
                .usage(1000, 200, 400, 0),
        );
        let (events, message) = collect(api, &server, options()).await;
        assert_eq!(kind(&events[0]), "start", "{api}");
        assert_eq!(
            message.stop_reason,
            StopReason::ToolUse,
            "{api}: {:?}",
            message.error_message
        );
        let kinds: Vec<&str> = message
            .content
            .iter()
            .map(|c| match c {
                AssistantContent::Text(_) => "text",
                AssistantContent::Thinking(_) => "thinking",
                AssistantContent::ToolCall(_) => "toolCall",
            })
            .collect();
        assert_eq!(kinds, ["thinking", "text", "toolCall", "toolCall"], "{api}");
        let (
            AssistantContent::Thinking(t),
            AssistantContent::Text(x),
            AssistantContent::ToolCall(a),
            AssistantContent::ToolCall(b),
        ) = (
            &message.content[0],
            &message.content[1],
            &message.content[2],
            &message.content[3],
        )
        else {
            unreachable!()
        };
        assert_eq!(t.thinking, "Let me look.", "{api}");
        assert_eq!(x.text, "Listing now.", "{api}");
        assert_eq!(a.name, "bash");
        assert_eq!(json!(a.arguments), json!({"command": "ls -la"}), "{api}");
        assert_eq!(json!(b.arguments), json!({"command": "pwd"}), "{api}");
        if api == "google-generative-ai" {
            // Gemini sends no call ids; tau makes unique ones.
            assert!(
                a.id.starts_with("bash_") && a.id != b.id,
                "{api}: {} {}",
                a.id,
                b.id
            );
        } else {
            assert!(a.id.contains("call_1"), "{api}: {}", a.id);
        }
        // Usage: `input` is the non-cached prompt on every API (OpenAI and Google count cached
        // tokens inside their prompt total); cost = price per million × tokens.
        let u = &message.usage;
        assert_eq!(
            (u.input, u.output, u.cache_read),
            (1000, 200, 400),
            "{api}: {u:?}"
        );
        let expected = 3.0 * 1000.0 / 1e6 + 15.0 * 200.0 / 1e6 + 0.3 * 400.0 / 1e6;
        assert!(
            (u.cost.total - expected).abs() < 1e-12,
            "{api}: {}",
            u.cost.total
        );
        assert!(events.iter().any(|e| kind(e) == "text_delta"), "{api}");
        for event in &events {
            if let AssistantMessageEvent::ToolCallEnd {
                tool_call, partial, ..
            } = event
            {
                assert!(partial.is_some(), "{api}: partial requested");
                assert_eq!(tool_call.name, "bash");
            }
        }
        if api != "google-generative-ai" {
            // Gemini streams because of the URL (`:streamGenerateContent?alt=sse`).
            assert_eq!(server.requests()[0].body["stream"], json!(true), "{api}");
        }
    }
}

#[tokio::test]
async fn request_shapes_reach_the_server() {
    let server = MockServer::start().await.unwrap();
    for api in APIS {
        server.clear();
        server.push(Reply::text("ok"));
        let (_, message) = collect(api, &server, options()).await;
        assert_eq!(
            message.stop_reason,
            StopReason::Stop,
            "{api}: {:?}",
            message.error_message
        );
        let request = &server.requests()[0];
        let auth = match api {
            "anthropic-messages" => request.header("x-api-key"),
            "google-generative-ai" => request.header("x-goog-api-key"),
            _ => request.header("authorization"),
        };
        assert!(
            auth.is_some_and(|a| a.contains("test-key")),
            "{api}: key sent"
        );
        let text = request.body.to_string();
        assert!(text.contains("list the files"), "{api}: prompt sent");
        assert!(text.contains("You are terse."), "{api}: system prompt sent");
        assert!(text.contains("\"bash\""), "{api}: tool sent");
    }
}

type Check = fn(&str) -> bool;

#[tokio::test]
async fn every_fault_becomes_an_error_message() {
    let server = MockServer::start().await.unwrap();
    let cases: [(Fault, Check); 6] = [
        (
            Fault::RateLimited {
                retry_after: Some(2),
            },
            |m| m.starts_with("429 ") && is_retryable_error(m),
        ),
        (Fault::ServerError, |m| {
            m.starts_with("500 ") && is_retryable_error(m)
        }),
        (Fault::ServiceUnavailable, |m| {
            m.starts_with("503 ") && is_retryable_error(m)
        }),
        (Fault::Overloaded, is_retryable_error),
        (Fault::ContextOverflow, |m| {
            m.starts_with("400 ") && is_overflow_error(m) && !is_retryable_error(m)
        }),
        (Fault::DropAfter { events: 2 }, is_retryable_error),
    ];
    for api in APIS {
        for (fault, check) in &cases {
            server.clear();
            server.push(
                Reply::new()
                    .with_text("partial answer that is long enough")
                    .chunk_size(4)
                    .with_fault(fault.clone()),
            );
            let (_, message) = collect(api, &server, options()).await;
            assert_eq!(message.stop_reason, StopReason::Error, "{api} {fault:?}");
            let text = message.error_message.clone().unwrap_or_default();
            assert!(check(&text), "{api} {fault:?}: {text}");
        }
    }
}

#[tokio::test]
async fn a_stalled_stream_times_out() {
    let server = MockServer::start().await.unwrap();
    for api in APIS {
        server.clear();
        server.push(Reply::text("never finished").with_fault(Fault::StallAfter { events: 2 }));
        let opts = StreamOptions {
            idle_timeout: Duration::from_millis(300),
            ..options()
        };
        let (_, message) = collect(api, &server, opts).await;
        assert_eq!(message.stop_reason, StopReason::Error, "{api}");
        let text = message.error_message.unwrap_or_default();
        assert!(
            text.contains("timed out") && is_retryable_error(&text),
            "{api}: {text}"
        );
    }
}

#[tokio::test]
async fn provider_level_retries_follow_the_sdks() {
    let server = MockServer::start().await.unwrap();
    for api in APIS {
        // Off by default: the first failure is the answer.
        server.clear();
        server.push(Reply::fault(Fault::ServerError));
        server.push(Reply::text("second"));
        let (_, message) = collect(api, &server, options()).await;
        assert_eq!(message.stop_reason, StopReason::Error, "{api}");
        assert_eq!(server.requests().len(), 1, "{api}");

        // Two retries: a 500 and a 429 are tried again, then the reply streams.
        server.clear();
        server.push(Reply::fault(Fault::ServerError));
        server.push(Reply::fault(Fault::RateLimited {
            retry_after: Some(0),
        }));
        server.push(Reply::text("third time"));
        let opts = StreamOptions {
            max_retries: 2,
            ..options()
        };
        let (_, message) = collect(api, &server, opts).await;
        assert_eq!(message.stop_reason, StopReason::Stop, "{api}: {message:?}");
        assert_eq!(server.requests().len(), 3, "{api}");

        // A 400 is not retried; a server asking to wait past the cap ends the retries.
        for fault in [
            Fault::ContextOverflow,
            Fault::RateLimited {
                retry_after: Some(30),
            },
        ] {
            server.clear();
            server.push(Reply::fault(fault.clone()));
            server.push(Reply::text("unused"));
            let opts = StreamOptions {
                max_retries: 3,
                max_retry_delay: Duration::from_secs(1),
                ..options()
            };
            let started = std::time::Instant::now();
            let (_, message) = collect(api, &server, opts).await;
            assert_eq!(message.stop_reason, StopReason::Error, "{api} {fault:?}");
            assert_eq!(server.requests().len(), 1, "{api} {fault:?}");
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "{api} {fault:?}"
            );
        }
    }
}

#[tokio::test]
async fn the_request_timeout_bounds_the_wait_for_headers() {
    let server = MockServer::start().await.unwrap();
    for api in APIS {
        server.clear();
        server.push(Reply::text("late").delay_ms(3000));
        let opts = StreamOptions {
            request_timeout: Some(Duration::from_millis(300)),
            ..options()
        };
        let started = std::time::Instant::now();
        let (_, message) = collect(api, &server, opts).await;
        assert!(started.elapsed() < Duration::from_secs(2), "{api}");
        let text = message.error_message.unwrap_or_default();
        assert_eq!(
            text, "Request timed out: no data received for 0.3 seconds",
            "{api}"
        );

        // A zero idle timeout never fires.
        server.clear();
        server.push(Reply::text("slow but fine").delay_ms(400));
        let opts = StreamOptions {
            idle_timeout: Duration::ZERO,
            ..options()
        };
        let (_, message) = collect(api, &server, opts).await;
        assert_eq!(message.stop_reason, StopReason::Stop, "{api}");
    }
}

#[tokio::test]
async fn abort_mid_stream_keeps_what_arrived() {
    let server = MockServer::start().await.unwrap();
    for api in APIS {
        server.clear();
        server.push(
            Reply::new()
                .with_text("word ".repeat(200))
                .chunk_size(5)
                .chunk_delay_ms(20),
        );
        let cancel = CancellationToken::new();
        let opts = StreamOptions {
            cancel: cancel.clone(),
            ..options()
        };
        let client = http_client();
        let mut s = stream(&client, &model(api, &server.url()), &context(), opts);
        let mut last = None;
        while let Some(event) = s.next().await {
            if kind(&event) == "text_delta" {
                cancel.cancel();
            }
            last = Some(event);
        }
        let Some(AssistantMessageEvent::Error { reason, error }) = last else {
            panic!("{api}: expected an error event");
        };
        assert_eq!(reason, StopReason::Aborted, "{api}");
        assert_eq!(error.stop_reason, StopReason::Aborted);
        assert_eq!(error.error_message.as_deref(), Some("Request was aborted"));
        assert!(!error.content.is_empty(), "{api}: the partial text is kept");
    }
}

#[tokio::test]
async fn ten_thousand_deltas_arrive_in_order() {
    let server = MockServer::start().await.unwrap();
    for api in APIS {
        server.clear();
        let chunks: Vec<String> = (0..10_000).map(|i| format!("{i:04}")).collect();
        server.push(Reply::new().text_chunks(chunks.clone()));
        let opts = StreamOptions {
            include_partial: false,
            ..options()
        };
        let (events, message) = collect(api, &server, opts).await;
        let deltas = events.iter().filter(|e| kind(e) == "text_delta").count();
        assert_eq!(deltas, 10_000, "{api}");
        match &message.content[0] {
            AssistantContent::Text(t) => assert_eq!(t.text, chunks.concat(), "{api}"),
            other => panic!("{api}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn missing_key_and_unknown_api_fail_without_a_request() {
    let server = MockServer::start().await.unwrap();
    let no_key = StreamOptions {
        api_key: None,
        ..options()
    };
    let (_, message) = collect("openai-completions", &server, no_key).await;
    assert_eq!(
        message.error_message.as_deref(),
        Some(
            "OpenAI API key is required. Set OPENAI_API_KEY environment variable or pass it as an argument."
        )
    );
    let client = http_client();
    let mut m = model("openai-completions", &server.url());
    m.api = "bedrock-converse-stream".into();
    let result = stream(&client, &m, &context(), options()).result().await;
    assert_eq!(
        result.error_message.as_deref(),
        Some("Unsupported API: bedrock-converse-stream")
    );
    assert!(server.requests().is_empty());
}

/// A user image and a tool-result image in the context, in each API's own shape.
#[tokio::test]
async fn images_reach_every_api_in_its_own_shape() {
    use tau_protocol::{
        AssistantMessage as Am, ImageContent, TextContent, ToolCall, ToolResultMessage, Usage,
        UserContentBlock,
    };
    let server = MockServer::start().await.unwrap();
    for api in APIS {
        server.clear();
        server.push(Reply::text("I see it."));
        let m = model(api, &server.url());
        let image = |data: &str| {
            UserContentBlock::Image(ImageContent {
                data: data.into(),
                mime_type: "image/png".into(),
            })
        };
        let call = ToolCall {
            id: "call_9".into(),
            name: "bash".into(),
            arguments: serde_json::Map::new(),
            thought_signature: None,
        };
        let ctx = Context {
            system_prompt: None,
            messages: vec![
                Message::User(UserMessage {
                    content: UserContent::Blocks(vec![
                        UserContentBlock::Text(TextContent {
                            text: "look".into(),
                            text_signature: None,
                        }),
                        image("VVNFUklNQUdF"),
                    ]),
                    timestamp: 1,
                    attachments: None,
                }),
                Message::Assistant(Am {
                    content: vec![AssistantContent::ToolCall(call)],
                    api: m.api.clone(),
                    provider: m.provider.clone(),
                    model: m.id.clone(),
                    usage: Usage::default(),
                    stop_reason: StopReason::ToolUse,
                    timestamp: 2,
                    response_id: None,
                    response_model: None,
                    diagnostics: None,
                    error_message: None,
                    retry_after_ms: None,
                }),
                Message::ToolResult(ToolResultMessage {
                    tool_call_id: "call_9".into(),
                    tool_name: "bash".into(),
                    content: vec![image("VE9PTElNQUdF")],
                    details: None,
                    is_error: false,
                    timestamp: 3,
                }),
            ],
            tools: context().tools,
        };
        let result = stream(&http_client(), &m, &ctx, options()).result().await;
        assert_eq!(
            result.stop_reason,
            StopReason::Stop,
            "{api}: {:?}",
            result.error_message
        );
        let body = server.requests()[0].body.to_string();
        let (user_image, tool_image) = match api {
            "anthropic-messages" => (
                r#"{"type":"image","source":{"type":"base64","media_type":"image/png","data":"VVNFUklNQUdF"}}"#,
                r#"{"type":"image","source":{"type":"base64","media_type":"image/png","data":"VE9PTElNQUdF"}}"#,
            ),
            "openai-completions" => (
                r#"{"type":"image_url","image_url":{"url":"data:image/png;base64,VVNFUklNQUdF"}}"#,
                r#"{"type":"image_url","image_url":{"url":"data:image/png;base64,VE9PTElNQUdF"}}"#,
            ),
            "openai-responses" => (
                r#"{"type":"input_image","detail":"auto","image_url":"data:image/png;base64,VVNFUklNQUdF"}"#,
                r#"{"type":"input_image","detail":"auto","image_url":"data:image/png;base64,VE9PTElNQUdF"}"#,
            ),
            _ => (
                r#"{"inlineData":{"mimeType":"image/png","data":"VVNFUklNQUdF"}}"#,
                r#"{"inlineData":{"mimeType":"image/png","data":"VE9PTElNQUdF"}}"#,
            ),
        };
        assert!(body.contains(user_image), "{api}: user image in {body}");
        assert!(body.contains(tool_image), "{api}: tool image in {body}");
    }
}

/// The thinking level reaches each API as its own parameter; a model without reasoning
/// sends none.
#[tokio::test]
async fn thinking_levels_map_to_each_api() {
    let server = MockServer::start().await.unwrap();
    for api in APIS {
        server.clear();
        server.push(Reply::text("ok"));
        server.push(Reply::text("ok"));
        let opts = StreamOptions {
            reasoning: Some(tau_protocol::ThinkingLevel::High),
            ..options()
        };
        let m = model(api, &server.url());
        stream(&http_client(), &m, &context(), opts.clone())
            .result()
            .await;
        let mut plain = m.clone();
        plain.reasoning = false;
        stream(&http_client(), &plain, &context(), opts)
            .result()
            .await;
        let requests = server.requests();
        let (with, without) = (&requests[0].body, &requests[1].body);
        match api {
            "anthropic-messages" => {
                assert_eq!(with["thinking"]["type"], "enabled", "{api}");
                // high = 16384, but the model allows 8192 output tokens in all, so pi's rule
                // shrinks the budget to leave 1024 for the answer.
                assert_eq!(with["thinking"]["budget_tokens"], 8192 - 1024, "{api}");
                assert_eq!(with["max_tokens"], 8192, "{api}");
                assert!(without.get("thinking").is_none(), "{api}");
            }
            "openai-completions" => {
                assert_eq!(with["reasoning_effort"], "high", "{api}");
                assert!(without.get("reasoning_effort").is_none(), "{api}");
            }
            "openai-responses" => {
                assert_eq!(
                    with["reasoning"],
                    json!({"effort": "high", "summary": "auto"}),
                    "{api}"
                );
                assert_eq!(
                    with["include"],
                    json!(["reasoning.encrypted_content"]),
                    "{api}"
                );
                assert!(without.get("reasoning").is_none(), "{api}");
            }
            _ => {
                assert_eq!(
                    with["generationConfig"]["thinkingConfig"],
                    json!({"includeThoughts": true, "thinkingBudget": -1}),
                    "{api}"
                );
                assert!(
                    without["generationConfig"].get("thinkingConfig").is_none(),
                    "{api}"
                );
            }
        }
    }
}

/// Responses reasoning comes back as a signed thinking block whose signature is the whole
/// reasoning item (encrypted content included), and goes out again unchanged next turn.
#[tokio::test]
async fn encrypted_reasoning_is_carried_across_turns() {
    let server = MockServer::start().await.unwrap();
    server.push(Reply::new().thinking("Secret plan.").with_text("First."));
    server.push(Reply::text("Second."));
    let m = model("openai-responses", &server.url());
    let opts = StreamOptions {
        reasoning: Some(tau_protocol::ThinkingLevel::Medium),
        ..options()
    };
    let mut ctx = context();
    let first = stream(&http_client(), &m, &ctx, opts.clone())
        .result()
        .await;
    let AssistantContent::Thinking(thinking) = &first.content[0] else {
        panic!("thinking first: {:?}", first.content);
    };
    let signature: serde_json::Value =
        serde_json::from_str(thinking.thinking_signature.as_deref().unwrap()).unwrap();
    assert_eq!(signature["type"], "reasoning");
    assert!(signature["encrypted_content"].is_string(), "{signature}");
    ctx.messages.push(Message::Assistant(first));
    ctx.messages.push(Message::User(UserMessage {
        content: UserContent::Text("go on".into()),
        timestamp: 5,
        attachments: None,
    }));
    let second = stream(&http_client(), &m, &ctx, opts).result().await;
    assert_eq!(second.stop_reason, StopReason::Stop);
    let input = &server.requests()[1].body["input"];
    let item = input
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["type"] == "reasoning")
        .expect("the reasoning item is replayed");
    assert_eq!(item["encrypted_content"], signature["encrypted_content"]);
}

/// Anthropic's redacted thinking keeps its opaque data as the signature, and cache usage is
/// reported separately.
#[tokio::test]
async fn anthropic_redacted_thinking_and_cache_usage() {
    let server = MockServer::start().await.unwrap();
    server.push(
        Reply::new()
            .redacted_thinking("b3BhcXVl")
            .with_text("Answer.")
            .usage(10, 5, 300, 40),
    );
    let m = model("anthropic-messages", &server.url());
    let result = stream(&http_client(), &m, &context(), options())
        .result()
        .await;
    let AssistantContent::Thinking(t) = &result.content[0] else {
        panic!("{:?}", result.content);
    };
    assert_eq!(t.redacted, Some(true));
    assert_eq!(t.thinking_signature.as_deref(), Some("b3BhcXVl"));
    assert_eq!(t.thinking, "[Reasoning redacted]");
    let u = &result.usage;
    assert_eq!(
        (u.input, u.output, u.cache_read, u.cache_write),
        (10, 5, 300, 40)
    );
    assert_eq!(u.total_tokens, 355);
    let expected = (3.0 * 10.0 + 15.0 * 5.0 + 0.3 * 300.0 + 3.75 * 40.0) / 1e6;
    assert!((u.cost.total - expected).abs() < 1e-12);
    let request = &server.requests()[0];
    assert_eq!(request.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(
        request.body["system"][0]["cache_control"],
        json!({"type": "ephemeral"})
    );
}

#[tokio::test]
async fn tightening_the_idle_cap_ends_a_silent_wait_already_under_way() {
    let server = MockServer::start().await.unwrap();
    for api in APIS {
        server.clear();
        server.push(Reply::text("never finished").with_fault(Fault::StallAfter { events: 2 }));
        let cap = tau_ai::provider::IdleCap::default();
        let opts = StreamOptions {
            idle_timeout: Duration::from_secs(300),
            idle_cap: cap.clone(),
            ..options()
        };
        let tighten = async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            cap.tighten(Duration::from_millis(300));
        };
        // Far below the 300 s the stream would otherwise wait.
        let ((_, message), ()) = tokio::time::timeout(Duration::from_secs(30), async {
            tokio::join!(collect(api, &server, opts), tighten)
        })
        .await
        .unwrap_or_else(|_| panic!("{api}: the tightened cap did not end the wait"));
        assert_eq!(message.stop_reason, StopReason::Error, "{api}");
        let text = message.error_message.unwrap_or_default();
        assert!(text.contains("timed out"), "{api}: {text}");
        // Never raised again, and a zero limit is no limit.
        cap.tighten(Duration::from_secs(10));
        cap.tighten(Duration::ZERO);
        assert_eq!(cap.get(), Some(Duration::from_millis(300)));
    }
}
