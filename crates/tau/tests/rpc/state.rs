//! `get_state` and the commands that are real already: setters, session name, todos, host
//! tools, queues; settings files and command-line options seeding the state.

use serde_json::{Value, json};

use crate::{ready_tau, tau};

fn state(t: &mut tau_test_kit::Tau) -> Value {
    let r = t.request(json!({"type": "get_state"}));
    assert_eq!(r["success"], true, "{r}");
    r["data"].clone()
}

#[test]
fn fresh_state_has_every_field_in_order() {
    let mut t = ready_tau(tau());
    let s = state(&mut t);
    let keys: Vec<&str> = s.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "model",
            "thinkingLevel",
            "isStreaming",
            "isCompacting",
            "steeringMode",
            "followUpMode",
            "interruptMode",
            "sessionFile",
            "sessionId",
            "autoCompactionEnabled",
            "autoRetryEnabled",
            "messageCount",
            "pendingMessageCount",
            "queuedMessageCount",
            "todoPhases",
            "systemPrompt",
            "dumpTools",
        ]
    );
    assert_eq!(s["model"], Value::Null);
    assert_eq!(s["thinkingLevel"], "off", "no model: only off is supported");
    assert_eq!(s["isStreaming"], false);
    assert_eq!(s["isCompacting"], false);
    assert_eq!(s["steeringMode"], "one-at-a-time");
    assert_eq!(s["followUpMode"], "one-at-a-time");
    assert_eq!(s["interruptMode"], "wait");
    assert_eq!(s["autoCompactionEnabled"], true);
    assert_eq!(s["autoRetryEnabled"], true);
    assert_eq!(s["messageCount"], 0);
    assert_eq!(s["pendingMessageCount"], 0);
    assert_eq!(s["queuedMessageCount"], 0);
    assert_eq!(s["todoPhases"], json!([]));

    // UUID v7, and pi's file naming under $TAU_AGENT_DIR/sessions/<encoded cwd>/.
    let id = s["sessionId"].as_str().unwrap();
    assert_eq!(id.len(), 36);
    assert_eq!(&id[14..15], "7", "version nibble of {id}");
    let file = s["sessionFile"].as_str().unwrap();
    let cwd = t.cwd().canonicalize().unwrap();
    let encoded = format!(
        "--{}--",
        cwd.to_string_lossy()
            .trim_start_matches('/')
            .replace(['/', '\\', ':'], "-")
    );
    let dir = t.agent_dir().join("sessions").join(encoded);
    assert!(
        file.starts_with(dir.to_str().unwrap()),
        "{file} not under {}",
        dir.display()
    );
    assert!(file.ends_with(&format!("Z_{id}.jsonl")), "{file}");
}

#[test]
fn setters_show_in_get_state_and_are_saved_in_settings() {
    let settings = r#"{"steeringMode":"one-at-a-time"}"#;
    let mut t = ready_tau(tau().agent_file("settings.json", settings));
    for command in [
        json!({"type": "set_steering_mode", "mode": "all"}),
        json!({"type": "set_follow_up_mode", "mode": "all"}),
        json!({"type": "set_interrupt_mode", "mode": "immediate"}),
        json!({"type": "set_auto_compaction", "enabled": false}),
        json!({"type": "set_auto_retry", "enabled": false}),
    ] {
        let r = t.request(command);
        assert_eq!(r["success"], true);
        assert!(r.get("data").is_none(), "setters answer without data: {r}");
    }
    let s = state(&mut t);
    assert_eq!(s["steeringMode"], "all");
    assert_eq!(s["followUpMode"], "all");
    assert_eq!(s["interruptMode"], "immediate");
    assert_eq!(s["autoCompactionEnabled"], false);
    assert_eq!(s["autoRetryEnabled"], false);
    // Saved as pi saves them (issue 15; crates/tau/tests/rpc/settings.rs has the details).
    let on_disk = std::fs::read_to_string(t.agent_dir().join("settings.json")).unwrap();
    let on_disk: Value = serde_json::from_str(&on_disk).unwrap();
    assert_eq!(on_disk["steeringMode"], "all");
    assert_eq!(on_disk["retry"]["enabled"], false);
}

#[test]
fn session_name_is_trimmed_announced_and_never_empty() {
    let mut t = ready_tau(tau());
    let r = t.request(json!({"type": "set_session_name", "name": "   "}));
    assert_eq!(r["success"], false);
    assert_eq!(r["error"], "Session name cannot be empty");
    assert!(state(&mut t).get("sessionName").is_none());

    t.send(&json!({"id": "n", "type": "set_session_name", "name": "  my work  "}));
    let event = t.event("session_info_changed");
    assert_eq!(
        event,
        json!({"type": "session_info_changed", "name": "my work"})
    );
    assert_eq!(t.response("n")["success"], true);
    let pos = |t: &tau_test_kit::Tau, pred: &dyn Fn(&Value) -> bool| {
        t.history()
            .iter()
            .position(|r| r.json.as_ref().is_some_and(pred))
            .unwrap()
    };
    assert!(
        pos(&t, &|j| j["type"] == "session_info_changed") < pos(&t, &|j| j["id"] == "n"),
        "the event precedes the response"
    );
    assert_eq!(state(&mut t)["sessionName"], "my work");
}

#[test]
fn settings_files_seed_the_state() {
    let mut t = ready_tau(
        tau()
            .agent_file(
                "settings.json",
                r#"{"steeringMode":"all","followUpMode":"all","interruptMode":"immediate","compaction":{"enabled":false},"retry":{"enabled":false}}"#,
            )
            .arg("--approve")
            .cwd_file(".pi/settings.json", r#"{"followUpMode":"one-at-a-time"}"#),
    );
    let s = state(&mut t);
    assert_eq!(s["steeringMode"], "all");
    assert_eq!(s["followUpMode"], "one-at-a-time", "project settings win");
    assert_eq!(s["interruptMode"], "immediate");
    assert_eq!(s["autoCompactionEnabled"], false);
    assert_eq!(s["autoRetryEnabled"], false);
}

#[test]
fn a_broken_settings_file_is_reported_not_fatal() {
    let mut t = ready_tau(tau().agent_file("settings.json", "{broken"));
    assert_eq!(state(&mut t)["steeringMode"], "one-at-a-time");
    assert!(
        t.stderr().contains("settings.json"),
        "stderr: {}",
        t.stderr()
    );
}

#[test]
fn command_line_options_shape_the_session() {
    let mut t = ready_tau(tau().arg("--name").arg("  from cli ").arg("--no-session"));
    let s = state(&mut t);
    assert_eq!(s["sessionName"], "from cli");
    assert!(s.get("sessionFile").is_none(), "--no-session has no file");
    assert!(s["sessionId"].is_string());

    let mut t = ready_tau(
        tau()
            .arg("--session-dir")
            .arg("store")
            .arg("--thinking")
            .arg("high"),
    );
    let s = state(&mut t);
    let file = s["sessionFile"].as_str().unwrap();
    let store = t.cwd().canonicalize().unwrap().join("store");
    assert!(
        file.starts_with(store.to_str().unwrap()),
        "relative to cwd: {file}"
    );
    assert_eq!(
        s["thinkingLevel"], "off",
        "clamped: there is no reasoning model"
    );
}

#[test]
fn todos_keep_every_field_and_show_in_state() {
    let mut t = ready_tau(tau());
    let phases = json!([{
        "id": "phase-1",
        "name": "Evaluation",
        "tasks": [
            {"id": "task-1", "content": "Map the tools", "status": "in_progress", "notes": "n", "details": {"k": [1, 2]}, "owner": "host"},
            {"id": "task-2", "content": "Exercise edit", "status": "pending"}
        ]
    }]);
    let r = t.request(json!({"type": "set_todos", "phases": phases}));
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(r["data"]["todoPhases"], phases);
    assert_eq!(state(&mut t)["todoPhases"], phases);

    let bad = t.request(json!({"type": "set_todos", "phases": {"not": "a list"}}));
    assert_eq!(bad["success"], false);
    assert!(
        bad["error"]
            .as_str()
            .unwrap()
            .starts_with("Invalid set_todos command: phases")
    );
    assert_eq!(
        state(&mut t)["todoPhases"],
        phases,
        "a rejected set changes nothing"
    );

    t.request(json!({"type": "set_todos", "phases": []}));
    assert_eq!(state(&mut t)["todoPhases"], json!([]));
}

#[test]
fn host_tools_are_validated_with_xcsh_errors() {
    let mut t = ready_tau(tau());
    let tool = |name: &str| json!({"name": name, "description": "Echo a value", "parameters": {"type": "object", "properties": {"message": {"type": "string"}}}});
    let r =
        t.request(json!({"type": "set_host_tools", "tools": [tool(" echo_host "), tool("other")]}));
    assert_eq!(r["data"], json!({"toolNames": ["echo_host", "other"]}));

    let cases = [
        (
            json!([tool("a"), tool("")]),
            "Host tool at index 1 must provide a non-empty name",
        ),
        (
            json!([tool("dup"), tool("dup")]),
            "RPC host tool names must be unique",
        ),
        (
            json!([tool("bash")]),
            "RPC host tool \"bash\" conflicts with an existing tool",
        ),
        (
            json!([{"name": "x", "description": " ", "parameters": {}}]),
            "Host tool \"x\" must provide a non-empty description",
        ),
        (
            json!([{"name": "x", "description": "d", "parameters": []}]),
            "Host tool \"x\" must provide a JSON Schema object",
        ),
    ];
    for (tools, error) in cases {
        let r = t.request(json!({"type": "set_host_tools", "tools": tools}));
        assert!(r["id"].is_string(), "errors echo the id: {r}");
        assert_eq!(r["success"], false);
        assert_eq!(r["error"], error);
    }
    let missing = t.request(json!({"type": "set_host_tools", "tools": [{"name": "x"}]}));
    assert_eq!(
        missing["error"],
        "Invalid set_host_tools command: tools[0]: missing field `description`"
    );
}

#[test]
fn empty_conversation_queries() {
    let mut t = ready_tau(tau());
    assert_eq!(
        t.request(json!({"type": "get_messages"}))["data"],
        json!({"messages": []})
    );
    assert_eq!(
        t.request(json!({"type": "get_last_assistant_text"}))["data"],
        json!({}),
        "pi 0.79's answer without text"
    );
    assert_eq!(
        t.request(json!({"type": "clear_queue"}))["data"],
        json!({"steering": [], "followUp": []})
    );
}

#[test]
fn messages_queued_while_idle_wait_and_clear_queue_returns_them() {
    let mut t = ready_tau(tau());
    assert_eq!(
        t.request(json!({"type": "steer", "message": "S1"}))["data"],
        json!({"disposition": "queued"})
    );
    t.request(json!({"type": "follow_up", "message": "F1"}));
    let s = state(&mut t);
    assert_eq!(s["pendingMessageCount"], 2);
    assert_eq!(s["queuedMessageCount"], 2);
    assert_eq!(
        s["isStreaming"], false,
        "queueing while idle starts nothing"
    );
    let r = t.request(json!({"type": "clear_queue"}));
    assert_eq!(r["data"], json!({"steering": ["S1"], "followUp": ["F1"]}));
    let update = t
        .history()
        .iter()
        .rev()
        .find_map(|r| r.json.clone().filter(|j| j["type"] == "queue_update"));
    assert_eq!(
        update,
        Some(json!({"type": "queue_update", "steering": [], "followUp": []}))
    );
    assert_eq!(state(&mut t)["pendingMessageCount"], 0);
}

#[test]
fn get_integrations_reports_the_model_from_configuration() {
    let mut t = tau().arg("--no-session").spawn();
    let data = t.request(json!({"type": "get_integrations"}))["data"].clone();
    assert_eq!(data["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(data["model"], json!({"state": "no_provider"}));
    assert_eq!(data["services"], json!([]));

    let models = json!({"providers": {"local": {
        "baseUrl": "http://127.0.0.1:9/v1", "api": "openai-completions", "apiKey": "k",
        "models": [{"id": "m1"}],
    }}});
    let mut t = tau()
        .agent_file("models.json", models.to_string())
        .arg("--no-session")
        .spawn();
    let data = t.request(json!({"type": "get_integrations"}))["data"].clone();
    assert_eq!(
        data["model"],
        json!({"state": "connected", "provider": "local"})
    );
}

fn hand_written_session(cwd: &str) -> String {
    let lines = [
        json!({"type": "session", "version": 3, "id": "src-session", "timestamp": "2026-11-22T00:00:00.000Z", "cwd": cwd}),
        json!({"type": "message", "id": "aaaa0001", "parentId": null, "timestamp": "2026-11-22T00:00:01.000Z",
               "message": {"role": "user", "content": [{"type": "text", "text": "first question"}], "timestamp": 1}}),
        json!({"type": "message", "id": "aaaa0002", "parentId": "aaaa0001", "timestamp": "2026-11-22T00:00:02.000Z",
               "message": {"role": "assistant", "content": [{"type": "text", "text": "first answer"}],
                           "api": "openai-completions", "provider": "mock", "model": "mock-1",
                           "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2,
                                     "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
                           "stopReason": "stop", "timestamp": 2}}),
    ];
    lines.iter().map(|l| format!("{l}\n")).collect()
}

#[test]
fn fork_flag_copies_a_session_into_this_directory() {
    let mut t = tau()
        .cwd_file(
            "source.jsonl",
            hand_written_session("/nonexistent-elsewhere"),
        )
        .arg("--fork")
        .arg("source.jsonl")
        .spawn();
    let state = t.request(json!({"type": "get_state"}))["data"].clone();
    let messages = t.request(json!({"type": "get_messages"}))["data"]["messages"].clone();
    assert_eq!(messages.as_array().map(Vec::len), Some(2), "{messages}");
    assert_eq!(messages[0]["content"][0]["text"], "first question");
    assert_ne!(state["sessionId"], "src-session");
    // A session with a reply is written at once, with the source as its parent.
    let file = state["sessionFile"].as_str().unwrap();
    let text = std::fs::read_to_string(file).unwrap();
    let header: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert!(
        header["parentSession"]
            .as_str()
            .unwrap()
            .ends_with("source.jsonl"),
        "{header}"
    );
    assert_eq!(header["cwd"], t.cwd().to_string_lossy().as_ref());
    assert!(text.contains("\"id\":\"aaaa0002\""), "entry ids are kept");
}

#[test]
fn session_id_flag_names_the_session() {
    let mut t = tau().arg("--session-id").arg("my-run.1").spawn();
    let state = t.request(json!({"type": "get_state"}))["data"].clone();
    assert_eq!(state["sessionId"], "my-run.1");
    assert!(
        state["sessionFile"]
            .as_str()
            .unwrap()
            .ends_with("_my-run.1.jsonl")
    );
}
