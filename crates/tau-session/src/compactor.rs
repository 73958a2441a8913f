//! Compaction wired into the session (rpc.md §8, §3.13, decision 4): the `compact` command,
//! and the automatic compaction a run triggers when its context passes the threshold or
//! overflows (then the failed request is sent again once, with the compacted context).
//! The rules (cut point, summary prompts, file lists) live in [`crate::compaction`].
//! Nothing here knows the run task (`runs.rs`) or the session: the run task calls
//! [`after_run`] and [`manual`], and the session builds the [`Summarizer`] they use.

use tau_ai::provider::{CancellationToken, HttpClient, StreamOptions, stream};
use tau_protocol::extension_event::{
    CompactPreparation, ExtensionEvent, FileOps, SessionBeforeCompactResult, SuppliedCompaction,
    take_result,
};
use tau_protocol::{AgentMessage, AssistantContent, AssistantMessageEvent, Model, StopReason};
use tau_protocol::{CompactionReason, CompactionResult, SessionEvent};

use crate::SessionError;
use crate::compaction::summary::{
    SummaryInput, SummaryRequest, assemble_summary, compaction_result, estimated_tokens_after,
    history_request, turn_prefix_request,
};
use crate::compaction::{
    CompactionPreparation, CompactionSettings, prepare_compaction, should_compact,
};
use crate::conversation::{Conversation, Host};
use crate::tokens;

/// Everything a compaction needs, so a finished run can compact without the session.
#[derive(Clone)]
pub(crate) struct Summarizer {
    pub client: HttpClient,
    pub model: Model,
    pub options: StreamOptions,
    pub settings: CompactionSettings,
}

/// The active branch and what compacting it would summarise, worked out once.
pub(crate) struct Prepared {
    path: Vec<crate::store::SessionEntry>,
    preparation: CompactionPreparation,
}

impl Prepared {
    /// Errors are pi's texts (`Already compacted`, `Nothing to compact …`).
    fn of(conversation: &Conversation, keep_recent_tokens: u64) -> Result<Self, String> {
        let path: Vec<crate::store::SessionEntry> = conversation
            .store()
            .branch_path()
            .into_iter()
            .cloned()
            .collect();
        let refs: Vec<&crate::store::SessionEntry> = path.iter().collect();
        let preparation =
            prepare_compaction(&refs, keep_recent_tokens).map_err(|skip| skip.to_string())?;
        Ok(Self { path, preparation })
    }
}

impl Summarizer {
    /// The summariser for the current model, when there is one with a key. `client` is asked
    /// for only then; the preferences give the request options and the compaction settings.
    pub(crate) fn new(
        models: &crate::model_choice::ModelChoice,
        client: impl FnOnce() -> HttpClient,
        preferences: &crate::preferences::Preferences,
        conversation: &Conversation,
    ) -> Result<Self, SessionError> {
        models.check_credentials()?;
        let Some(model) = models.model().cloned() else {
            return Err(SessionError::NoApiKey("the selected model".into()));
        };
        let config = models
            .registry()
            .request_config(&model)
            .map_err(|e| SessionError::Credentials(e.to_string()))?;
        Ok(Self {
            client: client(),
            model: Model {
                base_url: config.base_url,
                ..model.clone()
            },
            options: StreamOptions {
                api_key: config.api_key.map(|k| k.expose().to_string()),
                headers: config.headers,
                reasoning: model.reasoning.then_some(models.thinking_level()),
                session_id: Some(conversation.session_id()),
                ..preferences.provider_options(conversation.idle_cap())
            },
            settings: preferences.compaction_settings(),
        })
    }

    /// Summarises what `prepared` names, appends the compaction entry and rebuilds the
    /// in-memory context from it; `get_state.isCompacting` is true meanwhile. Errors are the
    /// texts pi reports.
    async fn compact(
        &self,
        conversation: &Conversation,
        prepared: Prepared,
        custom_instructions: Option<&str>,
        cancel: &CancellationToken,
    ) -> Result<CompactionResult, String> {
        conversation.lock().compacting = true;
        let outcome = self
            .summarize(conversation, prepared, custom_instructions, cancel)
            .await;
        conversation.lock().compacting = false;
        outcome
    }

    async fn summarize(
        &self,
        conversation: &Conversation,
        prepared: Prepared,
        custom_instructions: Option<&str>,
        cancel: &CancellationToken,
    ) -> Result<CompactionResult, String> {
        let Prepared { path, preparation } = prepared;
        let refs: Vec<&crate::store::SessionEntry> = path.iter().collect();
        let max_tokens = self.model.max_tokens;
        let reserve = self.settings.reserve_tokens;
        let history = if preparation.messages_to_summarize.is_empty() {
            None
        } else {
            let mut input = SummaryInput::new(preparation.messages_to_summarize.clone());
            let summary = self
                .ask(cancel, &mut input, |input| {
                    history_request(
                        input,
                        preparation.previous_summary.as_deref(),
                        custom_instructions,
                        reserve,
                        max_tokens,
                    )
                })
                .await
                .map_err(|e| format!("Summarization failed: {e}"))?;
            Some(summary)
        };
        let prefix = if preparation.is_split_turn && !preparation.turn_prefix_messages.is_empty() {
            let mut input = SummaryInput::new(preparation.turn_prefix_messages.clone());
            let summary = self
                .ask(cancel, &mut input, |input| {
                    turn_prefix_request(input, reserve, max_tokens)
                })
                .await
                .map_err(|e| format!("Turn prefix summarization failed: {e}"))?;
            Some(summary)
        } else {
            None
        };
        let summary =
            assemble_summary(history.as_deref(), prefix.as_deref(), &preparation.file_ops);
        let after = estimated_tokens_after(
            &refs,
            &preparation.first_kept_entry_id,
            &summary,
            preparation.tokens_before,
        );
        let result = compaction_result(&preparation, summary.clone(), after);
        // An abort that came while the last reply finished still wins, as in pi.
        if cancel.is_cancelled() {
            return Err(CANCELLED.to_string());
        }
        let messages = {
            let mut store = conversation.store();
            store
                .append_compaction(
                    summary,
                    preparation.first_kept_entry_id.clone(),
                    preparation.tokens_before,
                    Some(preparation.file_ops.to_value()),
                    false,
                )
                .map_err(|e| e.to_string())?;
            store.build_context().messages
        };
        conversation.lock().messages = messages;
        Ok(result)
    }

    /// One summary request; a request that itself overflows the model is sent again with
    /// smaller input until it fits or nothing more can go.
    pub(crate) async fn ask(
        &self,
        cancel: &CancellationToken,
        input: &mut SummaryInput,
        request: impl Fn(&SummaryInput) -> SummaryRequest,
    ) -> Result<String, String> {
        loop {
            let req = request(input);
            let options = StreamOptions {
                max_tokens: Some(req.max_tokens),
                cancel: cancel.clone(),
                include_partial: false,
                ..self.options.clone()
            };
            let context = req.context(tau_ai::now_ms());
            match complete(&self.client, &self.model, &context, options).await {
                Ok(text) => return Ok(text),
                Err(error) if tau_ai::provider::is_overflow_error(&error) && input.shrink() => {
                    tracing::info!("summary request overflowed; retrying with less input");
                }
                Err(error) => return Err(error),
            }
        }
    }
}

/// The text of a finished reply, or its error message.
pub(crate) async fn complete(
    client: &HttpClient,
    model: &Model,
    context: &tau_ai::provider::Context,
    options: StreamOptions,
) -> Result<String, String> {
    let mut events = stream(client, model, context, options);
    while let Some(event) = events.next().await {
        match event {
            AssistantMessageEvent::Done { message, .. } => {
                return Ok(message
                    .content
                    .iter()
                    .filter_map(|c| match c {
                        AssistantContent::Text(t) => Some(t.text.as_str()),
                        _ => None,
                    })
                    .collect::<Vec<_>>()
                    .join(""));
            }
            AssistantMessageEvent::Error { error, .. } => {
                return Err(error
                    .error_message
                    .unwrap_or_else(|| "unknown error".to_string()));
            }
            _ => {}
        }
    }
    Err("The provider stream ended without a result".into())
}

/// A `compact` command for the run task: its instructions, the summariser (or why there is
/// none) and who gets the outcome. Kept here, not beside the run task, so that compaction
/// does not depend on the module that runs it.
pub(crate) struct ManualCompaction {
    pub custom_instructions: Option<String>,
    pub summarizer: Result<Summarizer, String>,
    pub done: CompactDone,
}

/// Receives a `compact`'s outcome (its response is written from here).
pub type CompactDone = Box<
    dyn FnOnce(
            Result<CompactionResult, SessionError>,
        ) -> futures_util::future::BoxFuture<'static, ()>
        + Send,
>;

/// The manual compaction itself (rpc.md §3.13): `compaction_start` always, a failure
/// announced by `compaction_end` before the error, `cancel` (an `abort`) ending it as pi's
/// cancelled compaction (`aborted:true`, `Compaction cancelled`).
pub(crate) async fn manual(
    host: &Host,
    summarizer: Result<Summarizer, String>,
    custom_instructions: Option<&str>,
    cancel: &CancellationToken,
) -> Result<CompactionResult, SessionError> {
    host.events
        .emit(SessionEvent::CompactionStart {
            reason: CompactionReason::Manual,
        })
        .await;
    // pi counts the whole compaction, its extension hook included, as compacting.
    host.conversation.lock().compacting = true;
    let mut from_extension = false;
    let outcome = match summarizer {
        Ok(summarizer) => {
            match Prepared::of(&host.conversation, summarizer.settings.keep_recent_tokens) {
                Ok(prepared) => {
                    let decision = match &host.extensions {
                        Some(extensions) => {
                            ask_extensions(
                                extensions,
                                &prepared,
                                custom_instructions,
                                "manual",
                                false,
                                Some(cancel),
                            )
                            .await
                        }
                        None => HookDecision::Proceed,
                    };
                    match decision {
                        _ if cancel.is_cancelled() => Err(CANCELLED.to_string()),
                        HookDecision::Cancel => Err(CANCELLED.to_string()),
                        HookDecision::Supplied(supplied) => {
                            from_extension = true;
                            Ok(write_supplied(&host.conversation, &prepared, supplied))
                        }
                        HookDecision::Proceed => {
                            summarizer
                                .summarize(
                                    &host.conversation,
                                    prepared,
                                    custom_instructions,
                                    cancel,
                                )
                                .await
                        }
                    }
                }
                Err(skip) => Err(skip),
            }
        }
        Err(err) => Err(err),
    };
    let outcome = match outcome {
        Err(_) if cancel.is_cancelled() => Err(CANCELLED.to_string()),
        other => other,
    };
    if let (Ok(result), Some(extensions)) = (&outcome, &host.extensions)
        && extensions.subscribed("session_compact")
    {
        let entry = host
            .conversation
            .store()
            .entries()
            .last()
            .and_then(|e| serde_json::to_value(e).ok());
        crate::extension_hooks::notify(
            extensions,
            ExtensionEvent::SessionCompact {
                compaction_entry: entry,
                from_extension,
                reason: "manual",
                will_retry: false,
                result: &serde_json::to_value(result).unwrap_or_default(),
            }
            .to_value(),
        )
        .await;
    }
    host.conversation.lock().compacting = false;
    let aborted = matches!(&outcome, Err(e) if e == CANCELLED);
    let (result, error_message) = match &outcome {
        Ok(result) => (Some(result.clone()), None),
        Err(_) if aborted => (None, None),
        Err(error) => (None, Some(format!("Compaction failed: {error}"))),
    };
    host.events
        .emit(SessionEvent::CompactionEnd {
            reason: CompactionReason::Manual,
            result,
            aborted,
            will_retry: false,
            error_message,
        })
        .await;
    outcome.map_err(SessionError::Store)
}

/// pi's text for a compaction an extension or an `abort` stopped.
const CANCELLED: &str = "Compaction cancelled";

/// `session_before_compact` (ext §3.2): the first `cancel` stops the compaction; a
/// `compaction` an extension returns replaces the model's summary.
async fn ask_extensions(
    extensions: &tau_extensions::Extensions,
    prepared: &Prepared,
    custom_instructions: Option<&str>,
    reason: &str,
    will_retry: bool,
    cancel: Option<&CancellationToken>,
) -> HookDecision {
    if !extensions.subscribed("session_before_compact") {
        return HookDecision::Proceed;
    };
    let p = &prepared.preparation;
    let to_summarize = serde_json::to_value(&p.messages_to_summarize).unwrap_or_default();
    let turn_prefix = serde_json::to_value(&p.turn_prefix_messages).unwrap_or_default();
    let branch = serde_json::to_value(&prepared.path).unwrap_or_default();
    let event = ExtensionEvent::SessionBeforeCompact {
        preparation: CompactPreparation {
            first_kept_entry_id: &p.first_kept_entry_id,
            messages_to_summarize: &to_summarize,
            turn_prefix_messages: &turn_prefix,
            is_split_turn: p.is_split_turn,
            tokens_before: p.tokens_before,
            previous_summary: p.previous_summary.as_deref(),
            file_ops: FileOps {
                read: &p.file_ops.read_files,
                written: &p.file_ops.modified_files,
                edited: [],
            },
        },
        branch_entries: &branch,
        reason,
        will_retry,
        custom_instructions,
    }
    .to_value();
    let mut decision = HookDecision::Proceed;
    extensions
        .emit(event, cancel, |_, result| {
            let result: SessionBeforeCompactResult = take_result(result);
            if result.cancel == Some(true) {
                decision = HookDecision::Cancel;
                return std::ops::ControlFlow::Break(());
            }
            if let Some(supplied) = result.compaction {
                decision = HookDecision::Supplied(supplied);
            }
            std::ops::ControlFlow::Continue(())
        })
        .await;
    decision
}

/// What the `session_before_compact` handlers decided.
enum HookDecision {
    Proceed,
    Cancel,
    Supplied(SuppliedCompaction),
}

/// Writes an extension's compaction (`fromHook: true`) and rebuilds the context from it.
fn write_supplied(
    conversation: &Conversation,
    prepared: &Prepared,
    supplied: SuppliedCompaction,
) -> CompactionResult {
    let p = &prepared.preparation;
    let first_kept = supplied
        .first_kept_entry_id
        .unwrap_or_else(|| p.first_kept_entry_id.clone());
    let tokens_before = supplied.tokens_before.unwrap_or(p.tokens_before);
    let messages = {
        let mut store = conversation.store();
        if let Err(err) = store.append_compaction(
            supplied.summary.clone(),
            first_kept.clone(),
            tokens_before,
            supplied.details.clone(),
            true,
        ) {
            tracing::error!("cannot write the session file: {err}");
        }
        store.build_context().messages
    };
    conversation.lock().messages = messages;
    CompactionResult {
        summary: supplied.summary,
        short_summary: None,
        first_kept_entry_id: first_kept,
        tokens_before,
        estimated_tokens_after: None,
        details: supplied.details,
        preserve_data: None,
    }
}

/// After a run (rpc.md §8.3): compacts when the context overflowed (and says to send the
/// failed request again, once per prompt) or passed the threshold.
pub(crate) async fn after_run(
    host: &Host,
    summarizer: &Summarizer,
    added: &[AgentMessage],
    overflow_retried: &mut bool,
    cancel: &CancellationToken,
) -> bool {
    if !summarizer.settings.enabled || cancel.is_cancelled() {
        return false;
    }
    let Some(AgentMessage::Assistant(last)) = added.last() else {
        return false;
    };
    let window = summarizer.model.context_window;
    let overflow = last.provider == summarizer.model.provider
        && last.model == summarizer.model.id
        && tau_ai::provider::is_context_overflow(last, window);
    let reason = if overflow {
        if *overflow_retried {
            host.events
                .emit(SessionEvent::CompactionEnd {
                    reason: CompactionReason::Overflow,
                    result: None,
                    aborted: false,
                    will_retry: false,
                    error_message: Some(
                        "Context overflow recovery failed after one compact-and-retry attempt. Try reducing context or switching to a larger-context model."
                            .into(),
                    ),
                })
                .await;
            return false;
        }
        *overflow_retried = true;
        // The failed reply leaves the context (the session file keeps it).
        let mut state = host.conversation.lock();
        if matches!(state.messages.last().map(|m| &**m), Some(AgentMessage::Assistant(a)) if a.stop_reason == StopReason::Error)
        {
            state.messages.pop();
        }
        CompactionReason::Overflow
    } else {
        if matches!(last.stop_reason, StopReason::Error | StopReason::Aborted) {
            return false;
        }
        let context_tokens = tokens::usage_tokens(&last.usage);
        if !should_compact(context_tokens, window, &summarizer.settings) {
            return false;
        }
        CompactionReason::Threshold
    };
    let will_retry = overflow && last.stop_reason != StopReason::Stop;
    // Nothing to compact: no events at all (pi checks before announcing).
    let Ok(prepared) = Prepared::of(&host.conversation, summarizer.settings.keep_recent_tokens)
    else {
        return false;
    };
    host.events
        .emit(SessionEvent::CompactionStart { reason })
        .await;
    host.events
        .emit(SessionEvent::AutoCompactionStart {
            reason,
            action: None,
        })
        .await;
    let reason_text = match reason {
        CompactionReason::Overflow => "overflow",
        _ => "threshold",
    };
    let decision = match &host.extensions {
        Some(extensions) => {
            ask_extensions(
                extensions,
                &prepared,
                None,
                reason_text,
                will_retry,
                Some(cancel),
            )
            .await
        }
        None => HookDecision::Proceed,
    };
    // A cancel by an extension ends the compaction as aborted, like an abort (ext §3.2).
    let mut cancelled_by_extension = false;
    let outcome = match decision {
        HookDecision::Proceed => {
            summarizer
                .compact(&host.conversation, prepared, None, cancel)
                .await
        }
        HookDecision::Supplied(supplied) => {
            Ok(write_supplied(&host.conversation, &prepared, supplied))
        }
        HookDecision::Cancel => {
            cancelled_by_extension = true;
            Err("Compaction cancelled".to_string())
        }
    };
    let aborted = cancel.is_cancelled() || cancelled_by_extension;
    let (result, error_message, will_retry) = match outcome {
        Ok(result) => (Some(result), None, will_retry),
        Err(_) if aborted => (None, None, false),
        Err(error) => {
            let prefix = if overflow {
                "Context overflow recovery failed"
            } else {
                "Auto-compaction failed"
            };
            (None, Some(format!("{prefix}: {error}")), false)
        }
    };
    host.events
        .emit(SessionEvent::CompactionEnd {
            reason,
            result: result.clone(),
            aborted,
            will_retry,
            error_message: error_message.clone(),
        })
        .await;
    host.events
        .emit(SessionEvent::AutoCompactionEnd {
            action: None,
            result,
            aborted,
            will_retry,
            error_message,
            skipped: None,
        })
        .await;
    will_retry
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::SessionStore;

    #[test]
    fn an_empty_branch_has_nothing_to_compact() {
        let conversation = Conversation::new(SessionStore::in_memory(std::path::Path::new("/tmp")));
        let error = Prepared::of(&conversation, 20_000).err();
        assert!(
            error
                .as_deref()
                .is_some_and(|e| e.starts_with("Nothing to compact")),
            "{error:?}"
        );
    }

    #[test]
    fn an_extension_compaction_is_written_and_becomes_the_context() {
        let conversation = Conversation::new(SessionStore::in_memory(std::path::Path::new("/tmp")));
        let prepared = Prepared {
            path: Vec::new(),
            preparation: CompactionPreparation {
                first_kept_entry_id: "kept".into(),
                messages_to_summarize: Vec::new(),
                turn_prefix_messages: Vec::new(),
                is_split_turn: false,
                previous_summary: None,
                tokens_before: 1234,
                file_ops: Default::default(),
            },
        };
        let supplied = SuppliedCompaction {
            summary: "what happened".into(),
            first_kept_entry_id: None,
            tokens_before: None,
            details: Some(serde_json::json!({"by": "extension"})),
        };
        let result = write_supplied(&conversation, &prepared, supplied);
        assert_eq!(result.summary, "what happened");
        assert_eq!(result.first_kept_entry_id, "kept");
        assert_eq!(result.tokens_before, 1234);
        let store = conversation.store();
        let last = store.entries().last().map(|e| e.kind.clone());
        assert!(
            matches!(
                last,
                Some(crate::store::EntryKind::Compaction {
                    from_hook: Some(true),
                    ..
                })
            ),
            "{last:?}"
        );
    }
}
