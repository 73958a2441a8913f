//! What front-ends read of the conversation (`get_state`, `get_messages`, `get_entries`,
//! `get_tree`, `get_session_stats`, …), and the few queue changes the session makes outside a
//! run. Reads take the lock for as long as they look, never across an await.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;
use tau_protocol::{AgentMessage, AssistantContent, ImageContent, Model, SessionEvent};

use super::{Conversation, Queued};
use crate::SessionError;
use crate::store::EntryKind;
use crate::tokens;

/// Counts and sums of `get_session_stats`, over the in-memory context.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionStats {
    pub user_messages: u64,
    pub assistant_messages: u64,
    pub tool_calls: u64,
    pub tool_results: u64,
    pub total_messages: u64,
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub cost: f64,
    /// `(tokens, context window)`; tokens `None` right after a compaction. Absent without a
    /// model that has a context window.
    pub context_usage: Option<(Option<u64>, u64)>,
}

impl Conversation {
    pub fn session_id(&self) -> String {
        self.store().session_id().to_string()
    }
    /// Where the session is (or will be) written; `None` with `--no-session`.
    pub fn session_file(&self) -> Option<PathBuf> {
        self.store().file_path().map(Path::to_path_buf)
    }
    /// The current leaf entry's id.
    pub fn leaf_id(&self) -> Option<String> {
        self.store().leaf_id().map(str::to_string)
    }
    pub fn session_name(&self) -> Option<String> {
        self.store().session_name().map(str::to_string)
    }
    /// True while a compaction summarises.
    pub fn is_compacting(&self) -> bool {
        self.lock().compacting
    }
    /// Reads the in-memory context without copying it.
    pub fn with_messages<T>(&self, read: impl FnOnce(&[Arc<AgentMessage>]) -> T) -> T {
        read(&self.lock().messages)
    }
    /// How many messages the context holds.
    pub fn message_count(&self) -> usize {
        self.lock().messages.len()
    }
    /// Queued steering plus follow-up messages (pi's `pendingMessageCount`).
    pub fn pending_message_count(&self) -> usize {
        self.lock().pending_count()
    }
    /// xcsh's `queuedMessageCount`: the pending messages plus hidden next-turn messages,
    /// of which tau has none yet.
    pub fn queued_message_count(&self) -> usize {
        self.pending_message_count()
    }

    /// `abort_retry`: cancels a retry's back-off at once (the series ends with
    /// `auto_retry_end{success:false, finalError:"Retry cancelled"}`).
    pub fn abort_retry(&self) {
        if let Some(sleep) = self.lock().retry_sleep.take() {
            sleep.cancel();
        }
    }

    /// Text of the last assistant message in context, trimmed; `None` if there is none.
    /// Aborted messages without content are skipped, as pi does.
    pub fn last_assistant_text(&self) -> Option<String> {
        let state = self.lock();
        state.messages.iter().rev().find_map(|m| match &**m {
            AgentMessage::Assistant(a)
                if !(a.stop_reason == tau_protocol::StopReason::Aborted
                    && a.content.is_empty()) =>
            {
                let text: String = a
                    .content
                    .iter()
                    .filter_map(|c| match c {
                        AssistantContent::Text(t) => Some(t.text.as_str()),
                        _ => None,
                    })
                    .collect();
                let trimmed = text.trim();
                Some((!trimmed.is_empty()).then(|| trimmed.to_string()))
            }
            _ => None,
        })?
    }

    /// `get_fork_messages` / `get_branch_messages`: user messages of the whole file, in file
    /// order, with their text.
    pub fn fork_messages(&self) -> Vec<(String, String)> {
        self.store().fork_messages()
    }

    /// `get_entries`: every entry in file order (after `since` when given), and the leaf.
    pub fn entries_json(
        &self,
        since: Option<&str>,
    ) -> Result<(Vec<Value>, Option<String>), SessionError> {
        let store = self.store();
        let start = match since {
            None => 0,
            Some(id) => {
                let at = store
                    .entries()
                    .iter()
                    .position(|e| e.id == id)
                    .ok_or_else(|| SessionError::Store(format!("Entry not found: {id}")))?;
                at + 1
            }
        };
        let entries = store.entries()[start..]
            .iter()
            .filter_map(|e| serde_json::to_value(e).ok())
            .collect();
        Ok((entries, store.leaf_id().map(str::to_string)))
    }

    /// `get_tree`: the entries nested as `{entry, children, label?, labelTimestamp?}`, as
    /// JSON text, and the leaf. Written without recursion: a long session is one chain
    /// thousands of entries deep, more than a recursive serialiser's stack allows.
    pub fn tree_json(&self) -> (String, Option<String>) {
        let store = self.store();
        let entries = store.entries();
        let index: std::collections::HashMap<&str, usize> = entries
            .iter()
            .enumerate()
            .map(|(i, e)| (e.id.as_str(), i))
            .collect();
        let mut children: Vec<Vec<usize>> = vec![Vec::new(); entries.len()];
        let mut roots = Vec::new();
        let mut labels: std::collections::HashMap<&str, (Option<&str>, &str)> =
            std::collections::HashMap::new();
        for (i, entry) in entries.iter().enumerate() {
            match entry.parent_id.as_deref().and_then(|p| index.get(p)) {
                Some(&parent) => children[parent].push(i),
                None => roots.push(i),
            }
            if let EntryKind::Label { target_id, label } = &entry.kind {
                labels.insert(
                    target_id.as_str(),
                    (label.as_deref(), entry.timestamp.as_str()),
                );
            }
        }
        let mut out = String::from("[");
        // (entry, next child to visit)
        let mut stack: Vec<(usize, usize)> = Vec::new();
        for (n, &root) in roots.iter().enumerate() {
            if n > 0 {
                out.push(',');
            }
            open_node(&mut out, &entries[root]);
            stack.push((root, 0));
            while let Some(&mut (node, ref mut next)) = stack.last_mut() {
                if let Some(&child) = children[node].get(*next) {
                    if *next > 0 {
                        out.push(',');
                    }
                    *next += 1;
                    open_node(&mut out, &entries[child]);
                    stack.push((child, 0));
                } else {
                    out.push(']');
                    if let Some((Some(label), at)) = labels.get(entries[node].id.as_str())
                        && !label.is_empty()
                    {
                        let _ = write!(
                            out,
                            ",\"label\":{},\"labelTimestamp\":{}",
                            Value::String((*label).to_string()),
                            Value::String((*at).to_string())
                        );
                    }
                    out.push('}');
                    stack.pop();
                }
            }
        }
        out.push(']');
        (out, store.leaf_id().map(str::to_string))
    }

    /// `get_session_stats` over the in-memory context (so counts drop after a compaction);
    /// the context usage needs the current `model`'s window.
    pub fn stats(&self, model: Option<&Model>) -> SessionStats {
        let state = self.lock();
        let messages = &state.messages;
        let mut stats = SessionStats {
            total_messages: messages.len() as u64,
            ..SessionStats::default()
        };
        for message in messages {
            match &**message {
                AgentMessage::User(_) => stats.user_messages += 1,
                AgentMessage::ToolResult(_) => stats.tool_results += 1,
                AgentMessage::Assistant(a) => {
                    stats.assistant_messages += 1;
                    stats.tool_calls += a
                        .content
                        .iter()
                        .filter(|c| matches!(c, AssistantContent::ToolCall(_)))
                        .count() as u64;
                    stats.input += a.usage.input;
                    stats.output += a.usage.output;
                    stats.cache_read += a.usage.cache_read;
                    stats.cache_write += a.usage.cache_write;
                    stats.cost += a.usage.cost.total;
                }
                _ => {}
            }
        }
        if let Some(model) = model
            && model.context_window > 0
        {
            let known = tokens::usage_known_since_compaction(&self.store().branch_path());
            let tokens = known.then(|| tokens::estimate_context_tokens(messages));
            stats.context_usage = Some((tokens, model.context_window));
        }
        stats
    }

    /// Queues a steering or follow-up message; the `queue_update` to announce.
    pub(crate) fn queue(
        &self,
        queue_as: crate::QueueAs,
        text: &str,
        images: Vec<ImageContent>,
    ) -> SessionEvent {
        let mut state = self.lock();
        let queued = Queued {
            text: Some(text.to_string()),
            message: crate::conversation::user_message(text, images),
        };
        match queue_as {
            crate::QueueAs::Steer => state.steering.push_back(queued),
            crate::QueueAs::FollowUp => state.follow_up.push_back(queued),
        }
        state.queue_update()
    }

    /// Empties both queues: what they held, and the `queue_update` to announce when they held
    /// anything. Messages a run has already taken are delivered regardless; they stay reported.
    pub(crate) fn clear_queues(&self) -> (Vec<String>, Vec<String>, Option<SessionEvent>) {
        let mut state = self.lock();
        let steering: Vec<String> = state.steering.drain(..).filter_map(|q| q.text).collect();
        let follow_up: Vec<String> = state.follow_up.drain(..).filter_map(|q| q.text).collect();
        let update = state.queue_update();
        let changed = !steering.is_empty() || !follow_up.is_empty();
        (steering, follow_up, changed.then_some(update))
    }

    /// The modes the run task reads, as the client or the settings last set them.
    pub(crate) fn set_queue_modes(&self, modes: crate::preferences::QueueModes) {
        let mut state = self.lock();
        state.steering_mode = modes.steering;
        state.follow_up_mode = modes.follow_up;
        state.interrupt_mode = modes.interrupt;
    }

    /// Whether anything waits in either queue.
    pub(crate) fn has_queued(&self) -> bool {
        let state = self.lock();
        !state.steering.is_empty() || !state.follow_up.is_empty()
    }

    /// Messages held back while a run streamed join the conversation once it has ended.
    pub(crate) fn flush_held_back(&self) {
        let held = {
            let mut state = self.lock();
            state.run_active = false;
            let held = std::mem::take(&mut state.held_back);
            state.messages.extend(held.iter().cloned().map(Arc::new));
            held
        };
        for message in held {
            self.persist(|store| store.append_message(message));
        }
    }
}

fn open_node(out: &mut String, entry: &crate::store::SessionEntry) {
    out.push_str("{\"entry\":");
    out.push_str(&entry.to_line().unwrap_or_else(|_| "null".into()));
    out.push_str(",\"children\":[");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::SessionStore;

    fn conversation() -> Conversation {
        Conversation::new(SessionStore::in_memory(std::path::Path::new("/tmp")))
    }

    #[test]
    fn queues_report_their_texts_and_clear_once() {
        let c = conversation();
        c.queue(crate::QueueAs::Steer, "steer me", Vec::new());
        let update = c.queue(crate::QueueAs::FollowUp, "later", Vec::new());
        assert_eq!(
            update,
            SessionEvent::QueueUpdate {
                steering: vec!["steer me".into()],
                follow_up: vec!["later".into()],
            }
        );
        assert!(c.has_queued());
        assert_eq!(c.pending_message_count(), 2);
        let (steering, follow_up, update) = c.clear_queues();
        assert_eq!(
            (steering, follow_up),
            (vec!["steer me".into()], vec!["later".into()])
        );
        assert!(update.is_some());
        assert!(!c.has_queued());
        let (_, _, update) = c.clear_queues();
        assert!(update.is_none(), "nothing to announce");
    }

    #[test]
    fn held_back_messages_join_the_context_when_the_run_ends() {
        let c = conversation();
        {
            let mut state = c.lock();
            state.run_active = true;
            state.held_back.push(crate::conversation::user_message(
                "after the run",
                Vec::new(),
            ));
        }
        assert_eq!(c.message_count(), 0);
        c.flush_held_back();
        assert_eq!(c.message_count(), 1);
        assert!(!c.lock().run_active);
        assert_eq!(c.stats(None).user_messages, 1);
    }
}
