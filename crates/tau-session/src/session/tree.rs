//! Moving the session's leaf to another entry of its tree (`ctx.navigateTree`, ext §4.2), with
//! the `session_before_tree` / `session_tree` events around it and, when asked, a summary of
//! the branch left behind written where the conversation goes back to. pi's RPC mode has no
//! command for this; extensions' commands reach it.

use std::sync::Arc;
use tau_protocol::extension_event::{
    ExtensionEvent, SessionBeforeTreeResult, TreePreparation, take_result,
};

use serde_json::{Value, json};
use tau_ai::provider::CancellationToken;
use tau_protocol::{AgentMessage, CompactionSummaryMessage};

use super::{AgentSession, SessionError};
use crate::compaction::FileOps;
use crate::compaction::summary::{BRANCH_SUMMARY_LEAD, SummaryInput, branch_request};
use crate::store::{EntryKind, SessionEntry, context_message};
use crate::tokens::estimate_tokens;

/// `navigateTree`'s options.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NavigateOptions {
    pub summarize: bool,
    pub custom_instructions: Option<String>,
    pub replace_instructions: bool,
    pub label: Option<String>,
}

/// What `navigateTree` resolves to.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NavigateOutcome {
    pub cancelled: bool,
    /// The summary request was aborted.
    pub aborted: bool,
    /// The text of the user (or extension) message navigated to, which pi puts back in the
    /// editor: the leaf goes to that message's parent.
    pub editor_text: Option<String>,
    /// The `branch_summary` entry written, as stored.
    pub summary_entry: Option<Value>,
}

impl NavigateOutcome {
    /// The action's answer, in pi's field names.
    pub fn to_value(&self) -> Value {
        let mut value = json!({ "cancelled": self.cancelled });
        if self.aborted {
            value["aborted"] = json!(true);
        }
        if let Some(text) = &self.editor_text {
            value["editorText"] = json!(text);
        }
        if let Some(entry) = &self.summary_entry {
            value["summaryEntry"] = entry.clone();
        }
        value
    }
}

/// A summary an extension wrote in `session_before_tree`.
#[derive(serde::Deserialize)]
struct SuppliedSummary {
    summary: String,
    details: Option<Value>,
}

impl AgentSession {
    /// Moves the leaf to `target_id` (pi's rules: a user or extension message is re-entered,
    /// so the leaf goes to its parent; anything else becomes the leaf), summarising the
    /// abandoned branch first when `options.summarize` is set. Waits for a running run to
    /// end: the leaf must not move under it.
    pub async fn navigate_tree(
        &mut self,
        target_id: &str,
        options: NavigateOptions,
    ) -> Result<NavigateOutcome, SessionError> {
        self.runs.wait_idle().await;
        let old_leaf = self.conversation.leaf_id();
        if old_leaf.as_deref() == Some(target_id) {
            return Ok(NavigateOutcome::default());
        }
        if options.summarize && self.models.model().is_none() {
            return Err(SessionError::Store(
                "No model available for summarization".into(),
            ));
        }
        let (target, entries, common_ancestor) = {
            let store = self.conversation.store();
            let Some(target) = store.entry(target_id).cloned() else {
                return Err(SessionError::Store(format!("Entry {target_id} not found")));
            };
            let (entries, common) = abandoned_entries(
                &store.path_of(old_leaf.as_deref()),
                &store.path_of(Some(target_id)),
            );
            (target, entries, common)
        };
        let mut custom_instructions = options.custom_instructions.clone();
        let mut replace_instructions = options.replace_instructions;
        let mut label = options.label.clone();
        let mut supplied = None;
        if let Some(extensions) = self
            .extensions
            .extensions()
            .cloned()
            .filter(|e| e.subscribed("session_before_tree"))
        {
            let entries_value = serde_json::to_value(&entries).unwrap_or_default();
            let event = ExtensionEvent::SessionBeforeTree {
                preparation: TreePreparation {
                    target_id,
                    old_leaf_id: old_leaf.as_deref(),
                    common_ancestor_id: common_ancestor.as_deref(),
                    entries_to_summarize: &entries_value,
                    user_wants_summary: options.summarize,
                    custom_instructions: options.custom_instructions.as_deref(),
                    replace_instructions: options.replace_instructions,
                    label: options.label.as_deref(),
                },
            }
            .to_value();
            let mut cancelled = false;
            extensions
                .emit(event, None, |_, result| {
                    let result: SessionBeforeTreeResult = take_result(result);
                    if result.cancel == Some(true) {
                        cancelled = true;
                        return std::ops::ControlFlow::Break(());
                    }
                    if let Some(summary) = result
                        .summary
                        .and_then(|s| serde_json::from_value::<SuppliedSummary>(s).ok())
                    {
                        supplied = Some(summary);
                    }
                    if let Some(text) = result.custom_instructions {
                        custom_instructions = text.as_str().map(str::to_owned);
                    }
                    if let Some(replace) = result.replace_instructions {
                        replace_instructions = replace;
                    }
                    if let Some(text) = result.label {
                        label = text.as_str().map(str::to_owned);
                    }
                    std::ops::ControlFlow::Continue(())
                })
                .await;
            if cancelled {
                return Ok(NavigateOutcome {
                    cancelled: true,
                    ..NavigateOutcome::default()
                });
            }
        }
        // An extension's summary counts only when one was asked for, as in pi.
        let supplied = supplied.filter(|_| options.summarize);
        let from_extension = supplied.is_some();
        let summary = match supplied {
            Some(s) => Some((s.summary, s.details)),
            None if options.summarize && !entries.is_empty() => {
                let summarizer =
                    self.runs
                        .summarizer(&self.models, &self.preferences, &self.conversation)?;
                let budget = summarizer
                    .model
                    .context_window
                    .saturating_sub(self.preferences.settings().branch_summary_reserve_tokens());
                let (messages, file_ops) = branch_messages(&entries, budget);
                let details = file_ops.details();
                let mut input = SummaryInput::new(messages);
                let cancel = CancellationToken::new();
                let text = summarizer
                    .ask(&cancel, &mut input, |input| {
                        branch_request(input, custom_instructions.as_deref(), replace_instructions)
                    })
                    .await
                    .map_err(SessionError::Store)?;
                let mut summary = format!("{BRANCH_SUMMARY_LEAD}{text}");
                summary.push_str(&crate::compaction::summary::assemble_summary(
                    Some(""),
                    None,
                    &details,
                ));
                Some((summary, Some(details.to_value())))
            }
            None => None,
        };
        let (new_leaf, editor_text) = match (&target.kind, target.message()) {
            (_, Some(AgentMessage::User(user))) => {
                (target.parent_id.clone(), Some(user.content.text("")))
            }
            (EntryKind::CustomMessage { content, .. }, _) => {
                (target.parent_id.clone(), Some(content.text("")))
            }
            _ => (Some(target_id.to_owned()), None),
        };
        let summary_entry = {
            let mut store = self.conversation.store();
            let moved = match summary {
                Some((text, details)) => store
                    .append_branch_summary(
                        new_leaf.as_deref(),
                        text,
                        details,
                        from_extension.then_some(true),
                    )
                    .map(Some),
                None => store.set_leaf(new_leaf.as_deref()).map(|()| None),
            };
            let summary_id = moved.map_err(|e| SessionError::Store(e.to_string()))?;
            if let Some(label) = label.as_deref().filter(|l| !l.is_empty()) {
                let labelled = summary_id.as_deref().unwrap_or(target_id);
                if let Err(err) = store.append_label(labelled, Some(label)) {
                    tracing::error!("cannot write the session file: {err}");
                }
            }
            summary_id
                .and_then(|id| store.entry(&id).cloned())
                .and_then(|e| serde_json::to_value(e).ok())
        };
        let messages = self.conversation.store().build_context().messages;
        self.conversation.lock().messages = messages;
        super::files::sync_todos(&self.conversation, &self.todos);
        self.refresh_extension_state();
        if let Some(extensions) = self.extensions.extensions().cloned() {
            let new_leaf = self.conversation.leaf_id();
            let event = ExtensionEvent::SessionTree {
                new_leaf_id: new_leaf.as_deref(),
                old_leaf_id: old_leaf.as_deref(),
                summary_entry: summary_entry.as_ref(),
                from_extension: summary_entry.is_some().then_some(from_extension),
            };
            crate::extension_hooks::notify(&extensions, event.to_value()).await;
        }
        Ok(NavigateOutcome {
            cancelled: false,
            aborted: false,
            editor_text,
            summary_entry,
        })
    }
}

/// The entries between the old leaf and where its path meets the target's (the deepest entry
/// both paths share, not included), oldest first, and that shared entry's id.
fn abandoned_entries(
    old_path: &[&SessionEntry],
    target_path: &[&SessionEntry],
) -> (Vec<SessionEntry>, Option<String>) {
    let common = target_path
        .iter()
        .rev()
        .find(|t| old_path.iter().any(|o| o.id == t.id))
        .map(|e| e.id.clone());
    let start = match &common {
        Some(id) => old_path
            .iter()
            .position(|e| &e.id == id)
            .map_or(0, |i| i + 1),
        None => 0,
    };
    let entries = old_path[start..].iter().map(|e| (*e).clone()).collect();
    (entries, common)
}

/// What the summary is made from: the branch's messages, newest first until `budget` tokens
/// are used (an older summary still squeezes in while under 90 % of it), tool results left
/// out (the calls say enough), and the files touched — on the whole branch, and carried over
/// from the tau-written branch summaries on it.
fn branch_messages(entries: &[SessionEntry], budget: u64) -> (Vec<AgentMessage>, FileOps) {
    let mut file_ops = FileOps::default();
    for entry in entries {
        if let EntryKind::BranchSummary {
            details: Some(details),
            from_hook,
            ..
        } = &entry.kind
            && *from_hook != Some(true)
        {
            file_ops.add_details(details);
        }
    }
    let mut kept = Vec::new();
    let mut used = 0u64;
    for entry in entries.iter().rev() {
        let message = match (&entry.kind, entry.message()) {
            (_, Some(AgentMessage::ToolResult(_))) => None,
            (
                EntryKind::Compaction {
                    summary,
                    tokens_before,
                    ..
                },
                _,
            ) => Some(AgentMessage::CompactionSummary(CompactionSummaryMessage {
                summary: summary.clone(),
                tokens_before: *tokens_before,
                timestamp: 0,
            })),
            // The summary request owns its messages; a branch summary is rare.
            _ => context_message(entry).map(Arc::unwrap_or_clone),
        };
        let Some(message) = message else { continue };
        file_ops.add_message(&message);
        let tokens = estimate_tokens(&message);
        if budget > 0 && used + tokens > budget {
            let is_summary = matches!(
                entry.kind,
                EntryKind::Compaction { .. } | EntryKind::BranchSummary { .. }
            );
            if is_summary && used * 10 < budget * 9 {
                kept.push(message);
            }
            break;
        }
        used += tokens;
        kept.push(message);
    }
    kept.reverse();
    (kept, file_ops)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: &str, parent: Option<&str>) -> SessionEntry {
        SessionEntry {
            id: id.into(),
            parent_id: parent.map(str::to_owned),
            timestamp: "2026-01-01T00:00:00.000Z".into(),
            kind: EntryKind::Custom {
                custom_type: "x".into(),
                data: None,
            },
            extra: serde_json::Map::new(),
        }
    }

    #[test]
    fn abandoned_entries_stop_at_the_deepest_shared_entry() {
        let (a, b, c, d) = (
            entry("a", None),
            entry("b", Some("a")),
            entry("c", Some("b")),
            entry("d", Some("a")),
        );
        let (entries, common) = abandoned_entries(&[&a, &b, &c], &[&a, &d]);
        assert_eq!(common.as_deref(), Some("a"));
        let ids: Vec<&str> = entries.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, ["b", "c"]);
        // Going back up the same branch abandons what lies below the target.
        let (entries, common) = abandoned_entries(&[&a, &b, &c], &[&a, &b]);
        assert_eq!(common.as_deref(), Some("b"));
        assert_eq!(entries.len(), 1);
        // No shared entry: all of the old branch.
        let (entries, common) = abandoned_entries(&[&b, &c], &[&d]);
        assert_eq!((entries.len(), common), (2, None));
    }
}
