//! Scripted faults: HTTP errors in each API's shape, dropped and stalled streams, and the
//! mock's own refusals.

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{Value, json};
use tau_mock_llm::{Api, Fault, MockServer, Reply};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::{call, client, count_events, post, request};

struct Failure {
    status: u16,
    retry_after: Option<String>,
    content_type: String,
    body: String,
}

impl Failure {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }

    /// The error message wherever the API puts it.
    fn message(&self) -> String {
        self.json()["error"]["message"].as_str().unwrap().to_owned()
    }
}

async fn fail(server: &MockServer, api: Api, fault: Fault) -> Failure {
    server.push(Reply::fault(fault));
    request_failure(server, api).await
}

async fn request_failure(server: &MockServer, api: Api) -> Failure {
    let (path, body) = request(api, "x");
    let response = post(&server.url(), &path, &body).await;
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    };
    let retry_after = header("retry-after");
    let content_type = header("content-type").unwrap_or_default();
    Failure {
        status: response.status().as_u16(),
        retry_after,
        content_type,
        body: response.text().await.unwrap(),
    }
}

fn assert_shape(
    api: Api,
    f: &Failure,
    anthropic_type: &str,
    openai_type: &str,
    google_status: &str,
) {
    assert_eq!(f.content_type, "application/json");
    let v = f.json();
    match api.stream_format() {
        Api::AnthropicMessages => {
            assert_eq!(v["type"], "error");
            assert_eq!(v["error"]["type"], anthropic_type);
            assert!(v["error"]["message"].is_string());
        }
        Api::OpenAiCompletions | Api::OpenAiResponses => {
            let keys: Vec<&String> = v["error"].as_object().unwrap().keys().collect();
            assert_eq!(keys, ["message", "type", "param", "code"]);
            assert_eq!(v["error"]["type"], openai_type);
        }
        Api::GoogleGenerativeAi => {
            assert_eq!(v["error"]["code"], f.status);
            assert_eq!(v["error"]["status"], google_status);
            assert!(v["error"]["message"].is_string());
        }
        other => panic!("{other} has no JSON error shape of these three"),
    }
}

#[tokio::test]
async fn overloaded_is_529_on_anthropic_and_503_elsewhere() {
    let server = MockServer::start().await.unwrap();
    for api in Api::SSE {
        let f = fail(&server, api, Fault::Overloaded).await;
        let want = if api == Api::AnthropicMessages {
            529
        } else {
            503
        };
        assert_eq!(f.status, want, "{api}");
        assert_shape(api, &f, "overloaded_error", "server_error", "UNAVAILABLE");
        assert_eq!(f.retry_after, None);
    }
    let f = fail(&server, Api::AnthropicMessages, Fault::Overloaded).await;
    assert_eq!(
        f.json(),
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    );
}

#[tokio::test]
async fn rate_limits_are_429_with_retry_after() {
    let server = MockServer::start().await.unwrap();
    for api in Api::SSE {
        let f = fail(
            &server,
            api,
            Fault::RateLimited {
                retry_after: Some(7),
            },
        )
        .await;
        assert_eq!(f.status, 429, "{api}");
        assert_eq!(f.retry_after.as_deref(), Some("7"), "{api}");
        assert_shape(
            api,
            &f,
            "rate_limit_error",
            "requests",
            "RESOURCE_EXHAUSTED",
        );
        match api.stream_format() {
            Api::OpenAiCompletions | Api::OpenAiResponses => {
                assert_eq!(f.json()["error"]["code"], "rate_limit_exceeded");
            }
            Api::GoogleGenerativeAi => {
                assert_eq!(f.json()["error"]["details"][0]["retryDelay"], "7s");
            }
            _ => {}
        }
        let f = fail(&server, api, Fault::RateLimited { retry_after: None }).await;
        assert_eq!((f.status, f.retry_after), (429, None));
    }
}

#[tokio::test]
async fn server_errors_and_unavailability() {
    let server = MockServer::start().await.unwrap();
    for api in Api::SSE {
        let f = fail(&server, api, Fault::ServerError).await;
        assert_eq!(f.status, 500, "{api}");
        assert_shape(api, &f, "api_error", "server_error", "INTERNAL");
        let f = fail(&server, api, Fault::ServiceUnavailable).await;
        assert_eq!(f.status, 503, "{api}");
        assert_shape(api, &f, "api_error", "server_error", "UNAVAILABLE");
    }
}

#[tokio::test]
async fn context_overflow_uses_each_api_wording() {
    let server = MockServer::start().await.unwrap();
    for api in Api::SSE {
        let f = fail(&server, api, Fault::ContextOverflow).await;
        assert_eq!(f.status, 400, "{api}");
        assert_shape(
            api,
            &f,
            "invalid_request_error",
            "invalid_request_error",
            "INVALID_ARGUMENT",
        );
        let message = f.message();
        match api.stream_format() {
            Api::AnthropicMessages => {
                assert_eq!(
                    message,
                    "prompt is too long: 210000 tokens > 200000 maximum"
                );
            }
            Api::OpenAiCompletions => {
                assert_eq!(
                    message,
                    "This model's maximum context length is 128000 tokens. However, your messages \
                     resulted in 130000 tokens. Please reduce the length of the messages."
                );
                assert_eq!(f.json()["error"]["code"], "context_length_exceeded");
            }
            Api::OpenAiResponses => {
                assert_eq!(
                    message,
                    "Your input exceeds the context window of this model. Please adjust your input \
                     and try again."
                );
                assert_eq!(f.json()["error"]["code"], "context_length_exceeded");
            }
            Api::GoogleGenerativeAi => assert_eq!(
                message,
                "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)."
            ),
            other => panic!("{other} does not stream SSE"),
        }
    }
}

#[tokio::test]
async fn raw_http_faults_send_their_body_verbatim() {
    let server = MockServer::start().await.unwrap();
    let f = fail(
        &server,
        Api::OpenAiResponses,
        Fault::Http {
            status: 418,
            body: Some("I'm a teapot".into()),
            retry_after: Some(3),
        },
    )
    .await;
    assert_eq!(
        (f.status, f.body.as_str(), f.retry_after.as_deref()),
        (418, "I'm a teapot", Some("3"))
    );
    assert!(f.content_type.starts_with("text/plain"));
    let f = fail(
        &server,
        Api::AnthropicMessages,
        Fault::Http {
            status: 401,
            body: Some(r#"{"custom":true}"#.into()),
            retry_after: None,
        },
    )
    .await;
    assert_eq!((f.status, f.body.as_str()), (401, r#"{"custom":true}"#));
    assert_eq!(f.content_type, "application/json");
    for api in Api::SSE {
        let f = fail(
            &server,
            api,
            Fault::Http {
                status: 502,
                body: None,
                retry_after: None,
            },
        )
        .await;
        assert_eq!(f.status, 502);
        assert_shape(api, &f, "api_error", "server_error", "UNKNOWN");
        assert_eq!(f.message(), "Bad Gateway");
    }
}

#[tokio::test]
async fn an_empty_script_fails_with_500() {
    let server = MockServer::start().await.unwrap();
    for api in Api::SSE {
        let f = request_failure(&server, api).await;
        assert_eq!(f.status, 500, "{api}");
        assert_eq!(f.message(), "mock script exhausted");
    }
    assert_eq!(
        server.requests().len(),
        Api::SSE.len(),
        "failed requests are logged too"
    );
}

#[tokio::test]
async fn bad_requests_are_refused_without_consuming_the_script() {
    let server = MockServer::start().await.unwrap();
    server.push(Reply::text("kept"));
    let url = server.url();
    let (path, mut body) = request(Api::AnthropicMessages, "x");
    body["stream"] = json!(false);
    let r = post(&url, &path, &body).await;
    assert_eq!(r.status(), 400);
    assert!(r.text().await.unwrap().contains("stream"));
    let r = client()
        .post(format!("{url}/v1/chat/completions"))
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let r = client()
        .get(format!("{url}/v1/responses"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 405);
    let r = client()
        .post(format!("{url}/v1/unknown"))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let r = post(
        &url,
        "/v1beta/models/g:generateContent",
        &json!({"contents": []}),
    )
    .await;
    assert_eq!(r.status(), 400);
    assert_eq!(server.remaining(), 1);
    assert_eq!(
        server.requests().len(),
        4,
        "the unknown path is not an LLM request"
    );
    assert_eq!(server.requests()[1].body, json!("{not json"));
    let (status, body) = call(&url, Api::AnthropicMessages, "x").await;
    assert_eq!(status, 200);
    assert!(body.contains("kept"));
}

/// Sends a raw HTTP/1.1 request, reads until at least `min_events` events have arrived
/// (or the server closes), then keeps reading until the server closes or `quiet` passes with
/// no bytes. Returns what arrived and whether the connection was closed.
async fn raw_exchange(
    server: &MockServer,
    api: Api,
    min_events: usize,
    quiet: Duration,
) -> (String, bool) {
    let (path, body) = request(api, "x");
    let body = body.to_string();
    let mut socket = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n\
         api-key: test-key\r\nauthorization: Bearer test-token\r\n\
         content-length: {}\r\n\r\n",
        body.len()
    );
    socket.write_all(head.as_bytes()).await.unwrap();
    socket.write_all(body.as_bytes()).await.unwrap();
    let mut received = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let seen = count_events(&String::from_utf8_lossy(&received));
        let wait = if seen < min_events {
            Duration::from_secs(10)
        } else {
            quiet
        };
        match tokio::time::timeout(wait, socket.read(&mut buf)).await {
            Err(_) if seen < min_events => panic!("{api}: only {seen} events arrived"),
            Err(_) => return (String::from_utf8(received).unwrap(), false),
            Ok(Ok(0) | Err(_)) => return (String::from_utf8(received).unwrap(), true),
            Ok(Ok(n)) => received.extend_from_slice(&buf[..n]),
        }
    }
}

#[tokio::test]
async fn drop_after_closes_the_connection_mid_body() {
    let server = MockServer::start().await.unwrap();
    for api in Api::SSE {
        server.push(
            Reply::text("abcdefghijklmnopqrstuvwxyz")
                .chunk_size(2)
                .with_fault(Fault::DropAfter { events: 3 }),
        );
        let (raw, closed) = raw_exchange(&server, api, 0, Duration::from_secs(5)).await;
        assert!(closed, "{api}: the connection closes");
        assert!(raw.starts_with("HTTP/1.1 200"), "{api}: {raw}");
        assert!(
            raw.to_ascii_lowercase()
                .contains("transfer-encoding: chunked")
        );
        assert!(
            !raw.ends_with("0\r\n\r\n"),
            "{api}: the chunked body must not be terminated"
        );
        assert_eq!(count_events(&raw), 3, "{api}: {raw}");
    }
    // A client sees a body error, after exactly the scripted events.
    for api in Api::SSE {
        server.push(
            Reply::text("abcdefghijklmnopqrstuvwxyz")
                .chunk_size(2)
                .with_fault(Fault::DropAfter { events: 2 }),
        );
        let (path, body) = request(api, "x");
        let response = post(&server.url(), &path, &body).await;
        assert_eq!(response.status(), 200);
        let mut stream = response.bytes_stream();
        let mut got = Vec::new();
        let mut error = None;
        while let Some(chunk) = stream.next().await {
            match chunk {
                Ok(bytes) => got.extend_from_slice(&bytes),
                Err(e) => {
                    error = Some(e);
                    break;
                }
            }
        }
        assert!(error.is_some(), "{api}: reading past the drop fails");
        assert_eq!(count_events(&String::from_utf8(got).unwrap()), 2, "{api}");
    }
}

#[tokio::test]
async fn drop_past_the_end_sends_everything_but_never_finishes() {
    let server = MockServer::start().await.unwrap();
    server.push(Reply::text("hi").with_fault(Fault::DropAfter { events: 1000 }));
    let (raw, closed) =
        raw_exchange(&server, Api::AnthropicMessages, 0, Duration::from_secs(5)).await;
    assert!(closed);
    assert!(raw.contains("event: message_stop"), "{raw}");
    assert!(!raw.ends_with("0\r\n\r\n"));
}

#[tokio::test]
async fn stall_after_goes_quiet_but_keeps_the_connection() {
    let server = MockServer::start().await.unwrap();
    for api in Api::SSE {
        server.push(
            Reply::text("abcdefghijklmnopqrstuvwxyz")
                .chunk_size(2)
                .with_fault(Fault::StallAfter { events: 2 }),
        );
        let (raw, closed) = raw_exchange(&server, api, 2, Duration::from_millis(400)).await;
        assert!(!closed, "{api}: a stalled stream stays open");
        assert_eq!(count_events(&raw), 2, "{api}: {raw}");
    }
}

#[tokio::test]
async fn shutdown_ends_a_stalled_stream() {
    let server = MockServer::start().await.unwrap();
    server.push(Reply::text("abc").with_fault(Fault::StallAfter { events: 1 }));
    let (path, body) = request(Api::AnthropicMessages, "x");
    let response = post(&server.url(), &path, &body).await;
    let mut stream = response.bytes_stream();
    let first = stream.next().await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&first).contains("message_start"));
    let quiet = tokio::time::timeout(Duration::from_millis(200), stream.next()).await;
    assert!(quiet.is_err(), "nothing more arrives while stalled");
    let started = std::time::Instant::now();
    server.shutdown().await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "shutdown does not wait for the stall"
    );
    let end = tokio::time::timeout(Duration::from_secs(2), stream.next())
        .await
        .unwrap();
    assert!(
        matches!(end, None | Some(Err(_))),
        "the stream ends: {end:?}"
    );
}
