//! What an extension does reaches the host in the order it did it (issue 21): the actions pi
//! runs inside the handler (`setSessionName`, `sendMessage`, `appendEntry`) come out before the
//! display request the handler makes next, whether the loop is idle or a run streams.

use std::time::Duration;

use serde_json::{Value, json};
use tau_mock_llm::{BackgroundMock, MockServer, Reply};
use tau_test_kit::Tau;

use crate::{mock_models, ready_tau, tau};

fn start() -> (BackgroundMock, Tau) {
    let mock = MockServer::start_background().unwrap();
    let fixture = format!(
        "{}/tests/fixtures/extensions/order.ts",
        env!("CARGO_MANIFEST_DIR")
    );
    let t = ready_tau(
        tau()
            .agent_file("models.json", mock_models(&mock))
            .arg("--no-session")
            .arg("-e")
            .arg(fixture),
    );
    (mock, t)
}

/// A short name for each record up to the response to `id` (or `agent_settled`).
fn records_until(t: &mut Tau, stop: impl Fn(&Value) -> bool) -> Vec<String> {
    let mut seen = Vec::new();
    loop {
        let record = t
            .next_record(Duration::from_secs(30))
            .expect("a record within 30 s");
        let json = record.json.expect("JSON");
        let name = match json["type"].as_str().unwrap_or_default() {
            "extension_ui_request" => format!(
                "ui:{}:{}",
                json["method"].as_str().unwrap_or_default(),
                json["message"]
                    .as_str()
                    .or(json["statusText"].as_str())
                    .unwrap_or_default()
            ),
            "message_start" | "message_end" => format!(
                "{}:{}",
                json["type"].as_str().unwrap_or_default(),
                json["message"]["role"].as_str().unwrap_or_default()
            ),
            "queue_update" => format!(
                "queue_update:{}",
                json["followUp"].as_array().map_or(0, Vec::len)
                    + json["steering"].as_array().map_or(0, Vec::len)
            ),
            other => other.to_string(),
        };
        let done = stop(&json);
        seen.push(name);
        if done {
            return seen;
        }
    }
}

fn position(seen: &[String], name: &str) -> usize {
    seen.iter()
        .position(|s| s == name)
        .unwrap_or_else(|| panic!("{name} in {seen:?}"))
}

#[test]
fn a_name_then_a_notice_come_out_in_that_order() {
    let (_mock, mut t) = start();
    for round in 0..10 {
        let id = format!("n{round}");
        t.send(&json!({"id": id, "type": "prompt", "message": "/name-then-notify"}));
        let seen = records_until(&mut t, |r| r["type"] == "response" && r["id"] == id);
        assert!(
            position(&seen, "session_info_changed") < position(&seen, "ui:notify:after the name"),
            "{seen:?}"
        );
    }
}

#[test]
fn a_message_then_a_status_come_out_in_that_order() {
    let (_mock, mut t) = start();
    for round in 0..10 {
        let id = format!("m{round}");
        t.send(&json!({"id": id, "type": "prompt", "message": "/message-then-status"}));
        let seen = records_until(&mut t, |r| r["type"] == "response" && r["id"] == id);
        assert!(
            position(&seen, "message_end:custom")
                < position(&seen, "ui:setStatus:after the message"),
            "{seen:?}"
        );
    }
}

#[test]
fn an_entry_is_recorded_before_the_handler_goes_on() {
    let (_mock, mut t) = start();
    t.send(&json!({"id": "e", "type": "prompt", "message": "/entry-then-widget"}));
    records_until(&mut t, |r| r["type"] == "response" && r["id"] == "e");
    let entries = t.request(json!({"id": "g", "type": "get_entries"}));
    let entries = entries["data"]["entries"].as_array().unwrap().clone();
    let mark = entries
        .iter()
        .find(|e| e["type"] == "custom" && e["customType"] == "mark")
        .expect("the appended entry");
    let label = entries
        .iter()
        .find(|e| e["type"] == "label")
        .expect("the label");
    assert_eq!(
        label["targetId"], mark["id"],
        "the label is on the entry just appended"
    );
}

#[test]
fn in_a_run_the_name_and_the_notice_keep_their_order() {
    let (mock, mut t) = start();
    mock.push(Reply::new().tool_call("call_1", "bash", json!({"command": "true"})));
    mock.push(Reply::text("done"));
    t.send(&json!({"id": "p", "type": "prompt", "message": "go"}));
    let seen = records_until(&mut t, |r| r["type"] == "agent_settled");
    assert!(
        position(&seen, "session_info_changed")
            < position(&seen, "ui:notify:after the name in a run"),
        "{seen:?}"
    );
}

/// A command whose handler starts a run: pi answers the `prompt` first, then the run begins.
#[test]
fn a_command_that_starts_a_run_is_answered_before_the_run_begins() {
    let (mock, mut t) = start();
    for round in 0..5 {
        mock.push(Reply::text(format!("reply {round}")));
        let id = format!("r{round}");
        t.send(&json!({"id": id, "type": "prompt", "message": "/start-run"}));
        let seen = records_until(&mut t, |r| r["type"] == "agent_settled");
        assert!(
            position(&seen, "ui:notify:run asked") < position(&seen, "response"),
            "{seen:?}"
        );
        assert!(
            position(&seen, "response") < position(&seen, "agent_start"),
            "{seen:?}"
        );
    }
}

/// An `agent_end` handler's `sendUserMessage` (a follow-up): as in pi, the queue shows it before
/// the run's end, and it leaves the queue after the next run's `turn_start`, right before its
/// `message_start`.
#[test]
fn a_follow_up_from_agent_end_is_queued_before_the_end_and_delivered_after_turn_start() {
    let (mock, mut t) = start();
    t.send(&json!({"id": "f", "type": "prompt", "message": "/follow-once"}));
    records_until(&mut t, |r| r["type"] == "response" && r["id"] == "f");
    mock.push(Reply::text("first"));
    mock.push(Reply::text("second"));
    t.send(&json!({"id": "p", "type": "prompt", "message": "go"}));
    let seen = records_until(&mut t, |r| r["type"] == "agent_settled");
    let first_end = position(&seen, "agent_end");
    assert!(position(&seen, "queue_update:1") < first_end, "{seen:?}");
    let rest = &seen[first_end + 1..];
    let delivered: Vec<&str> = rest
        .iter()
        .map(String::as_str)
        .filter(|s| !s.starts_with("message_update"))
        .take(5)
        .collect();
    assert_eq!(
        delivered,
        [
            "agent_start",
            "turn_start",
            "queue_update:0",
            "message_start:user",
            "message_end:user"
        ],
        "{seen:?}"
    );
}
