//! One conversation and everything it owns: settings, the current model and thinking level,
//! queue and interrupt modes, todos, host tools, the outbound event sink, and the session
//! store (pi's JSONL files). Compaction, retry and resources join it in later issues.

pub mod compaction;
mod conversation;
pub mod export_html;
mod host_tools;
pub mod models;
mod outbound;
pub mod paths;
pub mod resources;
pub mod retry;
mod session;
pub mod settings;
mod startup;
pub mod store;
pub mod system_prompt;
pub mod tokens;

pub use host_tools::{
    HostTool, HostToolBridge, HostToolCall, HostToolCancel, HostToolDefinition, HostToolError,
    HostToolOutput, HostToolRegistry, RegisteredHostTool,
};
pub use models::{StartupModel, resolve_startup_model};
pub use outbound::{EventSink, Outbound};
pub use session::{
    AgentSession, BashRun, Launch, PromptOutcome, QueueAs, SessionConfig, SessionError,
    SessionStats,
};
pub use settings::Settings;
pub use startup::{SessionChoice, StartupStore, session_dir, startup_store};
pub use tau_protocol::{CompactionReason, CompactionResult, SessionEvent, TodoReminderItem};
pub use tau_protocol::{TodoItem, TodoPhase, TodoStatus};

/// Names of the built-in tools; host tools may not reuse them.
pub use tau_tools::BUILTIN_TOOLS as BUILTIN_TOOL_NAMES;
