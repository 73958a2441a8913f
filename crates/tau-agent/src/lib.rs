//! The agent layer: the [`run`] loop, the [`AgentTool`] interface, and what the model sees of
//! an agent's context ([`convert_to_llm`]).
//!
//! The messages an agent keeps in its context
//! ([`AgentMessage`](tau_protocol::AgentMessage), which adds bash executions, extension
//! messages and summaries to the LLM messages) and the
//! [`AgentEvent`](tau_protocol::AgentEvent) stream of a run are wire types, owned by
//! `tau-protocol`.

mod convert;
mod run;
mod tool;
mod validate;

pub use convert::{IMAGES_BLOCKED, block_images, convert_to_llm};
pub use run::{RunHost, RunSpec, SKIPPED_FOR_STEERING, run};
pub use tool::{AgentTool, ToolContext};
pub use validate::{coerce, validate_arguments};
