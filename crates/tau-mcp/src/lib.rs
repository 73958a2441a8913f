//! MCP servers as tools, through the official Rust SDK (`rmcp`): the `mcpServers`
//! configuration ([`config`]), the servers' connections and lifecycle ([`McpManager`]), and
//! each server tool as a `tau_agent::AgentTool` ([`McpTool`]) named by [`names`], each
//! server prompt as a command ([`prompt`]), and what is said about a server kept free of its
//! secrets ([`redact`]).
//!
//! The session builds the server list (choosing which configuration layers are trusted),
//! starts an [`McpManager`], reads [`McpManager::current_tools`] (kept fresh: a server that
//! announces `tools/list_changed` is listed again at once) whenever it lists its tools and
//! before each model call, and calls [`McpManager::shutdown`] when it ends. Decisions T86
//! and T90, T95 and T96 in `docs/decisions.md`.

mod client;
pub mod config;
mod connection;
mod content;
mod manager;
pub mod names;
pub mod oauth;
pub mod prompt;
pub mod redact;
mod resource_tools;
mod resources;
mod sse;
mod tool;

pub use client::{
    ClientHost, ElicitationAnswer, ElicitationRequest, FieldKind, FormField, RootFolder,
    SamplingReply, SamplingRequest, SamplingTurn, ServerLog,
};
pub use config::{
    BASE_ENV, ConfigError, ConfigErrorReason, ConfigFileError, HttpConfig, HttpTransport,
    InheritEnv, McpServer, ParsedServers, ServerConfig, StdioConfig, expand_variables,
    merge_layers, parse_config_document, parse_servers, process_env,
};
pub use content::map_result;
pub use manager::{McpError, McpManager, McpOptions, ServerState, ServerStatus};
pub use names::{MAX_TOOL_NAME_LEN, NameAllocator, base_tool_name, is_valid_tool_name, sanitize};
pub use prompt::{ExpandedPrompt, McpPrompt, PromptArgumentInfo, PromptError};
pub use redact::Redactor;
pub use resource_tools::{
    LIST_RESOURCES, ListResources, READ_RESOURCE, ReadResource, resource_tools,
};
pub use resources::{CompletionTarget, ResourceEntry};
pub use tool::McpTool;
