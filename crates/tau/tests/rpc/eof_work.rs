//! End of input (issue 46, decision T118): everything read before stdin ends is carried out
//! as it would be with stdin still open: extension commands, the runs they start, prompts and
//! follow-ups queued, session writes, the end-of-session events. Each case pipes its commands
//! and closes stdin at once, then runs the same commands with stdin held open until the work
//! is done, and compares what came out and what the session file holds.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use tau_mock_llm::{BackgroundMock, MockServer, Reply};
use tau_test_kit::{Dirs, TauBuilder};

use crate::{ready_tau, tau};

fn fixture() -> String {
    format!(
        "{}/tests/fixtures/extensions/eof.ts",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn builder(mock: &BackgroundMock, dirs: &Dirs) -> TauBuilder {
    tau()
        .dirs(dirs.clone())
        .agent_file("models.json", crate::mock_models(mock))
        .arg("--session-dir")
        .arg("sessions")
        .arg("-e")
        .arg(fixture())
}

/// What a record says, without what differs between two runs (ids, times, deltas).
fn shape(record: &Value) -> Option<String> {
    let kind = record["type"].as_str()?;
    Some(match kind {
        "ready" | "message_update" => return None,
        "response" => format!(
            "response {} {} {}",
            record["command"].as_str().unwrap_or(""),
            record["success"],
            record["id"]
        ),
        "extension_ui_request" => format!(
            "ui {} {}",
            record["method"].as_str().unwrap_or(""),
            record["message"].as_str().unwrap_or("")
        ),
        "message_end" | "message_start" => {
            format!(
                "{kind} {}",
                record["message"]["role"].as_str().unwrap_or("")
            )
        }
        other => other.to_string(),
    })
}

/// The session file's entries, as type and text.
fn session_entries(cwd: &Path) -> Vec<String> {
    let dir = cwd.join("sessions");
    let files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|entries| entries.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    // pi writes the file at the first assistant message: none before.
    assert!(
        files.len() <= 1,
        "one session file in {}: {files:?}",
        dir.display()
    );
    let Some(file) = files.first() else {
        return Vec::new();
    };
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .skip(1)
        .map(|line| {
            let entry: Value = serde_json::from_str(line).unwrap();
            let text = match entry["type"].as_str() {
                Some("message") => format!(
                    "{} {}",
                    entry["message"]["role"].as_str().unwrap_or(""),
                    serde_json::to_string(&entry["message"]["content"]).unwrap()
                ),
                Some("custom") => entry["data"].to_string(),
                _ => String::new(),
            };
            format!("{} {text}", entry["type"].as_str().unwrap_or(""))
        })
        .collect()
}

fn ran(cwd: &Path) -> Vec<String> {
    std::fs::read_to_string(cwd.join("ran.txt"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// What one way of sending produced: the records' shapes, the session, the handlers' marks.
#[derive(Debug, PartialEq)]
struct Outcome {
    records: Vec<String>,
    session: Vec<String>,
    ran: Vec<String>,
}

/// Closes stdin, waits for a clean exit, and gives the shapes of everything tau wrote.
fn close_and_collect(t: &mut tau_test_kit::Tau) -> Vec<String> {
    t.close_stdin();
    assert!(
        t.wait_exit(Duration::from_secs(30)).success(),
        "{}",
        t.stderr()
    );
    t.drain(Duration::from_secs(5));
    t.history()
        .iter()
        .filter_map(|record| record.json.as_ref())
        .filter_map(shape)
        .collect()
}

/// The commands piped and stdin closed at once.
fn piped(commands: &[Value], replies: &[Reply]) -> Outcome {
    let mock = MockServer::start_background().unwrap();
    for reply in replies {
        mock.push(reply.clone());
    }
    let dirs = Dirs::new();
    let mut input = Vec::new();
    for command in commands {
        input.extend_from_slice(command.to_string().as_bytes());
        input.push(b'\n');
    }
    let (status, stdout, stderr, dirs) = builder(&mock, &dirs).run(&input);
    assert!(status.success(), "{stderr}");
    let records = String::from_utf8_lossy(&stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter_map(|record| shape(&record))
        .collect();
    Outcome {
        records,
        session: session_entries(dirs.cwd()),
        ran: ran(dirs.cwd()),
    }
}

/// The same commands with stdin open until `done` says the work is over, then closed.
fn held_open(commands: &[Value], replies: &[Reply], done: impl Fn(&Value) -> bool) -> Outcome {
    let mock = MockServer::start_background().unwrap();
    for reply in replies {
        mock.push(reply.clone());
    }
    let dirs = Dirs::new();
    let mut t = ready_tau(builder(&mock, &dirs));
    for command in commands {
        t.send(command);
    }
    t.wait_for("the work to be done", Duration::from_secs(30), |record| {
        record.json.as_ref().is_some_and(&done)
    });
    let records = close_and_collect(&mut t);
    Outcome {
        records,
        session: session_entries(dirs.cwd()),
        ran: ran(dirs.cwd()),
    }
}

/// The session entries of `outcome` that start with `prefix` (`"message user"`, …).
fn entries<'a>(outcome: &'a Outcome, prefix: &str) -> Vec<&'a String> {
    outcome
        .session
        .iter()
        .filter(|entry| entry.starts_with(prefix))
        .collect()
}

fn prompt(id: &str, message: &str) -> Value {
    json!({"id": id, "type": "prompt", "message": message})
}

fn is_ui(message: &str) -> impl Fn(&Value) -> bool + '_ {
    move |record| record["type"] == "extension_ui_request" && record["message"] == message
}

#[test]
fn an_extension_command_piped_before_the_end_runs_whole() {
    let commands = [prompt("c1", "/hello world")];
    let closed = piped(&commands, &[]);
    assert_eq!(
        closed.ran,
        ["hello world", "session_shutdown"],
        "{closed:?}"
    );
    assert!(
        closed
            .records
            .contains(&"ui notify hello world".to_string()),
        "{closed:?}"
    );
    let open = held_open(&commands, &[], |record| {
        record["type"] == "response" && record["id"] == "c1"
    });
    assert_eq!(closed, open);
}

#[test]
fn a_run_an_extension_command_starts_is_carried_out_before_the_exit() {
    let commands = [prompt("c1", "/ask what is two and two")];
    let replies = [Reply::text("four")];
    let closed = piped(&commands, &replies);
    let messages = entries(&closed, "message");
    assert_eq!(messages.len(), 2, "{closed:?}");
    assert!(messages[0].contains("what is two and two"), "{closed:?}");
    assert!(messages[1].contains("four"), "{closed:?}");
    assert!(
        closed.records.contains(&"agent_settled".to_string()),
        "{closed:?}"
    );
    let open = held_open(&commands, &replies, |record| {
        record["type"] == "agent_settled"
    });
    assert_eq!(closed, open);
}

#[test]
fn prompts_and_follow_ups_queued_behind_a_command_all_run() {
    let commands = [
        prompt("c1", "/hello before"),
        prompt("c2", "second"),
        json!({"id": "c3", "type": "follow_up", "message": "third"}),
        prompt("c4", "/hello after"),
    ];
    // The first reply takes long enough for the follow-up to find the run still going, with
    // stdin open or not.
    let replies = [Reply::text("one").delay_ms(500), Reply::text("two")];
    let closed = piped(&commands, &replies);
    let users = entries(&closed, "message user");
    assert_eq!(users.len(), 2, "{closed:?}");
    assert!(users[1].contains("third"), "{closed:?}");
    let mut ran = closed.ran.clone();
    ran.sort();
    assert_eq!(ran, ["hello after", "hello before", "session_shutdown"]);
    let open = held_open(&commands, &replies, |record| {
        record["type"] == "agent_settled"
    });
    // With stdin open the last `agent_settled` is awaited; both ways must reach the same end.
    // The two commands' handlers run beside each other: either may finish first.
    assert_eq!(closed.session, open.session);
    let mut open_ran = open.ran.clone();
    open_ran.sort();
    assert_eq!(ran, open_ran);
}

#[test]
fn stdin_closing_while_a_handler_runs_lets_it_finish() {
    let commands = [prompt("c1", "/slow down")];
    let mock = MockServer::start_background().unwrap();
    let dirs = Dirs::new();
    let mut t = ready_tau(builder(&mock, &dirs));
    t.send(&commands[0]);
    // The handler sleeps 400 ms; stdin ends while it does.
    std::thread::sleep(Duration::from_millis(100));
    let records = close_and_collect(&mut t);
    assert!(
        records.contains(&"ui notify slow down".to_string()),
        "{records:?}"
    );
    assert!(
        records.contains(&"response prompt true \"c1\"".to_string()),
        "{records:?}"
    );
    assert_eq!(ran(dirs.cwd()), ["slow down", "session_shutdown"]);
    let closed = Outcome {
        records,
        session: session_entries(dirs.cwd()),
        ran: ran(dirs.cwd()),
    };
    let open = held_open(&commands, &[], is_ui("slow down"));
    assert_eq!(closed.session, open.session);
    assert_eq!(closed.ran, open.ran);
}

#[test]
fn a_steer_queued_before_the_end_is_delivered_in_the_run() {
    let commands = [
        prompt("c1", "list the folder"),
        json!({"id": "c2", "type": "steer", "message": "and then stop"}),
    ];
    let replies = [
        Reply::new()
            .tool_call("t1", "bash", json!({"command": "echo listed"}))
            .delay_ms(300),
        Reply::text("stopped"),
    ];
    let closed = piped(&commands, &replies);
    let users = entries(&closed, "message user");
    assert_eq!(users.len(), 2, "{closed:?}");
    assert!(users[1].contains("and then stop"), "{closed:?}");
    let open = held_open(&commands, &replies, |record| {
        record["type"] == "agent_settled"
    });
    // Where the steer lands (before the first model call, or after the tool result) depends
    // on when the loop reads it, either way; what the session holds does not.
    let sorted = |mut entries: Vec<String>| {
        entries.sort();
        entries
    };
    assert_eq!(sorted(closed.session), sorted(open.session));
}

#[test]
fn a_compaction_piped_before_the_end_is_saved() {
    // A session with history enough to compact, made with stdin open.
    let mock = MockServer::start_background().unwrap();
    let dirs = Dirs::new();
    let settings = json!({"compaction": {"keepRecentTokens": 150}}).to_string();
    let long = |word: &str| format!("{word} ").repeat(100);
    let mut t = ready_tau(builder(&mock, &dirs).agent_file("settings.json", settings));
    for n in ["first", "second", "third"] {
        mock.push(Reply::text(long(&format!("{n}-answer"))));
        t.send(&prompt(n, &long(&format!("{n}-question"))));
        t.records_until("agent_settled", Duration::from_secs(30));
    }
    t.close_stdin();
    assert!(t.wait_exit(Duration::from_secs(30)).success());

    // The history's summary, and the split turn's prefix.
    mock.push(Reply::text("the summary"));
    mock.push(Reply::text("the prefix summary"));
    let input = format!("{}\n", json!({"id": "k", "type": "compact"}));
    let (status, stdout, stderr, _) = builder(&mock, &dirs)
        .arg("--continue")
        .run(input.as_bytes());
    assert!(status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&stdout);
    let answered = stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|record| record["type"] == "response" && record["id"] == "k")
        .unwrap_or_else(|| panic!("compact answered: {stdout}"));
    assert_eq!(answered["success"], true, "{answered}");
    let entries = session_entries(dirs.cwd());
    let compactions: Vec<&String> = entries
        .iter()
        .filter(|entry| entry.starts_with("compaction"))
        .collect();
    assert_eq!(compactions.len(), 1, "{entries:?}");
}
