//! Extensions that wait on tau while tau waits on them (issue 39): a command that starts a run
//! and waits for it, and the other re-entry points, through the Node host.

use std::time::Duration;

use serde_json::{Value, json};
use tau_mock_llm::{MockServer, Reply};

use crate::{ready_tau, tau};

fn fixture(name: &str) -> String {
    format!(
        "{}/tests/fixtures/extensions/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn notices(records: &[Value]) -> Vec<String> {
    records
        .iter()
        .filter(|r| r["type"] == "extension_ui_request" && r["method"] == "notify")
        .map(|r| r["message"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn a_command_that_waits_for_the_run_it_started_is_answered_after_it() {
    let mock = MockServer::start_background().unwrap();
    mock.push(Reply::text("the answer"));
    let mut t = ready_tau(
        tau()
            .agent_file("models.json", crate::mock_models(&mock))
            .arg("--no-session")
            .arg("-e")
            .arg(fixture("wait-run.ts")),
    );
    t.send(&json!({"id": "c", "type": "prompt", "message": "/run-and-wait tell me"}));
    let records = t.records_until("response", Duration::from_secs(30));
    let kinds: Vec<&str> = records.iter().filter_map(|r| r["type"].as_str()).collect();
    let response = records.last().unwrap();
    assert_eq!(response["id"], "c", "{records:?}");
    assert_eq!(response["success"], true, "{response}");
    // The run came out while the handler waited, before the command's answer, as in pi.
    let start = kinds
        .iter()
        .position(|k| *k == "agent_start")
        .expect("agent_start");
    let end = kinds
        .iter()
        .position(|k| *k == "agent_end")
        .expect("agent_end");
    assert!(start < end, "{kinds:?}");
    assert_eq!(
        notices(&records),
        ["started idle=false", "finished idle=true level=off"],
        "{kinds:?}"
    );
    // The model got the message with the level the command set.
    let requests = mock.requests();
    assert_eq!(requests.len(), 1);
    assert!(requests[0].body.to_string().contains("tell me"));
    let state = t.request(json!({"type": "get_state"}));
    assert_eq!(state["data"]["thinkingLevel"], "off", "{state}");
}

fn start(mock: &tau_mock_llm::BackgroundMock, session: bool) -> tau_test_kit::Tau {
    let mut builder = tau()
        .agent_file("models.json", crate::mock_models(mock))
        .arg("-e")
        .arg(fixture("wait-run.ts"));
    if !session {
        builder = builder.arg("--no-session");
    }
    ready_tau(builder)
}

/// Sends `message` as a prompt and waits for the run to settle: its records, and its
/// `tool_execution_end`.
fn run_with_a_tool(t: &mut tau_test_kit::Tau, message: &str) -> (Vec<Value>, Value) {
    t.send(&json!({"id": "p", "type": "prompt", "message": message}));
    let records = t.records_until("agent_settled", Duration::from_secs(30));
    let end = records
        .iter()
        .find(|r| r["type"] == "tool_execution_end")
        .expect("the tool ran")
        .clone();
    (records, end)
}

#[test]
fn a_command_that_awaits_a_compaction_gets_its_outcome() {
    let mock = MockServer::start_background().unwrap();
    let mut t = start(&mock, false);
    t.send(&json!({"id": "c", "type": "prompt", "message": "/compact-wait"}));
    let records = t.records_until("response", Duration::from_secs(30));
    assert_eq!(records.last().unwrap()["id"], "c", "{records:?}");
    assert_eq!(
        notices(&records),
        ["compact failed: Nothing to compact (session too small)"]
    );
}

#[test]
fn a_command_that_awaits_a_new_session_is_answered() {
    let mock = MockServer::start_background().unwrap();
    mock.push(Reply::text("hello"));
    let mut t = start(&mock, true);
    t.send(&json!({"id": "p", "type": "prompt", "message": "hi"}));
    t.records_until("agent_settled", Duration::from_secs(30));
    let before = t.request(json!({"type": "get_state"}))["data"]["sessionId"].clone();
    let answer = t.request(json!({"id": "c", "type": "prompt", "message": "/new-wait"}));
    assert_eq!(answer["success"], true, "{answer}");
    let after = t.request(json!({"type": "get_state"}))["data"]["sessionId"].clone();
    assert_ne!(before, after);
    t.close_stdin();
    t.wait_exit(Duration::from_secs(30));
    assert!(
        t.stderr().contains("new-wait cancelled=false"),
        "{}",
        t.stderr()
    );
}

#[test]
fn a_tool_that_sends_a_message_triggering_a_turn_does_not_stall_the_run() {
    let mock = MockServer::start_background().unwrap();
    mock.push(Reply::new().tool_call("n1", "nudge", json!({})));
    mock.push(Reply::text("after the tool"));
    mock.push(Reply::text("after the nudge"));
    let mut t = start(&mock, false);
    let (_, end) = run_with_a_tool(&mut t, "use the tool");
    assert_eq!(end["isError"], false, "{end}");
    // The message reaches the model in the same run.
    let requests = mock.requests();
    let last = requests.last().unwrap().body.to_string();
    assert!(last.contains("nudged from the tool"), "{last}");
}

#[test]
fn a_tool_result_is_kept_as_the_extension_returned_it() {
    let mock = MockServer::start_background().unwrap();
    mock.push(Reply::new().tool_call("s1", "soft_fail", json!({})));
    mock.push(Reply::text("noted"));
    let mut t = start(&mock, false);
    let (_, end) = run_with_a_tool(&mut t, "try it");
    // As pi: nothing was thrown, so the record's own isError is false; the returned object is
    // kept key for key.
    assert_eq!(end["isError"], false, "{end}");
    assert_eq!(
        end["result"],
        json!({"content": [{"type": "text", "text": "could not do it"}],
               "details": {"code": 7}, "isError": true, "hint": "kept"}),
        "{end}"
    );
    let messages = t.request(json!({"type": "get_messages"}));
    let tool_result = messages["data"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "toolResult")
        .expect("a tool result message")
        .clone();
    assert_eq!(tool_result["isError"], false, "{tool_result}");
    assert_eq!(tool_result["details"], json!({"code": 7}), "{tool_result}");
    assert!(tool_result.get("hint").is_none(), "{tool_result}");
}
