//! Extensions as processes, black-box: a Python extension (`tests/fixtures/extensions/guard.py`)
//! speaking docs/extensions.md drives tools, `tool_call` blocking, commands with dialogs,
//! actions, `extension_error`, load failures, deadlines and a crashing process.

use std::time::Duration;

use serde_json::{Value, json};
use tau_mock_llm::{BackgroundMock, MockServer, Reply};
use tau_test_kit::Tau;

use crate::{ready_tau, tau};

fn guard_path() -> String {
    format!(
        "{}/tests/fixtures/extensions/guard.py",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn models(mock: &BackgroundMock) -> String {
    json!({"providers": {"mock": {
        "baseUrl": format!("{}/v1", mock.url()), "api": "openai-completions", "apiKey": "mock-key",
        "models": [{"id": "mock-1", "reasoning": true, "contextWindow": 100000, "maxTokens": 4096},
                   {"id": "mock-2", "contextWindow": 50000, "maxTokens": 4096}],
    }}})
    .to_string()
}

fn start(mode: &str, settings: Option<Value>) -> (BackgroundMock, Tau) {
    let mock = MockServer::start_background().unwrap();
    let mut builder = tau()
        .agent_file("models.json", models(&mock))
        .env("GUARD_MODE", mode)
        .arg("--no-session")
        .arg("-e")
        .arg(guard_path());
    if let Some(settings) = settings {
        builder = builder.agent_file("settings.json", settings.to_string());
    }
    (mock, ready_tau(builder))
}

/// The extension's view of tau, as `/state` (guard.py) reports it.
fn mirror_of(t: &mut Tau, id: &str) -> Value {
    t.send(&json!({"id": id, "type": "prompt", "message": "/state"}));
    let notify = t.event("extension_ui_request");
    serde_json::from_str(notify["message"].as_str().unwrap()).unwrap()
}

/// The `tool_execution_end` of a call.
fn tool_end(records: &[Value], id: &str) -> Value {
    records
        .iter()
        .find(|r| r["type"] == "tool_execution_end" && r["toolCallId"] == id)
        .cloned()
        .unwrap_or_else(|| panic!("no tool_execution_end for {id}"))
}

/// Two prompts and their replies, so that there is something to compact.
fn two_exchanges(mock: &BackgroundMock, t: &mut Tau) {
    for text in ["first", "second"] {
        mock.push(Reply::text(format!("reply to {text}")));
        t.send(&json!({"id": text, "type": "prompt", "message": text}));
        until(t, "agent_settled");
    }
}

/// Records up to and including the first of `kind`.
fn until(t: &mut Tau, kind: &str) -> Vec<Value> {
    let mut out = Vec::new();
    loop {
        let record = t
            .next_record(Duration::from_secs(15))
            .unwrap_or_else(|| panic!("no {kind} within 15 s; got {out:?}"));
        let json = record.json.expect("JSON records");
        let done = json["type"] == kind;
        out.push(json);
        if done {
            return out;
        }
    }
}

#[test]
fn session_start_tools_and_blocking_through_a_python_extension() {
    let (mock, mut t) = start("", None);
    let notify = t.event("extension_ui_request");
    assert_eq!(notify["method"], "notify");
    assert_eq!(
        notify["message"], "guard ready (startup) on mock-1",
        "the handler read the model from its mirror"
    );

    mock.push(
        Reply::new()
            .tool_call("c1", "shout", json!({"text": "hello"}))
            .tool_call("c2", "bash", json!({"command": "echo hi"})),
    );
    mock.push(Reply::text("done"));
    t.send(&json!({"id": "p", "type": "prompt", "message": "shout"}));
    let records = until(&mut t, "agent_settled");
    let end_of = |id: &str| tool_end(&records, id);
    let shout = end_of("c1");
    assert_eq!(shout["isError"], false);
    assert_eq!(
        shout["result"],
        json!({"content": [{"type": "text", "text": "HELLO!"}], "details": {"length": 6}}),
        "the tool ran with the input the tool_call handler edited"
    );
    assert!(
        records.iter().any(|r| r["type"] == "tool_execution_update"
            && r["partialResult"]["content"][0]["text"] == "shouting"),
        "progress is reported"
    );
    let bash = end_of("c2");
    assert_eq!(bash["isError"], true);
    assert_eq!(
        bash["result"]["content"][0]["text"],
        "bash is not allowed here"
    );
    let first = mock.requests()[0].body.to_string();
    assert!(first.contains("\"shout\""), "the extension tool is offered");
    assert!(first.contains("Upper-cases the text"));
    assert!(
        first.contains("- shout: Shout text back in capitals"),
        "its snippet, on one line, is in the system prompt"
    );
    assert!(first.contains("Shout only when asked."));

    // The failing agent_end handler is reported before agent_end itself.
    let error = records
        .iter()
        .position(|r| r["type"] == "extension_error")
        .expect("extension_error");
    let agent_end = records
        .iter()
        .position(|r| r["type"] == "agent_end")
        .expect("agent_end");
    assert!(error < agent_end);
    assert_eq!(
        records[error],
        json!({"type": "extension_error", "extensionPath": guard_path(),
               "event": "agent_end", "error": "agent_end handler failed"})
    );
}

#[test]
fn a_command_opens_a_dialog_and_answers_the_prompt_when_done() {
    let (_mock, mut t) = start("", None);
    t.event("extension_ui_request");
    let commands = t.request(json!({"id": "c", "type": "get_commands"}));
    assert_eq!(
        commands["data"]["commands"][0],
        json!({"name": "greet", "description": "Greets after asking", "source": "extension",
               "sourceInfo": {"path": guard_path(), "source": "cli", "scope": "temporary",
                              "origin": "top-level"}})
    );
    assert_eq!(
        commands["data"]["commands"][1],
        json!({"name": "state", "source": "extension",
               "sourceInfo": {"path": guard_path(), "source": "cli", "scope": "temporary",
                              "origin": "top-level"}}),
        "no description key when none was registered"
    );

    t.send(&json!({"id": "g", "type": "prompt", "message": "/greet world"}));
    let dialog = t.event("extension_ui_request");
    assert_eq!(dialog["method"], "confirm");
    assert_eq!(dialog["title"], "Greet?");
    assert_eq!(dialog["message"], "Say hello to world");
    // The input loop is free while the command waits: another command is answered.
    let state = t.request(json!({"id": "s", "type": "get_state"}));
    assert_eq!(state["success"], true);

    let id = dialog["id"].as_str().unwrap().to_string();
    t.send(&json!({"type": "extension_ui_response", "id": id, "confirmed": true}));
    let records = until(&mut t, "response");
    let notify = records
        .iter()
        .find(|r| r["method"] == "notify")
        .expect("notify");
    assert_eq!(notify["message"], "greeting confirmed");
    let status = records
        .iter()
        .find(|r| r["method"] == "setStatus")
        .expect("setStatus after the entry was written");
    let response = records.last().unwrap();
    assert_eq!(response["id"], "g");
    assert_eq!(response["success"], true);

    let entries = t.request(json!({"id": "e", "type": "get_entries"}));
    let custom = entries["data"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["type"] == "custom")
        .cloned()
        .expect("the action appended a custom entry");
    assert_eq!(custom["customType"], "greeting");
    assert_eq!(custom["data"], json!({"answer": "confirmed"}));
    assert_eq!(
        status["statusText"],
        format!("entry {}", custom["id"].as_str().unwrap()),
        "the action's answer carried the new entry's id"
    );

    let queued = t.request(json!({"id": "q", "type": "steer", "message": "/greet x"}));
    assert_eq!(
        queued["error"],
        "Extension command \"/greet\" cannot be queued. Use prompt() or execute the command when not streaming."
    );
}

#[test]
fn a_load_failure_stops_tau_before_any_record() {
    // GUARD_MODE reaches the extension through the environment of the spawned tau.
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_tau"))
        .args(["--mode", "rpc", "--no-session", "-e", &guard_path()])
        .env("GUARD_MODE", "load_error")
        .env("TAU_AGENT_DIR", tempfile::tempdir().unwrap().path())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let output = child.wait_with_output_timeout();
    assert_eq!(output.status.code(), Some(1));
    assert!(output.stdout.is_empty(), "nothing on stdout");
    assert_eq!(
        String::from_utf8_lossy(&output.stderr).trim_end(),
        format!(
            "Error: Failed to load extension \"{}\": Failed to load extension: boom",
            guard_path()
        )
    );

    let missing = format!("{}/nope.py", env!("CARGO_MANIFEST_DIR"));
    let (status, stdout, stderr) = tau_test_kit::run_once(
        std::path::Path::new(env!("CARGO_BIN_EXE_tau")),
        &["--mode", "rpc", "--no-session", "-e", &missing],
        b"",
    );
    assert_eq!(status.code(), Some(1));
    assert!(stdout.is_empty());
    assert_eq!(
        stderr.trim_end(),
        format!(
            "Error: Failed to load extension \"{missing}\": Extension path does not exist: {missing}"
        )
    );
}

trait WaitWithTimeout {
    fn wait_with_output_timeout(self) -> std::process::Output;
}

impl WaitWithTimeout for std::process::Child {
    fn wait_with_output_timeout(self) -> std::process::Output {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(self.wait_with_output());
        });
        rx.recv_timeout(Duration::from_secs(20))
            .expect("tau exits")
            .expect("output")
    }
}

#[test]
fn a_hung_handler_meets_its_deadline_and_the_run_goes_on() {
    let (mock, mut t) = start(
        "hang",
        Some(json!({"extensionTimeouts": {"handlerMs": 300}})),
    );
    t.event("extension_ui_request");
    mock.push(Reply::text("still answered"));
    t.send(&json!({"id": "p", "type": "prompt", "message": "hi"}));
    let records = until(&mut t, "agent_settled");
    let error = records
        .iter()
        .find(|r| r["type"] == "extension_error" && r["event"] == "turn_start")
        .expect("the hung turn_start handler is reported");
    assert_eq!(error["error"], "Timed out after 300 ms");
    assert!(
        records
            .iter()
            .any(|r| r["type"] == "message_end" && r["message"]["role"] == "assistant"),
        "the reply still streamed"
    );
}

#[test]
fn a_crashed_extension_is_reported_and_its_tool_fails_cleanly() {
    let (mock, mut t) = start("crash_on_tool", None);
    t.event("extension_ui_request");
    mock.push(Reply::new().tool_call("c1", "shout", json!({"text": "x"})));
    mock.push(Reply::text("after the crash"));
    t.send(&json!({"id": "p", "type": "prompt", "message": "shout"}));
    let records = until(&mut t, "agent_settled");
    let end = records
        .iter()
        .find(|r| r["type"] == "tool_execution_end")
        .expect("tool_execution_end");
    assert_eq!(end["isError"], true);
    assert_eq!(
        end["result"]["content"][0]["text"],
        "Extension process exited (exit code 3)"
    );
    assert!(
        records.iter().any(|r| r["type"] == "extension_error"
            && r["event"] == "process"
            && r["error"] == "Extension process exited (exit code 3)"),
        "the crash is reported: {records:?}"
    );
    // tau itself keeps answering.
    let state = t.request(json!({"id": "s", "type": "get_state"}));
    assert_eq!(state["success"], true);
}

#[test]
fn abort_ends_a_run_that_a_hung_handler_holds() {
    // The default handler deadline is 30 s: only the abort can end this run in time.
    let (_mock, mut t) = start("hang", None);
    t.event("extension_ui_request");
    t.send(&json!({"id": "p", "type": "prompt", "message": "hi"}));
    t.event("agent_start");
    // The turn_start handler never answers, and pi's order puts extensions first: neither
    // the RPC turn_start nor the reply comes.
    std::thread::sleep(Duration::from_millis(200));
    let started = std::time::Instant::now();
    let aborted = t.request(json!({"id": "a", "type": "abort"}));
    assert_eq!(aborted["success"], true);
    let records = until(&mut t, "agent_settled");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the abort did not wait for the handler's deadline"
    );
    assert!(records.iter().any(|r| r["type"] == "agent_end"));
}

#[test]
fn the_extension_mirror_follows_the_session() {
    let (mock, mut t) = start("", None);
    t.event("extension_ui_request");
    mock.push(Reply::text("hello"));
    t.send(&json!({"id": "p", "type": "prompt", "message": "hi"}));
    until(&mut t, "agent_settled");
    t.request(json!({"id": "th", "type": "set_thinking_level", "level": "high"}));
    let mirror = mirror_of(&mut t, "s");
    let entries = t.request(json!({"id": "e", "type": "get_entries"}));
    let ids: Vec<Value> = entries["data"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].clone())
        .collect();
    assert_eq!(
        mirror["entryIds"],
        Value::Array(ids),
        "every entry, in order"
    );
    assert_eq!(mirror["leafId"], entries["data"]["leafId"]);
    assert_eq!(mirror["isIdle"], true);
    assert_eq!(mirror["thinkingLevel"], "high");
    assert_eq!(
        mirror["activeTools"],
        json!([
            "read",
            "bash",
            "edit",
            "write",
            "todo_write",
            "shout",
            "tally"
        ])
    );
    assert_eq!(mirror["models"], json!(["mock-1", "mock-2"]));
    t.request(json!({"id": "m", "type": "set_model", "provider": "mock", "modelId": "mock-2"}));
    let mirror = mirror_of(&mut t, "s2");
    assert_eq!(
        mirror["selects"],
        json!([
            {"type": "thinking_level_select", "level": "high", "previousLevel": "medium"},
            {"type": "thinking_level_select", "level": "off", "previousLevel": "high"},
            {"type": "model_select", "model": "mock-2", "previousModel": "mock-1", "source": "set"},
        ]),
        "pi's order: the level the new model clamps to, then the model"
    );
}

#[test]
fn extension_flags_come_from_the_command_line() {
    let mock = MockServer::start_background().unwrap();
    let mut t = ready_tau(
        tau()
            .agent_file("models.json", models(&mock))
            .arg("--no-session")
            .arg("--loud")
            .arg("--greeting=hey")
            .arg("-e")
            .arg(guard_path()),
    );
    t.event("extension_ui_request");
    let mirror = mirror_of(&mut t, "s");
    assert_eq!(mirror["flags"], json!({"loud": true, "greeting": "hey"}));

    let run = |extra: &[&str]| {
        let mut args = vec!["--mode", "rpc", "--no-session", "-e"];
        let guard = guard_path();
        args.push(&guard);
        args.extend_from_slice(extra);
        let (status, stdout, stderr) =
            tau_test_kit::run_once(std::path::Path::new(env!("CARGO_BIN_EXE_tau")), &args, b"");
        assert_eq!(status.code(), Some(1), "{stderr}");
        assert!(stdout.is_empty());
        stderr.trim_end().to_string()
    };
    assert_eq!(run(&["--nope"]), "Error: Unknown option: --nope");
    assert_eq!(
        run(&["--nope", "--nah=1"]),
        "Error: Unknown options: --nope, --nah"
    );
    assert_eq!(
        run(&["--greeting"]),
        "Error: Extension flag \"--greeting\" requires a value"
    );
}

#[test]
fn input_and_before_agent_start_shape_the_run() {
    let (mock, mut t) = start("", None);
    t.event("extension_ui_request");

    let handled = t.request(json!({"id": "h", "type": "prompt", "message": "secret plan"}));
    assert_eq!(handled["success"], true);
    assert!(handled.get("data").is_none(), "nothing started");

    mock.push(Reply::text("ok"));
    t.send(&json!({"id": "p", "type": "prompt", "message": "rewrite: hello"}));
    let records = until(&mut t, "agent_settled");
    assert!(
        !records
            .iter()
            .any(|r| r["type"] == "response" && r["id"] == "h")
    );
    let starts: Vec<&Value> = records
        .iter()
        .filter(|r| r["type"] == "message_start")
        .collect();
    assert_eq!(starts[0]["message"]["role"], "user");
    assert_eq!(starts[0]["message"]["content"][0]["text"], "hello");
    assert_eq!(starts[1]["message"]["role"], "custom");
    assert_eq!(starts[1]["message"]["customType"], "note");
    let body = mock.requests()[0].body.to_string();
    assert!(
        body.contains("GUARD ACTIVE"),
        "the system prompt was changed"
    );
    assert!(
        body.contains("remember the guard"),
        "the custom message is context"
    );
    assert!(!body.contains("rewrite:"), "the transformed text was sent");
    assert_eq!(
        mock.requests().len(),
        1,
        "the handled prompt never reached the model"
    );

    let entries = t.request(json!({"id": "e", "type": "get_entries"}));
    assert!(
        entries["data"]["entries"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["type"] == "custom_message" && e["customType"] == "note"),
        "stored as a custom_message entry"
    );
}

#[test]
fn a_dialog_inside_an_input_handler_is_answered_through_the_busy_input_loop() {
    let (mock, mut t) = start("", None);
    t.event("extension_ui_request");
    mock.push(Reply::text("ok"));
    t.send(&json!({"id": "p", "type": "prompt", "message": "ask"}));
    let dialog = t.event("extension_ui_request");
    assert_eq!(dialog["method"], "confirm");
    let id = dialog["id"].as_str().unwrap().to_string();
    t.send(&json!({"type": "extension_ui_response", "id": id, "confirmed": true}));
    let response = t.response("p");
    assert_eq!(response["success"], true);
    until(&mut t, "agent_settled");
    assert!(
        mock.requests()[0]
            .body
            .to_string()
            .contains("asked and confirmed")
    );

    // An abort cuts off a handler that waits on a dialog nobody answers.
    t.send(&json!({"id": "p2", "type": "prompt", "message": "ask"}));
    t.event("extension_ui_request");
    let aborted = t.request(json!({"id": "a", "type": "abort"}));
    assert_eq!(aborted["success"], true);
}

#[test]
fn actions_narrow_the_tools_and_add_a_custom_message() {
    let (mock, mut t) = start("", None);
    t.event("extension_ui_request");
    t.send(&json!({"id": "n", "type": "prompt", "message": "/narrow"}));
    let records = until(&mut t, "response");
    let custom: Vec<&Value> = records
        .iter()
        .filter(|r| r["type"] == "message_end" && r["message"]["role"] == "custom")
        .collect();
    assert_eq!(
        custom.len(),
        1,
        "an idle message without a trigger is added at once"
    );
    assert_eq!(custom[0]["message"]["content"], "tools narrowed");
    mock.push(Reply::text("ok"));
    t.send(&json!({"id": "p", "type": "prompt", "message": "go"}));
    until(&mut t, "agent_settled");
    let body = &mock.requests()[0].body;
    let tools: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["read", "shout"], "unknown names are ignored");
    assert!(
        body.to_string().contains("tools narrowed"),
        "the custom message is context"
    );
}

#[test]
fn session_replacement_asks_the_extensions_and_restarts_them() {
    let (_mock, mut t) = start("keep", None);
    t.event("extension_ui_request");
    let kept = t.request(json!({"id": "n", "type": "new_session"}));
    assert_eq!(kept["data"], json!({"cancelled": true}));
    let fork = t.request(json!({"id": "f", "type": "fork", "entryId": "x"}));
    assert_eq!(
        fork["data"],
        json!({"cancelled": true}),
        "no text when cancelled"
    );

    let (_mock, mut t) = start("", None);
    t.event("extension_ui_request");
    let before = t.request(json!({"id": "s0", "type": "get_state"}))["data"]["sessionId"].clone();
    let fresh = t.request(json!({"id": "n", "type": "new_session"}));
    assert_eq!(fresh["data"], json!({"cancelled": false}));
    let start = t.event("extension_ui_request");
    assert_eq!(start["message"], "guard ready (new) on mock-1");
    let mirror = mirror_of(&mut t, "s");
    assert_eq!(mirror["shutdowns"], json!(["new"]));
    let entries = t.request(json!({"id": "e", "type": "get_entries"}));
    let ids: Vec<Value> = entries["data"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].clone())
        .collect();
    assert_eq!(
        mirror["entryIds"],
        Value::Array(ids),
        "the mirror starts over"
    );
    let after = t.request(json!({"id": "s1", "type": "get_state"}))["data"]["sessionId"].clone();
    assert_ne!(before, after);

    // The same from a command (`ctx.newSession()`): the extension hears the replacement and
    // gets pi's answer.
    t.send(&json!({"id": "f", "type": "prompt", "message": "/fresh"}));
    let mut records = until(&mut t, "response");
    while records.last().unwrap()["id"] != "f" {
        records = until(&mut t, "response");
    }
    let messages: Vec<&str> = records
        .iter()
        .filter(|r| r["method"] == "notify")
        .map(|r| r["message"].as_str().unwrap())
        .collect();
    assert_eq!(
        messages,
        [
            "guard ready (new) on mock-1",
            "fresh: {\"cancelled\": false}"
        ],
        "{records:?}"
    );
    let third = t.request(json!({"id": "s2", "type": "get_state"}))["data"]["sessionId"].clone();
    assert_ne!(after, third);
}

#[test]
fn context_and_tool_result_handlers_change_what_the_model_and_client_see() {
    let (mock, mut t) = start("ctx", None);
    t.event("extension_ui_request");
    mock.push(Reply::new().tool_call("c1", "shout", json!({"text": "a"})));
    mock.push(Reply::text("done"));
    t.send(&json!({"id": "p", "type": "prompt", "message": "go"}));
    let records = until(&mut t, "agent_settled");
    let end = records
        .iter()
        .find(|r| r["type"] == "tool_execution_end")
        .unwrap();
    assert_eq!(
        end["result"]["details"],
        json!({"patched": true, "was": {"length": 2}})
    );
    for request in mock.requests() {
        assert!(
            request.body.to_string().contains("injected by context"),
            "every model call gets the handler's context"
        );
    }
    let messages = t.request(json!({"id": "m", "type": "get_messages"}));
    assert!(
        !messages["data"].to_string().contains("injected by context"),
        "the session's own messages are untouched"
    );
    let mirror = mirror_of(&mut t, "s");
    assert_eq!(mirror["contextUsage"]["contextWindow"], 100000);
    assert!(mirror["contextUsage"]["tokens"].as_u64().unwrap() > 0);
}

#[test]
fn compaction_asks_the_extensions_and_an_extension_can_start_one() {
    let settings = json!({"compaction": {"keepRecentTokens": 1}});
    let (mock, mut t) = start("keep", Some(settings.clone()));
    t.event("extension_ui_request");
    two_exchanges(&mock, &mut t);
    let refused = t.request(json!({"id": "c", "type": "compact"}));
    assert_eq!(refused["success"], false);
    assert_eq!(refused["error"], "Compaction cancelled");
    let end = t
        .history()
        .iter()
        .rev()
        .find_map(|r| r.json.clone().filter(|j| j["type"] == "compaction_end"))
        .unwrap();
    assert_eq!(end["aborted"], true);

    let (mock, mut t) = start("", Some(settings));
    t.event("extension_ui_request");
    two_exchanges(&mock, &mut t);
    mock.push(Reply::text("SUMMARY"));
    t.send(&json!({"id": "q", "type": "prompt", "message": "/squeeze"}));
    let records = until(&mut t, "response");
    let notify = records
        .iter()
        .find(|r| r["method"] == "notify")
        .expect("the command reports the compaction");
    assert!(
        notify["message"]
            .as_str()
            .unwrap()
            .starts_with("compacted: SUMMARY"),
        "{notify}"
    );
    assert!(
        notify["message"]
            .as_str()
            .unwrap()
            .ends_with("after:manual")
    );
    assert!(
        records
            .iter()
            .any(|r| r["type"] == "compaction_end" && r["aborted"] == false)
    );
    assert!(
        mock.requests()
            .last()
            .unwrap()
            .body
            .to_string()
            .contains("keep it short"),
        "the extension's instructions reached the summary request"
    );
}

#[test]
fn message_end_handlers_replace_what_everyone_sees() {
    let (mock, mut t) = start("", None);
    t.event("extension_ui_request");
    mock.push(Reply::text("the secret is REDACT-ME"));
    t.send(&json!({"id": "p", "type": "prompt", "message": "wrong role"}));
    let records = until(&mut t, "agent_settled");
    let error = records
        .iter()
        .position(|r| r["type"] == "extension_error")
        .expect("the wrong role is reported");
    assert_eq!(
        records[error]["error"],
        "message_end handlers must return a message with the same role"
    );
    let user_end = records
        .iter()
        .position(|r| r["type"] == "message_end" && r["message"]["role"] == "user")
        .unwrap();
    assert!(error < user_end, "reported before the event it was for");
    let end = records
        .iter()
        .find(|r| r["type"] == "message_end" && r["message"]["role"] == "assistant")
        .unwrap();
    assert_eq!(
        end["message"]["content"],
        json!([{"type": "text", "text": "[redacted]"}])
    );
    let last = t.request(json!({"id": "l", "type": "get_last_assistant_text"}));
    assert_eq!(
        last["data"]["text"], "[redacted]",
        "the session keeps the replacement"
    );
}

#[test]
fn provider_request_and_response_handlers_see_the_http_exchange() {
    let (mock, mut t) = start("", None);
    t.event("extension_ui_request");
    mock.push(Reply::text("ok"));
    t.send(&json!({"id": "p", "type": "prompt", "message": "hi"}));
    until(&mut t, "agent_settled");
    assert_eq!(
        mock.requests()[0].body["metadata"],
        json!({"guard": "on"}),
        "the handler's payload is what was sent"
    );
    let mirror = mirror_of(&mut t, "s");
    assert_eq!(mirror["responses"][0][0], 200);
    assert!(
        mirror["responses"][0][1]
            .as_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
}

#[test]
fn a_sequential_tool_makes_its_batch_run_one_call_at_a_time() {
    let (mock, mut t) = start("", None);
    t.event("extension_ui_request");
    mock.push(
        Reply::new()
            .tool_call("c1", "shout", json!({"text": "a"}))
            .tool_call("c2", "tally", json!({})),
    );
    mock.push(Reply::text("done"));
    t.send(&json!({"id": "p", "type": "prompt", "message": "go"}));
    let records = until(&mut t, "agent_settled");
    let at = |kind: &str, id: &str| {
        records
            .iter()
            .position(|r| {
                r["type"] == kind && (r["toolCallId"] == id || r["message"]["toolCallId"] == id)
            })
            .unwrap_or_else(|| panic!("no {kind} for {id}"))
    };
    assert!(at("tool_execution_end", "c1") < at("tool_execution_start", "c2"));
    assert!(
        at("message_end", "c1") < at("tool_execution_start", "c2"),
        "each call runs to its result message before the next starts"
    );
}

#[test]
fn prepare_arguments_upgrades_old_calls_before_validation() {
    let (mock, mut t) = start("", None);
    t.event("extension_ui_request");
    mock.push(
        Reply::new()
            .tool_call("c1", "shout", json!({"words": "legacy"}))
            .tool_call("c2", "shout", json!({"text": "unfixable"})),
    );
    mock.push(Reply::text("done"));
    t.send(&json!({"id": "p", "type": "prompt", "message": "go"}));
    let records = until(&mut t, "agent_settled");
    let end = |id: &str| tool_end(&records, id);
    assert_eq!(end("c1")["isError"], false);
    assert_eq!(end("c1")["result"]["content"][0]["text"], "LEGACY!");
    assert_eq!(end("c2")["isError"], true);
    assert_eq!(
        end("c2")["result"]["content"][0]["text"],
        "cannot upgrade these arguments"
    );
}

#[test]
fn an_extension_can_write_the_compaction_itself() {
    let (mock, mut t) = start("own", Some(json!({"compaction": {"keepRecentTokens": 1}})));
    t.event("extension_ui_request");
    two_exchanges(&mock, &mut t);
    let compacted = t.request(json!({"id": "c", "type": "compact"}));
    assert_eq!(compacted["success"], true, "{compacted}");
    assert_eq!(compacted["data"]["summary"], "GUARD SUMMARY");
    assert_eq!(compacted["data"]["details"], json!({"by": "guard"}));
    assert_eq!(
        mock.requests().len(),
        2,
        "no summary was asked of the model"
    );
    let entries = t.request(json!({"id": "e", "type": "get_entries"}));
    let entry = entries["data"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["type"] == "compaction")
        .cloned()
        .unwrap();
    assert_eq!(entry["fromHook"], true);
    assert_eq!(entry["summary"], "GUARD SUMMARY");
}

#[test]
fn automatic_compaction_asks_the_extensions_too() {
    // mock-1's window is 100,000 tokens: with 99,000 reserved, a reply that used 5,000 passes
    // the threshold.
    let settings = json!({"compaction": {"reserveTokens": 99000, "keepRecentTokens": 1}});
    let (mock, mut t) = start("keep", Some(settings.clone()));
    t.event("extension_ui_request");
    mock.push(Reply::text("reply one"));
    t.send(&json!({"id": "a", "type": "prompt", "message": "first"}));
    until(&mut t, "agent_settled");
    mock.push(Reply::text("reply two").usage(5000, 10, 0, 0));
    t.send(&json!({"id": "b", "type": "prompt", "message": "second"}));
    let records = until(&mut t, "agent_settled");
    let end = records
        .iter()
        .find(|r| r["type"] == "compaction_end")
        .expect("the threshold compaction was tried");
    assert_eq!(end["reason"], "threshold");
    assert_eq!(end["aborted"], true, "the extension cancelled it");
    assert_eq!(mock.requests().len(), 2, "no summary was asked for");

    let (mock, mut t) = start("own", Some(settings));
    t.event("extension_ui_request");
    mock.push(Reply::text("reply one"));
    t.send(&json!({"id": "a", "type": "prompt", "message": "first"}));
    until(&mut t, "agent_settled");
    mock.push(Reply::text("reply two").usage(5000, 10, 0, 0));
    t.send(&json!({"id": "b", "type": "prompt", "message": "second"}));
    let records = until(&mut t, "agent_settled");
    let end = records
        .iter()
        .find(|r| r["type"] == "compaction_end")
        .unwrap();
    assert_eq!(end["aborted"], false);
    assert_eq!(end["result"]["summary"], "GUARD SUMMARY");
}

#[test]
fn skills_an_extension_discovers_are_offered() {
    let mock = MockServer::start_background().unwrap();
    let mut t = ready_tau(
        tau()
            .agent_file("models.json", models(&mock))
            .cwd_file(
                "guard-skills/guarded/SKILL.md",
                "---\nname: guarded\ndescription: Found by the guard\n---\nGuard body\n",
            )
            .arg("--no-session")
            .arg("-e")
            .arg(guard_path()),
    );
    t.event("extension_ui_request");
    let commands = t.request(json!({"id": "c", "type": "get_commands"}));
    let skill = commands["data"]["commands"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "skill:guarded")
        .cloned()
        .expect("the discovered skill is listed");
    assert_eq!(skill["description"], "Found by the guard");
    mock.push(Reply::text("ok"));
    t.send(&json!({"id": "p", "type": "prompt", "message": "hi"}));
    until(&mut t, "agent_settled");
    assert!(
        mock.requests()[0]
            .body
            .to_string()
            .contains("Found by the guard"),
        "the model is told about it"
    );
}

/// Without `models.json` the catalog an extension gets is the built-in one, whose JSON text
/// tau makes once while the extension processes start (decision T110): the mirror's
/// `get_state` action hands it back whole, as values.
#[test]
fn the_built_in_catalog_reaches_extensions_whole() {
    let mut t = ready_tau(
        tau()
            .env("ANTHROPIC_API_KEY", "test-key")
            .arg("--no-session")
            .arg("-e")
            .arg(guard_path()),
    );
    t.event("extension_ui_request");
    t.send(&json!({"id": "w", "type": "prompt", "message": "/whoami"}));
    let notify = t.event("extension_ui_request");
    let text = notify["message"].as_str().unwrap_or_default().to_string();
    t.response("w");
    let count: usize = text
        .rsplit(", ")
        .next()
        .and_then(|tail| tail.strip_suffix(" models"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("a model count: {text}"));
    assert!(text.starts_with("claude-"), "an Anthropic default: {text}");
    // The built-in catalog has hundreds of models across its providers (826 in pi 0.79's).
    assert!(count > 500, "{text}");
}

#[test]
fn get_state_and_shutdown_actions() {
    let (_mock, mut t) = start("", None);
    t.event("extension_ui_request");
    t.send(&json!({"id": "w", "type": "prompt", "message": "/whoami"}));
    let notify = t.event("extension_ui_request");
    let text = notify["message"].as_str().unwrap();
    assert!(text.starts_with("mock-1, "), "{text}");
    assert!(
        !text.ends_with(", 0 models"),
        "the catalog is there: {text}"
    );
    t.response("w");
    // ctx.shutdown(): the prompt is answered, then tau ends as at the end of its input.
    t.send(&json!({"id": "q", "type": "prompt", "message": "/quit"}));
    assert_eq!(t.response("q")["success"], true);
    let status = t.wait_exit(Duration::from_secs(10));
    assert_eq!(status.code(), Some(0));
}

#[test]
fn a_refused_message_from_an_extension_is_reported_as_pis_runtime_error() {
    let (mock, mut t) = start("nudge", None);
    t.event("extension_ui_request");
    mock.push(Reply::text("ok"));
    t.send(&json!({"id": "p", "type": "prompt", "message": "hi"}));
    let records = until(&mut t, "agent_settled");
    let error = records
        .iter()
        .find(|r| r["type"] == "extension_error" && r["event"] == "send_user_message")
        .expect("the refusal is reported");
    assert_eq!(error["extensionPath"], "<runtime>");
    assert_eq!(
        error["error"],
        "Agent is already processing. Specify streamingBehavior ('steer' or 'followUp') to queue the message."
    );
}

#[test]
fn an_extension_labels_an_entry() {
    let (mock, mut t) = start("", None);
    t.event("extension_ui_request");
    mock.push(Reply::text("ok"));
    t.send(&json!({"id": "p", "type": "prompt", "message": "hi"}));
    until(&mut t, "agent_settled");
    let leaf = t.request(json!({"id": "e", "type": "get_entries"}))["data"]["leafId"].clone();
    t.send(&json!({"id": "l", "type": "prompt", "message": "/label checked"}));
    assert_eq!(t.response("l")["success"], true);
    let entries = t.request(json!({"id": "e2", "type": "get_entries"}));
    let label = entries["data"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["type"] == "label")
        .cloned()
        .expect("a label entry");
    assert_eq!(label["targetId"], leaf);
    assert_eq!(label["label"], "checked");
}

#[test]
fn a_dialog_open_at_the_end_of_input_is_cancelled_and_tau_exits() {
    let (_mock, mut t) = start("", None);
    t.event("extension_ui_request");
    t.send(&json!({"id": "g", "type": "prompt", "message": "/greet world"}));
    let dialog = t.event("extension_ui_request");
    assert_eq!(dialog["method"], "confirm");
    let started = std::time::Instant::now();
    t.close_stdin();
    let status = t.wait_exit(Duration::from_secs(20));
    assert!(status.success(), "{}", t.stderr());
    // The dialog's deadline is 30 s: it was cancelled, not waited out.
    assert!(started.elapsed() < Duration::from_secs(10));
    t.drain(Duration::from_secs(2));
    let records: Vec<Value> = t.history().iter().filter_map(|r| r.json.clone()).collect();
    assert!(
        records
            .iter()
            .any(|r| r["method"] == "notify" && r["message"] == "greeting declined"),
        "{records:?}"
    );
}

/// Lists what `pi.getCommands()` returns, on stderr.
const COMMAND_LISTER: &str = r#"
export default function (pi) {
    pi.registerCommand("list", {
        description: "Lists the commands",
        handler: async () => {
            const listed = pi.getCommands().map((c) => `${c.source}:${c.name}:${c.sourceInfo?.scope}`);
            console.error(`commands ${listed.join(" ")}`);
        },
    });
}
"#;

#[test]
fn get_commands_lists_extension_commands_templates_and_skills_as_pi_does() {
    let mut t = ready_tau(
        tau()
            .agent_file("extensions/lister.js", COMMAND_LISTER)
            .agent_file(
                "prompts/review.md",
                "---\ndescription: Review\n---\nReview it",
            )
            .agent_file(
                "skills/tidy/SKILL.md",
                "---\nname: tidy\ndescription: Tidies\n---\nTidy",
            )
            .arg("--no-session"),
    );
    let r = t.request(json!({"id": "l", "type": "prompt", "message": "/list"}));
    assert_eq!(r["success"], true, "{r}");
    // The same list the client gets.
    let listed = t.request(json!({"type": "get_commands"}));
    let names: Vec<&str> = listed["data"]["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["list", "review", "skill:tidy"]);
    t.close_stdin();
    t.wait_exit(Duration::from_secs(10));
    let stderr = t.stderr();
    assert!(
        stderr.contains("commands extension:list:user prompt:review:user skill:skill:tidy:user"),
        "{stderr}"
    );
}
