//! The extensions' mirror of the session never goes backwards (issue 22): an entry an
//! extension appends in `message_end` is on `getBranch()` in the next `tool_call` and in
//! `agent_end`, run after run. Before the fix a later state frame carrying an older `leafId`
//! dropped it about 4 runs in 10, so one run repeats the sequence 50 times.

use std::time::Duration;

use serde_json::json;
use tau_mock_llm::{MockServer, Reply};

use crate::{mock_models, ready_tau, tau};

const ROUNDS: usize = 50;

#[test]
fn an_appended_entry_is_on_the_branch_in_every_later_handler() {
    let mock = MockServer::start_background().unwrap();
    let fixture = format!(
        "{}/tests/fixtures/extensions/mirror.ts",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut t = ready_tau(
        tau()
            .agent_file("models.json", mock_models(&mock))
            .arg("--no-session")
            .arg("-e")
            .arg(fixture),
    );
    let marks = |n: usize| (1..=n).map(|i| i.to_string()).collect::<Vec<_>>().join(",");
    for round in 0..ROUNDS {
        mock.push(Reply::new().tool_call(
            format!("call_{round}"),
            "bash",
            json!({"command": "true"}),
        ));
        mock.push(Reply::text(format!("done {round}")));
        t.send(&json!({"id": format!("p{round}"), "type": "prompt", "message": "go"}));
        let mut notices = Vec::new();
        loop {
            let record = t
                .next_record(Duration::from_secs(30))
                .expect("a record within 30 s");
            let json = record.json.expect("JSON");
            if json["type"] == "extension_ui_request" && json["method"] == "notify" {
                notices.push(json["message"].as_str().unwrap_or_default().to_string());
            }
            if json["type"] == "agent_settled" {
                break;
            }
        }
        let first = 2 * round + 1;
        assert_eq!(
            notices,
            vec![
                format!("tool_call appended={first} marks={}", marks(first)),
                format!(
                    "agent_end appended={} marks={}",
                    first + 1,
                    marks(first + 1)
                ),
            ],
            "round {round}"
        );
    }
    let entries = t.request(json!({"id": "e", "type": "get_entries"}));
    let stored = entries["data"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "custom" && e["customType"] == "mark")
        .count();
    assert_eq!(stored, 2 * ROUNDS, "tau recorded every appended entry once");
}
