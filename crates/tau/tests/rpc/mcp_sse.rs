//! The older HTTP+SSE transport (`"type": "sse"`, decision T128) against the real
//! `@modelcontextprotocol/server-everything` from npm, run as `index.js sse` on a free port of
//! 127.0.0.1: its tools are called through the mock model, structured content reaches the
//! result's `details` and the model, and a server whose event stream ends is reported failed
//! and started again by the next call. Without the installed packages each test says so and
//! passes (see `mcp_registry`).

use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tau_mock_llm::{MockServer, Reply};

use crate::mcp::{run, start, status, stop, text_of};
use crate::mcp_registry::installed;

/// server-everything over HTTP+SSE, killed when dropped.
struct SseServer {
    child: Child,
    port: u16,
}

impl SseServer {
    /// Starts it on `port` (a free one when `None`) and waits until it listens.
    fn start(modules: &Path, port: Option<u16>) -> Self {
        let port = port.unwrap_or_else(|| {
            TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
                .unwrap()
                .local_addr()
                .unwrap()
                .port()
        });
        let script = modules.join("server-everything/dist/index.js");
        let child = Command::new("node")
            .arg(script)
            .arg("sse")
            .env("PORT", port.to_string())
            // It writes a line per message to stderr; nobody reads it.
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("run node");
        let mut server = Self { child, port };
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err() {
            assert!(
                server.child.try_wait().unwrap().is_none(),
                "server-everything (sse) exited before listening on {port}"
            );
            assert!(
                Instant::now() < deadline,
                "server-everything (sse) did not listen"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }

    fn entry(&self) -> Value {
        json!({"type": "sse", "url": format!("http://127.0.0.1:{}/sse", self.port)})
    }
}

impl Drop for SseServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `role: "tool"` message answering `call` in a request body.
fn tool_message(body: &Value, call: &str) -> Value {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|message| message["role"] == "tool" && message["tool_call_id"] == call)
        .cloned()
        .unwrap_or(Value::Null)
}

#[test]
fn an_sse_servers_tools_are_called_and_structured_content_is_kept() {
    let Some(modules) = installed() else {
        return;
    };
    let server = SseServer::start(&modules, None);
    let mock = MockServer::start_background().unwrap();
    mock.push(Reply::new().tool_call(
        "c1",
        "everything_echo",
        json!({"message": "hello over sse"}),
    ));
    mock.push(Reply::new().tool_call(
        "c2",
        "everything_get-structured-content",
        json!({"location": "Chicago"}),
    ));
    mock.push(Reply::text("done"));
    let mut t = start(&mock, json!({"everything": server.entry()}), &[], |b| b);
    let ready = status(&mut t, "everything", "ready");
    assert_eq!(ready["transport"], "sse", "{ready}");
    assert!(
        ready["tools"]
            .as_array()
            .unwrap()
            .contains(&json!("get-structured-content")),
        "{ready}"
    );

    let ends = run(&mut t);
    assert_eq!(ends.len(), 2, "{ends:?}");
    assert_eq!(ends[0]["isError"], false, "{}", ends[0]);
    assert_eq!(text_of(&ends[0]), "Echo: hello over sse");
    assert_eq!(ends[1]["isError"], false, "{}", ends[1]);
    let weather = json!({"temperature": 36, "conditions": "Light rain / drizzle", "humidity": 82});
    assert_eq!(
        ends[1]["result"]["details"]["structuredContent"], weather,
        "{}",
        ends[1]
    );
    // The server also sent the JSON as text: the model gets that block, once.
    let text = text_of(&ends[1]);
    assert_eq!(
        serde_json::from_str::<Value>(&text).unwrap(),
        weather,
        "{text}"
    );

    let requests = mock.requests();
    assert_eq!(requests.len(), 3);
    let echoed = tool_message(&requests[1].body, "c1");
    assert!(
        echoed.to_string().contains("Echo: hello over sse"),
        "{echoed}"
    );
    let structured = tool_message(&requests[2].body, "c2");
    let seen = match &structured["content"] {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|part| part["text"].as_str())
            .collect(),
        other => panic!("no content in {other}"),
    };
    assert_eq!(
        serde_json::from_str::<Value>(&seen).unwrap(),
        weather,
        "{seen}"
    );
    stop(t);
}

#[test]
fn a_server_whose_event_stream_ends_fails_and_the_next_call_starts_it_again() {
    let Some(modules) = installed() else {
        return;
    };
    let server = SseServer::start(&modules, None);
    let port = server.port;
    let mock = MockServer::start_background().unwrap();
    mock.push(Reply::new().tool_call("c1", "everything_echo", json!({"message": "back"})));
    mock.push(Reply::text("done"));
    let mut t = start(&mock, json!({"everything": server.entry()}), &[], |b| b);
    status(&mut t, "everything", "ready");

    // The server goes away: its event stream ends, and with it the connection.
    let started = Instant::now();
    drop(server);
    let failed = status(&mut t, "everything", "failed");
    assert!(failed["message"].is_string(), "{failed}");
    assert!(started.elapsed() < Duration::from_secs(20), "{failed}");

    // Back on the same port, the next call connects again.
    let _server = SseServer::start(&modules, Some(port));
    let ends = run(&mut t);
    assert_eq!(ends.len(), 1, "{ends:?}");
    assert_eq!(ends[0]["isError"], false, "{}", ends[0]);
    assert_eq!(text_of(&ends[0]), "Echo: back");
    let states: Vec<Value> = t
        .history()
        .iter()
        .filter_map(|record| record.json.clone())
        .filter(|r| r["type"] == "mcp_server_status" && r["server"] == "everything")
        .collect();
    let last = states.last().unwrap();
    assert_eq!(last["state"], "ready", "{states:?}");
    assert_eq!(last["restarts"], 1, "{states:?}");
    stop(t);
}
