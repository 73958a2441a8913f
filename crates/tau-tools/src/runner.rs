//! Commands run by a client instead of by tau: in ACP mode, the editor's own terminal
//! (`terminal/create`, `terminal/wait_for_exit`, `terminal/kill`, `terminal/output`,
//! `terminal/release`), so the person sees the command live where they work. The `bash` tool
//! keeps its rules (timeouts, abort, truncation, the words of its results) and only hands the
//! running to the [`CommandRunner`] in its [`crate::ToolEnv`]; without one it runs the command
//! itself.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;

/// A future the command hooks return; an error is the client's refusal or a broken
/// connection, in words for the model.
pub type CommandFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, String>> + Send + 'a>>;

/// What to run: a program with its arguments (the shell with `-c` and the script), where, with
/// which variables besides the client's own, and how much output the client keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientCommand {
    pub program: String,
    pub args: Vec<String>,
    pub cwd: PathBuf,
    pub env: Vec<(String, String)>,
    /// The client keeps the last this many bytes of output; earlier ones are dropped.
    pub output_byte_limit: u64,
}

/// How a command ended, as the client reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandExit {
    /// The exit code, when the command exited on its own.
    pub code: Option<u32>,
    /// The signal's name, when a signal ended it.
    pub signal: Option<String>,
}

/// The output the client has kept.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandOutput {
    pub text: String,
    /// Earlier output was dropped to stay within the byte limit.
    pub truncated: bool,
}

/// Starts commands somewhere else than in tau's own processes.
pub trait CommandRunner: Send + Sync + std::fmt::Debug {
    /// Starts `command`; the handle follows it until it is released.
    fn create<'a>(
        &'a self,
        command: &'a ClientCommand,
    ) -> CommandFuture<'a, Box<dyn RunningCommand>>;
}

/// One started command (a client terminal). The caller releases it when done, whatever
/// happened; a released command is gone for the other calls.
pub trait RunningCommand: Send + Sync {
    /// The client's id for it (a terminal id), which the tool's progress names.
    fn id(&self) -> &str;
    fn wait_for_exit(&self) -> CommandFuture<'_, CommandExit>;
    /// Ends the command; the output stays readable until the release.
    fn kill(&self) -> CommandFuture<'_, ()>;
    fn output(&self) -> CommandFuture<'_, CommandOutput>;
    fn release(&self) -> CommandFuture<'_, ()>;
}
