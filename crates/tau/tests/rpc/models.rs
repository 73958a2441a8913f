//! Models over RPC: `models.json` providers, keys from the environment, `--model`
//! resolution at startup, `set_model`, `cycle_model`, `get_available_models` and the
//! thinking-level commands.

use serde_json::{Value, json};

use crate::{ready_tau, tau};

/// A models.json with one local provider: a reasoning model and a plain one.
const MODELS_JSON: &str = r#"{
  // comments and trailing commas are accepted, as in pi
  "providers": {
    "local": {
      "baseUrl": "http://127.0.0.1:9/v1",
      "api": "openai-completions",
      "apiKey": "local-key",
      "models": [
        {"id": "thinker", "reasoning": true, "contextWindow": 32000, "maxTokens": 4096},
        {"id": "plain", "name": "Plain Model"},
      ],
    },
  },
}"#;

fn local() -> tau_test_kit::TauBuilder {
    tau().agent_file("models.json", MODELS_JSON)
}

fn state(t: &mut tau_test_kit::Tau) -> Value {
    t.request(json!({"type": "get_state"}))["data"].clone()
}

#[test]
fn a_models_json_provider_is_available_and_selected() {
    let mut t = ready_tau(local());
    let models = t.request(json!({"type": "get_available_models"}))["data"]["models"].clone();
    let ids: Vec<&str> = models
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        ["thinker", "plain"],
        "only models with credentials, in order"
    );
    assert_eq!(models[1]["name"], "Plain Model");
    assert_eq!(models[0]["contextWindow"], 32000);
    let s = state(&mut t);
    assert_eq!(
        s["model"]["id"], "thinker",
        "the first available model is the default"
    );
    assert_eq!(
        s["thinkingLevel"], "medium",
        "pi's default level for a reasoning model"
    );
}

#[test]
fn set_model_switches_and_rejects_unknown_models() {
    let mut t = ready_tau(local());
    let r = t.request(json!({"type": "set_model", "provider": "local", "modelId": "plain"}));
    assert_eq!(r["success"], true);
    assert_eq!(r["data"]["id"], "plain");
    assert_eq!(r["data"]["provider"], "local");
    let s = state(&mut t);
    assert_eq!(s["model"]["id"], "plain");
    assert_eq!(
        s["thinkingLevel"], "off",
        "a model without reasoning runs at off"
    );

    let r = t.request(json!({"type": "set_model", "provider": "local", "modelId": "nope"}));
    assert_eq!(r["success"], false);
    assert_eq!(r["error"], "Model not found: local/nope");
    // A built-in model without a key is not selectable.
    let r = t.request(
        json!({"type": "set_model", "provider": "anthropic", "modelId": "claude-sonnet-4-5"}),
    );
    assert_eq!(r["error"], "Model not found: anthropic/claude-sonnet-4-5");
}

#[test]
fn thinking_levels_follow_the_model() {
    let mut t = ready_tau(local());
    let levels =
        t.request(json!({"type": "get_available_thinking_levels"}))["data"]["levels"].clone();
    assert_eq!(levels, json!(["off", "minimal", "low", "medium", "high"]));

    t.send(&json!({"id": "h", "type": "set_thinking_level", "level": "high"}));
    assert_eq!(
        t.event("thinking_level_changed"),
        json!({"type": "thinking_level_changed", "level": "high"})
    );
    assert_eq!(t.response("h")["success"], true);
    // xhigh is not offered by this model: clamped down to high, so nothing changes.
    let r = t.request(json!({"type": "set_thinking_level", "level": "xhigh"}));
    assert_eq!(r["success"], true);
    assert_eq!(state(&mut t)["thinkingLevel"], "high");

    let r = t.request(json!({"type": "cycle_thinking_level"}));
    assert_eq!(r["data"], json!({"level": "off"}), "wraps around");
    let r = t.request(json!({"type": "cycle_thinking_level"}));
    assert_eq!(r["data"], json!({"level": "minimal"}));

    t.request(json!({"type": "set_model", "provider": "local", "modelId": "plain"}));
    let r = t.request(json!({"type": "cycle_thinking_level"}));
    assert_eq!(r["data"], Value::Null, "no reasoning: nothing to cycle");
    assert_eq!(
        t.request(json!({"type": "get_available_thinking_levels"}))["data"],
        json!({"levels": ["off"]})
    );
}

#[test]
fn cycle_model_walks_the_available_models() {
    let mut t = ready_tau(local());
    let r = t.request(json!({"type": "cycle_model"}));
    assert_eq!(r["data"]["model"]["id"], "plain");
    assert_eq!(r["data"]["isScoped"], false);
    assert_eq!(r["data"]["thinkingLevel"], "off");
    let r = t.request(json!({"type": "cycle_model"}));
    assert_eq!(r["data"]["model"]["id"], "thinker");

    let mut t = ready_tau(local().arg("--models").arg("local/plain"));
    let r = t.request(json!({"type": "cycle_model"}));
    assert_eq!(
        r["data"],
        Value::Null,
        "one scoped model: nothing to cycle to"
    );
    assert_eq!(
        state(&mut t)["model"]["id"],
        "plain",
        "the scope picks the start model"
    );
}

#[test]
fn model_flag_with_thinking_suffix() {
    let mut t = ready_tau(local().arg("--model").arg("local/thinker:low"));
    let s = state(&mut t);
    assert_eq!(s["model"]["id"], "thinker");
    assert_eq!(s["thinkingLevel"], "low");

    let mut t = ready_tau(local().arg("--model").arg("plai"));
    assert_eq!(state(&mut t)["model"]["id"], "plain", "substring match");
}

#[test]
fn environment_keys_make_built_in_providers_available() {
    let mut t = ready_tau(tau().env("ANTHROPIC_API_KEY", "sk-test"));
    let models = t.request(json!({"type": "get_available_models"}))["data"]["models"].clone();
    let models = models.as_array().unwrap();
    assert!(!models.is_empty());
    assert!(models.iter().all(|m| m["provider"] == "anthropic"));
    assert!(models.iter().all(|m| m["api"] == "anthropic-messages"));
    let s = state(&mut t);
    assert_eq!(s["model"]["provider"], "anthropic");
    assert_eq!(
        s["model"]["id"], "claude-opus-4-7",
        "the provider's default model"
    );
    let serialized = s.to_string();
    assert!(
        !serialized.contains("sk-test"),
        "keys never appear on the wire"
    );
}

#[test]
fn startup_model_errors() {
    use std::path::Path;
    let bin = Path::new(env!("CARGO_BIN_EXE_tau"));
    let (status, stdout, stderr) = tau_test_kit::run_once(
        bin,
        &["--mode", "rpc", "--model", "no-such-model-anywhere"],
        b"",
    );
    assert_eq!(status.code(), Some(1));
    assert!(stdout.is_empty());
    assert_eq!(
        stderr.trim_end(),
        "Error: Model \"no-such-model-anywhere\" not found. Use --list-models to see available models."
    );
    let (status, _, stderr) = tau_test_kit::run_once(
        bin,
        &["--mode", "rpc", "--provider", "nonesuch", "--model", "x"],
        b"",
    );
    assert_eq!(status.code(), Some(1));
    assert!(stderr.contains("Unknown provider \"nonesuch\""), "{stderr}");
    let (status, _, stderr) =
        tau_test_kit::run_once(bin, &["--mode", "rpc", "--api-key", "k"], b"");
    assert_eq!(status.code(), Some(1));
    assert!(stderr.contains("--api-key requires a model"), "{stderr}");
}

#[test]
fn a_key_stored_after_start_counts_from_the_next_prompt_and_listing() {
    let mock = tau_mock_llm::MockServer::start_background().expect("mock");
    mock.push(tau_mock_llm::Reply::text("now with a key"));
    // A built-in provider moved to the mock, whose key is in no file yet: no model can answer
    // at start.
    let models = json!({"providers": {"openai": {"baseUrl": format!("{}/v1", mock.url())}}});
    let mut t = ready_tau(
        tau()
            .agent_file("models.json", models.to_string())
            .arg("--no-session"),
    );
    assert!(state(&mut t)["model"].is_null());
    let refused = t.request(json!({"type": "prompt", "message": "hi"}));
    assert_eq!(refused["success"], false, "{refused}");
    let listed = t.request(json!({"type": "get_available_models"}));
    assert_eq!(listed["data"]["models"], json!([]));
    // The key is stored meanwhile (the terminal's /login, pi in another terminal).
    std::fs::write(
        t.agent_dir().join("auth.json"),
        r#"{"openai": {"type": "api_key", "key": "stored-later"}}"#,
    )
    .unwrap();
    let listed = t.request(json!({"type": "get_available_models"}));
    let models = listed["data"]["models"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(!models.is_empty(), "{listed}");
    assert!(models.iter().all(|m| m["provider"] == "openai"), "{listed}");
    // The session had no model: it takes the provider's default, as at start.
    assert_eq!(state(&mut t)["model"]["provider"], "openai");
    let accepted = t.request(json!({"type": "prompt", "message": "hi again"}));
    assert_eq!(accepted["success"], true, "{accepted}");
    t.records_until("agent_settled", std::time::Duration::from_secs(20));
    let sent = mock.requests();
    let authorization = sent[0]
        .headers
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case("authorization"))
        .map(|(_, value)| value.as_str());
    assert_eq!(authorization, Some("Bearer stored-later"));
}
