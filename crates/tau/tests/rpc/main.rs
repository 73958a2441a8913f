//! Black-box tests of `tau --mode rpc`: every test spawns the real binary through
//! `tau-test-kit` and speaks JSONL over its pipes.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

mod acp;
mod acp_editor;
mod agent;
mod bash_command;
mod cli;
mod commands;
mod compaction;
mod eof_work;
mod ext_session;
mod ext_snapshot;
mod ext_wait;
mod extension_frames;
mod extensions;
mod flags;
mod framing;
mod full_disk;
mod hardening_host;
mod hardening_input;
mod hardening_project;
mod hardening_reads;
mod input_path;
mod lifecycle;
mod mcp;
mod mcp_client;
mod mcp_extension;
mod mcp_oauth;
mod mcp_prompts;
mod mcp_registry;
mod mcp_sse;
mod mirror;
mod models;
mod oneshot;
mod ordering;
mod packages;
mod permissions;
mod pi_extensions;
mod pi_parity;
mod resources;
mod retry;
mod sessions;
mod settings;
mod state;
mod third_party;
mod todos;
mod trust;
mod tui;

use tau_test_kit::{Tau, TauBuilder};

/// A builder for the binary under test.
pub fn tau() -> TauBuilder {
    TauBuilder::new(env!("CARGO_BIN_EXE_tau"))
}

/// A `models.json` whose one model, `mock/mock-1` (text and images), is served by `mock`.
pub fn mock_models(mock: &tau_mock_llm::BackgroundMock) -> String {
    serde_json::json!({"providers": {"mock": {
        "baseUrl": format!("{}/v1", mock.url()), "api": "openai-completions", "apiKey": "k",
        "models": [{"id": "mock-1", "input": ["text", "image"], "contextWindow": 100000,
                    "maxTokens": 4096}],
    }}})
    .to_string()
}

/// The names `get_commands` lists, in order.
pub fn command_names(t: &mut Tau) -> Vec<String> {
    let r = t.request(serde_json::json!({"type": "get_commands"}));
    assert_eq!(r["success"], true, "{r}");
    r["data"]["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect()
}

/// A started tau whose `ready` record has been read.
pub fn ready_tau(builder: TauBuilder) -> Tau {
    let mut tau = builder.spawn();
    let ready = tau.event("ready");
    assert_eq!(ready["version"], env!("CARGO_PKG_VERSION"));
    tau
}

/// Text with the terminal colour codes (`theme.fg`, `theme.bold`) taken out: ESC `[` … up to
/// the final byte of the sequence.
pub fn strip_ansi(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) && c != '[' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}
