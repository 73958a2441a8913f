//! The state a run shares with the session while it streams: the context and the two
//! queues. Short critical sections only (no lock is held across an await), so a std mutex.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use tau_protocol::{SessionEvent, SessionSaveState};

use futures_util::future::BoxFuture;
use tau_agent::{RunHost, convert_to_llm};
use tau_protocol::{AgentEvent, AgentMessage, AssistantMessage, Message, QueueMode, StopReason};
use tau_protocol::{ImageContent, TextContent, UserContent, UserContentBlock, UserMessage};

use crate::EventSink;
use crate::retry::{RetrySettings, RetryState, is_retryable_reply};
use crate::store::{SaveState, SessionStore, StoreError};

mod views;
pub use views::SessionStats;

/// A queued message and the text reported for it in `queue_update`; an extension's custom
/// message has none (pi does not show those in the queue).
#[derive(Debug, Clone)]
pub(crate) struct Queued {
    pub text: Option<String>,
    pub message: AgentMessage,
}

#[derive(Debug, Default)]
pub(crate) struct State {
    /// The context; each message is shared with the session file's entry for it
    /// (`EntryKind::Message`), so a long session is held once.
    pub messages: Vec<Arc<AgentMessage>>,
    pub steering: VecDeque<Queued>,
    pub follow_up: VecDeque<Queued>,
    /// Queued texts a run has taken but not yet delivered (true: steering). pi reports a
    /// queued message until its `message_start`, so `queue_update` and the pending count
    /// keep them until then.
    pub delivering: VecDeque<(bool, Option<String>)>,
    pub steering_mode: QueueMode,
    pub follow_up_mode: QueueMode,
    pub interrupt_mode: tau_protocol::InterruptMode,
    /// A run is streaming: messages from outside the loop (the RPC `bash` command) wait in
    /// `held_back` until it ends.
    pub run_active: bool,
    pub held_back: Vec<AgentMessage>,
    /// The automatic-retry series under way, and the back-off `abort_retry` cancels.
    pub retry: RetryState,
    pub retry_sleep: Option<tokio_util::sync::CancellationToken>,
    /// A compaction is summarising (`get_state.isCompacting`).
    pub compacting: bool,
    /// The tools and system prompt for the next model call of the running run, when an
    /// extension changed the active tools during it.
    pub tools_now: Option<ToolsNow>,
}

/// Tools and system prompt that replace a running run's own.
#[derive(Clone)]
pub(crate) struct ToolsNow {
    pub tools: Vec<Arc<dyn tau_agent::AgentTool>>,
    pub system_prompt: String,
}

impl std::fmt::Debug for ToolsNow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.tools.iter().map(|t| t.name()).collect();
        f.debug_struct("ToolsNow")
            .field("tools", &names)
            .finish_non_exhaustive()
    }
}

impl State {
    /// The queue texts as `queue_update` reports them: those taken but not yet delivered
    /// (the oldest), then those still waiting.
    pub fn queue_update(&self) -> SessionEvent {
        let texts = |steering: bool, queue: &VecDeque<Queued>| {
            self.delivering
                .iter()
                .filter(|(s, _)| *s == steering)
                .filter_map(|(_, text)| text.clone())
                .chain(queue.iter().filter_map(|q| q.text.clone()))
                .collect()
        };
        SessionEvent::QueueUpdate {
            steering: texts(true, &self.steering),
            follow_up: texts(false, &self.follow_up),
        }
    }

    /// Queued messages not yet delivered, taken or not (pi's `pendingMessageCount`).
    pub fn pending_count(&self) -> usize {
        self.steering.len() + self.follow_up.len() + self.delivering.len()
    }
}

/// Shared conversation state, and the session file every finished message is appended to.
/// Front-ends read it through [`crate::AgentSession::conversation`] (`views.rs`); only the
/// session and its run task change it.
#[derive(Debug)]
pub struct Conversation {
    state: Mutex<State>,
    store: Mutex<SessionStore>,
    /// Shared by every provider request of the session: tightened when stdin closes.
    idle_cap: tau_ai::provider::IdleCap,
    input_closed: std::sync::atomic::AtomicBool,
    /// The `running` flag of the session's current run task (see `runs.rs`), so that
    /// what acts outside the session's input loop knows whether a run streams.
    current_run: Mutex<Option<Arc<std::sync::atomic::AtomicBool>>>,
    /// Who hears when the session file stops or starts being written again.
    saves: Mutex<SaveWatch>,
    /// Told when a run task stops streaming (its `running` flag cleared).
    run_ended: tokio::sync::Notify,
}

/// What the client was last told of the session file (`session_save_status`).
#[derive(Debug, Default)]
struct SaveWatch {
    events: Option<crate::outbound::WeakEventSink>,
    failing: bool,
}

/// The session store, locked; when let go, a change in whether its file is written is told to
/// the client (every write goes through one of these, so none is missed).
pub(crate) struct StoreGuard<'a> {
    store: MutexGuard<'a, SessionStore>,
    saves: &'a Mutex<SaveWatch>,
}

impl std::ops::Deref for StoreGuard<'_> {
    type Target = SessionStore;
    fn deref(&self) -> &SessionStore {
        &self.store
    }
}

impl std::ops::DerefMut for StoreGuard<'_> {
    fn deref_mut(&mut self) -> &mut SessionStore {
        &mut self.store
    }
}

impl Drop for StoreGuard<'_> {
    fn drop(&mut self) {
        let state = self.store.save_state();
        let mut watch = self
            .saves
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let failing = matches!(state, SaveState::Failing { .. });
        if failing == watch.failing {
            return;
        }
        watch.failing = failing;
        let file = self
            .store
            .file_path()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        let event = match state {
            SaveState::Failing { error, unsaved } => {
                tracing::error!(
                    "cannot write the session file {file}: {error}; {unsaved} entries wait"
                );
                SessionEvent::SessionSaveStatus {
                    state: SessionSaveState::Failing,
                    file,
                    error: Some(error),
                    unsaved: Some(unsaved as u64),
                }
            }
            SaveState::Saved => {
                tracing::info!("the session file {file} is written again");
                SessionEvent::SessionSaveStatus {
                    state: SessionSaveState::Saved,
                    file,
                    error: None,
                    unsaved: None,
                }
            }
        };
        if let Some(events) = &watch.events {
            events.emit_now(event);
        }
    }
}

impl Conversation {
    pub(crate) fn new(store: SessionStore) -> Self {
        Self {
            state: Mutex::default(),
            store: Mutex::new(store),
            idle_cap: tau_ai::provider::IdleCap::default(),
            input_closed: std::sync::atomic::AtomicBool::new(false),
            current_run: Mutex::default(),
            saves: Mutex::default(),
            run_ended: tokio::sync::Notify::new(),
        }
    }

    /// The run task clears its `running` flag through this, so that [`Conversation::idle`]
    /// wakes.
    pub(crate) fn end_run(&self, running: &std::sync::atomic::AtomicBool) {
        running.store(false, std::sync::atomic::Ordering::Release);
        self.run_ended.notify_waiters();
    }

    /// Writes the entries a failed write left waiting, if the disk takes them now (the end of
    /// the session: nothing else would try again).
    pub fn retry_save(&self) {
        if let Err(err) = self.store().retry_save() {
            tracing::error!("the session file could not be completed: {err}");
        }
    }

    /// Returns once no run streams (at once when none does): an extension's `waitForIdle`,
    /// answered beside the input loop so the run it waits for can go on.
    pub async fn idle(&self) {
        loop {
            let ended = self.run_ended.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            if !self.is_streaming() {
                return;
            }
            ended.await;
        }
    }

    /// Where `session_save_status` events go.
    pub(crate) fn watch_saves(&self, events: &EventSink) {
        self.saves
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .events = Some(events.downgrade());
    }

    /// True from the moment a prompt is accepted until its run has ended, as
    /// `Runs::is_streaming` says.
    pub fn is_streaming(&self) -> bool {
        self.current_run
            .lock()
            .ok()
            .and_then(|run| {
                run.as_ref()
                    .map(|r| r.load(std::sync::atomic::Ordering::Acquire))
            })
            .unwrap_or(false)
    }

    /// Records the `running` flag of a run task that starts.
    pub(crate) fn set_current_run(&self, running: Arc<std::sync::atomic::AtomicBool>) {
        if let Ok(mut run) = self.current_run.lock() {
            *run = Some(running);
        }
    }

    /// The silence cap every provider request of the session carries.
    pub(crate) fn idle_cap(&self) -> tau_ai::provider::IdleCap {
        self.idle_cap.clone()
    }

    /// stdin has closed: provider streams may stay silent for `silence` at most from now on.
    pub(crate) fn close_input(&self, silence: std::time::Duration) {
        self.input_closed
            .store(true, std::sync::atomic::Ordering::Release);
        self.idle_cap.tighten(silence);
    }

    pub(crate) fn input_closed(&self) -> bool {
        self.input_closed.load(std::sync::atomic::Ordering::Acquire)
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the vectors half-updated in a way
        // that matters more than losing the conversation, so poisoning is ignored.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The session store. Never held together with [`Conversation::lock`] in the other
    /// order: state first, then store.
    pub(crate) fn store(&self) -> StoreGuard<'_> {
        StoreGuard {
            store: self
                .store
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
            saves: &self.saves,
        }
    }

    /// Appends an entry. A failed write (a full disk) must not end the conversation: the
    /// entry stays in the session and waits for the next write, and the client is told
    /// through `session_save_status` when the guard is let go.
    pub(crate) fn persist<T>(
        &self,
        append: impl FnOnce(&mut SessionStore) -> Result<T, StoreError>,
    ) {
        if let Err(err) = append(&mut self.store()) {
            tracing::debug!("session write failed: {err}");
        }
    }
}

/// [`convert_to_llm`] over the shared context. It converts each message on its own (and
/// clones it), so converting them one at a time gives the same list.
pub(crate) fn context_to_llm(messages: &[Arc<AgentMessage>]) -> Vec<Message> {
    messages
        .iter()
        .flat_map(|m| convert_to_llm(std::slice::from_ref(&**m)))
        .collect()
}

impl Host {
    /// Waits until the input loop has carried out what the extensions' `agent_end` handlers
    /// did (a `sendUserMessage` queued as a follow-up), so the client hears it before the run's
    /// end, as in pi where it happens inside the handler. If the loop is itself waiting on this
    /// run (an `abort`, stdin closing), the wait gives up quickly.
    async fn actions_applied(&self, extensions: &tau_extensions::Extensions) {
        if self.cancel.is_cancelled() || !extensions.subscribed("agent_end") {
            return;
        }
        tokio::select! {
            () = extensions.actions_applied() => {}
            () = self.cancel.cancelled() => {}
            () = tokio::time::sleep(std::time::Duration::from_millis(500)) => {}
        }
    }
}

/// The [`RunHost`] of a session's runs.
pub(crate) struct Host {
    pub conversation: Arc<Conversation>,
    pub events: EventSink,
    /// Automatic retry as set when the run started.
    pub retry: RetrySettings,
    pub context_window: u64,
    /// Set just before the task's first `agent_end` is written, and kept: what remains of
    /// the task then is post-run work (a retry or a compaction, with the runs they continue),
    /// during which a prompt is held rather than refused, because pi 0.79 clients prompt as
    /// soon as they read `agent_end`, whatever follows it.
    pub ended: Arc<std::sync::atomic::AtomicBool>,
    /// The loaded extensions, told of the run's events before the RPC client is.
    pub extensions: Option<Arc<tau_extensions::Extensions>>,
    /// `images.blockImages`: images are replaced by a placeholder text before the model
    /// sees the context.
    pub block_images: bool,
    /// The extension `turn_start`/`turn_end` payloads carry the turn's index within the run.
    pub turn_index: std::sync::atomic::AtomicU64,
    /// The run's abort token: extension calls under way when it fires are cut off.
    pub cancel: tokio_util::sync::CancellationToken,
    /// The MCP servers' tools, whose lists change while the run goes on.
    pub mcp: Option<crate::mcp::McpRunTools>,
    /// Checked after the extensions' `tool_call` hook, which may block first (as in pi).
    pub permissions: Arc<crate::permissions::Permissions>,
}

fn take(queue: &mut VecDeque<Queued>, mode: QueueMode) -> Vec<Queued> {
    let n = match mode {
        QueueMode::All => queue.len(),
        QueueMode::OneAtATime => queue.len().min(1),
    };
    queue.drain(..n).collect()
}

/// pi's extension payload of an agent event (ext §3.1): `turn_*` carry `turnIndex` and
/// `timestamp`, `agent_end` has no `willRetry`.
fn extension_payload(
    event: &AgentEvent,
    turn: Option<u64>,
) -> Result<serde_json::Value, serde_json::Error> {
    let mut payload = serde_json::to_value(event)?;
    if let serde_json::Value::Object(fields) = &mut payload {
        if let Some(index) = turn {
            fields.insert("turnIndex".into(), index.into());
            fields.insert("timestamp".into(), tau_ai::now_ms().into());
        }
        fields.remove("willRetry");
    }
    Ok(payload)
}

/// The same payload as JSON text; a token's `message_update` goes straight to text.
fn extension_payload_text(
    event: &AgentEvent,
    turn: Option<u64>,
) -> Result<String, serde_json::Error> {
    match event {
        AgentEvent::MessageUpdate { .. } => serde_json::to_string(event),
        _ => serde_json::to_string(&extension_payload(event, turn)?),
    }
}

impl Host {
    /// Dispatches an agent event to the extensions that watch it, in pi's extension payload
    /// (ext §3.1: `turn_*` carry `turnIndex` and `timestamp`, `agent_end` has no
    /// `willRetry`). Nothing is built when no extension watches the event.
    async fn tell_extensions(&self, extensions: &tau_extensions::Extensions, event: &AgentEvent) {
        use std::sync::atomic::Ordering;
        let kind = event.kind();
        let turn = match event {
            AgentEvent::AgentStart => {
                self.turn_index.store(0, Ordering::Relaxed);
                None
            }
            AgentEvent::TurnStart => Some(self.turn_index.load(Ordering::Relaxed)),
            AgentEvent::TurnEnd { .. } => Some(self.turn_index.fetch_add(1, Ordering::Relaxed)),
            _ => None,
        };
        // `message_end` goes to the extensions through `finish_message`, where a handler can
        // replace the message before anyone else sees it.
        if !extensions.subscribed(kind) || kind == "message_end" {
            return;
        }
        if self.cancel.is_cancelled() || kind == "message_update" {
            // After an abort the run ends at once (decision 9); its last events still reach
            // the extensions, without waiting for them. Token deltas are observation only
            // (nothing a handler returns changes them), and a round trip per token would
            // slow the stream several times over (T68).
            if let Ok(text) = extension_payload_text(event, turn) {
                extensions.emit_detached(kind, &text);
            }
            return;
        }
        let Ok(payload) = extension_payload(event, turn) else {
            return;
        };
        extensions
            .emit(payload, Some(&self.cancel), |_, _| {
                std::ops::ControlFlow::Continue(())
            })
            .await;
    }

    /// The converted context as it is sent: without images when settings block them.
    fn for_model(&self, messages: Vec<Message>) -> Vec<Message> {
        if self.block_images {
            tau_agent::block_images(messages)
        } else {
            messages
        }
    }

    /// Takes the queued messages due now; they stay in the reported queue until delivered
    /// ([`RunHost::delivering`]).
    fn take_from(&self, steering: bool) -> Vec<AgentMessage> {
        let mut state = self.conversation.lock();
        let state = &mut *state;
        let (queue, mode) = if steering {
            (&mut state.steering, state.steering_mode)
        } else {
            (&mut state.follow_up, state.follow_up_mode)
        };
        let taken = take(queue, mode);
        state
            .delivering
            .extend(taken.iter().map(|q| (steering, q.text.clone())));
        taken.into_iter().map(|q| q.message).collect()
    }
}

impl RunHost for Host {
    fn reply_ended<'a>(&'a self, reply: &'a AssistantMessage) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if reply.stop_reason == StopReason::Error {
                return;
            }
            let attempt = self.conversation.lock().retry.succeeded();
            if let Some(attempt) = attempt {
                self.events
                    .emit(SessionEvent::AutoRetryEnd {
                        success: true,
                        attempt,
                        final_error: None,
                    })
                    .await;
            }
        })
    }

    fn will_retry(&self, reply: &AssistantMessage) -> bool {
        let retryable = is_retryable_reply(reply, self.context_window);
        self.conversation
            .lock()
            .retry
            .will_retry(&self.retry, retryable)
    }

    fn emit(&self, event: AgentEvent) -> BoxFuture<'_, ()> {
        use std::sync::atomic::Ordering;
        if let AgentEvent::AgentEnd { .. } = &event {
            self.ended.store(true, Ordering::Release);
        }
        Box::pin(async move {
            if let Some(extensions) = &self.extensions {
                self.tell_extensions(extensions, &event).await;
                if matches!(event, AgentEvent::AgentEnd { .. }) {
                    self.actions_applied(extensions).await;
                }
            }
            self.events.emit(SessionEvent::Agent(event)).await;
        })
    }

    fn tools_now(&self) -> Option<(Vec<Arc<dyn tau_agent::AgentTool>>, String)> {
        let now = self.conversation.lock().tools_now.clone()?;
        Some((now.tools, now.system_prompt))
    }

    fn refresh_tools<'a>(
        &'a self,
        current: &'a [Arc<dyn tau_agent::AgentTool>],
    ) -> BoxFuture<'a, Option<Vec<Arc<dyn tau_agent::AgentTool>>>> {
        Box::pin(async move {
            let mcp = self.mcp.as_ref()?;
            Some(mcp.refresh(current, &self.cancel).await)
        })
    }

    fn finish_message(&self, message: AgentMessage) -> BoxFuture<'_, AgentMessage> {
        Box::pin(async move {
            match &self.extensions {
                Some(extensions) if extensions.subscribed("message_end") => {
                    if self.cancel.is_cancelled() {
                        // After an abort: told, not waited for (T64).
                        let value = serde_json::to_value(&message).unwrap_or_default();
                        let event = tau_protocol::extension_event::ExtensionEvent::MessageEnd {
                            message: &value,
                        };
                        extensions.emit_detached(
                            "message_end",
                            &serde_json::to_string(&event).unwrap_or_default(),
                        );
                        return message;
                    }
                    crate::extension_hooks::message_end(extensions, message, &self.cancel).await
                }
                _ => message,
            }
        })
    }

    fn context_override(&self) -> BoxFuture<'_, Option<Vec<Message>>> {
        Box::pin(async move {
            let extensions = self
                .extensions
                .as_ref()
                .filter(|e| e.subscribed("context"))?;
            let messages = self.conversation.lock().messages.clone();
            let replaced =
                crate::extension_hooks::context(extensions, &messages, &self.cancel).await?;
            Some(self.for_model(convert_to_llm(&replaced)))
        })
    }

    fn after_tool_result<'a>(
        &'a self,
        call: &'a tau_protocol::ToolCall,
        arguments: &'a serde_json::Map<String, serde_json::Value>,
        result: tau_protocol::AgentToolResult,
        is_error: bool,
    ) -> BoxFuture<'a, (tau_protocol::AgentToolResult, bool)> {
        Box::pin(async move {
            match &self.extensions {
                Some(extensions) if extensions.subscribed("tool_result") => {
                    crate::extension_hooks::tool_result(
                        extensions,
                        call,
                        arguments,
                        result,
                        is_error,
                        &self.cancel,
                    )
                    .await
                }
                _ => (result, is_error),
            }
        })
    }

    fn before_tool_call<'a>(
        &'a self,
        call: &'a tau_protocol::ToolCall,
        arguments: serde_json::Map<String, serde_json::Value>,
    ) -> BoxFuture<'a, Result<serde_json::Map<String, serde_json::Value>, String>> {
        Box::pin(async move {
            let arguments = match &self.extensions {
                Some(extensions) if extensions.subscribed("tool_call") => {
                    crate::extension_hooks::tool_call(extensions, call, arguments, &self.cancel)
                        .await?
                }
                _ => arguments,
            };
            self.permissions
                .check(call, &arguments, &self.events, &self.cancel)
                .await?;
            Ok(arguments)
        })
    }

    fn push_message(&self, message: AgentMessage) {
        let message = Arc::new(message);
        self.conversation.lock().messages.push(Arc::clone(&message));
        self.conversation
            .persist(|store| store.append_message(message));
    }

    fn llm_context(&self) -> Vec<Message> {
        let messages = context_to_llm(&self.conversation.lock().messages);
        self.for_model(messages)
    }

    fn take_steering(&self) -> Vec<AgentMessage> {
        self.take_from(true)
    }

    fn take_follow_up(&self) -> Vec<AgentMessage> {
        self.take_from(false)
    }

    fn delivering(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let update = {
                let mut state = self.conversation.lock();
                state.delivering.pop_front().map(|_| state.queue_update())
            };
            if let Some(update) = update {
                self.events.emit(update).await;
            }
        })
    }

    fn interrupts_tools(&self) -> bool {
        self.conversation.lock().interrupt_mode == tau_protocol::InterruptMode::Immediate
    }

    fn has_steering(&self) -> bool {
        !self.conversation.lock().steering.is_empty()
    }
}

/// Builds a user message from a prompt's text and images (pi always writes the block form).
pub(crate) fn user_message(text: &str, images: Vec<ImageContent>) -> AgentMessage {
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
