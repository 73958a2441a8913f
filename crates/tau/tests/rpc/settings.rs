//! Settings (issues 15 and 16; rpc.md §14, tools-resources §6): the global and project files
//! merged as pi merges them, a malformed file reported once and survived, the commands that
//! change a setting writing it to the global file as pi does (unknown keys and key order
//! kept), and every key tau honours shown doing what it says.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tau_mock_llm::{BackgroundMock, Fault, MockServer, Reply};
use tau_test_kit::{Dirs, Tau, TauBuilder};

use crate::{ready_tau, tau};

fn state(t: &mut Tau) -> Value {
    let r = t.request(json!({"type": "get_state"}));
    assert_eq!(r["success"], true, "{r}");
    r["data"].clone()
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}: {text}", path.display()))
}

fn keys(value: &Value) -> Vec<&str> {
    value
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect()
}

/// A models.json whose provider `mock` speaks `api` to `mock`, with one model `m` (`model`
/// adds fields to it).
fn mock_models(mock: &BackgroundMock, api: &str, model: Value) -> String {
    let base_url = match api {
        "anthropic-messages" => mock.url(),
        _ => format!("{}/v1", mock.url()),
    };
    let mut m = json!({"id": "m", "contextWindow": 100000, "maxTokens": 4096});
    if let (Some(m), Some(extra)) = (m.as_object_mut(), model.as_object()) {
        m.extend(extra.clone());
    }
    json!({"providers": {"mock": {
        "baseUrl": base_url, "api": api, "apiKey": "k", "models": [m],
    }}})
    .to_string()
}

/// tau on a fresh mock (`openai-completions`) with these settings.
fn with_mock(settings: Value) -> (BackgroundMock, Tau) {
    with_mock_api("openai-completions", json!({}), settings, |b| b)
}

fn with_mock_api(
    api: &str,
    model: Value,
    settings: Value,
    extra: impl FnOnce(TauBuilder) -> TauBuilder,
) -> (BackgroundMock, Tau) {
    let mock = MockServer::start_background().unwrap();
    let builder = tau()
        .agent_file("models.json", mock_models(&mock, api, model))
        .agent_file("settings.json", settings.to_string())
        .arg("--no-session");
    (mock, ready_tau(extra(builder)))
}

/// Sends a prompt and returns every record (`message_update` left out) up to
/// `agent_settled`.
fn run(t: &mut Tau, prompt: Value) -> Vec<Value> {
    let mut command = prompt;
    command["type"] = json!("prompt");
    command["id"] = json!("p");
    t.send(&command);
    let mut out = Vec::new();
    loop {
        let record = t
            .next_record(Duration::from_secs(20))
            .expect("the run ends with agent_settled");
        let json = record.json.expect("JSON records");
        let done = json["type"] == "agent_settled";
        if json["type"] != "message_update" {
            out.push(json);
        }
        if done {
            return out;
        }
    }
}

fn last_assistant(records: &[Value]) -> Value {
    records
        .iter()
        .rev()
        .find(|r| r["type"] == "message_end" && r["message"]["role"] == "assistant")
        .map(|r| r["message"].clone())
        .expect("an assistant message")
}

fn count(records: &[Value], kind: &str) -> usize {
    records.iter().filter(|r| r["type"] == kind).count()
}

// ---------------------------------------------------------------------------------------------
// Files: merge, malformed files, persistence
// ---------------------------------------------------------------------------------------------

#[test]
fn a_project_key_overrides_its_global_sibling_keys_stay() {
    // Global: retry on, 10 ms back-off, 5 attempts; auto-compaction off. The project's files
    // change one nested key each: `.pi` lowers retry.maxRetries, `.tau` sets a compaction
    // number. retry.baseDelayMs and compaction.enabled still come from the global file.
    let mock = MockServer::start_background().unwrap();
    let mut t = ready_tau(
        tau()
            .agent_file(
                "models.json",
                mock_models(&mock, "openai-completions", json!({})),
            )
            .agent_file(
                "settings.json",
                json!({"retry": {"enabled": true, "baseDelayMs": 10, "maxRetries": 5},
                       "compaction": {"enabled": false}, "steeringMode": "all"})
                .to_string(),
            )
            // Project files apply only once the project is trusted.
            .arg("--approve")
            .cwd_file(".pi/settings.json", r#"{"retry":{"maxRetries":1}}"#)
            .cwd_file(
                ".tau/settings.json",
                r#"{"compaction":{"reserveTokens":1000},"followUpMode":"all"}"#,
            )
            .arg("--no-session"),
    );
    let s = state(&mut t);
    assert_eq!(s["autoCompactionEnabled"], false, "global sibling kept");
    assert_eq!(s["autoRetryEnabled"], true);
    assert_eq!(s["steeringMode"], "all");
    assert_eq!(s["followUpMode"], "all");

    mock.push(Reply::fault(Fault::ServerError));
    mock.push(Reply::fault(Fault::ServerError));
    let records = run(&mut t, json!({"message": "hi"}));
    let retries: Vec<&Value> = records
        .iter()
        .filter(|r| r["type"] == "auto_retry_start")
        .collect();
    assert_eq!(retries.len(), 1, "the project's maxRetries: {records:?}");
    assert_eq!(retries[0]["maxAttempts"], 1);
    assert_eq!(retries[0]["delayMs"], 10, "the global baseDelayMs");
}

#[test]
fn a_malformed_file_is_one_warning_and_never_overwritten() {
    let mut t = ready_tau(
        tau()
            .agent_file("settings.json", "{broken")
            .arg("--approve")
            .cwd_file(".pi/settings.json", r#"{"followUpMode":"all"}"#),
    );
    let s = state(&mut t);
    assert_eq!(s["steeringMode"], "one-at-a-time", "defaults");
    assert_eq!(s["autoCompactionEnabled"], true);
    assert_eq!(s["followUpMode"], "all", "the other files still count");
    let r = t.request(json!({"type": "set_steering_mode", "mode": "all"}));
    assert_eq!(r["success"], true);
    assert_eq!(state(&mut t)["steeringMode"], "all");
    let path = t.agent_dir().join("settings.json");
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "{broken",
        "pi never writes a settings file that did not parse"
    );
    t.close_stdin();
    t.wait_exit(Duration::from_secs(10));
    let stderr = t.stderr();
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("settings.json"))
        .collect();
    assert_eq!(warnings.len(), 1, "one warning: {stderr}");
    assert!(
        warnings[0].starts_with("Warning: ")
            && warnings[0].contains(&path.display().to_string())
            && warnings[0].contains("key must be a string at line 1 column 2"),
        "names the file and the JSON error: {stderr}"
    );
}

#[test]
fn setters_write_the_global_file_keeping_every_other_key() {
    let original = json!({
        "theme": "light",
        "hideThinkingBlock": true,
        "compaction": {"reserveTokens": 1234, "futureKey": "x"},
        "unknownKey": {"nested": [1, 2, {"deep": null}]},
        "steeringMode": "one-at-a-time",
        "lastChangelogVersion": "0.79.0"
    });
    let dirs = Dirs::new();
    let mut t = ready_tau(tau().dirs(dirs.clone()).agent_file(
        "settings.json",
        serde_json::to_string_pretty(&original).unwrap(),
    ));
    for command in [
        json!({"type": "set_steering_mode", "mode": "all"}),
        json!({"type": "set_follow_up_mode", "mode": "all"}),
        json!({"type": "set_interrupt_mode", "mode": "immediate"}),
        json!({"type": "set_auto_compaction", "enabled": false}),
        json!({"type": "set_auto_retry", "enabled": false}),
    ] {
        assert_eq!(t.request(command)["success"], true);
    }
    let path = dirs.agent_dir().join("settings.json");
    let written = read_json(&path);
    assert_eq!(
        written,
        json!({
            "theme": "light",
            "hideThinkingBlock": true,
            "compaction": {"reserveTokens": 1234, "futureKey": "x", "enabled": false},
            "unknownKey": {"nested": [1, 2, {"deep": null}]},
            "steeringMode": "all",
            "lastChangelogVersion": "0.79.0",
            "followUpMode": "all",
            "interruptMode": "immediate",
            "retry": {"enabled": false}
        })
    );
    assert_eq!(
        keys(&written),
        [
            "theme",
            "hideThinkingBlock",
            "compaction",
            "unknownKey",
            "steeringMode",
            "lastChangelogVersion",
            "followUpMode",
            "interruptMode",
            "retry"
        ],
        "keys keep their place; new ones are appended"
    );
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        serde_json::to_string_pretty(&written).unwrap(),
        "two-space JSON, as pi writes it"
    );
    let leftovers: Vec<String> = std::fs::read_dir(dirs.agent_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("settings") && n != "settings.json")
        .collect();
    assert!(leftovers.is_empty(), "no lock or temp file: {leftovers:?}");
    drop(t);

    // The next tau starts from what was saved.
    let mut t = ready_tau(tau().dirs(dirs));
    let s = state(&mut t);
    assert_eq!(s["steeringMode"], "all");
    assert_eq!(s["followUpMode"], "all");
    assert_eq!(s["interruptMode"], "immediate");
    assert_eq!(s["autoCompactionEnabled"], false);
    assert_eq!(s["autoRetryEnabled"], false);
}

#[test]
fn model_and_thinking_changes_become_the_defaults() {
    let models = json!({"providers": {"local": {
        "baseUrl": "http://127.0.0.1:9/v1", "api": "openai-completions", "apiKey": "k",
        "models": [
            {"id": "thinker", "reasoning": true},
            {"id": "plain"},
            {"id": "other", "reasoning": true}
        ]
    }}});
    let dirs = Dirs::new();
    let start = |dirs: &Dirs| {
        ready_tau(
            tau()
                .dirs(dirs.clone())
                .agent_file("models.json", models.to_string()),
        )
    };
    let settings = dirs.agent_dir().join("settings.json");
    let mut t = ready_tau(
        tau()
            .dirs(dirs.clone())
            .agent_file("models.json", models.to_string())
            .agent_file("settings.json", r#"{"theme":"dark"}"#),
    );
    assert_eq!(state(&mut t)["model"]["id"], "thinker");
    assert_eq!(
        read_json(&settings),
        json!({"theme": "dark"}),
        "nothing is written at start"
    );

    let r = t.request(json!({"type": "set_model", "provider": "local", "modelId": "plain"}));
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(
        read_json(&settings),
        json!({"theme": "dark", "defaultProvider": "local", "defaultModel": "plain"}),
        "off on a model without reasoning is not saved as the default level"
    );

    let r = t.request(json!({"type": "set_model", "provider": "local", "modelId": "thinker"}));
    assert_eq!(r["success"], true, "{r}");
    let r = t.request(json!({"type": "set_thinking_level", "level": "high"}));
    assert_eq!(r["success"], true, "{r}");
    let saved = read_json(&settings);
    assert_eq!(saved["defaultModel"], "thinker");
    assert_eq!(saved["defaultThinkingLevel"], "high");

    // A model without reasoning and back: the saved default level returns, as in pi.
    t.request(json!({"type": "set_model", "provider": "local", "modelId": "plain"}));
    t.request(json!({"type": "set_model", "provider": "local", "modelId": "other"}));
    assert_eq!(state(&mut t)["thinkingLevel"], "high");

    let r = t.request(json!({"type": "cycle_model"}));
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(r["data"]["model"]["id"], "thinker");
    let r = t.request(json!({"type": "cycle_thinking_level"}));
    assert_eq!(r["data"]["level"], "off", "after high: {r}");
    let saved = read_json(&settings);
    assert_eq!(saved["defaultModel"], "thinker");
    assert_eq!(
        saved["defaultThinkingLevel"], "off",
        "off on a reasoning model is saved"
    );
    assert_eq!(saved["theme"], "dark");
    t.request(json!({"type": "set_thinking_level", "level": "low"}));
    drop(t);

    let mut t = start(&dirs);
    let s = state(&mut t);
    assert_eq!(s["model"]["id"], "thinker");
    assert_eq!(s["thinkingLevel"], "low");
    t.request(json!({"type": "set_model", "provider": "local", "modelId": "other"}));
    drop(t);
    let mut t = start(&dirs);
    assert_eq!(
        state(&mut t)["model"]["id"],
        "other",
        "defaultModel is honoured"
    );
}

// ---------------------------------------------------------------------------------------------
// Keys applied to provider requests
// ---------------------------------------------------------------------------------------------

const PIXEL: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

#[test]
fn block_images_keeps_images_from_the_model() {
    for block in [false, true] {
        let (mock, mut t) = with_mock_api(
            "openai-completions",
            json!({"input": ["text", "image"]}),
            json!({"images": {"blockImages": block}}),
            |b| b,
        );
        mock.push(Reply::text("seen"));
        let records = run(
            &mut t,
            json!({"message": "look", "images": [
                {"type": "image", "data": PIXEL, "mimeType": "image/png"},
                {"type": "image", "data": PIXEL, "mimeType": "image/png"}
            ]}),
        );
        assert_eq!(last_assistant(&records)["stopReason"], "stop");
        let body = mock.requests()[0].body.to_string();
        if block {
            assert!(
                !body.contains("image_url") && !body.contains(PIXEL),
                "{body}"
            );
            assert_eq!(
                body.matches("Image reading is disabled.").count(),
                1,
                "one placeholder for the two images: {body}"
            );
        } else {
            assert_eq!(body.matches(PIXEL).count(), 2, "{body}");
        }
        // The session keeps the images: only what is sent changes.
        let messages = t.request(json!({"type": "get_messages"}))["data"]["messages"].clone();
        assert_eq!(messages[0]["content"][1]["type"], "image");
    }
}

#[test]
fn thinking_budgets_set_the_budget_of_each_level() {
    let (mock, mut t) = with_mock_api(
        "anthropic-messages",
        json!({"reasoning": true, "maxTokens": 64000}),
        json!({"thinkingBudgets": {"low": 3000, "high": 20000}}),
        |b| b.arg("--thinking").arg("low"),
    );
    mock.push(Reply::text("one"));
    mock.push(Reply::text("two"));
    mock.push(Reply::text("three"));
    run(&mut t, json!({"message": "a"}));
    t.request(json!({"type": "set_thinking_level", "level": "medium"}));
    run(&mut t, json!({"message": "b"}));
    t.request(json!({"type": "set_thinking_level", "level": "high"}));
    run(&mut t, json!({"message": "c"}));
    let budgets: Vec<Value> = mock
        .requests()
        .iter()
        .map(|r| r.body["thinking"]["budget_tokens"].clone())
        .collect();
    assert_eq!(
        budgets,
        [json!(3000), json!(8192), json!(20000)],
        "set levels use the settings, medium keeps pi's default"
    );
}

#[test]
fn http_idle_timeout_ends_a_stalled_stream() {
    let (mock, mut t) = with_mock(json!({"httpIdleTimeoutMs": 500, "retry": {"enabled": false}}));
    mock.push(Reply::text("never finished").with_fault(Fault::StallAfter { events: 2 }));
    let started = Instant::now();
    let records = run(&mut t, json!({"message": "hi"}));
    let elapsed = started.elapsed();
    let message = last_assistant(&records);
    assert_eq!(message["stopReason"], "error");
    assert_eq!(
        message["errorMessage"],
        "Request timed out: no data received for 0.5 seconds"
    );
    assert!(
        elapsed >= Duration::from_millis(450) && elapsed < Duration::from_secs(10),
        "{elapsed:?}"
    );
}

#[test]
fn provider_retries_happen_inside_one_request() {
    let (mock, mut t) =
        with_mock(json!({"retry": {"enabled": false, "provider": {"maxRetries": 2}}}));
    mock.push(Reply::fault(Fault::ServerError));
    mock.push(Reply::fault(Fault::ServiceUnavailable));
    mock.push(Reply::text("third time lucky"));
    let records = run(&mut t, json!({"message": "hi"}));
    let message = last_assistant(&records);
    assert_eq!(message["stopReason"], "stop", "{message}");
    assert_eq!(message["content"][0]["text"], "third time lucky");
    assert_eq!(mock.requests().len(), 3);
    assert_eq!(
        count(&records, "auto_retry_start"),
        0,
        "not the agent's retry"
    );
    assert_eq!(
        records
            .iter()
            .filter(|r| r["type"] == "message_end" && r["message"]["role"] == "assistant")
            .count(),
        1,
        "one assistant message for the three attempts"
    );

    // Without the setting the first failure is the reply.
    let (mock, mut t) = with_mock(json!({"retry": {"enabled": false}}));
    mock.push(Reply::fault(Fault::ServerError));
    mock.push(Reply::text("unused"));
    let records = run(&mut t, json!({"message": "hi"}));
    assert_eq!(last_assistant(&records)["stopReason"], "error");
    assert_eq!(mock.requests().len(), 1);
}

#[test]
fn provider_max_retry_delay_refuses_long_waits() {
    let (mock, mut t) = with_mock(json!({"retry": {"enabled": false,
        "provider": {"maxRetries": 3, "maxRetryDelayMs": 1000}}}));
    // A short wait the server asks for is honoured...
    mock.push(Reply::fault(Fault::RateLimited {
        retry_after: Some(0),
    }));
    mock.push(Reply::text("after a short wait"));
    let records = run(&mut t, json!({"message": "one"}));
    assert_eq!(last_assistant(&records)["stopReason"], "stop");
    assert_eq!(mock.requests().len(), 2);
    // ...a long one ends the request at once with the server's error.
    mock.push(Reply::fault(Fault::RateLimited {
        retry_after: Some(30),
    }));
    mock.push(Reply::text("unused"));
    let started = Instant::now();
    let records = run(&mut t, json!({"message": "two"}));
    let message = last_assistant(&records);
    assert_eq!(message["stopReason"], "error");
    assert!(
        message["errorMessage"].as_str().unwrap().starts_with("429"),
        "{message}"
    );
    assert_eq!(mock.requests().len(), 3);
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[test]
fn provider_timeout_bounds_the_wait_for_an_answer() {
    let (mock, mut t) =
        with_mock(json!({"retry": {"enabled": false, "provider": {"timeoutMs": 400}}}));
    mock.push(Reply::text("too late").delay_ms(5000));
    let started = Instant::now();
    let records = run(&mut t, json!({"message": "hi"}));
    let message = last_assistant(&records);
    assert_eq!(message["stopReason"], "error");
    assert_eq!(
        message["errorMessage"],
        "Request timed out: no data received for 0.4 seconds"
    );
    assert!(started.elapsed() < Duration::from_secs(4));
}

// ---------------------------------------------------------------------------------------------
// Keys that were honoured before: each shown doing its job
// ---------------------------------------------------------------------------------------------

#[test]
fn default_provider_model_and_thinking_level_choose_the_start() {
    let models = json!({"providers": {"local": {
        "baseUrl": "http://127.0.0.1:9/v1", "api": "openai-completions", "apiKey": "k",
        "models": [{"id": "first", "reasoning": true}, {"id": "second", "reasoning": true}]
    }}});
    let mut t = ready_tau(tau().agent_file("models.json", models.to_string()).agent_file(
        "settings.json",
        r#"{"defaultProvider":"local","defaultModel":"second","defaultThinkingLevel":"low"}"#,
    ));
    let s = state(&mut t);
    assert_eq!(s["model"]["id"], "second");
    assert_eq!(s["thinkingLevel"], "low");
}

#[test]
fn enabled_models_scope_the_start_and_cycle_model() {
    let models = json!({"providers": {"local": {
        "baseUrl": "http://127.0.0.1:9/v1", "api": "openai-completions", "apiKey": "k",
        "models": [{"id": "a"}, {"id": "b"}, {"id": "c"}]
    }}});
    let mut t = ready_tau(
        tau()
            .agent_file("models.json", models.to_string())
            .agent_file(
                "settings.json",
                r#"{"enabledModels":["local/c","local/b"]}"#,
            ),
    );
    assert_eq!(state(&mut t)["model"]["id"], "c");
    let r = t.request(json!({"type": "cycle_model"}));
    assert_eq!(r["data"]["model"]["id"], "b", "{r}");
    assert_eq!(r["data"]["isScoped"], true);
    let r = t.request(json!({"type": "cycle_model"}));
    assert_eq!(r["data"]["model"]["id"], "c", "a is out of scope: {r}");
}

#[test]
fn session_dir_places_session_files() {
    let dirs = Dirs::new();
    let mut t = ready_tau(
        tau()
            .dirs(dirs.clone())
            .agent_file("settings.json", r#"{"sessionDir":"~/my-sessions"}"#),
    );
    let file = state(&mut t)["sessionFile"].as_str().unwrap().to_string();
    let home = dirs.home().join("my-sessions");
    assert!(
        Path::new(&file).starts_with(&home),
        "{file} not under {}",
        home.display()
    );
    // --session-dir wins over the setting.
    let mut t = ready_tau(tau().dirs(dirs.clone()).arg("--session-dir").arg("flagged"));
    let file = state(&mut t)["sessionFile"].as_str().unwrap().to_string();
    assert!(file.contains("flagged"), "{file}");
}

#[cfg(unix)]
#[test]
fn shell_path_and_command_prefix_shape_bash() {
    use std::os::unix::fs::PermissionsExt;
    let dirs = Dirs::new();
    let shell = dirs.cwd().join("my-shell");
    std::fs::write(
        &shell,
        "#!/bin/sh\necho via-my-shell\nexec /bin/sh \"$@\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&shell, std::fs::Permissions::from_mode(0o755)).unwrap();
    let settings = json!({"shellPath": shell, "shellCommandPrefix": "GREETING=from-prefix"});
    let mut t = ready_tau(
        tau()
            .dirs(dirs)
            .agent_file("settings.json", settings.to_string()),
    );
    let r = t.request(json!({"type": "bash", "command": "echo \"$GREETING\""}));
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(r["data"]["output"], "via-my-shell\nfrom-prefix\n", "{r}");
}

#[test]
fn auto_resize_off_sends_images_as_read() {
    // Bytes that look like a PNG (signature and IHDR) but do not decode (a 0×0 image):
    // resizing fails and the image is left out; with images.autoResize off it is passed on
    // as it is.
    let mut fake_png = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
    fake_png.extend_from_slice(&[0u8; 17]);
    fake_png.extend_from_slice(&[7u8; 64]);
    for auto_resize in [true, false] {
        let (mock, mut t) = with_mock_api(
            "openai-completions",
            json!({"input": ["text", "image"]}),
            json!({"images": {"autoResize": auto_resize}}),
            |b| b.cwd_file("fake.png", fake_png.clone()),
        );
        mock.push(Reply::new().tool_call("c1", "read", json!({"path": "fake.png"})));
        mock.push(Reply::text("done"));
        let records = run(&mut t, json!({"message": "read it"}));
        let end = records
            .iter()
            .find(|r| r["type"] == "tool_execution_end")
            .expect("the read ran");
        let content = &end["result"]["content"];
        let has_image = content
            .as_array()
            .unwrap()
            .iter()
            .any(|b| b["type"] == "image");
        assert_eq!(
            has_image, !auto_resize,
            "autoResize {auto_resize}: {content}"
        );
        if auto_resize {
            assert!(
                content[0]["text"]
                    .as_str()
                    .unwrap()
                    .contains("Image omitted"),
                "{content}"
            );
        }
    }
}

#[test]
fn branch_summary_reserve_tokens_limits_what_a_summary_reads() {
    // `ctx.navigateTree` with a summary (the tree.ts fixture's `/goto`): the request holds the
    // branch left behind, newest first, as far as the window minus the reserve allows.
    let fixture = format!(
        "{}/tests/fixtures/extensions/tree.ts",
        env!("CARGO_MANIFEST_DIR")
    );
    let long_prompt = format!("SECOND-PROMPT {}", "padding ".repeat(100));
    for reserve in [None, Some(99_990)] {
        let settings = match reserve {
            Some(tokens) => json!({"branchSummary": {"reserveTokens": tokens}}),
            None => json!({}),
        };
        let (mock, mut t) = with_mock_api(
            "openai-completions",
            json!({"contextWindow": 100_000}),
            settings,
            |b| b.arg("-e").arg(&fixture),
        );
        let notice = |t: &mut Tau| loop {
            let record = t.next_record(Duration::from_secs(30)).expect("a notify");
            let json = record.json.expect("JSON");
            if json["type"] == "extension_ui_request" && json["method"] == "notify" {
                return json["message"].as_str().unwrap_or_default().to_string();
            }
        };
        notice(&mut t);
        for (text, reply) in [
            ("first", "FIRST-REPLY"),
            (long_prompt.as_str(), "SECOND-REPLY"),
        ] {
            mock.push(Reply::text(reply));
            run(&mut t, json!({"message": text}));
        }
        let entries = t.request(json!({"type": "get_entries"}))["data"]["entries"].clone();
        let first_reply = entries
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["type"] == "message" && e["message"]["role"] == "assistant")
            .unwrap()["id"]
            .as_str()
            .unwrap()
            .to_string();
        mock.push(Reply::text("summary"));
        t.send(&json!({"id": "s", "type": "prompt",
            "message": format!("/goto {first_reply} yes sum focus")}));
        assert!(notice(&mut t).ends_with("summary=true"));
        notice(&mut t);
        assert_eq!(t.response("s")["success"], true);
        let request = mock.requests().last().unwrap().body.to_string();
        assert!(request.contains("SECOND-REPLY"), "{request}");
        assert_eq!(
            request.contains("SECOND-PROMPT"),
            reserve.is_none(),
            "reserve {reserve:?}: {request}"
        );
    }
}

#[test]
fn the_users_broken_file_is_reported_even_when_start_up_fails_later() {
    // The extension path does not exist: tau stops before `ready`, after saying what was
    // wrong with the user's settings.
    let dirs = Dirs::new();
    std::fs::write(dirs.agent_dir().join("settings.json"), "{broken").unwrap();
    let (status, _, stderr, _) = tau()
        .dirs(dirs)
        .arg("-e")
        .arg("/nonexistent/extension.ts")
        .run(b"");
    assert!(!status.success());
    assert!(stderr.contains("Extension path does not exist"), "{stderr}");
    let warning = stderr.find("Warning: Cannot parse").expect(&stderr);
    let error = stderr.find("Error: ").expect(&stderr);
    assert!(warning < error, "the warning comes first: {stderr}");
}
