//! tau as an Agent Client Protocol agent (`tau --mode acp`): what editors such as Zed speak to
//! coding agents. The JSON-RPC layer and the message types are the official
//! `agent-client-protocol` crate's (protocol v1); this crate owns the stdio transport
//! ([`transport`]), the server that keeps one [`tau_session::AgentSession`] per ACP session
//! ([`server`]), what a prompt's content blocks become ([`prompt`]), the translation of the
//! session's events into `session/update` notifications ([`updates`]) and the model and
//! thinking-level choices offered as session config options ([`options`]), extension
//! dialogs as permission requests ([`dialogs`]), the core's permission modes and requests
//! ([`permissions`]), the file tools through the editor ([`files`]) and `bash` in the editor's
//! terminal ([`terminal`]).
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

pub mod dialogs;
pub mod error;
pub mod files;
pub mod forms;
pub mod options;
pub mod permissions;
pub mod prompt;
pub mod server;
pub mod terminal;
pub mod transport;
pub mod updates;

pub use error::AcpError;
pub use server::{AcpExtensions, ExitReason, ExtensionLoader, Launcher, serve};
