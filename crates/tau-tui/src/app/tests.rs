//! The App without a terminal: records are fed as the server writes them, through the same
//! decoding the reader uses, and the commands it queues are compared as JSON.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde_json::{Value, json};

use super::*;
use crate::transcript::{BlockKind, NoticeKind, ToolStatus, View};

fn app() -> App {
    let mut app = App::new(Theme::new(true), "~/p".into(), Vec::new());
    app.take_commands();
    app
}

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

fn type_text(app: &mut App, text: &str) {
    for ch in text.chars() {
        app.on_key(key(KeyCode::Char(ch)));
    }
}

/// Feeds `record` as the reader would; a fixture the protocol cannot read is a broken test.
fn feed(app: &mut App, record: Value) {
    let shown = record.to_string();
    let record = decode(record).unwrap_or_else(|| panic!("not a record of the protocol: {shown}"));
    app.on_record(record);
}

/// An assistant message as the server writes it.
fn assistant(content: Value) -> Value {
    json!({
        "role": "assistant", "content": content, "api": "openai-completions", "provider": "p",
        "model": "m",
        "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
        "stopReason": "stop", "timestamp": 1,
    })
}

/// Answers the command of `kind` the App queued last with `data`.
fn answer(app: &mut App, kind: &str, data: Value) {
    let asked = app
        .take_commands()
        .into_iter()
        .rfind(|c| c["type"] == kind)
        .unwrap_or_else(|| panic!("{kind} asked"));
    feed(
        app,
        json!({"type": "response", "id": asked["id"], "command": kind, "success": true, "data": data}),
    );
}

fn notices(app: &App) -> Vec<(String, NoticeKind)> {
    app.transcript
        .blocks
        .iter()
        .filter_map(|b| match &b.kind {
            BlockKind::Notice { text, kind } => Some((text.clone(), *kind)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_session_that_cannot_be_saved_is_said_and_so_is_its_recovery() {
    let mut app = app();
    feed(
        &mut app,
        json!({"type": "session_save_status", "state": "failing",
            "file": "/s.jsonl", "error": "No space left on device", "unsaved": 2}),
    );
    feed(
        &mut app,
        json!({"type": "session_save_status", "state": "saved", "file": "/s.jsonl"}),
    );
    let notices = notices(&app);
    assert_eq!(
        notices.len(),
        2,
        "{:?}",
        notices.iter().map(|n| &n.0).collect::<Vec<_>>()
    );
    assert!(
        notices[0]
            .0
            .contains("cannot be saved (No space left on device): 2 entries")
    );
    assert_eq!(notices[0].1, NoticeKind::Error);
    assert_eq!(notices[1].0, "The session is saved again");
}

#[test]
fn enter_prompts_when_idle_and_steers_while_streaming() {
    let mut app = app();
    type_text(&mut app, "hello");
    app.on_key(key(KeyCode::Enter));
    let sent = app.take_commands();
    assert_eq!(sent[0]["type"], "prompt");
    assert_eq!(sent[0]["message"], "hello");
    feed(&mut app, json!({"type": "agent_start"}));
    type_text(&mut app, "faster");
    app.on_key(key(KeyCode::Enter));
    assert_eq!(app.take_commands()[0]["type"], "steer");
    type_text(&mut app, "then this");
    app.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::ALT));
    assert_eq!(app.take_commands()[0]["type"], "follow_up");
    app.on_key(key(KeyCode::Esc));
    assert_eq!(app.take_commands()[0]["type"], "abort");
}

#[test]
fn the_run_ends_at_agent_settled_not_agent_end() {
    let mut app = app();
    feed(&mut app, json!({"type": "agent_start"}));
    feed(&mut app, json!({"type": "agent_end", "messages": []}));
    type_text(&mut app, "more");
    app.on_key(key(KeyCode::Enter));
    let sent = app.take_commands();
    assert_eq!(
        sent.iter()
            .find(|c| c["message"] == "more")
            .map(|c| c["type"].clone()),
        Some(json!("steer"))
    );
    feed(&mut app, json!({"type": "agent_settled", "aborted": false}));
    type_text(&mut app, "next");
    app.on_key(key(KeyCode::Enter));
    let sent = app.take_commands();
    assert_eq!(
        sent.iter()
            .find(|c| c["message"] == "next")
            .map(|c| c["type"].clone()),
        Some(json!("prompt"))
    );
}

#[test]
fn deltas_build_the_answer() {
    let mut app = app();
    feed(
        &mut app,
        json!({"type": "message_start", "message": assistant(json!([]))}),
    );
    for delta in ["Hel", "lo"] {
        feed(
            &mut app,
            json!({"type": "message_update", "assistantMessageEvent": {"type": "text_delta", "contentIndex": 0, "delta": delta}}),
        );
    }
    let lines = app.transcript.lines(40, View::default(), &app.theme);
    assert_eq!(crate::wrap::plain(&lines[0]), "Hello");
}

#[test]
fn an_extension_select_is_answered_with_the_chosen_option() {
    let mut app = app();
    feed(
        &mut app,
        json!({"type": "extension_ui_request", "id": "u1", "method": "select", "title": "Pick", "options": ["a", "b"]}),
    );
    app.on_key(key(KeyCode::Down));
    app.on_key(key(KeyCode::Enter));
    let sent = app.take_commands();
    assert_eq!(
        sent,
        [json!({"type": "extension_ui_response", "id": "u1", "value": "b"})]
    );
    assert!(app.dialog.is_none());
}

#[test]
fn keys_are_asked_again_after_each_run_and_a_refused_one_warned_once() {
    let mut app = App::new(Theme::new(true), "~/p".into(), Vec::new());
    let shortcuts = json!({"shortcuts": [
        {"key": "ctrl+c", "extension": "/x/e.ts"},
        {"key": "ctrl+alt+k", "extension": "/x/e.ts"},
    ]});
    answer(&mut app, "get_shortcuts", shortcuts.clone());
    feed(&mut app, json!({"type": "agent_settled", "aborted": false}));
    answer(&mut app, "get_shortcuts", shortcuts);
    let warnings = app
        .transcript
        .blocks
        .iter()
        .filter(|b| matches!(&b.kind, BlockKind::Notice { text, .. } if text.contains("not bound")))
        .count();
    assert_eq!(warnings, 1);
    let bound: Vec<&str> = app.shortcuts.iter().map(|s| s.1.as_str()).collect();
    assert_eq!(bound, ["ctrl+alt+k"]);
}

#[test]
fn images_are_named_with_their_type_and_size() {
    let content = json!([
        {"type": "text", "text": "Read image file [image/png]"},
        {"type": "image", "mimeType": "image/png", "data": "A".repeat(4096)},
    ]);
    let blocks: Vec<tau_protocol::UserContentBlock> =
        serde_json::from_value(content).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        shown_content(&blocks),
        "Read image file [image/png]\n[image image/png, 3 KB]"
    );
}

#[test]
fn tab_completes_commands_and_paths() {
    let mut app = app();
    app.session_commands = vec![("/skill:review".into(), String::new())];
    type_text(&mut app, "/ski");
    app.on_key(key(KeyCode::Tab));
    assert_eq!(app.editor.text(), "/skill:review ");

    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::create_dir(dir.path().join("src")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.path().join("src/main.rs"), "").unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.path().join("src/lib.rs"), "").unwrap_or_else(|e| panic!("{e}"));
    app.cwd = dir.path().to_path_buf();
    app.editor.clear();
    type_text(&mut app, "look at @sr");
    app.on_key(key(KeyCode::Tab));
    assert_eq!(app.editor.text(), "look at @src/");
    type_text(&mut app, "m");
    app.on_key(key(KeyCode::Tab));
    assert_eq!(app.editor.text(), "look at @src/main.rs ");
}

#[test]
fn a_large_paste_is_one_marker_and_is_sent_whole() {
    let mut app = app();
    let pasted: String = (1..=20).map(|i| format!("line {i}\n")).collect();
    type_text(&mut app, "see ");
    app.on_paste(&pasted);
    assert_eq!(app.editor.text(), "see [paste #1 +20 lines]");
    app.on_key(key(KeyCode::Enter));
    let sent = app.take_commands();
    assert_eq!(
        sent[0]["message"],
        format!("see {pasted}"),
        "the paste is sent as pasted"
    );
}

#[test]
fn ctrl_c_clears_then_quits_on_the_second_press() {
    let mut app = app();
    type_text(&mut app, "draft");
    let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
    app.on_key(ctrl_c);
    assert!(app.editor.is_empty() && !app.quit);
    app.on_key(ctrl_c);
    assert!(!app.quit);
    app.on_key(ctrl_c);
    assert!(app.quit);
}

#[test]
fn commands_go_out_in_the_protocols_exact_shape() {
    let mut app = app();
    // `App::new` asked for the state, the stats, the commands and the shortcuts: tui-1..4.
    type_text(&mut app, "/model p/m");
    app.on_key(key(KeyCode::Enter));
    assert_eq!(
        app.take_commands(),
        [
            json!({"type": "set_model", "provider": "p", "modelId": "m", "id": "tui-5"}),
            json!({"type": "get_state", "id": "tui-6"}),
            json!({"type": "get_session_stats", "id": "tui-7"}),
        ]
    );
    type_text(&mut app, "!!ls -a");
    app.on_key(key(KeyCode::Enter));
    type_text(&mut app, "/compact keep the plan");
    app.on_key(key(KeyCode::Enter));
    type_text(&mut app, "/export");
    app.on_key(key(KeyCode::Enter));
    type_text(&mut app, "/thinking high");
    app.on_key(key(KeyCode::Enter));
    assert_eq!(
        app.take_commands()[..4],
        [
            json!({"type": "bash", "command": "ls -a", "excludeFromContext": true, "id": "tui-8"}),
            json!({"type": "compact", "customInstructions": "keep the plan", "id": "tui-9"}),
            json!({"type": "export_html", "id": "tui-10"}),
            json!({"type": "set_thinking_level", "level": "high", "id": "tui-11"}),
        ]
    );
    // The wire line keeps the protocol's order: `type` first, the id last.
    type_text(&mut app, "hi");
    app.on_key(key(KeyCode::Enter));
    assert_eq!(
        app.take_commands()[0].to_string(),
        r#"{"type":"prompt","message":"hi","id":"tui-14"}"#
    );
}

#[test]
fn extension_dialogs_are_answered_confirmed_or_cancelled() {
    let mut app = app();
    feed(
        &mut app,
        json!({"type": "extension_ui_request", "id": "c1", "method": "confirm", "title": "Sure?", "message": "Really"}),
    );
    app.on_key(key(KeyCode::Char('n')));
    feed(
        &mut app,
        json!({"type": "extension_ui_request", "id": "e1", "method": "editor", "title": "Edit", "prefill": "draft"}),
    );
    app.on_key(key(KeyCode::Esc));
    assert_eq!(
        app.take_commands(),
        [
            json!({"type": "extension_ui_response", "id": "c1", "confirmed": false}),
            json!({"type": "extension_ui_response", "id": "e1", "cancelled": true}),
        ]
    );
}

#[test]
fn an_unknown_thinking_level_is_refused_without_sending() {
    let mut app = app();
    type_text(&mut app, "/thinking extreme");
    app.on_key(key(KeyCode::Enter));
    assert!(app.take_commands().is_empty());
    let notices = notices(&app);
    assert_eq!(notices.len(), 1);
    assert_eq!(notices[0].1, NoticeKind::Error);
    assert!(
        notices[0].0.contains("\"extreme\"") && notices[0].0.contains("off, minimal"),
        "{}",
        notices[0].0
    );
}

#[test]
fn a_record_that_is_not_the_protocols_is_skipped() {
    for record in [
        json!({"type": "no_such_event"}),
        json!({"type": "tool_execution_end", "toolCallId": 7}),
        json!({"type": "message_start", "message": {"role": "assistant"}}),
        json!({"type": "response"}),
        json!([1, 2]),
        Value::Null,
    ] {
        assert!(decode(record.clone()).is_none(), "{record}");
    }
    // Records the App has no use for pass without a change.
    let mut app = app();
    feed(&mut app, json!({"type": "ready", "version": "1"}));
    feed(&mut app, json!({"type": "turn_start"}));
    assert!(app.transcript.blocks.is_empty() && app.take_commands().is_empty());
}

#[test]
fn an_answer_of_the_wrong_shape_is_said_not_followed() {
    let mut app = App::new(Theme::new(true), "~/p".into(), Vec::new());
    answer(&mut app, "get_state", json!({"model": "not a model"}));
    let notices = notices(&app);
    assert_eq!(notices.len(), 1);
    assert_eq!(notices[0].1, NoticeKind::Error);
    assert!(
        notices[0].0.starts_with("Unreadable answer to get_state:"),
        "{}",
        notices[0].0
    );
    assert_eq!(app.footer.model, "");
}

#[test]
fn the_footer_follows_state_stats_and_a_model_cycle() {
    let mut app = App::new(Theme::new(true), "~/p".into(), Vec::new());
    let model = json!({
        "id": "m1", "name": "M1", "api": "openai-completions", "provider": "p",
        "baseUrl": "http://x", "reasoning": true, "input": ["text"],
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
        "contextWindow": 128000, "maxTokens": 4096,
    });
    let commands = app.take_commands();
    let id_of = |kind: &str| {
        commands
            .iter()
            .find(|c| c["type"] == kind)
            .map(|c| c["id"].clone())
            .unwrap_or_else(|| panic!("{kind} asked"))
    };
    feed(
        &mut app,
        json!({"type": "response", "id": id_of("get_state"), "command": "get_state", "success": true,
            "data": {"model": model, "thinkingLevel": "high", "isStreaming": false,
                "isCompacting": false, "steeringMode": "all", "followUpMode": "all",
                "sessionId": "s", "sessionName": "work", "autoCompactionEnabled": true,
                "messageCount": 0}}),
    );
    feed(
        &mut app,
        json!({"type": "response", "id": id_of("get_session_stats"), "command": "get_session_stats",
            "success": true, "data": {"sessionId": "s", "userMessages": 1,
                "assistantMessages": 1, "toolCalls": 0, "toolResults": 0, "totalMessages": 2,
                "tokens": {"input": 1, "output": 2, "cacheRead": 0, "cacheWrite": 0, "total": 3},
                "cost": 0.5, "contextUsage": {"tokens": 1500, "contextWindow": 128000, "percent": 1.2}}}),
    );
    assert_eq!(app.footer.model, "p/m1");
    assert_eq!(app.footer.thinking, "high");
    assert_eq!(app.footer.session_name.as_deref(), Some("work"));
    assert_eq!(app.footer.context.as_deref(), Some("1.5k/128.0k (1%)"));
    assert_eq!(app.footer.cost, 0.5);

    app.on_key(KeyEvent::new(KeyCode::Char('p'), KeyModifiers::CONTROL));
    let mut cycled = model.clone();
    cycled["id"] = json!("m2");
    answer(
        &mut app,
        "cycle_model",
        json!({"model": cycled, "thinkingLevel": "low", "isScoped": false}),
    );
    assert_eq!(app.footer.model, "p/m2");
    assert_eq!(app.footer.thinking, "low");
    // Nothing to cycle to: the footer stays.
    app.on_key(KeyEvent::new(KeyCode::Char('p'), KeyModifiers::CONTROL));
    answer(&mut app, "cycle_model", Value::Null);
    assert_eq!(app.footer.model, "p/m2");
    assert!(notices(&app).is_empty());
}

#[test]
fn a_history_shows_messages_tool_calls_and_their_results() {
    let mut app = app();
    let tool_call = json!([
        {"type": "thinking", "thinking": "look first"},
        {"type": "text", "text": "Editing."},
        {"type": "toolCall", "id": "c1", "name": "edit", "arguments": {"path": "a.rs"}},
    ]);
    app.load_history();
    answer(
        &mut app,
        "get_messages",
        json!({"messages": [
            {"role": "user", "content": "fix it", "timestamp": 1},
            assistant(tool_call),
            {"role": "toolResult", "toolCallId": "c1", "toolName": "edit",
                "content": [{"type": "text", "text": "done"}], "details": {"diff": "-a\n+b"},
                "isError": false, "timestamp": 2},
            {"role": "compactionSummary", "summary": "s", "tokensBefore": 10, "timestamp": 3},
        ]}),
    );
    let kinds: Vec<String> = app
        .transcript
        .blocks
        .iter()
        .map(|b| match &b.kind {
            BlockKind::User { text } => format!("user {text}"),
            BlockKind::Assistant { text, thinking, .. } => format!("assistant {text} ({thinking})"),
            BlockKind::Tool {
                name,
                args,
                output,
                diff,
                status,
                ..
            } => format!(
                "tool {name} {args} {output} {diff:?} {}",
                *status == ToolStatus::Done
            ),
            BlockKind::Notice { text, .. } => format!("notice {text}"),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "user fix it",
            "assistant Editing. (look first)",
            r#"tool edit {"path":"a.rs"} done Some("-a\n+b") true"#,
            "notice ── Compacted ──",
        ]
    );
}

fn permission_request(id: &str, command: &str) -> Value {
    json!({"type": "permission_request", "id": id, "toolCallId": "c1", "toolName": "bash",
           "args": {"command": command}, "kind": "command", "title": format!("Run {command}"),
           "rule": "bash(git push)"})
}

#[test]
fn a_permission_request_is_a_dialog_whose_choice_is_the_answer() {
    let mut app = app();
    feed(&mut app, permission_request("permission-1", "git push"));
    let Some(Dialog {
        title,
        body: DialogBody::Select { options, .. },
        ..
    }) = &app.dialog
    else {
        panic!("no dialog");
    };
    assert_eq!(title, "Allow? Run git push");
    assert_eq!(
        options[2],
        "Always allow bash(git push) (saved in settings)"
    );
    // The third answer: always, remembered.
    app.on_key(key(KeyCode::Down));
    app.on_key(key(KeyCode::Down));
    app.on_key(key(KeyCode::Enter));
    assert_eq!(
        app.take_commands(),
        [json!({"type": "permission_response", "id": "permission-1",
                "outcome": "allowAlways", "remember": true})]
    );
    // Esc refuses.
    feed(&mut app, permission_request("permission-2", "rm x"));
    app.on_key(key(KeyCode::Esc));
    assert_eq!(
        app.take_commands(),
        [json!({"type": "permission_response", "id": "permission-2", "outcome": "reject"})]
    );
}

#[test]
fn a_permission_request_waits_for_an_open_dialog_and_goes_when_withdrawn() {
    let mut app = app();
    feed(
        &mut app,
        json!({"type": "extension_ui_request", "id": "u1", "method": "confirm",
               "title": "Sure?", "message": "really"}),
    );
    feed(&mut app, permission_request("permission-1", "git push"));
    feed(&mut app, permission_request("permission-2", "git push -f"));
    // The extension's question stays until answered; then the requests, in order.
    assert!(matches!(
        app.dialog,
        Some(Dialog {
            purpose: Purpose::Extension(_),
            ..
        })
    ));
    app.on_key(key(KeyCode::Char('y')));
    assert!(matches!(
        &app.dialog,
        Some(Dialog { purpose: Purpose::Permission(id), .. }) if id == "permission-1"
    ));
    // Withdrawn (the run was aborted): closed, and the next one shows.
    feed(
        &mut app,
        json!({"type": "permission_withdrawn", "id": "permission-1"}),
    );
    assert!(matches!(
        &app.dialog,
        Some(Dialog { purpose: Purpose::Permission(id), .. }) if id == "permission-2"
    ));
    feed(
        &mut app,
        json!({"type": "permission_withdrawn", "id": "permission-2"}),
    );
    assert!(app.dialog.is_none());
    let sent = app.take_commands();
    assert_eq!(
        sent,
        [json!({"type": "extension_ui_response", "id": "u1", "confirmed": true})],
        "nothing was answered for the withdrawn requests"
    );
}

#[test]
fn permissions_command_sets_the_mode_and_the_footer_shows_it() {
    let mut app = app();
    type_text(&mut app, "/permissions plan");
    app.on_key(key(KeyCode::Enter));
    let sent = app.take_commands();
    assert_eq!(sent[0]["type"], "set_permission_mode");
    assert_eq!(sent[0]["mode"], "plan");
    type_text(&mut app, "/permissions sometimes");
    app.on_key(key(KeyCode::Enter));
    assert!(app.take_commands().is_empty());
    assert!(
        notices(&app)
            .iter()
            .any(|(text, kind)| *kind == NoticeKind::Error && text.contains("sometimes"))
    );
    feed(
        &mut app,
        json!({"type": "permission_mode_changed", "mode": "plan"}),
    );
    let mut state = json!({"model": null, "thinkingLevel": "off", "isStreaming": false,
        "isCompacting": false, "steeringMode": "all", "followUpMode": "all", "sessionId": "s",
        "autoCompactionEnabled": true, "messageCount": 0, "permissionMode": "plan"});
    answer(&mut app, "get_state", state.clone());
    assert_eq!(
        app.footer.permission_mode,
        Some(tau_protocol::PermissionMode::Plan)
    );
    state["permissionMode"] = json!("allowAll");
    app.refresh_footer();
    answer(&mut app, "get_state", state);
    assert_eq!(app.footer.permission_mode, None);
}
