//! The bottom floor of tau: small utilities that every layer uses and that depend on none of
//! tau's other crates, so that a crate needing one (the session store needs the skimmer and
//! atomic writes) does not pull in the provider or tool stacks with it.
//!
//! - [`skim`]: reading chosen members of a JSON document without building it;
//! - [`atomic`]: replacing a file so that readers see the old bytes or the new ones;
//! - [`bounded`]: reading a file someone else may have planted (regular files only, capped);
//! - [`paths`]: lexical normalisation, the home directory and `~` expansion.
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

pub mod atomic;
pub mod bounded;
pub mod paths;
pub mod skim;
