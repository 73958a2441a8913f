//! pi's own example extensions, unmodified (`extensions/node-host/test/fixtures/pi-examples`),
//! loaded through the Node host and driven over RPC as a pi host would drive them. Needs the
//! host's packages (`npm ci` in `extensions/node-host`, which `scripts/test.sh` runs).

use std::time::Duration;

use serde_json::{Value, json};
use tau_mock_llm::{BackgroundMock, MockServer, Reply};
use tau_test_kit::{Tau, TauBuilder};

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
    let model = |id: &str| {
        json!({"id": id, "reasoning": true, "contextWindow": 100000, "maxTokens": 4096})
    };
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
        .map(|r| (r["message"].as_str().unwrap().to_string(), r["notifyType"].clone()))
        .collect()
}

/// Runs a command prompt and returns the records up to its response.
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
               "details": args})
    );
    assert_eq!(mock.requests().len(), 1, "no follow-up call after the terminating batch");
    let agent_end = records.iter().find(|r| r["type"] == "agent_end").unwrap();
    let messages = agent_end["messages"].as_array().unwrap();
    assert_eq!(messages.last().unwrap()["role"], "toolResult", "the run ended on the tool result");
    assert_eq!(
        records.iter().filter(|r| r["type"] == "turn_end").count(),
        1,
        "one turn"
    );

    let body = &mock.requests()[0].body;
    assert!(tool_names(body).contains(&"structured_output".to_string()));
    let system = system_of(body);
    assert!(
        system.contains("- structured_output: Emit a final structured answer as a terminating tool result"),
        "{system}"
    );
    assert!(system.contains(
        "- After calling structured_output, do not emit another assistant response in the same turn."
    ));
    let state = t.request(json!({"type": "get_state"}));
    assert_eq!(state["data"]["isStreaming"], false);
}

// ---------------------------------------------------------------------------------------------
// dynamic-tools.ts

#[test]
fn dynamic_tools_registered_at_runtime_are_offered_with_their_snippets() {
    let (mock, mut t) = start(&["dynamic-tools.ts"], &[]);
    let registered = ui(&mut t);
    assert_eq!(registered["method"], "notify");
    assert_eq!(registered["message"], "Registered dynamic tool: echo_session");

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
        ["read", "bash", "edit", "write", "echo_session"],
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
        [("Tool already registered: loud_1".to_string(), json!("warning"))]
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
        ["read", "bash", "edit", "write", "echo_session", "loud_1"]
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
        // Good enough to find the current year in a locale date.
        (1970 + days * 400 / 146_097).to_string()
    };
    assert!(shown[0].0.contains(&year), "a local date and time: {shown:?}");
    let records = command(&mut t, "u", "?quick   ");
    assert_eq!(
        notices(&records),
        [("Usage: ?quick <question>".to_string(), json!("warning"))]
    );
    assert_eq!(mock.requests().len(), 1, "only the transformed prompt reached the model");
    let messages = t.request(json!({"type": "get_messages"}));
    assert_eq!(
        messages["data"]["messages"].as_array().unwrap().len(),
        2,
        "handled input leaves no message behind"
    );
}
