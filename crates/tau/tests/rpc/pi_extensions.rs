//! pi's own example extensions, unmodified (`extensions/node-host/test/fixtures/pi-examples`),
//! loaded through the Node host and driven over RPC as a pi host would drive them. Needs the
//! host's packages (`npm ci` in `extensions/node-host`, which `scripts/test.sh` runs).

use std::time::Duration;

use serde_json::{Value, json};
use tau_mock_llm::{BackgroundMock, MockServer, Reply};
use tau_test_kit::Tau;

use crate::{ready_tau, tau};

fn example(name: &str) -> String {
    let path = format!(
        "{}/../../extensions/node-host/test/fixtures/pi-examples/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::canonicalize(&path)
        .unwrap_or_else(|e| panic!("{path}: {e}"))
        .display()
        .to_string()
}

fn start(examples: &[&str], extra: &[&str]) -> (BackgroundMock, Tau) {
    let host_modules = format!(
        "{}/../../extensions/node-host/node_modules",
        env!("CARGO_MANIFEST_DIR")
    );
    assert!(
        std::path::Path::new(&host_modules).is_dir(),
        "the Node host's packages are not installed: run `npm ci` in extensions/node-host (scripts/test.sh does)"
    );
    let mock = MockServer::start_background().unwrap();
    let models = json!({"providers": {"mock": {
        "baseUrl": format!("{}/v1", mock.url()), "api": "openai-completions", "apiKey": "mock-key",
        "models": [{"id": "mock-1", "reasoning": true, "contextWindow": 100000, "maxTokens": 4096}],
    }}});
    let mut builder = tau()
        .agent_file("models.json", models.to_string())
        .arg("--no-session");
    for name in examples {
        builder = builder.arg("-e").arg(example(name));
    }
    for arg in extra {
        builder = builder.arg(*arg);
    }
    (mock, ready_tau(builder))
}

/// The next `extension_ui_request` (other records are skipped).
fn ui(t: &mut Tau) -> Value {
    ui_where(t, |_| true)
}

fn ui_where(t: &mut Tau, want: impl Fn(&Value) -> bool) -> Value {
    loop {
        let record = t
            .next_record(Duration::from_secs(30))
            .expect("an extension_ui_request within 30 s");
        let json = record.json.expect("JSON");
        if json["type"] == "extension_ui_request" && want(&json) {
            return json;
        }
    }
}

fn until(t: &mut Tau, kind: &str) -> Vec<Value> {
    let mut out = Vec::new();
    loop {
        let record = t
            .next_record(Duration::from_secs(30))
            .unwrap_or_else(|| panic!("no {kind}; got {out:?}"));
        let json = record.json.expect("JSON");
        let done = json["type"] == kind;
        out.push(json);
        if done {
            return out;
        }
    }
}

#[test]
fn rpc_demo_drives_every_dialog_kind() {
    let (mock, mut t) = start(&["rpc-demo.ts"], &[]);
    // session_start: title, widget, status.
    let title = ui(&mut t);
    assert_eq!(title["method"], "setTitle");
    assert_eq!(title["title"], "pi RPC Demo");
    let widget = ui(&mut t);
    assert_eq!(widget["method"], "setWidget");
    assert_eq!(widget["widgetKey"], "rpc-demo");
    assert_eq!(
        widget["widgetLines"],
        json!(["--- RPC Extension UI Demo ---", "Loaded and ready."])
    );
    let status = ui(&mut t);
    assert_eq!(status["statusText"], "Turns: 0");

    let commands = t.request(json!({"id": "c", "type": "get_commands"}));
    let names: Vec<&str> = commands["data"]["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["rpc-input", "rpc-editor", "rpc-prefill"]);

    // A dangerous bash call: the user picks "Block" in the select dialog.
    mock.push(Reply::new().tool_call("b1", "bash", json!({"command": "rm -rf /tmp/nothing-here"})));
    mock.push(Reply::text("understood"));
    t.send(&json!({"id": "p", "type": "prompt", "message": "clean up"}));
    let select = ui_where(&mut t, |r| r["method"] == "select");
    assert_eq!(
        select["title"],
        "Dangerous command: rm -rf /tmp/nothing-here"
    );
    assert_eq!(select["options"], json!(["Allow", "Block"]));
    t.send(&json!({"type": "extension_ui_response", "id": select["id"], "value": "Block"}));
    let records = until(&mut t, "agent_settled");
    let notify = records
        .iter()
        .find(|r| r["method"] == "notify")
        .expect("notify after the dialog");
    assert_eq!(notify["message"], "Command blocked by user");
    assert_eq!(notify["notifyType"], "warning");
    let end = records
        .iter()
        .find(|r| r["type"] == "tool_execution_end")
        .unwrap();
    assert_eq!(end["isError"], true);
    assert_eq!(end["result"]["content"][0]["text"], "Blocked by user");
    let statuses: Vec<&Value> = records
        .iter()
        .filter(|r| r["method"] == "setStatus")
        .map(|r| &r["statusText"])
        .collect();
    // "Turn 1 running..." came before the dialog; the rest of the run follows it.
    assert_eq!(
        statuses,
        [
            &json!("Turn 1 done"),
            &json!("Turn 2 running..."),
            &json!("Turn 2 done")
        ]
    );

    // An input dialog from a command; the prompt is answered once the handler is done.
    t.send(&json!({"id": "i", "type": "prompt", "message": "/rpc-input"}));
    let input = ui_where(&mut t, |r| r["method"] == "input");
    assert_eq!(input["title"], "Enter a value");
    assert_eq!(input["placeholder"], "type something...");
    t.send(&json!({"type": "extension_ui_response", "id": input["id"], "value": "forty-two"}));
    let records = until(&mut t, "response");
    assert_eq!(
        records.iter().find(|r| r["method"] == "notify").unwrap()["message"],
        "You entered: forty-two"
    );
    assert_eq!(records.last().unwrap()["id"], "i");

    // new_session asks for confirmation; declining cancels it, as pi answers.
    t.send(&json!({"id": "n", "type": "new_session"}));
    let confirm = ui_where(&mut t, |r| r["method"] == "confirm");
    assert_eq!(confirm["title"], "Clear session?");
    assert_eq!(confirm["message"], "All messages will be lost.");
    t.send(&json!({"type": "extension_ui_response", "id": confirm["id"], "confirmed": false}));
    let records = until(&mut t, "response");
    assert_eq!(records.last().unwrap()["data"], json!({"cancelled": true}));
    assert!(
        records
            .iter()
            .any(|r| r["method"] == "notify" && r["message"] == "Clear cancelled")
    );

    // set_editor_text from a command.
    t.send(&json!({"id": "f", "type": "prompt", "message": "/rpc-prefill"}));
    let prefill = ui_where(&mut t, |r| r["method"] == "set_editor_text");
    assert_eq!(
        prefill["text"],
        "This text was set by the rpc-demo extension."
    );
}
