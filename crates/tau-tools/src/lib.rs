//! The built-in tools the model can call: `read`, `bash`, `edit`, `write`, `grep`, `find`,
//! `ls`. Their output texts, notices and error strings are pi's, so a model tuned on pi
//! behaves the same; their descriptions are tau's own words.

pub mod atomic;
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
mod tool;
pub mod truncate;
mod walk;
pub use walk::normalize as normalize_path;
pub mod write;

pub use env::ToolEnv;

use std::sync::Arc;

use tau_agent::AgentTool;

/// The built-in tool names, in pi's order.
pub const BUILTIN_TOOLS: [&str; 7] = ["read", "bash", "edit", "write", "grep", "find", "ls"];

/// The tools active when `--tools` is not given (pi's default set).
pub const DEFAULT_ACTIVE_TOOLS: [&str; 4] = ["read", "bash", "edit", "write"];

/// Builds the built-in tool called `name` for `env`.
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
