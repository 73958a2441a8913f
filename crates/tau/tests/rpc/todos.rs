//! xcsh's todos through the binary: the model's `todo_write` tool (its ids, its one-task-in-
//! progress rule, its result and `details`), which tool flags offer it, the list reaching the
//! model, `todo_reminder` after a run that stops with open tasks, `todo_auto_clear` after
//! `tasks.todoClearDelay`, and the list kept by the session file: reopened with `--continue`,
//! after switching away and back, at a fork or branch point, and never carried into a new or
//! unrelated session.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tau_mock_llm::{BackgroundMock, MockServer, Reply};
use tau_test_kit::{Tau, TauBuilder};

use crate::{ready_tau, tau};

// ---------------------------------------------------------------------------------------------
// Helpers

fn builder(mock: &BackgroundMock) -> TauBuilder {
    let models = json!({"providers": {"mock": {
        "baseUrl": format!("{}/v1", mock.url()), "api": "openai-completions", "apiKey": "mock-key",
        "models": [{"id": "mock-1", "contextWindow": 100000, "maxTokens": 4096}],
    }}});
    tau().agent_file("models.json", models.to_string())
}

fn ok(t: &mut Tau, command: Value) -> Value {
    let what = command.to_string();
    let r = t.request(command);
    assert_eq!(r["success"], true, "{what} -> {r}\nstderr:\n{}", t.stderr());
    r.get("data").cloned().unwrap_or(Value::Null)
}

fn todos(t: &mut Tau) -> Value {
    ok(t, json!({"type": "get_state"}))["todoPhases"].clone()
}

fn session_file(t: &mut Tau) -> String {
    ok(t, json!({"type": "get_state"}))["sessionFile"]
        .as_str()
        .expect("sessionFile")
        .to_string()
}

/// Sends a prompt and returns every record up to and including `agent_settled`.
fn run(t: &mut Tau, text: &str) -> Vec<Value> {
    t.send(&json!({"id": "run", "type": "prompt", "message": text}));
    let mut out = Vec::new();
    loop {
        let record = t
            .next_record(Duration::from_secs(15))
            .unwrap_or_else(|| panic!("the run ends with agent_settled\nstderr:\n{}", t.stderr()));
        let json = record.json.expect("JSON records");
        if json["type"] == "response" && json["id"] == "run" {
            assert_eq!(json["success"], true, "prompt refused: {json}");
        }
        let done = json["type"] == "agent_settled";
        out.push(json);
        if done {
            return out;
        }
    }
}

fn of_type<'a>(records: &'a [Value], kind: &str) -> Vec<&'a Value> {
    records.iter().filter(|r| r["type"] == kind).collect()
}

fn todo_write(id: &str, ops: Value) -> Reply {
    Reply::new().tool_call(id, "todo_write", json!({ "ops": ops }))
}

/// The names of the tools a recorded request offered.
fn offered(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| t["function"]["name"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// Everything the `n`th request showed the model, as text.
fn context_of(mock: &BackgroundMock, n: usize) -> String {
    mock.requests()[n].body["messages"].to_string()
}

/// Closes stdin, waits for a clean exit and starts another tau in the same directories.
fn restart(mock: &BackgroundMock, mut t: Tau, args: &[&str]) -> Tau {
    let dirs = t.dirs();
    t.close_stdin();
    assert!(
        t.wait_exit(Duration::from_secs(15)).success(),
        "{}",
        t.stderr()
    );
    drop(t);
    let mut b = builder(mock).dirs(dirs);
    for arg in args {
        b = b.arg(*arg);
    }
    ready_tau(b)
}

/// A plan with one open task and one finished one, and a field of the host's own.
fn seeded(label: &str) -> Value {
    json!([{
        "id": "phase-1", "name": format!("Plan {label}"), "owner": "host",
        "tasks": [
            {"id": "task-1", "content": format!("{label}: open"), "status": "pending", "details": {"k": 1}},
            {"id": "task-2", "content": format!("{label}: done"), "status": "completed"}
        ]
    }])
}

/// `seeded(label)` as it comes back from the session file: finished tasks are left out.
fn restored(label: &str) -> Value {
    let mut phases = seeded(label);
    phases[0]["tasks"].as_array_mut().unwrap().truncate(1);
    phases
}

// ---------------------------------------------------------------------------------------------
// The tool

#[test]
fn the_model_writes_todos_and_reads_them_back() {
    let mock = MockServer::start_background().unwrap();
    let mut t = ready_tau(builder(&mock).arg("--no-session"));
    mock.push(todo_write(
        "c1",
        json!([{"op": "replace", "phases": [
            {"name": "Explore", "tasks": [{"content": "Read the code", "notes": "start at main"}, {"content": "List the tools"}]},
            {"name": "Build", "tasks": [{"content": "Write it", "status": "in_progress"}]}
        ]}]),
    ));
    mock.push(todo_write(
        "c2",
        json!([
            {"op": "update", "id": "task-1", "status": "completed"},
            {"op": "update", "id": "task-2", "status": "abandoned"},
            {"op": "update", "id": "task-3", "status": "completed"},
            {"op": "add_task", "phase": "phase-7", "content": "Nowhere"}
        ]),
    ));
    mock.push(Reply::text("All done."));
    let records = run(&mut t, "plan and do it");

    // Offered by default, as xcsh offers it.
    let first = &mock.requests()[0].body;
    assert_eq!(
        offered(first),
        ["read", "bash", "edit", "write", "todo_write"]
    );
    let tool = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "todo_write")
        .unwrap();
    assert_eq!(
        tool["function"]["parameters"]["required"],
        json!(["ops"]),
        "{tool}"
    );

    let ends = of_type(&records, "tool_execution_end");
    assert_eq!(ends.len(), 2, "{records:#?}");
    let first_end = ends[0];
    assert_eq!(first_end["toolName"], "todo_write");
    assert_eq!(first_end["isError"], false);
    let phases = &first_end["result"]["details"]["phases"];
    // Ids are the tool's; "Write it" was already in progress, so nothing is promoted.
    assert_eq!(
        *phases,
        json!([
            {"id": "phase-1", "name": "Explore", "tasks": [
                {"id": "task-1", "content": "Read the code", "status": "pending", "notes": "start at main"},
                {"id": "task-2", "content": "List the tools", "status": "pending"}
            ]},
            {"id": "phase-2", "name": "Build", "tasks": [
                {"id": "task-3", "content": "Write it", "status": "in_progress"}
            ]}
        ])
    );
    assert_eq!(first_end["result"]["details"]["storage"], "memory");
    let text = first_end["result"]["content"][0]["text"].as_str().unwrap();
    assert_eq!(
        text,
        "Remaining items (3):\n  - task-1 Read the code [pending] (Explore)\n  - task-2 List the tools [pending] (Explore)\n  - task-3 Write it [in_progress] (Build)\nPhase 1/2 \"Explore\" — 0/2 tasks complete\n  Explore:\n    ○ task-1 Read the code\n    ○ task-2 List the tools\n  Build:\n    → task-3 Write it"
    );

    // The second call worked on the first one's list; a bad phase id is reported, not fatal.
    let second_end = ends[1];
    assert_eq!(second_end["isError"], false);
    let text = second_end["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("Errors: Phase \"phase-7\" not found\nRemaining items: none.\n"),
        "{text}"
    );
    let statuses: Vec<&Value> = second_end["result"]["details"]["phases"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["tasks"].as_array().unwrap())
        .map(|t| &t["status"])
        .collect();
    assert_eq!(statuses, ["completed", "abandoned", "completed"]);
    assert_eq!(
        todos(&mut t),
        second_end["result"]["details"]["phases"],
        "get_state follows the tool"
    );

    // The model saw each result in its next request.
    assert!(
        context_of(&mock, 1).contains("Remaining items (3):"),
        "{}",
        context_of(&mock, 1)
    );
    assert!(context_of(&mock, 2).contains("Remaining items: none."));
    // Nothing was left open: no reminder.
    assert!(of_type(&records, "todo_reminder").is_empty());
    assert_eq!(of_type(&records, "agent_start").len(), 1);

    // A host tool may not take its name.
    let r = t.request(
        json!({"type": "set_host_tools", "tools": [{"name": "todo_write",
        "description": "x", "parameters": {"type": "object"}}]}),
    );
    assert_eq!(
        r["error"],
        "RPC host tool \"todo_write\" conflicts with an existing tool"
    );
}

#[test]
fn tool_flags_select_todo_write_as_xcsh_does() {
    let mock = MockServer::start_background().unwrap();
    let cases: [(&[&str], &[&str]); 5] = [
        (&["--tools", "read,todo_write"], &["read", "todo_write"]),
        (&["--tools", "read"], &["read"]),
        (&["--no-tools"], &[]),
        (&["--no-builtin-tools"], &[]),
        (
            &["--exclude-tools", "todo_write"],
            &["read", "bash", "edit", "write"],
        ),
    ];
    for (args, expected) in cases {
        let mut b = builder(&mock).arg("--no-session");
        for arg in args {
            b = b.arg(*arg);
        }
        let mut t = ready_tau(b);
        mock.clear();
        mock.push(Reply::text("ok"));
        run(&mut t, "hi");
        assert_eq!(offered(&mock.requests()[0].body), expected, "{args:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Reminders and auto-clear

#[test]
fn open_tasks_bring_reminders_until_the_limit_and_a_prompt_resets_it() {
    let mock = MockServer::start_background().unwrap();
    let mut t = ready_tau(builder(&mock).arg("--no-session"));
    mock.push(todo_write(
        "c1",
        json!([{"op": "replace", "phases": [{"name": "Work", "tasks": [{"content": "Alpha"}, {"content": "Beta"}]}]}]),
    ));
    for text in ["stopping", "still stopping", "again", "last"] {
        mock.push(Reply::text(text));
    }
    let records = run(&mut t, "do the work");

    let reminders = of_type(&records, "todo_reminder");
    let open = json!([
        {"id": "task-1", "content": "Alpha", "status": "in_progress"},
        {"id": "task-2", "content": "Beta", "status": "pending"}
    ]);
    assert_eq!(reminders.len(), 3, "{records:#?}");
    for (i, reminder) in reminders.iter().enumerate() {
        assert_eq!(
            **reminder,
            json!({"type": "todo_reminder", "todos": open, "attempt": i + 1, "maxAttempts": 3})
        );
    }
    // Each reminder starts another run; the fourth stop is left alone.
    assert_eq!(of_type(&records, "agent_start").len(), 4);
    assert_eq!(mock.requests().len(), 5);
    assert_eq!(mock.remaining(), 0);
    // The reminder is what the next request ends with.
    let after_first = context_of(&mock, 2);
    assert!(
        after_first.contains("(Reminder 1/3)")
            && after_first.contains("Alpha")
            && after_first.contains("Beta"),
        "{after_first}"
    );
    assert!(context_of(&mock, 4).contains("(Reminder 3/3)"));
    // A reminder follows the run's agent_end and precedes the next agent_start.
    let at = |pred: &dyn Fn(&Value) -> bool| records.iter().position(pred).unwrap();
    let first_reminder = at(&|r| r["type"] == "todo_reminder");
    let first_end = at(&|r| r["type"] == "agent_end");
    assert!(first_end < first_reminder);
    assert_eq!(records[first_reminder + 1]["type"], "agent_start");

    // A new prompt counts from 1 again; closing the tasks ends the reminders.
    mock.push(Reply::text("not yet"));
    mock.push(todo_write(
        "c2",
        json!([
            {"op": "update", "id": "task-1", "status": "completed"},
            {"op": "update", "id": "task-2", "status": "abandoned"}
        ]),
    ));
    mock.push(Reply::text("finished"));
    let records = run(&mut t, "go on");
    let reminders = of_type(&records, "todo_reminder");
    assert_eq!(reminders.len(), 1, "{records:#?}");
    assert_eq!(reminders[0]["attempt"], 1);
    assert_eq!(mock.remaining(), 0);
}

#[test]
fn finished_tasks_clear_after_the_configured_delay() {
    let mock = MockServer::start_background().unwrap();
    let mut t = ready_tau(
        builder(&mock)
            .arg("--no-session")
            .agent_file("settings.json", r#"{"tasks": {"todoClearDelay": 0.4}}"#),
    );
    let phases = json!([
        {"id": "phase-1", "name": "One", "tasks": [
            {"id": "task-1", "content": "done", "status": "completed"},
            {"id": "task-2", "content": "open", "status": "pending"}
        ]},
        {"id": "phase-2", "name": "Two", "tasks": [
            {"id": "task-3", "content": "dropped", "status": "abandoned"}
        ]}
    ]);
    let set = Instant::now();
    let data = ok(&mut t, json!({"type": "set_todos", "phases": phases}));
    assert_eq!(data["todoPhases"], phases, "nothing is cleared at once");

    let first = t.event("todo_auto_clear");
    assert_eq!(first, json!({"type": "todo_auto_clear"}));
    t.event("todo_auto_clear");
    assert!(
        set.elapsed() >= Duration::from_millis(350),
        "not before the delay"
    );
    assert_eq!(
        todos(&mut t),
        json!([{"id": "phase-1", "name": "One", "tasks": [
            {"id": "task-2", "content": "open", "status": "pending"}
        ]}]),
        "one event per task; the emptied phase went too"
    );

    // A task reopened before its timer fires stays.
    let with_status = |status: &str| {
        json!([{"id": "phase-1", "name": "One", "tasks": [
            {"id": "task-2", "content": "open", "status": status}
        ]}])
    };
    ok(
        &mut t,
        json!({"type": "set_todos", "phases": with_status("completed")}),
    );
    ok(
        &mut t,
        json!({"type": "set_todos", "phases": with_status("pending")}),
    );
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(todos(&mut t), with_status("pending"));
    let cleared = t
        .history()
        .iter()
        .filter(|r| r.kind() == Some("todo_auto_clear"))
        .count();
    assert_eq!(cleared, 2, "no event for the reopened task");
}

#[test]
fn a_negative_delay_never_clears() {
    let mock = MockServer::start_background().unwrap();
    let mut t = ready_tau(
        builder(&mock)
            .arg("--no-session")
            .agent_file("settings.json", r#"{"tasks": {"todoClearDelay": -1}}"#),
    );
    let phases = json!([{"id": "p", "name": "P", "tasks": [
        {"id": "t", "content": "done", "status": "completed"}
    ]}]);
    ok(&mut t, json!({"type": "set_todos", "phases": phases}));
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(todos(&mut t), phases);
}

// ---------------------------------------------------------------------------------------------
// The session file

#[test]
fn todos_survive_a_restart() {
    let mock = MockServer::start_background().unwrap();
    let mut t = ready_tau(builder(&mock));
    // The model's list first; its open tasks bring the three reminders.
    mock.push(todo_write(
        "c1",
        json!([{"op": "replace", "phases": [{"name": "Work", "tasks": [{"content": "Alpha"}, {"content": "Beta", "status": "completed"}]}]}]),
    ));
    for _ in 0..4 {
        mock.push(Reply::text("pausing"));
    }
    let records = run(&mut t, "plan");
    let end = of_type(&records, "tool_execution_end")[0].clone();
    assert_eq!(end["result"]["details"]["storage"], "session");

    let mut t = restart(&mock, t, &["--continue"]);
    assert_eq!(
        todos(&mut t),
        json!([{"id": "phase-1", "name": "Work", "tasks": [
            {"id": "task-1", "content": "Alpha", "status": "in_progress"}
        ]}]),
        "the latest todo_write result, its finished task left out"
    );

    // A host's list is kept whole (every field) in the file, and is newer than the tool's.
    ok(
        &mut t,
        json!({"type": "set_todos", "phases": seeded("host")}),
    );
    let file = session_file(&mut t);
    let mut t = restart(&mock, t, &["--session", &file]);
    assert_eq!(todos(&mut t), restored("host"));
    let lines = std::fs::read_to_string(&file).unwrap();
    assert!(
        lines.contains(r#""customType":"todo-phases""#),
        "a custom entry holds it"
    );
}

#[test]
fn switching_away_and_back_keeps_each_sessions_todos() {
    let mock = MockServer::start_background().unwrap();
    let mut t = ready_tau(builder(&mock));
    mock.push(Reply::text("hello"));
    run(&mut t, "first session");
    ok(
        &mut t,
        json!({"type": "set_todos", "phases": seeded("first")}),
    );
    let first = session_file(&mut t);

    // new_session starts without todos.
    ok(&mut t, json!({"type": "new_session"}));
    assert_eq!(todos(&mut t), json!([]));
    mock.push(Reply::text("hi"));
    let records = run(&mut t, "second session");
    assert!(
        of_type(&records, "todo_reminder").is_empty(),
        "no list here"
    );
    let second = session_file(&mut t);
    assert_ne!(first, second);

    ok(
        &mut t,
        json!({"type": "switch_session", "sessionPath": first}),
    );
    assert_eq!(todos(&mut t), restored("first"));
    // An unrelated session shows none of them.
    ok(
        &mut t,
        json!({"type": "switch_session", "sessionPath": second}),
    );
    assert_eq!(todos(&mut t), json!([]));
    ok(
        &mut t,
        json!({"type": "switch_session", "sessionPath": first}),
    );
    assert_eq!(todos(&mut t), restored("first"));
}

#[test]
fn fork_and_branch_take_the_todos_in_effect_at_that_point() {
    let mock = MockServer::start_background().unwrap();
    let mut t = ready_tau(builder(&mock));
    mock.push(Reply::text("one"));
    run(&mut t, "first question");
    ok(
        &mut t,
        json!({"type": "set_todos", "phases": seeded("early")}),
    );
    // The open task brings reminders after the second question.
    for _ in 0..4 {
        mock.push(Reply::text("two"));
    }
    let records = run(&mut t, "second question");
    assert_eq!(of_type(&records, "todo_reminder").len(), 3);
    ok(
        &mut t,
        json!({"type": "set_todos", "phases": seeded("late")}),
    );
    assert_eq!(todos(&mut t), seeded("late"));
    let original = session_file(&mut t);

    let users = ok(&mut t, json!({"type": "get_fork_messages"}))["messages"].clone();
    assert_eq!(users[1]["text"], "second question");
    let data = ok(
        &mut t,
        json!({"type": "fork", "entryId": users[1]["entryId"]}),
    );
    assert_eq!(data["text"], "second question");
    assert_eq!(
        todos(&mut t),
        restored("early"),
        "the list before the fork point"
    );
    let forked = PathBuf::from(session_file(&mut t));
    assert_ne!(forked, PathBuf::from(&original));

    ok(
        &mut t,
        json!({"type": "switch_session", "sessionPath": original}),
    );
    assert_eq!(todos(&mut t), restored("late"));
    ok(
        &mut t,
        json!({"type": "branch", "entryId": users[1]["entryId"]}),
    );
    assert_eq!(todos(&mut t), restored("early"), "branch too");

    // Before the first message there was no list.
    ok(
        &mut t,
        json!({"type": "switch_session", "sessionPath": original}),
    );
    ok(
        &mut t,
        json!({"type": "fork", "entryId": users[0]["entryId"]}),
    );
    assert_eq!(todos(&mut t), json!([]));
}
