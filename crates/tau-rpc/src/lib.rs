//! pi's RPC mode over stdio: JSONL framing ([`framing`]), the complete wire surface
//! ([`wire`]), decoding of each line ([`parse`]), command dispatch ([`server`]) and the single
//! stdout writer ([`writer`]). [`serve`] ties them together for the binary.
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

pub mod framing;
pub mod parse;
pub mod server;
pub mod snapshot;
pub mod wire;
pub mod writer;

pub use server::{ExitReason, RpcServer, serve};
pub use snapshot::UpdateShape;
