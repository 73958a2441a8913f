//! The request log, clearing, the HTTP control endpoints, rules mode and the background mock.

use std::io::{Read, Write};

use serde_json::{Value, json};
use tau_mock_llm::{Api, MockServer, Reply};

use crate::support::{call, client, decode, post, request, request_with_bash, tool_result_request};

#[tokio::test]
async fn requests_are_logged_with_path_query_headers_and_body() {
    let server = MockServer::start().await.unwrap();
    server.push_all([Reply::text("a"), Reply::text("b")]);
    let (path, body) = request(Api::GoogleGenerativeAi, "hello");
    let response = client()
        .post(format!("{}{path}&key=secret", server.url()))
        .header("x-goog-api-key", "k-123")
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.text().await.unwrap();
    let (_, anthropic_body) = request(Api::AnthropicMessages, "second");
    call(&server.url(), Api::AnthropicMessages, "second").await;

    let log = server.requests();
    assert_eq!(log.len(), 2);
    let google = &log[0];
    assert_eq!(google.api, Api::GoogleGenerativeAi);
    assert_eq!(google.method, "POST");
    assert_eq!(
        google.path,
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
    );
    assert_eq!(google.query.as_deref(), Some("alt=sse&key=secret"));
    assert_eq!(google.header("X-Goog-Api-Key"), Some("k-123"));
    assert!(
        google
            .headers
            .iter()
            .all(|(n, _)| n == &n.to_ascii_lowercase())
    );
    assert_eq!(google.body, body);
    assert_eq!(log[1].api, Api::AnthropicMessages);
    assert_eq!(log[1].query, None);
    assert_eq!(log[1].body, anthropic_body);

    server.push(Reply::text("queued"));
    server.clear();
    assert!(server.requests().is_empty());
    assert_eq!(server.remaining(), 0);
    let (status, _) = call(&server.url(), Api::AnthropicMessages, "x").await;
    assert_eq!(status, 500, "clear empties the queue too");
}

#[tokio::test]
async fn control_endpoints_script_a_running_mock() {
    let server = MockServer::start().await.unwrap();
    let url = server.url();
    let http = client();
    let added: Value = http
        .post(format!("{url}/_mock/replies"))
        .body(r#"["first", {"content": [{"type": "text", "text": "second"}], "usage": {"input": 7}}]"#)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(added, json!({"added": 2, "queued": 2}));
    let single = http
        .post(format!("{url}/_mock/replies"))
        .body(r#"{"content": [{"type": "text", "text": "third"}]}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(single.status(), 200);
    assert_eq!(server.remaining(), 3);
    let bad = http
        .post(format!("{url}/_mock/replies"))
        .body(r#"[{"fault": 1}]"#)
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    assert!(bad.text().await.unwrap().contains("error"));

    for want in ["first", "second", "third"] {
        let (_, body) = call(&url, Api::OpenAiCompletions, "x").await;
        assert_eq!(decode(Api::OpenAiCompletions, &body).text, want);
    }
    let log: Value = http
        .get(format!("{url}/_mock/requests"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let log = log.as_array().unwrap();
    assert_eq!(log.len(), 3);
    assert_eq!(log[0]["api"], "openai-completions");
    assert_eq!(log[0]["path"], "/v1/chat/completions");
    assert_eq!(log[0]["body"]["model"], "gpt-4o");

    let reset = http
        .post(format!("{url}/_mock/reset"))
        .send()
        .await
        .unwrap();
    assert_eq!(reset.status(), 200);
    assert!(server.requests().is_empty());

    let (status, _) = call(&url, Api::OpenAiCompletions, "hello rules").await;
    assert_eq!(status, 500);
    let on: Value = http
        .post(format!("{url}/_mock/rules"))
        .body(r#"{"enabled": true}"#)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(on, json!({"enabled": true}));
    let (status, body) = call(&url, Api::OpenAiCompletions, "hello rules").await;
    assert_eq!(status, 200);
    assert!(
        decode(Api::OpenAiCompletions, &body)
            .text
            .contains("hello rules")
    );
    let bad = http
        .post(format!("{url}/_mock/rules"))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    http.post(format!("{url}/_mock/rules"))
        .body(r#"{"enabled": false}"#)
        .send()
        .await
        .unwrap();
    let (status, _) = call(&url, Api::OpenAiCompletions, "x").await;
    assert_eq!(status, 500);
}

#[tokio::test]
async fn rules_call_bash_then_summarise_its_output() {
    let server = MockServer::start().await.unwrap();
    server.set_rules(true);
    for api in Api::SSE {
        let (path, body) = request_with_bash(api, "please list files");
        let text = post(&server.url(), &path, &body)
            .await
            .text()
            .await
            .unwrap();
        let d = decode(api, &text);
        assert_eq!(d.tool_calls.len(), 1, "{api}: {text}");
        assert_eq!(d.tool_calls[0].1, "bash");
        assert_eq!(d.tool_calls[0].2, json!({"command": "ls"}));
        assert_eq!(
            d.stop,
            [
                "tool_use",
                "tool_calls",
                "completed",
                "STOP",
                "completed",
                "STOP"
            ][api_index(api)]
        );

        let (path, body) = request_with_bash(api, "now run cargo test --quiet");
        let text = post(&server.url(), &path, &body)
            .await
            .text()
            .await
            .unwrap();
        assert_eq!(
            decode(api, &text).tool_calls[0].2,
            json!({"command": "cargo test --quiet"})
        );

        let (path, body) = tool_result_request(api, "Cargo.toml\nsrc\n");
        let text = post(&server.url(), &path, &body)
            .await
            .text()
            .await
            .unwrap();
        let d = decode(api, &text);
        assert!(d.tool_calls.is_empty(), "{api}");
        assert_eq!(d.text, "The command output was: Cargo.toml\nsrc", "{api}");

        // Without a bash tool on offer the same prompt only gets an echo.
        let (_, text) = call(&server.url(), api, "please list files").await;
        let d = decode(api, &text);
        assert!(d.tool_calls.is_empty());
        assert!(d.text.contains("please list files"), "{api}: {}", d.text);
    }
}

fn api_index(api: Api) -> usize {
    Api::SSE.iter().position(|a| *a == api).unwrap()
}

#[tokio::test]
async fn rules_report_usage_from_text_length() {
    let server = MockServer::start().await.unwrap();
    server.set_rules(true);
    let prompt = "x".repeat(400);
    let (_, body) = call(&server.url(), Api::OpenAiCompletions, &prompt).await;
    let usage = crate::support::parse_sse(&body)
        .iter()
        .rev()
        .find_map(|e| {
            serde_json::from_str::<Value>(&e.data)
                .ok()
                .filter(|v| v["usage"].is_object())
        })
        .unwrap();
    assert_eq!(
        usage["usage"]["prompt_tokens"],
        100 + 1,
        "400 chars of prompt plus the role"
    );
    assert!(usage["usage"]["completion_tokens"].as_u64().unwrap() > 5);
}

#[test]
fn background_mock_serves_without_a_runtime_and_stops_on_drop() {
    let mock = MockServer::start_background().unwrap();
    mock.push(Reply::text("from the background"));
    let addr = mock.addr();
    assert_eq!(mock.url(), format!("http://{addr}"));
    let body =
        json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "hi"}]})
            .to_string();
    let mut socket = std::net::TcpStream::connect(addr).unwrap();
    write!(
        socket,
        "POST /v1/messages HTTP/1.1\r\nhost: x\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut raw = String::new();
    socket.read_to_string(&mut raw).unwrap();
    assert!(raw.starts_with("HTTP/1.1 200"), "{raw}");
    assert!(raw.contains("from the"), "{raw}");
    assert_eq!(mock.requests().len(), 1);
    drop(socket);
    drop(mock);
    // Closed: the port can be bound again, or nothing answers a connect. The closed
    // connection's own end can hold the port for a moment, and a connect can succeed on a free
    // port when the kernel picks that very port as its own end (a self-connection), so this is
    // asked a few times and a self-connection counts as nobody listening.
    let closed = (0..50).any(|_| {
        let free = std::net::TcpListener::bind(addr).is_ok()
            || std::net::TcpStream::connect(addr)
                .map_or(true, |s| s.local_addr().ok() == s.peer_addr().ok());
        if !free {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        free
    });
    assert!(closed, "the port is closed after drop");
}

#[tokio::test]
async fn start_on_refuses_non_loopback_addresses() {
    let err = MockServer::start_on("0.0.0.0:0".parse().unwrap())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    let server = MockServer::start_on("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    assert!(server.url().starts_with("http://127.0.0.1:"));
    assert!(!server.url().ends_with('/'));
}
