//! One conversation and what it owns. [`AgentSession`] (`session`) coordinates pieces that
//! each own one concern: the conversation and its record (`conversation`), where it works
//! (`workspace`), the model (`model_choice`), the client's preferences (`preferences`), the
//! tools (`tool_selection`, `host_tools`, `mcp`), the extensions (`extension_binding`), the run task
//! (`runs`) and compaction (`compactor`, with the rules in `compaction`); besides automatic
//! retry, todos, the RPC `bash` command, HTML export and the outbound event sink. The session
//! store (`tau-store`) and the resources read from disk (`tau-resources`) are crates of their
//! own, re-exported here under their old names.

mod bash_commands;
pub mod carrying_out;
pub mod compaction;
mod compactor;
mod conversation;
pub mod dialogs;
mod error;
pub mod export_html;
mod extension_actions;
pub mod extension_binding;
pub mod extension_hooks;
mod extension_state;
mod host_tools;
pub mod mcp;
pub mod mcp_client;
pub mod model_choice;
pub mod models;
mod outbound;
pub mod permissions;
pub mod preferences;
pub mod replacing;
pub mod retry;
pub mod runs;
mod session;
mod startup;
mod todos;
pub mod tokens;
pub mod tool_selection;
pub mod workspace;

// The session store and the file locations are their own crate, and so are settings,
// skills, templates and the system prompt: named here for this crate's modules only; a
// front-end depends on those crates itself.
pub(crate) use tau_resources::{self as resources, settings, system_prompt};
pub(crate) use tau_store::{self as store, paths};

pub use compactor::CompactDone;
pub use conversation::{Conversation, SessionStats};
pub(crate) use host_tools::HostToolDefinition;
pub use host_tools::{
    HostTool, HostToolBridge, HostToolError, HostToolRegistry, RegisteredHostTool,
};
pub use models::{StartupModel, resolve_startup_model};
pub use outbound::{DirectWrite, EventSink, ExtensionOutlet, Outbound, WeakEventSink};
pub use preferences::Preference;
pub use session::{
    Admitted, AgentSession, BashRun, InputSource, Launch, NavigateOptions, NavigateOutcome,
    PromptOutcome, QueueAs, Replacement, SessionConfig, SessionError, Submitted,
    pick_up_credentials,
};
pub(crate) use settings::Settings;
pub use startup::{SessionChoice, StartupStore, session_dir, startup_store};

/// Names of the built-in tools; host tools may not reuse them.
pub(crate) use tau_tools::BUILTIN_TOOLS as BUILTIN_TOOL_NAMES;
