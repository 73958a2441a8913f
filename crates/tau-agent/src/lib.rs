//! The agent layer: the messages an agent keeps in its context ([`AgentMessage`], which adds
//! bash executions, extension messages and summaries to the LLM messages) and the
//! [`AgentEvent`] stream of a run, the [`run`] loop and the [`AgentTool`] interface.

mod convert;
mod run;
mod tool;
mod validate;

pub use convert::{IMAGES_BLOCKED, block_images, convert_to_llm};
// The agent's messages and events are wire types, owned by `tau-protocol`.
pub use run::{RunHost, RunSpec, SKIPPED_FOR_STEERING, run};
pub use tau_protocol::{
    AgentEvent, AgentMessage, AgentToolResult, BashExecutionMessage, BranchSummaryMessage,
    CompactionSummaryMessage, CustomMessage, InterruptMode, QueueMode,
};
pub use tool::{AgentTool, ToolContext};
pub use validate::{coerce, validate_arguments};
