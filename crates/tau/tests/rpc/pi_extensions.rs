//! pi's own example extensions, unmodified (`extensions/node-host/test/fixtures/pi-examples`),
//! loaded through the Node host and driven over RPC as a pi host would drive them. Needs the
//! host's packages (`npm ci` in `extensions/node-host`, which `scripts/test.sh` runs).

use std::time::Duration;

use serde_json::{Value, json};
use tau_mock_llm::{BackgroundMock, MockServer, Reply};
use tau_test_kit::{Tau, TauBuilder};

use crate::{ready_tau, strip_ansi, tau};

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

fn host_installed() {
    let host_modules = format!(
        "{}/../../extensions/node-host/node_modules",
        env!("CARGO_MANIFEST_DIR")
    );
    assert!(
        std::path::Path::new(&host_modules).is_dir(),
        "the Node host's packages are not installed: run `npm ci` in extensions/node-host (scripts/test.sh does)"
    );
}

/// Two models on the mock, `mock-1` first (the default).
fn models(mock: &BackgroundMock) -> String {
    let model =
        |id: &str| json!({"id": id, "reasoning": true, "contextWindow": 100000, "maxTokens": 4096});
    json!({"providers": {"mock": {
        "baseUrl": format!("{}/v1", mock.url()), "api": "openai-completions", "apiKey": "mock-key",
        "models": [model("mock-1"), model("mock-2")],
    }}})
    .to_string()
}

/// tau with the examples loaded, a session kept on disk (tests add `--no-session`).
fn builder(mock: &BackgroundMock, examples: &[&str]) -> TauBuilder {
    host_installed();
    let mut builder = tau().agent_file("models.json", models(mock));
    for name in examples {
        builder = builder.arg("-e").arg(example(name));
    }
    builder
}

fn start(examples: &[&str], extra: &[&str]) -> (BackgroundMock, Tau) {
    let mock = MockServer::start_background().unwrap();
    let mut builder = builder(&mock, examples).arg("--no-session");
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
            .unwrap_or_else(|| panic!("no {kind}; got {out:?}\nstderr:\n{}", t.stderr()));
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

/// Records up to and including `agent_settled`.
fn settle(t: &mut Tau) -> Vec<Value> {
    until(t, "agent_settled")
}

/// The system prompt of a recorded openai-completions request.
fn system_of(body: &Value) -> String {
    body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The tool names a recorded request offered.
fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// The `tool_execution_end` record of one call.
fn tool_end<'a>(records: &'a [Value], id: &str) -> &'a Value {
    records
        .iter()
        .find(|r| r["type"] == "tool_execution_end" && r["toolCallId"] == id)
        .unwrap_or_else(|| panic!("no tool_execution_end for {id}: {records:?}"))
}

/// The `notify` messages among `records`, with their types.
fn notices(records: &[Value]) -> Vec<(String, Value)> {
    records
        .iter()
        .filter(|r| r["type"] == "extension_ui_request" && r["method"] == "notify")
        .map(|r| {
            (
                r["message"].as_str().unwrap().to_string(),
                r["notifyType"].clone(),
            )
        })
        .collect()
}

/// Sends a prompt that is answered without a run of its own (an extension command, input
/// an extension handled) and returns the records up to its successful response.
fn command(t: &mut Tau, id: &str, text: &str) -> Vec<Value> {
    t.send(&json!({"id": id, "type": "prompt", "message": text}));
    let records = until(t, "response");
    let response = records.last().unwrap();
    assert_eq!(response["id"], id, "{records:?}");
    assert_eq!(response["success"], true, "{response}");
    records
}

// ---------------------------------------------------------------------------------------------
// structured-output.ts

#[test]
fn structured_output_ends_the_run_after_its_terminating_tool() {
    let (mock, mut t) = start(&["structured-output.ts"], &[]);
    let args = json!({"headline": "Release plan", "summary": "Ship on Friday.",
                      "actionItems": ["freeze", "tag"]});
    // Only one reply is scripted: a second model call would fail the run.
    mock.push(Reply::new().tool_call("s1", "structured_output", args.clone()));
    t.send(&json!({"id": "p", "type": "prompt", "message": "summarise as structured output"}));
    let records = settle(&mut t);
    let end = tool_end(&records, "s1");
    assert_eq!(end["isError"], false);
    assert_eq!(
        end["result"],
        json!({"content": [{"type": "text", "text": "Saved structured output: Release plan"}],
               "details": args, "terminate": true}),
        "the result as execute returned it, as pi's tool_execution_end carries it"
    );
    assert_eq!(
        mock.requests().len(),
        1,
        "no follow-up call after the terminating batch"
    );
    let agent_end = records.iter().find(|r| r["type"] == "agent_end").unwrap();
    let messages = agent_end["messages"].as_array().unwrap();
    assert_eq!(
        messages.last().unwrap()["role"],
        "toolResult",
        "the run ended on the tool result"
    );
    assert_eq!(
        records.iter().filter(|r| r["type"] == "turn_end").count(),
        1,
        "one turn"
    );

    let body = &mock.requests()[0].body;
    assert!(tool_names(body).contains(&"structured_output".to_string()));
    let system = system_of(body);
    assert!(
        system.contains(
            "- structured_output: Emit a final structured answer as a terminating tool result"
        ),
        "{system}"
    );
    assert!(system.contains(
        "- After calling structured_output, do not emit another assistant response in the same turn."
    ));
    let state = t.request(json!({"type": "get_state"}));
    assert_eq!(state["data"]["isStreaming"], false);

    // A batch ends the run only when every result in it terminates.
    mock.push(
        Reply::new()
            .tool_call("s2", "structured_output", args.clone())
            .tool_call("l1", "bash", json!({"command": "echo listed"})),
    );
    mock.push(Reply::text("and a closing remark"));
    t.send(&json!({"id": "p2", "type": "prompt", "message": "again, and list"}));
    let records = settle(&mut t);
    assert_eq!(tool_end(&records, "s2")["result"]["terminate"], true);
    assert_eq!(
        mock.requests().len(),
        3,
        "the bash result did not terminate"
    );
    assert_eq!(
        records.iter().filter(|r| r["type"] == "turn_end").count(),
        2
    );
}

// ---------------------------------------------------------------------------------------------
// dynamic-tools.ts

#[test]
fn dynamic_tools_registered_at_runtime_are_offered_with_their_snippets() {
    let (mock, mut t) = start(&["dynamic-tools.ts"], &[]);
    let registered = ui(&mut t);
    assert_eq!(registered["method"], "notify");
    assert_eq!(
        registered["message"],
        "Registered dynamic tool: echo_session"
    );

    mock.push(Reply::new().tool_call("e1", "echo_session", json!({"message": "hi"})));
    mock.push(Reply::text("echoed"));
    t.send(&json!({"id": "p", "type": "prompt", "message": "echo hi"}));
    let records = settle(&mut t);
    let end = tool_end(&records, "e1");
    assert_eq!(
        end["result"],
        json!({"content": [{"type": "text", "text": "[session] hi"}],
               "details": {"tool": "echo_session", "prefix": "[session] "}})
    );
    let body = &mock.requests()[0].body;
    assert_eq!(
        tool_names(body),
        [
            "read",
            "bash",
            "edit",
            "write",
            "todo_write",
            "echo_session"
        ],
        "the tool registered in session_start is active"
    );
    let echo = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "echo_session")
        .unwrap();
    assert_eq!(
        echo["function"]["description"],
        "Echo a message with prefix: [session] "
    );
    assert_eq!(
        echo["function"]["parameters"]["required"],
        json!(["message"])
    );
    let system = system_of(body);
    assert!(
        system.contains("- echo_session: Echo back user-provided text with [session] prefix"),
        "{system}"
    );
    assert!(system.contains("- Use echo_session when the user asks for exact echo output."));

    // A command registers another one; it joins the next run.
    let records = command(&mut t, "a", "/add-echo-tool Loud_1");
    assert_eq!(
        notices(&records),
        [("Registered dynamic tool: loud_1".to_string(), json!("info"))]
    );
    let records = command(&mut t, "b", "/add-echo-tool loud_1");
    assert_eq!(
        notices(&records),
        [(
            "Tool already registered: loud_1".to_string(),
            json!("warning")
        )]
    );
    let records = command(&mut t, "c", "/add-echo-tool not a name");
    assert_eq!(
        notices(&records),
        [(
            "Usage: /add-echo-tool <tool_name> (lowercase, numbers, underscores)".to_string(),
            json!("warning")
        )]
    );
    mock.push(Reply::new().tool_call("e2", "loud_1", json!({"message": "hey"})));
    mock.push(Reply::text("done"));
    t.send(&json!({"id": "q", "type": "prompt", "message": "echo loudly"}));
    let records = settle(&mut t);
    assert_eq!(
        tool_end(&records, "e2")["result"]["content"][0]["text"],
        "[loud_1] hey"
    );
    let body = &mock.requests()[2].body;
    assert_eq!(
        tool_names(body),
        [
            "read",
            "bash",
            "edit",
            "write",
            "todo_write",
            "echo_session",
            "loud_1"
        ]
    );
    let system = system_of(body);
    assert!(system.contains("- loud_1: Echo back user-provided text with [loud_1] prefix"));
    assert_eq!(
        system
            .matches("- Use echo_session when the user asks for exact echo output.")
            .count(),
        1,
        "the shared guideline appears once"
    );
}

// ---------------------------------------------------------------------------------------------
// input-transform.ts

#[test]
fn input_transform_rewrites_quick_questions_and_answers_ping_itself() {
    let (mock, mut t) = start(&["input-transform.ts"], &[]);
    mock.push(Reply::text("A typed superset of JavaScript."));
    t.send(&json!({"id": "q", "type": "prompt", "message": "?quick What is TypeScript?"}));
    let records = settle(&mut t);
    let user = records
        .iter()
        .find(|r| r["type"] == "message_start" && r["message"]["role"] == "user")
        .unwrap();
    assert_eq!(
        user["message"]["content"],
        json!([{"type": "text", "text": "Respond briefly in 1-2 sentences: What is TypeScript?"}])
    );
    let sent = mock.requests()[0].body["messages"].to_string();
    assert!(sent.contains("Respond briefly in 1-2 sentences: What is TypeScript?"));
    assert!(!sent.contains("?quick"), "{sent}");

    // Handled without the model: the prompt succeeds and only the notification shows.
    let records = command(&mut t, "p", "ping");
    assert_eq!(notices(&records), [("pong".to_string(), json!("info"))]);
    assert!(
        !records.iter().any(|r| r["type"] == "agent_start"),
        "{records:?}"
    );
    let records = command(&mut t, "P", "PING");
    assert_eq!(notices(&records), [("pong".to_string(), json!("info"))]);
    let records = command(&mut t, "t", "time");
    let shown = notices(&records);
    assert_eq!(shown.len(), 1);
    let year = {
        let days = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
            / 86_400;
        1970 + days * 400 / 146_097
    };
    let message = &shown[0].0;
    let numbers: Vec<u64> = message
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse().ok())
        .collect();
    assert!(
        numbers.iter().any(|n| n.abs_diff(year) <= 1) && message.contains(':'),
        "the local date and time: {message:?}"
    );
    let records = command(&mut t, "u", "?quick   ");
    assert_eq!(
        notices(&records),
        [("Usage: ?quick <question>".to_string(), json!("warning"))]
    );
    assert_eq!(
        mock.requests().len(),
        1,
        "only the transformed prompt reached the model"
    );
    let messages = t.request(json!({"type": "get_messages"}));
    assert_eq!(
        messages["data"]["messages"].as_array().unwrap().len(),
        2,
        "handled input leaves no message behind"
    );
}

// ---------------------------------------------------------------------------------------------
// todo.ts

/// The text of each tool result of `records`, by call id.
fn result_text(records: &[Value], id: &str) -> String {
    tool_end(records, id)["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The model adds two todos, completes one, fails to toggle a missing one and lists them.
fn todo_session(mock: &BackgroundMock, t: &mut Tau) -> Vec<Value> {
    let todo = todo_call;
    mock.push(todo("t1", json!({"action": "add", "text": "buy milk"})));
    mock.push(todo("t2", json!({"action": "add", "text": "write tests"})));
    mock.push(todo("t3", json!({"action": "toggle", "id": 1})));
    mock.push(todo("t4", json!({"action": "toggle", "id": 9})));
    mock.push(todo("t5", json!({"action": "list"})));
    mock.push(Reply::text("listed"));
    t.send(&json!({"id": "p", "type": "prompt", "message": "plan my day"}));
    settle(t)
}

fn todo_call(id: &str, params: Value) -> Reply {
    Reply::new().tool_call(id, "todo", params)
}

#[test]
fn todo_tool_keeps_its_list_in_details_and_follows_the_branch() {
    let mock = MockServer::start_background().unwrap();
    let mut t = ready_tau(builder(&mock, &["todo.ts"]));
    let records = todo_session(&mock, &mut t);
    assert_eq!(result_text(&records, "t1"), "Added todo #1: buy milk");
    assert_eq!(result_text(&records, "t2"), "Added todo #2: write tests");
    assert_eq!(result_text(&records, "t3"), "Todo #1 completed");
    assert_eq!(result_text(&records, "t4"), "Todo #9 not found");
    assert_eq!(
        tool_end(&records, "t4")["isError"],
        false,
        "a returned error is not a throw"
    );
    assert_eq!(
        tool_end(&records, "t4")["result"]["details"]["error"],
        "#9 not found"
    );
    assert_eq!(
        result_text(&records, "t5"),
        "[x] #1: buy milk\n[ ] #2: write tests"
    );
    let listed = json!({"action": "list", "nextId": 3, "todos": [
        {"id": 1, "text": "buy milk", "done": true},
        {"id": 2, "text": "write tests", "done": false}]});
    assert_eq!(tool_end(&records, "t5")["result"]["details"], listed);
    // The StringEnum schema reaches the model as a plain JSON Schema enum.
    let body = &mock.requests()[0].body;
    let tool = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "todo")
        .unwrap();
    assert_eq!(
        tool["function"]["parameters"]["properties"]["action"],
        json!({"type": "string", "enum": ["list", "add", "toggle", "clear"]})
    );
    // The details are in the session: the stored tool result carries them.
    let messages = t.request(json!({"type": "get_messages"}));
    let stored = messages["data"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rfind(|m| m["role"] == "toolResult")
        .unwrap()
        .clone();
    assert_eq!(stored["toolName"], "todo");
    assert_eq!(stored["details"], listed);

    // The /todos viewer needs the TUI.
    let records = command(&mut t, "v", "/todos");
    assert_eq!(
        notices(&records),
        [(
            "/todos requires interactive mode".to_string(),
            json!("error")
        )]
    );

    // A second prompt clears the list; forking before it brings the branch's list back
    // (session_start of the forked session rebuilds it from getBranch()).
    mock.push(todo_call("c1", json!({"action": "clear"})));
    mock.push(Reply::text("cleared"));
    t.send(&json!({"id": "p2", "type": "prompt", "message": "start over"}));
    let records = settle(&mut t);
    assert_eq!(result_text(&records, "c1"), "Cleared 2 todos");
    let forks = t.request(json!({"type": "get_fork_messages"}));
    let second = forks["data"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["text"] == "start over")
        .unwrap()["entryId"]
        .clone();
    let forked = t.request(json!({"type": "fork", "entryId": second}));
    assert_eq!(forked["data"]["cancelled"], false, "{forked}");
    mock.push(todo_call("f1", json!({"action": "list"})));
    mock.push(todo_call("f2", json!({"action": "add", "text": "ship it"})));
    mock.push(Reply::text("ok"));
    t.send(&json!({"id": "p3", "type": "prompt", "message": "what is left?"}));
    let records = settle(&mut t);
    assert_eq!(
        result_text(&records, "f1"),
        "[x] #1: buy milk\n[ ] #2: write tests"
    );
    assert_eq!(
        result_text(&records, "f2"),
        "Added todo #3: ship it",
        "nextId restored"
    );
}

#[test]
fn todo_list_is_restored_from_the_session_after_a_restart() {
    let mock = MockServer::start_background().unwrap();
    let mut t = ready_tau(builder(&mock, &["todo.ts"]));
    todo_session(&mock, &mut t);
    let dirs = t.dirs();
    t.close_stdin();
    assert!(
        t.wait_exit(Duration::from_secs(15)).success(),
        "{}",
        t.stderr()
    );
    drop(t);

    // A new process on the same session rebuilds the list from the branch on session_start.
    let mut again = ready_tau(builder(&mock, &["todo.ts"]).dirs(dirs).arg("--continue"));
    mock.push(todo_call("r1", json!({"action": "list"})));
    mock.push(todo_call("r2", json!({"action": "add", "text": "ship it"})));
    mock.push(Reply::text("ok"));
    again.send(&json!({"id": "p", "type": "prompt", "message": "what is left?"}));
    let records = settle(&mut again);
    assert_eq!(
        result_text(&records, "r1"),
        "[x] #1: buy milk\n[ ] #2: write tests"
    );
    assert_eq!(
        result_text(&records, "r2"),
        "Added todo #3: ship it",
        "nextId restored"
    );
}

// ---------------------------------------------------------------------------------------------
// preset.ts

/// Global presets in the agent directory; the project's `.pi/presets.json` overrides `build`.
fn preset_builder(mock: &BackgroundMock) -> TauBuilder {
    let global = json!({
        "explore": {"provider": "mock", "model": "mock-1", "thinkingLevel": "high",
                    "tools": ["read", "grep", "find", "ls", "nope"],
                    "instructions": "You are in PLANNING MODE."},
        "build": {"thinkingLevel": "low", "tools": ["read", "bash", "edit", "write"],
                  "instructions": "GLOBAL BUILD MODE"},
        "fast": {"provider": "mock", "model": "mock-2", "thinkingLevel": "low"},
    });
    let project = json!({
        "build": {"thinkingLevel": "minimal", "tools": ["read", "bash"],
                  "instructions": "PROJECT BUILD MODE"},
    });
    builder(mock, &["preset.ts"])
        .agent_file("presets.json", global.to_string())
        .cwd_file(".pi/presets.json", project.to_string())
}

/// The `setStatus` records for the preset key among `records`, ANSI escapes removed.
fn preset_statuses(records: &[Value]) -> Vec<Value> {
    records
        .iter()
        .filter(|r| r["method"] == "setStatus" && r["statusKey"] == "preset")
        .map(|r| match r["statusText"].as_str() {
            Some(text) => Value::String(strip_ansi(text)),
            None => Value::Null,
        })
        .collect()
}

/// Records from tau's start up to `n` extension notifications.
fn startup_records(t: &mut Tau, notifications: usize) -> Vec<Value> {
    let mut out = Vec::new();
    while notices(&out).len() < notifications {
        let record = t
            .next_record(Duration::from_secs(30))
            .unwrap_or_else(|| panic!("{notifications} notifications at startup; got {out:?}"));
        out.push(record.json.expect("JSON"));
    }
    out
}

#[test]
fn preset_flag_and_command_apply_thinking_tools_and_instructions() {
    let mock = MockServer::start_background().unwrap();
    let mut t = ready_tau(
        preset_builder(&mock)
            .arg("--no-session")
            .arg("--preset")
            .arg("explore"),
    );
    let mut records = startup_records(&mut t, 2);
    assert_eq!(
        notices(&records),
        [
            (
                "Preset \"explore\": Unknown tools: nope".to_string(),
                json!("warning")
            ),
            ("Preset \"explore\" activated".to_string(), json!("info")),
        ]
    );
    records.push(ui_where(&mut t, |r| r["method"] == "setStatus"));
    let status = records.last().unwrap();
    assert_eq!(status["statusKey"], "preset");
    let text = status["statusText"].as_str().unwrap();
    assert!(
        text.starts_with("\u{1b}[38;5;"),
        "theme.fg colours it: {text:?}"
    );
    assert_eq!(strip_ansi(text), "preset:explore");

    let state = t.request(json!({"type": "get_state"}));
    assert_eq!(state["data"]["thinkingLevel"], "high");
    assert_eq!(state["data"]["model"]["id"], "mock-1");
    mock.push(Reply::text("exploring"));
    t.send(&json!({"id": "p", "type": "prompt", "message": "look around"}));
    settle(&mut t);
    let body = &mock.requests()[0].body;
    assert_eq!(tool_names(body), ["read", "grep", "find", "ls"]);
    assert_eq!(body["reasoning_effort"], "high");
    let system = system_of(body);
    assert!(
        system.ends_with("\n\nYou are in PLANNING MODE."),
        "instructions are appended to the system prompt: {system}"
    );
    let entries = t.request(json!({"type": "get_entries"}));
    let persisted: Vec<&Value> = entries["data"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "custom" && e["customType"] == "preset-state")
        .map(|e| &e["data"])
        .collect();
    assert_eq!(persisted, [&json!({"name": "explore"})], "one per turn");

    // /preset <name>: the project's definition of `build` wins over the global one.
    let records = command(&mut t, "b", "/preset build");
    assert_eq!(
        notices(&records),
        [("Preset \"build\" activated".to_string(), json!("info"))]
    );
    assert_eq!(preset_statuses(&records), [json!("preset:build")]);
    assert_eq!(
        t.request(json!({"type": "get_state"}))["data"]["thinkingLevel"],
        "minimal"
    );
    mock.push(Reply::text("building"));
    t.send(&json!({"id": "p2", "type": "prompt", "message": "build it"}));
    settle(&mut t);
    let body = &mock.requests()[1].body;
    assert_eq!(tool_names(body), ["read", "bash"]);
    assert_eq!(body["reasoning_effort"], "minimal");
    let system = system_of(body);
    assert!(system.ends_with("\n\nPROJECT BUILD MODE"), "{system}");
    assert!(!system.contains("PLANNING MODE") && !system.contains("GLOBAL BUILD"));

    let records = command(&mut t, "n", "/preset nope");
    assert_eq!(
        notices(&records),
        [(
            "Unknown preset \"nope\". Available: explore, build, fast".to_string(),
            json!("error")
        )]
    );
    // Without a name pi opens a TUI picker (ui.custom), which RPC mode does not have.
    let records = command(&mut t, "s", "/preset");
    assert!(notices(&records).is_empty(), "{records:?}");
    assert_eq!(mock.requests().len(), 2);
}

#[test]
fn preset_switches_the_model_it_names() {
    let mock = MockServer::start_background().unwrap();
    let mut t = ready_tau(
        preset_builder(&mock)
            .arg("--no-session")
            .arg("--preset=fast"),
    );
    let records = startup_records(&mut t, 1);
    assert_eq!(
        notices(&records),
        [("Preset \"fast\" activated".to_string(), json!("info"))],
        "the model was found and had a key"
    );
    let state = t.request(json!({"type": "get_state"}));
    assert_eq!(state["data"]["model"]["id"], "mock-2");
    assert_eq!(state["data"]["thinkingLevel"], "low");
    mock.push(Reply::text("quick"));
    t.send(&json!({"id": "p", "type": "prompt", "message": "hurry"}));
    settle(&mut t);
    assert_eq!(mock.requests()[0].body["model"], "mock-2");

    // Back to the first model through another preset.
    let records = command(&mut t, "e", "/preset explore");
    assert_eq!(
        notices(&records),
        [
            (
                "Preset \"explore\": Unknown tools: nope".to_string(),
                json!("warning")
            ),
            ("Preset \"explore\" activated".to_string(), json!("info")),
        ]
    );
    let state = t.request(json!({"type": "get_state"}));
    assert_eq!(state["data"]["model"]["id"], "mock-1");
    assert_eq!(state["data"]["thinkingLevel"], "high");
}

#[test]
fn preset_is_restored_from_the_branch_without_reapplying_tools() {
    let mock = MockServer::start_background().unwrap();
    let mut t = ready_tau(preset_builder(&mock).arg("--no-session"));
    let cleared = ui_where(&mut t, |r| r["method"] == "setStatus");
    assert_eq!(cleared["statusKey"], "preset");
    assert!(
        cleared.get("statusText").is_none(),
        "no preset yet: {cleared}"
    );
    let records = command(&mut t, "b", "/preset build");
    assert_eq!(preset_statuses(&records), [json!("preset:build")]);
    for (id, text) in [("p1", "first"), ("p2", "second")] {
        mock.push(Reply::text("ok"));
        t.send(&json!({"id": id, "type": "prompt", "message": text}));
        settle(&mut t);
    }
    // Forking before the second prompt keeps the first turn's preset-state entry.
    let forks = t.request(json!({"type": "get_fork_messages"}));
    let second = forks["data"]["messages"][1]["entryId"].clone();
    t.send(&json!({"id": "f", "type": "fork", "entryId": second}));
    let records = until(&mut t, "response");
    assert_eq!(records.last().unwrap()["data"]["cancelled"], false);
    assert_eq!(
        preset_statuses(&records),
        [json!("preset:build")],
        "session_start of the forked session found the entry"
    );
    assert!(
        notices(&records).is_empty(),
        "restored, not activated again"
    );
    mock.push(Reply::text("ok"));
    t.send(&json!({"id": "p3", "type": "prompt", "message": "third"}));
    settle(&mut t);
    let system = system_of(&mock.requests()[2].body);
    assert!(
        system.ends_with("\n\nPROJECT BUILD MODE"),
        "the restored preset's instructions apply: {system}"
    );
}

// ---------------------------------------------------------------------------------------------
// trigger-compact.ts

/// Records (message_update left out) up to the notification that ends a compaction the
/// extension started.
fn until_compaction_notice(t: &mut Tau) -> Vec<Value> {
    let mut out = Vec::new();
    loop {
        let record = t
            .next_record(Duration::from_secs(30))
            .unwrap_or_else(|| panic!("no end of compaction; got {out:?}\n{}", t.stderr()));
        let json = record.json.expect("JSON");
        if json["type"] == "message_update" {
            continue;
        }
        let done = json["method"] == "notify"
            && json["message"].as_str().is_some_and(|m| {
                m.starts_with("Compaction completed") || m.starts_with("Compaction failed")
            });
        out.push(json);
        if done {
            return out;
        }
    }
}

fn long(word: &str) -> String {
    format!("{word} ").repeat(100)
}

#[test]
fn trigger_compact_compacts_past_the_threshold_and_on_command() {
    let mock = MockServer::start_background().unwrap();
    // A window far above the extension's 100k threshold, so tau's own compaction stays out.
    let models = json!({"providers": {"mock": {
        "baseUrl": format!("{}/v1", mock.url()), "api": "openai-completions", "apiKey": "mock-key",
        "models": [{"id": "mock-1", "contextWindow": 1_000_000, "maxTokens": 4096}],
    }}});
    let mut t = ready_tau(
        builder(&mock, &["trigger-compact.ts"])
            .agent_file("models.json", models.to_string())
            .agent_file(
                "settings.json",
                json!({"compaction": {"keepRecentTokens": 150}}).to_string(),
            ),
    );
    // Below the threshold: nothing happens.
    mock.push(Reply::text(long("first-answer")).usage(1_000, 10, 0, 0));
    t.send(&json!({"id": "p1", "type": "prompt", "message": long("first-question")}));
    let records = settle(&mut t);
    assert!(notices(&records).is_empty(), "{records:?}");

    // This turn ends at 150k tokens: turn_end starts a compaction.
    mock.push(Reply::text(long("second-answer")).usage(150_000, 10, 0, 0));
    mock.push(Reply::text("## Goal\nTHRESHOLD-SUMMARY"));
    mock.push(Reply::text("THRESHOLD-PREFIX"));
    t.send(&json!({"id": "p2", "type": "prompt", "message": long("second-question")}));
    let records = until_compaction_notice(&mut t);
    let shown = notices(&records);
    assert_eq!(
        shown,
        [
            ("Compaction started".to_string(), json!("info")),
            ("Compaction completed".to_string(), json!("info")),
        ],
        "{records:?}"
    );
    let start = records
        .iter()
        .find(|r| r["type"] == "compaction_start")
        .expect("compaction_start");
    assert_eq!(start["reason"], "manual");
    let end = records
        .iter()
        .find(|r| r["type"] == "compaction_end")
        .expect("compaction_end");
    assert_eq!(end["aborted"], false);
    assert!(
        end["result"]["summary"]
            .as_str()
            .unwrap()
            .contains("THRESHOLD-SUMMARY"),
        "{end}"
    );
    assert!(end["result"]["tokensBefore"].as_u64().unwrap() >= 150_000);
    mock.clear();
    let messages = t.request(json!({"type": "get_messages"}));
    assert_eq!(messages["data"]["messages"][0]["role"], "compactionSummary");

    // Another exchange, then the command with instructions for the summary.
    mock.push(Reply::text(long("third-answer")).usage(2_000, 10, 0, 0));
    t.send(&json!({"id": "p3", "type": "prompt", "message": long("third-question")}));
    let records = settle(&mut t);
    assert!(
        notices(&records).is_empty(),
        "no crossing from above: {records:?}"
    );
    let before = mock.requests().len();
    mock.push(Reply::text("## Goal\nCOMMAND-SUMMARY"));
    mock.push(Reply::text("COMMAND-PREFIX"));
    t.send(&json!({"id": "c", "type": "prompt", "message": "/trigger-compact keep the numbers"}));
    let records = until_compaction_notice(&mut t);
    assert_eq!(
        notices(&records),
        [
            ("Compaction started".to_string(), json!("info")),
            ("Compaction completed".to_string(), json!("info")),
        ],
        "{records:?}"
    );
    let end = records
        .iter()
        .find(|r| r["type"] == "compaction_end")
        .expect("compaction_end");
    assert!(
        end["result"]["summary"]
            .as_str()
            .unwrap()
            .contains("COMMAND-SUMMARY"),
        "{end}"
    );
    let summary_request = mock.requests()[before].body.to_string();
    assert!(
        summary_request.contains("keep the numbers"),
        "the command's arguments are the custom instructions: {summary_request}"
    );
}

// ---------------------------------------------------------------------------------------------
// git-checkpoint.ts

fn git(dir: &std::path::Path, args: &[&str]) -> String {
    let output = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git runs");
    assert!(
        output.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn git_checkpoint_stashes_each_turn_and_offers_the_checkpoint_on_fork() {
    let dirs = tau_test_kit::Dirs::new();
    let repo = dirs.cwd().to_path_buf();
    git(&repo, &["init", "-q"]);
    // The identity `git stash create` needs, for tau's git too (its HOME is empty).
    git(&repo, &["config", "user.name", "Tau Test"]);
    git(&repo, &["config", "user.email", "tau@example.com"]);
    std::fs::write(repo.join("a.txt"), "v1\n").unwrap();
    git(&repo, &["add", "a.txt"]);
    git(&repo, &["commit", "-q", "-m", "first"]);

    let mock = MockServer::start_background().unwrap();
    let mut t = ready_tau(builder(&mock, &["git-checkpoint.ts"]).dirs(dirs.clone()));
    // Turn 1 changes the file; turn 2's reply is slow enough to fork while it is pending.
    mock.push(Reply::new().tool_call("w1", "write", json!({"path": "a.txt", "content": "v2\n"})));
    mock.push(Reply::text("done").delay_ms(20_000));
    t.send(&json!({"id": "p", "type": "prompt", "message": "bump the version"}));
    // Extensions hear turn_start before the client does: the checkpoint exists now.
    let mut seen = Vec::new();
    while seen
        .iter()
        .filter(|r: &&Value| r["type"] == "turn_start")
        .count()
        < 2
    {
        let record = t
            .next_record(Duration::from_secs(30))
            .expect("turn 2 starts");
        seen.push(record.json.expect("JSON"));
    }
    assert_eq!(std::fs::read_to_string(repo.join("a.txt")).unwrap(), "v2\n");
    assert_eq!(
        git(&repo, &["stash", "list"]),
        "",
        "checkpoints are not stash entries"
    );
    // The checkpoint is keyed by the entry that was the leaf when the tool's result came:
    // the assistant message that called it.
    let entries = t.request(json!({"type": "get_entries"}));
    let call_entry = entries["data"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["message"]["role"] == "assistant" && e["message"]["content"][0]["id"] == "w1")
        .unwrap()["id"]
        .clone();

    // Someone undoes the change; forking at that entry offers to bring it back.
    git(&repo, &["checkout", "-q", "--", "a.txt"]);
    assert_eq!(std::fs::read_to_string(repo.join("a.txt")).unwrap(), "v1\n");
    t.send(&json!({"id": "f", "type": "fork", "entryId": call_entry}));
    let select = ui_where(&mut t, |r| r["method"] == "select");
    assert_eq!(select["title"], "Restore code state?");
    assert_eq!(
        select["options"],
        json!(["Yes, restore code to that point", "No, keep current code"])
    );
    t.send(&json!({"type": "extension_ui_response", "id": select["id"],
                   "value": "Yes, restore code to that point"}));
    let records = until(&mut t, "response");
    assert_eq!(
        notices(&records),
        [("Code restored to checkpoint".to_string(), json!("info"))]
    );
    assert_eq!(
        std::fs::read_to_string(repo.join("a.txt")).unwrap(),
        "v2\n",
        "the checkpoint taken at turn 2's start was applied"
    );
    // Only user messages can be forked from, which pi checks after asking the extensions.
    let response = records.last().unwrap();
    assert_eq!(response["id"], "f");
    assert_eq!(response["success"], false);
    assert_eq!(response["error"], "Invalid entry ID for forking");

    let aborted = t.request(json!({"type": "abort"}));
    assert_eq!(aborted["success"], true);
    settle(&mut t);

    // agent_end cleared the checkpoints: a fork afterwards asks nothing and leaves the files.
    git(&repo, &["checkout", "-q", "--", "a.txt"]);
    let forks = t.request(json!({"type": "get_fork_messages"}));
    let user = forks["data"]["messages"][0]["entryId"].clone();
    t.send(&json!({"id": "g", "type": "fork", "entryId": user}));
    let records = until(&mut t, "response");
    assert_eq!(
        records.last().unwrap()["data"]["cancelled"],
        false,
        "{records:?}"
    );
    assert!(
        !records.iter().any(|r| r["type"] == "extension_ui_request"),
        "{records:?}"
    );
    assert_eq!(std::fs::read_to_string(repo.join("a.txt")).unwrap(), "v1\n");
}

// ---------------------------------------------------------------------------------------------
// plan-mode/

const PLAN_REPLY: &str = "Here is what I would do.\n\nPlan:\n1. Inspect the config loader\n2. Rewrite parser error messages\n3. Document the new flags\n";

const EXECUTE: &str = "Execute the plan (track progress)";

/// The `setStatus` / `setWidget` records of plan mode among `records`, ANSI removed.
fn plan_ui(records: &[Value]) -> Vec<Value> {
    records
        .iter()
        .filter(|r| r["type"] == "extension_ui_request")
        .filter_map(|r| match r["method"].as_str() {
            Some("setStatus") if r["statusKey"] == "plan-mode" => Some(json!({
                "status": r["statusText"].as_str().map(strip_ansi)})),
            Some("setWidget") if r["widgetKey"] == "plan-todos" => Some(json!({
                "widget": r["widgetLines"].as_array().map(|lines| lines
                    .iter()
                    .map(|l| strip_ansi(l.as_str().unwrap()))
                    .collect::<Vec<_>>())})),
            _ => None,
        })
        .collect()
}

/// tau started with `--plan` in a session kept on disk; the startup status is checked.
fn start_in_plan_mode(mock: &BackgroundMock) -> Tau {
    let mut t = ready_tau(builder(mock, &["plan-mode"]).arg("--plan"));
    let status = ui_where(&mut t, |r| r["method"] == "setStatus");
    let widget = ui_where(&mut t, |r| r["method"] == "setWidget");
    assert_eq!(
        plan_ui(&[status.clone(), widget]),
        [json!({"status": "⏸ plan"}), json!({"widget": null})]
    );
    assert!(
        status["statusText"]
            .as_str()
            .unwrap()
            .starts_with("\u{1b}[38;5;"),
        "coloured by theme.fg"
    );
    t
}

/// A planning run: safe and unsafe bash, a write, then a reply with a plan. Returns the
/// dialog agent_end opens.
fn explore(mock: &BackgroundMock, t: &mut Tau) -> Value {
    mock.push(
        Reply::new()
            .tool_call("b1", "bash", json!({"command": "ls"}))
            .tool_call("b2", "bash", json!({"command": "rm -rf build"}))
            .tool_call("w1", "write", json!({"path": "x.txt", "content": "x"})),
    );
    mock.push(Reply::text(PLAN_REPLY));
    t.send(&json!({"id": "p", "type": "prompt", "message": "how would you clean this up?"}));
    ui_where(t, |r| r["method"] == "select")
}

/// Answers `select` with "Execute" and returns the records until the execution run (which
/// completes step 1) has settled.
fn execute(mock: &BackgroundMock, t: &mut Tau, select: &Value) -> Vec<Value> {
    mock.push(Reply::text("Inspected the loader. [DONE:1]"));
    t.send(&json!({"type": "extension_ui_response", "id": select["id"], "value": EXECUTE}));
    let mut records = Vec::new();
    loop {
        let record = t
            .next_record(Duration::from_secs(30))
            .unwrap_or_else(|| panic!("the execution run settles; got {records:?}"));
        let json = record.json.expect("JSON");
        let done = json["type"] == "agent_settled"
            && records.iter().any(|r: &Value| r["type"] == "agent_start");
        if json["type"] != "message_update" {
            records.push(json);
        }
        if done {
            return records;
        }
    }
}

const STAY: &str = "Stay in plan mode";

const PLANNED: &str = "Plan Progress:\n1. ○ Inspect the config loader\n2. ○ Rewrite parser error messages\n3. ○ Document the new flags";

/// The data of the last `plan-mode` entry of the session.
fn plan_entry(t: &mut Tau) -> Value {
    let entries = t.request(json!({"type": "get_entries"}));
    entries["data"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .rfind(|e| e["type"] == "custom" && e["customType"] == "plan-mode")
        .expect("a plan-mode entry")["data"]
        .clone()
}

#[test]
fn plan_mode_restricts_tools_blocks_unsafe_bash_and_asks_about_the_plan() {
    let mock = MockServer::start_background().unwrap();
    let mut t = start_in_plan_mode(&mock);
    let select = explore(&mock, &mut t);
    let records: Vec<Value> = t.history().iter().filter_map(|r| r.json.clone()).collect();
    assert_eq!(tool_end(&records, "b1")["isError"], false, "ls is allowed");
    let blocked = tool_end(&records, "b2");
    assert_eq!(blocked["isError"], true);
    assert_eq!(
        blocked["result"]["content"][0]["text"],
        "Plan mode: command blocked (not allowlisted). Use /plan to disable plan mode first.\nCommand: rm -rf build"
    );
    assert_eq!(
        tool_end(&records, "w1")["result"]["content"][0]["text"],
        "Tool write not found",
        "write is not active in plan mode"
    );
    assert!(!t.cwd().join("x.txt").exists());
    let first = &mock.requests()[0].body;
    assert_eq!(
        tool_names(first),
        ["read", "bash", "todo_write", "grep", "find", "ls"]
    );
    assert!(
        first["messages"].to_string().contains("[PLAN MODE ACTIVE]"),
        "the before_agent_start message is context"
    );
    let custom = records
        .iter()
        .find(|r| r["type"] == "message_end" && r["message"]["role"] == "custom")
        .unwrap();
    assert_eq!(custom["message"]["customType"], "plan-mode-context");
    assert_eq!(custom["message"]["display"], false);

    // agent_end found the plan, saved it, and asks what to do with it.
    assert_eq!(select["title"], "Plan mode - what next?");
    assert_eq!(select["options"], json!([EXECUTE, STAY, "Refine the plan"]));
    t.send(&json!({"type": "extension_ui_response", "id": select["id"], "value": STAY}));
    let records = settle(&mut t);
    assert!(
        !records
            .iter()
            .any(|r| r["type"] == "message_start" || r["type"] == "agent_start"),
        "staying sends nothing: {records:?}"
    );
    assert_eq!(
        plan_entry(&mut t),
        json!({"enabled": true, "executing": false,
               "toolsBeforePlanMode": ["read", "bash", "edit", "write", "todo_write"],
               "todos": [{"step": 1, "text": "Inspect the config loader", "completed": false},
                         {"step": 2, "text": "Rewrite parser error messages", "completed": false},
                         {"step": 3, "text": "Document the new flags", "completed": false}]})
    );
    let records = command(&mut t, "todos", "/todos");
    assert_eq!(notices(&records), [(PLANNED.to_string(), json!("info"))]);

    // /plan turns it off: full tools, and the stale plan context is filtered out.
    let records = command(&mut t, "off", "/plan");
    assert_eq!(
        notices(&records),
        [(
            "Plan mode disabled. Full access restored.".to_string(),
            Value::Null
        )]
    );
    assert_eq!(
        plan_ui(&records),
        [json!({"status": null}), json!({"widget": null})]
    );
    assert_eq!(
        plan_entry(&mut t)["enabled"],
        false,
        "the toggle is persisted"
    );
    mock.push(Reply::text("ok"));
    t.send(&json!({"id": "p2", "type": "prompt", "message": "go ahead"}));
    let records = settle(&mut t);
    assert!(
        !records
            .iter()
            .any(|r| r["message"]["customType"] == "plan-mode-context"),
        "no plan context outside plan mode"
    );
    let body = mock.requests().last().unwrap().body.clone();
    assert_eq!(
        tool_names(&body),
        ["read", "bash", "edit", "write", "todo_write"]
    );
    assert!(
        !body["messages"].to_string().contains("[PLAN MODE ACTIVE]"),
        "the context handler drops the earlier plan-mode message: {}",
        body["messages"]
    );
    let records = command(&mut t, "none", "/todos");
    assert_eq!(
        notices(&records),
        [(
            "No todos. Create a plan first with /plan".to_string(),
            json!("info")
        )],
        "toggling cleared the todos"
    );

    // And on again.
    let records = command(&mut t, "on", "/plan");
    assert_eq!(
        notices(&records),
        [(
            "Plan mode enabled. Built-in write tools disabled.".to_string(),
            Value::Null
        )]
    );
    assert_eq!(
        plan_ui(&records),
        [json!({"status": "⏸ plan"}), json!({"widget": null})]
    );
    mock.push(Reply::text("looking"));
    t.send(&json!({"id": "p3", "type": "prompt", "message": "look again"}));
    settle(&mut t);
    let body = mock.requests().last().unwrap().body.clone();
    assert_eq!(
        tool_names(&body),
        ["read", "bash", "todo_write", "grep", "find", "ls"]
    );
    assert!(body["messages"].to_string().contains("[PLAN MODE ACTIVE]"));
}

#[test]
fn plan_mode_executes_refines_and_completes_the_plan() {
    let mock = MockServer::start_background().unwrap();
    let mut t = start_in_plan_mode(&mock);
    let select = explore(&mock, &mut t);

    // Executing restores the tools, shows the todo widget and continues with one run that
    // delivers both follow-ups.
    let records = execute(&mock, &mut t, &select);
    assert_eq!(
        plan_ui(&records),
        [
            json!({"status": "📋 0/3"}),
            json!({"widget": ["☐ Inspect the config loader", "☐ Rewrite parser error messages",
                              "☐ Document the new flags"]}),
            json!({"status": "📋 1/3"}),
            json!({"widget": ["☑ Inspect the config loader", "☐ Rewrite parser error messages",
                              "☐ Document the new flags"]}),
        ],
        "{records:?}"
    );
    let first_end = records
        .iter()
        .position(|r| r["type"] == "agent_end")
        .unwrap();
    let after = &records[first_end..];
    let start = after
        .iter()
        .position(|r| r["type"] == "agent_start")
        .expect("a continuation run");
    let custom: Vec<&Value> = after
        .iter()
        .filter(|r| r["type"] == "message_end" && r["message"]["role"] == "custom")
        .map(|r| &r["message"])
        .collect();
    let types: Vec<&Value> = custom.iter().map(|m| &m["customType"]).collect();
    assert_eq!(types, ["plan-todo-list", "plan-mode-execute"], "{custom:?}");
    let todo_list = after
        .iter()
        .position(|r| {
            r["type"] == "message_start" && r["message"]["customType"] == "plan-todo-list"
        })
        .unwrap();
    assert!(
        start < todo_list,
        "both follow-ups are part of the run: {records:?}"
    );
    assert_eq!(
        custom[0]["content"],
        "**Plan Steps (3):**\n\n1. ☐ Inspect the config loader\n2. ☐ Rewrite parser error messages\n3. ☐ Document the new flags"
    );
    assert_eq!(
        custom[1]["content"],
        "Execute the plan.\n\nRemaining steps:\n1. Inspect the config loader\n2. Rewrite parser error messages\n3. Document the new flags\n\nStart with: Inspect the config loader\nAfter completing a step, include a [DONE:n] tag in your response."
    );
    assert_eq!(
        mock.requests().len(),
        3,
        "one model call for the execution run: {:?}",
        records
            .iter()
            .map(|r| format!(
                "{} {} {}",
                r["type"], r["message"]["role"], r["message"]["customType"]
            ))
            .collect::<Vec<_>>()
    );
    let execute_request = &mock.requests()[2].body;
    assert_eq!(
        tool_names(execute_request),
        ["read", "bash", "edit", "write", "todo_write"],
        "full access restored"
    );
    let sent = execute_request["messages"].to_string();
    assert!(sent.contains("Execute the plan.") && sent.contains("**Plan Steps (3):**"));
    assert!(
        !sent.contains("[PLAN MODE ACTIVE]"),
        "the context handler drops stale plan-mode context: {sent}"
    );
    let records = command(&mut t, "todos", "/todos");
    assert_eq!(
        notices(&records),
        [(
            "Plan Progress:\n1. ✓ Inspect the config loader\n2. ○ Rewrite parser error messages\n3. ○ Document the new flags"
                .to_string(),
            json!("info")
        )]
    );
    assert_eq!(
        plan_entry(&mut t),
        json!({"enabled": false, "executing": true,
               "todos": [{"step": 1, "text": "Inspect the config loader", "completed": true},
                         {"step": 2, "text": "Rewrite parser error messages", "completed": false},
                         {"step": 3, "text": "Document the new flags", "completed": false}]}),
        "persisted at turn_end; toolsBeforePlanMode was cleared (undefined, so absent)"
    );

    // The next run gets the remaining steps; finishing them completes the plan, and the
    // completion message (queued while the run streamed) continues it.
    mock.push(Reply::text(
        "Rewrote them and documented the flags. [DONE:2] [DONE:3]",
    ));
    mock.push(Reply::text("Great, all done."));
    t.send(&json!({"id": "c", "type": "prompt", "message": "continue"}));
    let mut records = Vec::new();
    loop {
        let record = t
            .next_record(Duration::from_secs(30))
            .unwrap_or_else(|| panic!("the plan completes; got {records:?}"));
        let json = record.json.expect("JSON");
        let done =
            json["type"] == "message_end" && json["message"]["customType"] == "plan-complete";
        records.push(json);
        if done {
            break;
        }
    }
    let first_end = records
        .iter()
        .position(|r| r["type"] == "agent_end")
        .unwrap();
    assert!(
        records[first_end..]
            .iter()
            .any(|r| r["type"] == "agent_start"),
        "queued while the run streamed, the message continues it: {records:?}"
    );
    records.extend(settle(&mut t));
    let context = records
        .iter()
        .find(|r| {
            r["type"] == "message_end" && r["message"]["customType"] == "plan-execution-context"
        })
        .expect("before_agent_start adds the remaining steps");
    assert_eq!(
        context["message"]["content"],
        "[EXECUTING PLAN - Full tool access enabled]\n\nRemaining steps:\n2. Rewrite parser error messages\n3. Document the new flags\n\nExecute each step in order.\nAfter completing a step, include a [DONE:n] tag in your response."
    );
    assert_eq!(
        plan_ui(&records),
        [
            json!({"status": "📋 3/3"}),
            json!({"widget": ["☑ Inspect the config loader", "☑ Rewrite parser error messages",
                              "☑ Document the new flags"]}),
            json!({"status": null}),
            json!({"widget": null}),
        ]
    );
    let complete = records
        .iter()
        .find(|r| r["type"] == "message_end" && r["message"]["customType"] == "plan-complete")
        .unwrap();
    assert_eq!(
        complete["message"]["content"],
        "**Plan Complete!** ✓\n\n~~Inspect the config loader~~\n~~Rewrite parser error messages~~\n~~Document the new flags~~"
    );
    let last = mock.requests().last().unwrap().body.to_string();
    assert!(
        last.contains("Plan Complete!"),
        "the model answers it: {last}"
    );
    assert!(
        records.iter().any(|r| r["type"] == "message_end"
            && r["message"]["content"][0]["text"] == "Great, all done.")
    );
    assert_eq!(
        plan_entry(&mut t)["executing"],
        false,
        "the cleared state is saved"
    );

    // Refining: back in plan mode, the editor's text becomes a follow-up user message that
    // continues the run together with the todo list.
    command(&mut t, "on", "/plan");
    mock.push(Reply::text(
        "Plan:\n1. Survey the CLI options\n2. Sketch the new help text\n",
    ));
    t.send(&json!({"id": "p2", "type": "prompt", "message": "and the CLI?"}));
    let select = ui_where(&mut t, |r| r["method"] == "select");
    t.send(&json!({"type": "extension_ui_response", "id": select["id"],
                   "value": "Refine the plan"}));
    let editor = ui_where(&mut t, |r| r["method"] == "editor");
    assert_eq!(editor["title"], "Refine the plan:");
    assert_eq!(editor["prefill"], "");
    let before = mock.requests().len();
    mock.push(Reply::text(
        "Plan:\n1. Survey the CLI options\n2. Sketch the new help text\n3. Extend the man page\n",
    ));
    t.send(&json!({"type": "extension_ui_response", "id": editor["id"],
                   "value": "  Also cover the man page \n"}));
    let select = ui_where(&mut t, |r| r["method"] == "select");
    assert_eq!(select["title"], "Plan mode - what next?");
    t.send(&json!({"type": "extension_ui_response", "id": select["id"], "value": STAY}));
    settle(&mut t);
    assert_eq!(
        mock.requests().len(),
        before + 1,
        "one call for the refinement"
    );
    let refine = mock.requests().last().unwrap().body.clone();
    assert_eq!(
        tool_names(&refine),
        ["read", "bash", "todo_write", "grep", "find", "ls"]
    );
    let sent = refine["messages"].to_string();
    assert!(sent.contains("Also cover the man page"), "{sent}");
    assert!(sent.contains("**Plan Steps (2):**"), "{sent}");
    let messages = t.request(json!({"type": "get_messages"}));
    let last_user = messages["data"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rfind(|m| m["role"] == "user")
        .unwrap()
        .clone();
    assert_eq!(
        last_user["content"],
        json!([{"type": "text", "text": "Also cover the man page"}])
    );
}

#[test]
fn plan_mode_is_restored_after_a_restart() {
    let mock = MockServer::start_background().unwrap();
    let mut t = start_in_plan_mode(&mock);
    let select = explore(&mock, &mut t);
    t.send(&json!({"type": "extension_ui_response", "id": select["id"], "value": STAY}));
    settle(&mut t);
    let dirs = t.dirs();
    t.close_stdin();
    assert!(
        t.wait_exit(Duration::from_secs(15)).success(),
        "{}",
        t.stderr()
    );
    drop(t);

    // Without --plan: session_start finds the last plan-mode entry.
    let mut again = ready_tau(builder(&mock, &["plan-mode"]).dirs(dirs).arg("--continue"));
    let status = ui_where(&mut again, |r| r["method"] == "setStatus");
    let widget = ui_where(&mut again, |r| r["method"] == "setWidget");
    assert_eq!(
        plan_ui(&[status, widget]),
        [json!({"status": "⏸ plan"}), json!({"widget": null})]
    );
    let records = command(&mut again, "todos", "/todos");
    assert_eq!(notices(&records), [(PLANNED.to_string(), json!("info"))]);
    mock.push(Reply::text("still planning"));
    again.send(&json!({"id": "p", "type": "prompt", "message": "more?"}));
    // The restored todos make agent_end ask again.
    let select = ui_where(&mut again, |r| r["method"] == "select");
    assert_eq!(select["title"], "Plan mode - what next?");
    let body = mock.requests().last().unwrap().body.clone();
    assert_eq!(
        tool_names(&body),
        ["read", "bash", "todo_write", "grep", "find", "ls"]
    );
    assert!(body["messages"].to_string().contains("[PLAN MODE ACTIVE]"));
}
