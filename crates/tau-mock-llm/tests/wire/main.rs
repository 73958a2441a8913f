//! Black-box tests of the mock: real HTTP over loopback, SSE parsed back from the raw bytes.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

mod cli;
mod cloud;
mod control;
mod faults;
mod streams;
mod support;
