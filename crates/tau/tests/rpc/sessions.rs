//! Sessions through the binary, with persistence on: pi's JSONL v3 file and its lazy write
//! policy, `set_session_name`, `new_session`, `switch_session`, `fork`, `clone`,
//! `get_fork_messages`, `get_session_stats`, `export_html`, `get_entries`, `get_tree`, xcsh's
//! `branch`/`get_branch_messages`, `--continue`/`--session`, a crash mid-stream, a second
//! writer, and session files written by pi 0.79 itself (`tests/fixtures/sessions/`).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tau_mock_llm::{BackgroundMock, MockServer, Reply};
use tau_test_kit::{Tau, TauBuilder, run_once};

use crate::{ready_tau, tau};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/sessions");

// ---------------------------------------------------------------------------------------------
// Helpers

fn models_json(mock: &BackgroundMock, api: &str) -> String {
    let base = match api {
        "anthropic-messages" => mock.url(),
        _ => format!("{}/v1", mock.url()),
    };
    json!({"providers": {"mock": {
        "baseUrl": base, "api": api, "apiKey": "mock-key",
        "models": [{"id": "mock-1", "reasoning": true, "contextWindow": 100000, "maxTokens": 4096}],
    }}})
    .to_string()
}

/// The builder for a tau with sessions ON (default session dir under the temp agent dir),
/// whose only model streams from `mock`.
fn builder(mock: &BackgroundMock, api: &str) -> TauBuilder {
    tau().agent_file("models.json", models_json(mock, api))
}

fn setup() -> (BackgroundMock, Tau) {
    setup_full("openai-completions", |b| b)
}

fn setup_full(api: &str, extra: impl FnOnce(TauBuilder) -> TauBuilder) -> (BackgroundMock, Tau) {
    let mock = MockServer::start_background().unwrap();
    let t = ready_tau(extra(builder(&mock, api)));
    (mock, t)
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
        let done = json["type"] == "agent_settled";
        if json["type"] == "response" && json["id"] == "run" {
            assert_eq!(json["success"], true, "prompt refused: {json}");
        }
        out.push(json);
        if done {
            return out;
        }
    }
}

/// Queues `reply` and runs one prompt.
fn exchange(mock: &BackgroundMock, t: &mut Tau, text: &str, reply: &str) -> Vec<Value> {
    mock.push(Reply::text(reply));
    run(t, text)
}

fn ok(t: &mut Tau, command: Value) -> Value {
    let what = command.to_string();
    let r = t.request(command);
    assert_eq!(r["success"], true, "{what} -> {r}\nstderr:\n{}", t.stderr());
    r.get("data").cloned().unwrap_or(Value::Null)
}

fn fails(t: &mut Tau, command: Value) -> String {
    let what = command.to_string();
    let r = t.request(command);
    assert_eq!(r["success"], false, "{what} should fail: {r}");
    r["error"].as_str().expect("an error text").to_string()
}

fn state(t: &mut Tau) -> Value {
    ok(t, json!({"type": "get_state"}))
}

fn messages(t: &mut Tau) -> Vec<Value> {
    ok(t, json!({"type": "get_messages"}))["messages"]
        .as_array()
        .unwrap()
        .clone()
}

fn session_file(t: &mut Tau) -> PathBuf {
    PathBuf::from(state(t)["sessionFile"].as_str().expect("sessionFile"))
}

/// Every line of a session file, parsed (panics on a line that is not JSON).
fn lines(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad line {l:?}: {e}")))
        .collect()
}

fn keys(v: &Value) -> Vec<&str> {
    v.as_object().unwrap().keys().map(String::as_str).collect()
}

fn is_entry_id(v: &Value) -> bool {
    v.as_str()
        .is_some_and(|s| s.len() == 8 && s.bytes().all(|b| b.is_ascii_hexdigit()))
}

fn is_iso_timestamp(v: &Value) -> bool {
    // 2026-11-22T00:18:09.481Z
    v.as_str().is_some_and(|s| {
        s.len() == 24
            && s.ends_with('Z')
            && &s[4..5] == "-"
            && &s[10..11] == "T"
            && &s[19..20] == "."
    })
}

/// Checks the common entry fields and the parent chain of `entries` (file order), starting
/// from `first_parent`.
fn assert_chain(entries: &[Value], first_parent: Option<&str>) {
    let mut parent = first_parent
        .map(|p| Value::String(p.to_string()))
        .unwrap_or(Value::Null);
    for entry in entries {
        assert_eq!(
            &keys(entry)[..4],
            ["type", "id", "parentId", "timestamp"],
            "pi's key order: {entry}"
        );
        assert!(is_entry_id(&entry["id"]), "8-hex id: {entry}");
        assert!(
            is_iso_timestamp(&entry["timestamp"]),
            "ISO timestamp: {entry}"
        );
        assert_eq!(entry["parentId"], parent, "parent chain: {entry}");
        parent = entry["id"].clone();
    }
}

/// Concatenated text blocks of a message (string content too).
fn text_of(message: &Value) -> String {
    match &message["content"] {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter(|b| b["type"] == "text")
            .map(|b| b["text"].as_str().unwrap_or_default())
            .collect(),
        _ => String::new(),
    }
}

/// What must survive a round trip through a session file: role, texts, thinking, tool calls,
/// tool results, usage.
fn projection(message: &Value) -> Value {
    let blocks = message["content"].as_array().cloned().unwrap_or_default();
    let thinking: Vec<&Value> = blocks
        .iter()
        .filter(|b| b["type"] == "thinking")
        .map(|b| &b["thinking"])
        .collect();
    let calls: Vec<Value> = blocks
        .iter()
        .filter(|b| b["type"] == "toolCall")
        .map(|b| json!([b["id"], b["name"], b["arguments"]]))
        .collect();
    json!({
        "role": message["role"],
        "text": text_of(message),
        "thinking": thinking,
        "calls": calls,
        "toolCallId": message.get("toolCallId"),
        "isError": message.get("isError"),
        "usage": message.get("usage").map(|u| json!([u["input"], u["output"], u["cacheRead"], u["cacheWrite"]])),
        "stopReason": message.get("stopReason"),
    })
}

fn projections(messages: &[Value]) -> Vec<Value> {
    messages.iter().map(projection).collect()
}

/// The `message` entries of a file (header skipped), in file order.
fn message_entries(file: &[Value]) -> Vec<&Value> {
    file.iter().filter(|e| e["type"] == "message").collect()
}

fn user_entries(file: &[Value]) -> Vec<&Value> {
    message_entries(file)
        .into_iter()
        .filter(|e| e["message"]["role"] == "user")
        .collect()
}

/// The messages on the branch ending at the last entry (pi's context rebuild without
/// compaction).
fn active_branch_messages(file: &[Value]) -> Vec<Value> {
    let entries = &file[1..];
    let mut path = Vec::new();
    let mut at = entries.last().map(|e| e["id"].clone());
    while let Some(Value::String(id)) = at {
        let entry = entries
            .iter()
            .find(|e| e["id"] == id.as_str())
            .expect("parent exists");
        path.push(entry);
        at = Some(entry["parentId"].clone());
    }
    path.reverse();
    path.into_iter()
        .filter(|e| e["type"] == "message")
        .map(|e| e["message"].clone())
        .collect()
}

fn wait_until(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !cond() {
        assert!(
            Instant::now() < deadline,
            "{what} did not happen within {timeout:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Copies a pi fixture into `dir`, pointing its header's `cwd` at `cwd`.
fn install_fixture(name: &str, dir: &Path, cwd: &Path) -> PathBuf {
    let text = std::fs::read_to_string(Path::new(FIXTURES).join(name)).unwrap();
    let mut out = String::new();
    for (i, line) in text.lines().enumerate() {
        if i == 0 {
            let mut header: Value = serde_json::from_str(line).unwrap();
            header["cwd"] = json!(cwd.to_str().unwrap());
            out.push_str(&serde_json::to_string(&header).unwrap());
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    let path = dir.join(name);
    std::fs::write(&path, out).unwrap();
    path
}

fn canonical_cwd(t: &Tau) -> PathBuf {
    t.cwd().canonicalize().unwrap()
}

// ---------------------------------------------------------------------------------------------
// The file and its write policy

#[test]
fn the_file_is_written_with_the_first_reply_in_pi_format() {
    let (mock, mut t) = setup();
    let before = state(&mut t);
    let file = PathBuf::from(before["sessionFile"].as_str().unwrap());
    assert!(!file.exists(), "nothing is written before the first reply");

    mock.push(Reply::text("Hi there").delay_ms(500).usage(12, 3, 0, 0));
    t.send(&json!({"id": "p", "type": "prompt", "message": "hello"}));
    t.wait_for("message_end of the user", Duration::from_secs(15), |r| {
        r.kind() == Some("message_end")
            && r.json
                .as_ref()
                .is_some_and(|j| j["message"]["role"] == "user")
    });
    assert!(
        !file.exists(),
        "still nothing on disk before the assistant message"
    );
    t.event("agent_settled");
    assert!(file.exists(), "written once the assistant message ended");

    let after = state(&mut t);
    assert_eq!(after["sessionFile"], before["sessionFile"]);
    assert_eq!(after["sessionId"], before["sessionId"]);
    let lines = lines(&file);
    assert_eq!(lines.len(), 5, "{lines:#?}");
    let header = &lines[0];
    assert_eq!(keys(header), ["type", "version", "id", "timestamp", "cwd"]);
    assert_eq!(header["type"], "session");
    assert_eq!(header["version"], 3);
    assert_eq!(header["id"], after["sessionId"]);
    assert!(is_iso_timestamp(&header["timestamp"]), "{header}");
    assert_eq!(header["cwd"], json!(canonical_cwd(&t).to_str().unwrap()));

    assert_eq!(lines[1]["type"], "model_change");
    assert_eq!(lines[1]["provider"], "mock");
    assert_eq!(lines[1]["modelId"], "mock-1");
    assert_eq!(lines[2]["type"], "thinking_level_change");
    assert_eq!(lines[2]["thinkingLevel"], after["thinkingLevel"]);
    assert_eq!(lines[3]["type"], "message");
    assert_eq!(lines[3]["message"]["role"], "user");
    assert_eq!(text_of(&lines[3]["message"]), "hello");
    assert_eq!(lines[4]["type"], "message");
    assert_eq!(lines[4]["message"]["role"], "assistant");
    assert_eq!(text_of(&lines[4]["message"]), "Hi there");
    assert_eq!(lines[4]["message"]["usage"]["input"], 12);
    assert_chain(&lines[1..], None);

    // The stored messages are exactly the context.
    let stored: Vec<Value> = lines[3..].iter().map(|e| e["message"].clone()).collect();
    assert_eq!(messages(&mut t), stored);
    // File name: <ISO with - for : and .>_<id>.jsonl
    let name = file.file_name().unwrap().to_str().unwrap().to_string();
    let stamp = header["timestamp"]
        .as_str()
        .unwrap()
        .replace([':', '.'], "-");
    assert_eq!(
        name,
        format!("{stamp}_{}.jsonl", after["sessionId"].as_str().unwrap())
    );
}

#[test]
fn each_later_entry_is_appended_as_it_happens() {
    let (mock, mut t) = setup();
    exchange(&mock, &mut t, "first", "one");
    let file = session_file(&mut t);
    assert_eq!(lines(&file).len(), 5);
    // A setting change is one more line at once, chained to the leaf.
    ok(
        &mut t,
        json!({"type": "set_thinking_level", "level": "low"}),
    );
    let after_level = lines(&file);
    assert_eq!(after_level.len(), 6);
    assert_eq!(after_level[5]["type"], "thinking_level_change");
    assert_eq!(after_level[5]["thinkingLevel"], "low");
    // A slow reply: the user line lands before the assistant has finished.
    let chunks: Vec<String> = (0..40).map(|i| format!("w{i} ")).collect();
    mock.push(Reply::new().text_chunks(chunks).chunk_delay_ms(25));
    t.send(&json!({"id": "p", "type": "prompt", "message": "second"}));
    t.event("message_update");
    wait_until("the user entry on disk", Duration::from_secs(5), || {
        std::fs::read_to_string(&file).unwrap().lines().count() == 7
    });
    t.event("agent_settled");
    let all = lines(&file);
    assert_eq!(all.len(), 8);
    assert_eq!(text_of(&all[6]["message"]), "second");
    assert_eq!(all[7]["message"]["role"], "assistant");
    assert_chain(&all[1..], None);
}

// ---------------------------------------------------------------------------------------------
// set_session_name

#[test]
fn session_name_is_announced_and_recorded_in_the_file() {
    let (mock, mut t) = setup();
    // Before the first reply the entry is held in memory and written with the rest.
    t.send(&json!({"id": "n1", "type": "set_session_name", "name": "  early name "}));
    assert_eq!(
        t.event("session_info_changed"),
        json!({"type": "session_info_changed", "name": "early name"})
    );
    assert_eq!(t.response("n1")["success"], true);
    let file = session_file(&mut t);
    assert!(!file.exists());
    exchange(&mock, &mut t, "hello", "hi");
    let first = lines(&file);
    let info: Vec<&Value> = first
        .iter()
        .filter(|e| e["type"] == "session_info")
        .collect();
    assert_eq!(info.len(), 1, "{first:#?}");
    assert_eq!(info[0]["name"], "early name");

    t.send(&json!({"id": "n2", "type": "set_session_name", "name": "later name"}));
    assert_eq!(t.event("session_info_changed")["name"], "later name");
    assert_eq!(t.response("n2")["success"], true);
    let event_pos = t
        .history()
        .iter()
        .rposition(|r| r.kind() == Some("session_info_changed"))
        .unwrap();
    let response_pos = t
        .history()
        .iter()
        .position(|r| r.json.as_ref().is_some_and(|j| j["id"] == "n2"))
        .unwrap();
    assert!(event_pos < response_pos, "the event precedes the response");
    let all = lines(&file);
    let last = all.last().unwrap();
    assert_eq!(last["type"], "session_info");
    assert_eq!(last["name"], "later name");
    assert_chain(&all[1..], None);
    assert_eq!(state(&mut t)["sessionName"], "later name");

    assert_eq!(
        fails(&mut t, json!({"type": "set_session_name", "name": " \t "})),
        "Session name cannot be empty"
    );
    assert_eq!(
        lines(&file).len(),
        all.len(),
        "a refused name writes nothing"
    );
    assert_eq!(state(&mut t)["sessionName"], "later name");
}

// ---------------------------------------------------------------------------------------------
// new_session

#[test]
fn new_session_starts_fresh_and_records_its_parent() {
    let (mock, mut t) = setup();
    exchange(&mock, &mut t, "hello", "hi");
    let old = state(&mut t);

    assert_eq!(
        ok(&mut t, json!({"type": "new_session"})),
        json!({"cancelled": false})
    );
    let fresh = state(&mut t);
    assert_ne!(fresh["sessionId"], old["sessionId"]);
    assert_ne!(fresh["sessionFile"], old["sessionFile"]);
    assert_eq!(fresh["messageCount"], 0);
    assert_eq!(messages(&mut t), Vec::<Value>::new());
    assert!(fresh.get("sessionName").is_none());
    let fresh_file = PathBuf::from(fresh["sessionFile"].as_str().unwrap());
    let old_file = PathBuf::from(old["sessionFile"].as_str().unwrap());
    assert_eq!(
        fresh_file.parent(),
        old_file.parent(),
        "same session directory"
    );
    assert!(!fresh_file.exists(), "lazy: not written before a reply");
    exchange(&mock, &mut t, "in the new one", "ok");
    let header = &lines(&fresh_file)[0];
    assert!(header.get("parentSession").is_none(), "{header}");
    assert_eq!(lines(&old_file).len(), 5, "the old file is left alone");

    let parent = "/some/where/parent file.jsonl";
    assert_eq!(
        ok(
            &mut t,
            json!({"type": "new_session", "parentSession": parent})
        ),
        json!({"cancelled": false})
    );
    let third = state(&mut t);
    assert_ne!(third["sessionId"], fresh["sessionId"]);
    let third_file = PathBuf::from(third["sessionFile"].as_str().unwrap());
    exchange(&mock, &mut t, "third", "ok");
    let third_lines = lines(&third_file);
    assert_eq!(third_lines[0]["parentSession"], parent, "copied verbatim");
    assert_eq!(third_lines[0]["id"], third["sessionId"]);
    assert_eq!(third_lines[1]["type"], "model_change");
    assert_eq!(third_lines[2]["type"], "thinking_level_change");
    assert_chain(&third_lines[1..], None);
}

// ---------------------------------------------------------------------------------------------
// switch_session

#[test]
fn switch_session_restores_a_session_and_refuses_bad_files() {
    let (mock, mut t) = setup();
    exchange(&mock, &mut t, "alpha question", "alpha answer");
    ok(&mut t, json!({"type": "set_session_name", "name": "alpha"}));
    let first = state(&mut t);
    let first_messages = messages(&mut t);
    assert_eq!(first_messages.len(), 2);

    ok(&mut t, json!({"type": "new_session"}));
    exchange(&mock, &mut t, "beta question", "beta answer");
    let second = state(&mut t);

    let data = ok(
        &mut t,
        json!({"type": "switch_session", "sessionPath": first["sessionFile"]}),
    );
    assert_eq!(data, json!({"cancelled": false}));
    let back = state(&mut t);
    assert_eq!(back["sessionId"], first["sessionId"]);
    assert_eq!(back["sessionFile"], first["sessionFile"]);
    assert_eq!(back["sessionName"], "alpha");
    assert_eq!(back["messageCount"], 2);
    assert_eq!(messages(&mut t), first_messages);

    // A missing file is an error (tau, decision 13), and nothing changes.
    let missing = t.cwd().join("no-such-session.jsonl");
    let error = fails(
        &mut t,
        json!({"type": "switch_session", "sessionPath": missing.to_str().unwrap()}),
    );
    assert!(error.contains("no-such-session.jsonl"), "{error}");
    assert!(
        !missing.exists(),
        "no file is created for a missing session"
    );
    // A file that is not a session file is an error too, and is not overwritten.
    let junk = t.cwd().join("notes.jsonl");
    std::fs::write(&junk, "hello\nnot a session\n").unwrap();
    let error = fails(
        &mut t,
        json!({"type": "switch_session", "sessionPath": junk.to_str().unwrap()}),
    );
    assert!(error.contains("notes.jsonl"), "{error}");
    assert_eq!(
        std::fs::read_to_string(&junk).unwrap(),
        "hello\nnot a session\n"
    );
    // A header whose cwd is gone: pi's error.
    let orphan = t.cwd().join("orphan.jsonl");
    let gone = t.cwd().join("gone-dir");
    let mut orphan_text = std::fs::read_to_string(second["sessionFile"].as_str().unwrap()).unwrap();
    let original_cwd = canonical_cwd(&t);
    orphan_text = orphan_text.replacen(
        &format!("\"cwd\":\"{}\"", original_cwd.to_str().unwrap()),
        &format!("\"cwd\":\"{}\"", gone.to_str().unwrap()),
        1,
    );
    // Another id, so that it is a different session than the one still open.
    let second_id = second["sessionId"].as_str().unwrap();
    orphan_text = orphan_text.replacen(second_id, "01a2009e-0000-7000-8000-000000000000", 1);
    std::fs::write(&orphan, orphan_text).unwrap();
    let error = fails(
        &mut t,
        json!({"type": "switch_session", "sessionPath": orphan.to_str().unwrap()}),
    );
    assert!(
        error.starts_with("Stored session working directory does not exist: "),
        "{error}"
    );

    // Still in the first session, and still working.
    let still = state(&mut t);
    assert_eq!(still["sessionId"], first["sessionId"]);
    assert_eq!(messages(&mut t), first_messages);
    let records = exchange(&mock, &mut t, "still there?", "yes");
    assert!(records.iter().any(|r| r["type"] == "agent_end"));
    let file = lines(Path::new(first["sessionFile"].as_str().unwrap()));
    assert_eq!(text_of(&file[file.len() - 2]["message"]), "still there?");
    assert_chain(&file[1..], None);

    // The second file kept its own content.
    let second_lines = lines(Path::new(second["sessionFile"].as_str().unwrap()));
    assert_eq!(text_of(&second_lines[3]["message"]), "beta question");
}

#[test]
fn switch_session_to_the_open_file_and_by_relative_path() {
    let (mock, mut t) = setup();
    exchange(&mock, &mut t, "hello", "hi");
    let before = state(&mut t);
    let before_messages = messages(&mut t);
    // Re-opening the file that is open must not trip over the process's own lock.
    ok(
        &mut t,
        json!({"type": "switch_session", "sessionPath": before["sessionFile"]}),
    );
    assert_eq!(state(&mut t)["sessionId"], before["sessionId"]);
    assert_eq!(messages(&mut t), before_messages);
    exchange(&mock, &mut t, "again", "hi again");
    assert_eq!(
        lines(Path::new(before["sessionFile"].as_str().unwrap())).len(),
        7
    );

    // A relative path resolves against the process's working directory.
    ok(&mut t, json!({"type": "new_session"}));
    let copy = t.cwd().join("copy.jsonl");
    std::fs::copy(before["sessionFile"].as_str().unwrap(), &copy).unwrap();
    ok(
        &mut t,
        json!({"type": "switch_session", "sessionPath": "copy.jsonl"}),
    );
    let s = state(&mut t);
    assert_eq!(s["sessionId"], before["sessionId"], "same header id");
    let reported = PathBuf::from(s["sessionFile"].as_str().unwrap());
    assert!(reported.is_absolute(), "{}", reported.display());
    assert_eq!(
        reported.canonicalize().unwrap(),
        copy.canonicalize().unwrap()
    );
    assert_eq!(messages(&mut t).len(), 4);
}

// ---------------------------------------------------------------------------------------------
// fork, clone, get_fork_messages

fn two_exchanges(mock: &BackgroundMock, t: &mut Tau) -> (PathBuf, Vec<Value>) {
    exchange(mock, t, "first question", "first answer");
    exchange(mock, t, "second question", "second answer");
    let file = session_file(t);
    (file.clone(), lines(&file))
}

#[test]
fn get_fork_messages_lists_user_entries_in_file_order() {
    let (mock, mut t) = setup();
    let (_, file) = two_exchanges(&mock, &mut t);
    let users = user_entries(&file);
    let listed = ok(&mut t, json!({"type": "get_fork_messages"}));
    assert_eq!(
        listed,
        json!({"messages": [
            {"entryId": users[0]["id"], "text": "first question"},
            {"entryId": users[1]["id"], "text": "second question"},
        ]})
    );
    assert_eq!(keys(&listed["messages"][0]), ["entryId", "text"]);
}

#[test]
fn fork_before_the_second_user_message() {
    let (mock, mut t) = setup();
    let (old_file, old_lines) = two_exchanges(&mock, &mut t);
    let old = state(&mut t);
    let old_messages = messages(&mut t);
    let second = ok(&mut t, json!({"type": "get_fork_messages"}))["messages"][1].clone();
    assert_eq!(second["text"], "second question");

    let data = ok(
        &mut t,
        json!({"type": "fork", "entryId": second["entryId"]}),
    );
    assert_eq!(data, json!({"text": "second question", "cancelled": false}));
    let forked = state(&mut t);
    assert_ne!(forked["sessionId"], old["sessionId"]);
    assert_ne!(forked["sessionFile"], old["sessionFile"]);
    assert_eq!(
        messages(&mut t),
        old_messages[..2].to_vec(),
        "everything before it"
    );
    assert_eq!(forked["messageCount"], 2);

    // The path holds an assistant message, so the new file exists at once, with the same
    // entry ids up to the fork point and the old file as parent.
    let new_file = PathBuf::from(forked["sessionFile"].as_str().unwrap());
    let new_lines = lines(&new_file);
    assert_eq!(new_lines[0]["id"], forked["sessionId"]);
    assert_eq!(
        new_lines[0]["parentSession"],
        json!(old_file.to_str().unwrap())
    );
    let fork_at = old_lines
        .iter()
        .position(|e| e["id"] == second["entryId"])
        .unwrap();
    assert_eq!(
        new_lines[1..],
        old_lines[1..fork_at],
        "copied entries keep their ids"
    );
    assert_eq!(lines(&old_file), old_lines, "the old file is untouched");

    // The fork goes on from there.
    exchange(&mock, &mut t, "another second", "another answer");
    let grown = lines(&new_file);
    assert_eq!(grown.len(), new_lines.len() + 2);
    assert_eq!(
        grown[new_lines.len()]["parentId"],
        new_lines.last().unwrap()["id"]
    );
    assert_chain(&grown[1..], None);
    // What the model saw: the first exchange, then the new question.
    let sent = mock.requests().last().unwrap().body["messages"].to_string();
    assert!(
        sent.contains("first answer") && !sent.contains("second question"),
        "{sent}"
    );

    for bad in [json!("nope1234"), old_lines[4]["id"].clone()] {
        assert_eq!(
            fails(&mut t, json!({"type": "fork", "entryId": bad})),
            "Invalid entry ID for forking",
            "{bad} is not a user message"
        );
    }
}

#[test]
fn fork_before_the_first_user_message_gives_an_empty_session() {
    let (mock, mut t) = setup();
    let (old_file, _) = two_exchanges(&mock, &mut t);
    let first = ok(&mut t, json!({"type": "get_fork_messages"}))["messages"][0].clone();
    let data = ok(&mut t, json!({"type": "fork", "entryId": first["entryId"]}));
    assert_eq!(data, json!({"text": "first question", "cancelled": false}));
    assert_eq!(messages(&mut t), Vec::<Value>::new());
    exchange(&mock, &mut t, "fresh start", "ok");
    let new_lines = lines(&session_file(&mut t));
    assert_eq!(
        new_lines[0]["parentSession"],
        json!(old_file.to_str().unwrap())
    );
    assert_eq!(
        user_entries(&new_lines)
            .iter()
            .map(|e| text_of(&e["message"]))
            .collect::<Vec<_>>(),
        ["fresh start"]
    );
}

#[test]
fn clone_copies_the_active_branch_with_its_ids() {
    let (mock, mut t) = setup();
    let (old_file, old_lines) = two_exchanges(&mock, &mut t);
    let old = state(&mut t);
    let old_messages = messages(&mut t);

    assert_eq!(
        ok(&mut t, json!({"type": "clone"})),
        json!({"cancelled": false})
    );
    let cloned = state(&mut t);
    assert_ne!(cloned["sessionId"], old["sessionId"]);
    assert_eq!(messages(&mut t), old_messages);
    let new_file = PathBuf::from(cloned["sessionFile"].as_str().unwrap());
    let new_lines = lines(&new_file);
    assert_eq!(
        new_lines[0]["parentSession"],
        json!(old_file.to_str().unwrap())
    );
    assert_eq!(new_lines[0]["id"], cloned["sessionId"]);
    assert_eq!(new_lines[1..], old_lines[1..], "same entries, same ids");

    exchange(&mock, &mut t, "after clone", "ok");
    assert_eq!(lines(&old_file), old_lines, "appends go to the clone only");
    assert_eq!(lines(&new_file).len(), old_lines.len() + 2);
}

// ---------------------------------------------------------------------------------------------
// branch / get_branch_messages (xcsh)

#[test]
fn branch_is_xcsh_s_fork() {
    let (mock, mut t) = setup();
    let (old_file, old_lines) = two_exchanges(&mock, &mut t);
    let old_messages = messages(&mut t);
    let users = user_entries(&old_lines);
    let listed = ok(&mut t, json!({"type": "get_branch_messages"}));
    assert_eq!(
        listed,
        json!({"messages": [
            {"entryId": users[0]["id"], "text": "first question"},
            {"entryId": users[1]["id"], "text": "second question"},
        ]})
    );
    let old_id = state(&mut t)["sessionId"].clone();
    let data = ok(&mut t, json!({"type": "branch", "entryId": users[1]["id"]}));
    assert_eq!(data, json!({"text": "second question", "cancelled": false}));
    let s = state(&mut t);
    assert_ne!(s["sessionId"], old_id);
    assert_eq!(messages(&mut t), old_messages[..2].to_vec());
    let new_lines = lines(Path::new(s["sessionFile"].as_str().unwrap()));
    assert_eq!(
        new_lines[0]["parentSession"],
        json!(old_file.to_str().unwrap())
    );

    let r = t.request(json!({"type": "branch", "entryId": "00000000"}));
    assert_eq!(r["success"], false, "{r}");
    assert_eq!(
        r["command"], "branch",
        "answered as a branch response with its id: {r}"
    );
    assert_eq!(r["error"], "Invalid entry ID for branching");
}

// ---------------------------------------------------------------------------------------------
// get_entries / get_tree (pi 1.x, decision 3)

#[test]
fn get_entries_and_get_tree_follow_the_file() {
    let (mock, mut t) = setup();
    let (_, file) = two_exchanges(&mock, &mut t);
    let entries = ok(&mut t, json!({"type": "get_entries"}));
    assert_eq!(keys(&entries), ["entries", "leafId"]);
    assert_eq!(
        entries["entries"].as_array().unwrap()[..],
        file[1..],
        "no header, file order"
    );
    assert_eq!(entries["leafId"], file.last().unwrap()["id"]);

    let since = ok(
        &mut t,
        json!({"type": "get_entries", "since": file[4]["id"]}),
    );
    assert_eq!(
        since["entries"].as_array().unwrap()[..],
        file[5..],
        "entries after `since`"
    );
    let error = fails(&mut t, json!({"type": "get_entries", "since": "ffffffff"}));
    assert_eq!(error, "Entry not found: ffffffff");

    let tree = ok(&mut t, json!({"type": "get_tree"}));
    assert_eq!(tree["leafId"], entries["leafId"]);
    // A linear file is a chain of single children.
    let mut level = tree["tree"].as_array().unwrap().clone();
    for expected in &file[1..] {
        assert_eq!(level.len(), 1, "{tree}");
        assert_eq!(&level[0]["entry"], expected);
        level = level[0]["children"].as_array().unwrap().clone();
    }
    assert!(level.is_empty());
}

#[test]
fn navigate_tree_moves_the_leaf_and_hands_back_a_user_message() {
    // tau's `navigate_tree` (the terminal's `/tree`): going to a user message leaves the leaf
    // on its parent and answers the text for the editor; going to an assistant message makes
    // it the leaf; the file keeps every entry, the next prompt starts a branch.
    let (mock, mut t) = setup();
    let (path, file) = two_exchanges(&mock, &mut t);
    let users = user_entries(&file);
    let first_answer = file
        .iter()
        .find(|e| e["message"]["role"] == "assistant")
        .unwrap()
        .clone();

    let moved = ok(
        &mut t,
        json!({"type": "navigate_tree", "targetId": users[1]["id"]}),
    );
    assert_eq!(
        moved,
        json!({"cancelled": false, "editorText": "second question"})
    );
    assert_eq!(
        ok(&mut t, json!({"type": "get_tree"}))["leafId"],
        first_answer["id"],
        "the leaf is the user message's parent"
    );
    let texts: Vec<String> = messages(&mut t).iter().map(text_of).collect();
    assert_eq!(texts, ["first question", "first answer"]);

    exchange(&mock, &mut t, "another second question", "another answer");
    let after = lines(&path);
    assert!(
        file.iter().all(|e| after.contains(e)),
        "no entry of the old branch is lost"
    );
    let newest_user = *user_entries(&after).last().unwrap();
    assert_eq!(newest_user["parentId"], first_answer["id"], "a new branch");

    // An assistant message becomes the leaf itself; the answer has no editor text.
    let moved = ok(
        &mut t,
        json!({"type": "navigate_tree", "targetId": first_answer["id"]}),
    );
    assert_eq!(moved, json!({"cancelled": false}));
    assert_eq!(
        ok(&mut t, json!({"type": "get_tree"}))["leafId"],
        first_answer["id"]
    );
    assert_eq!(
        fails(
            &mut t,
            json!({"type": "navigate_tree", "targetId": "ffffffff"})
        ),
        "Entry ffffffff not found"
    );
    assert!(
        fails(&mut t, json!({"type": "navigate_tree"})).contains("targetId"),
        "the missing field is named"
    );

    // During a run the leaf stays where the run writes: refused at once, the run unharmed.
    mock.push(Reply::text("slow answer").delay_ms(500));
    t.send(&json!({"id": "slow", "type": "prompt", "message": "a slow one"}));
    assert_eq!(
        fails(
            &mut t,
            json!({"type": "navigate_tree", "targetId": first_answer["id"]})
        ),
        "Cannot navigate the tree while the agent is running; wait for it or abort"
    );
    t.event("agent_settled");
    let texts: Vec<String> = messages(&mut t).iter().map(text_of).collect();
    assert_eq!(
        texts,
        [
            "first question",
            "first answer",
            "a slow one",
            "slow answer"
        ]
    );
}

/// pi's main fixture with the fork's own entries appended: a real tree in one file, whose
/// last entry (the leaf on load) is on the second branch.
fn branched_fixture(dir: &Path, cwd: &Path) -> (PathBuf, Vec<Value>) {
    let main = install_fixture("pi-079-main.jsonl", dir, cwd);
    let main_lines = lines(&main);
    let fork_lines = lines(&Path::new(FIXTURES).join("pi-079-fork.jsonl"));
    let mut text = std::fs::read_to_string(&main).unwrap();
    for entry in &fork_lines[1..] {
        if !main_lines.iter().any(|e| e["id"] == entry["id"]) {
            text.push_str(&serde_json::to_string(entry).unwrap());
            text.push('\n');
        }
    }
    let path = dir.join("pi-079-tree.jsonl");
    std::fs::write(&path, text).unwrap();
    (path.clone(), lines(&path))
}

#[test]
fn a_branched_file_loads_the_last_branch_and_shows_the_tree() {
    let (_mock, mut t) = setup();
    let cwd = canonical_cwd(&t);
    let (path, file) = branched_fixture(&cwd, &cwd);
    ok(
        &mut t,
        json!({"type": "switch_session", "sessionPath": path.to_str().unwrap()}),
    );

    let expected = active_branch_messages(&file);
    assert_eq!(text_of(expected.last().unwrap()), "Forked answer.");
    assert_eq!(projections(&messages(&mut t)), projections(&expected));

    // Fork messages span both branches, in file order.
    let listed = ok(&mut t, json!({"type": "get_fork_messages"}))["messages"].clone();
    let texts: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        texts,
        [
            "List the files here.",
            "And what is in hello.txt?",
            "A different second question."
        ]
    );

    let tree = ok(&mut t, json!({"type": "get_tree"}));
    assert_eq!(tree["leafId"], file.last().unwrap()["id"]);
    let info_id = file.iter().find(|e| e["type"] == "session_info").unwrap()["id"].clone();
    fn find<'a>(nodes: &'a [Value], id: &Value) -> Option<&'a Value> {
        nodes.iter().find_map(|n| {
            if &n["entry"]["id"] == id {
                Some(n)
            } else {
                find(n["children"].as_array()?, id)
            }
        })
    }
    let roots = tree["tree"].as_array().unwrap();
    assert_eq!(roots.len(), 1);
    let info = find(roots, &info_id).expect("session_info node");
    let children: Vec<String> = info["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| text_of(&c["entry"]["message"]))
        .collect();
    assert_eq!(
        children,
        ["And what is in hello.txt?", "A different second question."]
    );
    let entries = ok(&mut t, json!({"type": "get_entries"}));
    assert_eq!(entries["entries"].as_array().unwrap()[..], file[1..]);
}

// ---------------------------------------------------------------------------------------------
// get_session_stats

#[test]
fn session_stats_count_messages_and_sum_usage() {
    let (mock, mut t) = setup_full("anthropic-messages", |b| {
        b.cwd_file("notes.txt", "some notes\n")
    });
    mock.push(
        Reply::new()
            .with_text("Reading.")
            .tool_call("toolu_1", "read", json!({"path": "notes.txt"}))
            .usage(100, 20, 10, 5),
    );
    mock.push(Reply::text("It says some notes.").usage(200, 30, 0, 0));
    run(&mut t, "what is in notes.txt?");
    let s = state(&mut t);
    let stats = ok(&mut t, json!({"type": "get_session_stats"}));
    assert_eq!(stats["sessionFile"], s["sessionFile"]);
    assert_eq!(stats["sessionId"], s["sessionId"]);
    assert_eq!(stats["userMessages"], 1);
    assert_eq!(stats["assistantMessages"], 2);
    assert_eq!(stats["toolCalls"], 1);
    assert_eq!(stats["toolResults"], 1);
    assert_eq!(stats["totalMessages"], 4);
    assert_eq!(
        stats["tokens"],
        json!({"input": 300, "output": 50, "cacheRead": 10, "cacheWrite": 5, "total": 365})
    );
    assert_eq!(stats["cost"].as_f64(), Some(0.0));
    let usage = &stats["contextUsage"];
    assert_eq!(usage["contextWindow"], 100000);
    // The last assistant message's usage, nothing after it.
    assert_eq!(usage["tokens"], 230);
    let percent = usage["percent"].as_f64().unwrap();
    assert!((percent - 0.23).abs() < 1e-9, "{percent}");

    // The counts follow the context: a new session starts at zero.
    ok(&mut t, json!({"type": "new_session"}));
    let empty = ok(&mut t, json!({"type": "get_session_stats"}));
    assert_eq!(empty["totalMessages"], 0);
    assert_eq!(empty["tokens"]["total"], 0);
    assert_ne!(empty["sessionId"], stats["sessionId"]);
}

// ---------------------------------------------------------------------------------------------
// export_html

#[test]
fn export_html_needs_a_written_session() {
    let (_mock, mut t) = setup();
    assert_eq!(
        fails(&mut t, json!({"type": "export_html"})),
        "Nothing to export yet - start a conversation first"
    );
    let mock = MockServer::start_background().unwrap();
    let mut memory = ready_tau(builder(&mock, "openai-completions").arg("--no-session"));
    assert_eq!(
        fails(&mut memory, json!({"type": "export_html"})),
        "Cannot export in-memory session to HTML"
    );
    // Also after a conversation: in memory is in memory.
    exchange(&mock, &mut memory, "hello", "hi");
    assert_eq!(
        fails(&mut memory, json!({"type": "export_html"})),
        "Cannot export in-memory session to HTML"
    );
}

#[test]
fn export_html_writes_next_to_the_process_or_where_asked() {
    let (mock, mut t) = setup();
    exchange(
        &mock,
        &mut t,
        "Please export this conversation",
        "Certainly",
    );
    let file = session_file(&mut t);
    let stem = file.file_stem().unwrap().to_str().unwrap().to_string();
    let data = ok(&mut t, json!({"type": "export_html"}));
    let expected = format!("pi-session-{stem}.html");
    assert_eq!(
        data,
        json!({"path": expected}),
        "relative, as pi reports it"
    );
    let html = std::fs::read_to_string(t.cwd().join(&expected)).unwrap();
    assert!(html.contains("Please export this conversation"));
    assert!(html.contains("Certainly"));
    assert!(
        html.trim_start()
            .to_ascii_lowercase()
            .starts_with("<!doctype html")
    );

    let out = t.cwd().join("exports").join("mine.html");
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    let data = ok(
        &mut t,
        json!({"type": "export_html", "outputPath": out.to_str().unwrap()}),
    );
    assert_eq!(data["path"], json!(out.to_str().unwrap()));
    assert!(
        std::fs::read_to_string(&out)
            .unwrap()
            .contains("Please export this conversation")
    );
    // A relative outputPath is relative to the process cwd.
    let data = ok(
        &mut t,
        json!({"type": "export_html", "outputPath": "rel.html"}),
    );
    assert_eq!(data["path"], "rel.html");
    assert!(t.cwd().join("rel.html").exists());
}

// ---------------------------------------------------------------------------------------------
// --continue, --session

#[test]
fn continue_reopens_the_most_recent_session() {
    let (mock, mut t) = setup();
    exchange(&mock, &mut t, "remember me", "I will");
    let first = state(&mut t);
    let first_messages = messages(&mut t);
    let dirs = t.dirs();
    t.close_stdin();
    assert!(
        t.wait_exit(Duration::from_secs(15)).success(),
        "{}",
        t.stderr()
    );
    drop(t);

    let mut again = ready_tau(
        builder(&mock, "openai-completions")
            .dirs(dirs.clone())
            .arg("--continue"),
    );
    let s = state(&mut again);
    assert_eq!(s["sessionId"], first["sessionId"]);
    assert_eq!(s["sessionFile"], first["sessionFile"]);
    assert_eq!(messages(&mut again), first_messages);
    exchange(&mock, &mut again, "still me?", "yes");
    let file = lines(Path::new(first["sessionFile"].as_str().unwrap()));
    assert_eq!(file.len(), 7);
    assert_eq!(file.iter().filter(|e| e["type"] == "session").count(), 1);
    assert_chain(&file[1..], None);
    // The model saw the earlier exchange.
    let sent = mock.requests().last().unwrap().body["messages"].to_string();
    assert!(
        sent.contains("remember me") && sent.contains("I will"),
        "{sent}"
    );
    again.close_stdin();
    assert!(again.wait_exit(Duration::from_secs(15)).success());
    drop(again);

    // Without --continue the same directory gets a new session.
    let mut fresh = ready_tau(builder(&mock, "openai-completions").dirs(dirs.clone()));
    assert_ne!(state(&mut fresh)["sessionId"], first["sessionId"]);
    fresh.close_stdin();
    fresh.wait_exit(Duration::from_secs(15));
    drop(fresh);

    // --session by path and by id prefix.
    let path = first["sessionFile"].as_str().unwrap().to_string();
    let mut by_path = ready_tau(
        builder(&mock, "openai-completions")
            .dirs(dirs.clone())
            .arg("--session")
            .arg(&path),
    );
    assert_eq!(state(&mut by_path)["sessionId"], first["sessionId"]);
    assert_eq!(messages(&mut by_path).len(), 4);
    by_path.close_stdin();
    by_path.wait_exit(Duration::from_secs(15));
    drop(by_path);

    let prefix = first["sessionId"].as_str().unwrap()[..13].to_string();
    let mut by_id = ready_tau(
        builder(&mock, "openai-completions")
            .dirs(dirs)
            .arg("--session")
            .arg(&prefix),
    );
    assert_eq!(state(&mut by_id)["sessionId"], first["sessionId"]);
    assert_eq!(state(&mut by_id)["sessionFile"], first["sessionFile"]);
}

#[test]
fn session_flag_with_an_unknown_id_fails_at_startup() {
    let (status, stdout, stderr) = run_once(
        Path::new(env!("CARGO_BIN_EXE_tau")),
        &["--mode", "rpc", "--session", "nonexistent-id"],
        b"",
    );
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stdout.is_empty(), "{}", String::from_utf8_lossy(&stdout));
    assert!(
        stderr.contains("No session found matching 'nonexistent-id'"),
        "{stderr}"
    );
}

// ---------------------------------------------------------------------------------------------
// Crashes and second writers

#[test]
fn a_crash_mid_stream_leaves_a_session_that_continues() {
    let (mock, mut t) = setup();
    exchange(&mock, &mut t, "before the crash", "fine");
    let first = state(&mut t);
    let file = PathBuf::from(first["sessionFile"].as_str().unwrap());
    let chunks: Vec<String> = (0..400).map(|i| format!("tok{i} ")).collect();
    mock.push(Reply::new().text_chunks(chunks).chunk_delay_ms(20));
    t.send(&json!({"id": "p", "type": "prompt", "message": "the doomed question"}));
    for _ in 0..5 {
        t.event("message_update");
    }
    wait_until("the user entry on disk", Duration::from_secs(5), || {
        std::fs::read_to_string(&file)
            .unwrap()
            .contains("the doomed question")
    });
    t.signal(rustix::process::Signal::KILL);
    t.wait_exit(Duration::from_secs(10));
    let dirs = t.dirs();
    drop(t);

    // What a crash in the middle of a write leaves behind.
    let mut text = std::fs::read_to_string(&file).unwrap();
    text.push_str(r#"{"type":"message","id":"deadbeef","parentId":"#);
    std::fs::write(&file, &text).unwrap();

    let mut again = ready_tau(
        builder(&mock, "openai-completions")
            .dirs(dirs)
            .arg("--continue"),
    );
    let s = state(&mut again);
    assert_eq!(s["sessionId"], first["sessionId"]);
    let restored = messages(&mut again);
    let texts: Vec<String> = restored.iter().map(text_of).collect();
    assert_eq!(texts, ["before the crash", "fine", "the doomed question"]);

    exchange(&mock, &mut again, "after the crash", "recovered");
    let raw = std::fs::read_to_string(&file).unwrap();
    let all: Vec<&str> = raw.lines().collect();
    let parsed: Vec<Option<Value>> = all.iter().map(|l| serde_json::from_str(l).ok()).collect();
    let bad = parsed.iter().filter(|p| p.is_none()).count();
    assert!(bad <= 1, "at most the torn line is not JSON:\n{raw}");
    let valid: Vec<Value> = parsed.into_iter().flatten().collect();
    let n = valid.len();
    assert_eq!(text_of(&valid[n - 2]["message"]), "after the crash");
    assert_eq!(text_of(&valid[n - 1]["message"]), "recovered");
    let doomed = valid
        .iter()
        .find(|e| text_of(&e["message"]) == "the doomed question")
        .unwrap();
    assert_eq!(
        valid[n - 2]["parentId"],
        doomed["id"],
        "chained to the last good entry"
    );
    assert_chain(&valid[1..], None);
    assert!(raw.ends_with('\n'));
}

#[test]
fn a_second_process_does_not_write_to_an_open_session() {
    let (mock, mut t) = setup();
    exchange(&mock, &mut t, "owner prompt", "owner reply");
    let file = session_file(&mut t);
    let before = std::fs::read_to_string(&file).unwrap();

    // Same file through --session while the first process holds it.
    let mut second = builder(&mock, "openai-completions")
        .dirs(t.dirs())
        .arg("--session")
        .arg(file.to_str().unwrap())
        .spawn();
    let first = second.next_record(Duration::from_secs(15)).map(|r| r.json);
    match first {
        // Refused at startup.
        None => {
            let status = second.wait_exit(Duration::from_secs(15));
            assert_eq!(status.code(), Some(1));
            wait_until("stderr", Duration::from_secs(2), || {
                !second.stderr().is_empty()
            });
            let stderr = second.stderr();
            assert!(
                stderr.contains("in use") && stderr.contains(file.to_str().unwrap()),
                "{stderr}"
            );
        }
        // Started: then it must refuse to write.
        Some(record) => {
            assert_eq!(record.unwrap()["type"], "ready");
            mock.push(Reply::text("intruder reply"));
            second.send(&json!({"id": "x", "type": "prompt", "message": "intruder prompt"}));
            let r = second.response("x");
            if r["success"] == true {
                second.event("agent_settled");
            }
            let after = std::fs::read_to_string(&file).unwrap();
            assert!(!after.contains("intruder"), "silently appended:\n{after}");
            assert_eq!(r["success"], false, "the prompt must be refused: {r}");
        }
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), before);

    // switch_session from another process to the held file is an error response.
    let mut third = ready_tau(builder(&mock, "openai-completions"));
    let error = fails(
        &mut third,
        json!({"type": "switch_session", "sessionPath": file.to_str().unwrap()}),
    );
    assert!(error.contains("in use"), "{error}");
    // And the owner still writes.
    exchange(&mock, &mut t, "owner again", "ok");
    assert!(
        std::fs::read_to_string(&file)
            .unwrap()
            .contains("owner again")
    );
}

// ---------------------------------------------------------------------------------------------
// Files written by pi 0.79

#[test]
fn pi_079_session_files_open_and_continue_in_pi_format() {
    let (mock, mut t) = setup();
    let cwd = canonical_cwd(&t);
    let path = install_fixture("pi-079-main.jsonl", &cwd, &cwd);
    let original = std::fs::read_to_string(&path).unwrap();
    let file = lines(&path);
    ok(
        &mut t,
        json!({"type": "switch_session", "sessionPath": path.to_str().unwrap()}),
    );

    let s = state(&mut t);
    assert_eq!(s["sessionId"], file[0]["id"]);
    assert_eq!(s["sessionFile"], json!(path.to_str().unwrap()));
    assert_eq!(s["sessionName"], "fixture session");
    assert_eq!(s["thinkingLevel"], "high");
    assert_eq!(s["model"]["id"], "mock-1");
    assert_eq!(s["model"]["provider"], "mock");
    let expected = active_branch_messages(&file);
    assert_eq!(expected.len(), 6);
    let got = messages(&mut t);
    assert_eq!(projections(&got), projections(&expected));
    assert_eq!(got[1]["content"][2]["id"], "call_ls_1");
    assert_eq!(got[2]["toolCallId"], "call_ls_1");
    assert_eq!(
        ok(&mut t, json!({"type": "get_last_assistant_text"})),
        json!({"text": "It says: hello from the fixture."})
    );
    let forks = ok(&mut t, json!({"type": "get_fork_messages"}))["messages"].clone();
    assert_eq!(forks.as_array().unwrap().len(), 2);
    assert_eq!(forks[1]["entryId"], user_entries(&file)[1]["id"]);

    // One more exchange appends pi-shaped lines after the untouched original ones.
    exchange(&mock, &mut t, "one more", "done");
    let now = std::fs::read_to_string(&path).unwrap();
    assert!(
        now.starts_with(&original),
        "the existing lines are kept byte for byte"
    );
    let appended = lines(&path)[file.len()..].to_vec();
    assert_eq!(appended.len(), 2, "{appended:#?}");
    assert_chain(&appended, file.last().unwrap()["id"].as_str());
    assert_eq!(
        keys(&appended[0]),
        ["type", "id", "parentId", "timestamp", "message"]
    );
    assert_eq!(appended[0]["message"]["role"], "user");
    assert_eq!(
        appended[0]["message"]["content"],
        json!([{"type": "text", "text": "one more"}])
    );
    assert_eq!(appended[1]["message"]["role"], "assistant");
    assert_eq!(appended[1]["message"]["provider"], "mock");
    // The request carried pi's history.
    let sent = mock.requests().last().unwrap().body["messages"].to_string();
    assert!(
        sent.contains("call_ls_1") && sent.contains("hello from the fixture"),
        "{sent}"
    );

    // The fork file too: its header keeps pi's parentSession.
    let fork = install_fixture("pi-079-fork.jsonl", &cwd, &cwd);
    let fork_lines = lines(&fork);
    ok(
        &mut t,
        json!({"type": "switch_session", "sessionPath": fork.to_str().unwrap()}),
    );
    assert_eq!(state(&mut t)["sessionId"], fork_lines[0]["id"]);
    assert_eq!(
        projections(&messages(&mut t)),
        projections(&active_branch_messages(&fork_lines))
    );
    exchange(&mock, &mut t, "fork more", "ok");
    assert_eq!(lines(&fork)[0], fork_lines[0], "header untouched");
}

#[test]
fn pi_079_session_file_through_the_session_flag() {
    let mock = MockServer::start_background().unwrap();
    let dirs = tau_test_kit::Dirs::new();
    let cwd = dirs.cwd().canonicalize().unwrap();
    let path = install_fixture("pi-079-main.jsonl", &cwd, &cwd);
    let file = lines(&path);
    let mut t = ready_tau(
        builder(&mock, "openai-completions")
            .dirs(dirs)
            .arg("--session")
            .arg(path.to_str().unwrap()),
    );
    assert_eq!(state(&mut t)["sessionId"], file[0]["id"]);
    assert_eq!(
        projections(&messages(&mut t)),
        projections(&active_branch_messages(&file))
    );
}

#[test]
fn messages_right_after_a_switch_equal_the_parsed_ones() {
    let (_mock, mut t) = setup();
    let cwd = canonical_cwd(&t);
    let path = install_fixture("pi-079-main.jsonl", &cwd, &cwd);
    let expected = active_branch_messages(&lines(&path));
    ok(
        &mut t,
        json!({"type": "switch_session", "sessionPath": path.to_str().unwrap()}),
    );
    // Asked at once, the messages come from the file's bytes while it is still parsed.
    let early = ok(&mut t, json!({"type": "get_messages"}))["messages"].clone();
    // Any other command waits for the parse; then they come from the typed context.
    state(&mut t);
    let late = ok(&mut t, json!({"type": "get_messages"}))["messages"].clone();
    assert_eq!(early, late);
    assert_eq!(early, Value::Array(expected));
}

/// The lines of a session file that are JSON (a torn one is not).
fn readable_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// A session of `count` user/assistant messages with text full of escapes, where the last
/// two entries branch off the middle (so the active branch skips a run of entries), and a
/// torn line in the middle of the file that a crash left behind.
fn large_branched_session(dir: &Path, cwd: &Path, count: usize) -> PathBuf {
    let mut text = serde_json::to_string(&json!({"type": "session", "version": 3,
        "id": "0199aaaa-bbbb-7ccc-8ddd-eeeeffff0001", "timestamp": "2026-01-01T00:00:00.000Z",
        "cwd": cwd.to_str().unwrap()}))
    .unwrap();
    text.push('\n');
    let body = "line \"quoted\" \\ back\nslash\ttab é ".repeat(40);
    let entry = |i: usize, parent: Option<String>, role: &str| {
        let message = if role == "user" {
            json!({"role": "user", "content": [{"type": "text", "text": format!("{i} {body}")}],
                "timestamp": i})
        } else {
            json!({"role": "assistant", "content": [{"type": "text", "text": format!("{i} {body}")}],
                "api": "openai-completions", "provider": "mock", "model": "mock-1",
                "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0,
                    "totalTokens": 2, "cost": {"input": 0, "output": 0, "cacheRead": 0,
                    "cacheWrite": 0, "total": 0}},
                "stopReason": "stop", "timestamp": i})
        };
        serde_json::to_string(&json!({"type": "message", "id": format!("{i:08x}"),
            "parentId": parent, "timestamp": "2026-01-01T00:00:00.000Z", "message": message}))
        .unwrap()
    };
    let mut parent = None;
    for i in 0..count {
        text.push_str(&entry(
            i,
            parent.clone(),
            if i % 2 == 0 { "user" } else { "assistant" },
        ));
        text.push('\n');
        if i == count / 2 {
            // A crash cut this line short; the next append started a new line.
            let torn = entry(900_000, Some(format!("{i:08x}")), "user");
            text.push_str(&torn[..torn.len() / 2]);
            text.push('\n');
        }
        parent = Some(format!("{i:08x}"));
    }
    // The branch: two entries whose chain leaves out the last third of the file.
    let branch_from = format!("{:08x}", count / 3 * 2 - 1);
    text.push_str(&entry(1_000_000, Some(branch_from), "user"));
    text.push('\n');
    text.push_str(&entry(
        1_000_001,
        Some(format!("{:08x}", 1_000_000)),
        "assistant",
    ));
    text.push('\n');
    let path = dir.join("large-branched.jsonl");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_large_branched_session_is_served_from_the_file_as_it_is_parsed() {
    let (_mock, mut t) = setup();
    let cwd = canonical_cwd(&t);
    let path = large_branched_session(&cwd, &cwd, 1200);
    let file = readable_lines(&path);
    let expected = active_branch_messages(&file);
    assert_eq!(expected.len(), 1200 / 3 * 2 + 2);
    ok(
        &mut t,
        json!({"type": "switch_session", "sessionPath": path.to_str().unwrap()}),
    );
    // Over a megabyte of messages, written straight from the file's bytes, then a response
    // to the next command on its own line.
    t.send(&json!({"id": "early", "type": "get_messages"}));
    t.send(&json!({"id": "after", "type": "get_state"}));
    let early = t.response("early");
    assert!(early.to_string().len() > 1 << 20);
    assert_eq!(early["data"]["messages"], Value::Array(expected.clone()));
    assert_eq!(t.response("after")["data"]["messageCount"], expected.len());
    let late = ok(&mut t, json!({"type": "get_messages"}))["messages"].clone();
    assert_eq!(late, Value::Array(expected));
}

#[test]
fn a_session_switched_away_from_is_free_for_another_process() {
    let (mock, mut t) = setup();
    exchange(&mock, &mut t, "first prompt", "first reply");
    let first = session_file(&mut t);
    ok(&mut t, json!({"type": "new_session"}));
    exchange(&mock, &mut t, "second prompt", "second reply");
    let second = session_file(&mut t);
    ok(
        &mut t,
        json!({"type": "switch_session", "sessionPath": first.to_str().unwrap()}),
    );
    // The session left behind is released once the switch has settled.
    state(&mut t);
    let mut other = ready_tau(builder(&mock, "openai-completions"));
    ok(
        &mut other,
        json!({"type": "switch_session", "sessionPath": second.to_str().unwrap()}),
    );
    exchange(&mock, &mut other, "other prompt", "other reply");
    assert!(
        std::fs::read_to_string(&second)
            .unwrap()
            .contains("other prompt")
    );
    // The one switched to stays held.
    let error = fails(
        &mut other,
        json!({"type": "switch_session", "sessionPath": first.to_str().unwrap()}),
    );
    assert!(error.contains("in use"), "{error}");
}

#[test]
fn session_dir_and_name_flags_place_and_name_the_session() {
    let mock = MockServer::start_background().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut t = ready_tau(
        builder(&mock, "openai-completions")
            .arg("--session-dir")
            .arg(dir.path().to_str().unwrap())
            .arg("--name")
            .arg("  named run  "),
    );
    exchange(&mock, &mut t, "hello", "hi");
    let s = state(&mut t);
    assert_eq!(s["sessionName"], "named run");
    let file = PathBuf::from(s["sessionFile"].as_str().unwrap());
    // A custom directory is used flat, without the per-directory subfolder.
    assert_eq!(file.parent(), Some(dir.path()));
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains(r#""type":"session_info""#) && text.contains(r#""name":"named run""#));
}

#[test]
fn a_session_opened_at_startup_serves_its_messages_before_the_parse() {
    let mock = MockServer::start_background().unwrap();
    let dirs = tau_test_kit::Dirs::new();
    let cwd = dirs.cwd().canonicalize().unwrap();
    let path = large_branched_session(&cwd, &cwd, 600);
    let file = readable_lines(&path);
    let expected = active_branch_messages(&file);
    let mut t = ready_tau(
        builder(&mock, "openai-completions")
            .dirs(dirs)
            .arg("--session")
            .arg(path.to_str().unwrap()),
    );
    let early = ok(&mut t, json!({"type": "get_messages"}))["messages"].clone();
    assert_eq!(early, Value::Array(expected.clone()));
    let s = state(&mut t);
    assert_eq!(s["sessionId"], file[0]["id"]);
    assert_eq!(s["sessionFile"], json!(path.to_str().unwrap()));
    assert_eq!(s["messageCount"], expected.len());
    // The run continues the branch that was open.
    let events = exchange(&mock, &mut t, "after the restart", "continued");
    assert!(events.iter().any(|e| e["type"] == "agent_end"));
    let sent = mock.requests().last().unwrap().body["messages"].clone();
    let conversation = sent
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] != "system")
        .count();
    assert_eq!(conversation, expected.len() + 1);
    let now = readable_lines(&path);
    assert_eq!(now.len(), file.len() + 2);
    assert_eq!(
        now[file.len()]["parentId"],
        json!(format!("{:08x}", 1_000_001))
    );
    assert_eq!(now[file.len() + 1]["message"]["role"], "assistant");
}

#[test]
fn a_name_given_with_an_opened_session_is_recorded_in_it() {
    let mock = MockServer::start_background().unwrap();
    let dirs = tau_test_kit::Dirs::new();
    let cwd = dirs.cwd().canonicalize().unwrap();
    let path = install_fixture("pi-079-main.jsonl", &cwd, &cwd);
    let before = lines(&path).len();
    let mut t = ready_tau(
        builder(&mock, "openai-completions")
            .dirs(dirs)
            .arg("--session")
            .arg(path.to_str().unwrap())
            .arg("--name")
            .arg("renamed at start"),
    );
    assert_eq!(state(&mut t)["sessionName"], "renamed at start");
    let after = lines(&path);
    assert_eq!(after.len(), before + 1);
    assert_eq!(after[before]["type"], "session_info");
    assert_eq!(after[before]["parentId"], after[before - 1]["id"]);
}

/// The `get_messages` line for `id` as written, with its `id` cut off, so that two answers
/// can be compared byte for byte.
fn raw_messages_line(t: &mut Tau, id: &str) -> Vec<u8> {
    t.send(&json!({"id": id, "type": "get_messages"}));
    t.response(id);
    let raw = t
        .history()
        .iter()
        .rev()
        .find(|r| r.json.as_ref().is_some_and(|j| j["id"] == id))
        .map(|r| r.raw.clone())
        .unwrap();
    let cut = format!("{{\"id\":\"{id}\",");
    assert!(raw.starts_with(cut.as_bytes()));
    raw[cut.len()..].to_vec()
}

#[test]
fn messages_served_from_the_file_are_the_typed_bytes() {
    // A session tau wrote (thinking, tool calls and results, escapes, usage with costs) is
    // answered from its file's bytes right after a switch, and from the typed context later:
    // the two lines must be the same bytes, not only the same JSON.
    let (mock, mut t) = setup();
    mock.push(
        Reply::new()
            .thinking("plan \"quoted\" \u{2028}")
            .tool_call("call_1", "ls", json!({"path": "."}))
            .usage(120, 30, 5, 7),
    );
    mock.push(Reply::text("done: é ✓ \\ \n tab\t").usage(200, 10, 0, 0));
    run(&mut t, "list the files, \"please\"");
    let path = session_file(&mut t);
    ok(&mut t, json!({"type": "new_session"}));
    ok(
        &mut t,
        json!({"type": "switch_session", "sessionPath": path.to_str().unwrap()}),
    );
    let from_file = raw_messages_line(&mut t, "early");
    state(&mut t);
    let typed = raw_messages_line(&mut t, "late");
    assert!(
        from_file == typed,
        "from the file:\n{}\ntyped:\n{}",
        String::from_utf8_lossy(&from_file),
        String::from_utf8_lossy(&typed)
    );
    assert!(String::from_utf8_lossy(&typed).contains("toolResult"));
}
