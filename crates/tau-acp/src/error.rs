//! The failures of ACP requests, and the JSON-RPC errors clients see for them.

use agent_client_protocol::Error as RpcError;

/// Why a request could not be carried out.
#[derive(Debug, thiserror::Error)]
pub enum AcpError {
    /// No session with this id is open on this connection (and, for `session/load`, none is
    /// stored under it).
    #[error("no session \"{0}\"")]
    UnknownSession(String),
    /// A second `session/prompt` for a session whose turn is still running.
    #[error("a prompt is already running in session \"{0}\"")]
    Busy(String),
    /// No model has credentials, or the chosen one has none.
    #[error("{0}")]
    NoCredentials(String),
    /// A session could not be opened or created.
    #[error("{0}")]
    Session(String),
    /// A config option or value tau does not offer.
    #[error("{0}")]
    InvalidParams(String),
    /// The model call failed (the turn ended on an error).
    #[error("{0}")]
    Turn(String),
}

impl AcpError {
    /// The JSON-RPC error for the client: the codes ACP gives these cases, with tau's text.
    pub fn to_rpc(&self) -> RpcError {
        let base = match self {
            Self::UnknownSession(_) | Self::InvalidParams(_) => RpcError::invalid_params(),
            Self::Busy(_) => RpcError::invalid_request(),
            Self::NoCredentials(_) => RpcError::auth_required(),
            Self::Session(_) | Self::Turn(_) => RpcError::internal_error(),
        };
        RpcError::new(base.code, self.to_string())
    }
}
