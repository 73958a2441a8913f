//! The session's side of its extensions: the loaded set, the mirror of the session they read
//! (`extension_state.rs`), the actions that need only the session's record and output, the
//! custom messages held for the next turn, and the events that tell them what the session
//! changed. Kept apart from the session so that what extensions see of it has one owner; the
//! session hands it the values only it can compute (tools, system prompt, model).

use std::sync::Arc;
use tau_protocol::extension_event::ExtensionEvent;

use serde_json::value::RawValue;
use serde_json::{Map, Value, json};
use tau_extensions::Extensions;
use tau_protocol::extension::ExtensionAction;
use tau_protocol::{AgentMessage, Model, ThinkingLevel};

use crate::EventSink;
use crate::conversation::Conversation;
use crate::extension_actions::ImmediateActions;
use crate::extension_state::ExtensionState;

/// Whether `action` only writes the model registry. Such writes come in bursts (an extension
/// capping every model's context window writes hundreds without awaiting them), and the
/// mirror's keys hold the whole model list: refreshing the mirror after each write makes a
/// burst quadratic (seconds for the 500 models of the catalog). Front-ends carry a burst out
/// whole and refresh the mirror once after it, and before any other action.
pub fn writes_only_the_registry(action: &ExtensionAction) -> bool {
    matches!(
        action,
        ExtensionAction::UpdateModel { .. }
            | ExtensionAction::RegisterProvider { .. }
            | ExtensionAction::UnregisterProvider { .. }
    )
}

/// The keys of the mirror only the session knows, as of the last command.
#[derive(Debug)]
pub(crate) struct SessionKeys<'a> {
    pub model: Option<&'a Model>,
    pub thinking_level: ThinkingLevel,
    pub active_tools: Vec<String>,
    /// `(name, description, parameters)` of every tool a run could offer.
    pub all_tools: Vec<(String, String, Value)>,
    pub system_prompt: String,
    pub commands: Vec<Value>,
    pub available_models: Vec<Model>,
}

impl SessionKeys<'_> {
    /// The keys as the mirror holds them.
    fn into_map(self) -> Map<String, Value> {
        let mut keys = Map::new();
        keys.insert(
            "model".into(),
            self.model
                .and_then(|m| serde_json::to_value(m).ok())
                .unwrap_or(Value::Null),
        );
        keys.insert(
            "thinkingLevel".into(),
            serde_json::to_value(self.thinking_level).unwrap_or_default(),
        );
        keys.insert("activeTools".into(), self.active_tools.into());
        keys.insert(
            "allTools".into(),
            self.all_tools
                .into_iter()
                .map(|(name, description, parameters)| {
                    json!({"name": name, "description": description, "parameters": parameters})
                })
                .collect(),
        );
        keys.insert("systemPrompt".into(), self.system_prompt.into());
        keys.insert("commands".into(), self.commands.into());
        keys.insert(
            "availableModels".into(),
            serde_json::to_value(self.available_models).unwrap_or_default(),
        );
        // Read by the state source to compute `contextUsage` when a frame leaves.
        keys.insert(
            "contextWindow".into(),
            self.model.map_or(0, |m| m.context_window).into(),
        );
        keys
    }
}

/// The loaded extensions (none without `-e` or discovered entries) and what binds them to
/// this session.
#[derive(Debug)]
pub struct ExtensionBinding {
    conversation: Arc<Conversation>,
    events: EventSink,
    extensions: Option<Arc<Extensions>>,
    /// What the extensions mirror of this session.
    state: Option<Arc<ExtensionState>>,
    /// Custom messages sent with `deliverAs: "nextTurn"`, waiting for the next prompt.
    next_turn: Vec<AgentMessage>,
}

impl ExtensionBinding {
    pub(crate) fn new(conversation: Arc<Conversation>, events: EventSink) -> Self {
        Self {
            conversation,
            events,
            extensions: None,
            state: None,
            next_turn: Vec::new(),
        }
    }

    /// The loaded extensions.
    pub fn extensions(&self) -> Option<&Arc<Extensions>> {
        self.extensions.as_ref()
    }

    /// The extension command a prompt invokes (`/name args`, ext §6.1), with its arguments,
    /// if any: every front-end runs such a prompt as the command, not as a message.
    pub fn command_for(&self, text: &str) -> Option<(tau_extensions::CommandInfo, String)> {
        let rest = text.strip_prefix('/')?;
        let (name, args) = rest.split_once(' ').unwrap_or((rest, ""));
        let command = self
            .extensions()?
            .commands()
            .into_iter()
            .find(|c| c.name == name)?;
        Some((command, args.to_string()))
    }

    /// Attaches the loaded extensions: they read the mirror and carry out the session-only
    /// actions where their frames arrive. The session fills the mirror's keys next.
    pub(crate) fn bind(
        &mut self,
        extensions: Arc<Extensions>,
        catalog: Option<Box<RawValue>>,
        trusted: bool,
    ) {
        let state = self.mirror(catalog, trusted);
        extensions.set_state_source(state as Arc<dyn tau_extensions::StateSource>);
        extensions.set_action_applier(Arc::new(self.immediate_actions()));
        self.extensions = Some(extensions);
    }

    /// Starts the mirror (`catalog`, `allModels`, is the whole catalog as JSON text: large,
    /// and it does not change while tau runs, so it is sent once).
    fn mirror(
        &mut self,
        catalog: Option<Box<RawValue>>,
        project_trusted: bool,
    ) -> Arc<ExtensionState> {
        let state = Arc::new(ExtensionState {
            conversation: Arc::clone(&self.conversation),
            session_keys: std::sync::Mutex::default(),
            catalog,
            project_trusted,
            context_usage: std::sync::Mutex::default(),
        });
        self.state = Some(Arc::clone(&state));
        state
    }

    /// Whether there is a mirror to keep up to date (computing its keys is not free).
    pub(crate) fn mirrors(&self) -> bool {
        self.state.is_some()
    }

    /// Replaces the session's keys in the mirror.
    pub(crate) fn refresh(&self, keys: SessionKeys<'_>) {
        let Some(state) = &self.state else {
            return;
        };
        let keys = keys.into_map();
        if let Ok(mut current) = state.session_keys.lock() {
            *current = keys;
        }
    }

    fn immediate_actions(&self) -> ImmediateActions {
        ImmediateActions {
            conversation: Arc::clone(&self.conversation),
            events: self.events.clone(),
        }
    }

    /// Carries out an extension action that needs only the session's record and output (as
    /// the extensions' reader does where the frame arrives); `None` for the others.
    pub async fn apply_session_action(
        &self,
        action: &ExtensionAction,
    ) -> Option<Result<Value, String>> {
        self.immediate_actions().carry_out(action).await
    }

    /// The whole mirror as extensions see it (the `get_state` action), entries included.
    pub fn snapshot(&self) -> Value {
        use tau_extensions::StateSource;
        let Some(state) = &self.state else {
            return Value::Null;
        };
        let mut fields = state.fields();
        fields.extend(state.constant_fields());
        // Parsed for this rare action only (an extension asking for the whole mirror).
        if let Some(catalog) = state.catalog() {
            let all_models = serde_json::from_str(catalog.get()).unwrap_or(Value::Null);
            fields.insert("allModels".into(), all_models);
        }
        let session_id = self.conversation.session_id();
        let since = state.entries_since(0, &session_id).unwrap_or_default();
        fields.insert(
            "leafId".into(),
            since.leaf_id.map_or(Value::Null, Value::String),
        );
        fields.insert(
            "entries".into(),
            json!({"reset": true, "append": since.appended}),
        );
        Value::Object(fields)
    }

    /// `deliverAs: "nextTurn"`: goes out with the next prompt.
    pub(crate) fn hold_for_next_turn(&mut self, message: AgentMessage) {
        self.next_turn.push(message);
    }

    /// The messages held for this turn, in the order they were sent.
    pub(crate) fn take_next_turn(&mut self) -> Vec<AgentMessage> {
        std::mem::take(&mut self.next_turn)
    }

    /// The provider hooks a run's requests go through, when an extension listens to them.
    pub(crate) fn provider_hooks(&self) -> Option<Arc<dyn tau_ai::provider::RequestHooks>> {
        self.extensions
            .as_ref()
            .filter(|e| {
                e.subscribed("before_provider_request") || e.subscribed("after_provider_response")
            })
            .map(|extensions| {
                Arc::new(crate::extension_hooks::ProviderHooks {
                    extensions: Arc::clone(extensions),
                }) as Arc<dyn tau_ai::provider::RequestHooks>
            })
    }

    /// Tells the extensions what a model or level change did (ext §3.2):
    /// `thinking_level_select` (not awaited, as in pi) before `model_select`.
    pub(crate) async fn announce_choice(
        &self,
        before: (Option<Model>, ThinkingLevel),
        now: (Option<&Model>, ThinkingLevel),
        source: &str,
    ) {
        let Some(extensions) = &self.extensions else {
            return;
        };
        let (previous_model, previous_level) = before;
        let (model, level) = now;
        if level != previous_level && extensions.subscribed("thinking_level_select") {
            let event = ExtensionEvent::ThinkingLevelSelect {
                level,
                previous_level,
            };
            extensions.emit_detached(
                "thinking_level_select",
                &serde_json::to_string(&event).unwrap_or_default(),
            );
        }
        if model_changed(model, previous_model.as_ref()) && extensions.subscribed("model_select") {
            let event = ExtensionEvent::ModelSelect {
                model,
                previous_model: previous_model.as_ref(),
                source,
            };
            crate::extension_hooks::notify(extensions, event.to_value()).await;
        }
    }
}

/// A different model than before (by provider and id); none now is no change.
fn model_changed(now: Option<&Model>, was: Option<&Model>) -> bool {
    match (now, was) {
        (Some(now), Some(was)) => now.provider != was.provider || now.id != was.id,
        (Some(_), None) => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::SessionStore;

    fn binding() -> ExtensionBinding {
        let (tx, _rx) = tokio::sync::mpsc::channel(64);
        let conversation = Arc::new(Conversation::new(SessionStore::in_memory(
            std::path::Path::new("/tmp"),
        )));
        ExtensionBinding::new(conversation, EventSink::new(tx))
    }

    fn keys(model: Option<&Model>) -> SessionKeys<'_> {
        SessionKeys {
            model,
            thinking_level: ThinkingLevel::High,
            active_tools: vec!["read".into()],
            all_tools: vec![(
                "read".into(),
                "Read a file".into(),
                json!({"type": "object"}),
            )],
            system_prompt: "You are tau.".into(),
            commands: vec![json!({"name": "review"})],
            available_models: Vec::new(),
        }
    }

    #[test]
    fn without_extensions_there_is_no_mirror() {
        let binding = binding();
        assert!(binding.extensions().is_none() && !binding.mirrors());
        binding.refresh(keys(None));
        assert_eq!(binding.snapshot(), Value::Null);
    }

    #[tokio::test]
    async fn the_snapshot_holds_the_session_keys_and_every_entry() {
        let mut binding = binding();
        let catalog = RawValue::from_string(r#"[{"id":"m"}]"#.into()).ok();
        binding.mirror(catalog, true);
        binding.refresh(keys(None));
        let appended = binding
            .apply_session_action(&ExtensionAction::AppendEntry {
                custom_type: "mark".into(),
                data: Some(json!({"n": 1})),
                entry_id: None,
            })
            .await;
        let id = appended.and_then(Result::ok).unwrap_or_default()["id"].clone();
        assert!(id.is_string(), "{id}");
        let snapshot = binding.snapshot();
        assert_eq!(snapshot["thinkingLevel"], "high");
        assert_eq!(snapshot["activeTools"], json!(["read"]));
        assert_eq!(snapshot["allTools"][0]["description"], "Read a file");
        assert_eq!(snapshot["systemPrompt"], "You are tau.");
        assert_eq!(snapshot["projectTrusted"], true);
        // The catalog, kept as text for the frames, is a value again in the snapshot.
        assert_eq!(snapshot["allModels"], json!([{"id": "m"}]));
        assert_eq!(snapshot["contextUsage"], Value::Null, "no model, no window");
        assert_eq!(snapshot["entries"]["reset"], true);
        assert_eq!(snapshot["entries"]["append"][0]["id"], id);
        assert_eq!(snapshot["leafId"], id);
    }

    #[tokio::test]
    async fn actions_for_the_rest_of_the_session_are_left_alone() {
        let binding = binding();
        assert!(
            binding
                .apply_session_action(&ExtensionAction::Abort)
                .await
                .is_none()
        );
    }

    #[test]
    fn next_turn_messages_go_out_once_in_order() {
        let mut binding = binding();
        binding.hold_for_next_turn(crate::conversation::user_message("one", Vec::new()));
        binding.hold_for_next_turn(crate::conversation::user_message("two", Vec::new()));
        let texts: Vec<String> = binding
            .take_next_turn()
            .iter()
            .map(|m| match m {
                AgentMessage::User(u) => u.content.text(""),
                _ => String::new(),
            })
            .collect();
        assert_eq!(texts, ["one", "two"]);
        assert!(binding.take_next_turn().is_empty());
    }

    #[test]
    fn a_model_counts_as_changed_by_provider_and_id() {
        let model = |provider: &str, id: &str| {
            serde_json::from_value::<Model>(
                json!({"id": id, "name": id, "api": "openai-completions",
                "provider": provider, "baseUrl": "http://x", "reasoning": false, "input": ["text"],
                "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                "contextWindow": 1000, "maxTokens": 100}),
            )
            .ok()
        };
        let (a, b) = (model("p", "a"), model("p", "b"));
        assert!(a.is_some(), "the test model parses");
        assert!(!model_changed(a.as_ref(), a.as_ref()));
        assert!(model_changed(b.as_ref(), a.as_ref()));
        assert!(model_changed(a.as_ref(), None));
        assert!(!model_changed(None, a.as_ref()));
    }
}
