//! An extension names MCP tools (issue 23): a TypeScript extension in the Node host
//! (`fixtures/extensions/mcp-tools.ts`) sees the test server's tools in `pi.getAllTools()`,
//! switches them on and off with `pi.setActiveTools`, and the model's tool list follows.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use tau_mock_llm::{MockServer, Reply};
use tau_test_kit::Tau;

use crate::mcp::{offered, server_entry, start, status, stop};

/// The extension's two notices for `/mcp-tools <args>`: what it saw, what is active.
fn command(t: &mut Tau, args: &str) -> (Vec<String>, Vec<String>) {
    let id = format!("cmd {args}");
    t.send(&json!({"id": id, "type": "prompt", "message": format!("/mcp-tools {args}")}));
    let mut notices = Vec::new();
    while notices.len() < 2 {
        let record = t
            .next_record(Duration::from_secs(30))
            .expect("a notice within 30 s");
        let json = record.json.expect("JSON");
        if json["type"] == "extension_ui_request" && json["method"] == "notify" {
            notices.push(json["message"].as_str().unwrap_or_default().to_string());
        }
    }
    let list = |notice: &str, label: &str| -> Vec<String> {
        let text = notice
            .strip_prefix(label)
            .unwrap_or_else(|| panic!("{notice}"));
        serde_json::from_str::<Vec<String>>(text).unwrap_or_else(|e| panic!("{notice}: {e}"))
    };
    (list(&notices[0], "all="), list(&notices[1], "active="))
}

/// One run on the mock; the tools the model was offered in it.
fn tools_offered(t: &mut Tau, mock: &tau_mock_llm::BackgroundMock) -> Vec<String> {
    mock.push(Reply::text("ok"));
    t.send(&json!({"id": "p", "type": "prompt", "message": "go"}));
    t.records_until("agent_settled", Duration::from_secs(30));
    offered(mock).last().cloned().unwrap_or_default()
}

#[test]
fn an_extension_sees_mcp_tools_and_sets_them_active() {
    let host_modules =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../extensions/node-host/node_modules");
    if !host_modules.is_dir() {
        eprintln!(
            "skipped: the Node host's packages are not installed; run `npm ci` in extensions/node-host"
        );
        return;
    }
    let fixture = format!(
        "{}/tests/fixtures/extensions/mcp-tools.ts",
        env!("CARGO_MANIFEST_DIR")
    );
    let mock = MockServer::start_background().unwrap();
    let mut t = start(&mock, json!({"test": server_entry()}), &[], |b| {
        b.arg("-e").arg(fixture)
    });
    status(&mut t, "test", "ready");
    let (all, active) = command(&mut t, "");
    for name in ["test_echo", "test_add", "test_dotted_name"] {
        assert!(all.contains(&name.to_string()), "{name} in {all:?}");
        assert!(
            active.contains(&name.to_string()),
            "{name} active: {active:?}"
        );
    }

    let (_, active) = command(&mut t, "read test_echo");
    assert_eq!(active, ["read", "test_echo"]);
    assert_eq!(tools_offered(&mut t, &mock), ["read", "test_echo"]);
    let state = t.request(json!({"type": "get_state"}));
    let names: Vec<&str> = state["data"]["dumpTools"]
        .as_array()
        .expect("dumpTools")
        .iter()
        .filter_map(|tool: &Value| tool["name"].as_str())
        .collect();
    assert_eq!(names, ["read", "test_echo"], "{state}");

    let (_, active) = command(&mut t, "test_add");
    assert_eq!(active, ["test_add"]);
    assert_eq!(tools_offered(&mut t, &mock), ["test_add"]);
    stop(t);
}
