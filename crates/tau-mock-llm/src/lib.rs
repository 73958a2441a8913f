//! tau-mock-llm: a scripted LLM server on 127.0.0.1 that streams the wire formats of the
//! Anthropic Messages, OpenAI Chat Completions, OpenAI Responses and Google Generative AI APIs,
//! and of the cloud APIs Azure OpenAI (Responses), Vertex AI (Gemini, with Google's OAuth
//! token endpoint) and Amazon Bedrock (Converse stream, SigV4-checked, binary event stream),
//! so provider clients, agent tests, demos and benchmarks run without a network or API key.
//!
//! A test starts a [`MockServer`], queues [`Reply`]s (one per request, in order), points a
//! client at [`MockServer::url`] and afterwards reads [`MockServer::requests`]. Replies can
//! stream thinking, text and tool calls, or inject a [`Fault`] (HTTP errors, a dropped or
//! stalled stream). With rules on, an empty queue is answered from the request itself.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use serde_json::json;
//! use tau_mock_llm::{MockServer, Reply};
//!
//! let server = MockServer::start().await?;
//! server.push(Reply::new().thinking("Let me look.").tool_call("call_1", "bash", json!({"command": "ls"})));
//! server.push(Reply::text("Two files."));
//! // ... point a client at server.url() ...
//! server.shutdown().await;
//! # Ok(()) }
//! ```
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

mod api;
mod cloud_auth;
mod errors;
mod reply;
mod rules;
mod server;
mod stream;

pub use api::Api;
pub use cloud_auth::{AwsCredentials, AwsWebIdentity, GoogleOAuth, TEST_RSA_KEY_PEM};
pub use reply::{
    Block, DEFAULT_CHUNK_SIZE, Fault, Reply, ScriptError, StopReason, Usage, load_script,
    parse_script,
};
pub use server::{BackgroundMock, MockControl, MockServer, RecordedRequest};
