//! The extension protocol's frames as tau really writes and reads them: a session that raises
//! every event an extension can see (a run with a tool call, a model change, a compaction, a
//! tree move, a fork, a new session, the end), with an extension answering each event that
//! asks (`fixtures/extensions/frames.ts`) and calling the UI and the actions. The Node host logs
//! every frame (`TAU_HOST_FRAME_LOG`), and each must match `docs/protocol.schema.json`: events
//! against `ExtensionEvent` or `AgentEvent`, the handlers' results against their event's result
//! type, actions against `ExtensionAction`, UI requests against `ExtensionUiRequestFrame`.

use std::collections::{BTreeSet, HashMap};

use serde_json::{Value, json};
use tau_mock_llm::{MockServer, Reply};
use tau_test_kit::check_definition;

use crate::{ready_tau, tau};

fn fixture(name: &str) -> String {
    format!(
        "{}/tests/fixtures/extensions/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// The result type the schema gives each event that waits for an answer.
fn result_definition(event: &str) -> Option<&'static str> {
    Some(match event {
        "project_trust" => "ProjectTrustResult",
        "session_before_switch" | "session_before_fork" => "CancelResult",
        "session_before_compact" => "SessionBeforeCompactResult",
        "session_before_tree" => "SessionBeforeTreeResult",
        "input" => "InputResult",
        "before_agent_start" => "BeforeAgentStartResult",
        "context" => "ContextResult",
        "before_provider_request" => "BeforeProviderRequestResult",
        "tool_call" => "ToolCallResult",
        "tool_result" => "ToolResultPatch",
        "message_end" => "MessageEndResult",
        "resources_discover" => "ResourcesDiscoverResult",
        _ => return None,
    })
}

/// The frame without the keys the frame itself adds around the typed part.
fn without(frame: &Value, keys: &[&str]) -> Value {
    let mut frame = frame.clone();
    if let Some(object) = frame.as_object_mut() {
        for key in keys {
            object.remove(*key);
        }
    }
    frame
}

#[test]
fn every_frame_between_tau_and_the_host_matches_the_protocol_schema() {
    let mock = MockServer::start_background().unwrap();
    let log_dir = tempfile::tempdir().unwrap();
    let log = log_dir.path().join("frames.jsonl");
    let models = json!({"providers": {"mock": {
        "baseUrl": format!("{}/v1", mock.url()), "api": "openai-completions", "apiKey": "k",
        "models": [{"id": "m1", "reasoning": true, "contextWindow": 100000, "maxTokens": 4096},
                   {"id": "m2", "reasoning": true, "contextWindow": 100000, "maxTokens": 4096}],
    }}});
    let mut t = ready_tau(
        tau()
            .agent_file("models.json", models.to_string())
            // A short tail kept, so that two exchanges are enough to compact.
            .agent_file(
                "settings.json",
                json!({"compaction": {"keepRecentTokens": 50}}).to_string(),
            )
            .arg("--model")
            .arg("mock/m1")
            .arg("-e")
            .arg(fixture("frames.ts"))
            .env("TAU_HOST_FRAME_LOG", log.display().to_string()),
    );
    mock.push(Reply::text("").tool_call("c1", "bash", json!({"command": "true"})));
    mock.push(Reply::text("listed ".repeat(100)));
    t.send(&json!({"id": "p1", "type": "prompt", "message": "rewrite me"}));
    t.event("agent_settled");
    mock.push(Reply::text("second answer ".repeat(100)));
    t.send(&json!({"id": "p2", "type": "prompt", "message": "again ".repeat(100)}));
    t.event("agent_settled");
    let level = t.request(json!({"type": "set_thinking_level", "level": "high"}));
    assert_eq!(level["success"], true, "{level}");
    let model = t.request(json!({"type": "set_model", "provider": "mock", "modelId": "m2"}));
    assert_eq!(model["success"], true, "{model}");
    let compact = t.request(json!({"type": "compact"}));
    assert_eq!(compact["success"], true, "{compact}");
    t.send(&json!({"id": "cmd", "type": "prompt", "message": "/frames"}));
    t.response("cmd");
    let entries = t.request(json!({"type": "get_fork_messages"}));
    let entry_id = entries["data"]["messages"][0]["entryId"]
        .as_str()
        .expect("a message to fork from")
        .to_string();
    let fork = t.request(json!({"type": "fork", "entryId": entry_id}));
    assert_eq!(fork["success"], true, "{fork}");
    let new = t.request(json!({"type": "new_session"}));
    assert_eq!(new["success"], true, "{new}");
    t.close_stdin();
    assert!(t.wait_exit(std::time::Duration::from_secs(20)).success());

    let text = std::fs::read_to_string(&log).expect("the host logged its frames");
    let mut asked: HashMap<String, String> = HashMap::new();
    let mut seen_events = BTreeSet::new();
    let mut checked = HashMap::<&str, usize>::new();
    let mut problems = Vec::new();
    for line in text.lines() {
        let entry: Value = serde_json::from_str(line).unwrap();
        let frame: Value = serde_json::from_str(entry["line"].as_str().unwrap()).unwrap();
        let kind = frame["type"].as_str().unwrap_or_default();
        let (definition, value) = match (entry["dir"].as_str(), kind) {
            (Some("in"), "event") => {
                let event = &frame["event"];
                let name = event["type"].as_str().unwrap_or_default().to_string();
                if let Some(id) = frame["id"].as_str() {
                    asked.insert(id.to_string(), name.clone());
                }
                seen_events.insert(name.clone());
                let definition = if check_definition("ExtensionEvent", event).is_ok() {
                    "ExtensionEvent"
                } else {
                    "AgentEvent"
                };
                (definition, event.clone())
            }
            (Some("out"), "response") => {
                let Some(event) = frame["id"].as_str().and_then(|id| asked.get(id)) else {
                    continue;
                };
                let Some(definition) = result_definition(event) else {
                    continue;
                };
                if frame["result"].is_null() {
                    continue;
                }
                (definition, frame["result"].clone())
            }
            (Some("out"), "action") => (
                "ExtensionAction",
                without(&frame, &["type", "id", "extension"]),
            ),
            (Some("out"), "ui_request") => ("ExtensionUiRequestFrame", without(&frame, &["type"])),
            _ => continue,
        };
        *checked.entry(definition).or_default() += 1;
        if let Err(problem) = check_definition(definition, &value) {
            problems.push(format!("{definition}: {value}\n{problem}"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
    assert_catalog_ends_its_frame(&text);
    for expected in [
        "input",
        "before_agent_start",
        "context",
        "before_provider_request",
        "after_provider_response",
        "tool_call",
        "tool_result",
        "message_end",
        "resources_discover",
        "model_select",
        "thinking_level_select",
        "session_start",
        "session_shutdown",
        "session_before_switch",
        "session_before_fork",
        "session_before_compact",
        "session_compact",
        "session_before_tree",
        "session_tree",
        "agent_start",
        "message_update",
        "tool_execution_end",
    ] {
        assert!(
            seen_events.contains(expected),
            "{expected} never reached the host; saw {seen_events:?}"
        );
    }
    for definition in [
        "ExtensionEvent",
        "AgentEvent",
        "ExtensionAction",
        "ExtensionUiRequestFrame",
        "InputResult",
        "BeforeAgentStartResult",
        "ToolResultPatch",
        "SessionBeforeCompactResult",
        "CancelResult",
    ] {
        assert!(
            checked.get(definition).copied().unwrap_or(0) > 0,
            "no frame was checked against {definition}: {checked:?}"
        );
    }
}

/// The model catalog reaches the host as the last key of the last field of its frame
/// (docs/extensions.md §5: the Node host cuts it off unparsed).
fn assert_catalog_ends_its_frame(log: &str) {
    let carrying: Vec<(String, Value)> = log
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|entry| entry["dir"] == "in")
        .filter_map(|entry| entry["line"].as_str().map(str::to_string))
        .filter_map(|line| {
            let frame: Value = serde_json::from_str(&line).ok()?;
            frame["state"].get("allModels")?;
            Some((line, frame))
        })
        .collect();
    assert!(!carrying.is_empty(), "the catalog reached the host");
    for (line, frame) in &carrying {
        assert_ends_frame(line, frame);
    }
}

fn assert_ends_frame(line: &str, frame: &Value) {
    // serde_json keeps the keys in the order they were written (preserve_order).
    let last_key = |object: &Value| {
        object
            .as_object()
            .and_then(|o| o.keys().next_back().cloned())
    };
    assert_eq!(last_key(frame).as_deref(), Some("state"), "{line:.200}");
    assert_eq!(last_key(&frame["state"]).as_deref(), Some("allModels"));
    assert!(
        line.ends_with("]}}"),
        "{}",
        line.get(line.len().saturating_sub(80)..).unwrap_or(line)
    );
    assert!(
        frame["state"]["allModels"]
            .as_array()
            .is_some_and(|m| m.len() > 2),
        "the whole catalog"
    );
}
