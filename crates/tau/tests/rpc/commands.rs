//! Every command of document 004, xcsh and pi 1.x is parsed, validated and answered exactly
//! once with its `id`; the ones whose machinery is not built yet say so.

use std::time::Duration;

use serde_json::{Value, json};

use crate::{ready_tau, tau};

/// Outcome expected from a valid command today.
enum Expect {
    /// `success:true`.
    Works,
    /// `success:false` with this error.
    Fails(&'static str),
}

fn all_commands() -> Vec<(Value, Expect)> {
    use Expect::*;
    let image = json!({"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"});
    vec![
        (
            json!({"type": "prompt", "message": "hi", "images": [image], "streamingBehavior": "steer"}),
            Fails(
                "No API key found for the selected model.\n\nSet the provider's API key environment variable, add it to auth.json, or pass --api-key together with --model.",
            ),
        ),
        (
            json!({"type": "steer", "message": "s", "images": [image]}),
            Works,
        ),
        (json!({"type": "follow_up", "message": "f"}), Works),
        (json!({"type": "abort"}), Works),
        (
            json!({"type": "abort_and_prompt", "message": "again"}),
            Fails(
                "No API key found for the selected model.\n\nSet the provider's API key environment variable, add it to auth.json, or pass --api-key together with --model.",
            ),
        ),
        (
            json!({"type": "new_session", "parentSession": "/tmp/p.jsonl"}),
            Works,
        ),
        (json!({"type": "get_state"}), Works),
        (json!({"type": "get_messages"}), Works),
        (
            json!({"type": "set_model", "provider": "anthropic", "modelId": "claude-sonnet-4-5"}),
            Fails("Model not found: anthropic/claude-sonnet-4-5"),
        ),
        (json!({"type": "cycle_model"}), Works),
        (json!({"type": "get_available_models"}), Works),
        (
            json!({"type": "set_thinking_level", "level": "high"}),
            Works,
        ),
        (json!({"type": "cycle_thinking_level"}), Works),
        (json!({"type": "get_available_thinking_levels"}), Works),
        (json!({"type": "set_steering_mode", "mode": "all"}), Works),
        (json!({"type": "set_follow_up_mode", "mode": "all"}), Works),
        (
            json!({"type": "set_interrupt_mode", "mode": "immediate"}),
            Works,
        ),
        (
            json!({"type": "compact", "customInstructions": "focus"}),
            Fails(
                "No API key found for the selected model.\n\nSet the provider's API key environment variable, add it to auth.json, or pass --api-key together with --model.",
            ),
        ),
        (
            json!({"type": "set_auto_compaction", "enabled": false}),
            Works,
        ),
        (json!({"type": "set_auto_retry", "enabled": false}), Works),
        (json!({"type": "abort_retry"}), Works),
        // Before the bash command below, whose result would be an entry to clone.
        (
            json!({"type": "clone"}),
            Fails("Cannot clone session: no current entry selected"),
        ),
        (
            json!({"type": "bash", "command": "ls", "excludeFromContext": true}),
            Works,
        ),
        (json!({"type": "abort_bash"}), Works),
        (json!({"type": "get_session_stats"}), Works),
        (
            json!({"type": "export_html", "outputPath": "/tmp/x.html"}),
            Fails("Nothing to export yet - start a conversation first"),
        ),
        (
            json!({"type": "switch_session", "sessionPath": "/tmp/s.jsonl"}),
            Fails("Session file not found: /tmp/s.jsonl"),
        ),
        (
            json!({"type": "fork", "entryId": "abc12345"}),
            Fails("Invalid entry ID for forking"),
        ),
        (json!({"type": "get_fork_messages"}), Works),
        (
            json!({"type": "branch", "entryId": "abc12345"}),
            Fails("Invalid entry ID for branching"),
        ),
        (json!({"type": "get_branch_messages"}), Works),
        (json!({"type": "get_last_assistant_text"}), Works),
        (json!({"type": "set_session_name", "name": "work"}), Works),
        (json!({"type": "get_commands"}), Works),
        (json!({"type": "set_todos", "phases": []}), Works),
        (json!({"type": "set_host_tools", "tools": []}), Works),
        (json!({"type": "clear_queue"}), Works),
        (
            json!({"type": "get_entries", "since": "abc12345"}),
            Fails("Entry not found: abc12345"),
        ),
        (json!({"type": "get_tree"}), Works),
        (
            json!({"type": "navigate_tree", "targetId": "abc12345"}),
            Fails("Entry abc12345 not found"),
        ),
        (json!({"type": "set_locale", "locale": "de"}), Works),
        (json!({"type": "get_integrations"}), Works),
    ]
}

#[test]
fn every_command_is_answered_once_with_its_id() {
    let mut t = ready_tau(tau());
    let commands = all_commands();
    assert_eq!(commands.len(), 42);
    for (i, (command, _)) in commands.iter().enumerate() {
        let mut command = command.clone();
        command["id"] = json!(format!("c{i}"));
        t.send(&command);
    }
    for (i, (command, expect)) in commands.iter().enumerate() {
        let r = t.response(&format!("c{i}"));
        let kind = command["type"].as_str().unwrap();
        assert_eq!(r["command"], kind);
        match expect {
            Expect::Works => assert_eq!(r["success"], true, "{kind}: {r}"),
            Expect::Fails(error) => {
                assert_eq!(r["success"], false, "{kind}: {r}");
                assert_eq!(r["error"], *error);
            }
        }
    }
    // Exactly one response each (the queue and name events are not responses).
    t.send(&json!({"id": "end", "type": "get_state"}));
    t.response("end");
    let responses = t
        .history()
        .iter()
        .filter(|r| r.kind() == Some("response"))
        .count();
    assert_eq!(responses, 43);
}

#[test]
fn fields_are_validated_before_anything_else() {
    let mut t = ready_tau(tau());
    let cases = [
        (
            json!({"type": "prompt"}),
            "Invalid prompt command: missing field `message`",
        ),
        (
            json!({"type": "prompt", "message": 5}),
            "Invalid prompt command: message: invalid type: integer `5`, expected a string",
        ),
        (
            json!({"type": "prompt", "message": "m", "images": [{"type": "image", "data": "x"}]}),
            "Invalid prompt command: images[0]: missing field `mimeType`",
        ),
        (
            json!({"type": "set_model", "provider": "p", "modelId": 5}),
            "Invalid set_model command: modelId: invalid type: integer `5`, expected a string",
        ),
        (
            json!({"type": "fork"}),
            "Invalid fork command: missing field `entryId`",
        ),
        (
            json!({"type": "bash"}),
            "Invalid bash command: missing field `command`",
        ),
        (
            json!({"type": "switch_session"}),
            "Invalid switch_session command: missing field `sessionPath`",
        ),
        (
            json!({"type": "set_session_name"}),
            "Invalid set_session_name command: missing field `name`",
        ),
    ];
    for (i, (mut command, error)) in cases.into_iter().enumerate() {
        let id = format!("v{i}");
        command["id"] = json!(id);
        t.send(&command);
        let r = t.response(&id);
        assert_eq!(r["success"], false);
        assert_eq!(r["command"], command["type"]);
        assert_eq!(r["error"], error);
    }
}

#[test]
fn enumerated_values_are_strict_and_name_the_allowed_ones() {
    let mut t = ready_tau(tau());
    let cases = [
        (
            json!({"type": "set_thinking_level", "level": "max"}),
            "level",
            "`xhigh`",
        ),
        (
            json!({"type": "set_steering_mode", "mode": "some"}),
            "mode",
            "`one-at-a-time`",
        ),
        (
            json!({"type": "set_follow_up_mode", "mode": "ALL"}),
            "mode",
            "`all`",
        ),
        (
            json!({"type": "set_interrupt_mode", "mode": "now"}),
            "mode",
            "`immediate`",
        ),
        (
            json!({"type": "prompt", "message": "m", "streamingBehavior": "later"}),
            "streamingBehavior",
            "`followUp`",
        ),
        (
            json!({"type": "set_todos", "phases": [{"id": "p", "name": "P", "tasks": [{"id": "t", "content": "c", "status": "done"}]}]}),
            "phases[0].tasks[0].status",
            "`in_progress`",
        ),
    ];
    for (command, field, allowed) in cases {
        let r = t.request(command.clone());
        let error = r["error"].as_str().unwrap();
        assert_eq!(r["success"], false);
        assert!(
            error.contains(&format!("{field}: unknown variant")),
            "{error}"
        );
        assert!(error.contains(allowed), "{error}");
    }
    // Nothing was changed by the rejected setters.
    let state = t.request(json!({"type": "get_state"}))["data"].clone();
    assert_eq!(state["steeringMode"], "one-at-a-time");
    assert_eq!(state["followUpMode"], "one-at-a-time");
    assert_eq!(state["interruptMode"], "wait");
}

#[test]
fn inbound_frames_are_not_answered_but_malformed_host_frames_are() {
    let mut t = ready_tau(tau());
    t.send(&json!({"type": "extension_ui_response", "id": "nope", "value": "x"}));
    t.send(&json!({"type": "extension_ui_response", "id": "nope2", "cancelled": true}));
    t.send(&json!({"type": "host_tool_result", "id": "h1", "result": {"content": [{"type": "text", "text": "done"}]}}));
    t.send(&json!({"type": "host_tool_update", "id": "h1", "partialResult": {"content": []}}));
    t.send(&json!({"id": "g", "type": "get_state"}));
    let next = t
        .next_record(Duration::from_secs(15))
        .unwrap()
        .json
        .unwrap();
    assert_eq!(
        next["id"], "g",
        "frames for unknown ids are ignored silently"
    );

    t.send(&json!({"type": "host_tool_result", "id": "h2", "result": {"content": "done"}}));
    let r = t.response("h2");
    assert_eq!(r["command"], "host_tool_result");
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .starts_with("Invalid host_tool_result frame: result.content")
    );
}

#[test]
fn numeric_ids_are_echoed_as_sent() {
    let mut t = ready_tau(tau());
    t.send(&json!({"id": 17, "type": "bogus"}));
    let record = t.next_record(Duration::from_secs(15)).unwrap();
    assert_eq!(
        String::from_utf8(record.raw).unwrap(),
        r#"{"id":17,"type":"response","command":"bogus","success":false,"error":"Unknown command: bogus"}"#
    );
}
