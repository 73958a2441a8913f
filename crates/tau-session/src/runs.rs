//! The run task of a session: starting it, what it does after the agent loop returns
//! (automatic retry, compaction, the held-back `bash` results, `agent_settled`), and how
//! the session asks about it (streaming, post-run work), waits for it or aborts it.
//! Compaction (`compactor.rs`) knows nothing of this module: the run task calls into it, and
//! the session hands a `compact` command here as a [`compactor::ManualCompaction`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tau_protocol::SessionEvent;

use tau_agent::RunSpec;
use tau_protocol::AgentMessage;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::EventSink;
use crate::compactor;
use crate::conversation::{Conversation, Host};
use crate::retry::RetrySettings;

/// The run in progress.
#[derive(Debug)]
struct ActiveRun {
    cancel: CancellationToken,
    handle: JoinHandle<()>,
    /// Cleared when the run has ended (`agent_end` written), before its task writes
    /// `agent_settled` and exits: from then on a new prompt starts a new run.
    running: Arc<std::sync::atomic::AtomicBool>,
    /// The task has written an `agent_end` (see [`Host`]).
    ended: Arc<std::sync::atomic::AtomicBool>,
}

/// What a run task needs besides its spec and prompts.
pub(crate) struct RunServices {
    pub conversation: Arc<Conversation>,
    pub events: EventSink,
    /// Automatic retry as set when the run starts.
    pub retry: RetrySettings,
    /// Compaction's summariser, when the model has credentials.
    pub summarizer: Option<compactor::Summarizer>,
    pub extensions: Option<Arc<tau_extensions::Extensions>>,
    /// `images.blockImages`: the model sees a placeholder text in place of every image.
    pub block_images: bool,
    /// The todo list whose open tasks a run that stops is reminded of.
    pub todos: Arc<crate::todos::Todos>,
    /// The MCP servers' tools, followed from one model call to the next.
    pub mcp: Option<crate::mcp::McpRunTools>,
    /// What tool calls may do without asking.
    pub permissions: Arc<crate::permissions::Permissions>,
}

/// The session's run task, if one is under way.
#[derive(Default)]
pub struct Runs {
    active: Option<ActiveRun>,
    /// What the next run waits for before it writes anything (see [`Runs::gate_next`]).
    /// Reached only through `&mut self`, which makes the session `Sync`: a front-end can then
    /// run its loop on the runtime's workers (the future holding `&AgentSession` is `Send`).
    gate: sync_wrapper::SyncWrapper<Option<futures_util::future::BoxFuture<'static, ()>>>,
    /// Whether a gate is set (for `Debug`, which cannot reach the gate through `&self`).
    gated: bool,
    /// One HTTP client for every run and summary of the session (its connection pool), made
    /// when the first needs it.
    client: Option<tau_ai::provider::HttpClient>,
}

impl std::fmt::Debug for Runs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runs")
            .field("active", &self.active)
            .field("gated", &self.gated)
            .finish_non_exhaustive()
    }
}

impl Runs {
    /// True from the moment a prompt is accepted until its run has ended.
    pub fn is_streaming(&self) -> bool {
        self.active
            .as_ref()
            .is_some_and(|run| run.running.load(Ordering::Acquire))
    }

    /// Gives the session a client made beforehand (a front-end with several sessions shares
    /// one, so they share its connections and none builds its own on its first prompt).
    pub fn share_client(&mut self, client: tau_ai::provider::HttpClient) {
        self.client = Some(client);
    }

    /// The session's HTTP client.
    pub(crate) fn client(&mut self) -> tau_ai::provider::HttpClient {
        self.client
            .get_or_insert_with(tau_ai::provider::http_client)
            .clone()
    }

    /// What a model call outside a run needs (a summary, an MCP server's sampling request):
    /// the selected model with its credentials, over the session's HTTP client.
    pub(crate) fn summarizer(
        &mut self,
        models: &crate::model_choice::ModelChoice,
        preferences: &crate::preferences::Preferences,
        conversation: &crate::conversation::Conversation,
    ) -> Result<crate::compactor::Summarizer, crate::SessionError> {
        crate::compactor::Summarizer::new(models, || self.client(), preferences, conversation)
    }

    /// A run or compaction task exists, streaming or finishing its post-run work.
    pub fn has_task(&self) -> bool {
        self.active.is_some()
    }

    /// The task has written its `agent_end` and is doing post-run work.
    pub(crate) fn in_post_run(&self) -> bool {
        self.active.as_ref().is_some_and(|run| {
            run.running.load(Ordering::Acquire) && run.ended.load(Ordering::Acquire)
        })
    }

    /// Returns when the task has finished (never, while there is none: meant for a `select!`
    /// that waits to offer a held prompt again). Cancel-safe.
    pub async fn finished(&mut self) {
        match self.active.as_mut() {
            Some(run) => {
                let _ = (&mut run.handle).await;
                self.active = None;
            }
            None => std::future::pending().await,
        }
    }

    /// Waits for an ended run's task to write its last event, so a new run's events never
    /// interleave with it.
    pub(crate) async fn reap(&mut self) {
        if !self.is_streaming()
            && let Some(run) = self.active.take()
        {
            let _ = run.handle.await;
        }
    }

    /// Cancels the task and waits until it has written its last events. Queues are left as
    /// they are (decision 10).
    pub async fn abort(&mut self) {
        if let Some(run) = self.active.take() {
            run.cancel.cancel();
            let _ = run.handle.await;
        }
    }

    /// Waits for the task to end on its own (stdin closed: finish pending work).
    pub async fn wait_idle(&mut self) {
        if let Some(run) = self.active.take() {
            let _ = run.handle.await;
        }
    }

    /// Starts a run of `prompts` on its own task.
    pub(crate) fn start(
        &mut self,
        spec: RunSpec,
        prompts: Vec<AgentMessage>,
        services: RunServices,
    ) {
        let context_window = spec.model.context_window;
        let gate = self.gate.get_mut().take();
        self.gated = false;
        self.launch(
            services,
            context_window,
            false,
            |host, summarizer, todos, cancel, running| {
                tokio::spawn(async move {
                    if let Some(gate) = gate {
                        tokio::select! {
                            () = gate => {}
                            () = cancel.cancelled() => {}
                        }
                    }
                    drive(spec, prompts, host, summarizer, todos, cancel, running).await;
                })
            },
        );
    }

    /// Makes the next run started wait for `gate` before it writes its first event (it is
    /// streaming from the start all the same), until [`Runs::clear_gate`]. A front-end uses
    /// it to answer the command that caused the run first, as pi does (an extension command's
    /// `sendUserMessage` starts a run that pi begins only after the command's `prompt` is
    /// answered).
    pub fn gate_next(&mut self, gate: futures_util::future::BoxFuture<'static, ()>) {
        *self.gate.get_mut() = Some(gate);
        self.gated = true;
    }

    /// Drops a gate no run took.
    pub fn clear_gate(&mut self) {
        *self.gate.get_mut() = None;
        self.gated = false;
    }

    /// Starts a `compact` command on the run task's slot, so that it is aborted, waited for
    /// and held behind like a run: `isStreaming` stays true (as during a run's own
    /// compaction) and a prompt meanwhile is held until it ends. `spec` (none without a
    /// model) serves the run that delivers messages queued meanwhile.
    pub(crate) fn start_compaction(
        &mut self,
        spec: Option<RunSpec>,
        services: RunServices,
        compaction: compactor::ManualCompaction,
    ) {
        let context_window = spec.as_ref().map_or(0, |s| s.model.context_window);
        // `ended` is set from the start: a prompt is held, as after a run's `agent_end`, and
        // goes to the compacted context.
        self.launch(
            services,
            context_window,
            true,
            |host, summarizer, todos, cancel, running| {
                tokio::spawn(compact_then_deliver(
                    spec, host, summarizer, todos, compaction, cancel, running,
                ))
            },
        );
    }

    /// The task slot's bookkeeping shared by runs and `compact`: the host the task works
    /// through, the flags the session reads, and the handle it aborts and waits for.
    fn launch(
        &mut self,
        services: RunServices,
        context_window: u64,
        ended: bool,
        spawn: impl FnOnce(
            Host,
            Option<compactor::Summarizer>,
            Arc<crate::todos::Todos>,
            CancellationToken,
            Arc<AtomicBool>,
        ) -> tokio::task::JoinHandle<()>,
    ) {
        let cancel = CancellationToken::new();
        let running = Arc::new(AtomicBool::new(true));
        let ended = Arc::new(AtomicBool::new(ended));
        let host = Host {
            conversation: services.conversation,
            events: services.events,
            retry: services.retry,
            context_window,
            ended: Arc::clone(&ended),
            extensions: services.extensions,
            block_images: services.block_images,
            turn_index: std::sync::atomic::AtomicU64::new(0),
            cancel: cancel.clone(),
            mcp: services.mcp,
            permissions: services.permissions,
        };
        host.conversation.lock().run_active = true;
        host.conversation.set_current_run(Arc::clone(&running));
        let handle = spawn(
            host,
            services.summarizer,
            services.todos,
            cancel.clone(),
            Arc::clone(&running),
        );
        self.active = Some(ActiveRun {
            cancel,
            handle,
            running,
            ended,
        });
    }
}

/// The task of a `compact` command: the compaction, its outcome handed on, then a run for
/// the messages queued meanwhile (pi would have started them at once, beside the
/// compaction). Without such a run nothing more is written: there was no `agent_start`, so
/// there is no `agent_settled`.
async fn compact_then_deliver(
    spec: Option<RunSpec>,
    host: Host,
    summarizer: Option<compactor::Summarizer>,
    todos: Arc<crate::todos::Todos>,
    compaction: compactor::ManualCompaction,
    cancel: CancellationToken,
    running: Arc<AtomicBool>,
) {
    let outcome = compactor::manual(
        &host,
        compaction.summarizer,
        compaction.custom_instructions.as_deref(),
        &cancel,
    )
    .await;
    (compaction.done)(outcome).await;
    let queued = {
        let state = host.conversation.lock();
        !state.steering.is_empty() || !state.follow_up.is_empty()
    };
    match spec {
        // After an abort the aborting command starts that run itself (decision 10).
        Some(spec) if queued && !cancel.is_cancelled() => {
            drive(spec, Vec::new(), host, summarizer, todos, cancel, running).await;
        }
        _ => {
            host.conversation.flush_held_back();
            host.conversation.end_run(&running);
        }
    }
}

/// The task: the agent loop, again after a retry or an overflow's compaction, then the
/// post-run work and `agent_settled`.
async fn drive(
    spec: RunSpec,
    mut prompts: Vec<AgentMessage>,
    host: Host,
    summarizer: Option<compactor::Summarizer>,
    todos: Arc<crate::todos::Todos>,
    run_cancel: CancellationToken,
    running: Arc<AtomicBool>,
) {
    let mut overflow_retried = false;
    loop {
        let added = tau_agent::run(&spec, prompts, &host, &run_cancel).await;
        // A retry, or a compaction after an overflow, continues from the context as it is
        // (the failed reply removed).
        prompts = Vec::new();
        if retry_after_failure(&host, &added, &run_cancel).await {
            continue;
        }
        if let Some(summarizer) = &summarizer
            && compactor::after_run(
                &host,
                summarizer,
                &added,
                &mut overflow_retried,
                &run_cancel,
            )
            .await
        {
            continue;
        }
        if let Some(queued) = continues_for_extensions(&host, &run_cancel).await {
            prompts = queued;
            continue;
        }
        if remind_of_todos(&host, &todos, &added, &run_cancel).await {
            continue;
        }
        break;
    }
    host.conversation.flush_held_back();
    host.conversation.end_run(&running);
    host.events
        .emit(SessionEvent::AgentSettled {
            aborted: run_cancel.is_cancelled(),
        })
        .await;
}

/// Whether messages the extensions sent from their `agent_end` handlers continue the run, as
/// pi continues it (rpc.md §5 step 4). Their actions go through the input loop, so the task
/// first waits until that loop has carried out everything sent so far; if the loop is itself
/// waiting on this task (an `abort`, stdin closing), the wait gives up quickly and the run ends.
async fn continues_for_extensions(
    host: &Host,
    run_cancel: &CancellationToken,
) -> Option<Vec<AgentMessage>> {
    let extensions = host.extensions.as_ref()?;
    if run_cancel.is_cancelled() || !extensions.subscribed("agent_end") {
        return None;
    }
    tokio::select! {
        () = extensions.actions_applied() => {}
        () = run_cancel.cancelled() => return None,
        () = tokio::time::sleep(std::time::Duration::from_millis(500)) => return None,
    }
    // pi's continuation takes the whole steering queue, else the whole follow-up queue,
    // whatever the queue modes. They stay in the reported queue until each is delivered (its
    // `queue_update` after the new run's `turn_start`, as pi's).
    let taken = {
        let mut state = host.conversation.lock();
        let steering = !state.steering.is_empty();
        let taken: Vec<_> = if steering {
            state.steering.drain(..).collect()
        } else {
            state.follow_up.drain(..).collect()
        };
        state
            .delivering
            .extend(taken.iter().map(|q| (steering, q.text.clone())));
        taken
    };
    if taken.is_empty() {
        return None;
    }
    Some(taken.into_iter().map(|q| q.message).collect())
}

/// xcsh's todo reminder (§6.2): a run whose last reply stopped on its own (no tool call, no
/// error, no abort) while tasks are open gets `todo_reminder`, a hidden message listing them,
/// and another run from there. The message is kept in the session file too, so a reopened
/// session shows the model the context it answered.
async fn remind_of_todos(
    host: &Host,
    todos: &crate::todos::Todos,
    added: &[AgentMessage],
    run_cancel: &CancellationToken,
) -> bool {
    if run_cancel.is_cancelled() {
        return false;
    }
    let Some(last) = added.iter().rev().find_map(|m| match m {
        AgentMessage::Assistant(a) => Some(a),
        _ => None,
    }) else {
        return false;
    };
    let calls_tools = last
        .content
        .iter()
        .any(|c| matches!(c, tau_protocol::AssistantContent::ToolCall(_)));
    if calls_tools
        || matches!(
            last.stop_reason,
            tau_protocol::StopReason::Error | tau_protocol::StopReason::Aborted
        )
    {
        return false;
    }
    let Some(reminder) = todos.next_reminder() else {
        return false;
    };
    host.events.emit(reminder.event).await;
    let message = Arc::new(reminder.message);
    host.conversation.lock().messages.push(Arc::clone(&message));
    host.conversation
        .persist(|store| store.append_message(message));
    true
}

/// After a run: when its last reply failed in a way worth retrying (rpc.md §9) and attempts
/// remain, announces the retry, takes the failed reply out of the in-memory context (the
/// session file keeps it), waits out the back-off and says to run again. A series that ends
/// without success is closed with `auto_retry_end`.
async fn retry_after_failure(
    host: &Host,
    added: &[AgentMessage],
    run_cancel: &CancellationToken,
) -> bool {
    let Some(AgentMessage::Assistant(last)) = added.last() else {
        return false;
    };
    let error = last.error_message.clone().unwrap_or_default();
    let close = |attempt: Option<u32>, final_error: String| async move {
        if let Some(attempt) = attempt {
            host.events
                .emit(SessionEvent::AutoRetryEnd {
                    success: false,
                    attempt,
                    final_error: Some(final_error),
                })
                .await;
        }
    };
    if last.stop_reason != tau_protocol::StopReason::Error {
        if last.stop_reason == tau_protocol::StopReason::Aborted {
            let attempt = host.conversation.lock().retry.failed();
            close(attempt, "Retry cancelled".into()).await;
        }
        return false;
    }
    let retryable = crate::retry::is_retryable_reply(last, host.context_window);
    // Once stdin has closed nobody waits for a retry, and its back-off would keep the
    // process alive (T77).
    let input_closed = host.conversation.input_closed();
    let scheduled = if retryable && !input_closed {
        // The provider's `retry-after` header, else a delay named in the error text.
        let retry_after = last
            .retry_after_ms
            .map(std::time::Duration::from_millis)
            .or_else(|| crate::retry::retry_after_from_message(&error));
        host.conversation
            .lock()
            .retry
            .schedule(&host.retry, retry_after)
    } else {
        None
    };
    let Some(scheduled) = scheduled else {
        let attempt = host.conversation.lock().retry.failed();
        close(attempt, error).await;
        return false;
    };
    // Armed before `auto_retry_start` is written: a host that answers it with `abort_retry`
    // at once must find the back-off to cancel.
    let sleep_cancel = CancellationToken::new();
    {
        let mut state = host.conversation.lock();
        if matches!(state.messages.last().map(|m| &**m), Some(AgentMessage::Assistant(a)) if a.stop_reason == tau_protocol::StopReason::Error)
        {
            state.messages.pop();
        }
        state.retry_sleep = Some(sleep_cancel.clone());
    }
    host.events
        .emit(SessionEvent::AutoRetryStart {
            attempt: scheduled.attempt,
            max_attempts: scheduled.max_attempts,
            delay_ms: u64::try_from(scheduled.delay.as_millis()).unwrap_or(u64::MAX),
            error_message: error,
        })
        .await;
    let cancelled = tokio::select! {
        () = tokio::time::sleep(scheduled.delay) => false,
        () = run_cancel.cancelled() => true,
        () = sleep_cancel.cancelled() => true,
    };
    host.conversation.lock().retry_sleep = None;
    if cancelled {
        let attempt = host.conversation.lock().retry.failed();
        close(attempt, "Retry cancelled".into()).await;
        return false;
    }
    true
}

/// How long a provider may send nothing once stdin has closed before its stream fails.
pub(crate) const SILENCE_AFTER_INPUT_CLOSED: std::time::Duration =
    std::time::Duration::from_secs(5);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Outbound;
    use crate::store::SessionStore;

    fn services() -> (RunServices, tokio::sync::mpsc::Receiver<Outbound>) {
        let (tx, rx) = tokio::sync::mpsc::channel(64);
        let events = EventSink::new(tx);
        let services = RunServices {
            conversation: Arc::new(Conversation::new(SessionStore::in_memory(
                std::path::Path::new("/tmp"),
            ))),
            events: events.clone(),
            retry: RetrySettings::default(),
            summarizer: None,
            extensions: None,
            block_images: false,
            todos: crate::todos::Todos::new(events, false, None),
            mcp: None,
            permissions: Arc::new(
                crate::permissions::Permissions::new(
                    std::path::Path::new("/tmp"),
                    std::path::Path::new("/nonexistent"),
                    &crate::Settings::from_value(serde_json::Map::new()),
                )
                .0,
            ),
        };
        (services, rx)
    }

    fn event_types(rx: &mut tokio::sync::mpsc::Receiver<Outbound>) -> Vec<String> {
        let mut types = Vec::new();
        while let Ok(record) = rx.try_recv() {
            if let Outbound::Event(event) = record {
                let value = serde_json::to_value(&*event).unwrap_or_default();
                types.push(value["type"].as_str().unwrap_or_default().to_string());
            }
        }
        types
    }

    #[tokio::test]
    async fn a_compact_command_holds_the_slot_until_it_has_answered() {
        let (services, mut rx) = services();
        let conversation = Arc::clone(&services.conversation);
        let mut runs = Runs::default();
        assert!(!runs.is_streaming() && !runs.in_post_run());
        let (tx, answered) = tokio::sync::oneshot::channel();
        runs.start_compaction(
            None,
            services,
            compactor::ManualCompaction {
                custom_instructions: None,
                summarizer: Err("No model".into()),
                done: Box::new(move |outcome| {
                    Box::pin(async move {
                        let _ = tx.send(outcome.map_err(|e| e.to_string()));
                    })
                }),
            },
        );
        assert!(
            runs.is_streaming() && runs.in_post_run(),
            "a prompt is held"
        );
        runs.wait_idle().await;
        assert!(!runs.is_streaming());
        assert_eq!(answered.await.ok(), Some(Err("No model".to_string())));
        assert_eq!(event_types(&mut rx), ["compaction_start", "compaction_end"]);
        assert!(
            !conversation.lock().run_active,
            "held-back messages flushed"
        );
    }

    #[tokio::test]
    async fn a_gate_no_run_took_is_dropped_and_abort_without_a_run_returns() {
        let mut runs = Runs::default();
        runs.gate_next(Box::pin(std::future::pending()));
        assert!(runs.gate.get_mut().is_some());
        runs.clear_gate();
        assert!(runs.gate.get_mut().is_none());
        runs.abort().await;
        runs.reap().await;
        assert!(!runs.is_streaming());
    }
}
