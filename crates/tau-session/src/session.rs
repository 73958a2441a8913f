//! [`AgentSession`]: one conversation, its settings and model, and the runs that stream in it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use tau_protocol::{SessionEvent, TodoPhase};

use tau_agent::RunSpec;
use tau_ai::provider::{HttpClient, StreamOptions};
use tau_ai::registry::Registry;
use tau_protocol::{
    AgentMessage, ImageContent, InterruptMode, Model, QueueMode, TextContent, ThinkingLevel,
    UserContent, UserContentBlock, UserMessage,
};

use crate::conversation::{Conversation, Queued};
use crate::store::SessionStore;
use crate::{
    BUILTIN_TOOL_NAMES, EventSink, HostToolDefinition, HostToolError, HostToolRegistry, Settings,
    StartupModel,
};

mod bash;
mod compact;
mod files;
mod input;
mod runs;
mod tree;
pub use bash::BashRun;
pub use compact::CompactDone;
pub use files::SessionStats;
pub use input::{Admitted, InputSource, Submitted};
pub use tree::{NavigateOptions, NavigateOutcome};

/// How a session is set up at startup (from the command line and the environment).
#[derive(Debug, Clone)]
pub struct SessionConfig {
    pub agent_dir: PathBuf,
    pub cwd: PathBuf,
    /// `--session-dir`: overrides the settings and the default location.
    pub session_dir: Option<PathBuf>,
    /// `--no-session`: nothing is ever written.
    pub no_session: bool,
    /// `--name`: initial display name (already checked non-empty).
    pub name: Option<String>,
    /// `--thinking`.
    pub thinking: Option<ThinkingLevel>,
    /// `--provider`, for resolving `model_pattern`.
    pub provider: Option<String>,
    /// `--model` as given (`provider/id`, patterns, a `:level` suffix).
    pub model_pattern: Option<String>,
    /// `--models`: the scope `cycle_model` cycles through (else settings `enabledModels`).
    pub models_scope: Vec<String>,
    /// `--api-key`, bound to the provider of the resolved model.
    pub api_key: Option<String>,
    /// `--system-prompt` (text, or a file holding it).
    pub system_prompt: Option<String>,
    /// `--append-system-prompt` (texts or files).
    pub append_system_prompt: Vec<String>,
    /// `--no-context-files`.
    pub no_context_files: bool,
    /// `--tools`: only these tools (built-in and host).
    pub tools: Option<Vec<String>>,
    /// `--exclude-tools`.
    pub exclude_tools: Vec<String>,
    /// `--no-tools`: none at all (unless `--tools` names some).
    pub no_tools: bool,
    /// `--no-builtin-tools`.
    pub no_builtin_tools: bool,
    /// `--skill`, `--prompt-template`, the flags that turn resources off, and how far the
    /// project is trusted.
    pub resources: crate::resources::ResourceOptions,
}

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
}

/// How a prompt that arrives during a run is queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueAs {
    Steer,
    FollowUp,
}

/// What became of an accepted prompt.
#[derive(Debug)]
pub enum PromptOutcome {
    /// Queued behind the active run.
    Queued,
    /// Ready to run: answer the prompt, then pass this to [`AgentSession::launch`] (so that
    /// the response is written before `agent_start`).
    Start(Box<Launch>),
    /// The run has written an `agent_end` but still has post-run work (a retry, a
    /// compaction, the runs they continue, its last records). Nothing was done: offer the prompt again once
    /// [`AgentSession::run_finished`] returns, and answer it then.
    Held,
}

/// A run that has been accepted but not started.
#[derive(Debug)]
pub struct Launch {
    prompt: AgentMessage,
    /// Custom messages `before_agent_start` handlers placed after the prompt.
    extra: Vec<AgentMessage>,
    /// The system prompt for this run, when a `before_agent_start` handler changed it.
    system_prompt: Option<String>,
}

impl Launch {
    /// The prompt's text (after expansion) and images.
    pub fn prompt(&self) -> (String, Vec<ImageContent>) {
        match &self.prompt {
            AgentMessage::User(user) => (user.content.text("\n"), user.content.images()),
            _ => (String::new(), Vec::new()),
        }
    }

    /// Applies what the `before_agent_start` handlers returned.
    pub fn apply(&mut self, changes: crate::extension_hooks::AgentStartChanges) {
        self.extra.extend(changes.messages);
        if changes.system_prompt.is_some() {
            self.system_prompt = changes.system_prompt;
        }
    }
}

/// One conversation.
#[derive(Debug)]
pub struct AgentSession {
    settings: Settings,
    events: EventSink,
    config: SessionConfig,
    client: Option<HttpClient>,
    conversation: Arc<Conversation>,
    /// The run task, if one is under way.
    runs: runs::Runs,
    host_bridge: Arc<crate::HostToolBridge>,
    /// Context files, read once at startup.
    context_files: Vec<(PathBuf, String)>,
    /// Skills and prompt templates of the working directory.
    resources: crate::resources::Resources,
    /// The model and thinking level, and the scope `cycle_model` goes through.
    models: crate::model_choice::ModelChoice,
    auto_compaction: bool,
    auto_retry: bool,
    /// Shared with the runs' `todo_write` tool and the auto-clear timers.
    todos: Arc<crate::todos::Todos>,
    host_tools: HostToolRegistry,
    /// xcsh's `set_locale`: the language the system prompt asks replies in.
    locale: Option<String>,
    /// A `switch_session` target still being parsed ([`AgentSession::settle`]).
    opening: Option<crate::store::DeferredOpen>,
    /// RPC `bash` commands in flight, and their temp files.
    bash_commands: Arc<bash::BashCommands>,
    /// The loaded extensions (none without `-e` or discovered entries).
    extensions: Option<Arc<tau_extensions::Extensions>>,
    /// What the extensions mirror of this session.
    extension_state: Option<Arc<crate::extension_state::ExtensionState>>,
    /// `pi.setActiveTools`: the tools runs offer, by name, instead of the default set.
    active_tools: Option<Vec<String>>,
    /// Custom messages sent with `deliverAs: "nextTurn"`, waiting for the next prompt.
    next_turn: Vec<AgentMessage>,
}

impl AgentSession {
    /// Creates a fresh session starting on `startup`'s model. The session file is only named
    /// here; like pi, tau writes it once there is something worth keeping.
    pub fn new(
        config: SessionConfig,
        settings: Settings,
        registry: Registry,
        startup: StartupModel,
        store: impl Into<crate::StartupStore>,
        events: EventSink,
    ) -> Self {
        let (store, opening) = match store.into() {
            crate::StartupStore::Ready(store) => (store, None),
            crate::StartupStore::Opening(opening) => {
                (SessionStore::in_memory(&config.cwd), Some(opening))
            }
        };
        let resumed = !store.entries().is_empty();
        let todos = crate::todos::Todos::new(
            events.clone(),
            !config.no_session,
            crate::todos::clear_delay(&settings),
        );
        let conversation = Arc::new(Conversation::new(store));
        {
            let mut state = conversation.lock();
            state.steering_mode = settings.steering_mode();
            state.follow_up_mode = settings.follow_up_mode();
            state.interrupt_mode = settings.interrupt_mode();
        }
        let mut session = Self {
            conversation,
            client: None,
            runs: runs::Runs::default(),
            host_bridge: Arc::new(crate::HostToolBridge::default()),
            // An opened session reads them when it settles, as a switched-to one does.
            resources: if opening.is_some() {
                crate::resources::Resources::default()
            } else {
                crate::resources::Resources::load(&config.agent_dir, &config.cwd, &config.resources)
            },
            context_files: if config.no_context_files {
                Vec::new()
            } else {
                crate::system_prompt::load_context_files(&config.agent_dir, &config.cwd)
            },
            auto_compaction: settings.compaction_enabled(),
            auto_retry: settings.retry_enabled(),
            models: crate::model_choice::ModelChoice::new(
                registry,
                startup.scope,
                startup.model,
                startup.thinking_level,
                settings.default_thinking_level(),
            ),
            settings,
            events,
            config,
            todos,
            host_tools: HostToolRegistry::default(),
            locale: None,
            opening: None,
            bash_commands: Arc::default(),
            extensions: None,
            extension_state: None,
            active_tools: None,
            next_turn: Vec::new(),
        };
        if opening.is_some() {
            // Restored when the parse is done (`settle`), like a switched-to session.
            session.opening = opening;
        } else if resumed {
            session.restore_from_store();
        } else {
            session.record_start();
        }
        if let Some(name) = session.config.name.clone() {
            // The name goes into the file: that needs the parsed session.
            session.settle();
            session
                .conversation
                .persist(|store| store.append_session_info(&name));
        }
        session
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }
    /// The skills and prompt templates `get_commands` lists.
    pub fn resources(&self) -> &crate::resources::Resources {
        &self.resources
    }

    /// The slash commands, as `get_commands` and an extension's `pi.getCommands()` list
    /// them (ext §6.2): extension commands, then prompt templates, then skills, each with
    /// its `source` and `sourceInfo`.
    pub fn slash_commands(&self) -> Vec<serde_json::Value> {
        use serde_json::{Value, json};
        let extension_commands = self
            .extensions()
            .map(|e| e.commands())
            .unwrap_or_default()
            .into_iter()
            .map(|c| {
                let mut command = serde_json::Map::new();
                command.insert("name".into(), c.name.into());
                if let Some(description) = c.description {
                    command.insert("description".into(), description.into());
                }
                command.insert("source".into(), "extension".into());
                command.insert(
                    "sourceInfo".into(),
                    json!({"path": c.extension, "source": c.source, "scope": c.scope,
                        "origin": "top-level"}),
                );
                Value::Object(command)
            });
        let templates = self.resources.prompts.iter().map(|t| {
            json!({"name": t.name, "description": t.description, "source": "prompt",
                "sourceInfo": t.source_info})
        });
        let skills = self.resources.skills.iter().map(|s| {
            json!({"name": format!("skill:{}", s.name), "description": s.description,
                "source": "skill", "sourceInfo": s.source_info})
        });
        extension_commands.chain(templates).chain(skills).collect()
    }
    pub fn session_id(&self) -> String {
        self.conversation.store().session_id().to_string()
    }
    /// Where the session is (or will be) written; `None` with `--no-session`.
    pub fn session_file(&self) -> Option<PathBuf> {
        self.conversation.store().file_path().map(Path::to_path_buf)
    }
    /// The current leaf entry's id.
    pub fn leaf_id(&self) -> Option<String> {
        self.conversation.store().leaf_id().map(str::to_string)
    }
    pub fn session_name(&self) -> Option<String> {
        self.conversation.store().session_name().map(str::to_string)
    }
    pub fn model(&self) -> Option<&Model> {
        self.models.model()
    }
    pub fn registry(&self) -> &Registry {
        self.models.registry()
    }
    pub fn thinking_level(&self) -> ThinkingLevel {
        self.models.thinking_level()
    }
    /// The thinking levels the current model supports (only `off` without a model).
    pub fn available_thinking_levels(&self) -> Vec<ThinkingLevel> {
        self.models.available_thinking_levels()
    }
    pub fn steering_mode(&self) -> QueueMode {
        self.conversation.lock().steering_mode
    }
    pub fn follow_up_mode(&self) -> QueueMode {
        self.conversation.lock().follow_up_mode
    }
    pub fn interrupt_mode(&self) -> InterruptMode {
        self.conversation.lock().interrupt_mode
    }
    pub fn auto_compaction_enabled(&self) -> bool {
        self.auto_compaction
    }
    pub fn auto_retry_enabled(&self) -> bool {
        self.auto_retry
    }
    /// True from the moment a prompt is accepted until its run has ended.
    pub fn is_streaming(&self) -> bool {
        self.runs.is_streaming()
    }

    /// Returns when the active run's task has finished (never, while there is none: meant
    /// for a `select!` that waits to offer a held prompt again). Cancel-safe.
    pub async fn run_finished(&mut self) {
        self.runs.finished().await;
    }

    /// True while a compaction summarises.
    pub fn is_compacting(&self) -> bool {
        self.conversation.lock().compacting
    }
    /// Reads the in-memory context without copying it.
    pub fn with_messages<T>(&self, read: impl FnOnce(&[Arc<AgentMessage>]) -> T) -> T {
        read(&self.conversation.lock().messages)
    }
    /// How many messages the context holds.
    pub fn message_count(&self) -> usize {
        self.conversation.lock().messages.len()
    }
    /// Queued steering plus follow-up messages (pi's `pendingMessageCount`).
    pub fn pending_message_count(&self) -> usize {
        self.conversation.lock().pending_count()
    }
    /// xcsh's `queuedMessageCount`: the pending messages plus hidden next-turn messages,
    /// of which tau has none yet.
    pub fn queued_message_count(&self) -> usize {
        self.pending_message_count()
    }
    pub fn todo_phases(&self) -> Vec<TodoPhase> {
        self.todos.phases()
    }
    /// The loaded extensions.
    pub fn extensions(&self) -> Option<&Arc<tau_extensions::Extensions>> {
        self.extensions.as_ref()
    }

    /// Attaches the loaded extensions: their tools join the next run, their handlers hear
    /// its events.
    pub fn set_extensions(&mut self, extensions: Arc<tau_extensions::Extensions>) {
        let state = Arc::new(crate::extension_state::ExtensionState {
            conversation: Arc::clone(&self.conversation),
            session_keys: std::sync::Mutex::default(),
            // The whole catalog is large and does not change while tau runs.
            all_models: serde_json::to_value(self.models.registry().all_models())
                .unwrap_or_default(),
            project_trusted: self.config.resources.project.trusted(),
            context_usage: std::sync::Mutex::default(),
        });
        extensions.set_state_source(Arc::clone(&state) as Arc<dyn tau_extensions::StateSource>);
        extensions.set_action_applier(Arc::new(self.immediate_actions()));
        self.extensions = Some(extensions);
        self.extension_state = Some(state);
        self.refresh_extension_state();
    }

    fn immediate_actions(&self) -> crate::extension_actions::ImmediateActions {
        crate::extension_actions::ImmediateActions {
            conversation: Arc::clone(&self.conversation),
            events: self.events.clone(),
        }
    }

    /// Carries out an extension action that needs only the session's record and output (as
    /// the extensions' reader does where the frame arrives); `None` for the others.
    pub async fn apply_session_action(
        &self,
        action: &tau_protocol::extension::ExtensionAction,
    ) -> Option<Result<serde_json::Value, String>> {
        self.immediate_actions().carry_out(action).await
    }

    /// The whole mirror as extensions see it (the `get_state` action), entries included.
    pub fn extension_state_snapshot(&self) -> serde_json::Value {
        use tau_extensions::StateSource;
        let Some(state) = &self.extension_state else {
            return serde_json::Value::Null;
        };
        let mut fields = state.fields();
        fields.extend(state.constant_fields());
        let session_id = self.session_id();
        let since = state.entries_since(0, &session_id).unwrap_or_default();
        fields.insert(
            "leafId".into(),
            since
                .leaf_id
                .map_or(serde_json::Value::Null, serde_json::Value::String),
        );
        let entries = since.appended;
        fields.insert(
            "entries".into(),
            serde_json::json!({"reset": true, "append": entries}),
        );
        serde_json::Value::Object(fields)
    }

    /// Brings the keys only the session knows up to date in the extensions' mirror: called
    /// after every command and action, which are what change them.
    pub fn refresh_extension_state(&mut self) {
        let Some(state) = &self.extension_state else {
            return;
        };
        let tools = self.run_tools();
        let mut keys = serde_json::Map::new();
        keys.insert(
            "model".into(),
            self.models
                .model()
                .and_then(|m| serde_json::to_value(m).ok())
                .unwrap_or(serde_json::Value::Null),
        );
        keys.insert(
            "thinkingLevel".into(),
            serde_json::to_value(self.models.thinking_level()).unwrap_or_default(),
        );
        keys.insert(
            "activeTools".into(),
            tools.iter().map(|t| t.name().to_string()).collect(),
        );
        keys.insert(
            "allTools".into(),
            self.all_tools()
                .iter()
                .map(|t| {
                    serde_json::json!({"name": t.name(), "description": t.description(),
                        "parameters": t.parameters()})
                })
                .collect(),
        );
        keys.insert("systemPrompt".into(), self.system_prompt(&tools).into());
        keys.insert("commands".into(), self.slash_commands().into());
        keys.insert(
            "availableModels".into(),
            serde_json::to_value(self.available_models()).unwrap_or_default(),
        );
        // Read by the state source to compute `contextUsage` when a frame leaves.
        keys.insert(
            "contextWindow".into(),
            self.models.model().map_or(0, |m| m.context_window).into(),
        );
        if let Ok(mut current) = state.session_keys.lock() {
            *current = keys;
        }
    }

    pub fn host_tools(&self) -> &HostToolRegistry {
        &self.host_tools
    }

    /// Also saved as `steeringMode` in the global settings, as pi does.
    pub fn set_steering_mode(&mut self, mode: QueueMode) {
        self.conversation.lock().steering_mode = mode;
        self.save_setting("steeringMode", serde_json::json!(mode));
    }
    /// Also saved as `followUpMode` in the global settings, as pi does.
    pub fn set_follow_up_mode(&mut self, mode: QueueMode) {
        self.conversation.lock().follow_up_mode = mode;
        self.save_setting("followUpMode", serde_json::json!(mode));
    }
    /// Also saved as `interruptMode` in the global settings, as xcsh does.
    pub fn set_interrupt_mode(&mut self, mode: InterruptMode) {
        self.conversation.lock().interrupt_mode = mode;
        self.save_setting("interruptMode", serde_json::json!(mode));
    }
    /// Also saved as `compaction.enabled` in the global settings, as pi does.
    pub fn set_auto_compaction(&mut self, enabled: bool) {
        self.auto_compaction = enabled;
        self.save_setting("compaction.enabled", serde_json::json!(enabled));
    }
    /// Also saved as `retry.enabled` in the global settings, as pi does.
    pub fn set_auto_retry(&mut self, enabled: bool) {
        self.auto_retry = enabled;
        self.save_setting("retry.enabled", serde_json::json!(enabled));
    }

    /// Writes a changed setting to the global settings file (pi's setters). A file that
    /// cannot be written does not fail the command; the change holds for this process.
    fn save_setting(&mut self, key: &str, value: serde_json::Value) {
        self.save_settings(&[(key, value)]);
    }

    fn save_settings(&mut self, changes: &[(&str, serde_json::Value)]) {
        if let Err(err) = self.settings.set_global_all(changes) {
            tracing::warn!("settings not saved: {err}");
        }
    }

    /// The request options settings decide: thinking budgets, the idle and request
    /// timeouts, provider-level retries.
    fn provider_options(&self) -> StreamOptions {
        let settings = &self.settings;
        StreamOptions {
            thinking_budgets: tau_ai::provider::ThinkingBudgets {
                minimal: settings.thinking_budget("minimal"),
                low: settings.thinking_budget("low"),
                medium: settings.thinking_budget("medium"),
                high: settings.thinking_budget("high"),
            },
            idle_timeout: settings.http_idle_timeout(),
            request_timeout: settings.provider_timeout(),
            max_retries: settings.provider_max_retries(),
            max_retry_delay: settings.provider_max_retry_delay(),
            idle_cap: self.conversation.idle_cap(),
            ..StreamOptions::default()
        }
    }

    /// Sets the display name (trimmed) and announces it with `session_info_changed`.
    pub async fn set_session_name(&mut self, name: &str) -> Result<(), SessionError> {
        crate::extension_actions::set_session_name(&self.conversation, &self.events, name).await
    }

    /// Empties both queues and returns what they held (`clear_queue`).
    pub async fn clear_queues(&mut self) -> (Vec<String>, Vec<String>) {
        // Messages a run has already taken are delivered regardless; they stay reported.
        let (steering, follow_up, update): (Vec<String>, Vec<String>, _) = {
            let mut state = self.conversation.lock();
            (
                state.steering.drain(..).filter_map(|q| q.text).collect(),
                state.follow_up.drain(..).filter_map(|q| q.text).collect(),
                state.queue_update(),
            )
        };
        if !steering.is_empty() || !follow_up.is_empty() {
            self.events.emit(update).await;
        }
        (steering, follow_up)
    }

    /// Replaces the todo list (`set_todos`) and records it in the session as a custom entry,
    /// so reopening, switching back, forking and branching find it (decision 15).
    pub fn set_todo_phases(&mut self, phases: Vec<TodoPhase>) {
        if let Ok(list) = serde_json::to_value(&phases) {
            self.conversation.persist(|store| {
                store.append_custom(
                    crate::todos::TODOS_ENTRY,
                    Some(serde_json::json!({ "phases": list })),
                )
            });
        }
        self.todos.set(phases);
    }

    /// Replaces the host tool set; returns the registered names in request order.
    pub fn set_host_tools(
        &mut self,
        tools: Vec<HostToolDefinition>,
    ) -> Result<Vec<String>, SessionError> {
        Ok(self.host_tools.replace(tools, &BUILTIN_TOOL_NAMES)?)
    }

    /// Text of the last assistant message in context, trimmed; `None` if there is none.
    /// Aborted messages without content are skipped, as pi does.
    pub fn last_assistant_text(&self) -> Option<String> {
        let state = self.conversation.lock();
        state.messages.iter().rev().find_map(|m| match &**m {
            AgentMessage::Assistant(a)
                if !(a.stop_reason == tau_protocol::StopReason::Aborted
                    && a.content.is_empty()) =>
            {
                let text: String = a
                    .content
                    .iter()
                    .filter_map(|c| match c {
                        tau_protocol::AssistantContent::Text(t) => Some(t.text.as_str()),
                        _ => None,
                    })
                    .collect();
                let trimmed = text.trim();
                Some((!trimmed.is_empty()).then(|| trimmed.to_string()))
            }
            _ => None,
        })?
    }

    /// Models whose provider has credentials, in registry order.
    pub fn available_models(&self) -> Vec<Model> {
        self.models.available_models()
    }

    /// Switches to `provider/id` (only models with credentials count) and re-applies the
    /// thinking level. The model becomes the settings' default, as in pi.
    pub async fn set_model(&mut self, provider: &str, id: &str) -> Result<Model, SessionError> {
        let before = self.choice_now();
        let changed = self.models.set_model(provider, id)?;
        let model = changed.model.clone();
        self.record(changed).await;
        self.announce_choice(before, "set").await;
        model.ok_or_else(|| SessionError::ModelNotFound {
            provider: provider.to_string(),
            id: id.to_string(),
        })
    }

    /// The next model of the scope (when one is set) or of all available models; `None` when
    /// there are fewer than two to choose from.
    pub async fn cycle_model(&mut self) -> Option<(Model, ThinkingLevel, bool)> {
        let before = self.choice_now();
        let (changed, is_scoped) = self.models.cycle_model()?;
        let model = changed.model.clone()?;
        self.record(changed).await;
        self.announce_choice(before, "cycle").await;
        Some((model, self.models.thinking_level(), is_scoped))
    }

    /// Sets the thinking level, clamped to the model; `thinking_level_changed` is emitted when
    /// the effective level changes.
    pub async fn set_thinking_level(&mut self, level: ThinkingLevel) {
        let before = self.choice_now();
        let changed = self.models.set_thinking_level(level);
        self.record(crate::model_choice::Changed {
            model: None,
            thinking_level: changed,
        })
        .await;
        self.announce_choice(before, "set").await;
    }

    /// The next supported level (wrapping); `None` for a model without reasoning.
    pub async fn cycle_thinking_level(&mut self) -> Option<ThinkingLevel> {
        let before = self.choice_now();
        let changed = self.models.cycle_thinking_level()?;
        self.record(crate::model_choice::Changed {
            model: None,
            thinking_level: changed,
        })
        .await;
        self.announce_choice(before, "cycle").await;
        Some(self.models.thinking_level())
    }

    fn choice_now(&self) -> (Option<Model>, ThinkingLevel) {
        (self.models.model().cloned(), self.models.thinking_level())
    }

    /// Tells the extensions what changed since `before` (ext §3.2): `thinking_level_select`
    /// (not awaited, as in pi) before `model_select`.
    async fn announce_choice(&self, before: (Option<Model>, ThinkingLevel), source: &str) {
        let Some(extensions) = &self.extensions else {
            return;
        };
        let (previous_model, previous_level) = before;
        let level = self.models.thinking_level();
        if level != previous_level && extensions.subscribed("thinking_level_select") {
            let event = serde_json::json!({"type": "thinking_level_select", "level": level,
                "previousLevel": previous_level});
            extensions.emit_detached("thinking_level_select", &event.to_string());
        }
        let model = self.models.model();
        let same = |a: &Model, b: &Model| a.provider == b.provider && a.id == b.id;
        let changed = match (model, &previous_model) {
            (Some(now), Some(was)) => !same(now, was),
            (Some(_), None) => true,
            _ => false,
        };
        if changed && extensions.subscribed("model_select") {
            let mut event = serde_json::json!({"type": "model_select", "model": model,
                "source": source});
            if let Some(previous) = previous_model {
                event["previousModel"] = serde_json::json!(previous);
            }
            crate::extension_hooks::notify(extensions, event).await;
        }
    }

    /// Writes a model or level change to the session file and the settings (pi's
    /// `defaultProvider`/`defaultModel`, and `defaultThinkingLevel` unless it is `off` on a
    /// model without reasoning), and announces a new level.
    async fn record(&mut self, changed: crate::model_choice::Changed) {
        if let Some(model) = &changed.model {
            self.conversation
                .persist(|store| store.append_model_change(&model.provider, &model.id));
            self.save_settings(&[
                ("defaultProvider", serde_json::json!(model.provider)),
                ("defaultModel", serde_json::json!(model.id)),
            ]);
        }
        if let Some(level) = changed.thinking_level {
            self.conversation
                .persist(|store| store.append_thinking_level_change(level.as_str()));
            let reasons = self.models.model().is_some_and(|m| m.reasoning);
            if reasons || level != ThinkingLevel::Off {
                self.save_setting("defaultThinkingLevel", serde_json::json!(level));
                self.models.set_default_level(level);
            }
            self.events
                .emit(SessionEvent::ThinkingLevelChanged { level })
                .await;
        }
    }
}

/// Builds a user message from a prompt's text and images (pi always writes the block form).
fn user_message(text: &str, images: Vec<ImageContent>) -> AgentMessage {
    let mut content = vec![UserContentBlock::Text(TextContent {
        text: text.to_string(),
        text_signature: None,
    })];
    content.extend(images.into_iter().map(UserContentBlock::Image));
    AgentMessage::User(UserMessage {
        content: UserContent::Blocks(content),
        timestamp: tau_ai::now_ms(),
        attachments: None,
    })
}

impl AgentSession {
    /// Accepts a prompt (rpc.md §3.1): queued when a run streams and a queue was named, an
    /// error when none was, otherwise checked (model, key) and ready to launch. Whether the
    /// session streams is decided here, synchronously, so two prompts in a row can never
    /// both start a run (pi's lost-prompt race).
    pub async fn prompt(
        &mut self,
        text: &str,
        images: Vec<ImageContent>,
        queue_as: Option<QueueAs>,
    ) -> Result<PromptOutcome, SessionError> {
        self.runs.reap().await;
        if queue_as.is_none() && self.runs.in_post_run() {
            return Ok(PromptOutcome::Held);
        }
        let text = &self.expand_input(text).await;
        if self.is_streaming() {
            let Some(queue_as) = queue_as else {
                return Err(SessionError::Busy);
            };
            self.queue(queue_as, text, images).await;
            return Ok(PromptOutcome::Queued);
        }
        self.check_credentials()?;
        Ok(PromptOutcome::Start(Box::new(Launch {
            prompt: user_message(text, images),
            extra: Vec::new(),
            system_prompt: None,
        })))
    }

    /// Queues a steering or follow-up message (also when idle: it waits for the next run),
    /// with a `/skill:` command or a template expanded.
    pub async fn enqueue(&mut self, queue_as: QueueAs, text: &str, images: Vec<ImageContent>) {
        let text = self.expand_input(text).await;
        self.queue(queue_as, &text, images).await;
    }

    /// Expands a `/skill:` command or a template; a skill file that cannot be read is
    /// reported as pi reports it (an `extension_error` for `skill_expansion`).
    async fn expand_input(&self, text: &str) -> String {
        let (text, failure) = self.resources.expand(text);
        if let Some((file, error)) = failure {
            self.events
                .emit(SessionEvent::ExtensionError {
                    extension_path: file.display().to_string(),
                    event: "skill_expansion".into(),
                    error,
                })
                .await;
        }
        text
    }

    async fn queue(&mut self, queue_as: QueueAs, text: &str, images: Vec<ImageContent>) {
        let update = {
            let mut state = self.conversation.lock();
            let queued = Queued {
                text: Some(text.to_string()),
                message: user_message(text, images),
            };
            match queue_as {
                QueueAs::Steer => state.steering.push_back(queued),
                QueueAs::FollowUp => state.follow_up.push_back(queued),
            }
            state.queue_update()
        };
        self.events.emit(update).await;
    }

    fn check_credentials(&self) -> Result<(), SessionError> {
        let provider = self
            .models
            .model()
            .map_or_else(|| "the selected model".to_string(), |m| m.provider.clone());
        let Some(model) = self.models.model() else {
            return Err(SessionError::NoApiKey(provider));
        };
        match self.models.registry().request_config(model) {
            Ok(config) if config.api_key.is_some() => Ok(()),
            Ok(_) => Err(SessionError::NoApiKey(provider)),
            Err(err) => Err(SessionError::Credentials(err.to_string())),
        }
    }

    /// After an abort, messages still queued start a new run (pi's behaviour, decision 10).
    pub fn continue_if_queued(&mut self) {
        let queued = {
            let state = self.conversation.lock();
            !state.steering.is_empty() || !state.follow_up.is_empty()
        };
        if queued && !self.is_streaming() && self.check_credentials().is_ok() {
            self.start_run(Vec::new());
        }
    }

    /// Starts an accepted prompt's run on its own task.
    pub fn launch(&mut self, launch: Launch) {
        self.todos.reset_reminders();
        let mut prompts = vec![launch.prompt];
        prompts.append(&mut self.next_turn);
        prompts.extend(launch.extra);
        self.start_run_with(prompts, launch.system_prompt);
    }

    /// The system prompt a run would get now (`before_agent_start`'s `systemPrompt`).
    pub fn current_system_prompt(&self) -> String {
        self.system_prompt(&self.run_tools())
    }

    /// Makes the next run this session starts wait for `gate` before its first event, until
    /// [`AgentSession::clear_run_gate`]: an extension command's `sendUserMessage` starts a run
    /// that pi begins only after the command's `prompt` is answered.
    pub fn gate_next_run(&mut self, gate: futures_util::future::BoxFuture<'static, ()>) {
        self.runs.gate_next(gate);
    }

    /// Drops the gate of [`AgentSession::gate_next_run`] if no run took it.
    pub fn clear_run_gate(&mut self) {
        self.runs.clear_gate();
    }

    fn start_run(&mut self, prompts: Vec<AgentMessage>) {
        self.start_run_with(prompts, None);
    }

    fn start_run_with(&mut self, prompts: Vec<AgentMessage>, system_prompt: Option<String>) {
        let Some(spec) = self.run_spec(system_prompt) else {
            return;
        };
        let services = self.run_services();
        self.runs.start(spec, prompts, services);
    }

    /// What a run streams with: the current model, tools and system prompt (`None` without
    /// a model).
    fn run_spec(&mut self, system_prompt: Option<String>) -> Option<RunSpec> {
        self.conversation.lock().tools_now = None;
        let model = self.models.model().cloned()?;
        let (api_key, headers, base_url) = match self.models.registry().request_config(&model) {
            Ok(config) => (
                config.api_key.map(|k| k.expose().to_string()),
                config.headers,
                config.base_url,
            ),
            Err(_) => (None, Vec::new(), model.base_url.clone()),
        };
        let client = self
            .client
            .get_or_insert_with(tau_ai::provider::http_client)
            .clone();
        let tools = self.run_tools();
        let spec = RunSpec {
            client,
            model: Model { base_url, ..model },
            system_prompt: Some(system_prompt.unwrap_or_else(|| self.system_prompt(&tools))),
            tools,
            options: StreamOptions {
                api_key,
                headers,
                reasoning: Some(self.models.thinking_level()),
                session_id: Some(self.session_id()),
                hooks: self
                    .extensions
                    .as_ref()
                    .filter(|e| {
                        e.subscribed("before_provider_request")
                            || e.subscribed("after_provider_response")
                    })
                    .map(|extensions| {
                        Arc::new(crate::extension_hooks::ProviderHooks {
                            extensions: Arc::clone(extensions),
                        }) as Arc<dyn tau_ai::provider::RequestHooks>
                    }),
                ..self.provider_options()
            },
        };
        Some(spec)
    }

    /// What a run task needs besides its spec.
    fn run_services(&mut self) -> runs::RunServices {
        let summarizer = self.summarizer().ok();
        let mut retry = crate::retry::RetrySettings::from_settings(&self.settings);
        retry.enabled &= self.auto_retry;
        runs::RunServices {
            conversation: Arc::clone(&self.conversation),
            events: self.events.clone(),
            retry,
            summarizer,
            extensions: self.extensions.clone(),
            block_images: self.settings.block_images(),
            todos: Arc::clone(&self.todos),
        }
    }

    /// Routes host-tool replies to waiting calls.
    pub fn host_bridge(&self) -> &crate::HostToolBridge {
        &self.host_bridge
    }

    /// `abort_retry`: cancels a retry's back-off at once (the series ends with
    /// `auto_retry_end{success:false, finalError:"Retry cancelled"}`).
    pub fn abort_retry(&self) {
        if let Some(sleep) = self.conversation.lock().retry_sleep.take() {
            sleep.cancel();
        }
    }

    /// Where and how tools and the RPC `bash` command run.
    fn tool_env(&self) -> tau_tools::ToolEnv {
        tau_tools::ToolEnv {
            cwd: self.config.cwd.clone(),
            home: tau_base::paths::home_dir(),
            agent_dir: self.config.agent_dir.clone(),
            shell_path: self.settings.get("shellPath"),
            shell_command_prefix: self.settings.get("shellCommandPrefix"),
            auto_resize_images: self.settings.get("images.autoResize").unwrap_or(true),
            model_accepts_images: self
                .models
                .model()
                .is_some_and(|m| m.input.contains(&tau_protocol::InputModality::Image)),
        }
    }

    /// `pi.registerProvider` after start-up: the provider's models join the registry (the
    /// current model is kept).
    pub fn register_provider(
        &mut self,
        name: &str,
        config: serde_json::Value,
    ) -> Result<(), SessionError> {
        self.models
            .registry_mut()
            .register_provider(name, config)
            .map_err(|e| SessionError::Store(e.to_string()))
    }

    /// An extension's write to a model object (`update_model`); false for an unknown model.
    pub fn patch_model(
        &mut self,
        provider: &str,
        id: &str,
        patch: &tau_ai::registry::ModelPatch,
    ) -> bool {
        self.models.patch_model(provider, id, patch)
    }

    pub fn unregister_provider(&mut self, name: &str) {
        self.models.registry_mut().unregister_provider(name);
    }

    /// `ctx.reload()`: settings (and the queue modes they set), skills and prompt templates
    /// read from disk again.
    pub fn reload_resources(&mut self) {
        self.settings = Settings::load_for(
            &self.config.agent_dir,
            &self.config.cwd,
            self.config.resources.project.trusted(),
        );
        for warning in self.settings.warnings() {
            tracing::warn!("{warning}");
        }
        {
            let mut state = self.conversation.lock();
            state.steering_mode = self.settings.steering_mode();
            state.follow_up_mode = self.settings.follow_up_mode();
        }
        self.todos
            .set_clear_delay(crate::todos::clear_delay(&self.settings));
        self.resources = crate::resources::Resources::load(
            &self.config.agent_dir,
            &self.config.cwd,
            &self.config.resources,
        );
    }

    /// Skills and prompt templates the extensions' `resources_discover` handlers named: added
    /// to the session's sources (as `--skill`/`--prompt-template` would) and loaded again.
    pub fn add_resource_paths(&mut self, skills: Vec<String>, prompts: Vec<String>) {
        if skills.is_empty() && prompts.is_empty() {
            return;
        }
        let options = &mut self.config.resources;
        for path in skills {
            if !options.skills.contains(&path) {
                options.skills.push(path);
            }
        }
        for path in prompts {
            if !options.prompt_templates.contains(&path) {
                options.prompt_templates.push(path);
            }
        }
        self.resources = crate::resources::Resources::load(
            &self.config.agent_dir,
            &self.config.cwd,
            &self.config.resources,
        );
    }

    /// The session's working directory.
    pub fn cwd(&self) -> &Path {
        &self.config.cwd
    }

    /// `pi.setActiveTools`: from the next model call on, runs offer these tools (names no
    /// tool has are ignored, as in pi).
    pub fn set_active_tools(&mut self, names: Vec<String>) {
        self.active_tools = Some(names);
        if self.is_streaming() {
            let tools = self.run_tools();
            let system_prompt = self.system_prompt(&tools);
            self.conversation.lock().tools_now = Some(crate::conversation::ToolsNow {
                tools,
                system_prompt,
            });
        }
    }

    /// `pi.sendMessage` (ext §7.4): an extension's custom message, delivered by `deliverAs`
    /// and the run state.
    pub async fn send_custom_message(
        &mut self,
        message: tau_protocol::CustomMessage,
        trigger_turn: bool,
        deliver_as: Option<&str>,
    ) -> Result<(), SessionError> {
        let message = AgentMessage::Custom(message);
        if deliver_as == Some("nextTurn") {
            self.next_turn.push(message);
            return Ok(());
        }
        if self.is_streaming() {
            crate::extension_actions::queue_for_run(&self.conversation, message, deliver_as);
            return Ok(());
        }
        if trigger_turn {
            self.check_credentials()?;
            self.start_run(vec![message]);
            return Ok(());
        }
        crate::extension_actions::record_custom_message(&self.conversation, &self.events, message)
            .await;
        Ok(())
    }

    /// Every tool a run could offer (`pi.getAllTools`): the built-in tools the flags allow
    /// (also those inactive by default), the extensions' tools, the active host tools.
    pub fn all_tools(&self) -> Vec<Arc<dyn tau_agent::AgentTool>> {
        self.tools_from(true)
    }

    /// What the next model call offers, for `get_state.dumpTools`: name, description and
    /// parameter schema of each tool.
    pub fn offered_tools(&self) -> Vec<(String, String, serde_json::Value)> {
        self.run_tools()
            .iter()
            .map(|t| {
                (
                    t.name().to_string(),
                    t.description().to_string(),
                    t.parameters().clone(),
                )
            })
            .collect()
    }

    /// The tools a run offers: the active built-in tools (pi's default set, or what
    /// `--tools` / `--exclude-tools` / `--no-tools` / `--no-builtin-tools` select), the
    /// extensions' tools (an extension tool with a built-in's name replaces it, ext §5.4),
    /// then the active host tools.
    fn run_tools(&self) -> Vec<Arc<dyn tau_agent::AgentTool>> {
        match &self.active_tools {
            None => self.tools_from(false),
            Some(names) => {
                let all = self.tools_from(true);
                names
                    .iter()
                    .filter_map(|name| all.iter().find(|t| t.name() == name).cloned())
                    .collect()
            }
        }
    }

    /// The default set, or with `every_builtin` all the built-in tools the flags allow.
    fn tools_from(&self, every_builtin: bool) -> Vec<Arc<dyn tau_agent::AgentTool>> {
        let selection = crate::tool_selection::ToolSelection::of(&self.config);
        let env = Arc::new(self.tool_env());
        let extension_tools: Vec<tau_extensions::ExtensionTool> = self
            .extensions
            .as_ref()
            .map(|e| e.tools())
            .unwrap_or_default()
            .into_iter()
            .filter(|t| selection.allows(&t.registration.name))
            .collect();
        let builtin = if every_builtin {
            selection.every_builtin()
        } else {
            selection.builtin()
        };
        let mut tools: Vec<Arc<dyn tau_agent::AgentTool>> = builtin
            .into_iter()
            .filter(|name| !extension_tools.iter().any(|t| t.registration.name == *name))
            .filter_map(|name| match name {
                tau_tools::todo_write::NAME => Some(Arc::new(
                    tau_tools::todo_write::TodoWriteTool::new(Arc::clone(&self.todos) as _),
                )
                    as Arc<dyn tau_agent::AgentTool>),
                _ => tau_tools::builtin_tool(name, &env),
            })
            .collect();
        tools.extend(
            extension_tools
                .into_iter()
                .map(|t| Arc::new(t) as Arc<dyn tau_agent::AgentTool>),
        );
        tools.extend(
            self.host_tools
                .tools()
                .iter()
                .filter(|t| t.active && selection.allows(&t.name))
                .map(|t| {
                    Arc::new(crate::HostTool::new(
                        t.clone(),
                        Arc::clone(&self.host_bridge),
                        self.events.clone(),
                    )) as Arc<dyn tau_agent::AgentTool>
                }),
        );
        tools
    }

    /// Aborts the active run and waits until it has emitted its last events. Queues are
    /// left as they are (decision 10).
    pub async fn abort(&mut self) {
        self.runs.abort().await;
    }

    /// Waits for the active run to end on its own (stdin closed: finish pending work).
    pub async fn wait_idle(&mut self) {
        self.runs.wait_idle().await;
    }

    /// The system prompt for the tools a run offers (tools-resources §2).
    /// xcsh's `set_locale` (and `prompt.locale`): never refused; the next run's system prompt
    /// asks for replies in that language. An empty locale removes the request.
    pub fn set_locale(&mut self, locale: &str) {
        self.locale = crate::system_prompt::normalize_locale(locale);
    }

    fn system_prompt(&self, tools: &[Arc<dyn tau_agent::AgentTool>]) -> String {
        use crate::system_prompt::{
            PromptInputs, PromptTool, build_system_prompt, builtin_prompt_tool,
        };
        let prompt_tools = tools
            .iter()
            .map(|tool| {
                let builtin = builtin_prompt_tool(tool.name());
                if builtin.snippet.is_some() {
                    builtin
                } else {
                    PromptTool {
                        name: tool.name().to_string(),
                        snippet: tool.prompt_snippet(),
                        guidelines: tool.prompt_guidelines(),
                    }
                }
            })
            .collect();
        let config = &self.config;
        let trusted_project = config
            .resources
            .project
            .trusted()
            .then_some(config.cwd.as_path());
        build_system_prompt(&PromptInputs {
            custom: crate::system_prompt::resolve_custom_prompt(
                config.system_prompt.as_deref(),
                trusted_project,
                &config.agent_dir,
            ),
            append: crate::system_prompt::resolve_append(
                &config.append_system_prompt,
                trusted_project,
                &config.agent_dir,
            ),
            context_files: self.context_files.clone(),
            skills: tools
                .iter()
                .any(|t| t.name() == "read")
                .then(|| crate::resources::skills::prompt_block(&self.resources.skills))
                .flatten(),
            tools: prompt_tools,
            cwd: config.cwd.clone(),
            date: time::OffsetDateTime::now_utc().date().to_string(),
            locale: self.locale.clone(),
        })
    }
}
