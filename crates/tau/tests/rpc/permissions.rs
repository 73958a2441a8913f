//! Permissions through RPC (decision T123): nothing asks by default, as in pi; a client that
//! opts in (`--permission-mode`, `set_permission_mode`) gets `permission_request` records and
//! answers with `permission_response`; `deny` rules and plan mode refuse without asking; an
//! abort or the end of input withdraws a request.

use std::time::Duration;

use serde_json::{Value, json};
use tau_mock_llm::{BackgroundMock, MockServer, Reply};
use tau_test_kit::{Tau, TauBuilder};

use crate::{mock_models, ready_tau, tau};

const WAIT: Duration = Duration::from_secs(20);

fn setup(extra: impl FnOnce(TauBuilder) -> TauBuilder) -> (BackgroundMock, Tau) {
    let mock = MockServer::start_background().expect("mock");
    let builder = extra(
        tau()
            .agent_file("models.json", mock_models(&mock))
            .arg("--no-session"),
    );
    (mock, ready_tau(builder))
}

/// The tool result the model was sent in its second request.
fn tool_result_sent(mock: &BackgroundMock) -> String {
    let requests = mock.requests();
    let body = &requests.get(1).expect("a second model call").body;
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].to_string())
        .collect()
}

fn prompt(t: &mut Tau, text: &str) {
    let response = t.request(json!({"type": "prompt", "message": text}));
    assert_eq!(response["success"], true, "{response}");
}

#[test]
fn nothing_asks_by_default_as_in_pi() {
    let (mock, mut t) = setup(|b| b);
    mock.push(Reply::new().tool_call("c1", "bash", json!({"command": "echo ran > out.txt"})));
    mock.push(Reply::text("done"));
    prompt(&mut t, "go");
    let records = t.records_until("agent_settled", WAIT);
    assert!(
        !records.iter().any(|r| r["type"] == "permission_request"),
        "{records:#?}"
    );
    assert!(t.cwd().join("out.txt").exists());
    // pi's `get_state`, field for field: no mode is said while nothing asks.
    let state = t.request(json!({"type": "get_state"}));
    assert!(state["data"].get("permissionMode").is_none(), "{state}");
    t.request(json!({"type": "set_permission_mode", "mode": "acceptEdits"}));
    let state = t.request(json!({"type": "get_state"}));
    assert_eq!(state["data"]["permissionMode"], "acceptEdits");
}

#[test]
fn asked_calls_run_once_allowed_and_not_when_refused() {
    let (mock, mut t) = setup(|b| b.arg("--permission-mode").arg("ask"));
    mock.push(Reply::new().tool_call("c1", "bash", json!({"command": "echo one > one.txt"})));
    mock.push(Reply::new().tool_call("c2", "write", json!({"path": "two.txt", "content": "2"})));
    mock.push(Reply::new().tool_call("c3", "read", json!({"path": "one.txt"})));
    mock.push(Reply::text("done"));
    prompt(&mut t, "go");
    let request = t.event("permission_request");
    assert_eq!(request["toolCallId"], "c1");
    assert_eq!(request["toolName"], "bash");
    assert_eq!(request["kind"], "command");
    assert_eq!(request["title"], "Run echo one > one.txt");
    assert_eq!(request["rule"], "bash(echo)");
    assert_eq!(request["args"]["command"], "echo one > one.txt");
    // Not run before the answer.
    std::thread::sleep(Duration::from_millis(200));
    assert!(!t.cwd().join("one.txt").exists());
    t.send(&json!({"type": "permission_response", "id": request["id"], "outcome": "allow"}));
    let request = t.event("permission_request");
    assert_eq!(request["toolName"], "write");
    assert_eq!(request["kind"], "edit");
    t.send(&json!({"type": "permission_response", "id": request["id"], "outcome": "reject"}));
    // `read` never asks.
    let records = t.records_until("agent_settled", WAIT);
    assert!(
        !records.iter().any(|r| r["type"] == "permission_request"),
        "{records:#?}"
    );
    assert!(t.cwd().join("one.txt").exists());
    assert!(!t.cwd().join("two.txt").exists());
    let refused = records
        .iter()
        .find(|r| r["type"] == "tool_execution_end" && r["toolCallId"] == "c2")
        .expect("the write ended");
    assert_eq!(refused["isError"], true);
    assert!(
        refused["result"]["content"]
            .to_string()
            .contains("did not allow"),
        "{refused}"
    );
}

#[test]
fn allow_always_covers_the_rest_of_the_session_and_is_remembered_when_asked() {
    let (mock, mut t) = setup(|b| b);
    let changed = t.request(json!({"type": "set_permission_mode", "mode": "ask"}));
    assert_eq!(changed["success"], true, "{changed}");
    assert_eq!(t.event("permission_mode_changed")["mode"], "ask");
    mock.push(Reply::new().tool_call("c1", "bash", json!({"command": "echo a >> log.txt"})));
    mock.push(Reply::new().tool_call("c2", "bash", json!({"command": "echo b >> log.txt"})));
    mock.push(Reply::text("done"));
    prompt(&mut t, "go");
    let request = t.event("permission_request");
    t.send(&json!({"type": "permission_response", "id": request["id"],
                   "outcome": "allowAlways", "remember": true}));
    let records = t.records_until("agent_settled", WAIT);
    assert!(
        !records.iter().any(|r| r["type"] == "permission_request"),
        "the second echo was covered: {records:#?}"
    );
    assert_eq!(
        std::fs::read_to_string(t.cwd().join("log.txt")).unwrap(),
        "a\nb\n"
    );
    let settings: Value = serde_json::from_str(
        &std::fs::read_to_string(t.agent_dir().join("settings.json")).expect("settings"),
    )
    .expect("JSON");
    assert_eq!(settings["permissions"]["allow"], json!(["bash(echo)"]));
}

#[test]
fn deny_rules_refuse_in_every_mode_and_plan_mode_is_read_only() {
    let settings = json!({"permissions": {"deny": ["bash(rm *)"]}});
    let (mock, mut t) = setup(|b| b.agent_file("settings.json", settings.to_string()));
    std::fs::write(t.cwd().join("keep.txt"), "kept").unwrap();
    mock.push(Reply::new().tool_call("c1", "bash", json!({"command": "ls && rm keep.txt"})));
    mock.push(Reply::text("done"));
    prompt(&mut t, "go");
    let records = t.records_until("agent_settled", WAIT);
    assert!(t.cwd().join("keep.txt").exists());
    assert!(
        tool_result_sent(&mock).contains("bash(rm *)"),
        "{records:#?}"
    );
    // Plan mode: reading runs, writing does not, and nobody is asked.
    t.request(json!({"type": "set_permission_mode", "mode": "plan"}));
    mock.push(Reply::new().tool_call("c2", "read", json!({"path": "keep.txt"})));
    mock.push(Reply::new().tool_call(
        "c3",
        "edit",
        json!({"path": "keep.txt",
        "edits": [{"oldText": "kept", "newText": "changed"}]}),
    ));
    mock.push(Reply::text("planned"));
    prompt(&mut t, "plan it");
    let records = t.records_until("agent_settled", WAIT);
    assert!(!records.iter().any(|r| r["type"] == "permission_request"));
    let read = records
        .iter()
        .find(|r| r["type"] == "tool_execution_end" && r["toolCallId"] == "c2")
        .expect("read ran");
    assert_eq!(read["isError"], false);
    let edit = records
        .iter()
        .find(|r| r["type"] == "tool_execution_end" && r["toolCallId"] == "c3")
        .expect("edit ended");
    assert_eq!(edit["isError"], true);
    assert!(edit["result"].to_string().contains("Plan mode"), "{edit}");
    assert_eq!(
        std::fs::read_to_string(t.cwd().join("keep.txt")).unwrap(),
        "kept"
    );
}

#[test]
fn an_abort_or_the_end_of_input_withdraws_the_request() {
    let (mock, mut t) = setup(|b| b.arg("--permission-mode").arg("ask"));
    mock.push(Reply::new().tool_call("c1", "bash", json!({"command": "touch a.txt"})));
    prompt(&mut t, "go");
    let request = t.event("permission_request");
    t.request(json!({"type": "abort"}));
    let withdrawn = t.event("permission_withdrawn");
    assert_eq!(withdrawn["id"], request["id"]);
    t.records_until("agent_settled", WAIT);
    // A late answer changes nothing.
    t.send(&json!({"type": "permission_response", "id": request["id"], "outcome": "allow"}));
    std::thread::sleep(Duration::from_millis(200));
    assert!(!t.cwd().join("a.txt").exists());
    // Asked again, then input ends: withdrawn, and tau exits.
    mock.push(Reply::new().tool_call("c2", "bash", json!({"command": "touch b.txt"})));
    mock.push(Reply::text("done"));
    prompt(&mut t, "again");
    let request = t.event("permission_request");
    t.close_stdin();
    let withdrawn = t.event("permission_withdrawn");
    assert_eq!(withdrawn["id"], request["id"]);
    assert!(t.wait_exit(WAIT).success());
    assert!(!t.cwd().join("b.txt").exists());
}

#[test]
fn bad_modes_and_answers_get_clear_errors() {
    let (_mock, mut t) = setup(|b| b);
    let response = t.request(json!({"type": "set_permission_mode", "mode": "sometimes"}));
    assert_eq!(response["success"], false);
    let error = response["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("set_permission_mode") && error.contains("`plan`"),
        "{error}"
    );
    t.send(&json!({"id": "p1", "type": "permission_response", "outcome": "maybe"}));
    let response = t.response("p1");
    assert_eq!(response["success"], false);
    assert_eq!(response["command"], "permission_response");
    assert!(
        response["error"]
            .as_str()
            .unwrap_or_default()
            .starts_with("Invalid permission_response frame: outcome: unknown variant"),
        "{response}"
    );
    // An answer to nothing is ignored, and tau goes on.
    t.send(&json!({"type": "permission_response", "id": "nothing", "outcome": "allow"}));
    let state = t.request(json!({"type": "get_state"}));
    assert_eq!(state["success"], true);
}
