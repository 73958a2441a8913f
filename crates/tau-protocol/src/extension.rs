//! The extension protocol (`docs/extensions.md`): the frames tau and an extension process
//! exchange over the process's stdin and stdout. A second wire next to RPC mode's, owned here
//! for the same reason: one place says what crosses it.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::rpc::UiMethod;

/// The protocol version tau speaks.
pub const PROTOCOL_VERSION: u32 = 1;

/// A frame tau writes to an extension process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum ToExtension {
    Initialize {
        id: String,
        protocol: u32,
        tau: String,
        cwd: String,
        agent_dir: String,
        mode: String,
        #[serde(rename = "hasUI")]
        has_ui: bool,
        extensions: Vec<String>,
        state: Value,
    },
    /// New instances after a session replacement or a reload (docs/extensions.md §2.4).
    Reinitialize {
        id: String,
        reason: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        state: Option<FrameState>,
    },
    Flags {
        extension: String,
        values: Map<String, Value>,
    },
    Event {
        /// Absent when tau does not wait for the answer (docs/extensions.md §2.1): no
        /// response is sent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        extension: String,
        event: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        state: Option<FrameState>,
    },
    ExecuteTool {
        id: String,
        extension: String,
        tool_call_id: String,
        tool_name: String,
        params: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        state: Option<FrameState>,
    },
    PrepareArguments {
        id: String,
        extension: String,
        tool_name: String,
        arguments: Value,
    },
    RunCommand {
        id: String,
        extension: String,
        name: String,
        args: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        state: Option<FrameState>,
    },
    /// A key an extension registered with `registerShortcut` was pressed (the interactive
    /// session, or RPC `run_shortcut`): its handler runs with an `ExtensionContext`.
    RunShortcut {
        id: String,
        extension: String,
        shortcut: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        state: Option<FrameState>,
    },
    Cancel {
        id: String,
    },
    UiResponse {
        id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        value: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        confirmed: Option<bool>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cancelled: Option<bool>,
    },
    Response(Reply),
    Shutdown,
}

/// The `state` a frame carries (docs/extensions.md §5), held as its JSON text. The model
/// catalog, most of the first frame's bytes, is serialised once from the models themselves
/// and spliced in as text: built as a tree of values it cost more than the rest of the frame
/// on the way to the first answer (an allocation and a hash per key, twice).
#[derive(Debug, Clone, Serialize)]
#[serde(transparent)]
pub struct FrameState(Box<RawValue>);

impl FrameState {
    /// `fields` in their order, then `allModels` (the catalog's JSON text) when given: the
    /// catalog ends the frame, so the Node host can cut it off unparsed.
    pub fn new(
        fields: &Map<String, Value>,
        catalog: Option<&RawValue>,
    ) -> serde_json::Result<Self> {
        #[derive(Serialize)]
        struct Parts<'a> {
            #[serde(flatten)]
            fields: &'a Map<String, Value>,
            #[serde(rename = "allModels", skip_serializing_if = "Option::is_none")]
            catalog: Option<&'a RawValue>,
        }
        serde_json::value::to_raw_value(&Parts { fields, catalog }).map(FrameState)
    }

    /// The JSON text.
    pub fn get(&self) -> &str {
        self.0.get()
    }
}

impl PartialEq for FrameState {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

impl<'de> Deserialize<'de> for FrameState {
    // Through a value: a raw value cannot be read from inside an internally tagged frame,
    // whose fields serde buffers first.
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        serde_json::value::to_raw_value(&value)
            .map(FrameState)
            .map_err(serde::de::Error::custom)
    }
}

/// The answer to a request, in either direction: `result` or `error`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A frame an extension process writes to tau.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum FromExtension {
    Response(Reply),
    ToolUpdate {
        id: String,
        partial_result: Value,
    },
    UiRequest(UiRequestFrame),
    UiCancel {
        id: String,
    },
    Action(ActionFrame),
    Register(RegisterFrame),
    ExtensionError {
        extension: String,
        event: String,
        error: String,
    },
}

/// `ui_request`: a dialog or a display update, in RPC mode's own method shapes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(rename = "ExtensionUiRequestFrame")]
pub struct UiRequestFrame {
    pub id: String,
    pub extension: String,
    #[serde(flatten)]
    pub method: UiMethod,
}

/// `action`: a `pi.*` or `ctx.*` call that changes tau's state. The action's own fields stay
/// a map until the action is known.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActionFrame {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub extension: String,
    pub action: String,
    #[serde(flatten)]
    pub fields: Map<String, Value>,
}

impl ActionFrame {
    /// What the frame asks, typed; an unknown action or a field of the wrong shape is an
    /// error naming the action.
    pub fn parse(&self) -> Result<ExtensionAction, String> {
        let mut object = self.fields.clone();
        object.insert("action".into(), Value::String(self.action.clone()));
        ExtensionAction::deserialize(Value::Object(object))
            .map_err(|err| format!("{}: {err}", self.action))
    }
}

/// What an `action` frame asks of tau (docs/extensions.md §4), by its `action` name: the
/// `pi.*` and `ctx.*` calls that change tau's state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(
    tag = "action",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum ExtensionAction {
    /// `pi.setSessionName`.
    SetSessionName { name: String },
    /// `pi.appendEntry`; `entryId` is the id the process chose for it.
    AppendEntry {
        custom_type: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        data: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        entry_id: Option<String>,
    },
    /// `pi.setLabel` (no label clears it).
    SetLabel {
        entry_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        label: Option<String>,
    },
    /// `pi.setThinkingLevel`.
    SetThinkingLevel { level: crate::ThinkingLevel },
    /// `pi.setModel`: answered `true` when the model was selected.
    SetModel { provider: String, model_id: String },
    /// `pi.sendUserMessage`: a string or text and image blocks.
    SendUserMessage {
        content: crate::UserContent,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        deliver_as: Option<String>,
    },
    /// `pi.sendMessage`: a custom message (`customType`, `content`, `display`, `details`).
    SendMessage {
        message: Value,
        #[serde(default)]
        trigger_turn: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        deliver_as: Option<String>,
    },
    /// `pi.setActiveTools`.
    SetActiveTools { names: Vec<String> },
    /// `ctx.abort()`.
    Abort,
    /// `ctx.compact()`.
    Compact {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        custom_instructions: Option<String>,
    },
    /// `ctx.newSession()` (a command context's).
    NewSession {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent_session: Option<String>,
    },
    /// `ctx.switchSession()`.
    SwitchSession { session_path: String },
    /// `ctx.fork()`: from `entryId`, or a clone of the branch with `position: "at"`.
    Fork {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        entry_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        position: Option<String>,
    },
    /// `ctx.navigateTree()`.
    NavigateTree {
        target_id: String,
        #[serde(default)]
        summarize: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        custom_instructions: Option<String>,
        #[serde(default)]
        replace_instructions: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        label: Option<String>,
    },
    /// `pi.registerProvider` (its data members).
    RegisterProvider { name: String, config: Value },
    /// `pi.unregisterProvider`.
    UnregisterProvider { name: String },
    /// A write to a model object the process handed out (`name`, `reasoning`,
    /// `contextWindow`, `maxTokens`).
    UpdateModel {
        provider: String,
        model_id: String,
        patch: Map<String, Value>,
    },
    /// `ctx.reload()`.
    Reload,
    /// `ctx.shutdown()`.
    Shutdown,
    /// The whole mirror, entries included.
    GetState,
    /// `ctx.waitForIdle()`.
    WaitForIdle,
}

/// `register`: registrations made after `initialize`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegisterFrame {
    pub extension: String,
    #[serde(flatten)]
    pub manifest: Manifest,
}

/// What an extension registered.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    #[serde(default)]
    pub tools: Vec<ToolRegistration>,
    #[serde(default)]
    pub commands: Vec<CommandRegistration>,
    #[serde(default)]
    pub flags: Vec<FlagRegistration>,
    #[serde(default)]
    pub events: Vec<String>,
    #[serde(default)]
    pub shortcuts: Vec<String>,
    /// `registerProvider` calls made during the factory, as data (ext §2.5).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub providers: Vec<ProviderRegistration>,
}

/// A provider an extension registered: its name and the data members of its config, the shape
/// of a `models.json` provider entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProviderRegistration {
    pub name: String,
    pub config: Value,
}

/// A tool an extension registered (ext §5.1, without the functions).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolRegistration {
    pub name: String,
    #[serde(default)]
    pub label: Option<String>,
    #[serde(default)]
    pub description: String,
    #[serde(default = "empty_object")]
    pub parameters: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_snippet: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_guidelines: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution_mode: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub prepare_arguments: bool,
}

fn empty_object() -> Value {
    Value::Object(Map::new())
}

/// A slash command an extension registered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommandRegistration {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// A CLI flag an extension registered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlagRegistration {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: FlagKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FlagKind {
    Boolean,
    String,
}

/// One entry of the `initialize` answer: a manifest, or why the entry did not load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadOutcome {
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest: Option<Manifest>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The `initialize` answer.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Initialized {
    #[serde(default)]
    pub extensions: Vec<LoadOutcome>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_frame_state_ends_with_the_catalog_as_given() {
        let mut fields = Map::new();
        fields.insert("version".into(), json!(1));
        fields.insert("model".into(), json!({"id": "m"}));
        let catalog = RawValue::from_string(r#"[{"id":"a"}, {"id":"b"}]"#.into())
            .unwrap_or_else(|e| panic!("{e}"));
        let state = FrameState::new(&fields, Some(&catalog)).unwrap_or_else(|e| panic!("{e}"));
        // The catalog's text is kept as it was written, spaces and all.
        assert_eq!(
            state.get(),
            r#"{"version":1,"model":{"id":"m"},"allModels":[{"id":"a"}, {"id":"b"}]}"#
        );
        let frame = ToExtension::Event {
            id: Some("t2".into()),
            extension: "/x.ts".into(),
            event: json!({"type": "session_start"}),
            state: Some(state.clone()),
        };
        let line = serde_json::to_string(&frame).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            line.ends_with(r#""allModels":[{"id":"a"}, {"id":"b"}]}}"#),
            "{line}"
        );
        let read: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read["state"]["allModels"][1]["id"], "b");
        let alone: Value = serde_json::from_str(state.get()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(alone, read["state"]);
        let without = FrameState::new(&fields, None).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(without.get(), r#"{"version":1,"model":{"id":"m"}}"#);
        assert_ne!(without, state);
        let only = FrameState::new(&Map::new(), Some(&catalog)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(only.get(), r#"{"allModels":[{"id":"a"}, {"id":"b"}]}"#);
    }

    #[test]
    fn a_frame_state_reads_back_from_inside_a_frame() {
        let frame: ToExtension = serde_json::from_str(
            r#"{"type":"run_command","id":"1","extension":"/x.ts","name":"n","args":"",
                "state":{"version":2,"allModels":[]}}"#,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let ToExtension::RunCommand { state, .. } = frame else {
            panic!("{frame:?}");
        };
        assert_eq!(
            state.map(|s| s.get().to_string()).as_deref(),
            Some(r#"{"version":2,"allModels":[]}"#)
        );
    }

    #[test]
    fn frames_read_as_the_document_writes_them() {
        let frame: FromExtension = serde_json::from_value(json!({
            "type": "ui_request", "id": "3", "extension": "/x.py",
            "method": "confirm", "title": "Run?", "message": "rm -rf", "timeout": 500
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        let FromExtension::UiRequest(request) = frame else {
            panic!("not a ui_request");
        };
        assert_eq!(
            request.method,
            UiMethod::Confirm {
                title: "Run?".into(),
                message: "rm -rf".into(),
                timeout: Some(500)
            }
        );
        let frame: FromExtension = serde_json::from_value(json!({
            "type": "action", "id": "4", "extension": "/x.py",
            "action": "append_entry", "customType": "state", "data": {"n": 1}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        let FromExtension::Action(action) = frame else {
            panic!("not an action");
        };
        assert_eq!(action.action, "append_entry");
        assert_eq!(action.fields["customType"], "state");
    }

    #[test]
    fn requests_write_camel_case_fields() {
        let frame = ToExtension::ExecuteTool {
            id: "1".into(),
            extension: "/x.py".into(),
            tool_call_id: "c1".into(),
            tool_name: "shout".into(),
            params: json!({"text": "hi"}),
            state: None,
        };
        assert_eq!(
            serde_json::to_value(&frame).unwrap_or_default(),
            json!({"type": "execute_tool", "id": "1", "extension": "/x.py",
                   "toolCallId": "c1", "toolName": "shout", "params": {"text": "hi"}})
        );
        let reply = ToExtension::Response(Reply {
            id: "9".into(),
            result: Some(json!({"id": "e1"})),
            error: None,
        });
        assert_eq!(
            serde_json::to_value(&reply).unwrap_or_default(),
            json!({"type": "response", "id": "9", "result": {"id": "e1"}})
        );
    }

    fn action(frame: Value) -> Result<ExtensionAction, String> {
        serde_json::from_value::<FromExtension>(frame)
            .map_err(|e| e.to_string())
            .and_then(|frame| match frame {
                FromExtension::Action(action) => action.parse(),
                other => Err(format!("not an action: {other:?}")),
            })
    }

    #[test]
    fn action_frames_parse_into_their_typed_action() {
        assert_eq!(
            action(json!({"type": "action", "id": "h1", "extension": "/x.ts",
                "action": "append_entry", "customType": "mark", "data": {"n": 1},
                "entryId": "a1b2c3d4"})),
            Ok(ExtensionAction::AppendEntry {
                custom_type: "mark".into(),
                data: Some(json!({"n": 1})),
                entry_id: Some("a1b2c3d4".into()),
            })
        );
        assert_eq!(
            action(
                json!({"type": "action", "extension": "/x.ts", "action": "send_message",
                "message": {"customType": "note", "content": "hi"}})
            ),
            Ok(ExtensionAction::SendMessage {
                message: json!({"customType": "note", "content": "hi"}),
                trigger_turn: false,
                deliver_as: None,
            })
        );
        assert_eq!(
            action(json!({"type": "action", "extension": "/x.ts", "action": "shutdown"})),
            Ok(ExtensionAction::Shutdown)
        );
    }

    #[test]
    fn a_malformed_or_unknown_action_is_an_error_naming_it() {
        let missing = action(json!({"type": "action", "extension": "/x.ts",
            "action": "set_label"}));
        assert!(
            matches!(&missing, Err(e) if e.starts_with("set_label: ") && e.contains("entryId")),
            "{missing:?}"
        );
        let level = action(json!({"type": "action", "extension": "/x.ts",
            "action": "set_thinking_level", "level": "loud"}));
        assert!(matches!(&level, Err(e) if e.starts_with("set_thinking_level: ")));
        let unknown = action(json!({"type": "action", "extension": "/x.ts", "action": "fly"}));
        assert!(
            matches!(&unknown, Err(e) if e.starts_with("fly: ")),
            "{unknown:?}"
        );
    }
}
