//! Process lifecycle (decision 11): EOF exits 0 after answering, signals give 130/143/129,
//! a vanished reader ends the process, and stdout belongs to the protocol alone.

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use rustix::process::Signal;
use serde_json::json;

use crate::{ready_tau, tau};

#[test]
fn eof_answers_everything_then_exits_zero() {
    let mut t = ready_tau(tau());
    for i in 0..20 {
        t.send(&json!({"id": format!("e{i}"), "type": "get_state"}));
    }
    t.close_stdin();
    for i in 0..20 {
        assert_eq!(t.response(&format!("e{i}"))["success"], true);
    }
    let status = t.wait_exit(Duration::from_secs(15));
    assert_eq!(status.code(), Some(0));
    assert!(
        t.drain(Duration::from_secs(15)).is_empty(),
        "nothing after the last response"
    );
}

#[test]
fn signals_exit_with_their_codes() {
    for (signal, code) in [(Signal::INT, 130), (Signal::TERM, 143), (Signal::HUP, 129)] {
        let mut t = ready_tau(tau());
        t.signal(signal);
        let status = t.wait_exit(Duration::from_secs(15));
        assert_eq!(status.code(), Some(code), "{signal:?}: {}", t.stderr());
    }
}

#[test]
fn a_closed_stdout_ends_the_process_with_status_1() {
    let agent = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_tau"))
        .args(["--mode", "rpc"])
        .env("TAU_AGENT_DIR", agent.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 1];
    stdout.read_exact(&mut first).unwrap();
    drop(stdout);
    let mut stdin = child.stdin.take().unwrap();
    // Keep writing until tau notices that nobody reads its answers.
    for _ in 0..200 {
        if stdin.write_all(b"{\"type\":\"get_state\"}\n").is_err() {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
        if child.try_wait().unwrap().is_some() {
            break;
        }
    }
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(1));
}

#[test]
fn file_descriptor_1_no_longer_reaches_the_protocol_stream() {
    let mut t = ready_tau(tau());
    let fd = |n: u32| std::fs::read_link(format!("/proc/{}/fd/{n}", t.pid())).unwrap();
    assert_eq!(
        fd(1),
        fd(2),
        "fd 1 points at stderr, so stray writes cannot corrupt stdout"
    );
    assert_eq!(t.request(json!({"type": "get_state"}))["success"], true);
}

/// A tau whose model streams from a fresh mock.
fn with_mock() -> (tau_mock_llm::BackgroundMock, tau_test_kit::Tau) {
    let mock = tau_mock_llm::MockServer::start_background().unwrap();
    let models = json!({"providers": {"mock": {
        "baseUrl": format!("{}/v1", mock.url()), "api": "openai-completions", "apiKey": "k",
        "models": [{"id": "mock-1", "contextWindow": 100000, "maxTokens": 4096}],
    }}});
    let t = ready_tau(
        tau()
            .agent_file("models.json", models.to_string())
            .arg("--no-session"),
    );
    (mock, t)
}

/// Issue 16: stdin closing while a host tool call was pending left tau waiting for a reply
/// that could never come. The call fails with xcsh's text, the run finishes (decision 11)
/// and tau exits.
#[test]
fn eof_fails_a_pending_host_tool_call_and_exits() {
    use tau_mock_llm::Reply;
    let (mock, mut t) = with_mock();
    let tools = t.request(json!({"type": "set_host_tools", "tools": [{
        "name": "ask_host", "description": "Asks the host",
        "parameters": {"type": "object", "properties": {}}}]}));
    assert_eq!(tools["success"], true, "{tools}");
    mock.push(Reply::new().tool_call("h1", "ask_host", json!({})));
    mock.push(Reply::new().tool_call("h2", "ask_host", json!({})));
    mock.push(Reply::text("the host is gone"));
    t.send(&json!({"id": "p", "type": "prompt", "message": "ask the host"}));
    t.event("host_tool_call");
    t.close_stdin();
    let status = t.wait_exit(Duration::from_secs(30));
    assert_eq!(status.code(), Some(0), "{}", t.stderr());
    let records: Vec<serde_json::Value> = t
        .drain(Duration::from_secs(15))
        .into_iter()
        .filter_map(|r| r.json)
        .collect();
    let text = "RPC client disconnected before host tool execution completed";
    for id in ["h1", "h2"] {
        let end = records
            .iter()
            .find(|r| r["type"] == "tool_execution_end" && r["toolCallId"] == id)
            .unwrap_or_else(|| panic!("no end for {id}: {records:?}"));
        assert_eq!(end["isError"], true);
        assert_eq!(end["result"]["content"][0]["text"], text, "{end}");
    }
    // The call made after EOF failed without asking the host.
    assert!(
        !records.iter().any(|r| r["type"] == "host_tool_call"),
        "{records:?}"
    );
    assert!(records.iter().any(|r| r["type"] == "agent_end"));
    assert!(mock.requests()[1].body.to_string().contains(text));
}

/// Issue 16: stdin closing while the provider had stopped sending kept tau alive until the
/// 300 s idle timeout (and then its retries). Once the client is gone a silent stream fails
/// after 5 s and is not retried (T77).
#[test]
fn eof_during_a_stalled_stream_ends_the_run_and_exits() {
    use tau_mock_llm::{Fault, Reply};
    let (mock, mut t) = with_mock();
    mock.push(
        Reply::new()
            .with_text("a reply that never ends ".repeat(20))
            .chunk_size(8)
            .with_fault(Fault::StallAfter { events: 3 }),
    );
    mock.push(Reply::text("a retry must not happen"));
    t.send(&json!({"id": "p", "type": "prompt", "message": "go"}));
    t.event("message_start");
    t.close_stdin();
    let status = t.wait_exit(Duration::from_secs(60));
    assert_eq!(status.code(), Some(0), "{}", t.stderr());
    let records: Vec<serde_json::Value> = t
        .drain(Duration::from_secs(15))
        .into_iter()
        .filter_map(|r| r.json)
        .collect();
    let end = records
        .iter()
        .find(|r| r["type"] == "message_end" && r["message"]["role"] == "assistant")
        .unwrap_or_else(|| panic!("no message_end: {records:?}"));
    assert_eq!(end["message"]["stopReason"], "error", "{end}");
    assert_eq!(
        end["message"]["errorMessage"],
        "Request timed out: no data received for 5 seconds"
    );
    assert!(records.iter().any(|r| r["type"] == "agent_end"));
    assert!(!records.iter().any(|r| r["type"] == "auto_retry_start"));
    assert_eq!(mock.requests().len(), 1, "no retry");
}
