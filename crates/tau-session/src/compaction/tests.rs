use super::summary::*;
use super::*;
use serde_json::{Map, json};
use std::path::Path;
use tau_protocol::{
    AssistantMessage, Message, StopReason, TextContent, ToolCall, ToolResultMessage, Usage,
    UserContent, UserContentBlock, UserMessage,
};

use crate::store::SessionStore;

const TS: &str = "2025-01-01T00:00:00.000Z";

fn entry(id: &str, kind: EntryKind) -> SessionEntry {
    SessionEntry {
        id: id.into(),
        parent_id: None,
        timestamp: TS.into(),
        kind,
        extra: Map::new(),
    }
}

fn msg(id: &str, message: AgentMessage) -> SessionEntry {
    entry(
        id,
        EntryKind::Message {
            message: message.into(),
        },
    )
}

/// A text of `tokens` estimated tokens.
fn sized(tokens: usize) -> String {
    "x".repeat(tokens * 4)
}

/// A text of `tokens` estimated tokens that starts with `tag`, so equal sizes still differ.
fn tagged(tag: &str, tokens: usize) -> String {
    format!("{tag}{}", "x".repeat(tokens * 4 - tag.len()))
}

fn user(text: &str) -> AgentMessage {
    AgentMessage::User(UserMessage {
        content: UserContent::Text(text.into()),
        timestamp: 0,
        attachments: None,
    })
}

fn reply(content: Vec<AssistantContent>) -> AgentMessage {
    AgentMessage::Assistant(AssistantMessage {
        content,
        api: "anthropic-messages".into(),
        provider: "anthropic".into(),
        model: "m".into(),
        usage: Usage::default(),
        stop_reason: StopReason::Stop,
        timestamp: 0,
        response_id: None,
        response_model: None,
        diagnostics: None,
        error_message: None,
        retry_after_ms: None,
    })
}

fn said(text: &str) -> AgentMessage {
    reply(vec![AssistantContent::Text(TextContent {
        text: text.into(),
        text_signature: None,
    })])
}

fn call(id: &str, name: &str, args: serde_json::Value) -> AssistantContent {
    AssistantContent::ToolCall(ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: args.as_object().cloned().unwrap_or_default(),
        thought_signature: None,
    })
}

fn result(call_id: &str, name: &str, text: &str) -> AgentMessage {
    AgentMessage::ToolResult(ToolResultMessage {
        tool_call_id: call_id.into(),
        tool_name: name.into(),
        content: vec![UserContentBlock::Text(TextContent {
            text: text.into(),
            text_signature: None,
        })],
        details: None,
        is_error: false,
        timestamp: 0,
    })
}

fn compaction_entry(
    id: &str,
    summary: &str,
    first_kept: &str,
    details: Option<serde_json::Value>,
    from_hook: Option<bool>,
) -> SessionEntry {
    entry(
        id,
        EntryKind::Compaction {
            summary: summary.into(),
            first_kept_entry_id: first_kept.into(),
            tokens_before: 999,
            details,
            from_hook,
        },
    )
}

fn refs(entries: &[SessionEntry]) -> Vec<&SessionEntry> {
    entries.iter().collect()
}

/// The ids of the entries holding `messages`, matched in path order (equal messages are
/// told apart by position).
fn ids(path: &[&SessionEntry], messages: &[AgentMessage]) -> Vec<String> {
    let mut from = 0;
    messages
        .iter()
        .map(|m| {
            let found = path[from..]
                .iter()
                .position(|e| e.message() == Some(m) || entry_message(e).as_deref() == Some(m));
            match found {
                Some(i) => {
                    from += i + 1;
                    path[from - 1].id.clone()
                }
                None => "?".into(),
            }
        })
        .collect()
}

// ---------------------------------------------------------------------------------------
// Threshold

#[test]
fn threshold_is_window_minus_reserve() {
    let s = CompactionSettings::default();
    assert!(!should_compact(200_000 - 16_384, 200_000, &s));
    assert!(should_compact(200_000 - 16_384 + 1, 200_000, &s));
    assert!(!should_compact(
        1_000_000,
        200_000,
        &CompactionSettings {
            enabled: false,
            ..s
        }
    ));
    // A reserve above the window compacts at any size (pi's signed arithmetic).
    let big = CompactionSettings {
        reserve_tokens: 300_000,
        ..s
    };
    assert!(should_compact(1, 200_000, &big));
    // An unknown window never triggers.
    assert!(!should_compact(u64::MAX, 0, &s));
}

#[test]
fn settings_come_from_the_document() {
    let doc =
        json!({"compaction": {"enabled": false, "reserveTokens": 500, "keepRecentTokens": 7}});
    let s =
        CompactionSettings::from_settings(&Settings::from_value(doc.as_object().cloned().unwrap()));
    assert_eq!(
        s,
        CompactionSettings {
            enabled: false,
            reserve_tokens: 500,
            keep_recent_tokens: 7
        }
    );
    assert_eq!(
        CompactionSettings::from_settings(&Settings::default()),
        CompactionSettings::default()
    );
}

// ---------------------------------------------------------------------------------------
// Cut point

/// u1 a1 u2 a2 u3 a3, 100 tokens each.
fn six_turns() -> Vec<SessionEntry> {
    vec![
        msg("u1", user(&tagged("u1", 100))),
        msg("a1", said(&tagged("a1", 100))),
        msg("u2", user(&tagged("u2", 100))),
        msg("a2", said(&tagged("a2", 100))),
        msg("u3", user(&tagged("u3", 100))),
        msg("a3", said(&tagged("a3", 100))),
    ]
}

#[test]
fn keeps_at_least_the_recent_budget() {
    let entries = six_turns();
    let path = refs(&entries);
    let prep = prepare_compaction(&path, 200).unwrap();
    assert_eq!(prep.first_kept_entry_id, "u3");
    assert!(!prep.is_split_turn);
    assert_eq!(
        ids(&path, &prep.messages_to_summarize),
        ["u1", "a1", "u2", "a2"]
    );
    // One token more and the kept part must grow: the cut moves back to a2 (a split turn).
    let prep = prepare_compaction(&path, 201).unwrap();
    assert_eq!(prep.first_kept_entry_id, "a2");
    assert!(prep.is_split_turn);
    assert_eq!(ids(&path, &prep.messages_to_summarize), ["u1", "a1"]);
    assert_eq!(ids(&path, &prep.turn_prefix_messages), ["u2"]);

    // Whatever the budget, the kept part holds at least that much (or everything).
    for keep in [1, 50, 100, 150, 250, 399, 450, 550] {
        let cut = find_cut_point(&path, 0, path.len(), keep);
        let kept: u64 = path[cut.first_kept_index..]
            .iter()
            .filter_map(|e| e.message())
            .map(estimate_tokens)
            .sum();
        assert!(kept >= keep || cut.first_kept_index == 0, "keep {keep}");
    }
}

#[test]
fn a_budget_never_reached_keeps_everything() {
    let entries = six_turns();
    let path = refs(&entries);
    let cut = find_cut_point(&path, 0, path.len(), 10_000);
    assert_eq!(cut.first_kept_index, 0);
    assert_eq!(cut.turn_start_index, None);
    assert_eq!(
        prepare_compaction(&path, 10_000),
        Err(CompactionSkip::NothingToCompact)
    );
}

/// u1, a1 calls c1+c2, r1, r2, a2 calls c3, r3, a3 — tool outputs are the big parts.
fn tool_turn() -> Vec<SessionEntry> {
    vec![
        msg("u1", user(&tagged("u1", 50))),
        msg(
            "a1",
            reply(vec![
                call("c1", "read", json!({"path": "src/a.rs"})),
                call("c2", "read", json!({"path": "src/b.rs"})),
            ]),
        ),
        msg("r1", result("c1", "read", &sized(120))),
        msg("r2", result("c2", "read", &sized(80))),
        msg(
            "a2",
            reply(vec![call(
                "c3",
                "edit",
                json!({"path": "src/b.rs", "edits": [{"oldText": "a", "newText": "b"}]}),
            )]),
        ),
        msg("r3", result("c3", "edit", &sized(60))),
        msg("a3", said(&tagged("a3", 30))),
    ]
}

#[test]
fn never_separates_a_tool_call_from_its_results() {
    let entries = tool_turn();
    let path = refs(&entries);
    let total: u64 = path
        .iter()
        .filter_map(|e| e.message())
        .map(estimate_tokens)
        .sum();
    for keep in 1..=total + 1 {
        let cut = find_cut_point(&path, 0, path.len(), keep);
        let first = path[cut.first_kept_index];
        assert!(
            !matches!(first.message(), Some(AgentMessage::ToolResult(_))),
            "keep {keep}: kept part starts at tool result {}",
            first.id
        );
        // Every kept result's call is kept too.
        let kept = &path[cut.first_kept_index..];
        for e in kept {
            if let Some(AgentMessage::ToolResult(r)) = e.message() {
                let has_call = kept.iter().any(|k| match k.message() {
                    Some(AgentMessage::Assistant(a)) => a.content.iter().any(
                        |c| matches!(c, AssistantContent::ToolCall(tc) if tc.id == r.tool_call_id),
                    ),
                    _ => false,
                });
                assert!(
                    has_call,
                    "keep {keep}: result {} kept without its call",
                    e.id
                );
            }
        }
    }
    // The budget is reached at r2 (a3 30 + r3 60 + a2 16 + r2 80 ≥ 150): the cut moves forward to
    // the next valid point, a2, not back onto the result.
    let cut = find_cut_point(&path, 0, path.len(), 150);
    assert_eq!(path[cut.first_kept_index].id, "a2");
}

#[test]
fn a_cut_inside_a_turn_summarises_its_beginning_separately() {
    let entries = tool_turn();
    let path = refs(&entries);
    let prep = prepare_compaction(&path, 100).unwrap();
    assert_eq!(prep.first_kept_entry_id, "a2");
    assert!(prep.is_split_turn);
    assert!(
        prep.messages_to_summarize.is_empty(),
        "nothing before the turn"
    );
    assert_eq!(
        ids(&path, &prep.turn_prefix_messages),
        ["u1", "a1", "r1", "r2"]
    );
    // The prefix's reads count; the kept edit does not (it is not summarised).
    assert_eq!(prep.file_ops.read_files, ["src/a.rs", "src/b.rs"]);
    assert!(prep.file_ops.modified_files.is_empty());
}

#[test]
fn settings_entries_stay_with_the_messages_after_them() {
    let mut entries = six_turns();
    entries.insert(
        4,
        entry(
            "model",
            EntryKind::ModelChange {
                provider: "p".into(),
                model_id: "m".into(),
            },
        ),
    );
    entries.insert(
        5,
        entry(
            "think",
            EntryKind::ThinkingLevelChange {
                thinking_level: "high".into(),
            },
        ),
    );
    let path = refs(&entries);
    let prep = prepare_compaction(&path, 200).unwrap();
    assert_eq!(prep.first_kept_entry_id, "model");
    assert!(
        !prep.is_split_turn,
        "a model change before a user message splits nothing"
    );
    assert_eq!(
        ids(&path, &prep.messages_to_summarize),
        ["u1", "a1", "u2", "a2"]
    );
}

#[test]
fn extension_messages_and_bash_runs_are_cut_points_that_start_turns() {
    let entries = vec![
        msg("u1", user(&tagged("u1", 100))),
        msg("a1", said(&tagged("a1", 100))),
        entry(
            "cm",
            EntryKind::CustomMessage {
                custom_type: "note".into(),
                content: UserContent::Text(sized(100)),
                display: true,
                details: None,
            },
        ),
        msg("a2", said(&tagged("a2", 100))),
    ];
    let path = refs(&entries);
    // Budget reached at a2; the cut then moves back over the extension message (it is not a
    // `message` entry), so the turn it began is kept whole.
    let prep = prepare_compaction(&path, 100).unwrap();
    assert_eq!(prep.first_kept_entry_id, "cm");
    assert!(!prep.is_split_turn);
    assert_eq!(ids(&path, &prep.messages_to_summarize), ["u1", "a1"]);
    // Extension messages do not count toward the budget: 150 reaches back to a1 although
    // cm + a2 hold 200 tokens. a1's turn began at u1.
    let cut = find_cut_point(&path, 0, path.len(), 150);
    assert_eq!(path[cut.first_kept_index].id, "a1");
    assert_eq!(cut.turn_start_index, Some(0));
    // A bash run starts a turn too: cutting at the reply after it splits nothing.
    let entries = vec![
        msg("u1", user(&tagged("u1", 100))),
        msg(
            "b1",
            AgentMessage::BashExecution(tau_protocol::BashExecutionMessage {
                command: "ls".into(),
                output: sized(100),
                exit_code: Some(0),
                cancelled: false,
                truncated: false,
                full_output_path: None,
                timestamp: 0,
                exclude_from_context: None,
            }),
        ),
        msg("a1", said(&tagged("a1", 100))),
    ];
    let path = refs(&entries);
    let cut = find_cut_point(&path, 0, path.len(), 150);
    assert_eq!(path[cut.first_kept_index].id, "b1");
    assert_eq!(cut.turn_start_index, None);
    let cut = find_cut_point(&path, 0, path.len(), 50);
    assert_eq!(path[cut.first_kept_index].id, "a1");
    assert_eq!(
        cut.turn_start_index,
        Some(1),
        "the turn began with the bash run"
    );
}

// ---------------------------------------------------------------------------------------
// Previous compaction

/// u1 a1 u2 a2 | compaction (kept from u2) | u3 a3 u4 a4 — 100 tokens each.
fn compacted_once(
    details: Option<serde_json::Value>,
    from_hook: Option<bool>,
) -> Vec<SessionEntry> {
    let mut entries = six_turns();
    entries.truncate(4);
    entries.push(compaction_entry(
        "c1",
        "OLD SUMMARY",
        "u2",
        details,
        from_hook,
    ));
    entries.extend([
        msg("u3", user(&tagged("u3", 100))),
        msg("a3", said(&tagged("a3", 100))),
        msg("u4", user(&tagged("u4", 100))),
        msg("a4", said(&tagged("a4", 100))),
    ]);
    entries
}

#[test]
fn a_previous_compaction_bounds_the_summary_and_is_carried_forward() {
    let entries = compacted_once(
        Some(json!({"readFiles": ["notes.md", "x.rs"], "modifiedFiles": ["x.rs", "y.rs"]})),
        Some(false),
    );
    let path = refs(&entries);
    let prep = prepare_compaction(&path, 200).unwrap();
    assert_eq!(prep.first_kept_entry_id, "u4");
    assert_eq!(prep.previous_summary.as_deref(), Some("OLD SUMMARY"));
    // From the previous first kept entry (u2), not from u1; the compaction entry itself is
    // not a message to summarise.
    assert_eq!(
        ids(&path, &prep.messages_to_summarize),
        ["u2", "a2", "u3", "a3"]
    );
    assert!(
        !prep
            .messages_to_summarize
            .iter()
            .any(|m| matches!(m, AgentMessage::CompactionSummary(_)))
    );
    // The earlier lists carry over: x.rs was modified, so it is not "read only".
    assert_eq!(prep.file_ops.read_files, ["notes.md"]);
    assert_eq!(prep.file_ops.modified_files, ["x.rs", "y.rs"]);
    // tokensBefore is the rebuilt context: summary + u2 a2 u3 a3 u4 a4, not u1/a1.
    let summary_tokens = "OLD SUMMARY".len().div_ceil(4) as u64;
    assert_eq!(prep.tokens_before, summary_tokens + 600);
}

#[test]
fn an_extension_made_compaction_contributes_no_file_lists() {
    let entries = compacted_once(
        Some(json!({"readFiles": ["notes.md"], "modifiedFiles": ["y.rs"]})),
        Some(true),
    );
    let prep = prepare_compaction(&refs(&entries), 200).unwrap();
    assert_eq!(prep.file_ops, CompactionDetails::default());
}

#[test]
fn the_new_cut_may_reach_back_before_the_previous_compaction() {
    let entries = compacted_once(None, None);
    let path = refs(&entries);
    // 450 tokens: u4 a4 u3 a3 (400) then a2 → cut at a2, inside the turn begun by u2.
    let prep = prepare_compaction(&path, 450).unwrap();
    assert_eq!(prep.first_kept_entry_id, "a2");
    assert!(prep.is_split_turn);
    assert!(prep.messages_to_summarize.is_empty());
    assert_eq!(ids(&path, &prep.turn_prefix_messages), ["u2"]);
}

#[test]
fn nothing_new_since_the_previous_compaction() {
    let entries = compacted_once(None, None);
    let path = refs(&entries);
    assert_eq!(
        prepare_compaction(&path[..5], 10),
        Err(CompactionSkip::AlreadyCompacted)
    );
    assert_eq!(
        CompactionSkip::AlreadyCompacted.to_string(),
        "Already compacted"
    );
    // Everything since the previous first kept entry fits in the budget.
    assert_eq!(
        prepare_compaction(&path, 10_000),
        Err(CompactionSkip::NothingToCompact)
    );
    assert_eq!(
        CompactionSkip::NothingToCompact.to_string(),
        "Nothing to compact (session too small)"
    );
    assert_eq!(
        prepare_compaction(&[], 10),
        Err(CompactionSkip::NothingToCompact)
    );
}

#[test]
fn context_of_a_path_starts_at_the_summary_and_keeps_from_the_first_kept_entry() {
    let mut store = SessionStore::in_memory(Path::new("/tmp"));
    store.append_message(user("one")).unwrap();
    store.append_message(said("two")).unwrap();
    let keep = store.append_message(user("three")).unwrap();
    store.append_message(said("four")).unwrap();
    store
        .append_compaction("S".into(), keep, 42, None, false)
        .unwrap();
    store.append_thinking_level_change("high").unwrap();
    store.append_message(user("five")).unwrap();
    store
        .append_custom_message("note", UserContent::Text("six".into()), true, None)
        .unwrap();
    let path = store.branch_path();
    let messages = context_messages(&path);
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| match &**m {
            AgentMessage::CompactionSummary(_) => "summary",
            AgentMessage::User(_) => "user",
            AgentMessage::Assistant(_) => "assistant",
            AgentMessage::Custom(_) => "custom",
            _ => "other",
        })
        .collect();
    assert_eq!(roles, ["summary", "user", "assistant", "user", "custom"]);
}

// ---------------------------------------------------------------------------------------
// File operations

#[test]
fn file_operations_come_from_read_write_and_edit_calls() {
    let mut ops = FileOps::default();
    ops.add_message(&reply(vec![
        call("1", "read", json!({"path": "z.rs"})),
        call("2", "read", json!({"path": "a.rs"})),
        call("3", "write", json!({"path": "new.rs", "content": "x"})),
        call("4", "edit", json!({"path": "a.rs", "edits": []})),
        call(
            "5",
            "bash",
            json!({"command": "cat q.rs", "path": "ignored.rs"}),
        ),
        call("6", "read", json!({"file": "no-path-key.rs"})),
        call("7", "read", json!({"path": 5})),
        call("8", "read", json!({"path": "z.rs"})),
    ]));
    // Tool results and user messages never count.
    ops.add_message(&result("1", "read", "path: other.rs"));
    ops.add_message(&user("read b.rs"));
    let details = ops.details();
    assert_eq!(details.read_files, ["z.rs"]);
    assert_eq!(details.modified_files, ["a.rs", "new.rs"]);
    assert_eq!(
        details.to_value(),
        json!({"readFiles": ["z.rs"], "modifiedFiles": ["a.rs", "new.rs"]})
    );
}

#[test]
fn preparation_collects_file_operations_of_summarised_messages_only() {
    let entries = vec![
        msg("u1", user("go")),
        msg(
            "a1",
            reply(vec![
                call("c1", "read", json!({"path": "old.rs"})),
                call("c2", "write", json!({"path": "made.rs", "content": ""})),
            ]),
        ),
        msg("r1", result("c1", "read", "x")),
        msg("r2", result("c2", "write", "ok")),
        msg("a1b", said("done")),
        msg("u2", user(&tagged("u2", 100))),
        msg(
            "a2",
            reply(vec![call(
                "c3",
                "edit",
                json!({"path": "kept.rs", "edits": []}),
            )]),
        ),
        msg("r3", result("c3", "edit", &sized(100))),
    ];
    let prep = prepare_compaction(&refs(&entries), 150).unwrap();
    assert_eq!(prep.first_kept_entry_id, "u2");
    assert_eq!(prep.file_ops.read_files, ["old.rs"]);
    assert_eq!(prep.file_ops.modified_files, ["made.rs"]);
}

// ---------------------------------------------------------------------------------------
// Summary request

#[test]
fn transcript_lists_each_part_and_cuts_long_tool_output() {
    let input = SummaryInput::new(vec![
        user("fix the bug"),
        reply(vec![
            AssistantContent::Thinking(tau_protocol::ThinkingContent {
                thinking: "look at main".into(),
                thinking_signature: None,
                redacted: None,
            }),
            AssistantContent::Text(TextContent {
                text: "Reading it.".into(),
                text_signature: None,
            }),
            call("c1", "read", json!({"path": "src/main.rs", "offset": 3})),
        ]),
        result("c1", "read", &"y".repeat(2500)),
    ]);
    let text = input.transcript();
    assert!(text.starts_with("USER:\nfix the bug\n\nAGENT (reasoning):\nlook at main\n\n"));
    assert!(text.contains(
        "AGENT:\nReading it.\n\nAGENT CALLED:\nread {\"path\":\"src/main.rs\",\"offset\":3}"
    ));
    assert!(text.contains("TOOL OUTPUT (read):\n"));
    assert!(text.contains(&format!(
        "{}\n[… 500 more characters not shown]",
        "y".repeat(2000)
    )));
    assert!(!text.contains(&"y".repeat(2001)));
}

#[test]
fn history_request_shape_and_budget() {
    let input = SummaryInput::new(vec![user("hello"), said("hi")]);
    let fresh = history_request(&input, None, None, 500, 0);
    assert_eq!(
        fresh.max_tokens, 400,
        "80 % of the reserve (observed 400 for 500)"
    );
    assert!(
        fresh
            .prompt
            .starts_with("<transcript>\nUSER:\nhello\n\nAGENT:\nhi\n</transcript>\n\n")
    );
    assert!(fresh.prompt.contains("## Goal"));
    assert!(fresh.prompt.contains("## Constraints & Preferences"));
    assert!(fresh.prompt.contains("### In Progress"));
    assert!(fresh.prompt.contains("## Critical Context"));
    assert!(!fresh.prompt.contains("<earlier-checkpoint>"));
    assert_eq!(fresh.system_prompt, SUMMARY_SYSTEM_PROMPT);

    let update = history_request(
        &input,
        Some("## Goal\nship it"),
        Some("  the database schema "),
        16384,
        8192,
    );
    assert_eq!(update.max_tokens, 8192, "capped by the model's maxTokens");
    assert!(update.prompt.contains(
        "</transcript>\n\n<earlier-checkpoint>\n## Goal\nship it\n</earlier-checkpoint>\n\n"
    ));
    assert!(update.prompt.contains("updated checkpoint"));
    assert!(!fresh.prompt.contains("updated checkpoint"));
    assert!(
        update
            .prompt
            .ends_with("\n\nAlso pay attention to: the database schema")
    );
    assert_eq!(
        history_request(&input, None, Some("  "), 16384, 0).prompt,
        history_request(&input, None, None, 16384, 0).prompt,
        "blank custom instructions add nothing"
    );

    let context = update.context(7);
    assert_eq!(
        context.system_prompt.as_deref(),
        Some(SUMMARY_SYSTEM_PROMPT)
    );
    assert!(context.tools.is_empty());
    assert_eq!(context.messages.len(), 1);
    match &context.messages[0] {
        Message::User(u) => {
            assert_eq!(u.timestamp, 7);
            assert_eq!(user_text_of(&u.content), update.prompt);
        }
        other => panic!("not a user message: {other:?}"),
    }
}

fn user_text_of(content: &UserContent) -> String {
    match content {
        UserContent::Text(t) => t.clone(),
        UserContent::Blocks(b) => b
            .iter()
            .map(|b| match b {
                UserContentBlock::Text(t) => t.text.clone(),
                UserContentBlock::Image(_) => String::new(),
            })
            .collect(),
    }
}

#[test]
fn turn_prefix_request_has_half_the_budget() {
    let input = SummaryInput::new(vec![user("start")]);
    let req = turn_prefix_request(&input, 16384, 0);
    assert_eq!(req.max_tokens, 8192);
    assert_eq!(turn_prefix_request(&input, 16384, 4000).max_tokens, 4000);
    assert!(
        req.prompt
            .starts_with("<transcript>\nUSER:\nstart\n</transcript>\n\n")
    );
    assert!(req.prompt.contains("## Request"));
    assert!(req.prompt.contains("## Needed Later"));
}

#[test]
fn prompts_are_our_own_words() {
    let input = SummaryInput::new(vec![user("x")]);
    let texts = [
        history_request(&input, Some("p"), Some("c"), 100, 0).prompt,
        history_request(&input, None, None, 100, 0).prompt,
        turn_prefix_request(&input, 100, 0).prompt,
        SUMMARY_SYSTEM_PROMPT.to_owned(),
        assemble_summary(None, Some("t"), &CompactionDetails::default()),
    ];
    for phrase in [
        "context summarization assistant",
        "Do NOT continue the conversation",
        "structured context checkpoint summary",
        "Additional focus:",
        "PRESERVE all existing information",
        "Turn Context (split turn)",
        "No prior history.",
        "[User]:",
        "<conversation>",
    ] {
        for text in &texts {
            assert!(!text.contains(phrase), "{phrase:?} is pi's wording");
        }
    }
}

// ---------------------------------------------------------------------------------------
// Shrinking after the summary request overflowed

#[test]
fn shrinking_cuts_tool_output_first() {
    let mut input = SummaryInput::new(vec![
        user("a"),
        reply(vec![call("c", "read", json!({"path": "f"}))]),
        result("c", "read", &"z".repeat(1500)),
    ]);
    let before = input.transcript().len();
    assert!(input.shrink());
    assert_eq!(input.tool_result_limit, SHRUNK_TOOL_RESULT_LIMIT);
    assert_eq!(input.messages.len(), 3, "no message dropped yet");
    assert!(input.transcript().len() < before);
}

#[test]
fn shrinking_drops_the_oldest_half_without_orphaned_results() {
    let mut input = SummaryInput::new(vec![
        user(&sized(100)),
        reply(vec![call("c", "read", json!({"path": "f"}))]),
        result("c", "read", &sized(50)),
        result("c", "read", &sized(50)),
        said(&sized(60)),
        user(&sized(40)),
    ]);
    // No tool output over 500 characters... 200 characters each: step 1 is skipped.
    assert!(input.shrink());
    assert_eq!(input.tool_result_limit, TOOL_RESULT_LIMIT);
    // u (100) + a (4) + r (50) reach half of 304; the second result would lead, so it
    // goes too.
    assert_eq!(input.omitted, 4);
    assert_eq!(input.messages.len(), 2);
    assert!(matches!(input.messages[0], AgentMessage::Assistant(_)));
    let prompt = history_request(&input, None, None, 1000, 0).prompt;
    assert!(prompt.contains("The 4 oldest messages of this part were left out"));
}

#[test]
fn shrinking_a_single_message_caps_texts_then_gives_up() {
    let mut input = SummaryInput::new(vec![user(&"w".repeat(8000))]);
    let mut lengths = vec![input.transcript().len()];
    while input.shrink() {
        lengths.push(input.transcript().len());
        assert!(lengths.len() < 20, "shrinking must end");
    }
    assert_eq!(input.text_limit, Some(MIN_TEXT_LIMIT));
    assert!(lengths.windows(2).all(|w| w[1] < w[0]), "{lengths:?}");
    assert_eq!(input.messages.len(), 1);
    // Already small: nothing to do.
    let mut small = SummaryInput::new(vec![user("tiny")]);
    assert!(!small.shrink());
}

// ---------------------------------------------------------------------------------------
// Final summary and result

#[test]
fn summary_text_appends_file_lists() {
    let details = CompactionDetails {
        read_files: vec!["a.rs".into(), "b.rs".into()],
        modified_files: vec!["c.rs".into()],
    };
    assert_eq!(
        assemble_summary(Some("## Goal\nX"), None, &details),
        "## Goal\nX\n\n<read-files>\na.rs\nb.rs\n</read-files>\n\n<modified-files>\nc.rs\n</modified-files>"
    );
    assert_eq!(
        assemble_summary(Some("S"), None, &CompactionDetails::default()),
        "S"
    );
    assert_eq!(
        assemble_summary(
            Some("S"),
            None,
            &CompactionDetails {
                read_files: vec![],
                modified_files: vec!["m".into()]
            }
        ),
        "S\n\n<modified-files>\nm\n</modified-files>"
    );
    assert_eq!(
        assemble_summary(Some("H"), Some("P"), &CompactionDetails::default()),
        format!("H\n\n---\n\n{SPLIT_TURN_HEADING}\n\nP")
    );
    assert!(
        assemble_summary(None, Some("P"), &CompactionDetails::default())
            .starts_with(NO_EARLIER_HISTORY)
    );
}

#[test]
fn estimate_after_counts_summary_and_kept_entries() {
    let entries = compacted_once(None, None);
    let path = refs(&entries);
    let prep = prepare_compaction(&path, 200).unwrap();
    let summary = sized(10);
    // summary (10) + u4 + a4 (200); the old compaction and everything before u4 are gone.
    assert_eq!(
        estimated_tokens_after(
            &path,
            &prep.first_kept_entry_id,
            &summary,
            prep.tokens_before
        ),
        210
    );
    // Reaching back before the old compaction: it contributes nothing.
    assert_eq!(estimated_tokens_after(&path, "a2", &summary, 0), 10 + 500);

    // Same as the store's rebuilt context after appending the compaction.
    let mut store = SessionStore::in_memory(Path::new("/tmp"));
    store.append_message(user(&sized(100))).unwrap();
    store.append_message(said(&sized(100))).unwrap();
    store.append_message(user(&sized(100))).unwrap();
    store.append_message(said(&sized(100))).unwrap();
    let prep = prepare_compaction(&store.branch_path(), 200).unwrap();
    let after = estimated_tokens_after(
        &store.branch_path(),
        &prep.first_kept_entry_id,
        &summary,
        prep.tokens_before,
    );
    store
        .append_compaction(
            summary.clone(),
            prep.first_kept_entry_id.clone(),
            prep.tokens_before,
            None,
            false,
        )
        .unwrap();
    let rebuilt: u64 = store
        .build_context()
        .messages
        .iter()
        .map(|m| estimate_tokens(m))
        .sum();
    assert_eq!(after, rebuilt);
    assert_eq!(after, 210);
}

#[test]
fn result_carries_the_preparation() {
    let entries = tool_turn();
    let prep = prepare_compaction(&refs(&entries), 100).unwrap();
    let result = compaction_result(&prep, "S".into(), 12);
    assert_eq!(result.first_kept_entry_id, "a2");
    assert_eq!(result.tokens_before, prep.tokens_before);
    assert_eq!(result.estimated_tokens_after, Some(12));
    assert_eq!(
        serde_json::to_value(&result).unwrap(),
        json!({
            "summary": "S",
            "firstKeptEntryId": "a2",
            "tokensBefore": prep.tokens_before,
            "estimatedTokensAfter": 12,
            "details": {"readFiles": ["src/a.rs", "src/b.rs"], "modifiedFiles": []}
        })
    );
}
