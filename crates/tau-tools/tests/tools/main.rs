//! The built-in tools against real files, directories and processes, one test binary for all of
//! them (a binary per tool cost a link each in every test build). `bash_spill` stays apart: its
//! clean-up is process-wide.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

mod bash;
mod bash_client;
mod edit;
mod find;
mod grep;
mod ls;
mod read;
mod write;
