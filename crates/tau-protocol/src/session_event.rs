//! Session-level events: everything a session emits besides the agent-run events, which it
//! forwards unchanged inside [`SessionEvent::Agent`].

use crate::{AgentEvent, ThinkingLevel, TodoStatus};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Why a compaction runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CompactionReason {
    Manual,
    Threshold,
    Overflow,
    /// xcsh only; never produced in RPC mode, accepted when read.
    Idle,
}

/// Outcome of a successful compaction (the `compact` response and `compaction_end.result`).
/// Carries the union of pi's and xcsh's fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CompactionResult {
    pub summary: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub short_summary: Option<String>,
    pub first_kept_entry_id: String,
    pub tokens_before: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated_tokens_after: Option<u64>,
    /// pi: `{"readFiles":[…],"modifiedFiles":[…]}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preserve_data: Option<Value>,
}

/// The file lists of a compaction, pi's `details` (`{"readFiles":[…],"modifiedFiles":[…]}`),
/// in `CompactionResult.details` and in `compaction` and `branch_summary` entries. That field
/// stays free-form JSON, since an extension's own compaction brings details of its own shape.
/// `read_files` holds files only read; a file both read and changed is in `modified_files`.
/// Both are sorted.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CompactionDetails {
    #[serde(rename = "readFiles", default)]
    pub read_files: Vec<String>,
    #[serde(rename = "modifiedFiles", default)]
    pub modified_files: Vec<String>,
}

impl CompactionDetails {
    /// The JSON stored in the `compaction` entry and sent in the result.
    pub fn to_value(&self) -> Value {
        serde_json::json!({
            "readFiles": self.read_files,
            "modifiedFiles": self.modified_files,
        })
    }
}

/// One incomplete task in a `todo_reminder` event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TodoReminderItem {
    pub id: String,
    pub content: String,
    pub status: TodoStatus,
}

/// How tau reaches an MCP server (`mcp_server_status.transport`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum McpTransport {
    Stdio,
    Http,
    /// Configured as `type: "sse"`: the older HTTP+SSE transport (decision T128).
    Sse,
}

/// Where an MCP server stands (`mcp_server_status.state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum McpServerState {
    Starting,
    Ready,
    /// Failed to start or died; its tools fail until a call restarts it.
    Failed,
    /// Shut down with tau.
    Stopped,
}

/// Whether the session file holds everything (`session_save_status.state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SessionSaveState {
    /// A write failed (a full disk, a removed folder): entries wait in memory.
    Failing,
    /// Writing works again: every waiting entry is in the file now.
    Saved,
}

/// Everything a session emits, tagged by `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum SessionEvent {
    /// The full current steering and follow-up queues, after any change.
    QueueUpdate {
        steering: Vec<String>,
        follow_up: Vec<String>,
    },
    CompactionStart {
        reason: CompactionReason,
    },
    CompactionEnd {
        reason: CompactionReason,
        /// `null` when the compaction failed or was aborted (decision 1).
        result: Option<CompactionResult>,
        aborted: bool,
        will_retry: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error_message: Option<String>,
    },
    /// xcsh's family, emitted beside `compaction_start` for automatic compaction (decision 4).
    AutoCompactionStart {
        reason: CompactionReason,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        action: Option<String>,
    },
    AutoCompactionEnd {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        action: Option<String>,
        /// Omitted (not null) when absent, as xcsh does.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<CompactionResult>,
        aborted: bool,
        will_retry: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error_message: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        skipped: Option<bool>,
    },
    AutoRetryStart {
        attempt: u32,
        max_attempts: u32,
        delay_ms: u64,
        error_message: String,
    },
    AutoRetryEnd {
        success: bool,
        attempt: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        final_error: Option<String>,
    },
    ThinkingLevelChanged {
        level: ThinkingLevel,
    },
    SessionInfoChanged {
        /// Absent when the name was cleared.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
    ExtensionError {
        extension_path: String,
        event: String,
        error: String,
    },
    /// Nothing more will happen automatically (pi 1.x, decision 3).
    AgentSettled {
        aborted: bool,
    },
    TodoReminder {
        todos: Vec<TodoReminderItem>,
        attempt: u32,
        max_attempts: u32,
    },
    TodoAutoClear,
    TtsrTriggered {
        rules: Vec<Value>,
    },
    RetryFallbackApplied {
        from: String,
        to: String,
        role: String,
    },
    RetryFallbackSucceeded {
        model: String,
        role: String,
    },
    /// tau's own (decision T90): an MCP server's state, written for every server after
    /// `ready` and again on each change (a start, a failure, a restart, a new tool list).
    McpServerStatus {
        /// The server's name in the configuration (its tools are `<server>_<tool>`).
        server: String,
        transport: McpTransport,
        state: McpServerState,
        /// The server's own names of its tools, as last listed.
        tools: Vec<String>,
        /// Restarts made by tool calls after failures.
        restarts: u32,
        /// Why, when `failed`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    /// tau's own (decision T119): the session file could not be written (`failing`, once,
    /// when the first write fails) or holds everything again (`saved`, once the entries that
    /// waited are written). Nothing is lost meanwhile: the entries stay in the session and
    /// are written, in order, by the next write that succeeds.
    SessionSaveStatus {
        state: SessionSaveState,
        /// The session file.
        file: String,
        /// The system's reason, when `failing`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        /// Entries not yet in the file, when `failing`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        unsaved: Option<u64>,
    },
    /// tau's own (decision T123): a tool call waits for the user's word. Answered with a
    /// `permission_response` frame of the same `id`; until then the run waits.
    PermissionRequest {
        /// The request's id, for the answer.
        id: String,
        tool_call_id: String,
        tool_name: String,
        args: Value,
        kind: crate::ToolKind,
        /// A line saying what the call would do (`Run git push`, `Edit src/main.rs`).
        title: String,
        /// The rule `allowAlways` adds (`bash(git push)`, `edit`, `mcp_files_write`).
        rule: String,
    },
    /// tau's own (decision T123): a `permission_request` no longer waits (the run was
    /// aborted, or input ended); an answer to it is ignored.
    PermissionWithdrawn {
        id: String,
    },
    /// tau's own (decision T123): the session's permission mode changed.
    PermissionModeChanged {
        mode: crate::PermissionMode,
    },
    /// An agent-run event, forwarded as is.
    #[serde(untagged)]
    Agent(AgentEvent),
}

impl From<AgentEvent> for SessionEvent {
    fn from(event: AgentEvent) -> Self {
        SessionEvent::Agent(event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_events_serialise_flat() {
        let json = serde_json::to_string(&SessionEvent::from(AgentEvent::TurnStart)).unwrap();
        assert_eq!(json, r#"{"type":"turn_start"}"#);
        let back: SessionEvent = serde_json::from_str(r#"{"type":"agent_start"}"#).unwrap();
        assert_eq!(back, SessionEvent::Agent(AgentEvent::AgentStart));
    }

    #[test]
    fn failed_compaction_end_has_null_result() {
        let ev = SessionEvent::CompactionEnd {
            reason: CompactionReason::Manual,
            result: None,
            aborted: false,
            will_retry: false,
            error_message: Some("Compaction failed: x".into()),
        };
        assert_eq!(
            serde_json::to_string(&ev).unwrap(),
            r#"{"type":"compaction_end","reason":"manual","result":null,"aborted":false,"willRetry":false,"errorMessage":"Compaction failed: x"}"#
        );
    }

    #[test]
    fn mcp_server_status_is_flat_and_omits_an_absent_message() {
        let ev = SessionEvent::McpServerStatus {
            server: "files".into(),
            transport: McpTransport::Stdio,
            state: McpServerState::Ready,
            tools: vec!["read".into()],
            restarts: 0,
            message: None,
        };
        assert_eq!(
            serde_json::to_string(&ev).unwrap(),
            r#"{"type":"mcp_server_status","server":"files","transport":"stdio","state":"ready","tools":["read"],"restarts":0}"#
        );
    }

    #[test]
    fn unknown_event_type_is_an_error() {
        assert!(serde_json::from_str::<SessionEvent>(r#"{"type":"nope"}"#).is_err());
    }
}
