//! The agent layer: the messages an agent keeps in its context ([`AgentMessage`], which adds
//! bash executions, extension messages and summaries to the LLM messages) and the
//! [`AgentEvent`] stream of a run, the [`run`] loop and the [`AgentTool`] interface.

mod convert;
mod event;
mod message;
mod run;
mod tool;
mod validate;

pub use convert::convert_to_llm;
pub use event::{AgentEvent, AgentToolResult};
pub use message::{
    AgentMessage, BashExecutionMessage, BranchSummaryMessage, CompactionSummaryMessage,
    CustomMessage,
};
pub use run::{RunHost, RunSpec, SKIPPED_FOR_STEERING, run};
pub use tool::{AgentTool, ToolContext};
pub use validate::{coerce, validate_arguments};

mod modes;
pub use modes::{InterruptMode, QueueMode};
