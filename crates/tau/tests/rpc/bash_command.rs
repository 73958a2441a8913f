//! The RPC `bash` command (rpc.md §10, issue 7): output and exit code, pi's truncation with the
//! full output in a temp file, `abort_bash` with several commands running, invalid UTF-8,
//! and the `bashExecution` message that reaches the model on the next prompt.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tau_mock_llm::{BackgroundMock, MockServer, Reply};
use tau_test_kit::Tau;

use crate::{ready_tau, tau};

fn setup() -> (BackgroundMock, Tau) {
    let mock = MockServer::start_background().unwrap();
    let models = json!({"providers": {"mock": {
        "baseUrl": format!("{}/v1", mock.url()), "api": "openai-completions", "apiKey": "k",
        "models": [{"id": "mock-1", "contextWindow": 100000, "maxTokens": 4096}],
    }}});
    let t = ready_tau(tau().agent_file("models.json", models.to_string()));
    (mock, t)
}

fn bash(t: &mut Tau, command: &str) -> Value {
    let r = t.request(json!({"type": "bash", "command": command}));
    assert_eq!(r["success"], true, "{r}");
    r["data"].clone()
}

#[test]
fn output_and_exit_code_come_back_without_an_error() {
    let (_mock, mut t) = setup();
    let data = bash(&mut t, "echo hello; echo err >&2; exit 3");
    assert_eq!(
        data,
        json!({"output": "hello\nerr\n", "exitCode": 3, "cancelled": false, "truncated": false,
            "totalLines": 2, "totalBytes": 10, "outputLines": 2, "outputBytes": 10})
    );
    // Escapes and carriage returns are cleaned; invalid UTF-8 becomes U+FFFD.
    let data = bash(&mut t, r"printf '\033[31mred\033[0m\r\na\377b\n'");
    assert_eq!(data["output"], "red\na\u{FFFD}b\n");
}

#[test]
fn large_output_keeps_the_tail_and_the_whole_in_a_temp_file() {
    let (_mock, mut t) = setup();
    let data = bash(&mut t, "seq 1 3000");
    assert_eq!(data["truncated"], true);
    let output = data["output"].as_str().unwrap();
    assert!(output.starts_with("1001\n1002\n"), "{}", &output[..20]);
    assert!(output.ends_with("\n3000"), "no trailing newline");
    let path = data["fullOutputPath"].as_str().unwrap().to_string();
    let full = std::fs::read_to_string(&path).unwrap();
    assert_eq!(full.lines().count(), 3000);
    // The session's temp files go when it ends.
    t.close_stdin();
    t.wait_exit(Duration::from_secs(10));
    assert!(!std::path::Path::new(&path).exists(), "{path} left behind");
}

#[test]
fn abort_bash_stops_the_newest_command_then_the_next() {
    let (_mock, mut t) = setup();
    // Durations unique to this test process, so that `pgrep` below cannot see the commands
    // of another test run on the same machine.
    let first_sleep = format!("sleep 41.{}", std::process::id());
    let second_sleep = format!("sleep 42.{}", std::process::id());
    t.send(&json!({"id": "slow1", "type": "bash", "command": first_sleep}));
    t.send(
        &json!({"id": "slow2", "type": "bash", "command": format!("echo started; {second_sleep}")}),
    );
    std::thread::sleep(Duration::from_millis(300));
    // The input loop is not blocked by running commands.
    assert_eq!(t.request(json!({"type": "get_state"}))["success"], true);
    let started = Instant::now();
    assert_eq!(t.request(json!({"type": "abort_bash"}))["success"], true);
    let second = t.response("slow2");
    assert_eq!(
        second["data"],
        json!({"output": "started\n", "cancelled": true, "truncated": false,
            "totalLines": 1, "totalBytes": 8, "outputLines": 1, "outputBytes": 8})
    );
    assert_eq!(t.request(json!({"type": "abort_bash"}))["success"], true);
    let first = t.response("slow1");
    assert_eq!(first["data"]["cancelled"], true);
    assert!(first["data"].get("exitCode").is_none());
    assert!(started.elapsed() < Duration::from_secs(5));
    for pattern in [&first_sleep, &second_sleep] {
        let ps = std::process::Command::new("pgrep")
            .args(["-f", pattern])
            .output()
            .unwrap();
        assert!(ps.stdout.is_empty(), "{pattern} left running");
    }
    // Nothing left to abort is still a success.
    assert_eq!(t.request(json!({"type": "abort_bash"}))["success"], true);
}

#[test]
fn the_model_sees_the_command_on_the_next_prompt_unless_excluded() {
    let (mock, mut t) = setup();
    bash(&mut t, "echo visible-marker; exit 2");
    let r = t.request(
        json!({"type": "bash", "command": "echo hidden-marker", "excludeFromContext": true}),
    );
    assert_eq!(r["success"], true);
    mock.push(Reply::text("ok"));
    t.send(&json!({"id": "p", "type": "prompt", "message": "what ran?"}));
    t.event("agent_settled");
    let sent = mock.requests()[0].body["messages"].to_string();
    assert!(
        sent.contains("Ran `echo visible-marker; exit 2`\\n```\\nvisible-marker\\n\\n```\\n\\nCommand exited with code 2"),
        "{sent}"
    );
    assert!(!sent.contains("hidden-marker"), "{sent}");
    // Both are in the conversation and in the session file.
    let messages = t.request(json!({"type": "get_messages"}))["data"]["messages"].clone();
    let roles: Vec<&str> = messages
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["bashExecution", "bashExecution", "user", "assistant"]
    );
    assert_eq!(messages[1]["excludeFromContext"], true);
    let file = t.request(json!({"type": "get_state"}))["data"]["sessionFile"]
        .as_str()
        .unwrap()
        .to_string();
    let text = std::fs::read_to_string(file).unwrap();
    assert_eq!(text.matches("\"role\":\"bashExecution\"").count(), 2);
}

#[test]
fn a_command_finishing_during_a_run_joins_the_conversation_after_it() {
    let (mock, mut t) = setup();
    mock.push(
        Reply::new()
            .with_text("streaming slowly")
            .chunk_size(1)
            .chunk_delay_ms(30),
    );
    t.send(&json!({"id": "p", "type": "prompt", "message": "go"}));
    t.event("message_update");
    let data = bash(&mut t, "echo during");
    assert_eq!(data["output"], "during\n");
    t.event("agent_settled");
    let messages = t.request(json!({"type": "get_messages"}))["data"]["messages"].clone();
    let roles: Vec<&str> = messages
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "bashExecution"]);
}
