//! The one way a message enters the session, whoever sends it (an RPC `prompt`, `steer` or
//! `follow_up`, a one-shot message, an extension's `sendUserMessage`, the coming front-ends):
//! the extensions' `input` hook, then skill, template and MCP prompt expansion with the
//! queueing rules of [`AgentSession::admit`], then `before_agent_start` when it starts a run,
//! in pi's order.
//! Front-ends only parse, call [`AgentSession::submit`], and write what it returns.

use tau_protocol::{ImageContent, SessionEvent};
use tokio_util::sync::CancellationToken;

use super::{AgentSession, Launch, PromptOutcome, QueueAs, SessionError};
use crate::EventSink;
use crate::conversation::user_message;
use crate::extension_hooks::{self, InputOutcome};
use crate::mcp::McpServers;
use crate::workspace::Workspace;

/// A key stored since the session read its files (`/login` in the terminal, pi in another
/// terminal) counts from the next prompt or model listing on, as in pi; a session that
/// started with no model takes the default the keys now allow, recorded and announced as any
/// model change is. Nothing happens while the current model has its key.
pub async fn pick_up_credentials(session: &mut AgentSession) {
    let before = session.models.choice();
    let settings = session.preferences.settings();
    let (provider, model) = (
        settings.get::<String>("defaultProvider"),
        settings.get::<String>("defaultModel"),
    );
    if let Some(changed) = session
        .models
        .pick_up_credentials(provider.as_deref(), model.as_deref())
    {
        session.record_choice(changed, before, "set").await;
    }
}

/// Who sent a message: the `source` of pi's `input` event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputSource {
    /// A client of a front-end (RPC, the one-shot modes).
    Rpc,
    /// An extension's `sendUserMessage`.
    Extension,
}

impl InputSource {
    fn as_str(self) -> &'static str {
        match self {
            Self::Rpc => "rpc",
            Self::Extension => "extension",
        }
    }
}

/// A message that passed `input` but arrived while the last run still had post-run work:
/// offer it again with [`AgentSession::admit`] once that work is done (it does not pass
/// `input` twice).
#[derive(Debug, Clone)]
pub struct Admitted {
    pub text: String,
    pub images: Vec<ImageContent>,
}

/// What became of a submitted message.
#[derive(Debug)]
pub enum Submitted {
    /// An `input` handler took care of it: nothing runs.
    Handled,
    /// Queued behind the active run.
    Queued,
    /// Ready to run, `before_agent_start` applied: answer the sender, then pass it to
    /// [`AgentSession::launch`] (so the answer precedes `agent_start`).
    Start(Box<Launch>),
    /// The last run still has post-run work; see [`Admitted`].
    Held(Admitted),
}

impl AgentSession {
    /// A message from `source`, to run now or (with `queue_as`) to queue behind a run.
    /// `cancel` ends the extension hooks early (an `abort` read meanwhile).
    pub async fn submit(
        &mut self,
        text: &str,
        images: Vec<ImageContent>,
        queue_as: Option<QueueAs>,
        source: InputSource,
        cancel: &CancellationToken,
    ) -> Result<Submitted, SessionError> {
        let (mut text, mut images) = (text.to_string(), images);
        if let Some(extensions) = self.extensions.extensions().cloned()
            && extensions.subscribed("input")
        {
            let behavior = self.runs.is_streaming().then_some(match queue_as {
                Some(QueueAs::Steer) => "steer",
                _ => "followUp",
            });
            let outcome = extension_hooks::input(
                &extensions,
                text,
                images,
                source.as_str(),
                behavior,
                cancel,
            )
            .await;
            match outcome {
                InputOutcome::Handled => return Ok(Submitted::Handled),
                InputOutcome::Continue {
                    text: changed,
                    images: changed_images,
                } => (text, images) = (changed, changed_images),
            }
        }
        self.admit(Admitted { text, images }, queue_as, cancel)
            .await
    }

    /// A message past `input` (a held one offered again): expansion, queueing, and
    /// `before_agent_start` when it starts a run. Queued when a run streams and a queue was
    /// named, an error when none was, otherwise checked (model, key) and ready to launch
    /// (rpc.md §3.1). Whether the session streams is decided here, synchronously, so two
    /// prompts in a row can never both start a run (pi's lost-prompt race).
    pub async fn admit(
        &mut self,
        message: Admitted,
        queue_as: Option<QueueAs>,
        cancel: &CancellationToken,
    ) -> Result<Submitted, SessionError> {
        self.runs.reap().await;
        let outcome = if queue_as.is_none() && self.runs.in_post_run() {
            PromptOutcome::Held
        } else {
            let (text, images) = expand_input(
                &self.workspace,
                &self.events,
                self.tools.mcp(),
                &message.text,
                message.images.clone(),
                cancel,
            )
            .await?;
            let text = &text;
            if self.runs.is_streaming() {
                let Some(queue_as) = queue_as else {
                    return Err(SessionError::Busy);
                };
                let update = self.conversation.queue(queue_as, text, images);
                self.events.emit(update).await;
                PromptOutcome::Queued
            } else {
                pick_up_credentials(self).await;
                self.models.check_credentials()?;
                PromptOutcome::Start(Box::new(Launch {
                    prompt: user_message(text, images),
                    extra: Vec::new(),
                    system_prompt: None,
                }))
            }
        };
        Ok(match outcome {
            PromptOutcome::Queued => Submitted::Queued,
            PromptOutcome::Held => Submitted::Held(message),
            PromptOutcome::Start(mut launch) => {
                if let Some(extensions) = self.extensions.extensions().cloned()
                    && extensions.subscribed("before_agent_start")
                {
                    let (prompt, images) = launch.prompt();
                    let changes = extension_hooks::before_agent_start(
                        &extensions,
                        &prompt,
                        &images,
                        self.next_call().system_prompt,
                        cancel,
                    )
                    .await;
                    launch.apply(changes);
                }
                Submitted::Start(launch)
            }
        })
    }

    /// Queues a steering or follow-up message (also when idle: it waits for the next run),
    /// with a `/skill:` command, a template or an MCP prompt expanded. An MCP prompt that
    /// cannot be had is queued as typed (this path has no answer to carry the error), and
    /// the reason goes to the log.
    pub async fn enqueue(&mut self, queue_as: QueueAs, text: &str, images: Vec<ImageContent>) {
        // Only an MCP prompt can fail; only then are the images needed again.
        let kept = text
            .strip_prefix('/')
            .is_some_and(|rest| rest.starts_with(tau_mcp::prompt::COMMAND_PREFIX))
            .then(|| images.clone());
        let expanded = expand_input(
            &self.workspace,
            &self.events,
            self.tools.mcp(),
            text,
            images,
            &CancellationToken::new(),
        )
        .await;
        let (text, images) = expanded.unwrap_or_else(|error| {
            tracing::warn!("{error}");
            (text.to_string(), kept.unwrap_or_default())
        });
        let update = self.conversation.queue(queue_as, &text, images);
        self.events.emit(update).await;
    }
}

/// Expands a `/skill:` command, a template or an MCP prompt (`/mcp:<server>:<prompt>`,
/// whose images join the message's); a skill file that cannot be read is reported as pi
/// reports it (an `extension_error` for `skill_expansion`), an MCP prompt that cannot be had
/// is the error (decision T95).
async fn expand_input(
    workspace: &Workspace,
    events: &EventSink,
    mcp: Option<&McpServers>,
    text: &str,
    mut images: Vec<ImageContent>,
    cancel: &CancellationToken,
) -> Result<(String, Vec<ImageContent>), SessionError> {
    if let Some(mcp) = mcp
        && let Some(expanded) = mcp.expand_prompt(text, cancel).await
    {
        let expanded = expanded.map_err(|error| SessionError::McpPrompt(error.to_string()))?;
        images.extend(expanded.images);
        return Ok((expanded.text, images));
    }
    let (text, failure) = workspace.resources().expand(text);
    if let Some((file, error)) = failure {
        events
            .emit(SessionEvent::ExtensionError {
                extension_path: file.display().to_string(),
                event: "skill_expansion".into(),
                error,
            })
            .await;
    }
    if let Some(mcp) = mcp
        && text.contains('@')
        && let Some(attached) = mcp.attach_mentions(&text, cancel).await
    {
        let (text, more) = attached.map_err(SessionError::McpPrompt)?;
        images.extend(more);
        return Ok((text, images));
    }
    Ok((text, images))
}
