//! The session-file side of an [`AgentSession`]: what a new session records, how an opened one
//! is resumed, the commands that replace the session (new, switch, fork/branch, clone), and
//! the read-only views of the entry tree (fork messages, entries, tree, stats, HTML export).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::Value;
use tau_protocol::{AgentMessage, AssistantContent, ThinkingLevel};

use super::{AgentSession, SessionError};
use crate::export_html::{ExportInput, ExportTool, default_export_file_name, render_session_html};
use crate::store::{EntryKind, SessionStore};
use crate::{paths, tokens};

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

/// Where a fork starts, and the text of the user message it starts before.
enum Which {
    /// pi's `fork`.
    Fork,
    /// xcsh's `branch`: the same operation, another error text.
    Branch,
}

impl AgentSession {
    /// A brand-new session starts with its model and thinking level, as pi's files do.
    pub(super) fn record_start(&mut self) {
        if let Some(model) = self.models.model() {
            let (provider, id) = (model.provider.clone(), model.id.clone());
            self.conversation
                .persist(|store| store.append_model_change(&provider, &id));
        }
        let level = self.models.thinking_level().as_str();
        self.conversation
            .persist(|store| store.append_thinking_level_change(level));
    }

    /// Rebuilds the context of an opened session (rpc.md §7.5): its messages, its model if
    /// that still exists with credentials (a `--model` given on the command line wins), and
    /// its thinking level (else the current default), clamped to the model.
    pub(super) fn restore_from_store(&mut self) {
        let context = self.conversation.store().build_context();
        self.conversation.lock().messages = context.messages;
        self.sync_todos();
        let level = context
            .thinking_level
            .and_then(|l| serde_json::from_value::<ThinkingLevel>(Value::String(l)).ok());
        self.models.restore(
            context.model.as_ref(),
            level,
            self.config.model_pattern.is_some(),
        );
    }

    /// The todo list in effect at the leaf (xcsh's resync): replaces the list of the
    /// conversation that was there before.
    pub(super) fn sync_todos(&self) {
        let phases = crate::todos::latest_on_branch(&self.conversation.store().branch_path());
        self.todos.reset(phases);
    }

    /// The directory new sessions go to: next to the current file, else the configured one.
    fn sessions_dir(&self) -> PathBuf {
        if let Some(dir) = self.conversation.store().file_path().and_then(Path::parent) {
            return dir.to_path_buf();
        }
        self.config
            .session_dir
            .clone()
            .or_else(|| {
                self.settings
                    .session_dir()
                    .map(|d| tau_base::paths::expand_tilde(&d))
            })
            .unwrap_or_else(|| paths::default_session_dir(&self.config.agent_dir, &self.config.cwd))
    }

    /// Ends whatever runs, then puts `store` in place of the current session. Queues are
    /// emptied: they belonged to the old conversation.
    async fn replace_store(&mut self, store: SessionStore) {
        self.abort().await;
        self.clear_queues().await;
        self.install(store);
    }

    fn install(&mut self, store: SessionStore) {
        // Like pi's new runtime for each session: skills or templates added meanwhile count.
        self.resources = crate::resources::Resources::load(
            &self.config.agent_dir,
            &self.config.cwd,
            &self.config.resources,
        );
        let resumed = !store.entries().is_empty();
        // The old store is dropped here, which releases its file lock.
        *self.conversation.store() = store;
        self.conversation.lock().messages.clear();
        if resumed {
            self.restore_from_store();
        } else {
            self.todos.reset(Vec::new());
            self.record_start();
        }
    }

    /// Completes a `switch_session` whose file is still being parsed: every command but
    /// `get_messages` calls this first, so they all see the opened session.
    pub fn settle(&mut self) {
        let Some(opening) = self.opening.take() else {
            return;
        };
        match opening.finish() {
            Ok(store) => self.install(store),
            Err(err) => {
                // The header was valid and the file locked, so only an I/O failure gets
                // here; the conversation continues in memory rather than in a broken file.
                tracing::error!("cannot finish opening the session: {err}");
                let cwd = self.config.cwd.clone();
                self.install(SessionStore::in_memory(&cwd));
            }
        }
    }

    /// While a switched-to session is still being parsed: its messages as JSON, straight from
    /// the file, when they can be served that way.
    pub fn opening_messages(&self) -> Option<crate::store::RawJsonArray> {
        self.opening.as_ref().and_then(|o| o.messages())
    }

    /// `new_session`: an empty session in the same directory; `parent_session` goes into
    /// its header unchanged.
    pub async fn new_session(&mut self, parent_session: Option<String>) {
        let store = if self.config.no_session {
            SessionStore::in_memory(&self.config.cwd)
        } else {
            SessionStore::create(&self.sessions_dir(), &self.config.cwd, parent_session)
        };
        self.replace_store(store).await;
    }

    /// `switch_session`: opens another session file (relative paths against the working
    /// directory). A missing or unreadable file is an error and the current session stays
    /// (decision 13); tools then work in the opened session's directory.
    pub async fn switch_session(&mut self, path: &str) -> Result<(), SessionError> {
        let path = self.config.cwd.join(tau_base::paths::expand_tilde(path));
        let current = self.session_file();
        let same = current.is_some_and(|c| same_file(&c, &path));
        if same {
            // Its own lock would refuse a second open: let go of it first.
            let cwd = self.config.cwd.clone();
            *self.conversation.store() = SessionStore::in_memory(&cwd);
        }
        let store_error = |e: crate::store::StoreError| SessionError::Store(e.to_string());
        let opened = SessionStore::open_header(&path).map_err(store_error)?;
        let cwd = PathBuf::from(&opened.header().cwd);
        if !cwd.is_dir() {
            return Err(SessionError::Store(format!(
                "Stored session working directory does not exist: {}\nSession file: {}\nCurrent working directory: {}",
                cwd.display(),
                path.display(),
                self.config.cwd.display()
            )));
        }
        // A file that is not long is read before anything changes, so that a read error
        // leaves the current session as it was.
        let next = if opened.is_long() {
            Err(opened)
        } else {
            Ok(opened.read().map_err(store_error)?)
        };
        if cwd != self.config.cwd {
            self.config.cwd = cwd;
            if !self.config.no_context_files {
                self.context_files = crate::system_prompt::load_context_files(
                    &self.config.agent_dir,
                    &self.config.cwd,
                );
            }
        }
        self.abort().await;
        self.clear_queues().await;
        // The old session's list never shows through while the new one is parsed.
        self.todos.reset(Vec::new());
        // Until `settle` (which every command but `get_messages` calls first) an empty
        // in-memory session stands in; the old one is freed by the parse thread.
        let old_store = std::mem::replace(
            &mut *self.conversation.store(),
            SessionStore::in_memory(&self.config.cwd),
        );
        let old_messages = std::mem::take(&mut self.conversation.lock().messages);
        let opening = match next {
            Ok(opening) => {
                opening.discard((old_store, old_messages));
                opening
            }
            Err(opened) => {
                // A long file: the session left is freed before the file's bytes are read,
                // or both would be held at once (see `LONG_FILE_BYTES`). That takes some
                // milliseconds here, and a read error now leaves the empty stand-in
                // session, as a failed parse does in `settle`.
                drop((old_store, old_messages));
                opened.read().map_err(store_error)?
            }
        };
        self.opening = Some(opening);
        Ok(())
    }

    /// `fork` (pi) and `branch` (xcsh): a new session holding the path up to, not including,
    /// the user message `entry_id`; returns that message's text.
    async fn fork_before(&mut self, entry_id: &str, which: Which) -> Result<String, SessionError> {
        let dir = self.sessions_dir();
        let (store, text) = {
            let current = self.conversation.store();
            let invalid = || match which {
                Which::Fork => SessionError::Store("Invalid entry ID for forking".into()),
                Which::Branch => SessionError::Store("Invalid entry ID for branching".into()),
            };
            let target = current.fork_point(entry_id).ok_or_else(invalid)?;
            let text = current
                .entry(entry_id)
                .and_then(|e| e.message())
                .map(user_text)
                .unwrap_or_default();
            let store = current
                .branched(target, &dir)
                .map_err(|e| SessionError::Store(e.to_string()))?;
            (store, text)
        };
        self.replace_store(store).await;
        Ok(text)
    }

    pub async fn fork(&mut self, entry_id: &str) -> Result<String, SessionError> {
        self.fork_before(entry_id, Which::Fork).await
    }

    pub async fn branch(&mut self, entry_id: &str) -> Result<String, SessionError> {
        self.fork_before(entry_id, Which::Branch).await
    }

    /// `clone`: a new session holding the whole active branch, with the same entry ids.
    pub async fn clone_session(&mut self) -> Result<(), SessionError> {
        let dir = self.sessions_dir();
        let store = {
            let current = self.conversation.store();
            // Before the first message the leaf is only the start's model and thinking-level
            // entries: nothing a user would call an entry (pi fails then too, its file not yet
            // written; see docs/decisions.md).
            let has_message = current
                .branch_path()
                .iter()
                .any(|e| matches!(e.kind, crate::store::EntryKind::Message { .. }));
            let (Some(leaf), true) = (current.leaf_id(), has_message) else {
                return Err(SessionError::Store(
                    "Cannot clone session: no current entry selected".into(),
                ));
            };
            current
                .branched(Some(leaf), &dir)
                .map_err(|e| SessionError::Store(e.to_string()))?
        };
        self.replace_store(store).await;
        Ok(())
    }

    /// `get_fork_messages` / `get_branch_messages`: user messages of the whole file, in file
    /// order, with their text.
    pub fn fork_messages(&self) -> Vec<(String, String)> {
        self.conversation.store().fork_messages()
    }

    /// `get_entries`: every entry in file order (after `since` when given), and the leaf.
    pub fn entries_json(
        &self,
        since: Option<&str>,
    ) -> Result<(Vec<Value>, Option<String>), SessionError> {
        let store = self.conversation.store();
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
        let store = self.conversation.store();
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

    /// `get_session_stats` over the in-memory context (so counts drop after a compaction).
    pub fn stats(&self) -> SessionStats {
        let state = self.conversation.lock();
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
        if let Some(model) = self.models.model()
            && model.context_window > 0
        {
            let known =
                tokens::usage_known_since_compaction(&self.conversation.store().branch_path());
            let tokens = known.then(|| tokens::estimate_context_tokens(messages));
            stats.context_usage = Some((tokens, model.context_window));
        }
        stats
    }

    /// `export_html`: writes the session as one self-contained HTML file and returns the path
    /// as given (default `pi-session-<file name>.html` in the working directory).
    pub fn export_html(&self, output_path: Option<&str>) -> Result<String, SessionError> {
        let tools = self.run_tools();
        let system_prompt = self.system_prompt(&tools);
        let store = self.conversation.store();
        let Some(file) = store.file_path() else {
            return Err(SessionError::Store(
                "Cannot export in-memory session to HTML".into(),
            ));
        };
        if !store.is_persisted() {
            return Err(SessionError::Store(
                "Nothing to export yet - start a conversation first".into(),
            ));
        }
        let shown = match output_path {
            Some(p) => p.to_string(),
            None => default_export_file_name(file),
        };
        let target = self.config.cwd.join(tau_base::paths::expand_tilde(&shown));
        let header = serde_json::to_value(store.header()).unwrap_or(Value::Null);
        let entries: Vec<Value> = store
            .entries()
            .iter()
            .filter_map(|e| serde_json::to_value(e).ok())
            .collect();
        let export_tools: Vec<ExportTool<'_>> = tools
            .iter()
            .map(|t| ExportTool {
                name: t.name(),
                description: t.description(),
                parameters: t.parameters(),
            })
            .collect();
        let html = render_session_html(&ExportInput {
            header: &header,
            entries: &entries,
            leaf_id: store.leaf_id(),
            system_prompt: Some(&system_prompt),
            tools: &export_tools,
            session_name: store.session_name(),
        });
        drop(store);
        tau_base::atomic::write_atomically(&target, html.as_bytes())
            .map_err(|e| SessionError::Store(format!("{}: {e}", target.display())))?;
        Ok(shown)
    }
}

fn open_node(out: &mut String, entry: &crate::store::SessionEntry) {
    out.push_str("{\"entry\":");
    out.push_str(&entry.to_line().unwrap_or_else(|_| "null".into()));
    out.push_str(",\"children\":[");
}

/// Text blocks of a user message, joined.
fn user_text(message: &AgentMessage) -> String {
    match message {
        AgentMessage::User(u) => u.content.text(""),
        _ => String::new(),
    }
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}
