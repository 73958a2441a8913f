//! Behavioural tests of the registry against temporary agent directories and an injected
//! environment.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use serde_json::json;

use super::*;

fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + Send + Sync + 'static {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |name| map.get(name).cloned()
}

fn registry(dir: &Path, env: &[(&str, &str)]) -> Registry {
    Registry::new(dir, env_of(env))
}

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap();
}

fn models_json_error(text: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "models.json", text);
    let reg = registry(dir.path(), &[]);
    let err = reg
        .models_json_error()
        .expect("models.json should be rejected")
        .to_string();
    // Whatever went wrong, the built-in catalog is still there.
    assert_eq!(reg.all_models().len(), builtin_models().len());
    let file = dir.path().join("models.json").display().to_string();
    let suffix = format!("\n\nFile: {file}");
    assert!(err.ends_with(&suffix), "{err}");
    err.trim_end_matches(&suffix).to_string()
}

fn key(reg: &Registry, provider: &str) -> Option<String> {
    reg.api_key(provider)
        .unwrap()
        .map(|k| k.expose().to_string())
}

// ---------------------------------------------------------------------------------------------
// Loading

#[test]
fn nothing_is_read_until_first_use() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(dir.path(), &[]);
    assert!(format!("{reg:?}").contains("loaded_models: None"));
    assert!(!reg.all_models().is_empty());
    assert!(format!("{reg:?}").contains("loaded_models: Some("));
}

#[test]
fn missing_files_mean_builtins_only() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(dir.path(), &[]);
    assert!(reg.models_json_error().is_none());
    assert!(reg.auth_json_error().is_none());
    assert_eq!(reg.all_models(), builtin_models());
    assert!(reg.available_models().is_empty());
}

/// `all_models_json` is the catalog's own serialisation, whichever way it is made.
fn assert_json_is_the_models(reg: &Registry) {
    let text = reg.all_models_json().expect("the catalog serialises");
    let read: Vec<tau_protocol::Model> = serde_json::from_str(text.get()).unwrap();
    assert_eq!(reg.all_models(), read.as_slice());
}

#[test]
fn the_catalog_as_json_text_follows_models_json_and_patches() {
    let dir = tempfile::tempdir().unwrap();
    let mut reg = registry(dir.path(), &[]);
    // Nothing changes the catalog: the built-in text, made once per process.
    assert_json_is_the_models(&reg);
    let builtin = reg.all_models_json().unwrap();
    assert_eq!(builtin.get(), builtin_models_json().unwrap().get());
    write(
        dir.path(),
        "models.json",
        r#"{"providers": {"local": {"baseUrl": "http://127.0.0.1:1/v1", "api": "openai-completions",
            "apiKey": "k", "models": [{"id": "small"}]}}}"#,
    );
    reg.reload();
    assert_json_is_the_models(&reg);
    assert!(
        reg.all_models_json()
            .unwrap()
            .get()
            .contains(r#""id":"small""#)
    );
    // A patched built-in model, without models.json: no longer the built-in text.
    let mut reg = registry(tempfile::tempdir().unwrap().path(), &[]);
    let first = &builtin_models()[0];
    let patch = ModelPatch {
        name: Some("Renamed by an extension".into()),
        ..ModelPatch::default()
    };
    assert!(reg.patch_model(&first.provider.clone(), &first.id.clone(), &patch));
    assert_json_is_the_models(&reg);
    assert!(
        reg.all_models_json()
            .unwrap()
            .get()
            .contains("Renamed by an extension")
    );
}

#[test]
fn comments_and_trailing_commas_are_stripped_outside_strings() {
    let text = "{\n  // a comment\n  \"a\": \"http://x//y\", // tail\n  \"b\": [1, 2,],\n  \"c\": \",]\",\n}\n";
    let stripped = models_json::strip_comments_and_trailing_commas(text);
    let value: serde_json::Value = serde_json::from_str(&stripped).unwrap();
    assert_eq!(value, json!({"a": "http://x//y", "b": [1, 2], "c": ",]"}));
    // Escaped quotes do not end a string early.
    let tricky = r#"{"a": "say \"//hi\"",}"#;
    let value: serde_json::Value =
        serde_json::from_str(&models_json::strip_comments_and_trailing_commas(tricky)).unwrap();
    assert_eq!(value["a"], "say \"//hi\"");
}

#[test]
fn a_commented_models_json_loads() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "models.json",
        r#"{
          // local server
          "providers": {
            "ollama": {
              "baseUrl": "http://localhost:11434/v1", // default port
              "api": "openai-completions",
              "apiKey": "ollama",
              "models": [ { "id": "llama3:8b", }, ],
            },
          },
        }"#,
    );
    let reg = registry(dir.path(), &[]);
    assert!(
        reg.models_json_error().is_none(),
        "{:?}",
        reg.models_json_error()
    );
    let m = reg
        .find("ollama", "llama3:8b")
        .expect("custom model with auth");
    assert_eq!(m.base_url, "http://localhost:11434/v1");
}

#[test]
fn syntax_errors_are_parse_errors() {
    let err = models_json_error("{bad");
    assert!(err.starts_with("Failed to parse models.json: "), "{err}");
    let err = models_json_error("");
    assert!(err.starts_with("Failed to parse models.json: "), "{err}");
}

#[test]
fn schema_errors_use_pi_paths_and_messages() {
    let cases: &[(&str, &[&str])] = &[
        (
            "{}",
            &["providers: must have required properties providers"],
        ),
        ("[1]", &["root: must be object"]),
        ("null", &["root: must be object"]),
        (r#"{"providers":[]}"#, &["providers: must be object"]),
        (
            r#"{"providers":{"x":null}}"#,
            &["providers.x: must be object"],
        ),
        (
            r#"{"providers":{"x":{"models":[{}]}}}"#,
            &["providers.x.models.0.id: must have required properties id"],
        ),
        (
            r#"{"providers":{"x":{"baseUrl":5}}}"#,
            &["providers.x.baseUrl: must be string"],
        ),
        (
            r#"{"providers":{"x":{"models":[{"id":""}]}}}"#,
            &["providers.x.models.0.id: must not have fewer than 1 characters"],
        ),
        (
            r#"{"providers":{"x":{"models":[{"id":"a","input":["video"]}]}}}"#,
            &[
                "providers.x.models.0.input.0: must be equal to constant",
                "providers.x.models.0.input.0: must be equal to constant",
                "providers.x.models.0.input.0: must match a schema in anyOf",
            ],
        ),
        (
            r#"{"providers":{"x":{"models":[{"id":"a","cost":{"input":1}}]}}}"#,
            &[
                "providers.x.models.0.cost.output: must have required properties output, cacheRead, cacheWrite",
            ],
        ),
        (
            r#"{"providers":{"x":{"models":[{"name":2,"cost":{"output":"a"}}]}}}"#,
            &[
                "providers.x.models.0.id: must have required properties id",
                "providers.x.models.0.name: must be string",
                "providers.x.models.0.cost.input: must have required properties input, cacheRead, cacheWrite",
                "providers.x.models.0.cost.output: must be number",
            ],
        ),
        (
            // Reported in schema order, not file order.
            r#"{"providers":{"x":{"models":"no","authHeader":"yes","baseUrl":1}}}"#,
            &[
                "providers.x.baseUrl: must be string",
                "providers.x.authHeader: must be boolean",
                "providers.x.models: must be array",
            ],
        ),
        (
            r#"{"providers":{"x":{"headers":{"a":1}}}}"#,
            &["providers.x.headers.a: must be string"],
        ),
        (
            r#"{"providers":{"x":{"models":[{"id":"a","thinkingLevelMap":{"high":1}}]}}}"#,
            &[
                "providers.x.models.0.thinkingLevelMap.high: must be string",
                "providers.x.models.0.thinkingLevelMap.high: must be null",
                "providers.x.models.0.thinkingLevelMap.high: must match a schema in anyOf",
            ],
        ),
        (
            r#"{"providers":{"x":{"compat":5}}}"#,
            &[
                "providers.x.compat: must be object",
                "providers.x.compat: must be object",
                "providers.x.compat: must be object",
                "providers.x.compat: must match a schema in anyOf",
            ],
        ),
        (
            r#"{"providers":{"x":{"compat":{"supportsDeveloperRole":1,"forceAdaptiveThinking":2,"maxTokensField":"x"}}}}"#,
            &[
                "providers.x.compat.supportsDeveloperRole: must be boolean",
                "providers.x.compat.maxTokensField: must be equal to constant",
                "providers.x.compat.maxTokensField: must be equal to constant",
                "providers.x.compat.maxTokensField: must match a schema in anyOf",
                "providers.x.compat.supportsDeveloperRole: must be boolean",
                "providers.x.compat.forceAdaptiveThinking: must be boolean",
                "providers.x.compat: must match a schema in anyOf",
            ],
        ),
        (
            // Nested unions inside one branch of the compat union; pi's cap of eight lines
            // cuts the final anyOf line.
            r#"{"providers":{"x":{"compat":{"supportsDeveloperRole":1,"forceAdaptiveThinking":2,"openRouterRouting":{"sort":{"partition":1}}}}}}"#,
            &[
                "providers.x.compat.supportsDeveloperRole: must be boolean",
                "providers.x.compat.openRouterRouting.sort: must be string",
                "providers.x.compat.openRouterRouting.sort.partition: must be string",
                "providers.x.compat.openRouterRouting.sort.partition: must be null",
                "providers.x.compat.openRouterRouting.sort.partition: must match a schema in anyOf",
                "providers.x.compat.openRouterRouting.sort: must match a schema in anyOf",
                "providers.x.compat.supportsDeveloperRole: must be boolean",
                "providers.x.compat.forceAdaptiveThinking: must be boolean",
            ],
        ),
        (
            r#"{"providers":{"openrouter":{"modelOverrides":{"openai/gpt-4o":{"name":""}}}}}"#,
            &[
                "providers.openrouter.modelOverrides.openai.gpt-4o.name: must not have fewer than 1 characters",
            ],
        ),
        (
            r#"{"providers":{"x":{"models":[{"id":"a","thinkingLevelMap":5,"input":"text","headers":[]}]}}}"#,
            &[
                "providers.x.models.0.thinkingLevelMap: must be object",
                "providers.x.models.0.input: must be array",
                "providers.x.models.0.headers: must be object",
            ],
        ),
    ];
    for (text, lines) in cases {
        let want = format!(
            "Invalid models.json schema:\n{}",
            lines
                .iter()
                .map(|l| format!("  - {l}"))
                .collect::<Vec<_>>()
                .join("\n")
        );
        assert_eq!(models_json_error(text), want, "for {text}");
    }
}

#[test]
fn schema_errors_stop_at_eight() {
    let providers: serde_json::Map<String, serde_json::Value> = "abcdefghij"
        .chars()
        .map(|c| (c.to_string(), json!({"baseUrl": 1})))
        .collect();
    let err = models_json_error(&json!({ "providers": providers }).to_string());
    assert_eq!(err.lines().filter(|l| l.starts_with("  - ")).count(), 8);
    assert!(err.contains("providers.h.baseUrl") && !err.contains("providers.i.baseUrl"));
}

#[test]
fn rule_violations_are_load_errors() {
    let cases = [
        (
            r#"{"providers":{"x":{}}}"#,
            r#"Failed to load models.json: Provider x: must specify "baseUrl", "headers", "compat", "modelOverrides", or "models"."#,
        ),
        (
            r#"{"providers":{"x":{"modelOverrides":{}}}}"#,
            r#"Failed to load models.json: Provider x: must specify "baseUrl", "headers", "compat", "modelOverrides", or "models"."#,
        ),
        (
            r#"{"providers":{"x":{"models":[{"id":"a"}]}}}"#,
            r#"Failed to load models.json: Provider x: "baseUrl" is required when defining custom models."#,
        ),
        (
            r#"{"providers":{"x":{"baseUrl":"u","models":[{"id":"a"}]}}}"#,
            r#"Failed to load models.json: Provider x: "apiKey" is required when defining custom models."#,
        ),
        (
            r#"{"providers":{"x":{"baseUrl":"u","apiKey":"k","models":[{"id":"a"}]}}}"#,
            r#"Failed to load models.json: Provider x, model a: no "api" specified. Set at provider or model level."#,
        ),
        (
            r#"{"providers":{"x":{"baseUrl":"u","apiKey":"k","api":"openai-completions","models":[{"id":"a","contextWindow":0}]}}}"#,
            "Failed to load models.json: Provider x, model a: invalid contextWindow",
        ),
        (
            r#"{"providers":{"anthropic":{"models":[{"id":"a","maxTokens":-1}]}}}"#,
            "Failed to load models.json: Provider anthropic, model a: invalid maxTokens",
        ),
    ];
    for (text, want) in cases {
        assert_eq!(models_json_error(text), want, "for {text}");
    }
}

#[test]
fn a_broken_models_json_drops_all_of_it() {
    let dir = tempfile::tempdir().unwrap();
    // The first provider is fine, the second breaks a rule: nothing from the file applies,
    // not even the first provider's key.
    write(
        dir.path(),
        "models.json",
        r#"{"providers":{
            "ok":{"baseUrl":"http://a","apiKey":"k","api":"openai-completions","models":[{"id":"m"}]},
            "bad":{}}}"#,
    );
    let reg = registry(dir.path(), &[]);
    assert!(reg.models_json_error().is_some());
    assert!(reg.find_any("ok", "m").is_none());
    assert!(!reg.has_auth("ok"));
}

// ---------------------------------------------------------------------------------------------
// Merging

#[test]
fn custom_models_get_pi_defaults() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "models.json",
        r#"{"providers":{"local":{
            "baseUrl":"http://h/v1","apiKey":"k","api":"openai-completions",
            "compat":{"supportsStore":false,"openRouterRouting":{"order":["a"],"zdr":true}},
            "models":[
              {"id":"plain"},
              {"id":"full","name":"Full","api":"anthropic-messages","baseUrl":"http://other",
               "reasoning":true,"input":["text","image"],
               "cost":{"input":1,"output":2,"cacheRead":0.5,"cacheWrite":3},
               "contextWindow":64000,"maxTokens":4096.0,
               "compat":{"supportsDeveloperRole":false,"openRouterRouting":{"order":["b"]}}}
            ]}}}"#,
    );
    let reg = registry(dir.path(), &[]);
    assert!(
        reg.models_json_error().is_none(),
        "{:?}",
        reg.models_json_error()
    );
    let plain = reg.find_any("local", "plain").unwrap();
    assert_eq!(plain.name, "plain");
    assert_eq!(plain.api, "openai-completions");
    assert_eq!(plain.base_url, "http://h/v1");
    assert!(!plain.reasoning);
    assert_eq!(plain.input, vec![tau_protocol::InputModality::Text]);
    assert_eq!(plain.cost, tau_protocol::ModelCost::default());
    assert_eq!((plain.context_window, plain.max_tokens), (128_000, 16_384));
    assert_eq!(
        plain.compat,
        Some(json!({"supportsStore":false,"openRouterRouting":{"order":["a"],"zdr":true}}))
    );

    let full = reg.find_any("local", "full").unwrap();
    assert_eq!(full.name, "Full");
    assert_eq!(full.api, "anthropic-messages");
    assert_eq!(full.base_url, "http://other");
    assert!(full.reasoning);
    assert_eq!(full.cost.cache_write, 3.0);
    assert_eq!((full.context_window, full.max_tokens), (64_000, 4096));
    // Routing objects merge one level deeper; other keys are replaced.
    assert_eq!(
        full.compat,
        Some(json!({
            "supportsStore": false,
            "openRouterRouting": {"order": ["b"], "zdr": true},
            "supportsDeveloperRole": false
        }))
    );
    // Custom models come after the built-ins, in file order.
    let all = reg.all_models();
    let n = all.len();
    assert_eq!(
        (
            &all.get(n - 2).unwrap().id[..],
            &all.get(n - 1).unwrap().id[..]
        ),
        ("plain", "full")
    );
}

#[test]
fn custom_models_on_a_builtin_provider_inherit_its_endpoint() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "models.json",
        r#"{"providers":{"anthropic":{"models":[{"id":"claude-next"}]}}}"#,
    );
    let reg = registry(dir.path(), &[]);
    let first = builtin_models()
        .iter()
        .find(|m| m.provider == "anthropic")
        .unwrap();
    let m = reg.find_any("anthropic", "claude-next").unwrap();
    assert_eq!(m.api, first.api);
    assert_eq!(m.base_url, first.base_url);
}

#[test]
fn provider_settings_and_model_overrides_patch_builtins() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "models.json",
        r#"{"providers":{"anthropic":{
            "baseUrl":"https://proxy.example/anthropic",
            "compat":{"supportsLongCacheRetention":false},
            "modelOverrides":{
              "claude-sonnet-4-5":{"name":"Sonnet (proxied)","cost":{"output":99},"maxTokens":1000,
                                   "thinkingLevelMap":{"xhigh":"max"}},
              "no-such-model":{"name":"ignored"}
            }}}}"#,
    );
    let reg = registry(dir.path(), &[]);
    assert!(
        reg.models_json_error().is_none(),
        "{:?}",
        reg.models_json_error()
    );
    for m in reg
        .all_models()
        .iter()
        .filter(|m| m.provider == "anthropic")
    {
        assert_eq!(m.base_url, "https://proxy.example/anthropic");
        assert_eq!(
            m.compat
                .as_ref()
                .and_then(|c| c.get("supportsLongCacheRetention")),
            Some(&json!(false))
        );
    }
    let m = reg.find_any("anthropic", "claude-sonnet-4-5").unwrap();
    assert_eq!(m.name, "Sonnet (proxied)");
    assert_eq!(
        (
            m.cost.input,
            m.cost.output,
            m.cost.cache_read,
            m.cost.cache_write
        ),
        (3.0, 99.0, 0.3, 3.75)
    );
    assert_eq!(m.max_tokens, 1000);
    assert_eq!(m.context_window, 200_000);
    assert!(
        m.supported_thinking_levels()
            .contains(&ThinkingLevel::Xhigh)
    );
    assert!(reg.find_any("anthropic", "no-such-model").is_none());
    // Other providers are untouched.
    let openai = reg.find_any("openai", "gpt-5.4").unwrap();
    assert_eq!(
        openai,
        builtin_models()
            .iter()
            .find(|m| m.provider == "openai" && m.id == "gpt-5.4")
            .unwrap()
    );
}

#[test]
fn custom_models_replace_builtins_in_place() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "models.json",
        r#"{"providers":{"anthropic":{"models":[
            {"id":"claude-sonnet-4-5","name":"Mine","contextWindow":1000}]}}}"#,
    );
    let reg = registry(dir.path(), &[]);
    let builtin_pos = builtin_models()
        .iter()
        .position(|m| m.provider == "anthropic" && m.id == "claude-sonnet-4-5")
        .unwrap();
    let all = reg.all_models();
    assert_eq!(all.len(), builtin_models().len());
    let mine = all.get(builtin_pos).unwrap();
    assert_eq!(mine.name, "Mine");
    assert_eq!(mine.context_window, 1000);
}

#[test]
fn a_models_json_that_only_adds_models_leaves_the_catalog_uncopied() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "models.json",
        r#"{"providers":{
            "local":{"baseUrl":"http://127.0.0.1:1/v1","api":"openai-completions","apiKey":"k",
                     "models":[{"id":"one"},{"id":"two"},{"id":"one","name":"One again"}]},
            "anthropic":{"models":[{"id":"claude-new","contextWindow":5}]}}}"#,
    );
    let reg = registry(dir.path(), &[]);
    let all = reg.all_models();
    assert!(!all.copies_catalog());
    // The catalog as it is, then the added models in file order, a repeated id in its place.
    let n = builtin_models().len();
    assert!(all.iter().take(n).eq(builtin_models().iter()));
    let added: Vec<(&str, &str, &str)> = all
        .iter()
        .skip(n)
        .map(|m| (m.provider.as_str(), m.id.as_str(), m.name.as_str()))
        .collect();
    assert_eq!(
        added,
        [
            ("local", "one", "One again"),
            ("local", "two", "two"),
            ("anthropic", "claude-new", "claude-new")
        ]
    );
    assert_eq!(all.len(), n + 3);
    assert_eq!(all.get(n + 1).map(|m| m.id.as_str()), Some("two"));
    assert!(all.get(n + 3).is_none());
    // Extensions see the same list as JSON.
    let json: Vec<Model> = serde_json::from_str(reg.all_models_json().unwrap().get()).unwrap();
    assert_eq!(all, json.as_slice());
}

#[test]
fn changing_a_builtin_provider_copies_the_catalog() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "models.json",
        r#"{"providers":{"openai":{"baseUrl":"http://127.0.0.1:2/v1"}}}"#,
    );
    let reg = registry(dir.path(), &[]);
    let all = reg.all_models();
    assert!(all.copies_catalog());
    assert_eq!(all.len(), builtin_models().len());
    assert!(
        all.iter()
            .filter(|m| m.provider == "openai")
            .all(|m| m.base_url == "http://127.0.0.1:2/v1")
    );
    assert!(
        all.iter()
            .filter(|m| m.provider == "anthropic")
            .all(|m| m.base_url != "http://127.0.0.1:2/v1")
    );
}

#[test]
fn reload_rereads_the_files() {
    let dir = tempfile::tempdir().unwrap();
    let mut reg = registry(dir.path(), &[]);
    assert!(reg.find_any("local", "m").is_none());
    write(
        dir.path(),
        "models.json",
        r#"{"providers":{"local":{"baseUrl":"http://h","apiKey":"k","api":"openai-completions","models":[{"id":"m"}]}}}"#,
    );
    assert!(reg.find_any("local", "m").is_none(), "cached until reload");
    reg.reload();
    assert!(reg.find_any("local", "m").is_some());
}

// ---------------------------------------------------------------------------------------------
// Keys

#[test]
fn key_sources_in_precedence_order() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "models.json",
        r#"{"providers":{"openai":{"apiKey":"from-models-json","baseUrl":"https://api.openai.com/v1"}}}"#,
    );
    // models.json apiKey alone.
    let reg = registry(dir.path(), &[]);
    assert_eq!(key(&reg, "openai").as_deref(), Some("from-models-json"));
    // The environment beats models.json.
    let reg = registry(dir.path(), &[("OPENAI_API_KEY", "from-env")]);
    assert_eq!(key(&reg, "openai").as_deref(), Some("from-env"));
    // auth.json beats the environment.
    write(
        dir.path(),
        "auth.json",
        r#"{"openai":{"type":"api_key","key":"from-auth-json"}}"#,
    );
    let mut reg = registry(dir.path(), &[("OPENAI_API_KEY", "from-env")]);
    assert_eq!(key(&reg, "openai").as_deref(), Some("from-auth-json"));
    // The runtime key beats everything.
    reg.set_runtime_api_key("openai", ApiKey::new("from-cli"));
    assert_eq!(key(&reg, "openai").as_deref(), Some("from-cli"));
    // Runtime keys are bound to their provider.
    assert_eq!(key(&reg, "groq"), None);
}

#[test]
fn oauth_logins_give_their_access_token_until_it_expires() {
    let dir = tempfile::tempdir().unwrap();
    let later = crate::now_ms() + 3_600_000;
    write(
        dir.path(),
        "auth.json",
        &format!(
            r#"{{"anthropic":{{"type":"oauth","refresh":"r","access":"sk-ant-oat-a","expires":{later}}},
                "openai":{{"type":"oauth","refresh":"r","access":"b","expires":1}}}}"#
        ),
    );
    let reg = registry(dir.path(), &[("ANTHROPIC_API_KEY", "env-key")]);
    assert!(reg.has_auth("anthropic"));
    assert_eq!(key(&reg, "anthropic").as_deref(), Some("sk-ant-oat-a"));
    let err = reg.api_key("openai").unwrap_err();
    assert!(
        err.to_string()
            .starts_with("The openai login in auth.json has expired")
    );
    // A runtime key still wins over the login.
    let mut reg = reg;
    reg.set_runtime_api_key("anthropic", ApiKey::new("cli"));
    assert_eq!(key(&reg, "anthropic").as_deref(), Some("cli"));
}

#[test]
fn provider_environment_variables() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("anthropic", "ANTHROPIC_API_KEY"),
        ("anthropic", "ANTHROPIC_OAUTH_TOKEN"),
        ("openai", "OPENAI_API_KEY"),
        ("google", "GEMINI_API_KEY"),
        ("groq", "GROQ_API_KEY"),
        ("cerebras", "CEREBRAS_API_KEY"),
        ("xai", "XAI_API_KEY"),
        ("openrouter", "OPENROUTER_API_KEY"),
        ("vercel-ai-gateway", "AI_GATEWAY_API_KEY"),
        ("zai", "ZAI_API_KEY"),
        ("mistral", "MISTRAL_API_KEY"),
        ("minimax", "MINIMAX_API_KEY"),
        ("minimax-cn", "MINIMAX_CN_API_KEY"),
        ("moonshotai", "MOONSHOT_API_KEY"),
        ("moonshotai-cn", "MOONSHOT_API_KEY"),
        ("huggingface", "HF_TOKEN"),
        ("fireworks", "FIREWORKS_API_KEY"),
        ("opencode", "OPENCODE_API_KEY"),
        ("opencode-go", "OPENCODE_API_KEY"),
        ("kimi-coding", "KIMI_API_KEY"),
        ("deepseek", "DEEPSEEK_API_KEY"),
        ("github-copilot", "COPILOT_GITHUB_TOKEN"),
        ("github-copilot", "GH_TOKEN"),
        ("github-copilot", "GITHUB_TOKEN"),
        ("xiaomi", "XIAOMI_API_KEY"),
        ("xiaomi-token-plan-cn", "XIAOMI_TOKEN_PLAN_CN_API_KEY"),
        ("xiaomi-token-plan-ams", "XIAOMI_TOKEN_PLAN_AMS_API_KEY"),
        ("xiaomi-token-plan-sgp", "XIAOMI_TOKEN_PLAN_SGP_API_KEY"),
        ("cloudflare-workers-ai", "CLOUDFLARE_API_KEY"),
        ("cloudflare-ai-gateway", "CLOUDFLARE_API_KEY"),
    ];
    for (provider, var) in cases {
        let reg = registry(dir.path(), &[(var, "k-1")]);
        assert!(reg.has_auth(provider), "{provider} via {var}");
        assert_eq!(
            key(&reg, provider).as_deref(),
            Some("k-1"),
            "{provider} via {var}"
        );
        let reg = registry(dir.path(), &[(var, "")]);
        assert!(!reg.has_auth(provider), "empty {var} counts as unset");
    }
    let reg = registry(
        dir.path(),
        &[
            ("ANTHROPIC_API_KEY", "api"),
            ("ANTHROPIC_OAUTH_TOKEN", "oauth"),
        ],
    );
    assert_eq!(key(&reg, "anthropic").as_deref(), Some("oauth"));
    let reg = registry(
        dir.path(),
        &[("GH_TOKEN", "gh"), ("GITHUB_TOKEN", "github")],
    );
    assert_eq!(key(&reg, "github-copilot").as_deref(), Some("gh"));
}

#[test]
fn configured_values_resolve_env_names_then_literals() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "auth.json",
        r#"{"openai":{"type":"api_key","key":"MY_OPENAI"},"groq":{"type":"api_key","key":"gsk-literal"}}"#,
    );
    let reg = registry(dir.path(), &[("MY_OPENAI", "resolved")]);
    assert_eq!(key(&reg, "openai").as_deref(), Some("resolved"));
    assert_eq!(key(&reg, "groq").as_deref(), Some("gsk-literal"));
    let reg = registry(dir.path(), &[]);
    assert_eq!(key(&reg, "openai").as_deref(), Some("MY_OPENAI"));
}

#[test]
fn shell_command_keys_run_with_sh() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.log");
    write(
        dir.path(),
        "auth.json",
        &json!({"openai": {"type": "api_key", "key": format!("!echo run >> '{}'; echo '  sk-cmd  '", log.display())}})
            .to_string(),
    );
    let reg = registry(dir.path(), &[]);
    assert_eq!(key(&reg, "openai").as_deref(), Some("sk-cmd"));
    // auth.json command results are cached for the process.
    assert_eq!(key(&reg, "openai").as_deref(), Some("sk-cmd"));
    assert_eq!(std::fs::read_to_string(&log).unwrap().lines().count(), 1);
}

#[test]
fn models_json_commands_run_every_time() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.log");
    write(
        dir.path(),
        "models.json",
        &json!({"providers": {"local": {
            "baseUrl": "http://h", "api": "openai-completions",
            "apiKey": format!("!echo run >> '{}'; echo local-key", log.display()),
            "models": [{"id": "m"}]}}})
        .to_string(),
    );
    let reg = registry(dir.path(), &[]);
    // Checking for auth never runs the command.
    assert!(reg.has_auth("local"));
    assert_eq!(reg.available_models().len(), 1);
    assert!(!log.exists());
    assert_eq!(key(&reg, "local").as_deref(), Some("local-key"));
    assert_eq!(key(&reg, "local").as_deref(), Some("local-key"));
    assert_eq!(std::fs::read_to_string(&log).unwrap().lines().count(), 2);
}

#[test]
fn failing_commands_report_pi_text() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "models.json",
        r#"{"providers":{"local":{"baseUrl":"http://h","api":"openai-completions",
            "apiKey":"!exit 1","models":[{"id":"m"}]}}}"#,
    );
    let reg = registry(dir.path(), &[]);
    assert_eq!(
        reg.api_key("local").unwrap_err().to_string(),
        "Failed to resolve API key for provider \"local\" from shell command: exit 1"
    );

    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "auth.json",
        r#"{"openai":{"type":"api_key","key":"!printf ''"}}"#,
    );
    // pi skips the environment when auth.json has an entry that yields nothing.
    let reg = registry(dir.path(), &[("OPENAI_API_KEY", "env")]);
    assert_eq!(
        reg.api_key("openai").unwrap_err().to_string(),
        "Failed to resolve API key for provider \"openai\" from shell command: printf ''"
    );
}

#[test]
fn slow_commands_time_out() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "models.json",
        r#"{"providers":{"local":{"baseUrl":"http://h","api":"openai-completions",
            "apiKey":"!sleep 5; echo late","models":[{"id":"m"}]}}}"#,
    );
    let reg = registry(dir.path(), &[]).with_command_timeout(Duration::from_millis(200));
    let start = std::time::Instant::now();
    assert!(matches!(
        reg.api_key("local"),
        Err(KeyError::Command { .. })
    ));
    assert!(start.elapsed() < Duration::from_secs(3));
}

#[test]
fn no_configured_key_is_none() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(dir.path(), &[]);
    assert!(!reg.has_auth("openai"));
    assert_eq!(reg.api_key("openai"), Ok(None));
}

#[test]
fn keys_never_show_in_debug_output() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "models.json",
        r#"{"providers":{"local":{"baseUrl":"http://h","api":"openai-completions","authHeader":true,
            "apiKey":"sk-models-secret","headers":{"X-Token":"hdr-secret"},"models":[{"id":"m"}]}}}"#,
    );
    let mut reg = registry(dir.path(), &[]);
    reg.set_runtime_api_key("openai", ApiKey::new("sk-runtime-secret"));
    let key = reg.api_key("openai").unwrap().unwrap();
    let model = reg.find_any("local", "m").unwrap().clone();
    let config = reg.request_config(&model).unwrap();
    let shown = format!("{reg:?} {key:?} {config:?} {:?}", reg.api_key("local"));
    for secret in ["sk-runtime-secret", "sk-models-secret", "hdr-secret"] {
        assert!(!shown.contains(secret), "{secret} leaked: {shown}");
    }
    assert!(shown.contains("X-Token") && shown.contains("Authorization"));
}

// ---------------------------------------------------------------------------------------------
// Request configuration

#[test]
fn request_headers_merge_and_resolve() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "models.json",
        r#"{"providers":{
            "local":{"baseUrl":"http://h","api":"openai-completions","apiKey":"sk-l","authHeader":true,
                     "headers":{"X-A":"provider","X-B":"HDR_ENV","X-C":"!echo from-cmd"},
                     "models":[{"id":"m","headers":{"X-A":"model"}}]},
            "github-copilot":{"headers":{"Editor-Version":"mine"}}}}"#,
    );
    let reg = registry(
        dir.path(),
        &[("HDR_ENV", "from-env"), ("COPILOT_GITHUB_TOKEN", "t")],
    );
    let m = reg.find_any("local", "m").unwrap().clone();
    let config = reg.request_config(&m).unwrap();
    assert_eq!(config.api_key.as_ref().map(ApiKey::expose), Some("sk-l"));
    assert_eq!(config.base_url, "http://h");
    assert_eq!(
        config.headers,
        vec![
            ("X-A".to_string(), "model".to_string()),
            ("X-B".to_string(), "from-env".to_string()),
            ("X-C".to_string(), "from-cmd".to_string()),
            ("Authorization".to_string(), "Bearer sk-l".to_string()),
        ]
    );
    // Built-in model headers come first; provider headers override them.
    let copilot = reg.find_any("github-copilot", "gpt-5.4").unwrap().clone();
    let config = reg.request_config(&copilot).unwrap();
    let get = |name: &str| {
        config
            .headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(get("Editor-Version"), Some("mine"));
    assert_eq!(get("Copilot-Integration-Id"), Some("vscode-chat"));
}

#[test]
fn request_config_errors() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "models.json",
        r#"{"providers":{
            "a":{"baseUrl":"http://h","api":"openai-completions","apiKey":"k","headers":{"X-K":"!false"},"models":[{"id":"m"}]},
            "b":{"baseUrl":"http://h","api":"openai-completions","apiKey":"!false","authHeader":true,"models":[{"id":"m"}]},
            "openai":{"baseUrl":"https://api.openai.com/v1","authHeader":true}}}"#,
    );
    let reg = registry(dir.path(), &[]);
    let a = reg.find_any("a", "m").unwrap().clone();
    assert_eq!(
        reg.request_config(&a).unwrap_err().to_string(),
        "Failed to resolve provider \"a\" header \"X-K\" from shell command: false"
    );
    let b = reg.find_any("b", "m").unwrap().clone();
    assert_eq!(
        reg.request_config(&b).unwrap_err().to_string(),
        "Failed to resolve API key for provider \"b\" from shell command: false"
    );
    let openai = reg.find_any("openai", "gpt-5.4").unwrap().clone();
    assert_eq!(
        reg.request_config(&openai).unwrap_err().to_string(),
        "No API key found for \"openai\""
    );
}

#[test]
fn cloudflare_base_urls_fill_placeholders() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(
        dir.path(),
        &[
            ("CLOUDFLARE_API_KEY", "cf"),
            ("CLOUDFLARE_ACCOUNT_ID", "acct"),
        ],
    );
    let workers = reg
        .all_models()
        .iter()
        .find(|m| m.provider == "cloudflare-workers-ai")
        .unwrap()
        .clone();
    assert_eq!(
        reg.request_config(&workers).unwrap().base_url,
        "https://api.cloudflare.com/client/v4/accounts/acct/ai/v1"
    );
    let gateway = reg
        .all_models()
        .iter()
        .find(|m| m.provider == "cloudflare-ai-gateway")
        .unwrap()
        .clone();
    assert_eq!(
        reg.request_config(&gateway).unwrap_err().to_string(),
        "CLOUDFLARE_GATEWAY_ID is required for provider cloudflare-ai-gateway but is not set."
    );
}

// ---------------------------------------------------------------------------------------------
// Availability and lookup

#[test]
fn available_models_and_find_need_auth() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(dir.path(), &[("GROQ_API_KEY", "g"), ("XAI_API_KEY", "x")]);
    let available = reg.available_models();
    assert!(!available.is_empty());
    assert!(
        available
            .iter()
            .all(|m| m.provider == "groq" || m.provider == "xai")
    );
    // Registry order: the subsequence of all models.
    let expected: Vec<&Model> = reg
        .all_models()
        .iter()
        .filter(|m| m.provider == "groq" || m.provider == "xai")
        .collect();
    assert_eq!(available, expected);
    assert!(reg.find("groq", "openai/gpt-oss-120b").is_some());
    assert!(reg.find("anthropic", "claude-sonnet-4-5").is_none());
    assert!(reg.find_any("anthropic", "claude-sonnet-4-5").is_some());
    // Exact and case-sensitive.
    assert!(reg.find("GROQ", "openai/gpt-oss-120b").is_none());
}

/// The cloud providers are available as pi decides: Azure by its key, Bedrock by any start of
/// the AWS chain, Vertex by an ADC file with a project and a location (or its API key). The
/// key handed to the request is the marker for ambient credentials, which the provider
/// resolves itself.
#[test]
fn cloud_providers_are_available_with_their_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let providers = |reg: &Registry| {
        let mut providers: Vec<String> = reg
            .available_models()
            .iter()
            .map(|m| m.provider.clone())
            .collect();
        providers.dedup();
        providers
    };
    assert!(providers(&registry(dir.path(), &[])).is_empty());
    let adc = dir.path().join("adc.json");
    std::fs::write(&adc, "{}").unwrap();
    let adc = adc.display().to_string();
    let reg = registry(
        dir.path(),
        &[
            ("AZURE_OPENAI_API_KEY", "az"),
            ("AWS_PROFILE", "work"),
            ("GOOGLE_APPLICATION_CREDENTIALS", &adc),
            ("GOOGLE_CLOUD_PROJECT", "p"),
            ("GOOGLE_CLOUD_LOCATION", "us-central1"),
        ],
    );
    let mut found = providers(&reg);
    found.sort();
    assert_eq!(
        found,
        ["amazon-bedrock", "azure-openai-responses", "google-vertex"]
    );
    assert!(reg.may_have_credentials());
    assert_eq!(key(&reg, "amazon-bedrock").as_deref(), Some(AMBIENT_KEY));
    assert_eq!(key(&reg, "google-vertex").as_deref(), Some(AMBIENT_KEY));
    assert_eq!(key(&reg, "azure-openai-responses").as_deref(), Some("az"));
    assert!(
        reg.find("amazon-bedrock", "us.anthropic.claude-opus-4-6-v1")
            .is_some()
    );
    assert_eq!(
        reg.default_model(None, None)
            .map(|m| (m.provider.as_str(), m.id.as_str())),
        Some(("amazon-bedrock", "us.anthropic.claude-opus-4-6-v1"))
    );
    // Vertex's API key wins over ADC; without a location ADC does not count.
    let keyed = registry(dir.path(), &[("GOOGLE_CLOUD_API_KEY", "AIza")]);
    assert_eq!(key(&keyed, "google-vertex").as_deref(), Some("AIza"));
    let no_location = registry(
        dir.path(),
        &[
            ("GOOGLE_APPLICATION_CREDENTIALS", &adc),
            ("GOOGLE_CLOUD_PROJECT", "p"),
        ],
    );
    assert!(providers(&no_location).is_empty());
    assert!(!no_location.may_have_credentials());
    // The ChatGPT-subscription API stays out of the catalog.
    assert!(
        reg.all_models()
            .iter()
            .all(|m| m.provider != "openai-codex")
    );
}

// ---------------------------------------------------------------------------------------------
// --model resolution

fn resolve(reg: &Registry, provider: Option<&str>, pattern: &str) -> CliModel {
    reg.resolve_cli_model(provider, pattern)
        .unwrap_or_else(|e| panic!("{provider:?} {pattern}: {e}"))
}

fn resolved_ref(reg: &Registry, provider: Option<&str>, pattern: &str) -> String {
    let m = resolve(reg, provider, pattern).model;
    format!("{}/{}", m.provider, m.id)
}

#[test]
fn unknown_provider_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(dir.path(), &[]);
    assert_eq!(
        reg.resolve_cli_model(Some("nope"), "x")
            .unwrap_err()
            .to_string(),
        "Unknown provider \"nope\". Use --list-models to see available providers/models."
    );
}

#[test]
fn unknown_model_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(dir.path(), &[]);
    assert_eq!(
        reg.resolve_cli_model(None, "zzz-no-such-model")
            .unwrap_err()
            .to_string(),
        "Model \"zzz-no-such-model\" not found. Use --list-models to see available models."
    );
    assert_eq!(
        reg.resolve_cli_model(None, "zzz-no-such:high").unwrap_err(),
        ResolveError::ModelNotFound("zzz-no-such:high".into())
    );
    assert_eq!(
        reg.resolve_cli_model(None, "").unwrap_err(),
        ResolveError::ModelNotFound(String::new())
    );
}

#[test]
fn providers_match_case_insensitively() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(dir.path(), &[]);
    assert_eq!(
        resolved_ref(&reg, Some("ANTHROPIC"), "claude-sonnet-4-5"),
        "anthropic/claude-sonnet-4-5"
    );
    assert_eq!(
        resolved_ref(&reg, None, "Anthropic/Claude-Sonnet-4-5"),
        "anthropic/claude-sonnet-4-5"
    );
}

#[test]
fn fuzzy_patterns_pick_the_highest_alias() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(dir.path(), &[]);
    // sonnet matches claude-sonnet-4-6, -4-5, -4-0 (aliases) and dated snapshots.
    assert_eq!(
        resolved_ref(&reg, Some("anthropic"), "sonnet"),
        "anthropic/claude-sonnet-4-6"
    );
    assert_eq!(
        resolved_ref(&reg, None, "anthropic/sonnet"),
        "anthropic/claude-sonnet-4-6"
    );
    // Only dated ids contain this: the newest date wins.
    assert_eq!(
        resolved_ref(&reg, Some("anthropic"), "3-5-sonnet"),
        "anthropic/claude-3-5-sonnet-20241022"
    );
}

#[test]
fn level_suffixes_are_split_off() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(dir.path(), &[]);
    let r = resolve(&reg, None, "anthropic/claude-sonnet-4-5:high");
    assert_eq!(r.model.id, "claude-sonnet-4-5");
    assert_eq!(r.thinking_level, Some(ThinkingLevel::High));
    assert!(r.warning.is_none());
    let r = resolve(&reg, Some("anthropic"), "sonnet:minimal");
    assert_eq!(r.model.id, "claude-sonnet-4-6");
    assert_eq!(r.thinking_level, Some(ThinkingLevel::Minimal));
}

#[test]
fn colons_in_custom_ids_survive() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "models.json",
        r#"{"providers":{"ollama":{"baseUrl":"http://localhost:11434/v1","api":"openai-completions",
            "apiKey":"ollama","models":[{"id":"llama3:8b"},{"id":"qwen3:32b","reasoning":true}]}}}"#,
    );
    let reg = registry(dir.path(), &[]);
    let r = resolve(&reg, None, "llama3:8b");
    assert_eq!(
        (r.model.provider.as_str(), r.model.id.as_str()),
        ("ollama", "llama3:8b")
    );
    assert_eq!(r.thinking_level, None);
    let r = resolve(&reg, None, "ollama/qwen3:32b:high");
    assert_eq!(r.model.id, "qwen3:32b");
    assert_eq!(r.thinking_level, Some(ThinkingLevel::High));
}

#[test]
fn slash_ids_match_exactly_before_provider_inference() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(dir.path(), &[]);
    // `meta-llama` is not a provider, so the whole text is an id (OpenRouter's).
    assert_eq!(
        resolved_ref(&reg, None, "meta-llama/llama-3.3-70b-instruct:free"),
        "openrouter/meta-llama/llama-3.3-70b-instruct:free"
    );
    // `moonshotai` is a provider, so it wins over OpenRouter's `moonshotai/kimi-k2.6`.
    assert_eq!(
        resolved_ref(&reg, None, "moonshotai/kimi-k2.6"),
        "moonshotai/kimi-k2.6"
    );
}

#[test]
fn provider_prefix_is_stripped_when_both_are_given() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(dir.path(), &[]);
    assert_eq!(
        resolved_ref(&reg, Some("openrouter"), "openrouter/moonshotai/kimi-k2.6"),
        "openrouter/moonshotai/kimi-k2.6"
    );
    assert_eq!(
        resolved_ref(&reg, Some("anthropic"), "Anthropic/claude-opus-4-7"),
        "anthropic/claude-opus-4-7"
    );
}

#[test]
fn openrouter_raw_ids_are_retried_after_provider_inference() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "models.json",
        r#"{"providers":{"openrouter":{"models":[{"id":"openai/gpt-4o:extended"}]}}}"#,
    );
    let reg = registry(dir.path(), &[]);
    // `openai` is inferred as the provider, nothing there matches `gpt-4o:extended` (and
    // `extended` is no thinking level), so the full text is retried as a raw id.
    let r = resolve(&reg, None, "openai/gpt-4o:extended");
    assert_eq!(
        (r.model.provider.as_str(), r.model.id.as_str()),
        ("openrouter", "openai/gpt-4o:extended")
    );
    assert!(r.warning.is_none());
    assert_eq!(
        resolved_ref(&reg, None, "openai/gpt-oss-120b:free"),
        "openrouter/openai/gpt-oss-120b:free"
    );
}

#[test]
fn inferred_pairs_without_auth_yield_to_a_usable_raw_id() {
    let dir = tempfile::tempdir().unwrap();
    // OpenRouter and Vercel both list `xiaomi/mimo-v2.5-pro`; only OpenRouter has a key.
    let reg = registry(dir.path(), &[("OPENROUTER_API_KEY", "k")]);
    assert_eq!(
        resolved_ref(&reg, None, "xiaomi/mimo-v2.5-pro"),
        "openrouter/xiaomi/mimo-v2.5-pro"
    );
    // With xiaomi's own key, provider inference stands.
    let reg = registry(
        dir.path(),
        &[("OPENROUTER_API_KEY", "k"), ("XIAOMI_API_KEY", "x")],
    );
    assert_eq!(
        resolved_ref(&reg, None, "xiaomi/mimo-v2.5-pro"),
        "xiaomi/mimo-v2.5-pro"
    );
    // Two usable raw matches are ambiguous: inference stands too.
    let reg = registry(
        dir.path(),
        &[("OPENROUTER_API_KEY", "k"), ("AI_GATEWAY_API_KEY", "v")],
    );
    assert_eq!(
        resolved_ref(&reg, None, "xiaomi/mimo-v2.5-pro"),
        "xiaomi/mimo-v2.5-pro"
    );
}

#[test]
fn unknown_models_of_known_providers_are_synthesized() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(dir.path(), &[]);
    let r = resolve(&reg, Some("anthropic"), "claude-future-9");
    let base = reg.find_any("anthropic", "claude-opus-4-7").unwrap();
    assert_eq!(r.model.id, "claude-future-9");
    assert_eq!(r.model.name, "claude-future-9");
    assert_eq!(r.model.base_url, base.base_url);
    assert_eq!(r.model.context_window, base.context_window);
    assert_eq!(
        r.warning.as_deref(),
        Some(
            "Model \"claude-future-9\" not found for provider \"anthropic\". Using custom model id."
        )
    );
    // Inferred from the prefix too, with a level suffix split off.
    let r = resolve(&reg, None, "anthropic/claude-future-9:xhigh");
    assert_eq!(r.model.id, "claude-future-9");
    assert_eq!(r.thinking_level, Some(ThinkingLevel::Xhigh));
    // An invalid suffix is kept as part of the id.
    let r = resolve(&reg, Some("anthropic"), "claude-sonnet-4-5:turbo");
    assert_eq!(r.model.id, "claude-sonnet-4-5:turbo");
    assert_eq!(
        reg.resolve_cli_model(Some("anthropic"), "x")
            .map(|r| r.model.provider),
        Ok("anthropic".to_string())
    );
}

#[test]
fn synthesized_models_reason_when_a_level_is_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "models.json",
        r#"{"providers":{"local":{"baseUrl":"http://h","api":"openai-completions","apiKey":"k",
            "models":[{"id":"base"}]}}}"#,
    );
    let reg = registry(dir.path(), &[]);
    let r = resolve(&reg, Some("local"), "other");
    assert!(!r.model.reasoning);
    let r = resolve(&reg, Some("local"), "other:high");
    assert_eq!(
        (r.model.id.as_str(), r.thinking_level),
        ("other", Some(ThinkingLevel::High))
    );
    assert!(r.model.reasoning);
    let r = resolve(&reg, Some("local"), "other:off");
    assert!(!r.model.reasoning);
    // With --thinking the suffix is not split, and --thinking decides reasoning.
    let r = reg
        .resolve_cli_model_with_thinking(Some("local"), "other:high", Some(ThinkingLevel::Low))
        .unwrap();
    assert_eq!(
        (r.model.id.as_str(), r.thinking_level),
        ("other:high", None)
    );
    assert!(r.model.reasoning);
}

#[test]
fn exact_matches_win_over_fuzzy_ones() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(dir.path(), &[]);
    // `gpt-4o` is a substring of many ids; the exact one wins.
    assert_eq!(
        resolved_ref(&reg, Some("openai"), "gpt-4o"),
        "openai/gpt-4o"
    );
}

// ---------------------------------------------------------------------------------------------
// Scoped models

#[test]
fn scope_globs_match_provider_id_or_id() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(
        dir.path(),
        &[("ANTHROPIC_API_KEY", "a"), ("OPENAI_API_KEY", "o")],
    );
    let scope = reg.resolve_scope(&["anthropic/claude-sonnet-4-*:high", "*SONNET-4-5*"]);
    assert!(scope.warnings.is_empty(), "{:?}", scope.warnings);
    let ids: Vec<&str> = scope.models.iter().map(|s| s.model.id.as_str()).collect();
    assert!(ids.contains(&"claude-sonnet-4-5") && ids.contains(&"claude-sonnet-4-6"));
    assert!(scope.models.iter().all(|s| s.model.provider == "anthropic"));
    // The first pattern's level sticks; duplicates from the second are dropped.
    let first = scope
        .models
        .iter()
        .find(|s| s.model.id == "claude-sonnet-4-5")
        .unwrap();
    assert_eq!(first.thinking_level, Some(ThinkingLevel::High));
    let mut seen = std::collections::HashSet::new();
    assert!(
        scope
            .models
            .iter()
            .all(|s| seen.insert((&s.model.provider, &s.model.id)))
    );
    // Dated snapshots match the second glob on the bare id.
    assert!(ids.contains(&"claude-sonnet-4-5-20250929"));
}

#[test]
fn scope_only_considers_models_with_auth() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(dir.path(), &[("OPENAI_API_KEY", "o")]);
    let scope = reg.resolve_scope(&["claude-sonnet-4-5", "anthropic/*"]);
    assert!(scope.models.is_empty());
    assert_eq!(
        scope.warnings,
        vec![
            "Warning: No models match pattern \"claude-sonnet-4-5\"".to_string(),
            "Warning: No models match pattern \"anthropic/*\"".to_string(),
        ]
    );
}

#[test]
fn scope_patterns_are_lenient_about_suffixes() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(dir.path(), &[("ANTHROPIC_API_KEY", "a")]);
    let scope = reg.resolve_scope(&["claude-sonnet-4-5:turbo", "opus-4-7:low", "sonnet"]);
    assert_eq!(
        scope.warnings,
        vec!["Warning: Invalid thinking level \"turbo\" in pattern \"claude-sonnet-4-5:turbo\". Using default instead.".to_string()]
    );
    let got: Vec<(&str, Option<ThinkingLevel>)> = scope
        .models
        .iter()
        .map(|s| (s.model.id.as_str(), s.thinking_level))
        .collect();
    assert_eq!(
        got,
        vec![
            ("claude-sonnet-4-5", None),
            ("claude-opus-4-7", Some(ThinkingLevel::Low)),
            ("claude-sonnet-4-6", None),
        ]
    );
}

#[test]
fn glob_star_does_not_cross_slashes() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(dir.path(), &[("OPENROUTER_API_KEY", "k")]);
    // `openrouter/*` cannot reach `openrouter/openai/gpt-4o`; `openrouter/*/*` can.
    let has = |scope: &Scope, id: &str| scope.models.iter().any(|s| s.model.id == id);
    let scope = reg.resolve_scope(&["openrouter/*"]);
    assert!(!has(&scope, "openai/gpt-4o"));
    // OpenRouter's own `openrouter/auto` matches on its bare id.
    assert!(has(&scope, "openrouter/auto"));
    let scope = reg.resolve_scope(&["openrouter/*/*"]);
    assert!(has(&scope, "openai/gpt-4o"));
    let scope = reg.resolve_scope(&["openrouter/openai/*"]);
    assert!(has(&scope, "openai/gpt-4o"));
    assert!(
        scope
            .models
            .iter()
            .all(|s| s.model.id.starts_with("openai/"))
    );
}

// ---------------------------------------------------------------------------------------------
// Default model

#[test]
fn default_model_prefers_settings_then_table_then_first() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(
        dir.path(),
        &[("OPENAI_API_KEY", "o"), ("ANTHROPIC_API_KEY", "a")],
    );
    // Settings win, even for a provider without a key (pi looks at all models here).
    let m = reg
        .default_model(Some("groq"), Some("openai/gpt-oss-120b"))
        .unwrap();
    assert_eq!(m.provider, "groq");
    // An unknown saved default falls through; anthropic precedes openai in the table.
    let m = reg.default_model(Some("anthropic"), Some("gone")).unwrap();
    assert_eq!(
        (m.provider.as_str(), m.id.as_str()),
        ("anthropic", "claude-opus-4-7")
    );
    let m = reg.default_model(Some("anthropic"), None).unwrap();
    assert_eq!(m.id, "claude-opus-4-7");

    let reg = registry(dir.path(), &[("GROQ_API_KEY", "g")]);
    let m = reg.default_model(None, None).unwrap();
    assert_eq!(
        (m.provider.as_str(), m.id.as_str()),
        ("groq", "openai/gpt-oss-120b")
    );

    let reg = registry(dir.path(), &[]);
    assert!(reg.default_model(None, None).is_none());

    write(
        dir.path(),
        "models.json",
        r#"{"providers":{"local":{"baseUrl":"http://h","api":"openai-completions","apiKey":"k",
            "models":[{"id":"first"},{"id":"second"}]}}}"#,
    );
    let reg = registry(dir.path(), &[]);
    assert_eq!(reg.default_model(None, None).unwrap().id, "first");
}

#[test]
fn credentials_can_be_ruled_out_without_the_catalog() {
    let dir = tempfile::tempdir().unwrap();
    assert!(!registry(dir.path(), &[]).may_have_credentials());
    assert!(registry(dir.path(), &[("GROQ_API_KEY", "k")]).may_have_credentials());
    assert!(!registry(dir.path(), &[("GROQ_API_KEY", "")]).may_have_credentials());
    std::fs::write(dir.path().join("auth.json"), "{}").unwrap();
    assert!(registry(dir.path(), &[]).may_have_credentials());
}
