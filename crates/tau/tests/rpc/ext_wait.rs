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

#[test]
fn a_command_that_awaits_a_fork_is_answered_on_the_forked_branch() {
    let mock = MockServer::start_background().unwrap();
    mock.push(Reply::text("one"));
    mock.push(Reply::text("two"));
    let mut t = start(&mock, true);
    for (id, message) in [("p1", "first"), ("p2", "second")] {
        t.send(&json!({"id": id, "type": "prompt", "message": message}));
        t.records_until("agent_settled", Duration::from_secs(30));
    }
    let forks = t.request(json!({"type": "get_fork_messages"}));
    let second = forks["data"]["messages"][1]["entryId"]
        .as_str()
        .expect("the second user message")
        .to_string();
    let answer =
        t.request(json!({"id": "c", "type": "prompt", "message": format!("/fork-wait {second}")}));
    assert_eq!(answer["success"], true, "{answer}");
    // The fork keeps what came before the chosen message, not the message itself.
    let messages = t.request(json!({"type": "get_messages"}));
    let texts: Vec<String> = messages["data"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].to_string())
        .collect();
    assert_eq!(texts.len(), 1, "{texts:?}");
    assert!(texts[0].contains("first"), "{texts:?}");
    t.close_stdin();
    t.wait_exit(Duration::from_secs(30));
    assert!(
        t.stderr().contains("fork-wait cancelled=false"),
        "{}",
        t.stderr()
    );
}

#[test]
fn a_command_that_awaits_a_session_switch_is_answered_in_the_other_session() {
    let mock = MockServer::start_background().unwrap();
    mock.push(Reply::text("kept"));
    let mut t = start(&mock, true);
    t.send(&json!({"id": "p", "type": "prompt", "message": "remember this"}));
    t.records_until("agent_settled", Duration::from_secs(30));
    let state = t.request(json!({"type": "get_state"}));
    let (first_id, first_file) = (
        state["data"]["sessionId"].clone(),
        state["data"]["sessionFile"].as_str().unwrap().to_string(),
    );
    let fresh = t.request(json!({"type": "new_session"}));
    assert_eq!(fresh["success"], true, "{fresh}");
    let answer = t.request(
        json!({"id": "c", "type": "prompt", "message": format!("/switch-wait {first_file}")}),
    );
    assert_eq!(answer["success"], true, "{answer}");
    let state = t.request(json!({"type": "get_state"}));
    assert_eq!(state["data"]["sessionId"], first_id, "{state}");
    t.close_stdin();
    t.wait_exit(Duration::from_secs(30));
    assert!(
        t.stderr().contains("switch-wait cancelled=false"),
        "{}",
        t.stderr()
    );
}

/// A run whose tool call opens a confirm dialog from the extension's `tool_call` handler,
/// answered with `confirmed`; returns the tool's end record.
fn guarded_run(confirmed: bool) -> Value {
    let mock = MockServer::start_background().unwrap();
    mock.push(Reply::new().tool_call("g1", "guarded", json!({})));
    mock.push(Reply::text("done"));
    let mut t = start(&mock, false);
    t.send(&json!({"id": "p", "type": "prompt", "message": "use the guarded tool"}));
    let asked = t.event("extension_ui_request");
    assert_eq!(asked["method"], "confirm", "{asked}");
    t.send(&json!({"type": "extension_ui_response", "id": asked["id"], "confirmed": confirmed}));
    let records = t.records_until("agent_settled", Duration::from_secs(30));
    assert_eq!(mock.requests().len(), 2, "the run went on after the answer");
    records
        .iter()
        .find(|r| r["type"] == "tool_execution_end")
        .expect("the tool call ended")
        .clone()
}

#[test]
fn a_dialog_opened_by_an_event_handler_during_a_run_is_answered_and_the_run_goes_on() {
    let allowed = guarded_run(true);
    assert_eq!(allowed["isError"], false, "{allowed}");
    assert!(
        allowed["result"].to_string().contains("guarded ran"),
        "{allowed}"
    );
    let refused = guarded_run(false);
    assert_eq!(refused["isError"], true, "{refused}");
    assert!(
        refused["result"]
            .to_string()
            .contains("refused in the dialog"),
        "{refused}"
    );
}
