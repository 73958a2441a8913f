//! The one input path (issue 21): a message an extension sends with `sendUserMessage` passes
//! the same steps as a typed prompt, in pi's order: `input` (with `source: "extension"`), then
//! `before_agent_start` when it starts a run, and the model gets what `input` made of it.

use std::time::Duration;

use serde_json::json;
use tau_mock_llm::{MockServer, Reply};

use crate::{ready_tau, tau};

/// Marks what passes `input` and says on stderr what each hook saw; `/ask` sends a message.
const EXTENSION: &str = r#"
export default function (pi) {
    pi.on("input", async (event) => {
        console.error(`input source=${event.source} text=${event.text}`);
        return { action: "transform", text: `${event.text} [seen by input]` };
    });
    pi.on("before_agent_start", async (event) => {
        console.error(`before_agent_start prompt=${event.prompt}`);
    });
    pi.registerCommand("ask", {
        description: "Sends a message as the user",
        handler: async (args) => { pi.sendUserMessage(`from the extension: ${args}`); },
    });
}
"#;

#[test]
fn an_extensions_message_and_a_typed_prompt_take_the_same_path() {
    let mock = MockServer::start_background().unwrap();
    let mut t = ready_tau(
        tau()
            .agent_file("models.json", crate::mock_models(&mock))
            .agent_file("extensions/paths.js", EXTENSION)
            .arg("--no-session"),
    );
    let sent_text = |n: usize| {
        let body = mock.requests()[n].body.clone();
        let messages = body["messages"].as_array().unwrap().clone();
        messages
            .iter()
            .rev()
            .find(|m| m["role"] == "user")
            .map(|m| m["content"].to_string())
            .unwrap_or_default()
    };

    mock.push(Reply::text("typed answer"));
    t.send(&json!({"id": "p", "type": "prompt", "message": "typed"}));
    t.records_until("agent_settled", Duration::from_secs(20));
    assert!(
        sent_text(0).contains("typed [seen by input]"),
        "{}",
        sent_text(0)
    );

    mock.push(Reply::text("extension answer"));
    t.send(&json!({"id": "a", "type": "prompt", "message": "/ask hello"}));
    t.records_until("agent_settled", Duration::from_secs(20));
    assert!(
        sent_text(1).contains("from the extension: hello [seen by input]"),
        "{}",
        sent_text(1)
    );

    t.close_stdin();
    t.wait_exit(Duration::from_secs(10));
    let stderr = t.stderr();
    let order: Vec<&str> = stderr
        .lines()
        // The Node host marks what extensions write to stderr.
        .map(|l| l.trim_start_matches("[node-host] "))
        .filter(|l| l.starts_with("input ") || l.starts_with("before_agent_start "))
        .collect();
    assert_eq!(
        order,
        [
            "input source=rpc text=typed",
            "before_agent_start prompt=typed [seen by input]",
            "input source=extension text=from the extension: hello",
            "before_agent_start prompt=from the extension: hello [seen by input]",
        ],
        "{stderr}"
    );
}

#[test]
fn a_prompt_held_during_post_run_work_passes_input_once() {
    let mock = MockServer::start_background().unwrap();
    let mut t = ready_tau(
        tau()
            .agent_file("models.json", crate::mock_models(&mock))
            .agent_file("settings.json", r#"{"retry": {"baseDelayMs": 200}}"#)
            .agent_file("extensions/paths.js", EXTENSION)
            .arg("--no-session"),
    );
    mock.push(Reply::fault(tau_mock_llm::Fault::ServerError));
    mock.push(Reply::text("retried"));
    mock.push(Reply::text("second answer"));
    t.send(&json!({"id": "p1", "type": "prompt", "message": "first"}));
    t.records_until("agent_end", Duration::from_secs(20));
    // The retry's back-off follows this agent_end: the prompt is held until it is over.
    t.send(&json!({"id": "p2", "type": "prompt", "message": "next"}));
    t.records_until("agent_settled", Duration::from_secs(20));
    t.records_until("agent_settled", Duration::from_secs(20));
    let last = mock.requests().last().unwrap().body["messages"].to_string();
    assert!(last.contains("next [seen by input]"), "{last}");
    assert!(!last.contains("[seen by input] [seen by input]"), "{last}");
    t.close_stdin();
    t.wait_exit(Duration::from_secs(10));
    let stderr = t.stderr();
    assert_eq!(
        stderr.matches("input source=rpc text=next").count(),
        1,
        "{stderr}"
    );
}
