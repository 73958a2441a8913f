//! Black-box tests of the session store: file format, write policy, loading, migrations,
//! context rebuilding, fork/clone, names, the writer lock and discovery.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use tau_protocol::AgentMessage;
use tau_protocol::{
    AssistantContent, AssistantMessage, StopReason, TextContent, Usage, UserContent,
    UserContentBlock, UserMessage,
};
use tau_store::{EntryKind, SessionStore, StoreError, find_by_id_prefix, most_recent_in};

fn user(text: &str) -> AgentMessage {
    AgentMessage::User(UserMessage {
        content: UserContent::Blocks(vec![UserContentBlock::Text(TextContent {
            text: text.into(),
            text_signature: None,
        })]),
        timestamp: 1,
        attachments: None,
    })
}

fn assistant(text: &str) -> AgentMessage {
    AgentMessage::Assistant(AssistantMessage {
        content: vec![AssistantContent::Text(TextContent {
            text: text.into(),
            text_signature: None,
        })],
        api: "openai-completions".into(),
        provider: "mock".into(),
        model: "mock-1".into(),
        usage: Usage::default(),
        stop_reason: StopReason::Stop,
        timestamp: 2,
        response_id: None,
        response_model: None,
        diagnostics: None,
        error_message: None,
        retry_after_ms: None,
    })
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn texts(store: &SessionStore) -> Vec<String> {
    store
        .build_context()
        .messages
        .iter()
        .map(|m| match &**m {
            AgentMessage::User(u) => match &u.content {
                UserContent::Text(t) => t.clone(),
                UserContent::Blocks(b) => match &b[0] {
                    UserContentBlock::Text(t) => t.text.clone(),
                    UserContentBlock::Image(_) => "<image>".into(),
                },
            },
            AgentMessage::Assistant(a) => match &a.content[0] {
                AssistantContent::Text(t) => t.text.clone(),
                _ => "<other>".into(),
            },
            AgentMessage::CompactionSummary(c) => format!("summary:{}", c.summary),
            AgentMessage::BranchSummary(b) => format!("branch:{}", b.summary),
            AgentMessage::Custom(c) => format!("custom:{}", c.custom_type),
            _ => "<other>".into(),
        })
        .collect()
}

/// A persisted session: model, thinking level, one exchange.
fn started(dir: &Path) -> SessionStore {
    let mut s = SessionStore::create(dir, Path::new("/home/u/work"), None);
    s.append_model_change("mock", "mock-1").unwrap();
    s.append_thinking_level_change("off").unwrap();
    s.append_message(user("hello")).unwrap();
    s.append_message(assistant("hi")).unwrap();
    s
}

#[test]
fn nothing_is_written_before_the_first_assistant_message() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = SessionStore::create(dir.path(), Path::new("/w"), None);
    let path = s.file_path().unwrap().to_path_buf();
    assert!(
        path.file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .ends_with(&format!("_{}.jsonl", s.session_id()))
    );
    s.append_model_change("mock", "mock-1").unwrap();
    s.append_thinking_level_change("off").unwrap();
    s.append_session_info("  named  ").unwrap();
    s.append_message(user("hello")).unwrap();
    assert!(!path.exists());
    assert!(!s.is_persisted());
    s.append_message(assistant("hi")).unwrap();
    assert!(s.is_persisted());
    let written = lines(&path);
    assert_eq!(written.len(), 6, "header + five entries at once");
    assert_eq!(written[0]["type"], "session");
    assert_eq!(written[0]["version"], 3);
    assert_eq!(written[0]["id"], s.session_id());
    assert_eq!(written[0]["cwd"], "/w");
    assert!(written[0].get("parentSession").is_none());
    assert_eq!(written[3]["name"], "named");
    // Ids chain in order, the first has a null parent.
    assert_eq!(written[1]["parentId"], Value::Null);
    for pair in written[1..].windows(2) {
        assert_eq!(pair[1]["parentId"], pair[0]["id"]);
    }
    // The session id is a UUID v7.
    assert_eq!(
        uuid::Uuid::parse_str(s.session_id())
            .unwrap()
            .get_version_num(),
        7
    );
}

#[test]
fn after_the_file_exists_each_entry_is_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = started(dir.path());
    let path = s.file_path().unwrap().to_path_buf();
    let before = std::fs::read_to_string(&path).unwrap();
    let id = s.append_message(user("again")).unwrap();
    let after = std::fs::read_to_string(&path).unwrap();
    assert!(after.starts_with(&before));
    let added = &after[before.len()..];
    assert_eq!(added.matches('\n').count(), 1);
    assert!(added.ends_with('\n'));
    let line: Value = serde_json::from_str(added.trim_end()).unwrap();
    assert_eq!(line["id"], id.as_str());
    assert_eq!(id.len(), 8);
    assert!(id.chars().all(|c| c.is_ascii_hexdigit()));
}

#[test]
fn written_lines_use_pi_key_order() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = started(dir.path());
    let first = s.entries()[2].id.clone();
    s.append_compaction(
        "sum".into(),
        first.clone(),
        1234,
        Some(json!({"readFiles":[],"modifiedFiles":["a"]})),
        false,
    )
    .unwrap();
    s.append_custom("todos", Some(json!({"items":[1]})))
        .unwrap();
    s.append_custom_message("ext", UserContent::Text("shown".into()), true, None)
        .unwrap();
    s.append_label(&first, Some("mark")).unwrap();
    s.append_session_info("n").unwrap();
    s.append_branch_summary(Some(&first), "went back".into(), None, Some(true))
        .unwrap();
    let text = std::fs::read_to_string(s.file_path().unwrap()).unwrap();
    let keys: Vec<Vec<String>> = text
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Map<String, Value>>(l)
                .unwrap()
                .keys()
                .cloned()
                .collect()
        })
        .collect();
    let common = ["type", "id", "parentId", "timestamp"];
    let expect = |extra: &[&str]| -> Vec<String> {
        common.iter().chain(extra).map(|s| s.to_string()).collect()
    };
    assert_eq!(keys[0], ["type", "version", "id", "timestamp", "cwd"]);
    assert_eq!(keys[1], expect(&["provider", "modelId"]));
    assert_eq!(keys[2], expect(&["thinkingLevel"]));
    assert_eq!(keys[3], expect(&["message"]));
    assert_eq!(
        keys[5],
        expect(&[
            "summary",
            "firstKeptEntryId",
            "tokensBefore",
            "details",
            "fromHook"
        ])
    );
    assert_eq!(keys[6], expect(&["customType", "data"]));
    assert_eq!(keys[7], expect(&["customType", "content", "display"]));
    assert_eq!(keys[8], expect(&["targetId", "label"]));
    assert_eq!(keys[9], expect(&["name"]));
    assert_eq!(keys[10], expect(&["fromId", "summary", "fromHook"]));
    assert!(
        text.lines()
            .nth(3)
            .unwrap()
            .contains(r#""message":{"role":"user","content":[{"type":"text","text":"hello"}]"#)
    );
}

#[test]
fn every_entry_kind_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = started(dir.path());
    let first = s.entries()[2].id.clone();
    s.append_compaction(
        "sum".into(),
        first.clone(),
        99,
        Some(json!({"readFiles":["r"]})),
        true,
    )
    .unwrap();
    s.append_custom("k", None).unwrap();
    s.append_custom("k2", Some(json!([1, "two"]))).unwrap();
    s.append_custom_message(
        "ext",
        UserContent::Text("x".into()),
        false,
        Some(json!({"d":1})),
    )
    .unwrap();
    s.append_label(&first, Some("L")).unwrap();
    s.append_label(&first, None).unwrap();
    s.append_session_info("").unwrap();
    s.append_branch_summary(None, "from root".into(), Some(json!(1)), None)
        .unwrap();
    let path = s.file_path().unwrap().to_path_buf();
    let original = std::fs::read_to_string(&path).unwrap();
    let entries = s.entries().to_vec();
    drop(s);
    let reopened = SessionStore::open(&path).unwrap();
    assert_eq!(reopened.entries(), entries.as_slice());
    // Serialising what was loaded gives back the same lines.
    let again: Vec<String> = reopened
        .entries()
        .iter()
        .map(|e| e.to_line().unwrap())
        .collect();
    let on_disk: Vec<&str> = original.lines().skip(1).collect();
    assert_eq!(again, on_disk);
    let kinds: Vec<&str> = reopened.entries().iter().map(|e| e.type_name()).collect();
    for kind in [
        "model_change",
        "thinking_level_change",
        "message",
        "compaction",
        "custom",
        "custom_message",
        "label",
        "session_info",
        "branch_summary",
    ] {
        assert!(kinds.contains(&kind), "{kind}");
    }
}

#[test]
fn unknown_types_and_fields_survive_load_and_fork() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let content = [
        r#"{"type":"session","version":3,"id":"sid","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w","future":true}"#,
        r#"{"type":"message","id":"a1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"q","timestamp":1},"note":"keep me"}"#,
        r#"{"type":"hologram","id":"b2","parentId":"a1","timestamp":"2026-01-01T00:00:02.000Z","beam":[1,2]}"#,
        r#"{"type":"message","id":"c3","parentId":"b2","timestamp":"2026-01-01T00:00:03.000Z","message":{"role":"assistant","content":[{"type":"video","url":"x"}],"api":"a","provider":"p","model":"m","usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":0,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop","timestamp":3}}"#,
        r#"{"type":"message","id":"d4","parentId":"c3","timestamp":"2026-01-01T00:00:04.000Z","message":{"role":"assistant","content":[],"api":"a","provider":"p","model":"m","usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":0,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop","timestamp":4}}"#,
    ];
    std::fs::write(&path, content.join("\n") + "\n").unwrap();
    let s = SessionStore::open(&path).unwrap();
    assert_eq!(s.entries().len(), 4);
    assert_eq!(s.entries()[1].type_name(), "hologram");
    assert!(matches!(s.entries()[2].kind, EntryKind::Unknown(_)));
    assert_eq!(s.header().extra["future"], true);
    for (entry, line) in s.entries().iter().zip(&content[1..]) {
        assert_eq!(entry.to_line().unwrap(), *line);
    }
    // The unreadable message contributes nothing; the path still runs through it.
    assert_eq!(s.build_context().messages.len(), 2);
    let clone = s.branched(s.leaf_id(), dir.path()).unwrap();
    let copied = std::fs::read_to_string(clone.file_path().unwrap()).unwrap();
    for line in &content[1..] {
        assert!(copied.contains(line), "{line}");
    }
}

#[test]
fn torn_last_line_and_malformed_middle_line_are_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let s = started(dir.path());
    let path = s.file_path().unwrap().to_path_buf();
    let leaf = s.leaf_id().unwrap().to_owned();
    drop(s);
    let mut text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut broken: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    broken.insert(2, "{not json".into());
    text = broken.join("\n") + "\n" + r#"{"type":"message","id":"torn","parentId":"#;
    std::fs::write(&path, &text).unwrap();
    let s = SessionStore::open(&path).unwrap();
    assert_eq!(s.entries().len(), 4);
    assert_eq!(s.leaf_id(), Some(leaf.as_str()));
    assert_eq!(texts(&s), ["hello", "hi"]);
}

#[test]
fn missing_and_foreign_files_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.jsonl");
    assert!(matches!(SessionStore::open(&missing), Err(StoreError::NotFound(p)) if p == missing));
    let foreign = dir.path().join("foreign.jsonl");
    std::fs::write(&foreign, "{\"type\":\"message\",\"id\":\"x\"}\n").unwrap();
    assert!(matches!(
        SessionStore::open(&foreign),
        Err(StoreError::NotASessionFile(_))
    ));
    let empty = dir.path().join("empty.jsonl");
    std::fs::write(&empty, "").unwrap();
    assert!(matches!(
        SessionStore::open(&empty),
        Err(StoreError::NotASessionFile(_))
    ));
    // Not rewritten.
    assert_eq!(
        std::fs::read_to_string(&foreign).unwrap(),
        "{\"type\":\"message\",\"id\":\"x\"}\n"
    );
}

#[test]
fn v1_file_is_migrated_and_rewritten() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.jsonl");
    let content = [
        r#"{"type":"session","id":"old","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/w"}"#,
        r#"{"type":"message","timestamp":"2025-01-01T00:00:01.000Z","message":{"role":"user","content":"one","timestamp":1}}"#,
        r#"{"type":"message","timestamp":"2025-01-01T00:00:02.000Z","message":{"role":"assistant","content":[{"type":"text","text":"two"}],"api":"a","provider":"p","model":"m","usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":0,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop","timestamp":2}}"#,
        r#"{"type":"message","timestamp":"2025-01-01T00:00:03.000Z","message":{"role":"user","content":"three","timestamp":3}}"#,
        r#"{"type":"compaction","timestamp":"2025-01-01T00:00:04.000Z","summary":"S","firstKeptEntryIndex":3,"tokensBefore":10}"#,
        r#"{"type":"message","timestamp":"2025-01-01T00:00:05.000Z","message":{"role":"hookMessage","customType":"h","content":"hook","display":true,"timestamp":5}}"#,
    ];
    std::fs::write(&path, content.join("\n") + "\n").unwrap();
    let s = SessionStore::open(&path).unwrap();
    assert_eq!(s.header().version, 3);
    let ids: Vec<String> = s.entries().iter().map(|e| e.id.clone()).collect();
    assert_eq!(ids.len(), 5);
    assert_eq!(s.entries()[0].parent_id, None);
    for pair in s.entries().windows(2) {
        assert_eq!(pair[1].parent_id.as_deref(), Some(pair[0].id.as_str()));
    }
    match &s.entries()[3].kind {
        EntryKind::Compaction {
            first_kept_entry_id,
            ..
        } => assert_eq!(first_kept_entry_id, &ids[2]),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        s.entries()[4].message(),
        Some(AgentMessage::Custom(_))
    ));
    assert_eq!(texts(&s), ["summary:S", "three", "custom:h"]);
    drop(s);
    let written = lines(&path);
    assert_eq!(written[0]["version"], 3);
    assert_eq!(written[4]["firstKeptEntryId"], ids[2].as_str());
    assert!(written[4].get("firstKeptEntryIndex").is_none());
    assert_eq!(written[5]["message"]["role"], "custom");
    let keys: Vec<String> = serde_json::from_str::<serde_json::Map<String, Value>>(
        std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .nth(1)
            .unwrap(),
    )
    .unwrap()
    .keys()
    .cloned()
    .collect();
    assert_eq!(keys[..4], ["type", "id", "parentId", "timestamp"]);
    // No temp file left behind; the migrated file opens without another rewrite.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    let again = SessionStore::open(&path).unwrap();
    assert_eq!(
        again
            .entries()
            .iter()
            .map(|e| e.id.clone())
            .collect::<Vec<_>>(),
        ids
    );
}

#[test]
fn v2_file_gets_custom_role() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v2.jsonl");
    let content = [
        r#"{"type":"session","version":2,"id":"v2","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/w"}"#,
        r#"{"type":"message","id":"aaaa0001","parentId":null,"timestamp":"2025-01-01T00:00:05.000Z","message":{"role":"hookMessage","customType":"h","content":"hook","display":false,"timestamp":5}}"#,
    ];
    std::fs::write(&path, content.join("\n") + "\n").unwrap();
    let s = SessionStore::open(&path).unwrap();
    assert_eq!(s.entries()[0].id, "aaaa0001");
    assert!(matches!(s.entries()[0].message(), Some(AgentMessage::Custom(c)) if !c.display));
    drop(s);
    let written = lines(&path);
    assert_eq!(written[0]["version"], 3);
    assert_eq!(written[1]["message"]["role"], "custom");
}

#[test]
fn appends_after_reopen_continue_the_leaf() {
    let dir = tempfile::tempdir().unwrap();
    let s = started(dir.path());
    let path = s.file_path().unwrap().to_path_buf();
    let leaf = s.leaf_id().unwrap().to_owned();
    drop(s);
    let mut s = SessionStore::open(&path).unwrap();
    assert!(s.is_persisted());
    let id = s.append_message(user("more")).unwrap();
    assert_eq!(
        s.entry(&id).unwrap().parent_id.as_deref(),
        Some(leaf.as_str())
    );
    let written = lines(&path);
    assert_eq!(written.len(), 6);
    assert_eq!(written[5]["parentId"], leaf.as_str());
}

#[test]
fn context_without_compaction_follows_the_leaf_branch() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = started(dir.path());
    let hello = s.entries()[2].id.clone();
    s.append_message(user("main q")).unwrap();
    s.append_message(assistant("main a")).unwrap();
    s.append_thinking_level_change("high").unwrap();
    // Side branch from the first reply.
    let hi = s.entries()[3].id.clone();
    s.set_leaf(Some(&hi)).unwrap();
    s.append_message(user("side q")).unwrap();
    let ctx = s.build_context();
    assert_eq!(texts(&s), ["hello", "hi", "side q"]);
    assert_eq!(ctx.thinking_level.as_deref(), Some("off"));
    assert_eq!(ctx.model, Some(("mock".to_owned(), "mock-1".to_owned())));
    let path: Vec<&str> = s.branch_path().iter().map(|e| e.id.as_str()).collect();
    assert_eq!(path.len(), 5);
    assert_eq!(path[2], hello);
    // Reloading puts the leaf on the last entry in file order: the side branch.
    let file = s.file_path().unwrap().to_path_buf();
    drop(s);
    let s = SessionStore::open(&file).unwrap();
    assert_eq!(texts(&s), ["hello", "hi", "side q"]);
    // Leaf before the first entry: empty context.
    let mut s = s;
    s.set_leaf(None).unwrap();
    assert!(s.build_context().messages.is_empty());
    assert!(s.set_leaf(Some("zzzz")).is_err());
}

#[test]
fn context_with_compaction_keeps_from_first_kept_entry() {
    let mut s = SessionStore::in_memory(Path::new("/w"));
    s.append_message(user("u1")).unwrap();
    s.append_message(assistant("a1")).unwrap();
    let kept = s.append_message(user("u2")).unwrap();
    s.append_message(assistant("a2")).unwrap();
    s.append_compaction("S".into(), kept, 500, None, false)
        .unwrap();
    s.append_message(user("u3")).unwrap();
    s.append_custom_message("note", UserContent::Text("n".into()), true, None)
        .unwrap();
    s.append_custom("invisible", None).unwrap();
    assert_eq!(texts(&s), ["summary:S", "u2", "a2", "u3", "custom:note"]);
    let ctx = s.build_context();
    match &*ctx.messages[0] {
        AgentMessage::CompactionSummary(c) => {
            assert_eq!(c.tokens_before, 500);
            assert!(c.timestamp > 1_700_000_000_000);
        }
        other => panic!("{other:?}"),
    }
    // Model from the assistant message; no thinking level recorded.
    assert_eq!(ctx.model, Some(("mock".to_owned(), "mock-1".to_owned())));
    assert_eq!(ctx.thinking_level, None);
}

#[test]
fn branch_summary_becomes_a_message() {
    let mut s = SessionStore::in_memory(Path::new("/w"));
    let q = s.append_message(user("q")).unwrap();
    s.append_message(assistant("a")).unwrap();
    s.append_branch_summary(Some(&q), "tried x".into(), None, None)
        .unwrap();
    assert_eq!(texts(&s), ["q", "branch:tried x"]);
    s.append_branch_summary(None, String::new(), None, None)
        .unwrap();
    assert!(texts(&s).is_empty());
    match &s.entries().last().unwrap().kind {
        EntryKind::BranchSummary { from_id, .. } => assert_eq!(from_id, "root"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn in_memory_store_never_writes() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = SessionStore::in_memory(dir.path());
    s.append_message(user("q")).unwrap();
    s.append_message(assistant("a")).unwrap();
    assert!(s.file_path().is_none());
    assert!(!s.is_persisted());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    let fork = s.branched(s.leaf_id(), dir.path()).unwrap();
    assert!(fork.file_path().is_none());
    assert_eq!(fork.entries().len(), 2);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn fork_before_first_user_message_gives_empty_session() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = SessionStore::create(dir.path(), Path::new("/w"), None);
    let first = s.append_message(user("first")).unwrap();
    s.append_message(assistant("a")).unwrap();
    let target = s.fork_point(&first).unwrap();
    assert_eq!(target, None);
    let fork = s.branched(target, dir.path()).unwrap();
    assert!(fork.entries().is_empty());
    assert_ne!(fork.session_id(), s.session_id());
    let parent = s.file_path().unwrap().to_string_lossy().into_owned();
    assert_eq!(
        fork.header().parent_session.as_deref(),
        Some(parent.as_str())
    );
    assert!(
        !fork.is_persisted(),
        "no assistant message yet: written lazily"
    );
    assert!(!fork.file_path().unwrap().exists());
    // The assistant message of a non-user entry is not a fork point.
    let a = s.entries()[1].id.clone();
    assert_eq!(s.fork_point(&a), None);
}

#[test]
fn fork_mid_session_copies_path_and_is_written_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = started(dir.path());
    let second = s.append_message(user("second")).unwrap();
    s.append_message(assistant("second reply")).unwrap();
    let target = s.fork_point(&second).unwrap();
    let fork = s.branched(target, dir.path()).unwrap();
    assert!(fork.is_persisted());
    let ids: Vec<&str> = fork.entries().iter().map(|e| e.id.as_str()).collect();
    let original: Vec<&str> = s.entries()[..4].iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids, original);
    assert_eq!(texts(&fork), ["hello", "hi"]);
    let written = lines(fork.file_path().unwrap());
    assert_eq!(written.len(), 5);
    assert_eq!(
        written[0]["parentSession"],
        s.file_path().unwrap().to_string_lossy().as_ref()
    );
    assert_eq!(written[0]["cwd"], "/home/u/work");
}

#[test]
fn clone_rechains_around_labels_and_recreates_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = started(dir.path());
    let hello = s.entries()[2].id.clone();
    let hi = s.entries()[3].id.clone();
    s.append_label(&hello, Some("start")).unwrap();
    s.append_label(&hi, Some("old")).unwrap();
    s.append_label(&hi, Some("reply")).unwrap();
    let q = s.append_message(user("after labels")).unwrap();
    s.append_label(&q, Some("temp")).unwrap();
    s.append_label(&q, None).unwrap();
    let a = s.append_message(assistant("end")).unwrap();
    let clone = s.branched(s.leaf_id(), dir.path()).unwrap();
    let e = clone.entries();
    let kinds: Vec<&str> = e.iter().map(|e| e.type_name()).collect();
    assert_eq!(
        kinds,
        [
            "model_change",
            "thinking_level_change",
            "message",
            "message",
            "message",
            "message",
            "label",
            "label"
        ]
    );
    // Re-chained: the message after the labels now follows the first reply.
    assert_eq!(e[4].id, q);
    assert_eq!(e[4].parent_id.as_deref(), Some(hi.as_str()));
    assert_eq!(e[5].id, a);
    assert_eq!(e[6].parent_id.as_deref(), Some(a.as_str()));
    assert_eq!(e[7].parent_id.as_deref(), Some(e[6].id.as_str()));
    let labels: Vec<(String, Option<String>)> = e[6..]
        .iter()
        .map(|e| match &e.kind {
            EntryKind::Label { target_id, label } => (target_id.clone(), label.clone()),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        labels,
        [
            (hello.clone(), Some("start".to_owned())),
            (hi.clone(), Some("reply".to_owned()))
        ]
    );
    assert_eq!(clone.leaf_id(), Some(e[7].id.as_str()));
    assert_eq!(texts(&clone), texts(&s));
    // Written with the same content as held.
    let reopened_path = clone.file_path().unwrap().to_path_buf();
    let held = clone.entries().to_vec();
    drop(clone);
    assert_eq!(
        SessionStore::open(&reopened_path).unwrap().entries(),
        held.as_slice()
    );
    assert!(matches!(
        s.branched(Some("missing"), dir.path()),
        Err(StoreError::UnknownEntry(_))
    ));
}

#[test]
fn fork_messages_cover_all_branches_in_file_order() {
    let mut s = SessionStore::in_memory(Path::new("/w"));
    let q1 = s.append_message(user("one")).unwrap();
    s.append_message(assistant("a")).unwrap();
    let q2 = s.append_message(user("two")).unwrap();
    s.set_leaf(Some(&q1)).unwrap();
    s.append_message(AgentMessage::User(UserMessage {
        content: UserContent::Blocks(vec![
            UserContentBlock::Text(TextContent {
                text: "th".into(),
                text_signature: None,
            }),
            UserContentBlock::Image(tau_protocol::ImageContent {
                data: "AA==".into(),
                mime_type: "image/png".into(),
            }),
            UserContentBlock::Text(TextContent {
                text: "ree".into(),
                text_signature: None,
            }),
        ]),
        timestamp: 1,
        attachments: None,
    }))
    .unwrap();
    s.append_message(user("")).unwrap();
    let q3 = s.entries()[3].id.clone();
    assert_eq!(
        s.fork_messages(),
        [
            (q1, "one".to_owned()),
            (q2, "two".to_owned()),
            (q3, "three".to_owned())
        ]
    );
}

#[test]
fn session_name_is_the_latest_session_info_in_file_order() {
    let mut s = SessionStore::in_memory(Path::new("/w"));
    assert_eq!(s.session_name(), None);
    let root = s.append_session_info("  first ").unwrap();
    assert_eq!(s.session_name(), Some("first"));
    s.append_message(user("q")).unwrap();
    // On another branch, still the latest in the file.
    s.set_leaf(Some(&root)).unwrap();
    s.append_session_info("second").unwrap();
    s.set_leaf(None).unwrap();
    assert_eq!(s.session_name(), Some("second"));
    s.append_session_info("   ").unwrap();
    assert_eq!(s.session_name(), None);
}

#[test]
fn labels_need_an_existing_target() {
    let mut s = SessionStore::in_memory(Path::new("/w"));
    assert!(
        matches!(s.append_label("nope", Some("x")), Err(StoreError::UnknownEntry(id)) if id == "nope")
    );
}

#[test]
fn a_second_writer_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let s = started(dir.path());
    let path = s.file_path().unwrap().to_path_buf();
    let err = SessionStore::open(&path).unwrap_err();
    assert!(matches!(&err, StoreError::SessionLocked(p) if *p == path));
    assert_eq!(
        err.to_string(),
        format!(
            "Session file is in use by another tau process: {}",
            path.display()
        )
    );
    drop(s);
    let reopened = SessionStore::open(&path).unwrap();
    // A lazily created store aiming at a locked file fails when it writes.
    let mut other = SessionStore::create_at(dir.path().join("late.jsonl"), Path::new("/w"), None);
    other.append_message(user("q")).unwrap();
    other.append_message(assistant("a")).unwrap();
    assert!(matches!(
        SessionStore::open(&dir.path().join("late.jsonl")),
        Err(StoreError::SessionLocked(_))
    ));
    drop(reopened);
}

#[test]
fn lazy_creation_refuses_an_existing_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("taken.jsonl");
    std::fs::write(&path, "precious\n").unwrap();
    let mut s = SessionStore::create_at(path.clone(), Path::new("/w"), None);
    s.append_message(user("q")).unwrap();
    let err = s.append_message(assistant("a")).unwrap_err();
    assert!(matches!(err, StoreError::Io { .. }));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "precious\n");
    // The entry is still held in memory.
    assert_eq!(s.entries().len(), 2);
}

fn write_header(path: &Path, id: &str, cwd: &str) {
    std::fs::write(
        path,
        format!("{{\"type\":\"session\",\"version\":3,\"id\":\"{id}\",\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"cwd\":\"{cwd}\"}}\n"),
    )
    .unwrap();
}

fn set_mtime(path: &Path, secs: u64) {
    let file = std::fs::File::options().append(true).open(path).unwrap();
    file.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs))
        .unwrap();
}

#[test]
fn most_recent_session_by_mtime_with_cwd_filter() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let a: PathBuf = d.join("a.jsonl");
    let b = d.join("b.jsonl");
    let c = d.join("c.jsonl");
    write_header(&a, "aaa", "/one");
    write_header(&b, "bbb", "/two");
    write_header(&c, "ccc", "/one");
    std::fs::write(d.join("junk.jsonl"), "not a session\n").unwrap();
    std::fs::write(d.join("notes.txt"), "x").unwrap();
    set_mtime(&a, 1_000);
    set_mtime(&b, 3_000);
    set_mtime(&c, 2_000);
    set_mtime(&d.join("junk.jsonl"), 9_000);
    assert_eq!(most_recent_in(d, None), Some(b.clone()));
    assert_eq!(most_recent_in(d, Some(Path::new("/one"))), Some(c.clone()));
    assert_eq!(most_recent_in(d, Some(Path::new("/three"))), None);
    assert_eq!(most_recent_in(&d.join("missing"), None), None);
}

#[test]
fn find_by_id_prefix_prefers_exact_then_newest_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_header(&d.join("1.jsonl"), "abc", "/one");
    write_header(&d.join("2.jsonl"), "abcdef", "/one");
    write_header(&d.join("3.jsonl"), "abcxyz", "/two");
    set_mtime(&d.join("1.jsonl"), 1_000);
    set_mtime(&d.join("2.jsonl"), 2_000);
    set_mtime(&d.join("3.jsonl"), 3_000);
    assert_eq!(find_by_id_prefix(d, "abc", None), Some(d.join("1.jsonl")));
    assert_eq!(find_by_id_prefix(d, "abcd", None), Some(d.join("2.jsonl")));
    assert_eq!(find_by_id_prefix(d, "abcx", Some(Path::new("/one"))), None);
    assert_eq!(
        find_by_id_prefix(d, "ab", Some(Path::new("/two"))),
        Some(d.join("3.jsonl"))
    );
    assert_eq!(find_by_id_prefix(d, "zzz", None), None);
    assert_eq!(find_by_id_prefix(d, "", None), None);
}

#[test]
fn discovery_reads_only_the_header_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.jsonl");
    // A valid header followed by garbage that would fail any full parse.
    let mut content = String::from(
        "{\"type\":\"session\",\"version\":3,\"id\":\"big\",\"timestamp\":\"t\",\"cwd\":\"/w\"}\n",
    );
    content.push_str(&"\u{0}garbage".repeat(100_000));
    std::fs::write(&path, content).unwrap();
    assert_eq!(
        find_by_id_prefix(dir.path(), "big", None),
        Some(path.clone())
    );
    assert_eq!(
        most_recent_in(dir.path(), Some(Path::new("/w"))),
        Some(path)
    );
}

#[test]
fn a_parent_missing_from_the_file_does_not_cut_off_what_came_before() {
    // Turns written, then one lost (a full disk before this fix), then more: the entry after
    // the gap names a parent the file never got.
    let dir = tempfile::tempdir().unwrap();
    let mut s = started(dir.path());
    let path = s.file_path().unwrap().to_path_buf();
    s.append_message(user("lost")).unwrap();
    s.append_message(assistant("lost too")).unwrap();
    s.append_message(user("after")).unwrap();
    s.append_message(assistant("the gap")).unwrap();
    drop(s);
    let text = std::fs::read_to_string(&path).unwrap();
    let kept: Vec<&str> = text
        .lines()
        .filter(|line| !line.contains("\"lost"))
        .collect();
    std::fs::write(&path, kept.join("\n") + "\n").unwrap();

    let s = SessionStore::open(&path).unwrap();
    assert_eq!(texts(&s), ["hello", "hi", "after", "the gap"]);
    assert_eq!(s.entries().len(), 6);
    // The file keeps what it holds: the repair is the tree's, in memory.
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        kept.join("\n") + "\n"
    );
}

#[test]
fn sessions_are_listed_from_several_folders_newest_first() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let older = started(a.path());
    let older_path = older.file_path().unwrap().to_path_buf();
    drop(older);
    let mut other = SessionStore::create(b.path(), Path::new("/elsewhere"), None);
    other.append_message(user("q")).unwrap();
    other.append_message(assistant("a")).unwrap();
    let other_path = other.file_path().unwrap().to_path_buf();
    drop(other);
    // Make the first one clearly older.
    let then = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
    std::fs::File::options()
        .write(true)
        .open(&older_path)
        .unwrap()
        .set_modified(then)
        .unwrap();
    std::fs::write(a.path().join("notes.jsonl"), "not a session\n").unwrap();
    let dirs = [a.path().to_path_buf(), b.path().to_path_buf()];
    let all: Vec<PathBuf> = tau_store::list_sessions(&dirs, None)
        .into_iter()
        .map(|file| file.path)
        .collect();
    assert_eq!(all, [other_path.clone(), older_path.clone()]);
    let here = tau_store::list_sessions(&dirs, Some(Path::new("/home/u/work")));
    assert_eq!(here.len(), 1);
    assert_eq!(here[0].path, older_path);
    assert_eq!(here[0].cwd, "/home/u/work");
}

#[test]
fn a_session_file_open_for_writing_can_be_forked_without_its_lock() {
    let dir = tempfile::tempdir().unwrap();
    let into = tempfile::tempdir().unwrap();
    // Still open: the file is locked against a second writer.
    let source = started(dir.path());
    let source_path = source.file_path().unwrap().to_path_buf();
    assert!(matches!(
        SessionStore::open(&source_path),
        Err(StoreError::SessionLocked(_))
    ));
    let fork = SessionStore::fork_file(&source_path, into.path(), Path::new("/elsewhere")).unwrap();
    assert_ne!(fork.session_id(), source.session_id());
    assert!(
        fork.is_persisted(),
        "a fork with a reply is written at once"
    );
    assert_eq!(texts(&fork), ["hello", "hi"]);
    let forked_path = fork.file_path().unwrap().to_path_buf();
    assert!(forked_path.starts_with(into.path()));
    let header = &lines(&forked_path)[0];
    assert_eq!(header["cwd"], "/elsewhere");
    assert_eq!(header["parentSession"], source_path.display().to_string());
    // The source is untouched and still its writer's.
    drop(fork);
    assert_eq!(lines(&source_path).len(), 5);
    assert!(matches!(
        SessionStore::fork_file(Path::new("/no/such.jsonl"), into.path(), Path::new("/w")),
        Err(StoreError::NotFound(_))
    ));
}
