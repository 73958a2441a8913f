//! Extensions as processes (decision 22, `docs/extensions.md`): which entries load and how
//! each is started (`discovery`), one process and its frames (`process`), the loaded set with
//! its registration rules, handler calls, deadlines and dialog routing (`runner`), and the
//! tools extensions registered as the agent loop calls them (`tool`).
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

pub mod discovery;
pub mod packages;
mod process;
mod runner;
mod snapshot;
mod tool;
pub mod trust;

pub use discovery::{DiscoveryError, Entry, Launch, PackageOrigin, Sources, discover};
pub use process::CallError;
pub use runner::{
    ActionApplier, ActionRequest, CommandInfo, EntriesSince, Extension, Extensions, LoadConfig,
    LoadError, Outlet, ShortcutInfo, StateSource, Timeouts, Work, find_node_host, same_key,
};
pub use tool::ExtensionTool;
