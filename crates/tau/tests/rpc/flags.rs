//! Command-line flags and small protocol fields from issue 16: `--list-models`, a bad
//! `--thinking` level, `--theme`, Anthropic OAuth tokens (environment and pi's `auth.json`
//! logins), `tool_execution_end.durationMs`, xcsh's `get_state.systemPrompt`/`dumpTools` and
//! the `bash` response's counts.

use serde_json::{Value, json};
use tau_mock_llm::{BackgroundMock, MockServer, Reply};
use tau_test_kit::Dirs;

use crate::{ready_tau, tau};

fn models(mock: &BackgroundMock) -> String {
    json!({"providers": {
        "mock": {
            "baseUrl": format!("{}/v1", mock.url()), "api": "openai-completions", "apiKey": "k",
            "models": [
                {"id": "small-model", "contextWindow": 32000, "maxTokens": 4096},
                {"id": "big-vision", "contextWindow": 1000000, "maxTokens": 128000,
                 "reasoning": true, "input": ["text", "image"]},
            ],
        },
    }})
    .to_string()
}

#[test]
fn list_models_prints_pis_table_and_searches() {
    let mock = MockServer::start_background().unwrap();
    let dirs = Dirs::new();
    let run = |args: &[&str]| {
        let (status, stdout, stderr, _) = tau()
            .dirs(dirs.clone())
            .agent_file("models.json", models(&mock))
            .raw_args(args.iter().map(|a| a.to_string()))
            .run(b"");
        assert!(status.success(), "{stderr}");
        String::from_utf8(stdout).unwrap()
    };
    let all = run(&["--list-models"]);
    let lines: Vec<&str> = all.lines().collect();
    assert_eq!(
        lines[0].split_whitespace().collect::<Vec<_>>(),
        [
            "provider", "model", "context", "max-out", "thinking", "images"
        ]
    );
    assert_eq!(
        lines[1].split_whitespace().collect::<Vec<_>>(),
        ["mock", "big-vision", "1M", "128K", "yes", "yes"]
    );
    assert_eq!(
        lines[2].split_whitespace().collect::<Vec<_>>(),
        ["mock", "small-model", "32K", "4.1K", "no", "no"]
    );
    assert_eq!(lines.len(), 3, "{all}");
    let found = run(&["--list-models", "smal"]);
    assert!(
        found.contains("small-model") && !found.contains("big-vision"),
        "{found}"
    );
    assert_eq!(
        run(&["--list-models", "zzz"]),
        "No models matching \"zzz\"\n"
    );
    // Nothing configured: pi's sentence, exit 0.
    let (status, stdout, _) = tau_test_kit::run_once(
        std::path::Path::new(env!("CARGO_BIN_EXE_tau")),
        &["--list-models"],
        b"",
    );
    assert!(status.success());
    assert!(String::from_utf8_lossy(&stdout).starts_with("No models available."));
}

#[test]
fn a_bad_thinking_level_and_theme_flags_warn_and_go_on() {
    let mut t = ready_tau(
        tau()
            .arg("--no-session")
            .arg("--thinking")
            .arg("bogus")
            .arg("--theme")
            .arg("dark.json")
            // Accepted: tau makes no network calls at start-up anyway.
            .arg("--offline"),
    );
    let state = t.request(json!({"id": "s", "type": "get_state"}));
    assert_eq!(state["success"], true);
    t.close_stdin();
    t.wait_exit(std::time::Duration::from_secs(10));
    let stderr = t.stderr();
    assert!(
        stderr.contains(
            "Warning: Invalid thinking level \"bogus\". Valid values: off, minimal, low, medium, high, xhigh"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("Warning: --theme and --no-themes have no effect"),
        "{stderr}"
    );
}

/// The headers of the last request the mock received, lower-cased names.
fn headers(mock: &BackgroundMock) -> Vec<(String, String)> {
    mock.requests()
        .last()
        .unwrap()
        .headers
        .iter()
        .map(|(k, v)| (k.to_lowercase(), v.clone()))
        .collect()
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

#[test]
fn anthropic_oauth_tokens_go_as_bearer_tokens() {
    let mock = MockServer::start_background().unwrap();
    // The built-in Anthropic models, sent to the mock.
    let moved = json!({"providers": {"anthropic": {"baseUrl": mock.url()}}}).to_string();
    let mut t = ready_tau(
        tau()
            .agent_file("models.json", moved.clone())
            .env("ANTHROPIC_OAUTH_TOKEN", "sk-ant-oat01-secret")
            .arg("--no-session")
            .arg("--provider")
            .arg("anthropic"),
    );
    mock.push(Reply::text("hi"));
    t.send(&json!({"id": "p", "type": "prompt", "message": "hello"}));
    t.event("agent_settled");
    let sent = headers(&mock);
    assert_eq!(
        header(&sent, "authorization"),
        Some("Bearer sk-ant-oat01-secret")
    );
    assert_eq!(header(&sent, "x-api-key"), None);
    assert!(
        header(&sent, "anthropic-beta")
            .unwrap()
            .contains("oauth-2025-04-20")
    );

    // pi's stored login: its access token while valid; expired, a clear error.
    let later = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
        + 3_600_000;
    for (expires, works) in [(later, true), (1, false)] {
        let auth = json!({"anthropic": {"type": "oauth", "refresh": "r",
            "access": "sk-ant-oat01-stored", "expires": expires}});
        let mut t = ready_tau(
            tau()
                .agent_file("models.json", moved.clone())
                .agent_file("auth.json", auth.to_string())
                .arg("--no-session")
                .arg("--provider")
                .arg("anthropic"),
        );
        if works {
            mock.push(Reply::text("hi"));
        }
        let answer = t.request(json!({"id": "p", "type": "prompt", "message": "hello"}));
        if works {
            t.event("agent_settled");
            assert_eq!(
                header(&headers(&mock), "authorization"),
                Some("Bearer sk-ant-oat01-stored")
            );
        } else {
            let error = answer["error"].as_str().unwrap_or_default().to_string();
            let end = if error.is_empty() {
                t.event("message_end").to_string()
            } else {
                error
            };
            assert!(end.contains("has expired"), "{answer} {end}");
        }
    }
}

#[test]
fn tool_durations_state_dumps_and_bash_counts() {
    let mock = MockServer::start_background().unwrap();
    let mut t = ready_tau(
        tau()
            .agent_file("models.json", models(&mock))
            .arg("--no-session"),
    );
    mock.push(Reply::new().tool_call("c1", "ls", json!({})));
    mock.push(Reply::text("done"));
    t.send(&json!({"id": "p", "type": "prompt", "message": "list"}));
    let end = t.event("tool_execution_end");
    assert!(end["durationMs"].is_u64(), "{end}");
    t.event("agent_settled");

    let state = t.request(json!({"id": "s", "type": "get_state"}));
    let data = &state["data"];
    assert!(
        data["systemPrompt"].as_str().unwrap().contains("ls"),
        "{}",
        data["systemPrompt"]
    );
    let tools: Vec<&str> = data["dumpTools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["read", "bash", "edit", "write", "todo_write"]);
    assert_eq!(data["dumpTools"][1]["parameters"]["type"], "object");

    let bash = t.request(json!({"id": "b", "type": "bash", "command": "printf 'a\\nb\\nc\\n'"}));
    let data: &Value = &bash["data"];
    assert_eq!(data["output"], "a\nb\nc\n");
    assert_eq!(
        (
            &data["totalLines"],
            &data["totalBytes"],
            &data["outputLines"],
            &data["outputBytes"]
        ),
        (&json!(3), &json!(6), &json!(3), &json!(6))
    );
}
