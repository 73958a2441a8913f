//! The events tau raises in extensions (docs/extensions.md §3) and the results their handlers
//! return: the `event` of an `event` frame and the `result` of its response. The run's own
//! events (`agent_start`, `message_update`, …) reach extensions as [`crate::AgentEvent`]s;
//! these are the ones only extensions see, most of them asking for a decision.
//!
//! Events borrow what they carry (a context's messages, a tool's input) because they are
//! built on the hot path of every model call and tool call; they are only ever written.
//! Results are read leniently, as pi reads them: a field of the wrong shape leaves the whole
//! result without effect ([`read_result`]) instead of failing the run.

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use crate::{AgentMessage, ImageContent, Model, ThinkingLevel, UserContentBlock};

/// An event tau raises in extensions, by its `type`.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
#[schemars(rename = "ExtensionEvent")]
pub enum ExtensionEvent<'a> {
    /// Asked before anything of the project starts (`trusted` in [`ProjectTrustResult`]).
    ProjectTrust { cwd: &'a str },
    /// A session began: at start-up, or after a replacement or a reload.
    SessionStart {
        reason: &'a str,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        previous_session_file: Option<&'a str>,
    },
    /// The session is about to end or be replaced.
    SessionShutdown {
        reason: &'a str,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        target_session_file: Option<&'a str>,
    },
    /// Before `new_session` or `switch_session`; a `cancel` stops it ([`CancelResult`]).
    SessionBeforeSwitch {
        reason: &'a str,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        target_session_file: Option<&'a str>,
    },
    /// Before `fork`, `branch` or `clone`; a `cancel` stops it ([`CancelResult`]).
    SessionBeforeFork {
        entry_id: &'a str,
        /// `before` the entry (fork, branch) or `at` it (clone).
        position: &'a str,
    },
    /// Before a compaction ([`SessionBeforeCompactResult`]).
    SessionBeforeCompact {
        preparation: CompactPreparation<'a>,
        /// The entries of the branch being compacted, as in the session file.
        branch_entries: &'a Value,
        reason: &'a str,
        will_retry: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        custom_instructions: Option<&'a str>,
    },
    /// A compaction was written.
    SessionCompact {
        compaction_entry: Option<Value>,
        from_extension: bool,
        reason: &'a str,
        will_retry: bool,
        result: &'a Value,
    },
    /// Before moving the leaf (`navigate_tree`) ([`SessionBeforeTreeResult`]).
    SessionBeforeTree { preparation: TreePreparation<'a> },
    /// The leaf moved.
    SessionTree {
        new_leaf_id: Option<&'a str>,
        old_leaf_id: Option<&'a str>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        summary_entry: Option<&'a Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from_extension: Option<bool>,
    },
    /// A prompt arrived ([`InputResult`]).
    Input {
        text: &'a str,
        #[serde(default, skip_serializing_if = "<[_]>::is_empty")]
        images: &'a [ImageContent],
        /// `rpc` or `extension`.
        source: &'a str,
        /// Set only while a run streams: `steer` or `followUp`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        streaming_behavior: Option<&'a str>,
    },
    /// A run is about to start ([`BeforeAgentStartResult`]).
    BeforeAgentStart {
        prompt: &'a str,
        #[serde(default, skip_serializing_if = "<[_]>::is_empty")]
        images: &'a [ImageContent],
        system_prompt: &'a str,
    },
    /// Before a model call: the messages it will see ([`ContextResult`]).
    Context { messages: Vec<&'a AgentMessage> },
    /// The request body a provider is about to send ([`BeforeProviderRequestResult`]).
    BeforeProviderRequest { payload: Value },
    /// The provider answered (status and headers; observation only).
    AfterProviderResponse {
        status: u16,
        headers: Map<String, Value>,
    },
    /// A validated tool call is about to run ([`ToolCallResult`]).
    ToolCall {
        tool_call_id: &'a str,
        tool_name: &'a str,
        input: &'a Map<String, Value>,
    },
    /// A tool finished ([`ToolResultPatch`]).
    ToolResult {
        tool_call_id: &'a str,
        tool_name: &'a str,
        input: &'a Map<String, Value>,
        content: &'a [UserContentBlock],
        details: Option<&'a Value>,
        is_error: bool,
    },
    /// A message is complete ([`MessageEndResult`]); `message` is the message as it stands
    /// after the previous handlers.
    MessageEnd { message: &'a Value },
    /// Where the extensions' skills and prompt templates are ([`ResourcesDiscoverResult`]).
    ResourcesDiscover { cwd: &'a str, reason: &'a str },
    /// The model changed (`set_model`, `cycle_model`, an extension, a restore).
    ModelSelect {
        model: Option<&'a Model>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        previous_model: Option<&'a Model>,
        source: &'a str,
    },
    /// The thinking level changed.
    ThinkingLevelSelect {
        level: ThinkingLevel,
        previous_level: ThinkingLevel,
    },
}

impl ExtensionEvent<'_> {
    /// The event as the JSON value the `event` frame carries (handlers' results are folded
    /// into it in place, as pi chains them).
    pub fn to_value(&self) -> Value {
        // Serialising a value built from protocol types cannot fail: no map has non-string
        // keys and no type has a failing `Serialize`.
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// `session_before_compact`'s `preparation`.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CompactPreparation<'a> {
    pub first_kept_entry_id: &'a str,
    pub messages_to_summarize: &'a Value,
    pub turn_prefix_messages: &'a Value,
    pub is_split_turn: bool,
    pub tokens_before: u64,
    pub previous_summary: Option<&'a str>,
    pub file_ops: FileOps<'a>,
}

/// The files a compacted span read and changed.
#[derive(Debug, Serialize, JsonSchema)]
pub struct FileOps<'a> {
    pub read: &'a [String],
    pub written: &'a [String],
    /// Always empty: tau counts edits as writes.
    pub edited: [String; 0],
}

/// `session_before_tree`'s `preparation`.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TreePreparation<'a> {
    pub target_id: &'a str,
    pub old_leaf_id: Option<&'a str>,
    pub common_ancestor_id: Option<&'a str>,
    pub entries_to_summarize: &'a Value,
    pub user_wants_summary: bool,
    pub custom_instructions: Option<&'a str>,
    pub replace_instructions: bool,
    pub label: Option<&'a str>,
}

/// Reads a handler's result; one that does not have the expected shape has no effect.
pub fn read_result<T: for<'de> Deserialize<'de> + Default>(result: &Value) -> T {
    T::deserialize(result).unwrap_or_default()
}

/// [`read_result`] of a result the caller owns: its values are moved, not copied.
pub fn take_result<T: for<'de> Deserialize<'de> + Default>(result: Value) -> T {
    T::deserialize(result).unwrap_or_default()
}

/// A field whose presence matters even when it is `null` (`details: null` clears them).
fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}

/// `project_trust`: the first `yes` or `no` decides.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct ProjectTrustResult {
    /// `yes`, `no`, or anything else to leave the decision to the next handler.
    pub trusted: Option<String>,
    /// Remember the answer for this folder (`trust.json`).
    pub remember: Option<bool>,
}

/// `session_before_switch` and `session_before_fork`: the first `cancel` stops the change.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct CancelResult {
    pub cancel: Option<bool>,
}

/// `session_before_compact`: cancel, or supply the compaction.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct SessionBeforeCompactResult {
    pub cancel: Option<bool>,
    pub compaction: Option<SuppliedCompaction>,
}

/// A compaction an extension wrote itself.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SuppliedCompaction {
    pub summary: String,
    pub first_kept_entry_id: Option<String>,
    pub tokens_before: Option<u64>,
    pub details: Option<Value>,
}

/// `session_before_tree`: cancel, supply the branch summary, or change how it is asked for.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionBeforeTreeResult {
    pub cancel: Option<bool>,
    /// `{summary, details?}`, read by the session.
    pub summary: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub custom_instructions: Option<Value>,
    pub replace_instructions: Option<bool>,
    #[serde(default, deserialize_with = "present")]
    pub label: Option<Value>,
}

/// What an `input` handler decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum InputAction {
    Continue,
    Transform,
    Handled,
}

/// `input`: transforms chain, the first `handled` ends it.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct InputResult {
    pub action: Option<InputAction>,
    pub text: Option<String>,
    pub images: Option<Vec<ImageContent>>,
}

/// `before_agent_start`: messages placed after the prompt, and the run's system prompt.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BeforeAgentStartResult {
    /// One custom message (`{customType, content, display?, details?}`).
    pub message: Option<Value>,
    /// Every message, when one extension's handlers returned several.
    pub messages: Option<Vec<Value>>,
    pub system_prompt: Option<String>,
}

/// `context`: the messages the model sees instead.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct ContextResult {
    pub messages: Option<Vec<Value>>,
}

/// `before_provider_request`: the body sent instead.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct BeforeProviderRequestResult {
    pub payload: Option<Value>,
}

/// `tool_call`: block the call (with a reason), or edit its input.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct ToolCallResult {
    pub block: Option<bool>,
    pub reason: Option<String>,
    pub input: Option<Map<String, Value>>,
}

/// `tool_result`: a partial patch of the result.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolResultPatch {
    pub content: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub details: Option<Value>,
    pub is_error: Option<bool>,
}

/// `message_end`: the message replaced (the same role).
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct MessageEndResult {
    pub message: Option<Value>,
}

/// `resources_discover`: more skill and prompt-template paths.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourcesDiscoverResult {
    #[serde(default)]
    pub skill_paths: Vec<String>,
    #[serde(default)]
    pub prompt_paths: Vec<String>,
    /// Read for completeness: tau has no themes of its own to load them into.
    #[serde(default)]
    pub theme_paths: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn events_are_written_with_the_names_pi_gives_them() {
        let input = Map::new();
        let event = ExtensionEvent::ToolCall {
            tool_call_id: "c1",
            tool_name: "bash",
            input: &input,
        };
        assert_eq!(
            event.to_value(),
            json!({"type": "tool_call", "toolCallId": "c1", "toolName": "bash", "input": {}})
        );
        let event = ExtensionEvent::Input {
            text: "hi",
            images: &[],
            source: "rpc",
            streaming_behavior: Some("followUp"),
        };
        assert_eq!(
            event.to_value(),
            json!({"type": "input", "text": "hi", "source": "rpc", "streamingBehavior": "followUp"})
        );
        let event = ExtensionEvent::SessionStart {
            reason: "startup",
            previous_session_file: None,
        };
        assert_eq!(
            event.to_value(),
            json!({"type": "session_start", "reason": "startup"})
        );
    }

    #[test]
    fn a_result_of_the_wrong_shape_has_no_effect() {
        let result: InputResult = read_result(&json!({"action": "transform", "text": "new"}));
        assert_eq!(result.action, Some(InputAction::Transform));
        assert_eq!(result.text.as_deref(), Some("new"));
        let result: InputResult = read_result(&json!({"action": "transform", "text": 5}));
        assert_eq!(result.action, None);
        let result: InputResult = read_result(&Value::Null);
        assert_eq!(result.text, None);
    }

    #[test]
    fn a_null_details_patch_is_kept_apart_from_no_patch() {
        let patch: ToolResultPatch = read_result(&json!({"details": null}));
        assert_eq!(patch.details, Some(Value::Null));
        let patch: ToolResultPatch = read_result(&json!({"isError": true}));
        assert_eq!(patch.details, None);
        assert_eq!(patch.is_error, Some(true));
    }
}
