//! The tool interface the agent loop calls: built-in tools, host tools and extension tools
//! all look the same to it.

use futures_util::future::BoxFuture;
use serde_json::{Map, Value};
use tau_protocol::AgentToolResult;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// What a running tool gets besides its arguments.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// Cancelled on abort; a tool stops promptly and reports the abort as its error.
    pub cancel: CancellationToken,
    updates: mpsc::UnboundedSender<AgentToolResult>,
}

impl ToolContext {
    /// A context whose progress reports go to `updates`.
    pub fn new(cancel: CancellationToken, updates: mpsc::UnboundedSender<AgentToolResult>) -> Self {
        Self { cancel, updates }
    }

    /// Reports progress: the accumulated result so far (becomes `tool_execution_update`).
    pub fn update(&self, partial: AgentToolResult) {
        let _ = self.updates.send(partial);
    }
}

/// A tool the model may call.
pub trait AgentTool: Send + Sync {
    fn name(&self) -> &str;
    fn description(&self) -> &str;
    /// JSON Schema of the arguments.
    fn parameters(&self) -> &Value;
    /// The tool's line in the system prompt's tool list; `None` leaves it out (pi lists an
    /// extension's tool only when it gives a `promptSnippet`).
    fn prompt_snippet(&self) -> Option<String> {
        self.description().lines().next().map(str::to_string)
    }
    /// Like [`AgentTool::prepare_arguments`], for tools whose preparation is asynchronous (an
    /// extension's `prepareArguments` runs in its process). `None`: nothing to prepare this way.
    /// An `Err` becomes the call's error result.
    fn prepare_arguments_async(
        &self,
        _arguments: &Map<String, Value>,
    ) -> Option<BoxFuture<'_, Result<Map<String, Value>, String>>> {
        None
    }
    /// Whether a batch with this tool runs its calls one after the other (pi's
    /// `executionMode: "sequential"`).
    fn sequential(&self) -> bool {
        false
    }
    /// Lines added to the system prompt's guidelines while the tool is offered.
    fn prompt_guidelines(&self) -> Vec<String> {
        Vec::new()
    }
    /// Rewrites raw arguments before they are validated (pi's `prepareArguments`; `edit`
    /// folds its legacy single-edit form into the multi-edit one here).
    fn prepare_arguments(&self, arguments: Map<String, Value>) -> Map<String, Value> {
        arguments
    }
    /// Runs the tool. An `Err` becomes an error result whose text is the message.
    fn execute<'a>(
        &'a self,
        call_id: &'a str,
        arguments: Map<String, Value>,
        context: ToolContext,
    ) -> BoxFuture<'a, Result<AgentToolResult, String>>;
}
