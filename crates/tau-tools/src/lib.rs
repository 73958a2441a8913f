//! The built-in tools the model can call: `read`, `bash`, `edit`, `write`, `grep`, `find`,
//! `ls`, and xcsh's `todo_write`. Their output texts, notices and error strings are pi's (xcsh's
//! for `todo_write`), so a model tuned on them behaves the same; their descriptions are tau's
//! own words.

pub mod attach;
pub mod bash;
mod call;
pub mod edit;
mod env;
pub mod find;
pub mod grep;
mod image_resize;
pub mod ls;
mod os_error;
pub mod paths;
pub mod read;
mod runner;
pub mod todo_write;
mod tool;
pub mod truncate;
mod walk;
pub mod write;

pub use env::{FileAccess, FileFuture, ToolEnv};
pub use runner::{
    ClientCommand, CommandExit, CommandFuture, CommandOutput, CommandRunner, RunningCommand,
};

use std::sync::Arc;

use tau_agent::AgentTool;

/// The built-in tool names, in pi's order, then xcsh's `todo_write`.
pub const BUILTIN_TOOLS: [&str; 8] = [
    "read",
    "bash",
    "edit",
    "write",
    "grep",
    "find",
    "ls",
    todo_write::NAME,
];

/// The tools active when `--tools` is not given: pi's default set, and `todo_write`, which
/// xcsh offers by default.
pub const DEFAULT_ACTIVE_TOOLS: [&str; 5] = ["read", "bash", "edit", "write", todo_write::NAME];

/// Builds the built-in tool called `name` for `env`. `todo_write` is not built here: it works
/// on a session's todo list ([`todo_write::TodoWriteTool::new`]).
pub fn builtin_tool(name: &str, env: &Arc<ToolEnv>) -> Option<Arc<dyn AgentTool>> {
    let env = Arc::clone(env);
    Some(match name {
        "read" => Arc::new(read::ReadTool::new(env)),
        "bash" => Arc::new(bash::BashTool::new(env)),
        "edit" => Arc::new(edit::EditTool::new(env)),
        "write" => Arc::new(write::WriteTool::new(env)),
        "grep" => Arc::new(grep::GrepTool::new(env)),
        "find" => Arc::new(find::FindTool::new(env)),
        "ls" => Arc::new(ls::LsTool::new(env)),
        _ => return None,
    })
}
