//! Black-box tests of `tau --mode rpc`: every test spawns the real binary through
//! `tau-test-kit` and speaks JSONL over its pipes.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

mod agent;
mod bash_command;
mod cli;
mod commands;
mod compaction;
mod ext_session;
mod extensions;
mod flags;
mod framing;
mod hardening_host;
mod hardening_input;
mod input_path;
mod lifecycle;
mod models;
mod oneshot;
mod pi_extensions;
mod pi_parity;
mod resources;
mod retry;
mod sessions;
mod settings;
mod state;
mod todos;
mod trust;

use tau_test_kit::{Tau, TauBuilder};

/// A builder for the binary under test.
pub fn tau() -> TauBuilder {
    TauBuilder::new(env!("CARGO_BIN_EXE_tau"))
}

/// A started tau whose `ready` record has been read.
pub fn ready_tau(builder: TauBuilder) -> Tau {
    let mut tau = builder.spawn();
    let ready = tau.event("ready");
    assert_eq!(ready["version"], env!("CARGO_PKG_VERSION"));
    tau
}
