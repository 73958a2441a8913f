//! Command dispatch and the serve loop.
//!
//! One OS thread reads stdin and hands complete records to the loop; one OS thread owns
//! stdout ([`crate::writer`]). The loop owns the [`AgentSession`] and answers each command with
//! exactly one response, in completion order.

use std::future::Future;
use std::io::{BufReader, Read, Write};

use serde::Serialize;
use serde_json::{Value, json};
use tau_protocol::ImageContent;
use tau_protocol::extension::ExtensionAction;
use tau_session::carrying_out::Carried;
use tau_session::replacing::Replaced;
use tau_session::{
    AgentSession, EventSink, InputSource, Preference, QueueAs, Replacement, SessionError, Submitted,
};
use tokio::sync::mpsc;

use crate::framing::LineReader;
use crate::parse::{Inbound, parse_line};
use tau_protocol::rpc::{
    BashResult, CancelledData, ContextUsage, CycleModelData, Disposition, EntriesData, ForkData,
    ForkMessage, ForkMessagesData, HostToolsData, IntegrationModel, IntegrationsData,
    LastAssistantTextData, ModelsData, NavigateTreeData, PathData, PromptData, QueueData, Ready,
    Response, RpcCommand, RpcSessionState, SessionStats, ShortcutInfo, ShortcutsData,
    StreamingBehavior, ThinkingLevelData, ThinkingLevelsData, TodosData, TokenTotals,
};

/// Capacity of the queue to the stdout writer, in records.
const OUTBOUND_CAPACITY: usize = 1024;
/// Capacity of the queue from the stdin reader, in records.
const INBOUND_CAPACITY: usize = 64;
/// At most this many queued extension actions and records are carried out in one turn of
/// the loop.
const BURST: usize = 1024;

/// Why [`serve`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitReason {
    /// stdin reached end of file and all pending work finished.
    InputClosed,
    /// A termination signal; the value is the exit code to use (130, 143, 129).
    Signal(i32),
    /// stdout could not be written (the client went away).
    OutputFailed,
}

/// A `prompt` that came after the run's `agent_end` while the run still had post-run work
/// (a retry, a compaction, its last records). pi 0.79 clients prompt as soon as they read
/// `agent_end`, so it is neither refused nor started on top of that work: it waits, unanswered,
/// until the run task finishes, and is then handled as if it had arrived at that moment.
struct HeldPrompt {
    id: Option<Value>,
    name: &'static str,
    /// Already past the `input` hook.
    message: tau_session::Admitted,
}

/// Cuts off the extension calls the input loop itself is waiting on (an `input` or
/// `before_agent_start` handler): the stdin reader fires it when it reads an `abort`, which the
/// loop could not otherwise read while it waits.
#[derive(Debug, Default)]
pub struct LoopInterrupt {
    token: std::sync::Mutex<tokio_util::sync::CancellationToken>,
}

impl LoopInterrupt {
    /// The token for the calls about to be made.
    fn current(&self) -> tokio_util::sync::CancellationToken {
        match self.token.lock() {
            Ok(mut token) => {
                if token.is_cancelled() {
                    *token = tokio_util::sync::CancellationToken::new();
                }
                token.clone()
            }
            Err(_) => tokio_util::sync::CancellationToken::new(),
        }
    }

    fn interrupt(&self) {
        if let Ok(token) = self.token.lock() {
            token.cancel();
        }
    }
}

/// Extensions loaded before the server starts, and what connects them to it.
pub struct LoadedExtensions {
    pub set: std::sync::Arc<tau_extensions::Extensions>,
    pub actions: mpsc::UnboundedReceiver<tau_extensions::Work>,
    pub outlet: std::sync::Arc<tau_session::ExtensionOutlet>,
}

/// Answers commands for one session.
pub struct RpcServer {
    session: AgentSession,
    sink: EventSink,
    version: String,
    held: Option<HeldPrompt>,
    /// Records that came after the held prompt, handled after it so that the host's order is
    /// kept. Only what must act at once (aborts, host-tool and UI replies) skips the line.
    backlog: std::collections::VecDeque<Inbound>,
    interrupt: std::sync::Arc<LoopInterrupt>,
    /// An extension called `ctx.shutdown()`: as in pi, tau ends as at the end of stdin once
    /// the next command line it handles is answered (rpc.md §1.5), or the extension command
    /// that asked, so every command read before the exit is answered.
    shutdown_requested: bool,
    /// The shutdown waits for the extension commands in flight (their `prompt` responses).
    shutdown_after_commands: bool,
    /// Extension commands running beside the loop, and a signal when one has answered.
    commands_in_flight: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    command_answered: std::sync::Arc<tokio::sync::Notify>,
    /// Extension commands whose `prompt` response is not written yet: a run their handler
    /// starts waits for them, as in pi.
    responses_pending: std::sync::Arc<tokio::sync::watch::Sender<usize>>,
    /// A model-registry write left the extensions' mirror behind; refreshed at the end of
    /// the burst of actions it came in (`refresh_mirror`).
    mirror_stale: bool,
    /// Bumped when an extension waits for the run (`waitForIdle`): a run held back until the
    /// command that started it is answered starts at once, since that command now waits for
    /// it (issue 39).
    gate_release: std::sync::Arc<tokio::sync::watch::Sender<u64>>,
}

impl RpcServer {
    pub fn new(session: AgentSession, sink: EventSink, version: &str) -> Self {
        Self {
            session,
            sink,
            version: version.to_string(),
            held: None,
            backlog: std::collections::VecDeque::new(),
            interrupt: std::sync::Arc::default(),
            shutdown_requested: false,
            shutdown_after_commands: false,
            commands_in_flight: std::sync::Arc::default(),
            command_answered: std::sync::Arc::default(),
            responses_pending: std::sync::Arc::new(tokio::sync::watch::Sender::new(0)),
            mirror_stale: false,
            gate_release: std::sync::Arc::new(tokio::sync::watch::Sender::new(0)),
        }
    }

    /// Resolves once every extension command running has written its `prompt` response, or
    /// an extension waits for the run (then holding the run back would hang both).
    fn responses_written(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
        let mut pending = self.responses_pending.subscribe();
        let mut released = self.gate_release.subscribe();
        released.mark_unchanged();
        Box::pin(async move {
            tokio::select! {
                _ = pending.wait_for(|n| *n == 0) => {}
                _ = released.changed() => {}
            }
        })
    }

    fn commands_in_flight(&self) -> usize {
        self.commands_in_flight
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// Called after a command line was handled: true when tau should now end for a
    /// `ctx.shutdown()`.
    fn shutdown_after_line(&mut self) -> bool {
        if !self.shutdown_requested {
            return false;
        }
        if self.commands_in_flight() == 0 {
            return true;
        }
        self.shutdown_after_commands = true;
        false
    }

    /// True when the extension commands the shutdown waited for have all answered.
    fn shutdown_due(&self) -> bool {
        self.shutdown_requested && self.shutdown_after_commands && self.commands_in_flight() == 0
    }

    pub fn session(&self) -> &AgentSession {
        &self.session
    }

    /// True while a prompt waits for the run's post-run work ([`RpcServer::release_held`]
    /// offers it again).
    pub fn holds_prompt(&self) -> bool {
        self.held.is_some()
    }

    /// Returns when the run a held prompt waits for has finished.
    pub async fn run_finished(&mut self) {
        self.session.runs_mut().finished().await;
    }

    /// Offers the held prompt again, then handles the records that queued up behind it,
    /// until none is left or a prompt is held again.
    pub async fn release_held(&mut self) {
        if let Some(held) = self.held.take() {
            self.offer_held(held).await;
        }
        while self.held.is_none()
            && let Some(inbound) = self.backlog.pop_front()
        {
            self.handle_inbound(inbound).await;
        }
    }

    /// Handles one stdin record, writing its response (if it gets one) to the sink.
    pub async fn handle_line(&mut self, line: &[u8]) {
        let inbound = parse_line(line);
        if self.held.is_some() && !acts_at_once(&inbound) {
            self.backlog.push_back(inbound);
            return;
        }
        self.handle_inbound(inbound).await;
        if self.held.is_none() && !self.backlog.is_empty() {
            // An abort released the held prompt; what waited behind it goes next.
            self.release_held().await;
        }
    }

    /// While extensions start up, records wait (except those that act at once: dialog
    /// replies, aborts).
    pub async fn defer_line(&mut self, line: &[u8]) {
        let inbound = parse_line(line);
        if acts_at_once(&inbound) {
            self.handle_inbound(inbound).await;
        } else {
            self.backlog.push_back(inbound);
        }
    }

    async fn handle_inbound(&mut self, inbound: Inbound) {
        match inbound {
            Inbound::Command { id, command } => {
                if let Some(reply) = self.dispatch(id, command).await {
                    self.sink.emit_line(reply).await;
                }
                self.session.refresh_extension_state();
            }
            Inbound::Rejected(response) => self.sink.emit_line(response.to_line()).await,
            Inbound::HostToolResult(frame) => self.session.tools().host_bridge().resolve(
                &frame.id,
                frame.result,
                frame.is_error == Some(true),
            ),
            Inbound::HostToolUpdate(frame) => {
                self.session
                    .tools()
                    .host_bridge()
                    .update(&frame.id, frame.partial_result);
            }
            // An answer to a request that no longer waits (withdrawn, answered) changes
            // nothing, as with dialogs.
            Inbound::PermissionResponse(response) => {
                let answered = self.session.permissions().answer(
                    &response.id,
                    response.outcome,
                    response.remember,
                );
                if !answered {
                    tracing::debug!("no permission request {} waits", response.id);
                }
            }
            // Routed to the dialog it answers; pi ignores responses whose id matches nothing.
            Inbound::UiResponse(response) => {
                if self
                    .session
                    .tools()
                    .mcp_client()
                    .dialogs()
                    .answer(&response)
                {
                    return;
                }
                if let Some(extensions) = self.session.extension_binding().extensions() {
                    extensions.resolve_ui(&response);
                }
            }
            Inbound::Ignored => {}
        }
    }

    /// What the extensions' runner hands the loop: an action to carry out, a record to
    /// write in its place in the output, or a barrier that waits for what came before it.
    pub async fn carry_out(
        &mut self,
        work: tau_extensions::Work,
        outlet: Option<&tau_session::ExtensionOutlet>,
    ) {
        match work {
            tau_extensions::Work::Action(action) => self.apply_action(action).await,
            tau_extensions::Work::Record(record, _waiting) => {
                if let Some(outlet) = outlet {
                    tau_extensions::Outlet::write(outlet, *record).await;
                }
            }
            tau_extensions::Work::Barrier(done) => {
                // Whoever waits reads the mirror next.
                self.refresh_mirror();
                let _ = done.send(());
            }
        }
    }

    /// Brings the extensions' mirror up to date after registry writes.
    pub fn refresh_mirror(&mut self) {
        if std::mem::take(&mut self.mirror_stale) {
            self.session.refresh_extension_state();
        }
    }

    /// Carries out an extension's `action` frame (docs/extensions.md §4) and answers it.
    pub async fn apply_action(&mut self, request: tau_extensions::ActionRequest) {
        let action = match request.frame.parse() {
            Ok(action) => action,
            Err(error) => {
                self.report_unanswered(&request, &error).await;
                request.reply(Err(error));
                return;
            }
        };
        // The mirror is refreshed once the burst is over, or before any other action.
        if tau_session::extension_binding::writes_only_the_registry(&action) {
            let outcome = match self.session.apply_extension_action(action).await {
                Ok(outcome) => outcome,
                Err(_) => Err(format!("{}: not carried out", request.frame.action)),
            };
            if let Err(error) = &outcome {
                self.report_unanswered(&request, error).await;
            }
            request.reply(outcome);
            self.mirror_stale = true;
            return;
        }
        self.refresh_mirror();
        let may_start_run = matches!(
            action,
            ExtensionAction::SendUserMessage { .. } | ExtensionAction::SendMessage { .. }
        );
        let gated = may_start_run && *self.responses_pending.borrow() > 0;
        if gated {
            let gate = self.responses_written();
            self.session.runs_mut().gate_next(gate);
        }
        if matches!(action, ExtensionAction::WaitForIdle) {
            // The command that started the held run now waits for it: it starts at once.
            self.gate_release.send_modify(|n| *n += 1);
        }
        let cancel = self.interrupt.current();
        let outcome =
            match tau_session::carrying_out::carry_out(&mut self.session, action, &cancel).await {
                Carried::Answered(outcome) => outcome,
                Carried::Later(answer) => {
                    let extensions = self.session.extension_binding().extensions().cloned();
                    tokio::spawn(async move {
                        let outcome = answer.await;
                        if let (Err(error), Some(extensions)) = (&outcome, &extensions) {
                            report_unanswered(extensions, &request, error).await;
                        }
                        request.reply(outcome);
                    });
                    self.session.refresh_extension_state();
                    return;
                }
                Carried::FrontEnd(ExtensionAction::Shutdown) => {
                    self.shutdown_requested = true;
                    // Asked by a command's handler: its `prompt` is answered, then tau ends.
                    self.shutdown_after_commands = self.commands_in_flight() > 0;
                    Ok(Value::Null)
                }
                Carried::FrontEnd(_) => Err(format!("{}: not carried out", request.frame.action)),
            };
        self.finish_action(request, outcome, gated).await;
    }

    /// Answers an action, reporting a failure nobody waits for, and drops a gate no run took.
    async fn finish_action(
        &mut self,
        request: tau_extensions::ActionRequest,
        outcome: Result<Value, String>,
        gated: bool,
    ) {
        if let Err(error) = &outcome {
            self.report_unanswered(&request, error).await;
        }
        if gated {
            self.session.runs_mut().clear_gate();
        }
        request.reply(outcome);
        self.session.refresh_extension_state();
    }

    /// A failed action nobody waits for is reported (see [`report_unanswered`]).
    async fn report_unanswered(&self, request: &tau_extensions::ActionRequest, error: &str) {
        if let Some(extensions) = self.session.extension_binding().extensions() {
            report_unanswered(extensions, request, error).await;
        }
    }

    /// A session-replacing command (`new_session`, `switch_session`, `fork`, `branch`,
    /// `clone`) through the core's one replacement (`tau_session::replacing`), answered as
    /// pi answers it.
    async fn replace_session(&mut self, id: Option<Value>, command: RpcCommand) -> Vec<u8> {
        let name = command.name();
        let how = match command {
            RpcCommand::NewSession(c) => Replacement::New {
                parent_session: c.parent_session,
            },
            RpcCommand::SwitchSession(c) => Replacement::Switch(c.session_path),
            RpcCommand::Fork(c) => Replacement::Fork(c.entry_id),
            RpcCommand::Branch(c) => Replacement::Branch(c.entry_id),
            RpcCommand::Clone(_) => Replacement::Clone,
            _ => return fail(id, name, "not a session replacement"),
        };
        let forks = matches!(how, Replacement::Fork(_) | Replacement::Branch(_));
        let cancel = self.interrupt.current();
        match tau_session::replacing::replace(&mut self.session, how, &cancel).await {
            Ok(Replaced::Cancelled) if forks => ok(
                id,
                name,
                &ForkData {
                    text: None,
                    cancelled: true,
                },
            ),
            Ok(Replaced::Cancelled) => ok(id, name, &CancelledData { cancelled: true }),
            Ok(Replaced::Done(text)) if forks => ok(
                id,
                name,
                &ForkData {
                    text: Some(text),
                    cancelled: false,
                },
            ),
            Ok(Replaced::Done(_)) => ok(id, name, &CancelledData { cancelled: false }),
            Err(err) => fail(id, name, err),
        }
    }

    /// The extension command a prompt invokes (`/name args`, ext §6.1), if any.
    fn extension_command(&self, text: &str) -> Option<(tau_extensions::CommandInfo, String)> {
        self.session.extension_binding().command_for(text)
    }

    /// Runs an extension command beside the input loop (its handler may open dialogs whose
    /// replies come through it); the `prompt` response follows when the handler settles, as
    /// in pi.
    fn run_extension_command(
        &self,
        id: Option<Value>,
        name: &'static str,
        command: tau_extensions::CommandInfo,
        args: String,
    ) {
        let Some(extensions) = self.session.extension_binding().extensions().cloned() else {
            return;
        };
        let sink = self.sink.clone();
        let in_flight = std::sync::Arc::clone(&self.commands_in_flight);
        let answered = std::sync::Arc::clone(&self.command_answered);
        let pending = std::sync::Arc::clone(&self.responses_pending);
        in_flight.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        pending.send_modify(|n| *n += 1);
        tokio::spawn(async move {
            // A run the handler started waits for this answer before its first event (the
            // gate `apply_action` sets), unless the handler waits for the run.
            tau_session::extension_hooks::run_command(&extensions, &command, &args).await;
            sink.emit_line(done(id, name)).await;
            pending.send_modify(|n| *n = n.saturating_sub(1));
            in_flight.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
            answered.notify_one();
        });
    }

    /// Runs a shortcut's handler beside the input loop, as an extension command runs (its
    /// dialogs need the loop), and answers once it has finished.
    fn run_extension_shortcut(
        &self,
        id: Option<Value>,
        name: &'static str,
        extensions: std::sync::Arc<tau_extensions::Extensions>,
        shortcut: tau_extensions::ShortcutInfo,
    ) {
        let sink = self.sink.clone();
        let pending = std::sync::Arc::clone(&self.responses_pending);
        let answered = std::sync::Arc::clone(&self.command_answered);
        pending.send_modify(|n| *n += 1);
        tokio::spawn(async move {
            extensions.run_shortcut(&shortcut).await;
            extensions.actions_applied().await;
            sink.emit_line(done(id, name)).await;
            pending.send_modify(|n| *n = n.saturating_sub(1));
            answered.notify_one();
        });
    }

    /// xcsh's health report, from configuration only: tau makes no network call to answer it
    /// (xcsh's live checks block its input loop for seconds), and it has no vendor services.
    fn integrations(&self) -> IntegrationsData {
        let model = match self.session.models().model() {
            None => IntegrationModel {
                state: "no_provider".into(),
                provider: None,
                latency_ms: None,
            },
            Some(model) => IntegrationModel {
                state: if self.session.models().registry().has_auth(&model.provider) {
                    "connected"
                } else {
                    "auth_error"
                }
                .into(),
                provider: Some(model.provider.clone()),
                latency_ms: None,
            },
        };
        IntegrationsData {
            version: self.version.clone(),
            model,
            services: Vec::new(),
        }
    }

    /// Nothing read before the end of input is left to do: no prompt held or queued behind
    /// one, no extension command or shortcut unanswered, no run or compaction under way.
    fn all_carried_out(&mut self) -> bool {
        self.held.is_none()
            && self.backlog.is_empty()
            && self.commands_in_flight() == 0
            && *self.responses_pending.borrow() == 0
            && !self.session.runs_mut().has_task()
    }

    /// Finishes pending work after stdin closed: the active run ends on its own, and a held
    /// prompt and what came after it still run (decision 11).
    pub async fn finish(&mut self) {
        loop {
            self.session.runs_mut().wait_idle().await;
            if self.held.is_none() && self.backlog.is_empty() {
                break;
            }
            self.release_held().await;
        }
    }

    /// Stops for a signal: the active run is aborted (its closing events are still written).
    pub async fn stop(&mut self) {
        self.session.runs_mut().abort().await;
    }

    /// Accepts a prompt through the session's one input path; when it starts a run, the
    /// response is written before the run's first event, so this writes it itself and
    /// returns `None`.
    async fn prompt(
        &mut self,
        id: Option<Value>,
        name: &'static str,
        text: &str,
        images: Option<Vec<ImageContent>>,
        queue_as: Option<QueueAs>,
    ) -> Option<Vec<u8>> {
        let cancel = self.interrupt.current();
        let submitted = self
            .session
            .submit(
                text,
                images.unwrap_or_default(),
                queue_as,
                InputSource::Rpc,
                &cancel,
            )
            .await;
        self.answer(id, name, submitted).await
    }

    /// A prompt held while the last run finished its post-run work, offered again (it has
    /// passed `input` already).
    async fn offer_held(&mut self, held: HeldPrompt) {
        let cancel = self.interrupt.current();
        let submitted = self.session.admit(held.message, None, &cancel).await;
        if let Some(line) = self.answer(held.id, held.name, submitted).await {
            self.sink.emit_line(line).await;
        }
    }

    /// The response to a submitted prompt (written here, before the run, when one starts).
    async fn answer(
        &mut self,
        id: Option<Value>,
        name: &'static str,
        submitted: Result<Submitted, SessionError>,
    ) -> Option<Vec<u8>> {
        match submitted {
            Ok(Submitted::Handled) => Some(done(id, name)),
            Ok(Submitted::Held(message)) => {
                self.held = Some(HeldPrompt { id, name, message });
                None
            }
            Err(err) => Some(fail(id, name, err)),
            Ok(Submitted::Queued) => Some(ok(
                id,
                name,
                &PromptData {
                    disposition: Disposition::Queued,
                },
            )),
            Ok(Submitted::Start(launch)) => {
                self.sink
                    .emit_line(ok(
                        id,
                        name,
                        &PromptData {
                            disposition: Disposition::Started,
                        },
                    ))
                    .await;
                self.session.launch(*launch);
                None
            }
        }
    }

    /// Runs one command and returns its response line (`None` when already written).
    async fn dispatch(&mut self, id: Option<Value>, command: RpcCommand) -> Option<Vec<u8>> {
        if let RpcCommand::GetMessages(_) = command
            && let Some(messages) = self.session.opening_messages()
        {
            // A session switched to a moment ago: its messages straight from the file.
            let Some((head, tail)) = response_around(id.clone(), "get_messages", "messages") else {
                return Some(fail(
                    id,
                    "get_messages",
                    "the response could not be assembled",
                ));
            };
            self.sink.emit_spliced(head, messages.clone(), tail).await;
            return None;
        }
        self.session.settle();
        let name = command.name();
        if matches!(
            command,
            RpcCommand::NewSession(_)
                | RpcCommand::SwitchSession(_)
                | RpcCommand::Fork(_)
                | RpcCommand::Branch(_)
                | RpcCommand::Clone(_)
        ) {
            return Some(self.replace_session(id, command).await);
        }
        match command {
            RpcCommand::Prompt(c) => {
                if let Some(locale) = &c.locale {
                    self.session
                        .set_preference(Preference::Locale(locale.clone()));
                }
                if let Some((command, args)) = self.extension_command(&c.message) {
                    self.run_extension_command(id, name, command, args);
                    return None;
                }
                let queue_as = c.streaming_behavior.map(|b| match b {
                    StreamingBehavior::Steer => QueueAs::Steer,
                    StreamingBehavior::FollowUp => QueueAs::FollowUp,
                });
                self.prompt(id, name, &c.message, c.images, queue_as).await
            }
            RpcCommand::AbortAndPrompt(c) => {
                self.session.runs_mut().abort().await;
                self.prompt(id, name, &c.message, c.images, None).await
            }
            RpcCommand::Abort(_) => {
                self.session.runs_mut().abort().await;
                if let Some(held) = self.held.take() {
                    // The held prompt came before this abort; in pi it would already be
                    // running, so it starts and the abort ends it.
                    self.offer_held(held).await;
                    self.session.runs_mut().abort().await;
                }
                self.sink.emit_line(done(id, name)).await;
                self.session.continue_if_queued();
                None
            }
            // Success whether or not a retry was waiting, as pi answers; the response goes
            // out before the back-off is cancelled, so it precedes `auto_retry_end` as in pi.
            RpcCommand::AbortRetry(_) => {
                self.sink.emit_line(done(id, name)).await;
                self.session.conversation().abort_retry();
                None
            }
            RpcCommand::Bash(c) => {
                // Runs beside everything else (a long command must not stop the input loop);
                // the response comes when it ends.
                let sink = self.sink.clone();
                self.session
                    .start_bash(c.command, c.exclude_from_context, move |result| {
                        Box::pin(async move {
                            let line = match result {
                                Ok(run) => ok(
                                    id,
                                    "bash",
                                    &BashResult {
                                        output: run.output,
                                        exit_code: run.exit_code,
                                        cancelled: run.cancelled,
                                        truncated: run.truncated,
                                        full_output_path: run
                                            .full_output_path
                                            .map(|p| p.to_string_lossy().into_owned()),
                                        total_lines: Some(run.total_lines),
                                        total_bytes: Some(run.total_bytes),
                                        output_lines: Some(run.output_lines),
                                        output_bytes: Some(run.output_bytes),
                                        artifact_id: None,
                                        new_cwd: None,
                                    },
                                ),
                                Err(err) => fail(id, "bash", err),
                            };
                            sink.emit_line(line).await;
                        })
                    });
                None
            }
            RpcCommand::Compact(c) => {
                // Runs beside the input loop like a prompt's run (decision 9, T76): `abort`
                // and every other command are answered meanwhile; the response comes when it
                // ends.
                let sink = self.sink.clone();
                let done: tau_session::CompactDone = Box::new(move |outcome| {
                    Box::pin(async move {
                        let line = match outcome {
                            Ok(result) => ok(id, "compact", &result),
                            Err(err) => fail(id, "compact", err),
                        };
                        sink.emit_line(line).await;
                    })
                });
                self.session
                    .start_compact(c.custom_instructions, done)
                    .await;
                None
            }
            RpcCommand::RunShortcut(c) => {
                let extensions = self.session.extension_binding().extensions().cloned();
                let found = extensions.and_then(|extensions| {
                    let shortcut = extensions
                        .shortcuts()
                        .into_iter()
                        .find(|s| tau_extensions::same_key(&s.key, &c.key))?;
                    Some((extensions, shortcut))
                });
                let Some((extensions, shortcut)) = found else {
                    return Some(fail(id, name, format!("Unknown shortcut: {}", c.key)));
                };
                self.run_extension_shortcut(id, name, extensions, shortcut);
                None
            }
            other => Some(self.dispatch_simple(id, other).await),
        }
    }

    /// Commands answered by one response line.
    async fn dispatch_simple(&mut self, id: Option<Value>, command: RpcCommand) -> Vec<u8> {
        let name = command.name();
        if let RpcCommand::Steer(c) | RpcCommand::FollowUp(c) = &command
            && let Some((extension_command, _)) = self.extension_command(&c.message)
        {
            return fail(
                id,
                name,
                format!(
                    "Extension command \"/{}\" cannot be queued. Use prompt() or execute the command when not streaming.",
                    extension_command.name
                ),
            );
        }
        let session = &mut self.session;
        match command {
            RpcCommand::Steer(c) | RpcCommand::FollowUp(c) => {
                let queue_as = if name == "steer" {
                    QueueAs::Steer
                } else {
                    QueueAs::FollowUp
                };
                session
                    .enqueue(queue_as, &c.message, c.images.unwrap_or_default())
                    .await;
                ok(
                    id,
                    name,
                    &PromptData {
                        disposition: Disposition::Queued,
                    },
                )
            }
            RpcCommand::GetState(_) => ok(id, name, &state_of(session)),
            // Serialised in place: a long session's context is megabytes, not worth a copy.
            RpcCommand::GetMessages(_) => session.conversation().with_messages(|messages| {
                #[derive(Serialize)]
                struct Borrowed<'a> {
                    messages: Vec<&'a tau_protocol::AgentMessage>,
                }
                let messages = messages.iter().map(|m| &**m).collect();
                ok(id, name, &Borrowed { messages })
            }),
            RpcCommand::GetLastAssistantText(_) => ok(
                id,
                name,
                &LastAssistantTextData {
                    text: session.conversation().last_assistant_text(),
                },
            ),
            RpcCommand::SetModel(c) => match session.set_model(&c.provider, &c.model_id).await {
                Ok(model) => ok(id, name, &model),
                Err(err) => fail(id, name, err),
            },
            RpcCommand::CycleModel(_) => {
                let cycled =
                    session
                        .cycle_model()
                        .await
                        .map(|(model, thinking_level, is_scoped)| CycleModelData {
                            model,
                            thinking_level,
                            is_scoped,
                        });
                ok(id, name, &cycled)
            }
            RpcCommand::GetAvailableModels(_) => {
                // pi lists after reading its files again: a key stored meanwhile counts.
                tau_session::pick_up_credentials(session).await;
                ok(
                    id,
                    name,
                    &ModelsData {
                        models: session.models().available_models(),
                    },
                )
            }
            RpcCommand::SetThinkingLevel(c) => {
                session.set_thinking_level(c.level).await;
                done(id, name)
            }
            RpcCommand::CycleThinkingLevel(_) => {
                let level = session.cycle_thinking_level().await;
                ok(id, name, &level.map(|level| ThinkingLevelData { level }))
            }
            RpcCommand::GetAvailableThinkingLevels(_) => ok(
                id,
                name,
                &ThinkingLevelsData {
                    levels: session.models().available_thinking_levels(),
                },
            ),
            RpcCommand::SetSteeringMode(c) => {
                session.set_preference(Preference::SteeringMode(c.mode));
                done(id, name)
            }
            RpcCommand::SetFollowUpMode(c) => {
                session.set_preference(Preference::FollowUpMode(c.mode));
                done(id, name)
            }
            RpcCommand::SetInterruptMode(c) => {
                session.set_preference(Preference::InterruptMode(c.mode));
                done(id, name)
            }
            RpcCommand::SetPermissionMode(c) => {
                if session.permissions().set_mode(c.mode) {
                    self.sink
                        .emit(tau_protocol::SessionEvent::PermissionModeChanged { mode: c.mode })
                        .await;
                }
                done(id, name)
            }
            RpcCommand::SetAutoCompaction(c) => {
                session.set_preference(Preference::AutoCompaction(c.enabled));
                done(id, name)
            }
            RpcCommand::SetAutoRetry(c) => {
                session.set_preference(Preference::AutoRetry(c.enabled));
                done(id, name)
            }
            RpcCommand::SetSessionName(c) => match session.set_session_name(&c.name).await {
                Ok(()) => done(id, name),
                Err(err) => fail(id, name, err),
            },
            RpcCommand::ClearQueue(_) => {
                let (steering, follow_up) = session.clear_queues().await;
                ok(
                    id,
                    name,
                    &QueueData {
                        steering,
                        follow_up,
                    },
                )
            }
            RpcCommand::SetTodos(c) => {
                session.set_todo_phases(c.phases);
                ok(
                    id,
                    name,
                    &TodosData {
                        todo_phases: session.tools().todo_phases().to_vec(),
                    },
                )
            }
            RpcCommand::SetHostTools(c) => match session.set_host_tools(c.tools) {
                Ok(tool_names) => ok(id, name, &HostToolsData { tool_names }),
                Err(err) => fail(id, name, err),
            },
            // Success whether or not a command was running, as pi answers.
            RpcCommand::AbortBash(_) => {
                session.tools().abort_bash();
                done(id, name)
            }
            RpcCommand::GetIntegrations(_) => ok(id, name, &self.integrations()),
            RpcCommand::SetLocale(c) => {
                self.session.set_preference(Preference::Locale(c.locale));
                done(id, name)
            }
            RpcCommand::Prompt(_)
            | RpcCommand::AbortAndPrompt(_)
            | RpcCommand::Abort(_)
            | RpcCommand::AbortRetry(_) => fail(id, name, "dispatched before this point"),
            RpcCommand::NewSession(_)
            | RpcCommand::SwitchSession(_)
            | RpcCommand::Fork(_)
            | RpcCommand::Branch(_)
            | RpcCommand::Clone(_) => fail(id, name, "dispatched before this point"),
            RpcCommand::GetForkMessages(_) | RpcCommand::GetBranchMessages(_) => ok(
                id,
                name,
                &ForkMessagesData {
                    messages: session
                        .conversation()
                        .fork_messages()
                        .into_iter()
                        .map(|(entry_id, text)| ForkMessage { entry_id, text })
                        .collect(),
                },
            ),
            RpcCommand::GetEntries(c) => {
                match session.conversation().entries_json(c.since.as_deref()) {
                    Ok((entries, leaf_id)) => ok(id, name, &EntriesData { entries, leaf_id }),
                    Err(err) => fail(id, name, err),
                }
            }
            RpcCommand::GetTree(_) => {
                let (tree, leaf_id) = session.conversation().tree_json();
                tree_response(id, name, &tree, leaf_id)
            }
            RpcCommand::NavigateTree(c) => {
                // Answered inline: a run must not have the leaf moved under it, and waiting
                // for it here would hold every other command (abort included) back.
                if session.conversation().is_streaming() {
                    return fail(
                        id,
                        name,
                        "Cannot navigate the tree while the agent is running; wait for it or abort",
                    );
                }
                let options = tau_session::NavigateOptions {
                    summarize: c.summarize,
                    custom_instructions: c.custom_instructions,
                    replace_instructions: c.replace_instructions,
                    label: c.label,
                };
                match session.navigate_tree(&c.target_id, options).await {
                    Ok(outcome) => ok(
                        id,
                        name,
                        &NavigateTreeData {
                            cancelled: outcome.cancelled,
                            aborted: outcome.aborted.then_some(true),
                            editor_text: outcome.editor_text,
                            summary_entry: outcome.summary_entry,
                        },
                    ),
                    Err(err) => fail(id, name, err),
                }
            }
            RpcCommand::GetShortcuts(_) => {
                let shortcuts = session
                    .extension_binding()
                    .extensions()
                    .map(|e| e.shortcuts())
                    .unwrap_or_default()
                    .into_iter()
                    .map(|s| ShortcutInfo {
                        key: s.key,
                        extension: s.extension,
                    })
                    .collect();
                ok(id, name, &ShortcutsData { shortcuts })
            }
            RpcCommand::RunShortcut(_) => {
                fail(id, name, "run_shortcut is dispatched before this point")
            }
            RpcCommand::GetSessionStats(_) => ok(id, name, &stats_of(session)),
            RpcCommand::ExportHtml(c) => {
                match tau_session::export_html::export_session(session, c.output_path.as_deref()) {
                    Ok(path) => ok(id, name, &PathData { path }),
                    Err(err) => fail(id, name, err),
                }
            }
            RpcCommand::Bash(_) => fail(id, name, "bash commands are dispatched before this point"),
            RpcCommand::Compact(_) => fail(id, name, "compact is dispatched before this point"),
            RpcCommand::GetMcpServers(_) => {
                let servers = self
                    .session
                    .tools()
                    .mcp()
                    .map(|mcp| {
                        mcp.manager()
                            .statuses()
                            .iter()
                            .map(tau_session::mcp::server_info)
                            .collect()
                    })
                    .unwrap_or_default();
                ok(id, name, &tau_protocol::rpc::McpServersData { servers })
            }
            RpcCommand::RestartMcpServer(c) => {
                let Some(mcp) = self.session.tools().mcp() else {
                    return fail(id, name, format!("no MCP server is named \"{}\"", c.server));
                };
                match mcp.manager().restart(&c.server).await {
                    Ok(()) => done(id, name),
                    Err(err) => fail(id, name, err.to_string()),
                }
            }
            RpcCommand::GetMcpResources(_) => {
                let resources = self
                    .session
                    .tools()
                    .mcp()
                    .map(|mcp| mcp.resources())
                    .unwrap_or_default()
                    .into_iter()
                    .map(|entry| tau_protocol::rpc::McpResourceInfo {
                        server: entry.server,
                        uri: entry.uri,
                        name: entry.name,
                        description: entry.description,
                        mime_type: entry.mime_type,
                        template: entry.template,
                    })
                    .collect();
                ok(id, name, &tau_protocol::rpc::McpResourcesData { resources })
            }
            RpcCommand::CompleteMcpArgument(c) => {
                let Some(mcp) = self.session.tools().mcp() else {
                    let empty = tau_protocol::rpc::McpCompletionData {
                        argument: None,
                        values: Vec::new(),
                    };
                    return ok(id, name, &empty);
                };
                // Typing waits for this: a server slower than this is not worth waiting for.
                match mcp
                    .complete_argument(&c.text, std::time::Duration::from_secs(5))
                    .await
                {
                    Ok((argument, values)) => ok(
                        id,
                        name,
                        &tau_protocol::rpc::McpCompletionData { argument, values },
                    ),
                    Err(err) => fail(id, name, err),
                }
            }
            RpcCommand::GetCommands(_) => ok(
                id,
                name,
                &json!({"commands": self.session.slash_commands()}),
            ),
        }
    }
}

fn state_of(session: &AgentSession) -> RpcSessionState {
    let conversation = session.conversation();
    let preferences = session.preferences();
    let next = session.next_call();
    RpcSessionState {
        model: session.models().model().cloned(),
        thinking_level: session.models().thinking_level(),
        is_streaming: session.conversation().is_streaming(),
        is_compacting: conversation.is_compacting(),
        steering_mode: preferences.steering_mode(),
        follow_up_mode: preferences.follow_up_mode(),
        interrupt_mode: preferences.interrupt_mode(),
        session_file: conversation
            .session_file()
            .map(|p| p.to_string_lossy().into_owned()),
        session_id: conversation.session_id(),
        session_name: conversation.session_name(),
        auto_compaction_enabled: preferences.auto_compaction_enabled(),
        auto_retry_enabled: preferences.auto_retry_enabled(),
        message_count: conversation.message_count(),
        pending_message_count: conversation.pending_message_count(),
        queued_message_count: conversation.queued_message_count(),
        todo_phases: session.tools().todo_phases().to_vec(),
        permission_mode: session.permissions().mode(),
        dump_tools: Some(
            next.tool_descriptions()
                .into_iter()
                .map(
                    |(name, description, parameters)| tau_protocol::rpc::DumpedTool {
                        name,
                        description,
                        parameters,
                    },
                )
                .collect(),
        ),
        system_prompt: Some(next.system_prompt),
    }
}

/// `fork` and `branch` answer alike.
fn stats_of(session: &AgentSession) -> SessionStats {
    let conversation = session.conversation();
    let stats = conversation.stats(session.models().model());
    SessionStats {
        session_file: conversation
            .session_file()
            .map(|p| p.to_string_lossy().into_owned()),
        session_id: conversation.session_id(),
        user_messages: stats.user_messages,
        assistant_messages: stats.assistant_messages,
        tool_calls: stats.tool_calls,
        tool_results: stats.tool_results,
        total_messages: stats.total_messages,
        tokens: TokenTotals {
            input: stats.input,
            output: stats.output,
            cache_read: stats.cache_read,
            cache_write: stats.cache_write,
            total: stats.input + stats.output + stats.cache_read + stats.cache_write,
        },
        cost: stats.cost,
        context_usage: stats
            .context_usage
            .map(|(tokens, context_window)| ContextUsage {
                tokens,
                context_window,
                percent: tokens.map(|t| t as f64 / context_window as f64 * 100.0),
            }),
        premium_requests: None,
    }
}

/// A success whose `data` is `{"<key>": <json>}` with `json` written as it is: a tree
/// thousands of levels deep cannot pass through `serde_json::Value` (recursion limits both
/// ways), and messages read straight from a session file need no second serialisation.
fn spliced_response(id: Option<Value>, command: &str, key: &str, json: &str) -> Vec<u8> {
    match response_around(id.clone(), command, key) {
        Some((mut out, tail)) => {
            out.reserve(json.len() + tail.len());
            out.extend_from_slice(json.as_bytes());
            out.extend_from_slice(&tail);
            out
        }
        None => fail(id, command, "the response could not be assembled"),
    }
}

/// A success line for `command` whose `data` is `{key: …}`, cut where the value goes.
fn response_around(id: Option<Value>, command: &str, key: &str) -> Option<(Vec<u8>, Vec<u8>)> {
    let mut data = serde_json::Map::new();
    data.insert(key.to_string(), Value::Null);
    let mut line = ok(id, command, &data);
    // `data` is the last member of a success line, so the last `null` is the placeholder.
    let at = line.windows(4).rposition(|w| w == b"null")?;
    let tail = line.get(at + 4..)?.to_vec();
    line.truncate(at);
    Some((line, tail))
}

/// `get_tree`'s response: the tree plus the leaf id.
fn tree_response(id: Option<Value>, command: &str, tree: &str, leaf_id: Option<String>) -> Vec<u8> {
    let leaf = serde_json::to_string(&leaf_id).unwrap_or_else(|_| "null".into());
    spliced_response(id, command, "tree", &format!("{tree},\"leafId\":{leaf}"))
}

fn ok<T: Serialize>(id: Option<Value>, command: &str, data: &T) -> Vec<u8> {
    Response::success(id, command, Some(data)).to_line()
}

fn done(id: Option<Value>, command: &str) -> Vec<u8> {
    Response::<()>::success(id, command, None).to_line()
}

fn fail(id: Option<Value>, command: &str, error: impl ToString) -> Vec<u8> {
    Response::<()>::failure(id, command, error.to_string()).to_line()
}

/// A failed action nobody waits for (its frame has no `id`) is reported as pi reports a
/// rejected fire-and-forget call; pi names its runtime, not the extension, for the two message
/// calls (ext §1.7).
async fn report_unanswered(
    extensions: &tau_extensions::Extensions,
    request: &tau_extensions::ActionRequest,
    error: &str,
) {
    if request.frame.id.is_some() {
        return;
    }
    let path = match request.frame.action.as_str() {
        "send_message" | "send_user_message" => "<runtime>",
        _ => request.extension.as_str(),
    };
    extensions.report(path, &request.frame.action, error).await;
}

/// Runs RPC mode until stdin closes, `shutdown` resolves (with an exit code), or stdout fails.
///
/// `ready` is the first record written. `make_session` receives the sink the session emits
/// events through.
pub async fn serve<I, O>(
    input: I,
    output: O,
    version: &str,
    shape: crate::UpdateShape,
    make_session: impl FnOnce(EventSink) -> AgentSession,
    extensions: Option<LoadedExtensions>,
    shutdown: impl Future<Output = i32>,
) -> ExitReason
where
    I: Read + Send + 'static,
    O: Write + std::os::fd::AsFd + Send + 'static,
{
    let (sink, writer, mut failed_rx) = match crate::writer::start(output, shape, OUTBOUND_CAPACITY)
    {
        Ok(started) => started,
        Err(err) => {
            tracing::error!("cannot start the stdout writer: {err}");
            return ExitReason::OutputFailed;
        }
    };
    let ready = Ready {
        version: Some(version.to_string()),
    };
    sink.emit_line(serde_json::to_vec(&ready).unwrap_or_default())
        .await;

    let mut session = make_session(sink.clone());
    let outlet = extensions
        .as_ref()
        .map(|loaded| std::sync::Arc::clone(&loaded.outlet));
    let (mut actions, mut startup) = match extensions {
        Some(loaded) => {
            loaded.outlet.attach(sink.clone()).await;
            // The session being opened (`--continue`, `--session`) must be whole before the
            // extensions read it in `session_start`.
            session.settle();
            session.set_extensions(std::sync::Arc::clone(&loaded.set));
            // `session_start` runs beside the input loop (decision 9): a dialog it opens
            // can be answered. Commands wait for it, as pi reads none before it ends.
            let set = loaded.set;
            let cwd = session.workspace().cwd().to_path_buf();
            let startup = tokio::spawn(async move {
                tau_session::extension_hooks::session_started(&set, &cwd).await
            });
            (Some(loaded.actions), Some(startup))
        }
        None => (None, None),
    };
    let mut server = RpcServer::new(session, sink, version);

    let (in_tx, mut in_rx) = mpsc::channel::<Vec<u8>>(INBOUND_CAPACITY);
    let early = server
        .session()
        .extension_binding()
        .extensions()
        .cloned()
        .map(|extensions| EarlyRoutes {
            extensions,
            dialogs: std::sync::Arc::clone(server.session().tools().mcp_client().dialogs()),
            interrupt: std::sync::Arc::clone(&server.interrupt),
        });
    let reader = std::thread::Builder::new()
        .name("tau-stdin".into())
        .spawn(move || {
            for line in LineReader::new(BufReader::with_capacity(64 * 1024, input)) {
                match line {
                    Ok(line) => {
                        if let Some(early) = &early
                            && early.take(&line)
                        {
                            continue;
                        }
                        if in_tx.blocking_send(line).is_err() {
                            break;
                        }
                    }
                    Err(err) => {
                        tracing::warn!("stdin read failed, treating it as closed: {err}");
                        break;
                    }
                }
            }
        });
    if let Err(err) = reader {
        tracing::error!("cannot start the stdin reader: {err}");
        return ExitReason::InputClosed;
    }

    tokio::pin!(shutdown);
    let command_answered = std::sync::Arc::clone(&server.command_answered);
    // After the end of input the loop goes on without it until everything read before it is
    // carried out (decision T118): the extension commands in flight, the actions they send,
    // the runs those start, the prompts held and queued behind them.
    let mut input_open = true;
    let reason = loop {
        tokio::select! {
            biased;
            code = &mut shutdown => break ExitReason::Signal(code),
            _ = &mut failed_rx => break ExitReason::OutputFailed,
            () = server.run_finished(), if server.holds_prompt() || !input_open => {
                server.release_held().await;
            }
            // Before the end of start-up: what `session_start` handlers did is in place
            // before the commands that waited for it are handled, as in pi.
            Some(action) = async {
                match actions.as_mut() {
                    Some(actions) => actions.recv().await,
                    None => std::future::pending().await,
                }
            } => {
                server.carry_out(action, outlet.as_deref()).await;
                // What is already queued goes in the same turn (bounded, so that input and
                // signals are not kept waiting), then the mirror is refreshed once.
                for _ in 0..BURST {
                    let Some(work) = actions.as_mut().and_then(|actions| actions.try_recv().ok())
                    else {
                        break;
                    };
                    server.carry_out(work, outlet.as_deref()).await;
                }
                server.refresh_mirror();
            }
            discovered = async {
                match startup.as_mut() {
                    Some(task) => task.await.unwrap_or_default(),
                    None => std::future::pending().await,
                }
            }, if startup.is_some() => {
                startup = None;
                discovered.join(&mut server.session);
                server.release_held().await;
            }
            () = command_answered.notified(), if server.shutdown_requested || !input_open => {}
            line = in_rx.recv(), if input_open => match line {
                Some(line) if startup.is_some() => server.defer_line(&line).await,
                Some(line) => {
                    server.handle_line(&line).await;
                    if server.shutdown_after_line() {
                        break ExitReason::InputClosed;
                    }
                    // The runtime has one worker (issue 44): what a command started (a
                    // compaction, a run, a `bash`) gets its turn before the next line, as it
                    // would on a worker of its own.
                    tokio::task::yield_now().await;
                }
                None => {
                    // The client is gone: nothing may wait on it any more (T77).
                    server.session.input_closed();
                    if let Some(extensions) = server.session.extension_binding().extensions() {
                        extensions.client_gone();
                    }
                    input_open = false;
                }
            },
        }
        if server.shutdown_due() {
            break ExitReason::InputClosed;
        }
        if !input_open
            && startup.is_none()
            && actions.as_ref().is_none_or(|actions| actions.is_empty())
            && server.all_carried_out()
        {
            break ExitReason::InputClosed;
        }
    };
    if let Some(task) = startup {
        let _ = task.await;
    }
    // Nothing carries out actions from here on: anything waiting for them (a command's
    // response waits until the actions it sent are done) is released instead of hanging.
    drop(actions);

    match reason {
        ExitReason::InputClosed => server.finish().await,
        ExitReason::Signal(_) => server.stop().await,
        ExitReason::OutputFailed => {}
    }
    server.session().conversation().retry_save();
    if let Some(extensions) = server.session().extension_binding().extensions().cloned() {
        tau_session::extension_hooks::quit(&extensions, reason != ExitReason::OutputFailed).await;
    }
    // On every way out, the output failing included: no server process may outlive tau.
    server.session().tools().shutdown_mcp().await;
    if let Some(outlet) = outlet {
        outlet.detach().await;
    }
    // Closing the last sender lets the writer drain what is queued and flush.
    drop(server);
    if !writer.finish().await {
        tracing::error!("the stdout writer did not finish cleanly");
    }
    if reason == ExitReason::InputClosed && failed_rx.try_recv().is_ok() {
        return ExitReason::OutputFailed;
    }
    reason
}

/// What the stdin reader does itself when extensions are loaded, because the input loop may
/// be waiting on an extension (a handler with a dialog open): dialog replies go straight to
/// the dialog, and an `abort` cuts off what the loop waits on before the loop handles it.
struct EarlyRoutes {
    extensions: std::sync::Arc<tau_extensions::Extensions>,
    /// The core's own dialogs, answered before the extensions'.
    dialogs: std::sync::Arc<tau_session::dialogs::Dialogs>,
    interrupt: std::sync::Arc<LoopInterrupt>,
}

impl EarlyRoutes {
    /// Returns true when the line was consumed here.
    fn take(&self, line: &[u8]) -> bool {
        let finder = |needle: &str| memchr::memmem::find(line, needle.as_bytes()).is_some();
        if finder("extension_ui_response")
            && let Inbound::UiResponse(response) = parse_line(line)
        {
            if !self.dialogs.answer(&response) {
                self.extensions.resolve_ui(&response);
            }
            return true;
        }
        if finder("abort")
            && let Inbound::Command {
                command: RpcCommand::Abort(_) | RpcCommand::AbortAndPrompt(_),
                ..
            } = parse_line(line)
        {
            self.interrupt.interrupt();
        }
        false
    }
}

/// Records that take effect even while a held prompt keeps the others waiting: the aborts
/// (decision 9), replies to calls a run is waiting on, and lines that are only answered
/// with an error.
fn acts_at_once(inbound: &Inbound) -> bool {
    match inbound {
        Inbound::Command { command, .. } => matches!(
            command,
            RpcCommand::Abort(_) | RpcCommand::AbortRetry(_) | RpcCommand::AbortBash(_)
        ),
        Inbound::UiResponse(_)
        | Inbound::PermissionResponse(_)
        | Inbound::HostToolResult(_)
        | Inbound::HostToolUpdate(_)
        | Inbound::Rejected(_)
        | Inbound::Ignored => true,
    }
}
