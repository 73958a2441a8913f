//! [`AgentSession`]: one conversation and the coordinator of its pieces. Each concern has an
//! owner of its own, plain state the session composes: where it works ([`Workspace`]), the
//! model ([`ModelChoice`]), the client's preferences ([`Preferences`]), the tools
//! ([`ToolSet`]), the extensions ([`ExtensionBinding`]), the run task ([`Runs`]) and the
//! conversation with its record ([`Conversation`]). The session is what changes several of
//! them together, and what records (session entries) and announces (events) a change.

use std::path::PathBuf;
use std::sync::Arc;
use tau_protocol::{SessionEvent, TodoPhase};

use serde_json::Value;
use tau_agent::RunSpec;
use tau_ai::registry::Registry;
use tau_protocol::extension::ExtensionAction;
use tau_protocol::{AgentMessage, ImageContent, Model, ThinkingLevel};

use crate::compactor::{CompactDone, ManualCompaction};
use crate::conversation::Conversation;
pub use crate::error::SessionError;
use crate::extension_binding::{ExtensionBinding, SessionKeys};
use crate::model_choice::{Changed, ModelChoice};
use crate::permissions::Permissions;
use crate::preferences::{Preference, Preferences};
use crate::runs::{RunServices, Runs};
use crate::store::SessionStore;
use crate::tool_selection::{NextCall, ToolSet, tool_env};
use crate::workspace::Workspace;
use crate::{EventSink, HostToolDefinition, Settings, StartupModel};

pub(crate) mod bash;
mod files;
mod input;
mod tree;
pub use bash::BashRun;
pub use files::Replacement;
pub use input::{Admitted, InputSource, Submitted, pick_up_credentials};
pub use tree::{NavigateOptions, NavigateOutcome};

/// How a session is set up at startup (from the command line and the environment). The
/// default is no flag given (with empty folders, which a caller always sets).
#[derive(Debug, Clone, Default)]
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
    /// [`Runs::finished`] returns, and answer it then.
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
    events: EventSink,
    conversation: Arc<Conversation>,
    workspace: Workspace,
    /// The model and thinking level, and the scope `cycle_model` goes through.
    models: ModelChoice,
    preferences: Preferences,
    tools: ToolSet,
    extensions: ExtensionBinding,
    /// The run task, if one is under way.
    runs: Runs,
    /// Shared with the runs' `todo_write` tool and the auto-clear timers.
    todos: Arc<crate::todos::Todos>,
    /// A `switch_session` target still being parsed ([`AgentSession::settle`]).
    opening: Option<crate::store::DeferredOpen>,
    /// Shared with the runs, which check every tool call.
    permissions: Arc<Permissions>,
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
        conversation.watch_saves(&events);
        let (permissions, warnings) = Permissions::new(&config.cwd, &config.agent_dir, &settings);
        for warning in warnings {
            tracing::warn!("{warning}");
        }
        let preferences = Preferences::new(settings);
        conversation.set_queue_modes(preferences.queue_modes());
        let name = config.name.clone();
        let mut session = Self {
            tools: ToolSet::new(&config, Arc::clone(&todos), events.clone()),
            extensions: ExtensionBinding::new(Arc::clone(&conversation), events.clone()),
            conversation,
            runs: Runs::default(),
            // An opened session reads them when it settles, as a switched-to one does.
            workspace: Workspace::new(config, opening.is_some()),
            models: ModelChoice::new(
                registry,
                startup.scope,
                startup.model,
                startup.thinking_level,
                preferences.settings().default_thinking_level(),
            ),
            preferences,
            events,
            todos,
            opening: None,
            permissions: Arc::new(permissions),
        };
        if opening.is_some() {
            // Restored when the parse is done (`settle`), like a switched-to session.
            session.opening = opening;
        } else if resumed {
            files::restore_from_store(
                &session.conversation,
                &session.todos,
                &mut session.models,
                session.workspace.config().model_pattern.is_some(),
            );
        } else {
            files::record_start(&session.conversation, &session.models);
        }
        if let Some(name) = name {
            // The name goes into the file: that needs the parsed session.
            session.settle();
            session
                .conversation
                .persist(|store| store.append_session_info(&name));
        }
        session
    }

    /// The directory, configuration, context files, skills and templates.
    pub fn workspace(&self) -> &Workspace {
        &self.workspace
    }
    /// The model and thinking level (changed through the session, which records them).
    pub fn models(&self) -> &ModelChoice {
        &self.models
    }
    /// Settings, queue modes, automatic compaction and retry, locale.
    pub fn preferences(&self) -> &Preferences {
        &self.preferences
    }
    /// Host tools, the active set, what the flags allow, the todo list and `bash` commands.
    pub fn tools(&self) -> &ToolSet {
        &self.tools
    }
    /// The loaded extensions and their mirror of the session.
    pub fn extension_binding(&self) -> &ExtensionBinding {
        &self.extensions
    }
    /// The context, the queues and the session file, to read.
    /// Shared: a waiter beside the input loop (`Conversation::idle`) holds its own handle.
    pub fn conversation(&self) -> &Arc<Conversation> {
        &self.conversation
    }
    /// The run task: abort it, wait for it, gate the next one. Whether a run streams is
    /// the conversation's to say (`conversation().is_streaming()`).
    pub fn runs_mut(&mut self) -> &mut Runs {
        &mut self.runs
    }
    /// What tool calls may do without asking: the mode, the rules, the requests waiting
    /// for a front-end's answer.
    pub fn permissions(&self) -> &Arc<Permissions> {
        &self.permissions
    }

    /// Attaches the loaded extensions: their tools join the next run, their handlers hear
    /// its events.
    pub fn set_extensions(&mut self, extensions: Arc<tau_extensions::Extensions>) {
        // The whole catalog is large and does not change while tau runs: serialised once,
        // straight from the models.
        let catalog = self.models.registry().all_models_json();
        let trusted = self.workspace.project_trusted();
        self.extensions.bind(extensions, catalog, trusted);
        self.refresh_extension_state();
    }

    /// Brings the keys only the session knows up to date in the extensions' mirror: called
    /// after every command and action, which are what change them.
    pub fn refresh_extension_state(&self) {
        if !self.extensions.mirrors() {
            return;
        }
        let next = self.next_call();
        let extensions = self.extensions.extensions();
        let env = tool_env(
            self.workspace.config(),
            self.preferences.settings(),
            self.models.model(),
        );
        let all_tools = NextCall {
            tools: self.tools.all(env, extensions),
            system_prompt: String::new(),
        };
        self.extensions.refresh(SessionKeys {
            model: self.models.model(),
            thinking_level: self.models.thinking_level(),
            active_tools: next.tool_names(),
            all_tools: all_tools.tool_descriptions(),
            system_prompt: next.system_prompt,
            commands: self.slash_commands(),
            available_models: self.models.available_models(),
        });
    }

    /// Carries out an extension action that changes the session without replacing it (the
    /// model, the registry, the active tools, a custom message, `get_state`); gives back the
    /// others (the front-end's: dialogs, session replacement, reload, shutdown, …).
    pub async fn apply_extension_action(
        &mut self,
        action: ExtensionAction,
    ) -> Result<Result<Value, String>, ExtensionAction> {
        Ok(match action {
            ExtensionAction::SetThinkingLevel { level } => {
                self.set_thinking_level(level).await;
                Ok(Value::Null)
            }
            ExtensionAction::SetModel { provider, model_id } => Ok(Value::Bool(
                self.set_model(&provider, &model_id).await.is_ok(),
            )),
            ExtensionAction::SendMessage {
                message,
                trigger_turn,
                deliver_as,
            } => match crate::extension_hooks::custom_message(&message) {
                Ok(message) => {
                    // pi's `sendMessage` (ext §7.4): delivered by `deliverAs` and the run state.
                    let message = AgentMessage::Custom(message);
                    if deliver_as.as_deref() == Some("nextTurn") {
                        self.extensions.hold_for_next_turn(message);
                    } else if self.runs.is_streaming() {
                        crate::extension_actions::queue_for_run(
                            &self.conversation,
                            message,
                            deliver_as.as_deref(),
                        );
                    } else if trigger_turn {
                        if let Err(err) = self.models.check_credentials() {
                            return Ok(Err(err.to_string()));
                        }
                        if let (Some(spec), services) = self.run_inputs(None) {
                            self.runs.start(spec, vec![message], services);
                        }
                    } else {
                        crate::extension_actions::record_custom_message(
                            &self.conversation,
                            &self.events,
                            message,
                        )
                        .await;
                    }
                    Ok(Value::Null)
                }
                Err(err) => Err(format!("send_message: malformed message: {err}")),
            },
            ExtensionAction::SetActiveTools { names } => {
                // From the next model call on, also in the run that streams now.
                self.tools.set_active(names);
                if self.runs.is_streaming() {
                    let NextCall {
                        tools,
                        system_prompt,
                    } = self.next_call();
                    self.conversation.lock().tools_now = Some(crate::conversation::ToolsNow {
                        tools,
                        system_prompt,
                    });
                }
                Ok(Value::Null)
            }
            ExtensionAction::RegisterProvider { name, config } => self
                .models
                .register_provider(&name, config)
                .map(|()| Value::Null)
                .map_err(|e| e.to_string()),
            // A write to a model object the host handed out (docs/extensions.md §4).
            ExtensionAction::UpdateModel {
                provider,
                model_id,
                patch,
            } => tau_ai::registry::ModelPatch::from_json(&patch).and_then(|patch| {
                if self.models.patch_model(&provider, &model_id, &patch) {
                    Ok(Value::Null)
                } else {
                    Err(format!("update_model: no model {provider}/{model_id}"))
                }
            }),
            ExtensionAction::UnregisterProvider { name } => {
                self.models.unregister_provider(&name);
                Ok(Value::Null)
            }
            ExtensionAction::GetState => Ok(self.extensions.snapshot()),
            other => return Err(other),
        })
    }

    /// A client's change of a preference (`set_steering_mode`, `set_auto_retry`,
    /// `set_locale`, …), saved where pi saves it; the run task sees new queue modes at once.
    pub fn set_preference(&mut self, preference: Preference) {
        if let Some(modes) = self.preferences.set(preference) {
            self.conversation.set_queue_modes(modes);
        }
    }

    /// `ctx.reload()`: settings (and the queue modes they set), skills and prompt templates
    /// read from disk again.
    pub fn reload_resources(&mut self) {
        let config = self.workspace.config();
        let modes = self.preferences.reload(
            &config.agent_dir,
            &config.cwd,
            self.workspace.project_trusted(),
        );
        self.conversation.set_queue_modes(modes);
        self.todos
            .set_clear_delay(crate::todos::clear_delay(self.preferences.settings()));
        for warning in self.permissions.load_rules(self.preferences.settings()) {
            tracing::warn!("{warning}");
        }
        self.workspace.reload_resources();
    }

    /// Sets the display name (trimmed) and announces it with `session_info_changed`.
    pub async fn set_session_name(&mut self, name: &str) -> Result<(), SessionError> {
        crate::extension_actions::set_session_name(&self.conversation, &self.events, name).await
    }

    /// Empties both queues and returns what they held (`clear_queue`).
    pub async fn clear_queues(&mut self) -> (Vec<String>, Vec<String>) {
        let (steering, follow_up, update) = self.conversation.clear_queues();
        if let Some(update) = update {
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
        let names = self.tools.set_host_tools(tools)?;
        // The client runs its own tools: it asks its user itself if it wants to.
        self.permissions.set_exempt(names.clone());
        Ok(names)
    }

    /// Switches to `provider/id` (only models with credentials count) and re-applies the
    /// thinking level. The model becomes the settings' default, as in pi.
    pub async fn set_model(&mut self, provider: &str, id: &str) -> Result<Model, SessionError> {
        let before = self.models.choice();
        let changed = self.models.set_model(provider, id)?;
        let model = changed.model.clone();
        self.record_choice(changed, before, "set").await;
        model.ok_or_else(|| SessionError::ModelNotFound {
            provider: provider.to_string(),
            id: id.to_string(),
        })
    }

    /// The next model of the scope (when one is set) or of all available models; `None` when
    /// there are fewer than two to choose from.
    pub async fn cycle_model(&mut self) -> Option<(Model, ThinkingLevel, bool)> {
        let before = self.models.choice();
        let (changed, is_scoped) = self.models.cycle_model()?;
        let model = changed.model.clone()?;
        self.record_choice(changed, before, "cycle").await;
        Some((model, self.models.thinking_level(), is_scoped))
    }

    /// Sets the thinking level, clamped to the model; `thinking_level_changed` is emitted when
    /// the effective level changes.
    pub async fn set_thinking_level(&mut self, level: ThinkingLevel) {
        let before = self.models.choice();
        let changed = self.models.set_thinking_level(level);
        let changed = Changed {
            model: None,
            thinking_level: changed,
        };
        self.record_choice(changed, before, "set").await;
    }

    /// The next supported level (wrapping); `None` for a model without reasoning.
    pub async fn cycle_thinking_level(&mut self) -> Option<ThinkingLevel> {
        let before = self.models.choice();
        let changed = self.models.cycle_thinking_level()?;
        let changed = Changed {
            model: None,
            thinking_level: changed,
        };
        self.record_choice(changed, before, "cycle").await;
        Some(self.models.thinking_level())
    }

    /// Writes a model or level change to the session file and the settings (pi's
    /// `defaultProvider`/`defaultModel`, and `defaultThinkingLevel` unless it is `off` on a
    /// model without reasoning), announces a new level, then tells the extensions what
    /// changed since `before`.
    async fn record_choice(
        &mut self,
        changed: Changed,
        before: (Option<Model>, ThinkingLevel),
        source: &str,
    ) {
        if let Some(model) = &changed.model {
            self.conversation
                .persist(|store| store.append_model_change(&model.provider, &model.id));
            self.preferences.save(&[
                ("defaultProvider", serde_json::json!(model.provider)),
                ("defaultModel", serde_json::json!(model.id)),
            ]);
        }
        if let Some(level) = changed.thinking_level {
            self.conversation
                .persist(|store| store.append_thinking_level_change(level.as_str()));
            let reasons = self.models.model().is_some_and(|m| m.reasoning);
            if reasons || level != ThinkingLevel::Off {
                self.preferences
                    .save(&[("defaultThinkingLevel", serde_json::json!(level))]);
                self.models.set_default_level(level);
            }
            self.events
                .emit(SessionEvent::ThinkingLevelChanged { level })
                .await;
        }
        if self.tools.mcp_client().started() {
            let sampler = self
                .runs
                .summarizer(&self.models, &self.preferences, &self.conversation)
                .ok();
            self.tools.mcp_client().set_sampler(sampler);
        }
        let now = (self.models.model(), self.models.thinking_level());
        self.extensions.announce_choice(before, now, source).await;
    }

    /// After an abort, messages still queued start a new run (pi's behaviour, decision 10).
    pub fn continue_if_queued(&mut self) {
        if self.conversation.has_queued()
            && !self.runs.is_streaming()
            && self.models.check_credentials().is_ok()
            && let (Some(spec), services) = self.run_inputs(None)
        {
            self.runs.start(spec, Vec::new(), services);
        }
    }

    /// Starts the MCP servers (in parallel; this returns at once): their tools join the
    /// session's as each server lists them, and their states go out as `mcp_server_status`
    /// events; `features` says what they may ask of this front-end (decision T129). Call it
    /// inside the runtime, after `ready`, once per session.
    pub fn start_mcp(
        &mut self,
        servers: Vec<crate::mcp::McpServer>,
        mut options: crate::mcp::McpOptions,
        features: crate::mcp_client::McpClientFeatures,
    ) {
        let config = self.workspace.config();
        // Where `tau mcp login` keeps the HTTP servers' tokens (decision T127).
        options
            .agent_dir
            .get_or_insert_with(|| config.agent_dir.clone());
        let dir = crate::mcp::process_dir(config);
        let cwd = config.cwd.clone();
        let servers: Vec<_> = servers
            .into_iter()
            .map(|server| crate::mcp::placed_in(server, &dir))
            .collect();
        if servers.is_empty() {
            return;
        }
        let sampler = self
            .runs
            .summarizer(&self.models, &self.preferences, &self.conversation)
            .ok();
        let host = self.tools.mcp_client_mut().start(
            features,
            &cwd,
            self.events.downgrade(),
            Arc::clone(&self.permissions),
            sampler,
        );
        self.tools.start_mcp(servers, options, Some(host));
    }

    /// The slash commands, as `get_commands` and an extension's `pi.getCommands()` list them:
    /// the workspace's (extension commands, templates, skills), then the MCP servers'
    /// prompts (`source` `mcp`, decision T95).
    pub fn slash_commands(&self) -> Vec<serde_json::Value> {
        let mut commands = self
            .workspace
            .slash_commands(self.extensions.extensions().map(Arc::as_ref));
        if let Some(mcp) = self.tools.mcp() {
            commands.extend(mcp.prompt_commands());
        }
        commands
    }

    /// Starts an accepted prompt's run on its own task.
    pub fn launch(&mut self, launch: Launch) {
        self.todos.reset_reminders();
        let mut prompts = vec![launch.prompt];
        prompts.append(&mut self.extensions.take_next_turn());
        prompts.extend(launch.extra);
        if let (Some(spec), services) = self.run_inputs(launch.system_prompt) {
            self.runs.start(spec, prompts, services);
        }
    }

    /// What the next model call offers: the tools and the system prompt a run would get now
    /// (`get_state`'s `dumpTools` and `systemPrompt`, `before_agent_start`'s `systemPrompt`).
    pub fn next_call(&self) -> NextCall {
        let env = tool_env(
            self.workspace.config(),
            self.preferences.settings(),
            self.models.model(),
        );
        let tools = self.tools.offered(env, self.extensions.extensions());
        let system_prompt = self
            .workspace
            .system_prompt(&tools, self.preferences.locale());
        NextCall {
            tools,
            system_prompt,
        }
    }

    /// What a run streams with (the current model, tools and system prompt; `None` without a
    /// model) and what its task needs besides.
    fn run_inputs(&mut self, system_prompt: Option<String>) -> (Option<RunSpec>, RunServices) {
        self.conversation.lock().tools_now = None;
        let spec = self.models.model().cloned().map(|model| {
            let (api_key, headers, base_url) = match self.models.registry().request_config(&model) {
                Ok(config) => (
                    config.api_key.map(|k| k.expose().to_string()),
                    config.headers,
                    config.base_url,
                ),
                Err(_) => (None, Vec::new(), model.base_url.clone()),
            };
            let client = self.runs.client();
            let next = self.next_call();
            RunSpec {
                client,
                model: Model { base_url, ..model },
                system_prompt: Some(system_prompt.unwrap_or(next.system_prompt)),
                tools: next.tools,
                options: tau_ai::provider::StreamOptions {
                    api_key,
                    headers,
                    reasoning: Some(self.models.thinking_level()),
                    session_id: Some(self.conversation.session_id()),
                    hooks: self.extensions.provider_hooks(),
                    ..self
                        .preferences
                        .provider_options(self.conversation.idle_cap())
                },
            }
        });
        let summarizer = self
            .runs
            .summarizer(&self.models, &self.preferences, &self.conversation)
            .ok();
        self.tools.mcp_client().set_sampler(summarizer.clone());
        let services = RunServices {
            summarizer,
            conversation: Arc::clone(&self.conversation),
            events: self.events.clone(),
            retry: self.preferences.retry_settings(),
            extensions: self.extensions.extensions().cloned(),
            block_images: self.preferences.settings().block_images(),
            todos: Arc::clone(&self.todos),
            mcp: self.tools.mcp_run_tools(self.extensions.extensions()),
            permissions: Arc::clone(&self.permissions),
        };
        (spec, services)
    }

    /// `compact` (rpc.md §3.13): ends a running turn, then compacts on a task of its own, so
    /// that the input loop keeps answering meanwhile and `abort` can end it (T76). `done`
    /// gets the outcome right after `compaction_end` is written. Messages queued meanwhile
    /// are delivered by a run that follows at once; a prompt meanwhile is held until it ends.
    pub async fn start_compact(&mut self, custom_instructions: Option<String>, done: CompactDone) {
        self.runs.abort().await;
        let summarizer = self
            .runs
            .summarizer(&self.models, &self.preferences, &self.conversation)
            .map_err(|e| e.to_string());
        let (spec, services) = self.run_inputs(None);
        self.runs.start_compaction(
            spec,
            services,
            ManualCompaction {
                custom_instructions,
                summarizer,
                done,
            },
        );
    }

    /// stdin has closed (T77): the work under way may finish (decision 11), but nothing in it
    /// may wait on the client or on a silent provider any more. Pending host-tool calls fail
    /// with xcsh's disconnect text (later ones at once), a retry back-off ends and no new one
    /// starts, and every provider stream, this run's and later ones', fails after
    /// [`crate::runs::SILENCE_AFTER_INPUT_CLOSED`] without data.
    pub fn input_closed(&self) {
        self.tools.host_bridge().disconnect();
        self.permissions.close();
        self.tools.mcp_client().dialogs().close();
        self.conversation
            .close_input(crate::runs::SILENCE_AFTER_INPUT_CLOSED);
        self.conversation.abort_retry();
    }
}

impl crate::extension_hooks::DiscoveredResources {
    /// Adds the paths to the session's sources (as `--skill`/`--prompt-template` would) and
    /// loads its skills and templates again.
    pub fn join(self, session: &mut AgentSession) {
        session
            .workspace
            .add_resource_paths(self.skills, self.prompts);
    }
}
