//! The RPC `bash` command (rpc.md §10): a shell command run outside the agent loop, its
//! output cut to pi's limits, and its `bashExecution` message put into the conversation
//! (at once when idle, after the run when one is streaming).

use std::path::PathBuf;
use std::sync::Arc;

use tau_protocol::{AgentMessage, BashExecutionMessage};
use tau_tools::bash::{ShellRequest, ShellStatus, run_shell};

use super::AgentSession;
use crate::bash_commands::lock;
use crate::conversation::Conversation;

/// What a finished `bash` command answers.
#[derive(Debug, Clone, PartialEq)]
pub struct BashRun {
    pub output: String,
    pub exit_code: Option<i32>,
    pub cancelled: bool,
    pub truncated: bool,
    pub full_output_path: Option<PathBuf>,
    /// xcsh's counts: the whole output, and what `output` keeps of it.
    pub total_lines: u64,
    pub total_bytes: u64,
    pub output_lines: u64,
    pub output_bytes: u64,
}

impl AgentSession {
    /// Starts `command` and returns at once; `done` gets the result (or the error text) when
    /// the command ends, after its message is in the conversation.
    pub fn start_bash(
        &self,
        command: String,
        exclude_from_context: Option<bool>,
        done: impl FnOnce(Result<BashRun, String>) -> futures_util::future::BoxFuture<'static, ()>
        + Send
        + 'static,
    ) {
        let env = crate::tool_selection::tool_env(
            self.workspace.config(),
            self.preferences.settings(),
            self.models.model(),
        );
        let mut request = ShellRequest::new(&env, &command);
        request.sanitize = true;
        let commands = Arc::clone(self.tools.bash_commands());
        let conversation = Arc::clone(&self.conversation);
        let (id, cancel) = commands.start();
        tokio::spawn(async move {
            let outcome = run_shell(request, &cancel, |_| {}).await;
            commands.end(id);
            let result = match outcome {
                Err(err) => Err(err.to_string()),
                Ok(outcome) => {
                    let snapshot = outcome.output;
                    let truncated = snapshot.truncation.truncated;
                    let count = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
                    let counts = &snapshot.truncation;
                    let (total_lines, total_bytes, output_lines, output_bytes) = (
                        count(counts.total_lines),
                        count(counts.total_bytes),
                        count(counts.output_lines),
                        count(counts.output_bytes),
                    );
                    let output = if truncated {
                        snapshot.truncation.content
                    } else {
                        snapshot.tail
                    };
                    let full_output_path = snapshot.full_output_path.filter(|_| truncated);
                    if let Some(path) = &full_output_path {
                        lock(&commands.temp_files).push(path.clone());
                    }
                    let (exit_code, cancelled) = match outcome.status {
                        ShellStatus::Exited(code) => (Some(code), false),
                        ShellStatus::Signaled(_) => (None, false),
                        ShellStatus::Aborted | ShellStatus::TimedOut => (None, true),
                    };
                    let run = BashRun {
                        output,
                        exit_code,
                        cancelled,
                        truncated,
                        full_output_path,
                        total_lines,
                        total_bytes,
                        output_lines,
                        output_bytes,
                    };
                    record(&conversation, &command, &run, exclude_from_context);
                    Ok(run)
                }
            };
            done(result).await;
        });
    }
}

/// Puts the command's `bashExecution` message into the conversation: at once when no run
/// streams, else held until the run ends, so it never lands between a run's messages.
fn record(conversation: &Conversation, command: &str, run: &BashRun, exclude: Option<bool>) {
    let message = AgentMessage::BashExecution(BashExecutionMessage {
        command: command.to_string(),
        output: run.output.clone(),
        exit_code: run.exit_code,
        cancelled: run.cancelled,
        truncated: run.truncated,
        full_output_path: run
            .full_output_path
            .as_ref()
            .map(|p| p.to_string_lossy().into_owned()),
        timestamp: tau_ai::now_ms(),
        exclude_from_context: exclude,
    });
    let mut state = conversation.lock();
    if state.run_active {
        state.held_back.push(message);
        return;
    }
    let message = Arc::new(message);
    state.messages.push(Arc::clone(&message));
    drop(state);
    conversation.persist(|store| store.append_message(message));
}
