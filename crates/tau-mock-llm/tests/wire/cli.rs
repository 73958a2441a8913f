//! The `tau-mock-llm` binary: its startup line, script file, rules flag, help and refusals.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use serde_json::Value;
use tau_mock_llm::Api;

use crate::support::{call, decode};

const BIN: &str = env!("CARGO_BIN_EXE_tau-mock-llm");

/// Kills the child on drop so a failing test leaves no server behind.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(args: &[&str]) -> (Running, String) {
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let running = Running(child);
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).unwrap();
    (running, line)
}

#[tokio::test]
async fn binary_prints_its_url_and_serves_the_script_then_rules() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.json");
    std::fs::write(
        &script,
        r#"["scripted answer", {"fault": {"type": "overloaded"}}]"#,
    )
    .unwrap();
    let (_running, line) = spawn(&["--script", script.to_str().unwrap(), "--rules"]);
    assert!(line.ends_with('\n'));
    let started: Value = serde_json::from_str(&line).unwrap();
    let object = started.as_object().unwrap();
    assert_eq!(object.len(), 1, "{line}");
    let url = object["url"].as_str().unwrap();
    assert!(
        url.starts_with("http://127.0.0.1:") && !url.ends_with('/'),
        "{url}"
    );

    let (status, body) = call(url, Api::AnthropicMessages, "x").await;
    assert_eq!(status, 200);
    assert_eq!(
        decode(Api::AnthropicMessages, &body).text,
        "scripted answer"
    );
    let (status, _) = call(url, Api::AnthropicMessages, "x").await;
    assert_eq!(status, 529);
    let (status, body) = call(url, Api::OpenAiResponses, "after the script").await;
    assert_eq!(status, 200, "--rules answers once the script is used up");
    assert!(
        decode(Api::OpenAiResponses, &body)
            .text
            .contains("after the script")
    );
}

#[test]
fn help_describes_the_options() {
    let out = Command::new(BIN).arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    for needle in [
        "--port",
        "--host",
        "--script",
        "--rules",
        "Anthropic Messages",
        "/_mock/replies",
    ] {
        assert!(help.contains(needle), "help lacks {needle}: {help}");
    }
}

#[test]
fn binary_refuses_non_loopback_hosts_and_bad_scripts() {
    let out = Command::new(BIN)
        .args(["--host", "0.0.0.0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("loopback"));

    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("bad.json");
    std::fs::write(&script, "[{").unwrap();
    let out = Command::new(BIN)
        .args(["--script", script.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid script"));
}
