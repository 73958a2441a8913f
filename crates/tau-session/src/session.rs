//! [`AgentSession`]: the state of one conversation and the operations on it that exist so far.

use std::path::PathBuf;

use tau_agent::{AgentMessage, InterruptMode, QueueMode};
use tau_ai::registry::{Registry, ScopedModel};
use tau_ai::{Model, ThinkingLevel, clamp_thinking_level};

use crate::models::supported_levels;
use crate::{
    BUILTIN_TOOL_NAMES, EventSink, HostToolDefinition, HostToolError, HostToolRegistry,
    SessionEvent, Settings, StartupModel, TodoPhase, paths,
};

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
}

/// One conversation.
#[derive(Debug)]
pub struct AgentSession {
    settings: Settings,
    events: EventSink,
    registry: Registry,
    /// `--models` / `enabledModels`, for `cycle_model`.
    scope: Vec<ScopedModel>,
    session_id: String,
    session_file: Option<PathBuf>,
    session_name: Option<String>,
    model: Option<Model>,
    thinking_level: ThinkingLevel,
    steering_mode: QueueMode,
    follow_up_mode: QueueMode,
    interrupt_mode: InterruptMode,
    auto_compaction: bool,
    auto_retry: bool,
    messages: Vec<AgentMessage>,
    steering_queue: Vec<String>,
    follow_up_queue: Vec<String>,
    todo_phases: Vec<TodoPhase>,
    host_tools: HostToolRegistry,
}

impl AgentSession {
    /// Creates a fresh session starting on `startup`'s model. The session file is only named
    /// here; like pi, tau writes it once there is something worth keeping.
    pub fn new(
        config: SessionConfig,
        settings: Settings,
        registry: Registry,
        startup: StartupModel,
        events: EventSink,
    ) -> Self {
        let session_id = uuid::Uuid::now_v7().to_string();
        let session_file = (!config.no_session).then(|| {
            let dir = config
                .session_dir
                .clone()
                .or_else(|| settings.session_dir().map(|d| paths::expand_tilde(&d)))
                .unwrap_or_else(|| paths::default_session_dir(&config.agent_dir, &config.cwd));
            dir.join(paths::session_file_name(
                time::OffsetDateTime::now_utc(),
                &session_id,
            ))
        });
        Self {
            steering_mode: settings.steering_mode(),
            follow_up_mode: settings.follow_up_mode(),
            interrupt_mode: settings.interrupt_mode(),
            auto_compaction: settings.compaction_enabled(),
            auto_retry: settings.retry_enabled(),
            settings,
            events,
            registry,
            scope: startup.scope,
            session_id,
            session_file,
            session_name: config.name,
            model: startup.model,
            thinking_level: startup.thinking_level,
            messages: Vec::new(),
            steering_queue: Vec::new(),
            follow_up_queue: Vec::new(),
            todo_phases: Vec::new(),
            host_tools: HostToolRegistry::default(),
        }
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }
    pub fn session_id(&self) -> &str {
        &self.session_id
    }
    pub fn session_file(&self) -> Option<&PathBuf> {
        self.session_file.as_ref()
    }
    pub fn session_name(&self) -> Option<&str> {
        self.session_name.as_deref()
    }
    pub fn model(&self) -> Option<&Model> {
        self.model.as_ref()
    }
    pub fn registry(&self) -> &Registry {
        &self.registry
    }
    pub fn thinking_level(&self) -> ThinkingLevel {
        self.thinking_level
    }
    /// The thinking levels the current model supports (only `off` without a model).
    pub fn available_thinking_levels(&self) -> Vec<ThinkingLevel> {
        supported_levels(self.model.as_ref())
    }
    pub fn steering_mode(&self) -> QueueMode {
        self.steering_mode
    }
    pub fn follow_up_mode(&self) -> QueueMode {
        self.follow_up_mode
    }
    pub fn interrupt_mode(&self) -> InterruptMode {
        self.interrupt_mode
    }
    pub fn auto_compaction_enabled(&self) -> bool {
        self.auto_compaction
    }
    pub fn auto_retry_enabled(&self) -> bool {
        self.auto_retry
    }
    /// True while an agent run is active (runs arrive with the agent-loop issue).
    pub fn is_streaming(&self) -> bool {
        false
    }
    /// True while a compaction runs (compaction arrives with its own issue).
    pub fn is_compacting(&self) -> bool {
        false
    }
    /// The in-memory LLM context.
    pub fn messages(&self) -> &[AgentMessage] {
        &self.messages
    }
    pub fn steering_queue(&self) -> &[String] {
        &self.steering_queue
    }
    pub fn follow_up_queue(&self) -> &[String] {
        &self.follow_up_queue
    }
    /// Queued steering plus follow-up messages (pi's `pendingMessageCount`).
    pub fn pending_message_count(&self) -> usize {
        self.steering_queue.len() + self.follow_up_queue.len()
    }
    /// xcsh's `queuedMessageCount`: the pending messages plus hidden next-turn messages,
    /// of which tau has none yet.
    pub fn queued_message_count(&self) -> usize {
        self.pending_message_count()
    }
    pub fn todo_phases(&self) -> &[TodoPhase] {
        &self.todo_phases
    }
    pub fn host_tools(&self) -> &HostToolRegistry {
        &self.host_tools
    }

    pub fn set_steering_mode(&mut self, mode: QueueMode) {
        self.steering_mode = mode;
    }
    pub fn set_follow_up_mode(&mut self, mode: QueueMode) {
        self.follow_up_mode = mode;
    }
    pub fn set_interrupt_mode(&mut self, mode: InterruptMode) {
        self.interrupt_mode = mode;
    }
    pub fn set_auto_compaction(&mut self, enabled: bool) {
        self.auto_compaction = enabled;
    }
    pub fn set_auto_retry(&mut self, enabled: bool) {
        self.auto_retry = enabled;
    }

    /// Sets the display name (trimmed) and announces it with `session_info_changed`.
    pub async fn set_session_name(&mut self, name: &str) -> Result<(), SessionError> {
        let name = name.trim();
        if name.is_empty() {
            return Err(SessionError::EmptySessionName);
        }
        self.session_name = Some(name.to_string());
        self.events
            .emit(SessionEvent::SessionInfoChanged {
                name: Some(name.to_string()),
            })
            .await;
        Ok(())
    }

    /// Empties both queues and returns what they held (`clear_queue`).
    pub async fn clear_queues(&mut self) -> (Vec<String>, Vec<String>) {
        let steering = std::mem::take(&mut self.steering_queue);
        let follow_up = std::mem::take(&mut self.follow_up_queue);
        if !steering.is_empty() || !follow_up.is_empty() {
            self.events
                .emit(SessionEvent::QueueUpdate {
                    steering: Vec::new(),
                    follow_up: Vec::new(),
                })
                .await;
        }
        (steering, follow_up)
    }

    /// Replaces the todo list.
    pub fn set_todo_phases(&mut self, phases: Vec<TodoPhase>) {
        self.todo_phases = phases;
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
        self.messages.iter().rev().find_map(|m| match m {
            AgentMessage::Assistant(a)
                if !(a.stop_reason == tau_ai::StopReason::Aborted && a.content.is_empty()) =>
            {
                let text: String = a
                    .content
                    .iter()
                    .filter_map(|c| match c {
                        tau_ai::AssistantContent::Text(t) => Some(t.text.as_str()),
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
        self.registry
            .available_models()
            .into_iter()
            .cloned()
            .collect()
    }

    /// Switches to `provider/id` (only models with credentials count) and re-applies the
    /// thinking level. Session-local: settings are not rewritten (decision 12).
    pub async fn set_model(&mut self, provider: &str, id: &str) -> Result<Model, SessionError> {
        let model = self.registry.find(provider, id).cloned().ok_or_else(|| {
            SessionError::ModelNotFound {
                provider: provider.to_string(),
                id: id.to_string(),
            }
        })?;
        self.switch_model(model.clone(), None).await;
        Ok(model)
    }

    /// The next model of the scope (when one is set) or of all available models; `None` when
    /// there are fewer than two to choose from.
    pub async fn cycle_model(&mut self) -> Option<(Model, ThinkingLevel, bool)> {
        let scoped: Vec<ScopedModel> = self
            .scope
            .iter()
            .filter(|s| self.registry.has_auth(&s.model.provider))
            .cloned()
            .collect();
        let is_scoped = !self.scope.is_empty();
        let candidates: Vec<ScopedModel> = if is_scoped {
            scoped
        } else {
            self.available_models()
                .into_iter()
                .map(|model| ScopedModel {
                    model,
                    thinking_level: None,
                })
                .collect()
        };
        if candidates.len() < 2 {
            return None;
        }
        let current = self.model.as_ref().and_then(|m| {
            candidates
                .iter()
                .position(|c| c.model.provider == m.provider && c.model.id == m.id)
        });
        let next = candidates[(current.unwrap_or(0) + 1) % candidates.len()].clone();
        self.switch_model(next.model.clone(), next.thinking_level)
            .await;
        Some((next.model, self.thinking_level, is_scoped))
    }

    async fn switch_model(&mut self, model: Model, level: Option<ThinkingLevel>) {
        let previous_reasons = self.model.as_ref().is_some_and(|m| m.reasoning);
        let requested = level.unwrap_or_else(|| {
            if previous_reasons {
                self.thinking_level
            } else {
                self.settings.default_thinking_level()
            }
        });
        self.model = Some(model);
        self.apply_thinking_level(requested).await;
    }

    /// Sets the thinking level, clamped to the model; `thinking_level_changed` is emitted when
    /// the effective level changes.
    pub async fn set_thinking_level(&mut self, level: ThinkingLevel) {
        self.apply_thinking_level(level).await;
    }

    /// The next supported level (wrapping); `None` for a model without reasoning.
    pub async fn cycle_thinking_level(&mut self) -> Option<ThinkingLevel> {
        if !self.model.as_ref().is_some_and(|m| m.reasoning) {
            return None;
        }
        let levels = self.available_thinking_levels();
        let current = levels
            .iter()
            .position(|l| *l == self.thinking_level)
            .unwrap_or(0);
        let next = *levels.get((current + 1) % levels.len().max(1))?;
        self.apply_thinking_level(next).await;
        Some(self.thinking_level)
    }

    async fn apply_thinking_level(&mut self, requested: ThinkingLevel) {
        let effective = clamp_thinking_level(requested, &supported_levels(self.model.as_ref()));
        if effective != self.thinking_level {
            self.thinking_level = effective;
            self.events
                .emit(SessionEvent::ThinkingLevelChanged { level: effective })
                .await;
        }
    }
}
