//! Compaction as pure rules (rpc.md §8): when the context is too full, where to cut the
//! active branch, what goes to the summariser and how its answer becomes the `compaction`
//! entry's summary. The session owns the LLM call, the events and the store.
//!
//! The flow the session runs:
//! 1. [`should_compact`] on the context size ([`crate::tokens::estimate_context_tokens`] or a
//!    reply's usage) — or a manual `compact`, or an overflow.
//! 2. [`prepare_compaction`] on `store.branch_path()`: the cut point and everything around it,
//!    or why there is nothing to do ([`CompactionSkip`]).
//! 3. [`summary::history_request`] (and [`summary::turn_prefix_request`] for a split turn)
//!    give the system prompt, the one user message and the output budget; when the
//!    summariser itself overflows, [`summary::SummaryInput::shrink`] makes the input smaller
//!    for another try.
//! 4. [`summary::assemble_summary`] joins the answers and appends the file lists;
//!    `store.append_compaction(…)` records it; [`summary::compaction_result`] builds the
//!    `compact` response / `compaction_end.result`.

pub mod summary;
#[cfg(test)]
mod tests;

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::Value;
use tau_protocol::{AgentMessage, AssistantContent, CompactionDetails};

use crate::Settings;
use crate::store::{EntryKind, SessionEntry};
use crate::tokens::{estimate_context_tokens, estimate_tokens};

/// `compaction.*` settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactionSettings {
    pub enabled: bool,
    /// Room left for the reply: compaction starts above `contextWindow − reserveTokens`.
    pub reserve_tokens: u64,
    /// How much of the recent conversation stays verbatim.
    pub keep_recent_tokens: u64,
}

impl Default for CompactionSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            reserve_tokens: 16384,
            keep_recent_tokens: 20000,
        }
    }
}

impl CompactionSettings {
    pub fn from_settings(settings: &Settings) -> Self {
        Self {
            enabled: settings.compaction_enabled(),
            reserve_tokens: settings.compaction_reserve_tokens(),
            keep_recent_tokens: settings.compaction_keep_recent_tokens(),
        }
    }
}

/// The threshold rule: `context_tokens > context_window − reserve_tokens`, when enabled.
/// The subtraction is signed as in pi, so a reserve larger than the window compacts at any
/// size; a window of 0 means "unknown" and never triggers (pi has no such models; tau's
/// unknown custom models would otherwise compact after every reply).
pub fn should_compact(
    context_tokens: u64,
    context_window: u64,
    settings: &CompactionSettings,
) -> bool {
    if !settings.enabled || context_window == 0 {
        return false;
    }
    i128::from(context_tokens) > i128::from(context_window) - i128::from(settings.reserve_tokens)
}

/// Why a compaction has nothing to do. The texts are pi's `compact` errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CompactionSkip {
    /// The branch already ends in a compaction.
    #[error("Already compacted")]
    AlreadyCompacted,
    /// Everything fits in the part that is kept.
    #[error("Nothing to compact (session too small)")]
    NothingToCompact,
}

/// Paths seen in `read`, `write` and `edit` tool calls.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FileOps {
    pub read: BTreeSet<String>,
    pub written: BTreeSet<String>,
    pub edited: BTreeSet<String>,
}

impl FileOps {
    /// Adds the `path` argument of every `read`/`write`/`edit` call in an assistant message.
    pub fn add_message(&mut self, message: &AgentMessage) {
        let AgentMessage::Assistant(assistant) = message else {
            return;
        };
        for block in &assistant.content {
            let AssistantContent::ToolCall(call) = block else {
                continue;
            };
            let Some(path) = call.arguments.get("path").and_then(Value::as_str) else {
                continue;
            };
            if path.is_empty() {
                continue;
            }
            let set = match call.name.as_str() {
                "read" => &mut self.read,
                "write" => &mut self.written,
                "edit" => &mut self.edited,
                _ => continue,
            };
            set.insert(path.to_owned());
        }
    }

    /// Carries a previous compaction's lists forward (its modified files count as edited).
    pub fn add_details(&mut self, details: &Value) {
        let strings = |key: &str| {
            details
                .get(key)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        self.read.extend(strings("readFiles"));
        self.edited.extend(strings("modifiedFiles"));
    }

    /// The final lists: modified = written ∪ edited; read = read − modified; both sorted.
    pub fn details(&self) -> CompactionDetails {
        let modified: BTreeSet<&String> = self.written.iter().chain(&self.edited).collect();
        CompactionDetails {
            read_files: self
                .read
                .iter()
                .filter(|f| !modified.contains(f))
                .cloned()
                .collect(),
            modified_files: modified.into_iter().cloned().collect(),
        }
    }
}

/// Everything a compaction needs, computed from the branch before any LLM call.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactionPreparation {
    /// The first entry the compacted context keeps verbatim.
    pub first_kept_entry_id: String,
    /// History to summarise (from the previous compaction's kept part, or the start, up to
    /// the cut — or up to the start of the split turn).
    pub messages_to_summarize: Vec<AgentMessage>,
    /// The start of a turn cut in the middle, summarised on its own; empty otherwise.
    pub turn_prefix_messages: Vec<AgentMessage>,
    /// True when the cut falls inside a turn and `turn_prefix_messages` is not empty.
    pub is_split_turn: bool,
    /// The summary of the compaction already on the branch, to be updated.
    pub previous_summary: Option<String>,
    /// The context's size before compacting ([`estimate_context_tokens`] of the rebuilt
    /// context).
    pub tokens_before: u64,
    /// Files read and modified in everything summarised so far (previous compactions
    /// included).
    pub file_ops: CompactionDetails,
}

/// Where to cut, as indices into the branch path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CutPoint {
    /// The first entry kept.
    pub first_kept_index: usize,
    /// Set when the kept part starts inside a turn: the entry that started that turn
    /// (strictly before `first_kept_index`).
    pub turn_start_index: Option<usize>,
}

/// Entries the kept part may start at: any message except a tool result (a result must stay
/// with the call before it), plus branch summaries and extension messages. Starting at an
/// assistant message keeps its tool results, which follow it.
pub fn is_valid_cut_point(entry: &SessionEntry) -> bool {
    match &entry.kind {
        EntryKind::Message { message } => !matches!(**message, AgentMessage::ToolResult(_)),
        EntryKind::BranchSummary { .. } | EntryKind::CustomMessage { .. } => true,
        _ => false,
    }
}

/// Entries that begin a turn: what the user (or an extension, or a `bash` command) put in.
fn starts_turn(entry: &SessionEntry) -> bool {
    match &entry.kind {
        EntryKind::Message { message } => {
            matches!(
                **message,
                AgentMessage::User(_) | AgentMessage::BashExecution(_)
            )
        }
        EntryKind::BranchSummary { .. } | EntryKind::CustomMessage { .. } => true,
        _ => false,
    }
}

/// The cut that keeps at least `keep_recent_tokens` of the newest messages in
/// `path[start..end]`:
/// * walk back from the newest `message` entry summing [`estimate_tokens`]; at the first
///   entry where the sum reaches the budget, cut at the first valid cut point at or after it
///   (so the kept part may be a little under budget, never split call from result); if the
///   budget is never reached, or no valid point follows, keep from the first valid point;
/// * move the cut back over directly preceding entries that are not `message` entries
///   (model and thinking changes, labels, and also extension messages and branch summaries,
///   as pi does) so they stay with what follows, stopping at a compaction;
/// * if the message the budget chose is not a user message, find the entry that started its
///   turn: the turn is split and its beginning is summarised separately.
pub fn find_cut_point(
    path: &[&SessionEntry],
    start: usize,
    end: usize,
    keep_recent_tokens: u64,
) -> CutPoint {
    let end = end.min(path.len());
    let cut_points: Vec<usize> = (start..end)
        .filter(|&i| is_valid_cut_point(path[i]))
        .collect();
    let Some(&first_point) = cut_points.first() else {
        return CutPoint {
            first_kept_index: start,
            turn_start_index: None,
        };
    };
    let mut cut = first_point;
    let mut kept = 0u64;
    for i in (start..end).rev() {
        let Some(message) = path[i].message() else {
            continue;
        };
        kept += estimate_tokens(message);
        if kept >= keep_recent_tokens {
            if let Some(&point) = cut_points.iter().find(|&&p| p >= i) {
                cut = point;
            }
            break;
        }
    }
    let message_cut = cut;
    while cut > start {
        let previous = path[cut - 1];
        if matches!(
            previous.kind,
            EntryKind::Compaction { .. } | EntryKind::Message { .. }
        ) {
            break;
        }
        cut -= 1;
    }
    // Whether a turn is split is judged on the entry the budget chose, before the move back
    // over settings entries: a model change just before a user message splits nothing.
    let is_user = matches!(path[message_cut].message(), Some(AgentMessage::User(_)));
    let turn_start_index = if is_user {
        None
    } else {
        (start..=message_cut)
            .rev()
            .find(|&i| starts_turn(path[i]))
            // A kept part that itself starts a turn (bash output, extension message) splits
            // nothing.
            .filter(|&i| i < cut)
    };
    CutPoint {
        first_kept_index: cut,
        turn_start_index,
    }
}

pub(crate) use crate::store::context_message as entry_message;

/// The context a branch path rebuilds to: the store's rule, on a path (its messages shared
/// with the entries).
pub fn context_messages(path: &[&SessionEntry]) -> Vec<Arc<AgentMessage>> {
    crate::store::context_of(path).messages
}

/// Works out the compaction of a branch path (rpc.md §8.5):
/// 1. a branch ending in a compaction has nothing new ([`CompactionSkip::AlreadyCompacted`]);
/// 2. with an earlier compaction on the branch, only what it kept and what came after is
///    considered (from its `firstKeptEntryId`, or the entry after it if that id is not on
///    the path), and its summary is carried forward as `previous_summary`;
/// 3. [`find_cut_point`] with `keep_recent_tokens`;
/// 4. the messages before the cut (compaction entries left out: the previous summary comes
///    separately) are summarised; if the cut splits a turn, the turn's beginning is kept
///    apart; if both are empty, [`CompactionSkip::NothingToCompact`];
/// 5. file operations: the previous compaction's lists (unless an extension made it) plus the
///    `read`/`write`/`edit` calls in everything summarised.
pub fn prepare_compaction(
    path: &[&SessionEntry],
    keep_recent_tokens: u64,
) -> Result<CompactionPreparation, CompactionSkip> {
    if path
        .last()
        .is_some_and(|e| matches!(e.kind, EntryKind::Compaction { .. }))
    {
        return Err(CompactionSkip::AlreadyCompacted);
    }
    let previous = path
        .iter()
        .rposition(|e| matches!(e.kind, EntryKind::Compaction { .. }));
    let mut previous_summary = None;
    let mut previous_details = None;
    let mut start = 0;
    if let Some(at) = previous
        && let EntryKind::Compaction {
            summary,
            first_kept_entry_id,
            details,
            from_hook,
            ..
        } = &path[at].kind
    {
        previous_summary = Some(summary.clone());
        if *from_hook != Some(true) {
            previous_details = details.as_ref();
        }
        start = path
            .iter()
            .position(|e| &e.id == first_kept_entry_id)
            .unwrap_or(at + 1);
    }
    let end = path.len();
    if start >= end {
        return Err(CompactionSkip::NothingToCompact);
    }
    let tokens_before = estimate_context_tokens(&context_messages(path));
    let cut = find_cut_point(path, start, end, keep_recent_tokens);
    let history_end = cut.turn_start_index.unwrap_or(cut.first_kept_index);
    let summarised = |range: std::ops::Range<usize>| -> Vec<AgentMessage> {
        path[range]
            .iter()
            .filter(|e| !matches!(e.kind, EntryKind::Compaction { .. }))
            .filter_map(|e| entry_message(e))
            // The summary request owns its messages; compaction is rare enough for a copy.
            .map(Arc::unwrap_or_clone)
            .collect()
    };
    let messages_to_summarize = summarised(start..history_end);
    let turn_prefix_messages = match cut.turn_start_index {
        Some(turn_start) => summarised(turn_start..cut.first_kept_index),
        None => Vec::new(),
    };
    if messages_to_summarize.is_empty() && turn_prefix_messages.is_empty() {
        return Err(CompactionSkip::NothingToCompact);
    }
    let mut ops = FileOps::default();
    if let Some(details) = previous_details {
        ops.add_details(details);
    }
    for message in messages_to_summarize.iter().chain(&turn_prefix_messages) {
        ops.add_message(message);
    }
    Ok(CompactionPreparation {
        first_kept_entry_id: path[cut.first_kept_index].id.clone(),
        is_split_turn: !turn_prefix_messages.is_empty(),
        messages_to_summarize,
        turn_prefix_messages,
        previous_summary,
        tokens_before,
        file_ops: ops.details(),
    })
}
