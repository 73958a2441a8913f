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
    // `App::new` asked for the state, the stats, the commands, the shortcuts and the MCP
    // resources: tui-1..5.
    type_text(&mut app, "/model p/m");
    app.on_key(key(KeyCode::Enter));
    assert_eq!(
        app.take_commands(),
        [
            json!({"type": "set_model", "provider": "p", "modelId": "m", "id": "tui-6"}),
            json!({"type": "get_state", "id": "tui-7"}),
            json!({"type": "get_session_stats", "id": "tui-8"}),
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
            json!({"type": "bash", "command": "ls -a", "excludeFromContext": true, "id": "tui-9"}),
            json!({"type": "compact", "customInstructions": "keep the plan", "id": "tui-10"}),
            json!({"type": "export_html", "id": "tui-11"}),
            json!({"type": "set_thinking_level", "level": "high", "id": "tui-12"}),
        ]
    );
    // The wire line keeps the protocol's order: `type` first, the id last.
    type_text(&mut app, "hi");
    app.on_key(key(KeyCode::Enter));
    assert_eq!(
        app.take_commands()[0].to_string(),
        r#"{"type":"prompt","message":"hi","id":"tui-15"}"#
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

#[test]
fn a_refused_prompt_is_said_and_goes_back_into_the_editor() {
    let mut app = app();
    type_text(&mut app, "hello there");
    app.on_key(key(KeyCode::Enter));
    assert_eq!(app.editor.text(), "");
    let sent = app.take_commands();
    let prompt = sent.iter().find(|c| c["type"] == "prompt").expect("sent");
    feed(
        &mut app,
        json!({"type": "response", "id": prompt["id"], "command": "prompt", "success": false,
               "error": "No API key found for the selected model."}),
    );
    assert_eq!(app.editor.text(), "hello there");
    assert!(
        notices(&app)
            .iter()
            .any(|(text, kind)| *kind == NoticeKind::Error
                && text.starts_with("Not sent: No API key found")
                && text.contains("/login"))
    );
}

#[test]
fn the_start_screen_names_the_keys_and_says_when_no_model_can_answer() {
    let mut app = app();
    app.start_screen("9.9.9", Some("no model can answer yet: set a key"));
    let shown = notices(&app);
    assert!(
        shown[0].0.starts_with("tau 9.9.9: Enter sends"),
        "{shown:?}"
    );
    assert_eq!(shown[1].1, NoticeKind::Warning);
    assert!(shown[1].0.contains("no model can answer yet"), "{shown:?}");
    let mut app = super::tests::app();
    app.start_screen("9.9.9", None);
    assert_eq!(notices(&app).len(), 1);
}

// Issue 42: the slash-command list, the commands pi has, queued messages, pi's keys.

fn ctrl(ch: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(ch), KeyModifiers::CONTROL)
}

/// An App whose session commands are known (`get_commands` answered) and whose agent
/// directory and folder are temporary ones.
fn app_in(dir: &std::path::Path) -> App {
    let mut app = App::new(Theme::new(true), "~/p".into(), Vec::new());
    answer(
        &mut app,
        "get_commands",
        json!({"commands": [
            {"name": "skill:review", "description": "Review the diff", "source": "skill"},
            {"name": "deploy", "description": "Ship it", "source": "extension"},
        ]}),
    );
    app.take_commands();
    app.agent_dir = Some(dir.join("agent"));
    app.cwd = dir.to_path_buf();
    app
}

fn names(items: &[PaletteItem]) -> Vec<&str> {
    items.iter().map(|i| i.name.as_str()).collect()
}

#[test]
fn a_slash_lists_every_command_and_typing_narrows_the_list() {
    let dir = tempfile::tempdir().unwrap();
    let mut app = app_in(dir.path());
    assert!(app.palette_items().is_empty(), "closed before a /");
    type_text(&mut app, "/");
    let all = app.palette_items();
    for name in [
        "/settings",
        "/model",
        "/login",
        "/logout",
        "/trust",
        "/import",
        "/share",
        "/clone",
        "/changelog",
        "/reload",
        "/scoped-models",
        "/quit",
        "/skill:review",
        "/deploy",
    ] {
        assert!(
            names(&all).contains(&name),
            "{name} listed: {:?}",
            names(&all)
        );
    }
    let review = all.iter().find(|i| i.name == "/skill:review").unwrap();
    assert_eq!(review.description, "Review the diff");
    type_text(&mut app, "log");
    let narrowed = app.palette_items();
    assert_eq!(names(&narrowed), ["/login", "/logout", "/changelog"]);
    assert_eq!(app.palette_selected(&narrowed), 0);
    app.on_key(key(KeyCode::Down));
    app.on_key(key(KeyCode::Down));
    assert_eq!(app.palette_selected(&app.palette_items()), 2);
    app.on_key(key(KeyCode::Down));
    assert_eq!(app.palette_selected(&app.palette_items()), 0, "wraps");
    app.on_key(key(KeyCode::Up));
    app.on_key(key(KeyCode::Tab));
    assert_eq!(app.editor.text(), "/changelog ");
    assert!(
        app.palette_items().is_empty(),
        "closed once the name is complete"
    );
    assert!(app.take_commands().is_empty(), "Tab only completes");
}

#[test]
fn esc_closes_the_list_until_the_text_changes_and_up_is_history_again() {
    let dir = tempfile::tempdir().unwrap();
    let mut app = app_in(dir.path());
    app.editor = crate::editor::Editor::with_history(vec!["earlier".into()]);
    type_text(&mut app, "/mo");
    app.on_key(key(KeyCode::Esc));
    assert!(app.palette_items().is_empty());
    assert!(
        app.take_commands().is_empty(),
        "Esc closed the list, aborted nothing"
    );
    app.on_key(key(KeyCode::Up));
    assert_eq!(
        app.editor.text(),
        "earlier",
        "Up walks the history once closed"
    );
    app.editor.set_text("/mo");
    type_text(&mut app, "d");
    assert_eq!(names(&app.palette_items()), ["/model", "/scoped-models"]);
}

#[test]
fn the_list_is_drawn_with_the_choice_marked_and_its_keys_named() {
    let dir = tempfile::tempdir().unwrap();
    let mut app = app_in(dir.path());
    type_text(&mut app, "/dep");
    let lines: Vec<String> = crate::overlays::palette_lines(&app, 60)
        .iter()
        .map(crate::wrap::plain)
        .collect();
    assert!(lines[0].starts_with("› /deploy"), "{lines:?}");
    assert!(lines[0].contains("Ship it"), "{lines:?}");
    assert!(lines.last().unwrap().contains("Esc close"), "{lines:?}");
    // With more commands than rows, it says where the choice is.
    app.editor.clear();
    type_text(&mut app, "/");
    let lines = crate::overlays::palette_lines(&app, 60);
    assert_eq!(lines.len(), crate::overlays::PALETTE_ROWS + 1);
    assert!(
        crate::wrap::plain(lines.last().unwrap())
            .contains(&format!("1/{}", app.palette_items().len()))
    );
}

#[test]
fn enter_in_the_list_runs_the_chosen_command() {
    let dir = tempfile::tempdir().unwrap();
    let mut app = app_in(dir.path());
    type_text(&mut app, "/clo");
    app.on_key(key(KeyCode::Enter));
    assert_eq!(app.editor.text(), "");
    let sent = app.take_commands();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0]["type"], "clone");
}

#[test]
fn an_unknown_command_is_refused_with_the_nearest_names_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let mut app = app_in(dir.path());
    app.editor.set_text("/modle gpt");
    app.on_key(key(KeyCode::Enter));
    assert!(app.take_commands().is_empty(), "nothing sent to the model");
    assert_eq!(app.editor.text(), "/modle gpt", "kept to be corrected");
    let (said, kind) = notices(&app).pop().unwrap();
    assert_eq!(kind, NoticeKind::Warning);
    assert!(
        said.starts_with("Unknown command /modle. Did you mean /model"),
        "{said}"
    );
    // (With no space yet the list is open, and Enter takes its choice.)
    app.editor.set_text("/deplyo now");
    app.on_key(key(KeyCode::Enter));
    assert!(app.take_commands().is_empty());
    assert!(
        notices(&app).pop().unwrap().0.contains("/deploy"),
        "the session's commands too"
    );
}

#[test]
fn text_that_only_starts_with_a_slash_is_sent() {
    let dir = tempfile::tempdir().unwrap();
    let mut app = app_in(dir.path());
    for text in [
        "/usr/bin/env is missing",
        "/ a slash alone",
        "/tmp is full",
        "/*comment*/ what is this",
        "/skill:review the diff",
        "/deploy now",
    ] {
        app.editor.set_text(text);
        app.on_key(key(KeyCode::Enter));
        let sent = app.take_commands();
        assert_eq!(sent.len(), 1, "{text}: {sent:?}");
        assert_eq!(sent[0]["type"], "prompt", "{text}");
        assert_eq!(sent[0]["message"], text);
    }
    // Before the session's commands are known (a prompt given on the command line), a
    // `/name` goes to the session, which knows them.
    let mut fresh = app_at_start();
    fresh.editor.set_text("/skill:unknown-yet");
    fresh.submit(false);
    assert_eq!(fresh.take_commands().last().unwrap()["type"], "prompt");
}

fn app_at_start() -> App {
    App::new(Theme::new(true), "~/p".into(), Vec::new())
}

#[test]
fn settings_change_each_setting_through_its_command() {
    let dir = tempfile::tempdir().unwrap();
    let state = json!({
        "model": null, "thinkingLevel": "medium", "isStreaming": false, "isCompacting": false,
        "steeringMode": "one-at-a-time", "followUpMode": "all", "interruptMode": "wait",
        "sessionId": "s", "autoCompactionEnabled": true, "autoRetryEnabled": false,
        "messageCount": 0,
    });
    // The row, the moves in the values' list, and the command it sends.
    let cases = [
        (0, 1, json!({"type": "set_steering_mode", "mode": "all"})),
        (
            1,
            1,
            json!({"type": "set_follow_up_mode", "mode": "one-at-a-time"}),
        ),
        (
            2,
            1,
            json!({"type": "set_interrupt_mode", "mode": "immediate"}),
        ),
        (
            3,
            1,
            json!({"type": "set_auto_compaction", "enabled": false}),
        ),
        (4, 1, json!({"type": "set_auto_retry", "enabled": true})),
    ];
    for (row, moves, expected) in cases {
        let mut app = app_in(dir.path());
        type_text(&mut app, "/settings");
        app.on_key(key(KeyCode::Enter));
        answer(&mut app, "get_state", state.clone());
        let Some(Dialog {
            body: DialogBody::Select { options, .. },
            ..
        }) = &app.dialog
        else {
            panic!("the settings are listed");
        };
        assert_eq!(options.len(), 7);
        assert_eq!(options[1], "Follow-up mode: all");
        assert_eq!(options[4], "Auto-retry: off");
        for _ in 0..row {
            app.on_key(key(KeyCode::Down));
        }
        app.on_key(key(KeyCode::Enter));
        for _ in 0..moves {
            app.on_key(key(KeyCode::Down));
        }
        app.on_key(key(KeyCode::Enter));
        let mut sent = app.take_commands().pop().expect("a command");
        let id = sent.as_object_mut().unwrap().remove("id").unwrap();
        assert_eq!(sent, expected, "row {row}");
        feed(
            &mut app,
            json!({"type": "response", "id": id, "command": expected["type"], "success": true}),
        );
        assert!(
            notices(&app).pop().unwrap().0.contains(": "),
            "said once taken"
        );
    }
    // The thinking level and the permission mode open their own pickers.
    let mut app = app_in(dir.path());
    type_text(&mut app, "/settings");
    app.on_key(key(KeyCode::Enter));
    answer(&mut app, "get_state", state);
    for _ in 0..5 {
        app.on_key(key(KeyCode::Down));
    }
    app.on_key(key(KeyCode::Enter));
    assert_eq!(
        app.take_commands()[0]["type"],
        "get_available_thinking_levels"
    );
}

#[test]
fn login_stores_the_key_unseen_in_auth_json_and_logout_removes_it() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let mut app = app_in(dir.path());
    let agent = dir.path().join("agent");
    std::fs::create_dir_all(&agent).unwrap();
    std::fs::write(
        agent.join("auth.json"),
        r#"{"other": {"type": "api_key", "key": "!pass other"}}"#,
    )
    .unwrap();
    type_text(&mut app, "/login");
    app.on_key(key(KeyCode::Enter));
    let model = json!({"id": "m", "name": "m", "api": "openai-completions", "provider": "mock",
        "baseUrl": "http://x", "reasoning": false, "input": ["text"],
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
        "contextWindow": 1000, "maxTokens": 100});
    answer(&mut app, "get_available_models", json!({"models": [model]}));
    let Some(Dialog {
        body: DialogBody::Select { options, .. },
        ..
    }) = &app.dialog
    else {
        panic!("the providers are offered");
    };
    assert_eq!(options[0], "mock");
    assert!(
        options
            .iter()
            .any(|o| o == "anthropic (or $ANTHROPIC_API_KEY)"),
        "{options:?}"
    );
    assert!(options.last().unwrap().starts_with("Another provider"));
    app.on_key(key(KeyCode::Enter));
    type_text(&mut app, "sk-secret-1");
    app.on_paste("23\n");
    let Some(Dialog {
        body: DialogBody::Input { editor, .. },
        title,
        ..
    }) = &app.dialog
    else {
        panic!("the key is asked for");
    };
    assert!(title.contains("mock"), "{title}");
    assert_eq!(editor.text(), "•".repeat(13), "dots, never the key");
    assert!(
        !format!("{:?}", app.dialog).contains("sk-secret"),
        "nor in Debug"
    );
    app.on_key(key(KeyCode::Backspace));
    app.on_key(key(KeyCode::Enter));
    assert!(app.dialog.is_none());
    let auth: Value =
        serde_json::from_str(&std::fs::read_to_string(agent.join("auth.json")).unwrap()).unwrap();
    assert_eq!(
        auth,
        json!({"other": {"type": "api_key", "key": "!pass other"},
               "mock": {"type": "api_key", "key": "sk-secret-12"}})
    );
    let mode = std::fs::metadata(agent.join("auth.json"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let shown = notices(&app);
    assert!(
        shown.iter().all(|(text, _)| !text.contains("sk-secret")),
        "{shown:?}"
    );
    assert!(
        shown
            .last()
            .unwrap()
            .0
            .starts_with("Saved the API key for mock")
    );
    assert!(
        app.editor
            .history()
            .iter()
            .all(|h| !h.contains("sk-secret"))
    );

    type_text(&mut app, "/logout");
    app.on_key(key(KeyCode::Enter));
    let Some(Dialog {
        body: DialogBody::Select { options, .. },
        ..
    }) = &app.dialog
    else {
        panic!("the stored keys are offered");
    };
    assert_eq!(options, &["other", "mock"]);
    app.on_key(key(KeyCode::Down));
    app.on_key(key(KeyCode::Enter));
    let auth: Value =
        serde_json::from_str(&std::fs::read_to_string(agent.join("auth.json")).unwrap()).unwrap();
    assert_eq!(
        auth,
        json!({"other": {"type": "api_key", "key": "!pass other"}})
    );
}

#[test]
fn login_to_a_provider_typed_by_name_and_never_over_a_broken_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut app = app_in(dir.path());
    type_text(&mut app, "/login");
    app.on_key(key(KeyCode::Enter));
    answer(&mut app, "get_available_models", json!({"models": []}));
    app.on_key(key(KeyCode::Up));
    app.on_key(key(KeyCode::Enter));
    type_text(&mut app, "my-proxy");
    app.on_key(key(KeyCode::Enter));
    type_text(&mut app, "k1");
    app.on_key(key(KeyCode::Enter));
    let path = dir.path().join("agent/auth.json");
    let auth: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(auth, json!({"my-proxy": {"type": "api_key", "key": "k1"}}));
    // A file that does not parse is left alone, and it is said.
    std::fs::write(&path, "{not json").unwrap();
    type_text(&mut app, "/login");
    app.on_key(key(KeyCode::Enter));
    answer(&mut app, "get_available_models", json!({"models": []}));
    app.on_key(key(KeyCode::Enter));
    type_text(&mut app, "k2");
    app.on_key(key(KeyCode::Enter));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "{not json");
    let (said, kind) = notices(&app).pop().unwrap();
    assert_eq!(kind, NoticeKind::Error);
    assert!(
        said.contains("does not parse") && !said.contains("k2"),
        "{said}"
    );
}

#[test]
fn the_other_new_commands_send_their_commands_or_say_what_there_is() {
    let dir = tempfile::tempdir().unwrap();
    let mut app = app_in(dir.path());
    let agent = dir.path().join("agent");
    std::fs::create_dir_all(&agent).unwrap();
    let run = |app: &mut App, text: &str| {
        app.editor.set_text(text);
        app.submit(false);
    };
    run(&mut app, "/changelog");
    let said = notices(&app).pop().unwrap().0;
    assert!(
        said.starts_with(&format!("tau {}.", env!("CARGO_PKG_VERSION"))),
        "{said}"
    );
    assert!(said.contains("No changelog is bundled"), "{said}");
    run(&mut app, "/reload");
    assert!(
        notices(&app)
            .pop()
            .unwrap()
            .0
            .starts_with("/reload is not available yet")
    );

    std::fs::write(
        agent.join("settings.json"),
        r#"{"enabledModels": ["anthropic/*", "openai/gpt-5*"]}"#,
    )
    .unwrap();
    run(&mut app, "/scoped-models");
    let said = notices(&app).pop().unwrap().0;
    assert!(said.contains("anthropic/*, openai/gpt-5*"), "{said}");
    assert!(
        said.contains(&agent.join("settings.json").display().to_string()),
        "{said}"
    );

    run(&mut app, "/trust");
    assert!(
        notices(&app)
            .pop()
            .unwrap()
            .0
            .contains("no decision saved in trust.json")
    );
    let cwd = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::write(
        agent.join("trust.json"),
        json!({cwd.parent().unwrap().display().to_string(): true}).to_string(),
    )
    .unwrap();
    run(&mut app, "/trust");
    let said = notices(&app).pop().unwrap().0;
    assert!(said.contains("trusted, as"), "{said}");
    assert!(said.contains("--approve"), "{said}");

    run(&mut app, "/name");
    assert!(notices(&app).pop().unwrap().0.starts_with("Usage: /name"));
    assert!(
        app.take_commands().is_empty(),
        "none of these asked the server"
    );

    run(&mut app, "/thinking");
    assert_eq!(
        app.take_commands()[0]["type"],
        "get_available_thinking_levels"
    );

    run(&mut app, "/clone");
    answer(&mut app, "clone", json!({"cancelled": false}));
    let sent = app.take_commands();
    assert_eq!(sent[0]["type"], "get_messages", "the new session is shown");

    run(&mut app, "/share");
    let sent = app.take_commands();
    assert_eq!(sent[0]["type"], "export_html");
    let path = sent[0]["outputPath"].as_str().unwrap().to_string();
    assert!(path.ends_with("session.html"), "{path}");
    feed(
        &mut app,
        json!({"type": "response", "id": sent[0]["id"], "command": "export_html", "success": true,
               "data": {"path": path}}),
    );
    assert_eq!(app.request, Some(Request::Share(path.clone().into())));
    let _ = std::fs::remove_dir(std::path::Path::new(&path).parent().unwrap());
}

#[test]
fn import_copies_the_file_into_the_sessions_and_switches_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut app = app_in(dir.path());
    let sessions = dir.path().join("sessions");
    app.session_dir = Some(sessions.clone());
    std::fs::write(dir.path().join("old.jsonl"), "{}\n").unwrap();
    app.editor.set_text("/import missing.jsonl");
    app.submit(false);
    assert!(
        notices(&app)
            .pop()
            .unwrap()
            .0
            .starts_with("No session file at")
    );
    app.editor.set_text("/import old.jsonl");
    app.submit(false);
    assert!(matches!(
        app.dialog,
        Some(Dialog {
            body: DialogBody::Confirm { .. },
            ..
        })
    ));
    assert!(
        app.take_commands().is_empty(),
        "nothing before the confirmation"
    );
    app.on_key(key(KeyCode::Char('y')));
    let sent = app.take_commands();
    assert_eq!(sent[0]["type"], "switch_session");
    assert_eq!(
        sent[0]["sessionPath"],
        sessions.join("old.jsonl").display().to_string()
    );
    assert_eq!(
        std::fs::read_to_string(sessions.join("old.jsonl")).unwrap(),
        "{}\n"
    );
    assert!(
        dir.path().join("old.jsonl").exists(),
        "the file given stays"
    );
}

#[test]
fn queued_messages_are_listed_and_alt_up_takes_them_back() {
    let mut app = app();
    assert!(crate::overlays::queued_lines(&app, 80).is_empty());
    feed(
        &mut app,
        json!({"type": "queue_update", "steering": ["use tabs"], "followUp": ["then run the tests"]}),
    );
    let lines: Vec<String> = crate::overlays::queued_lines(&app, 80)
        .iter()
        .map(crate::wrap::plain)
        .collect();
    assert_eq!(
        lines,
        [
            "Steering: use tabs",
            "Follow-up: then run the tests",
            "↳ Alt+Up takes them back into the editor",
        ]
    );
    type_text(&mut app, "draft");
    app.on_key(KeyEvent::new(KeyCode::Up, KeyModifiers::ALT));
    answer(
        &mut app,
        "clear_queue",
        json!({"steering": ["use tabs"], "followUp": ["then run the tests"]}),
    );
    assert_eq!(app.editor.text(), "use tabs\n\nthen run the tests\n\ndraft");
    assert!(crate::overlays::queued_lines(&app, 80).is_empty());
    app.on_key(KeyEvent::new(KeyCode::Up, KeyModifiers::ALT));
    answer(
        &mut app,
        "clear_queue",
        json!({"steering": [], "followUp": []}),
    );
    assert!(
        notices(&app)
            .pop()
            .unwrap()
            .0
            .starts_with("No queued messages")
    );
}

#[test]
fn ctrl_g_asks_for_the_editor_with_the_whole_text_and_takes_its_result() {
    let mut app = app();
    let pasted: String = (1..=12).map(|i| format!("l{i}\n")).collect();
    type_text(&mut app, "see ");
    app.on_paste(&pasted);
    app.on_key(ctrl('g'));
    assert_eq!(app.request, Some(Request::Edit(format!("see {pasted}"))));
    app.request = None;
    app.edited("rewritten\n");
    assert_eq!(app.editor.text(), "rewritten");
    app.on_key(key(KeyCode::Enter));
    assert_eq!(app.take_commands()[0]["message"], "rewritten");
}

#[test]
fn ctrl_z_and_ctrl_v_are_requests_and_an_image_goes_with_the_next_message() {
    let mut app = app();
    app.on_key(ctrl('z'));
    assert_eq!(app.request.take(), Some(Request::Suspend));
    app.on_key(ctrl('v'));
    assert_eq!(app.request.take(), Some(Request::PasteImage));
    type_text(&mut app, "what is ");
    app.attach_image("image/png", b"\x89PNG");
    assert_eq!(app.editor.text(), "what is [image #1]");
    // A pasted path of an image file attaches it too.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("shot.jpg"), b"jpeg").unwrap();
    app.cwd = dir.path().to_path_buf();
    type_text(&mut app, " and ");
    app.on_paste("shot.jpg");
    assert_eq!(app.editor.text(), "what is [image #1] and [image #2]");
    app.on_key(key(KeyCode::Enter));
    let sent = app.take_commands();
    assert_eq!(
        sent[0]["images"],
        json!([
            {"type": "image", "data": "iVBORw==", "mimeType": "image/png"},
            {"type": "image", "data": "anBlZw==", "mimeType": "image/jpeg"},
        ])
    );
    // Sent once: the next message has none, nor one whose marker was deleted.
    app.attach_image("image/png", b"x");
    app.editor.set_text("no marker");
    app.on_key(key(KeyCode::Enter));
    assert!(app.take_commands()[0].get("images").is_none());
}

#[test]
fn ctrl_l_opens_the_model_picker_and_ctrl_t_hides_thinking() {
    let mut app = app();
    app.on_key(ctrl('l'));
    assert_eq!(app.take_commands()[0]["type"], "get_available_models");
    feed(
        &mut app,
        json!({"type": "message_start", "message": assistant(json!([]))}),
    );
    app.on_delta(true, "pondering");
    app.on_delta(false, "Answer");
    let shown = |app: &mut App| -> String {
        let view = app.view;
        app.transcript
            .lines(60, view, &app.theme)
            .iter()
            .map(crate::wrap::plain)
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(shown(&mut app).contains("pondering"));
    app.on_key(ctrl('t'));
    let text = shown(&mut app);
    assert!(
        !text.contains("pondering") && text.contains("Answer"),
        "{text}"
    );
    app.on_key(ctrl('t'));
    assert!(shown(&mut app).contains("pondering"));
}

#[test]
fn the_keys_list_names_the_new_keys_and_the_list() {
    for key in [
        "Ctrl+G", "Ctrl+V", "Ctrl+L", "Ctrl+T", "Ctrl+Z", "Alt+Up", "/",
    ] {
        assert!(HOTKEYS.iter().any(|(k, _)| *k == key), "{key} in HOTKEYS");
    }
    // tau keeps them: an extension cannot take them away.
    for id in ["ctrl+g", "ctrl+v", "ctrl+l", "ctrl+t", "ctrl+z", "alt+up"] {
        assert!(crate::keys::refusal(id).is_some(), "{id} is tau's");
    }
}

#[test]
fn export_to_a_jsonl_path_copies_the_session_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut app = app_in(dir.path());
    let session = dir.path().join("s.jsonl");
    std::fs::write(&session, "{\"type\":\"session\"}\n").unwrap();
    app.editor.set_text("/export copy.jsonl");
    app.submit(false);
    let state = json!({
        "model": null, "thinkingLevel": "off", "isStreaming": false, "isCompacting": false,
        "steeringMode": "all", "followUpMode": "all", "sessionId": "s",
        "sessionFile": session.display().to_string(), "autoCompactionEnabled": true,
        "messageCount": 0,
    });
    answer(&mut app, "get_state", state);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("copy.jsonl")).unwrap(),
        "{\"type\":\"session\"}\n"
    );
    assert!(notices(&app).pop().unwrap().0.starts_with("Exported to"));
}

#[test]
fn tab_completes_mcp_mentions_and_asks_the_server_for_arguments() {
    let mut app = app();
    feed(
        &mut app,
        json!({"type": "mcp_server_status", "server": "docs", "transport": "stdio",
               "state": "ready", "tools": [], "restarts": 0}),
    );
    // A server that becomes ready is asked for its resources.
    let asked = app.take_commands();
    let id = asked
        .iter()
        .find(|c| c["type"] == "get_mcp_resources")
        .map(|c| c["id"].clone())
        .unwrap_or_else(|| panic!("get_mcp_resources not sent: {asked:?}"));
    feed(
        &mut app,
        json!({"type": "response", "id": id, "command": "get_mcp_resources", "success": true,
        "data": {"resources": [
            {"server": "docs", "uri": "file:///guide.md", "name": "guide", "template": false},
            {"server": "docs", "uri": "file:///api.md", "name": "api", "template": false},
            {"server": "docs", "uri": "doc://page/{id}", "name": "page", "template": true}
        ]}}),
    );
    type_text(&mut app, "read @do");
    app.on_key(key(KeyCode::Tab));
    assert_eq!(app.editor.text(), "read @docs:");
    type_text(&mut app, "file:///g");
    app.on_key(key(KeyCode::Tab));
    assert_eq!(app.editor.text(), "read @docs:file:///guide.md ");

    // A template's placeholder and a prompt's argument are the server's to complete.
    for (typed, value) in [
        ("read @docs:doc://page/4", "@docs:doc://page/42"),
        ("/mcp:docs:review Eng", "Engineering"),
    ] {
        app.editor.clear();
        app.take_commands();
        type_text(&mut app, typed);
        app.on_key(key(KeyCode::Tab));
        let asked = app.take_commands();
        let command = asked
            .iter()
            .find(|c| c["type"] == "complete_mcp_argument")
            .unwrap_or_else(|| panic!("not asked: {asked:?}"));
        assert_eq!(command["text"], typed);
        feed(
            &mut app,
            json!({"type": "response", "id": command["id"], "command": "complete_mcp_argument",
                   "success": true, "data": {"argument": "x", "values": [value]}}),
        );
        let word_start = typed.rfind(' ').map_or(0, |i| i + 1);
        assert_eq!(
            app.editor.text(),
            format!("{}{value} ", &typed[..word_start])
        );
    }
}
