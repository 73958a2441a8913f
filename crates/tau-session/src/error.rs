//! What a session operation that fails says: one error type for every front-end, whose text
//! is what the client sees. Beside the session rather than in it, so that the modules the
//! session uses can return it without depending on the session.

use crate::HostToolError;

/// Errors of session operations; the text is what the RPC client sees.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    #[error("Session name cannot be empty")]
    EmptySessionName,
    /// `set_model` named a model that does not exist or has no credentials.
    #[error("Model not found: {provider}/{id}")]
    ModelNotFound { provider: String, id: String },
    #[error(transparent)]
    HostTool(#[from] HostToolError),
    /// A prompt without `streamingBehavior` while a run streams (pi's text).
    #[error(
        "Agent is already processing. Specify streamingBehavior ('steer' or 'followUp') to queue the message."
    )]
    Busy,
    /// No key for the model's provider.
    #[error(
        "No API key found for {0}.\n\nSet the provider's API key environment variable, add it to auth.json, or pass --api-key together with --model."
    )]
    NoApiKey(String),
    /// A session-file operation failed; the text is the client's error message.
    #[error("{0}")]
    Store(String),
    /// A configured key could not be produced (a failing `!command`, an OAuth entry, …).
    #[error("{0}")]
    Credentials(String),
    /// An MCP prompt command (`/mcp:<server>:<prompt>`) could not be expanded: a required
    /// argument is missing, or the server failed to give the prompt.
    #[error("{0}")]
    McpPrompt(String),
}
