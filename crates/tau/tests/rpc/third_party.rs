//! Extensions and pi packages that people publish (not pi's own examples), kept unmodified
//! under `fixtures/third-party/<name>/` with their licence and source, and driven over RPC
//! on the mock as their user would drive them. Each scenario was run through pi 0.79 on the
//! same script first; the assertions are what both show. Needs the Node host's packages
//! (`npm ci` in `extensions/node-host`, which `scripts/test.sh` runs).

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use tau_mock_llm::{BackgroundMock, Fault, MockServer, Reply};
use tau_test_kit::{Dirs, Tau, TauBuilder};

use crate::{ready_tau, strip_ansi, tau};

const WAIT: Duration = Duration::from_secs(30);

fn fixture(relative: &str) -> String {
    let path = format!(
        "{}/tests/fixtures/third-party/{relative}",
        env!("CARGO_MANIFEST_DIR")
    );
    assert!(Path::new(&path).is_file(), "{path} is missing");
    let host_modules = format!(
        "{}/../../extensions/node-host/node_modules",
        env!("CARGO_MANIFEST_DIR")
    );
    assert!(
        Path::new(&host_modules).is_dir(),
        "the Node host's packages are not installed: run `npm ci` in extensions/node-host (scripts/test.sh does)"
    );
    path
}

fn builder(mock: &BackgroundMock, extension: &str) -> TauBuilder {
    tau()
        .agent_file("models.json", crate::mock_models(mock))
        .arg("--no-session")
        .arg("-e")
        .arg(fixture(extension))
}

fn start(extension: &str) -> (BackgroundMock, Tau) {
    let mock = MockServer::start_background().unwrap();
    let t = ready_tau(builder(&mock, extension));
    (mock, t)
}

fn ui_requests<'a>(records: &'a [Value], method: &'a str) -> impl Iterator<Item = &'a Value> {
    records
        .iter()
        .filter(move |r| r["type"] == "extension_ui_request" && r["method"] == method)
}

/// The `statusText` of each `setStatus` under `key`, `None` where it was cleared.
fn statuses(records: &[Value], key: &str) -> Vec<Option<String>> {
    ui_requests(records, "setStatus")
        .filter(|r| r["statusKey"] == key)
        .map(|r| r["statusText"].as_str().map(strip_ansi))
        .collect()
}

fn notices(records: &[Value]) -> Vec<String> {
    ui_requests(records, "notify")
        .map(|r| r["message"].as_str().unwrap().to_string())
        .collect()
}

/// The text of a message's content (a string or text blocks).
fn text_of(message: &Value) -> String {
    match &message["content"] {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The `message_end` messages of this role, in order.
fn ended<'a>(records: &'a [Value], role: &'a str) -> impl Iterator<Item = &'a Value> {
    records
        .iter()
        .filter(move |r| r["type"] == "message_end" && r["message"]["role"] == role)
        .map(|r| &r["message"])
}

fn tool_ends<'a>(records: &'a [Value], tool: &'a str) -> Vec<&'a Value> {
    records
        .iter()
        .filter(|r| r["type"] == "tool_execution_end" && r["toolName"] == tool)
        .collect()
}

fn result_text(tool_end: &Value) -> String {
    text_of(&tool_end["result"])
}

/// Sends a prompt and returns the records up to its response.
fn command(t: &mut Tau, id: &str, message: &str) -> Vec<Value> {
    t.send(&json!({"id": id, "type": "prompt", "message": message}));
    let mut records = Vec::new();
    loop {
        let record = t
            .next_record(WAIT)
            .unwrap_or_else(|| panic!("no response to {message}; got {records:?}"));
        let json = record.json.expect("JSON");
        let done = json["type"] == "response" && json["id"] == id;
        records.push(json);
        if done {
            return records;
        }
    }
}

/// The text of every message a request sent to the model, in order (system prompt first).
fn request_texts(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(text_of)
        .collect()
}

/// mitsuhiko/agent-stuff `extensions/goal.ts`: `/goal <objective>` keeps the agent working
/// (hidden continuation messages that trigger runs) until the model calls `update_goal`;
/// state lives in custom entries, the footer status follows it, and the `context` hook keeps
/// only the latest continuation of the active goal in what the model sees.
#[test]
fn goal_pursues_an_objective_until_the_model_marks_it_complete() {
    let (mock, mut t) = start("goal/goal.ts");
    let commands = crate::command_names(&mut t);
    assert!(commands.contains(&"goal".to_string()), "{commands:?}");

    mock.push_all([
        Reply::text("working on it").usage(100, 20, 0, 0),
        Reply::new()
            .tool_call("c1", "update_goal", json!({"status": "complete"}))
            .usage(150, 10, 0, 0),
        Reply::text("goal done").usage(200, 5, 0, 0),
    ]);
    t.send(&json!({"id": "g", "type": "prompt", "message": "/goal write the tests"}));
    let run = t.records_until("agent_settled", WAIT);

    // The goal is shown, then two runs: the continuation, and the one its agent_end queues.
    let shown: Vec<String> = ended(&run, "custom")
        .filter(|m| m["customType"] == "goal-ui")
        .map(text_of)
        .collect();
    assert_eq!(
        shown,
        [
            "Goal active\n\nGoal\nStatus: active\nObjective: write the tests\nTime used: 0s\n\
          Tokens used: 0\n\nCommands: /goal edit, /goal pause, /goal clear"
        ]
    );
    let continuations: Vec<&Value> = ended(&run, "custom")
        .filter(|m| m["customType"] == "goal-continuation")
        .collect();
    assert_eq!(continuations.len(), 2, "{run:?}");
    assert_eq!(continuations[0]["display"], false);
    assert!(text_of(continuations[0]).contains("<untrusted_objective>\nwrite the tests\n"));
    assert_eq!(run.iter().filter(|r| r["type"] == "agent_start").count(), 2);
    let texts: Vec<String> = ended(&run, "assistant").map(text_of).collect();
    assert_eq!(texts, ["working on it", "", "goal done"]);

    // update_goal reports the tokens of the first run (100 + 20) and completes the goal.
    let update = tool_ends(&run, "update_goal");
    assert_eq!(update.len(), 1);
    assert_eq!(update[0]["isError"], false);
    let goal = &update[0]["result"]["details"]["goal"];
    assert_eq!(goal["status"], "complete");
    assert_eq!(goal["objective"], "write the tests");
    assert_eq!(goal["tokensUsed"], 120);
    let status = statuses(&run, "goal");
    let shown: Vec<&str> = status.iter().flatten().map(String::as_str).collect();
    assert_eq!(shown.first(), Some(&"Pursuing goal (0s)"), "{status:?}");
    assert_eq!(shown.last(), Some(&"Goal complete"), "{status:?}");

    // What the model saw: the second request holds only the latest continuation, the third
    // (after completion) none.
    let requests = mock.requests();
    assert_eq!(requests.len(), 3);
    let count = |i: usize| {
        request_texts(&requests[i].body)
            .iter()
            .filter(|m| m.starts_with("Continue working toward the active thread goal."))
            .count()
    };
    assert_eq!((count(0), count(1), count(2)), (1, 1, 0));

    // `/goal` shows the summary with both runs' tokens; `/goal clear` clears the status.
    let summary = command(&mut t, "s", "/goal");
    let shown: Vec<String> = ended(&summary, "custom").map(text_of).collect();
    assert_eq!(
        shown,
        [
            "Goal\nStatus: complete\nObjective: write the tests\nTime used: 0s\n\
          Tokens used: 485\n\nCommands: /goal edit, /goal clear"
        ]
    );
    let cleared = command(&mut t, "c", "/goal clear");
    let shown: Vec<String> = ended(&cleared, "custom").map(text_of).collect();
    assert_eq!(shown, ["Goal cleared"]);
    assert_eq!(statuses(&cleared, "goal"), [None]);
    // Every transition was appended as a `goal` custom entry.
    let entries = t.request(json!({"type": "get_entries"}));
    let actions: Vec<&str> = entries["data"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "custom" && e["customType"] == "goal")
        .map(|e| e["data"]["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["set", "account", "status", "account", "clear"]);
}

/// tmustier's pi package `@tmustier/pi-ralph-wiggum`: `/ralph start` writes a task file and
/// queues iteration prompts as follow-ups; `ralph_done` queues the next one, and a reply
/// holding the completion marker ends the loop.
#[test]
fn ralph_wiggum_loops_until_the_completion_marker() {
    let (mock, mut t) = start("ralph-wiggum/index.ts");
    mock.push_all([
        Reply::new().tool_call("c1", "ralph_done", json!({})),
        Reply::text("iteration one done"),
        Reply::text("all good <promise>COMPLETE</promise>"),
        Reply::text("congrats"),
    ]);
    t.send(&json!({"id": "r", "type": "prompt",
        "message": "/ralph start demo --max-iterations 5"}));
    let run = t.records_until("agent_settled", WAIT);

    assert_eq!(notices(&run), ["Created task file: .ralph/demo.md"]);
    let task = std::fs::read_to_string(t.cwd().join(".ralph/demo.md")).unwrap();
    assert!(task.starts_with("# Task\n"), "{task}");
    let status = statuses(&run, "ralph");
    let active: Vec<&str> = status.iter().flatten().map(String::as_str).collect();
    assert_eq!(active.len(), 2, "{status:?}");
    assert!(
        active[0].starts_with("Ralph Wiggum · 🔁 demo · ▶ active · 🔢 1/5 · 📄 .ralph/demo.md"),
        "{active:?}"
    );
    assert!(active[1].contains("🔢 2/5"), "{active:?}");
    assert_eq!(status.last().unwrap(), &None, "cleared when complete");

    // Iteration prompts as user messages, the completion banner as a follow-up of its own.
    let users: Vec<String> = ended(&run, "user").map(text_of).collect();
    assert_eq!(users.len(), 3, "{users:?}");
    assert!(users[0].contains("🔄 RALPH LOOP: demo | Iteration 1/5"));
    assert!(users[1].contains("🔄 RALPH LOOP: demo | Iteration 2/5"));
    assert!(users[2].contains("✅ RALPH LOOP COMPLETE: demo | 2 iterations"));
    let done = tool_ends(&run, "ralph_done");
    assert_eq!(
        result_text(done[0]),
        "Iteration 1 complete. Next iteration queued."
    );
    let texts: Vec<String> = ended(&run, "assistant").map(text_of).collect();
    assert_eq!(texts.last().unwrap(), "congrats");
    // before_agent_start told the model where it is.
    let system = &request_texts(&mock.requests()[0].body)[0];
    assert!(
        system.contains("[RALPH LOOP - demo - Iteration 1/5]"),
        "{system}"
    );

    let state: Value = serde_json::from_str(
        &std::fs::read_to_string(t.cwd().join(".ralph/demo.state.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(state["status"], "completed");
    assert_eq!(state["iteration"], 2);
    let listed = command(&mut t, "s", "/ralph status");
    assert_eq!(
        notices(&listed),
        ["Ralph loops:\ndemo: ✓ completed (iteration 2/5)"]
    );
}

/// diegopetrucci/pi-extensions `permission-gate`: a `tool_call` hook that asks before
/// dangerous bash commands and writes to protected paths, and blocks on "No".
#[test]
fn permission_gate_asks_before_dangerous_commands_and_protected_paths() {
    let (mock, mut t) = start("permission-gate/index.ts");
    mock.push_all([
        Reply::new().tool_call("c1", "bash", json!({"command": "sudo rm -rf build"})),
        Reply::new().tool_call("c2", "write", json!({"path": ".env", "content": "KEY=1\n"})),
        Reply::new().tool_call(
            "c3",
            "write",
            json!({"path": "notes.txt", "content": "hi\n"}),
        ),
        Reply::new().tool_call("c4", "bash", json!({"command": "echo safe && cat .env"})),
        Reply::text("done"),
    ]);
    t.send(&json!({"id": "p", "type": "prompt", "message": "clean up"}));
    let mut titles = Vec::new();
    for answer in ["No", "Yes"] {
        let select = t.wait_for("a select dialog", WAIT, |r| {
            r.kind() == Some("extension_ui_request")
                && r.json.as_ref().unwrap()["method"] == "select"
        });
        let select = select.json.unwrap();
        assert_eq!(select["options"], json!(["Yes", "No"]));
        titles.push(select["title"].as_str().unwrap().to_string());
        t.send(&json!({"type": "extension_ui_response", "id": select["id"], "value": answer}));
    }
    let run = t.records_until("agent_end", WAIT);
    assert_eq!(
        titles,
        [
            "⚠️ Dangerous command:\n\n  sudo rm -rf build\n\nAllow?",
            "⚠️ Protected path write request:\n\n  .env\n\nAllow?"
        ]
    );
    // No third dialog: notes.txt and the harmless command pass.
    assert_eq!(ui_requests(&run, "select").count(), 0);

    let history: Vec<Value> = t.history().iter().filter_map(|r| r.json.clone()).collect();
    let bash = tool_ends(&history, "bash");
    assert_eq!(bash[0]["isError"], true);
    assert_eq!(result_text(bash[0]), "Blocked by user");
    assert_eq!(bash[1]["isError"], false);
    assert_eq!(result_text(bash[1]), "safe\nKEY=1\n");
    let writes = tool_ends(&history, "write");
    assert_eq!(writes.len(), 2);
    assert!(writes.iter().all(|w| w["isError"] == false), "{writes:?}");
    assert_eq!(
        std::fs::read_to_string(t.cwd().join(".env")).unwrap(),
        "KEY=1\n"
    );
    assert_eq!(
        std::fs::read_to_string(t.cwd().join("notes.txt")).unwrap(),
        "hi\n"
    );
    // The model was told about the block.
    let told = request_texts(&mock.requests()[1].body);
    assert_eq!(told.last().unwrap(), "Blocked by user");
}

/// Two models on the mock: `mock-1` with a 1M window (the default) and `mock-2` with 100k.
fn big_and_small(mock: &BackgroundMock) -> String {
    let model =
        |id: &str, window: u64| json!({"id": id, "contextWindow": window, "maxTokens": 4096});
    json!({"providers": {"mock": {
        "baseUrl": format!("{}/v1", mock.url()), "api": "openai-completions", "apiKey": "k",
        "models": [model("mock-1", 1_000_000), model("mock-2", 100_000)],
    }}})
    .to_string()
}

fn start_context_cap() -> (BackgroundMock, Tau) {
    let mock = MockServer::start_background().unwrap();
    let t = ready_tau(
        tau()
            .agent_file("models.json", big_and_small(&mock))
            .arg("--no-session")
            .arg("-e")
            .arg(fixture("context-cap/index.ts")),
    );
    (mock, t)
}

/// diegopetrucci/pi-extensions `context-cap`: caps models' context windows at 200k (for
/// auto-compaction), shows it in the footer on `model_select`, toggled by `/context-cap`.
#[test]
fn context_cap_reports_and_toggles_the_cap() {
    let (_mock, mut t) = start_context_cap();
    let status = command(&mut t, "s", "/context-cap status");
    assert_eq!(
        notices(&status),
        ["Context cap is enabled. Current model: mock/mock-1 (200k/1000k effective/original)."]
    );

    // model_select: nothing to show for a small model, the cap for a big one.
    t.send(&json!({"id": "m2", "type": "set_model", "provider": "mock", "modelId": "mock-2"}));
    let select = t.wait_for("setStatus", WAIT, |r| {
        r.json.as_ref().unwrap()["method"] == "setStatus"
    });
    assert_eq!(select.json.unwrap()["statusText"], Value::Null);
    assert_eq!(t.response("m2")["success"], true);
    t.send(&json!({"id": "m1", "type": "set_model", "provider": "mock", "modelId": "mock-1"}));
    let select = t.wait_for("setStatus", WAIT, |r| {
        r.json.as_ref().unwrap()["method"] == "setStatus"
    });
    assert_eq!(select.json.unwrap()["statusText"], "ctx cap 200k/1000k");
    assert_eq!(t.response("m1")["success"], true);

    let off = command(&mut t, "off", "/context-cap off");
    assert_eq!(statuses(&off, "context-cap"), [None]);
    let said = notices(&off);
    assert!(
        said[0].starts_with("Context cap disabled for this extension session ("),
        "{said:?}"
    );
    let on = command(&mut t, "on", "/context-cap on");
    assert_eq!(
        statuses(&on, "context-cap"),
        [Some("ctx cap 200k".to_string())]
    );
    assert!(notices(&on)[0].starts_with("Context cap enabled ("));
    let bad = command(&mut t, "bad", "/context-cap bogus");
    let warning: Vec<&Value> = ui_requests(&bad, "notify").collect();
    assert_eq!(
        warning[0]["message"],
        "Usage: /context-cap on | off | toggle | status"
    );
    assert_eq!(warning[0]["notifyType"], "warning");
}

/// pi 0.79 hands extensions its live model objects, so the cap the extension writes into
/// `model.contextWindow` is the session's: `get_state` (and auto-compaction) see 200k. tau's
/// host reports such writes to the core (`update_model`); before that the core kept 1M.
#[test]
fn context_cap_changes_the_window_the_session_uses() {
    let (_mock, mut t) = start_context_cap();
    let state = t.request(json!({"type": "get_state"}));
    assert_eq!(state["data"]["model"]["contextWindow"], 200_000);
    command(&mut t, "off", "/context-cap off");
    let state = t.request(json!({"type": "get_state"}));
    assert_eq!(state["data"]["model"]["contextWindow"], 1_000_000);
}

/// tmustier/pi-extensions `tab-status`: the terminal title follows the run (new, running,
/// done with or without a commit, stopped on an error) from the agent and tool events.
#[test]
fn tab_status_titles_follow_the_runs() {
    let mock = MockServer::start_background().unwrap();
    let dirs = Dirs::new();
    let git = std::process::Command::new("git")
        .args(["init", "-q", "."])
        .current_dir(dirs.cwd())
        .status()
        .unwrap();
    assert!(git.success());
    let mut t = ready_tau(
        builder(&mock, "tab-status/tab-status.ts")
            .dirs(dirs.clone())
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.com")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.com"),
    );
    let base = format!("pi - {}", dirs.cwd().file_name().unwrap().to_string_lossy());
    let title = |t: &mut Tau| -> String {
        let record = t.wait_for("setTitle", WAIT, |r| {
            r.json.as_ref().unwrap()["method"] == "setTitle"
        });
        record.json.unwrap()["title"]
            .as_str()
            .unwrap()
            .strip_prefix(base.as_str())
            .unwrap()
            .to_string()
    };
    assert_eq!(title(&mut t), ":new");

    mock.push(Reply::text("hello"));
    t.send(&json!({"id": "a", "type": "prompt", "message": "hi"}));
    assert_eq!(title(&mut t), ":running...");
    assert_eq!(title(&mut t), ":🚧");
    t.event("agent_settled");

    mock.push_all([
        Reply::new().tool_call(
            "c1",
            "bash",
            json!({"command": "git commit --allow-empty -qm wip"}),
        ),
        Reply::text("committed"),
    ]);
    t.send(&json!({"id": "b", "type": "prompt", "message": "commit"}));
    assert_eq!(title(&mut t), ":running...");
    assert_eq!(title(&mut t), ":✅");
    t.event("agent_settled");

    mock.push(Reply::fault(Fault::Http {
        status: 400,
        body: Some("bad request".into()),
        retry_after: None,
    }));
    t.send(&json!({"id": "c", "type": "prompt", "message": "fail"}));
    assert_eq!(title(&mut t), ":running...");
    assert_eq!(title(&mut t), ":🛑");
    t.event("agent_settled");

    // A new session: session_shutdown resets the title, session_start marks it new.
    t.send(&json!({"id": "n", "type": "new_session"}));
    assert_eq!(title(&mut t), "");
    assert_eq!(title(&mut t), ":new");
    assert_eq!(t.response("n")["success"], true);
}

/// mitsuhiko/agent-stuff `extensions/notify.ts`: on `agent_end` it writes an OSC 777 desktop
/// notification (the last reply through pi-tui's Markdown, flattened) to `process.stdout`.
/// In RPC mode that must reach the terminal on stderr, as in pi, and never the JSONL stream.
#[test]
fn notify_writes_its_terminal_notification_to_stderr_not_the_protocol() {
    let (mock, mut t) = start("notify/notify.ts");
    mock.push(Reply::text("# Done\n\nAll **tests** pass."));
    t.send(&json!({"id": "p", "type": "prompt", "message": "run tests"}));
    t.event("agent_settled");
    assert_eq!(t.request(json!({"type": "get_state"}))["success"], true);
    let osc = "\u{1b}]777;notify;π;Done All tests pass.\u{7}";
    let deadline = std::time::Instant::now() + WAIT;
    while !t.stderr().contains(osc) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(t.stderr().contains(osc), "stderr: {:?}", t.stderr());
    assert!(
        t.history().iter().all(|r| r.json.is_some()),
        "every stdout line is a JSON record"
    );
}
