//! pi's RPC mode over stdio: JSONL framing ([`framing`]), decoding of each line ([`parse`]), command dispatch ([`server`]) and the single
//! stdout writer ([`writer`]). [`serve`] ties them together for the binary. The wire types are
//! `tau-protocol`'s, imported from there.
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

pub mod framing;
pub mod parse;
pub mod server;
pub mod snapshot;
pub mod writer;

pub use server::{ExitReason, LoadedExtensions, RpcServer, serve};
pub use snapshot::UpdateShape;
