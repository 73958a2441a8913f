//! The agent layer: the messages an agent keeps in its context ([`AgentMessage`], which adds
//! bash executions, extension messages and summaries to the LLM messages) and the
//! [`AgentEvent`] stream of a run. The loop itself arrives with the agent-loop issue.

mod event;
mod message;

pub use event::{AgentEvent, AgentToolResult};
pub use message::{
    AgentMessage, BashExecutionMessage, BranchSummaryMessage, CompactionSummaryMessage,
    CustomMessage,
};

mod modes;
pub use modes::{InterruptMode, QueueMode};
