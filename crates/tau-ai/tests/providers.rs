//! Every provider adapter against tau-mock-llm over real loopback HTTP: text, thinking, two
//! tool calls in one reply, usage and cost, every fault the mock injects, abort mid-stream,
//! and a 10,000-delta reply. The cloud APIs run with their credentials checked by the mock:
//! Azure's key, Vertex's OAuth token (a service-account JWT exchanged at the mock's token
//! endpoint) and Bedrock's SigV4 signature.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::LazyLock;
use std::time::Duration;

use serde_json::json;
use tau_ai::provider::{
    CancellationToken, Context, ProviderEnv, StreamOptions, Tool, http_client, is_overflow_error,
    is_retryable_error, stream,
};
use tau_mock_llm::{AwsCredentials, Fault, GoogleOAuth, MockServer, Reply};
use tau_protocol::{
    AssistantContent, AssistantMessage, AssistantMessageEvent, InputModality, Message, Model,
    ModelCost, StopReason, UserContent, UserMessage,
};

const APIS: [&str; 7] = [
    "anthropic-messages",
    "openai-completions",
    "openai-responses",
    "google-generative-ai",
    "azure-openai-responses",
    "google-vertex",
    "bedrock-converse-stream",
];

/// The test AWS key pair the mock checks signatures against.
const AWS_KEY_ID: &str = "AKIAMOCKTEST0000";
const AWS_SECRET: &str = "mock/secret+key/for/tests/only/0000000000";
const SERVICE_ACCOUNT: &str = "tau-tests@mock-project.iam.gserviceaccount.com";

/// A mock whose cloud endpoints check credentials as the services do.
async fn start() -> MockServer {
    let server = MockServer::start().await.unwrap();
    server.require_aws_signature(AwsCredentials {
        access_key_id: AWS_KEY_ID.into(),
        secret_access_key: AWS_SECRET.into(),
        session_token: Some("mock-session-token".into()),
    });
    server.set_google_oauth(GoogleOAuth {
        service_account: Some((SERVICE_ACCOUNT.into(), "key-1".into())),
        expires_in: 3600,
        ..GoogleOAuth::default()
    });
    server
}

/// Where the tests' service-account key files live (one per mock, for its token endpoint).
static KEY_DIR: LazyLock<tempfile::TempDir> = LazyLock::new(|| tempfile::tempdir().unwrap());

/// The environment a cloud provider reads: AWS keys and region, Vertex's project, location,
/// key file and endpoint, Azure's nothing (its base URL is the model's).
fn cloud_env(server: &MockServer) -> HashMap<String, String> {
    let url = server.url();
    let key_file: PathBuf = KEY_DIR
        .path()
        .join(format!("{}.json", server.addr().port()));
    if !key_file.exists() {
        let json =
            GoogleOAuth::service_account_json(SERVICE_ACCOUNT, "key-1", &format!("{url}/token"));
        std::fs::write(&key_file, json).unwrap();
    }
    [
        ("AWS_ACCESS_KEY_ID", AWS_KEY_ID.to_string()),
        ("AWS_SECRET_ACCESS_KEY", AWS_SECRET.to_string()),
        ("AWS_SESSION_TOKEN", "mock-session-token".to_string()),
        ("AWS_REGION", "eu-west-3".to_string()),
        ("GOOGLE_CLOUD_PROJECT", "mock-project".to_string()),
        ("GOOGLE_CLOUD_LOCATION", "us-central1".to_string()),
        (
            "GOOGLE_APPLICATION_CREDENTIALS",
            key_file.display().to_string(),
        ),
        ("GOOGLE_VERTEX_BASE_URL", url),
        ("HOME", KEY_DIR.path().display().to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

fn model(api: &str, url: &str) -> Model {
    let base_url = match api {
        "anthropic-messages" | "bedrock-converse-stream" => url.to_string(),
        "google-generative-ai" => format!("{url}/v1beta"),
        "azure-openai-responses" => format!("{url}/openai/v1"),
        // The catalog's template: the endpoint comes from the location (here overridden by
        // GOOGLE_VERTEX_BASE_URL, as Google's SDK allows).
        "google-vertex" => "https://{location}-aiplatform.googleapis.com".to_string(),
        _ => format!("{url}/v1"),
    };
    // A Bedrock id with a `:` (escaped in the path, and escaped again in the signature).
    let id = match api {
        "bedrock-converse-stream" => "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        _ => "mock-model",
    };
    Model {
        id: id.into(),
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

/// The options a request to `api` on `server` needs: a key (for Vertex the marker that
/// means Application Default Credentials, as tau's registry gives it), the cloud environment.
fn options(api: &str, server: &MockServer) -> StreamOptions {
    let env = cloud_env(server);
    StreamOptions {
        api_key: Some(match api {
            "google-vertex" => "<authenticated>".into(),
            _ => "test-key".into(),
        }),
        include_partial: true,
        idle_timeout: Duration::from_secs(10),
        env: ProviderEnv::new(move |name| env.get(name).cloned()),
        ..StreamOptions::default()
    }
}

/// An HTTP error's text with the provider's own prefix taken off, so that every API's
/// status can be checked alike (`Azure OpenAI API error (429): 429 …`).
fn status_text(message: &str) -> &str {
    match message.strip_prefix("Azure OpenAI API error (") {
        Some(rest) => rest.split_once("): ").map_or(rest, |(_, m)| m),
        None => message,
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
    let server = start().await;
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
        let (events, message) = collect(api, &server, options(api, &server)).await;
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
        if api == "google-generative-ai" || api == "google-vertex" {
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
        if ![
            "google-generative-ai",
            "google-vertex",
            "bedrock-converse-stream",
        ]
        .contains(&api)
        {
            // Gemini and Bedrock stream because of the URL (`:streamGenerateContent?alt=sse`,
            // `/converse-stream`).
            assert_eq!(server.requests()[0].body["stream"], json!(true), "{api}");
        }
    }
}

#[tokio::test]
async fn request_shapes_reach_the_server() {
    let server = start().await;
    for api in APIS {
        server.clear();
        server.push(Reply::text("ok"));
        let (_, message) = collect(api, &server, options(api, &server)).await;
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
            "azure-openai-responses" => request.header("api-key"),
            _ => request.header("authorization"),
        };
        let expected = match api {
            "google-vertex" => "Bearer ya29.mock-",
            "bedrock-converse-stream" => "AWS4-HMAC-SHA256 Credential=AKIAMOCKTEST0000/",
            _ => "test-key",
        };
        assert!(
            auth.is_some_and(|a| a.contains(expected)),
            "{api}: credentials sent: {auth:?}"
        );
        let text = request.body.to_string();
        assert!(text.contains("list the files"), "{api}: prompt sent");
        assert!(text.contains("You are terse."), "{api}: system prompt sent");
        assert!(text.contains("\"bash\""), "{api}: tool sent");
    }
}

type Check = fn(&str, &str) -> bool;

/// Whether `message` reports HTTP `status` the way `api`'s SDK words it: `<status> …` (after
/// Azure's prefix), or Bedrock's exception names, which carry no status.
fn reports_status(api: &str, message: &str, status: u16) -> bool {
    if api == "bedrock-converse-stream" {
        let prefix = match status {
            400 => "Validation error: ",
            429 => "Throttling error: ",
            500 => "Internal server error: ",
            503 => "Service unavailable: ",
            _ => return false,
        };
        return message.starts_with(prefix);
    }
    status_text(message).starts_with(&format!("{status} "))
}

#[tokio::test]
async fn every_fault_becomes_an_error_message() {
    let server = start().await;
    let cases: [(Fault, Check); 6] = [
        (
            Fault::RateLimited {
                retry_after: Some(2),
            },
            |api, m| reports_status(api, m, 429) && is_retryable_error(m),
        ),
        (Fault::ServerError, |api, m| {
            reports_status(api, m, 500) && is_retryable_error(m)
        }),
        (Fault::ServiceUnavailable, |api, m| {
            reports_status(api, m, 503) && is_retryable_error(m)
        }),
        (Fault::Overloaded, |_, m| is_retryable_error(m)),
        (Fault::ContextOverflow, |api, m| {
            reports_status(api, m, 400) && is_overflow_error(m) && !is_retryable_error(m)
        }),
        (Fault::DropAfter { events: 2 }, |_, m| is_retryable_error(m)),
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
            let (_, message) = collect(api, &server, options(api, &server)).await;
            assert_eq!(message.stop_reason, StopReason::Error, "{api} {fault:?}");
            let text = message.error_message.clone().unwrap_or_default();
            assert!(check(api, &text), "{api} {fault:?}: {text}");
        }
    }
}

/// An error the server sends inside a stream that has started ends the reply with the API's
/// own words, the text kept.
#[tokio::test]
async fn in_stream_errors_end_the_reply() {
    let server = start().await;
    for api in APIS {
        server.clear();
        server.push(
            Reply::new()
                .with_text("partial answer that is long enough")
                .chunk_size(4)
                .with_fault(Fault::ErrorEventAfter { events: 8 }),
        );
        let (events, message) = collect(api, &server, options(api, &server)).await;
        assert_eq!(message.stop_reason, StopReason::Error, "{api}");
        assert!(events.iter().any(|e| kind(e) == "text_delta"), "{api}");
        let text = message.error_message.unwrap_or_default();
        let expected = match api {
            "anthropic-messages" => "overloaded_error",
            "openai-completions" => "The server had an error while processing your request.",
            "openai-responses" | "azure-openai-responses" => {
                "Error Code server_error: The server had an error while processing your request."
            }
            "bedrock-converse-stream" => {
                "Throttling error: Too many requests, please wait before trying again."
            }
            _ => "The model is overloaded. Please try again later.",
        };
        assert!(text.contains(expected), "{api}: {text}");
    }
}

#[tokio::test]
async fn a_stalled_stream_times_out() {
    let server = start().await;
    for api in APIS {
        server.clear();
        server.push(Reply::text("never finished").with_fault(Fault::StallAfter { events: 2 }));
        let opts = StreamOptions {
            idle_timeout: Duration::from_millis(300),
            ..options(api, &server)
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
    let server = start().await;
    for api in APIS {
        // Off by default: the first failure is the answer.
        server.clear();
        server.push(Reply::fault(Fault::ServerError));
        server.push(Reply::text("second"));
        let (_, message) = collect(api, &server, options(api, &server)).await;
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
            ..options(api, &server)
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
                ..options(api, &server)
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
    let server = start().await;
    for api in APIS {
        server.clear();
        server.push(Reply::text("late").delay_ms(3000));
        let opts = StreamOptions {
            request_timeout: Some(Duration::from_millis(300)),
            ..options(api, &server)
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
            ..options(api, &server)
        };
        let (_, message) = collect(api, &server, opts).await;
        assert_eq!(message.stop_reason, StopReason::Stop, "{api}");
    }
}

#[tokio::test]
async fn abort_mid_stream_keeps_what_arrived() {
    let server = start().await;
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
            ..options(api, &server)
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
    let server = start().await;
    for api in APIS {
        server.clear();
        let chunks: Vec<String> = (0..10_000).map(|i| format!("{i:04}")).collect();
        server.push(Reply::new().text_chunks(chunks.clone()));
        let opts = StreamOptions {
            include_partial: false,
            ..options(api, &server)
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
    let server = start().await;
    let no_key = StreamOptions {
        api_key: None,
        ..options("openai-completions", &server)
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
    m.api = "bedrock-runtime-invoke".into();
    let result = stream(
        &client,
        &m,
        &context(),
        options("openai-completions", &server),
    )
    .result()
    .await;
    assert_eq!(
        result.error_message.as_deref(),
        Some("Unsupported API: bedrock-runtime-invoke")
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
    let server = start().await;
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
        let result = stream(&http_client(), &m, &ctx, options(api, &server))
            .result()
            .await;
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
            "openai-responses" | "azure-openai-responses" => (
                r#"{"type":"input_image","detail":"auto","image_url":"data:image/png;base64,VVNFUklNQUdF"}"#,
                r#"{"type":"input_image","detail":"auto","image_url":"data:image/png;base64,VE9PTElNQUdF"}"#,
            ),
            "bedrock-converse-stream" => (
                r#"{"image":{"format":"png","source":{"bytes":"VVNFUklNQUdF"}}}"#,
                r#"{"image":{"format":"png","source":{"bytes":"VE9PTElNQUdF"}}}"#,
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
    let server = start().await;
    for api in APIS {
        server.clear();
        server.push(Reply::text("ok"));
        server.push(Reply::text("ok"));
        let opts = StreamOptions {
            reasoning: Some(tau_protocol::ThinkingLevel::High),
            ..options(api, &server)
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
            "bedrock-converse-stream" => {
                // A Claude model: Anthropic's thinking in the additional fields, the budget
                // fitted inside the output limit as for Anthropic's API.
                assert_eq!(
                    with["additionalModelRequestFields"],
                    json!({"thinking": {"type": "enabled", "budget_tokens": 8192 - 1024,
                        "display": "summarized"},
                        "anthropic_beta": ["interleaved-thinking-2025-05-14"]}),
                    "{api}"
                );
                assert_eq!(with["inferenceConfig"]["maxTokens"], 8192, "{api}");
                assert!(
                    without.get("additionalModelRequestFields").is_none(),
                    "{api}"
                );
            }
            "openai-responses" | "azure-openai-responses" => {
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
    let server = start().await;
    server.push(Reply::new().thinking("Secret plan.").with_text("First."));
    server.push(Reply::text("Second."));
    let m = model("openai-responses", &server.url());
    let opts = StreamOptions {
        reasoning: Some(tau_protocol::ThinkingLevel::Medium),
        ..options("openai-responses", &server)
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
    let server = start().await;
    server.push(
        Reply::new()
            .redacted_thinking("b3BhcXVl")
            .with_text("Answer.")
            .usage(10, 5, 300, 40),
    );
    let m = model("anthropic-messages", &server.url());
    let result = stream(
        &http_client(),
        &m,
        &context(),
        options("anthropic-messages", &server),
    )
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
    let server = start().await;
    for api in APIS {
        server.clear();
        server.push(Reply::text("never finished").with_fault(Fault::StallAfter { events: 2 }));
        let cap = tau_ai::provider::IdleCap::default();
        let opts = StreamOptions {
            idle_timeout: Duration::from_secs(300),
            idle_cap: cap.clone(),
            ..options(api, &server)
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

/// Streams one reply from `server` with `model` and `options`, returning the final message.
async fn one_reply(server: &MockServer, m: &Model, options: StreamOptions) -> AssistantMessage {
    server.push(Reply::text("ok"));
    stream(&http_client(), m, &context(), options)
        .result()
        .await
}

fn env_of(vars: HashMap<String, String>) -> ProviderEnv {
    ProviderEnv::new(move |name| vars.get(name).cloned())
}

/// A service account's token is exchanged once and reused while it has more than five
/// minutes left; a shorter-lived one is exchanged again. The stream goes to the
/// project-scoped Vertex path with the token as a bearer.
#[tokio::test]
async fn vertex_tokens_are_cached_until_shortly_before_they_expire() {
    for (lifetime, grants) in [(3600, 1), (120, 2)] {
        let server = start().await;
        server.set_google_oauth(GoogleOAuth {
            service_account: Some((SERVICE_ACCOUNT.into(), "key-1".into())),
            expires_in: lifetime,
            ..GoogleOAuth::default()
        });
        let m = model("google-vertex", &server.url());
        for _ in 0..2 {
            let reply = one_reply(&server, &m, options("google-vertex", &server)).await;
            assert_eq!(
                reply.stop_reason,
                StopReason::Stop,
                "{:?}",
                reply.error_message
            );
        }
        assert_eq!(
            server.token_grants(),
            vec!["urn:ietf:params:oauth:grant-type:jwt-bearer"; grants],
            "lifetime {lifetime}"
        );
        let request = &server.requests()[1];
        assert_eq!(
            request.path,
            "/v1/projects/mock-project/locations/us-central1/publishers/google/models/mock-model:streamGenerateContent"
        );
        assert_eq!(request.query.as_deref(), Some("alt=sse"));
        assert!(
            request
                .header("authorization")
                .unwrap()
                .starts_with("Bearer ya29.mock-")
        );
    }
}

/// A token the server no longer takes (revoked before its time) fails that request with
/// Google's 401 and is dropped, so the next request exchanges the credentials again.
#[tokio::test]
async fn a_refused_vertex_token_is_exchanged_again() {
    let server = start().await;
    let m = model("google-vertex", &server.url());
    let first = one_reply(&server, &m, options("google-vertex", &server)).await;
    assert_eq!(
        first.stop_reason,
        StopReason::Stop,
        "{:?}",
        first.error_message
    );
    server.revoke_google_tokens();
    let refused = one_reply(&server, &m, options("google-vertex", &server)).await;
    assert!(
        refused
            .error_message
            .as_deref()
            .is_some_and(|e| e.starts_with("401 Request had invalid authentication credentials")),
        "{:?}",
        refused.error_message
    );
    server.clear();
    let again = one_reply(&server, &m, options("google-vertex", &server)).await;
    assert_eq!(
        again.stop_reason,
        StopReason::Stop,
        "{:?}",
        again.error_message
    );
    assert_eq!(server.token_grants().len(), 2);
}

/// `gcloud auth application-default login`'s file (found under HOME) refreshes with the
/// refresh-token grant and bills its quota project; an API key goes to the express path.
#[tokio::test]
async fn vertex_authorized_users_and_api_keys() {
    let server = start().await;
    server.set_google_oauth(GoogleOAuth {
        authorized_user: Some(("client-1".into(), "secret-1".into(), "refresh-1".into())),
        api_key: Some("AIza-vertex-key".into()),
        expires_in: 3600,
        ..GoogleOAuth::default()
    });
    let home = tempfile::tempdir().unwrap();
    let gcloud = home.path().join(".config/gcloud");
    std::fs::create_dir_all(&gcloud).unwrap();
    let write_login = |refresh: &str| {
        let login = json!({"type": "authorized_user", "client_id": "client-1",
            "client_secret": "secret-1", "refresh_token": refresh,
            "quota_project_id": "billing-project", "token_uri": format!("{}/token", server.url())});
        std::fs::write(
            gcloud.join("application_default_credentials.json"),
            login.to_string(),
        )
        .unwrap();
    };
    write_login("refresh-1");
    let mut vars = cloud_env(&server);
    vars.remove("GOOGLE_APPLICATION_CREDENTIALS");
    vars.insert("HOME".into(), home.path().display().to_string());
    let m = model("google-vertex", &server.url());
    let adc = StreamOptions {
        env: env_of(vars.clone()),
        ..options("google-vertex", &server)
    };
    let reply = one_reply(&server, &m, adc.clone()).await;
    assert_eq!(
        reply.stop_reason,
        StopReason::Stop,
        "{:?}",
        reply.error_message
    );
    assert_eq!(server.token_grants(), ["refresh_token"]);
    let request = &server.requests()[0];
    assert_eq!(
        request.header("x-goog-user-project"),
        Some("billing-project")
    );

    // Express mode: the key as `x-goog-api-key`, no project in the path, no token.
    server.clear();
    let keyed = StreamOptions {
        api_key: Some("AIza-vertex-key".into()),
        ..adc.clone()
    };
    let reply = one_reply(&server, &m, keyed).await;
    assert_eq!(
        reply.stop_reason,
        StopReason::Stop,
        "{:?}",
        reply.error_message
    );
    let request = &server.requests()[0];
    assert_eq!(
        request.path,
        "/v1/publishers/google/models/mock-model:streamGenerateContent"
    );
    assert_eq!(request.header("x-goog-api-key"), Some("AIza-vertex-key"));
    assert_eq!(request.header("authorization"), None);

    // A refused refresh is reported with Google's words, before any model request.
    write_login("revoked");
    server.clear();
    let reply = one_reply(&server, &m, adc.clone()).await;
    assert_eq!(reply.stop_reason, StopReason::Error);
    assert_eq!(
        reply.error_message.as_deref(),
        Some(
            format!(
                "Vertex AI: getting an access token from {}/token failed: 400 invalid_grant: Bad Request",
                server.url()
            )
            .as_str()
        )
    );
    assert!(server.requests().is_empty());

    // No credentials at all.
    let mut bare = vars.clone();
    bare.insert("HOME".into(), "/nonexistent-home".into());
    let none = StreamOptions {
        env: env_of(bare),
        ..adc
    };
    let reply = one_reply(&server, &m, none).await;
    assert!(
        reply
            .error_message
            .unwrap()
            .starts_with("Vertex AI: no Application Default Credentials found")
    );
}

/// The signature the mock checks: scoped to the region and service, covering the security
/// token, over the path with the model id's `:` escaped (and escaped again when signed).
/// A wrong secret is refused with AWS's words and is not retried.
#[tokio::test]
async fn bedrock_requests_are_signed_for_their_region() {
    let server = start().await;
    let m = model("bedrock-converse-stream", &server.url());
    let reply = one_reply(&server, &m, options("bedrock-converse-stream", &server)).await;
    assert_eq!(
        reply.stop_reason,
        StopReason::Stop,
        "{:?}",
        reply.error_message
    );
    assert_eq!(reply.api, "bedrock-converse-stream");
    let request = &server.requests()[0];
    assert_eq!(
        request.path,
        "/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse-stream"
    );
    let authorization = request.header("authorization").unwrap();
    assert!(
        authorization.contains("/eu-west-3/bedrock/aws4_request, SignedHeaders=")
            && authorization.contains("x-amz-security-token"),
        "{authorization}"
    );
    assert_eq!(
        request.header("x-amz-security-token"),
        Some("mock-session-token")
    );

    server.clear();
    let mut vars = cloud_env(&server);
    vars.insert("AWS_SECRET_ACCESS_KEY".into(), "not-the-secret".into());
    let wrong = StreamOptions {
        env: env_of(vars),
        max_retries: 2,
        ..options("bedrock-converse-stream", &server)
    };
    let reply = one_reply(&server, &m, wrong).await;
    assert_eq!(
        reply.error_message.as_deref(),
        Some(
            "InvalidSignatureException: The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details."
        )
    );
    assert_eq!(server.requests().len(), 1, "a 403 is not retried");
}

/// Bedrock API keys go as a bearer token; a profile's keys and region come from the shared
/// files under HOME.
#[tokio::test]
async fn bedrock_bearer_keys_and_profiles() {
    let server = start().await;
    server.require_aws_bearer("bedrock-api-key");
    let m = model("bedrock-converse-stream", &server.url());
    let with = |vars: HashMap<String, String>| StreamOptions {
        env: env_of(vars),
        ..options("bedrock-converse-stream", &server)
    };
    let mut vars = cloud_env(&server);
    vars.insert("AWS_BEARER_TOKEN_BEDROCK".into(), "bedrock-api-key".into());
    let reply = one_reply(&server, &m, with(vars.clone())).await;
    assert_eq!(
        reply.stop_reason,
        StopReason::Stop,
        "{:?}",
        reply.error_message
    );
    assert_eq!(
        server.requests()[0].header("authorization"),
        Some("Bearer bedrock-api-key")
    );
    vars.insert("AWS_BEARER_TOKEN_BEDROCK".into(), "revoked".into());
    let reply = one_reply(&server, &m, with(vars)).await;
    assert_eq!(
        reply.error_message.as_deref(),
        Some("UnrecognizedClientException: The security token included in the request is invalid.")
    );

    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir(home.path().join(".aws")).unwrap();
    std::fs::write(
        home.path().join(".aws/credentials"),
        format!("[work]\naws_access_key_id = {AWS_KEY_ID}\naws_secret_access_key = {AWS_SECRET}\naws_session_token = mock-session-token\n"),
    )
    .unwrap();
    std::fs::write(
        home.path().join(".aws/config"),
        "[profile work]\nregion = ap-southeast-2\n",
    )
    .unwrap();
    let mut vars: HashMap<String, String> = HashMap::new();
    vars.insert("HOME".into(), home.path().display().to_string());
    vars.insert("AWS_PROFILE".into(), "work".into());
    server.clear();
    let reply = one_reply(&server, &m, with(vars)).await;
    assert_eq!(
        reply.stop_reason,
        StopReason::Stop,
        "{:?}",
        reply.error_message
    );
    let authorization = server.requests()[0]
        .header("authorization")
        .unwrap()
        .to_string();
    assert!(
        authorization.contains("/ap-southeast-2/bedrock/aws4_request"),
        "{authorization}"
    );
}

/// A hook that rewrites the body runs before signing: the signature covers what is sent.
#[tokio::test]
async fn bedrock_signs_the_body_hooks_return() {
    struct AddTemperature;
    impl tau_ai::provider::RequestHooks for AddTemperature {
        fn before_request(
            &self,
            mut payload: serde_json::Value,
        ) -> futures_util::future::BoxFuture<'_, serde_json::Value> {
            payload["inferenceConfig"]["temperature"] = json!(0.25);
            Box::pin(async move { payload })
        }
        fn after_response(
            &self,
            _status: u16,
            _headers: Vec<(String, String)>,
        ) -> futures_util::future::BoxFuture<'_, ()> {
            Box::pin(async {})
        }
    }
    let server = start().await;
    let m = model("bedrock-converse-stream", &server.url());
    let hooked = StreamOptions {
        hooks: Some(std::sync::Arc::new(AddTemperature)),
        ..options("bedrock-converse-stream", &server)
    };
    let reply = one_reply(&server, &m, hooked).await;
    assert_eq!(
        reply.stop_reason,
        StopReason::Stop,
        "{:?}",
        reply.error_message
    );
    assert_eq!(
        server.requests()[0].body["inferenceConfig"]["temperature"],
        0.25
    );
}

/// Keys that come from elsewhere sign as well as static ones: the container endpoint (with its
/// authorization token file), STS's `AssumeRoleWithWebIdentity` (the token file, the role,
/// `AWS_ENDPOINT_URL_STS`), and a profile's `credential_process`. Temporary keys are fetched
/// once and reused while they have more than five minutes left.
#[tokio::test]
async fn bedrock_keys_from_containers_web_identities_and_processes() {
    let temporary = AwsCredentials {
        access_key_id: "ASIATEMPORARY0001".into(),
        secret_access_key: "temporary/secret".into(),
        session_token: Some("temporary-session".into()),
    };
    let server = MockServer::start().await.unwrap();
    server.require_aws_signature(temporary.clone());
    let m = model("bedrock-converse-stream", &server.url());
    let dir = tempfile::tempdir().unwrap();
    let base = |extra: &[(&str, String)]| {
        let mut vars: HashMap<String, String> = HashMap::new();
        vars.insert("HOME".into(), dir.path().display().to_string());
        vars.insert("AWS_REGION".into(), "us-west-2".into());
        for (k, v) in extra {
            vars.insert((*k).to_string(), v.clone());
        }
        StreamOptions {
            env: env_of(vars),
            ..options("bedrock-converse-stream", &server)
        }
    };

    let token_file = dir.path().join("eks-pod-identity-token");
    std::fs::write(&token_file, "pod-identity-token\n").unwrap();
    server.serve_aws_container_credentials(temporary.clone(), Some("pod-identity-token".into()));
    let container = base(&[
        (
            "AWS_CONTAINER_CREDENTIALS_FULL_URI",
            format!("{}/v2/credentials/task-1", server.url()),
        ),
        (
            "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
            token_file.display().to_string(),
        ),
    ]);
    for _ in 0..2 {
        let reply = one_reply(&server, &m, container.clone()).await;
        assert_eq!(
            reply.stop_reason,
            StopReason::Stop,
            "{:?}",
            reply.error_message
        );
    }
    assert_eq!(server.aws_credential_fetches(), ["container"]);

    let identity_file = dir.path().join("irsa-token");
    std::fs::write(&identity_file, "oidc-token").unwrap();
    server.serve_aws_web_identity(tau_mock_llm::AwsWebIdentity {
        role_arn: "arn:aws:iam::000000000000:role/bedrock-user".into(),
        token: "oidc-token".into(),
        credentials: temporary.clone(),
    });
    let irsa = |role: &str| {
        base(&[
            (
                "AWS_WEB_IDENTITY_TOKEN_FILE",
                identity_file.display().to_string(),
            ),
            ("AWS_ROLE_ARN", role.to_string()),
            ("AWS_ENDPOINT_URL_STS", server.url()),
        ])
    };
    let reply = one_reply(
        &server,
        &m,
        irsa("arn:aws:iam::000000000000:role/bedrock-user"),
    )
    .await;
    assert_eq!(
        reply.stop_reason,
        StopReason::Stop,
        "{:?}",
        reply.error_message
    );
    assert_eq!(
        server.aws_credential_fetches(),
        ["container", "AssumeRoleWithWebIdentity"]
    );
    let denied = one_reply(&server, &m, irsa("arn:aws:iam::000000000000:role/other")).await;
    assert_eq!(
        denied.error_message.as_deref(),
        Some(
            format!(
                "Could not get AWS credentials from {}: 403 AccessDenied: Not authorized to perform sts:AssumeRoleWithWebIdentity",
                server.url()
            )
            .as_str()
        )
    );

    std::fs::create_dir(dir.path().join(".aws")).unwrap();
    std::fs::write(
        dir.path().join(".aws/config"),
        "[profile tool]\ncredential_process = printf '{\"Version\":1,\"AccessKeyId\":\"ASIATEMPORARY0001\",\"SecretAccessKey\":\"temporary/secret\",\"SessionToken\":\"temporary-session\"}'\n",
    )
    .unwrap();
    let reply = one_reply(&server, &m, base(&[("AWS_PROFILE", "tool".into())])).await;
    assert_eq!(
        reply.stop_reason,
        StopReason::Stop,
        "{:?}",
        reply.error_message
    );
}
