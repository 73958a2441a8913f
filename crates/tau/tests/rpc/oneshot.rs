//! The one-shot modes (`tau -p`, `tau --mode json`) through the binary: what reaches stdout,
//! stderr and the exit status, how messages, `@file` arguments and piped stdin become prompts,
//! sessions, and a signal mid-run.

use std::io::{BufRead, BufReader};

use serde_json::{Value, json};
use tau_mock_llm::{BackgroundMock, Fault, MockServer, Reply};
use tau_test_kit::{Dirs, TauBuilder};

use crate::tau;

fn models(mock: &BackgroundMock) -> String {
    json!({"providers": {"mock": {
        "baseUrl": format!("{}/v1", mock.url()), "api": "openai-completions", "apiKey": "k",
        "models": [{"id": "m", "input": ["text", "image"], "contextWindow": 100000,
                    "maxTokens": 4096}],
    }}})
    .to_string()
}

/// tau with the mock's model and these arguments (no `--mode rpc`).
fn oneshot(mock: &BackgroundMock, dirs: &Dirs, args: &[&str]) -> TauBuilder {
    tau()
        .dirs(dirs.clone())
        .agent_file("models.json", models(mock))
        .agent_file("settings.json", r#"{"retry": {"enabled": false}}"#)
        .raw_args(args.iter().map(|a| a.to_string()))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn lines(bytes: &[u8]) -> Vec<Value> {
    text(bytes)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn session_files(dirs: &Dirs) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    let root = dirs.agent_dir().join("sessions");
    for dir in std::fs::read_dir(&root).into_iter().flatten().flatten() {
        for file in std::fs::read_dir(dir.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            files.push(file.path());
        }
    }
    files
}

fn last_user_text(mock: &BackgroundMock) -> String {
    let body = mock.requests().last().unwrap().body.clone();
    let messages = body["messages"].as_array().unwrap();
    let user = messages.iter().rev().find(|m| m["role"] == "user").unwrap();
    match &user["content"] {
        Value::String(s) => s.clone(),
        parts => parts[0]["text"].as_str().unwrap().to_string(),
    }
}

#[test]
fn print_mode_prints_the_answer_and_saves_the_session() {
    let mock = MockServer::start_background().unwrap();
    let dirs = Dirs::new();
    mock.push(Reply::text("The answer."));
    let (status, stdout, stderr, _) = oneshot(&mock, &dirs, &["-p", "question"]).run(b"");
    assert!(status.success(), "{stderr}");
    assert_eq!(text(&stdout), "The answer.\n");
    // stderr is not a terminal here: no progress lines.
    assert_eq!(stderr, "");
    assert_eq!(last_user_text(&mock), "question");
    let files = session_files(&dirs);
    assert_eq!(files.len(), 1);
    let saved = std::fs::read_to_string(&files[0]).unwrap();
    assert!(saved.contains("The answer."), "{saved}");

    // --continue picks the session up; --no-session writes nothing.
    mock.push(Reply::text("Again."));
    let (status, stdout, _, _) = oneshot(&mock, &dirs, &["-c", "-p", "more"]).run(b"");
    assert!(status.success());
    assert_eq!(text(&stdout), "Again.\n");
    let body = mock.requests().last().unwrap().body.to_string();
    assert!(
        body.contains("question") && body.contains("The answer."),
        "{body}"
    );
    assert_eq!(session_files(&dirs).len(), 1);
    mock.push(Reply::text("Unsaved."));
    let (status, _, _, _) = oneshot(&mock, &dirs, &["--no-session", "-p", "x"]).run(b"");
    assert!(status.success());
    assert_eq!(session_files(&dirs).len(), 1);
}

#[test]
fn several_messages_run_in_order_and_only_the_last_answer_is_printed() {
    let mock = MockServer::start_background().unwrap();
    let dirs = Dirs::new();
    mock.push(Reply::text("first answer"));
    mock.push(Reply::text("second answer"));
    let (status, stdout, stderr, _) =
        oneshot(&mock, &dirs, &["--no-session", "-p", "one", "two"]).run(b"");
    assert!(status.success(), "{stderr}");
    assert_eq!(text(&stdout), "second answer\n");
    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    let second = requests[1].body["messages"].to_string();
    assert!(
        second.contains("first answer") && second.contains("two"),
        "{second}"
    );
}

#[test]
fn json_mode_prints_the_header_then_every_event() {
    let mock = MockServer::start_background().unwrap();
    let dirs = Dirs::new();
    mock.push(Reply::text("one"));
    mock.push(Reply::new().tool_call("c1", "ls", json!({})));
    mock.push(Reply::text("two"));
    let (status, stdout, stderr, _) = oneshot(&mock, &dirs, &["--mode", "json", "a", "b"]).run(b"");
    assert!(status.success(), "{stderr}");
    let records = lines(&stdout);
    assert_eq!(records[0]["type"], "session");
    assert_eq!(records[0]["version"], 3);
    assert_eq!(
        records[0]["cwd"],
        std::fs::canonicalize(dirs.cwd())
            .unwrap()
            .display()
            .to_string()
    );
    let kinds: Vec<&str> = records[1..]
        .iter()
        .map(|r| r["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds.iter().filter(|k| **k == "agent_start").count(), 2);
    assert!(kinds.contains(&"message_update"));
    assert!(kinds.contains(&"tool_execution_end"));
    assert!(!kinds.contains(&"response") && !kinds.contains(&"ready"));
    // Every event is the RPC mode's record.
    for record in &records[1..] {
        tau_test_kit::check_stdout_record(record).unwrap_or_else(|e| panic!("{e}: {record}"));
    }
    assert_eq!(kinds.last(), Some(&"agent_settled"));
}

#[test]
fn files_and_piped_stdin_join_the_first_prompt() {
    let mock = MockServer::start_background().unwrap();
    let dirs = Dirs::new();
    std::fs::write(dirs.cwd().join("notes.md"), "line one\n").unwrap();
    // A 1x1 PNG.
    let png: &[u8] = &[
        0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44,
        0x52, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f,
        0x15, 0xc4, 0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0xda, 0x63, 0xfc,
        0xcf, 0xc0, 0x50, 0x0f, 0x00, 0x04, 0x85, 0x01, 0x80, 0x84, 0xa9, 0x8c, 0x21, 0x00, 0x00,
        0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
    ];
    std::fs::write(dirs.cwd().join("dot.png"), png).unwrap();
    mock.push(Reply::text("seen"));
    let (status, stdout, stderr, _) = oneshot(
        &mock,
        &dirs,
        &[
            "--no-session",
            "-p",
            "@notes.md",
            "@dot.png",
            "what is this?",
        ],
    )
    .run(b"  piped context \n");
    assert!(status.success(), "{stderr}");
    assert_eq!(text(&stdout), "seen\n");
    let cwd = std::fs::canonicalize(dirs.cwd()).unwrap();
    let cwd = cwd.display();
    let body = mock.requests()[0].body.clone();
    let user = &body["messages"].as_array().unwrap().last().unwrap()["content"];
    assert_eq!(
        user[0]["text"],
        format!(
            "piped context\n<file name=\"{cwd}/notes.md\">\nline one\n\n</file>\n<file name=\"{cwd}/dot.png\"></file>\nwhat is this?"
        )
    );
    assert!(
        user[1]["image_url"]["url"]
            .as_str()
            .unwrap()
            .starts_with("data:image/png;base64,"),
        "{user}"
    );

    // A missing file stops tau before anything runs.
    let (status, stdout, stderr, _) = oneshot(&mock, &dirs, &["-p", "@missing.txt", "x"]).run(b"");
    assert_eq!(status.code(), Some(1));
    assert!(stdout.is_empty());
    assert_eq!(
        stderr.trim(),
        format!("Error: File not found: {cwd}/missing.txt")
    );
    assert_eq!(mock.requests().len(), 1);
}

#[test]
fn exit_codes_follow_pi() {
    let mock = MockServer::start_background().unwrap();
    let dirs = Dirs::new();
    // A provider error: text mode says so on stderr and exits 1; JSON mode reports it in the
    // events and exits 0, as pi does.
    mock.push(Reply::fault(Fault::ServerError));
    let (status, stdout, stderr, _) = oneshot(&mock, &dirs, &["--no-session", "-p", "hi"]).run(b"");
    assert_eq!(status.code(), Some(1));
    assert!(stdout.is_empty());
    assert!(stderr.contains("500"), "{stderr}");
    mock.push(Reply::fault(Fault::ServerError));
    let (status, stdout, _, _) =
        oneshot(&mock, &dirs, &["--no-session", "--mode", "json", "hi"]).run(b"");
    assert_eq!(status.code(), Some(0));
    let records = lines(&stdout);
    let end = records
        .iter()
        .find(|r| r["type"] == "message_end" && r["message"]["role"] == "assistant")
        .unwrap();
    assert_eq!(end["message"]["stopReason"], "error");

    // No model at all.
    let (status, stdout, stderr) = tau_test_kit::run_once(
        std::path::Path::new(env!("CARGO_BIN_EXE_tau")),
        &["-p", "hi"],
        b"",
    );
    assert_eq!(status.code(), Some(1));
    assert!(stdout.is_empty());
    assert!(
        stderr.starts_with("Error: No models available."),
        "{stderr}"
    );

    // A bad flag, and no mode on a terminal-less run with nothing to say.
    let (status, _, stderr, _) = oneshot(&mock, &dirs, &["-p", "--bogus-flag"]).run(b"");
    assert_eq!(status.code(), Some(1));
    assert!(stderr.contains("Unknown option: --bogus-flag"), "{stderr}");

    // A failed prompt (no key for the model's provider) is the prompt's error.
    let no_key = json!({"providers": {"mock": {
        "baseUrl": format!("{}/v1", mock.url()), "api": "openai-completions",
        "apiKey": "$MISSING_KEY_VAR", "models": [{"id": "m"}]}}});
    let (status, _, stderr, _) = tau()
        .agent_file("models.json", no_key.to_string())
        .raw_args(["--no-session", "--model", "mock/m", "-p", "hi"])
        .run(b"");
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(!stderr.is_empty());
}

#[test]
fn a_signal_mid_run_aborts_it_and_leaves_the_session_whole() {
    let mock = MockServer::start_background().unwrap();
    let dirs = Dirs::new();
    mock.push(
        Reply::text("slow ".repeat(200))
            .chunk_size(5)
            .chunk_delay_ms(50),
    );
    let (mut child, _dirs) = oneshot(&mock, &dirs, &["--mode", "json", "go"]).spawn_raw();
    // Piped stdin is read whole before the run starts, as pi reads it.
    drop(child.stdin.take());
    let stdout = child.stdout.take().unwrap();
    let mut reader = BufReader::new(stdout);
    let mut line = String::new();
    // Wait until the reply streams.
    loop {
        line.clear();
        assert!(
            reader.read_line(&mut line).unwrap() > 0,
            "stdout ended early"
        );
        if line.contains("\"text_delta\"") {
            break;
        }
    }
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut reader, &mut rest).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert!(rest.contains("\"stopReason\":\"aborted\""), "{rest}");
    let files = session_files(&dirs);
    let saved = std::fs::read_to_string(&files[0]).unwrap();
    for line in saved.lines() {
        serde_json::from_str::<Value>(line).unwrap_or_else(|e| panic!("{e}: {line}"));
    }
    assert!(saved.contains("\"aborted\""), "{saved}");
}

#[test]
fn extensions_see_a_mode_without_dialogs() {
    let mock = MockServer::start_background().unwrap();
    let dirs = Dirs::new();
    std::fs::write(
        dirs.cwd().join("probe.js"),
        r#"export default (pi) => {
            pi.on("session_start", async (_e, ctx) => {
                const answer = await ctx.ui.confirm("Really?", "sure?");
                pi.appendEntry("probe", { mode: ctx.mode, hasUI: ctx.hasUI, answer });
            });
        };"#,
    )
    .unwrap();
    mock.push(Reply::text("ok"));
    let probe = dirs.cwd().join("probe.js").display().to_string();
    let (status, stdout, stderr, _) = oneshot(&mock, &dirs, &["-e", &probe, "-p", "hi"]).run(b"");
    assert!(status.success(), "{stderr}");
    assert_eq!(text(&stdout), "ok\n");
    let saved = std::fs::read_to_string(&session_files(&dirs)[0]).unwrap();
    assert!(
        saved.contains(r#""data":{"mode":"print","hasUI":false,"answer":false}"#),
        "{saved}"
    );
}
