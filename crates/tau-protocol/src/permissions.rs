//! Permissions on the wire (tau's own, decision T123): the modes a session runs tools in, what
//! a tool call is asked for, and the answers a front-end gives.

use serde::{Deserialize, Serialize};

/// What a session lets tools do without asking.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Hash, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub enum PermissionMode {
    /// Nothing asks (pi's behaviour; RPC mode's default). `deny` rules still refuse.
    #[default]
    AllowAll,
    /// Asks before edits (`edit`, `write`), commands (`bash`) and the tools of MCP servers and
    /// extensions, unless an `allow` rule covers the call.
    Ask,
    /// Edits run without asking; commands and other tools ask.
    AcceptEdits,
    /// Read-only: edits, commands and other tools are refused; reading and searching run.
    Plan,
}

impl PermissionMode {
    pub const ALL: [PermissionMode; 4] = [
        PermissionMode::Ask,
        PermissionMode::AcceptEdits,
        PermissionMode::Plan,
        PermissionMode::AllowAll,
    ];

    /// pi's behaviour, left out of `get_state`.
    pub fn is_allow_all(&self) -> bool {
        *self == PermissionMode::AllowAll
    }

    /// The name on the wire and in settings.
    pub fn as_str(self) -> &'static str {
        match self {
            PermissionMode::AllowAll => "allowAll",
            PermissionMode::Ask => "ask",
            PermissionMode::AcceptEdits => "acceptEdits",
            PermissionMode::Plan => "plan",
        }
    }

    /// The mode named `name`, as settings and commands write it.
    pub fn parse(name: &str) -> Option<PermissionMode> {
        PermissionMode::ALL.into_iter().find(|m| m.as_str() == name)
    }
}

/// What a tool call does, as permissions see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ToolKind {
    /// Reads or searches (`read`, `grep`, `find`, `ls`), or keeps the todo list.
    Read,
    /// Changes files (`edit`, `write`).
    Edit,
    /// Runs a command (`bash`).
    Command,
    /// An MCP server's or an extension's tool: it may do anything.
    Other,
}

/// A front-end's answer to a `permission_request`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum PermissionOutcome {
    /// Run this call.
    Allow,
    /// Run this call and, for the rest of the session, every call the request's `rule`
    /// covers (with `remember`, also in the user's settings).
    AllowAlways,
    /// Do not run it: the model gets an error result saying the user refused.
    Reject,
}
