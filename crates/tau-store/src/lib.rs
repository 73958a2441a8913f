//! The session store: pi's JSONL session file (version 3) as a tree of entries, with lazy
//! creation, one flushed line per entry afterwards, an advisory lock against a second
//! writer, context rebuilding, fork/clone construction and session discovery, titles for
//! listings ([`title`]), and the records of sessions handed out before their file exists
//! ([`pending`]).

#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

mod deferred;
mod discover;
mod entry;
mod fast;
mod load;
pub mod paths;
pub mod pending;
pub mod title;

pub use deferred::{DeferredOpen, LONG_FILE_BYTES, OpenedFile, RawJsonArray};
pub use discover::{
    SessionFile, find_by_id_prefix, list_sessions, most_recent_in, project_session_dirs,
};
pub use entry::{CURRENT_VERSION, EntryKind, SessionEntry, SessionHeader};

use chrono::{DateTime, Utc};
use serde_json::Value;
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tau_protocol::UserContent;
use tau_protocol::{AgentMessage, BranchSummaryMessage, CompactionSummaryMessage, CustomMessage};

/// Why a session file could not be opened or written.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("Session file not found: {}", .0.display())]
    NotFound(PathBuf),
    #[error("Not a session file (no valid header): {}", .0.display())]
    NotASessionFile(PathBuf),
    #[error("Session file is in use by another tau process: {}", .0.display())]
    SessionLocked(PathBuf),
    #[error("Entry {0} not found")]
    UnknownEntry(String),
    #[error("Session file {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("Could not encode session entry: {0}")]
    Encode(#[source] serde_json::Error),
}

/// What the model sees when a session is resumed (rpc.md §7.5).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SessionContext {
    /// Shared with the entries they come from (see [`EntryKind::Message`]).
    pub messages: Vec<Arc<AgentMessage>>,
    /// The last `thinking_level_change` on the branch; `None` means "use the default".
    pub thinking_level: Option<String>,
    /// `(provider, model id)` from the last model change or assistant message on the branch.
    pub model: Option<(String, String)>,
}

/// One session: its header and entry tree, the current leaf, and where it is stored.
#[derive(Debug)]
pub struct SessionStore {
    header: SessionHeader,
    entries: Vec<SessionEntry>,
    index: HashMap<String, usize>,
    leaf: Option<usize>,
    /// `None` for `--no-session`.
    path: Option<PathBuf>,
    /// Open (and locked) once the file exists; every later entry is one line written here.
    file: Option<File>,
    has_assistant: bool,
    /// The opened file ends in a torn line (a crash mid-write): the next line starts with a
    /// newline so it does not join the fragment.
    torn_tail: bool,
    /// `entries[saved..]` are not on disk yet: a write failed (a full disk) and they wait, in
    /// order, for the next write that succeeds.
    saved: usize,
    /// How many bytes of the file are whole lines tau wrote or read: a write that fails half
    /// way is cut back to here, so no torn line stays between two whole ones.
    file_len: u64,
    /// Why the last write failed, while entries wait.
    save_error: Option<String>,
}

/// Whether everything the session holds is on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SaveState {
    /// Every entry is written (or nothing is due yet: no file before the first reply).
    Saved,
    /// The last write failed; `unsaved` entries wait for the next one that succeeds.
    Failing { error: String, unsaved: usize },
}

impl SessionStore {
    /// A new session in `dir` (file name from the creation time and the new id). Nothing is
    /// written yet.
    pub fn create(dir: &Path, cwd: &Path, parent_session: Option<String>) -> Self {
        let (header, created) = new_header(cwd, parent_session);
        let path = dir.join(paths::session_file_name(created, &header.id));
        Self::empty(header, Some(path))
    }

    /// A new session that will be written to exactly `path` (`--session <path>`,
    /// `switch_session` to a missing file).
    pub fn create_at(path: PathBuf, cwd: &Path, parent_session: Option<String>) -> Self {
        let (header, _) = new_header(cwd, parent_session);
        Self::empty(header, Some(path))
    }

    /// A new session in `dir` with the caller's id (`--session-id`).
    pub fn create_with_id(dir: &Path, cwd: &Path, id: &str) -> Self {
        let (mut header, created) = new_header(cwd, None);
        header.id = id.to_owned();
        let path = dir.join(paths::session_file_name(created, &header.id));
        Self::empty(header, Some(path))
    }

    /// `--fork <file>`: a new session in `dir` for `cwd` holding every entry of this one (the
    /// whole tree, ids kept), `parentSession` = this file. Written at once when it holds a
    /// reply.
    pub fn copied_to(&self, dir: &Path, cwd: &Path) -> Result<SessionStore, StoreError> {
        let parent = self.path.as_ref().map(|p| p.to_string_lossy().into_owned());
        let mut new = SessionStore::create(dir, cwd, parent);
        for entry in &self.entries {
            new.has_assistant |= is_assistant(entry);
            new.push(entry.clone());
        }
        new.leaf = self.leaf;
        if new.has_assistant {
            new.write_whole_file()?;
        }
        Ok(new)
    }

    /// A session that is never written (`--no-session`).
    pub fn in_memory(cwd: &Path) -> Self {
        let (header, _) = new_header(cwd, None);
        Self::empty(header, None)
    }

    fn empty(header: SessionHeader, path: Option<PathBuf>) -> Self {
        Self {
            header,
            entries: Vec::new(),
            index: HashMap::new(),
            leaf: None,
            path,
            file: None,
            has_assistant: false,
            torn_tail: false,
            saved: 0,
            file_len: 0,
            save_error: None,
        }
    }

    /// Whether everything is on disk, or what waits and why.
    pub fn save_state(&self) -> SaveState {
        match &self.save_error {
            None => SaveState::Saved,
            Some(error) => SaveState::Failing {
                error: error.clone(),
                unsaved: self.entries.len().saturating_sub(self.saved),
            },
        }
    }

    /// Tries again to write what waits (the end of the session; otherwise the next append).
    pub fn retry_save(&mut self) -> Result<(), StoreError> {
        if self.save_error.is_none() {
            return Ok(());
        }
        self.persist_pending()
    }

    /// Opens an existing session file for reading and appending, taking its lock. Older
    /// versions are migrated and the file is replaced atomically. The leaf is the last entry.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let (file, bytes) = open_locked(path)?;
        Self::from_bytes(file, path, &bytes)
    }

    /// The rest of [`SessionStore::open`]: parse `bytes` (the whole file) into a store that
    /// appends to `file`.
    pub(crate) fn from_bytes(file: File, path: &Path, bytes: &[u8]) -> Result<Self, StoreError> {
        let loaded = load::read_session(bytes, path)?;
        let file = match &loaded.rewrite {
            Some(lines) => replace_file(path, lines)?,
            None => file,
        };
        let torn_tail = loaded.rewrite.is_none() && bytes.last().is_some_and(|&b| b != b'\n');
        Ok(Self::from_entries(
            file,
            path,
            loaded.header,
            loaded.entries,
            torn_tail,
        ))
    }

    /// A store of parsed entries appending to `file`, the leaf at the last entry.
    pub(crate) fn from_entries(
        file: File,
        path: &Path,
        header: SessionHeader,
        entries: Vec<SessionEntry>,
        torn_tail: bool,
    ) -> Self {
        let mut store = Self::from_parsed(path, header, entries);
        store.torn_tail = torn_tail;
        store.saved = store.entries.len();
        store.file_len = file.metadata().map_or(0, |m| m.len());
        store.file = Some(file);
        store
    }

    /// The tree of parsed entries read from `path`, the leaf at the last entry, with no file
    /// to append to.
    fn from_parsed(path: &Path, header: SessionHeader, entries: Vec<SessionEntry>) -> Self {
        let mut store = Self::empty(header, Some(path.to_path_buf()));
        store.entries = entries;
        store.index.reserve(store.entries.len());
        for (i, entry) in store.entries.iter().enumerate() {
            store.index.insert(entry.id.clone(), i);
            if is_assistant(entry) {
                store.has_assistant = true;
            }
        }
        store.join_broken_chain(path);
        store.leaf = store.entries.len().checked_sub(1);
        store
    }

    /// A new session in `dir` for `cwd` holding every entry of the session file at `source`,
    /// as [`SessionStore::copied_to`] makes one (ACP's `session/fork`). The source is only
    /// read, without its lock: it may be open for writing in this process or another, and a
    /// copy of the lines written so far is what a fork of it is.
    pub fn fork_file(source: &Path, dir: &Path, cwd: &Path) -> Result<SessionStore, StoreError> {
        use std::io::Read;
        let io_err = |source_err| StoreError::Io {
            path: source.to_path_buf(),
            source: source_err,
        };
        let mut file = tau_base::bounded::open_regular(source).map_err(|err| match err {
            tau_base::bounded::BoundedReadError::NotFound => {
                StoreError::NotFound(source.to_path_buf())
            }
            tau_base::bounded::BoundedReadError::Io(e) => io_err(e),
            other => io_err(std::io::Error::other(other.to_string())),
        })?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(io_err)?;
        drop(file);
        let loaded = load::read_session(&bytes, source)?;
        Self::from_parsed(source, loaded.header, loaded.entries).copied_to(dir, cwd)
    }

    /// An entry whose parent is not in the file (a write that was lost, a file edited by
    /// hand) would cut off everything before it from the leaf. It is joined to the entry
    /// written just before it, so every entry of the file stays reachable (decision T119).
    /// Only the tree in memory changes; the file keeps what it holds.
    fn join_broken_chain(&mut self, path: &Path) {
        let mut joined = 0usize;
        let mut first = None;
        for i in 0..self.entries.len() {
            let dangling = self.entries[i]
                .parent_id
                .as_ref()
                .is_some_and(|parent| !self.index.contains_key(parent));
            if !dangling {
                continue;
            }
            let previous = i.checked_sub(1).map(|p| self.entries[p].id.clone());
            let entry = &mut self.entries[i];
            if first.is_none() {
                first = Some((
                    entry.id.clone(),
                    entry.parent_id.clone().unwrap_or_default(),
                ));
            }
            entry.parent_id = previous;
            joined += 1;
        }
        if let Some((id, parent)) = first {
            let more = match joined {
                1 => String::new(),
                n => format!(" (and {} more)", n - 1),
            };
            tracing::warn!(
                "{}: entry {id} names a parent that is not in the file ({parent}); it is joined \
                 to the entry before it{more}, so no earlier entry is lost",
                path.display()
            );
        }
    }

    pub fn header(&self) -> &SessionHeader {
        &self.header
    }

    pub fn session_id(&self) -> &str {
        &self.header.id
    }

    /// Where the session is (or will be) stored; `None` in memory.
    pub fn file_path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Whether the session file exists on disk (false before the first assistant reply).
    pub fn is_persisted(&self) -> bool {
        self.file.is_some()
    }

    /// All entries in file order.
    pub fn entries(&self) -> &[SessionEntry] {
        &self.entries
    }

    pub fn entry(&self, id: &str) -> Option<&SessionEntry> {
        self.index.get(id).map(|&i| &self.entries[i])
    }

    pub fn leaf_id(&self) -> Option<&str> {
        self.leaf.map(|i| self.entries[i].id.as_str())
    }

    /// Moves the leaf (`None` = before the first entry); the next entry becomes a child of it.
    pub fn set_leaf(&mut self, id: Option<&str>) -> Result<(), StoreError> {
        self.leaf = match id {
            None => None,
            Some(id) => Some(
                *self
                    .index
                    .get(id)
                    .ok_or_else(|| StoreError::UnknownEntry(id.to_owned()))?,
            ),
        };
        Ok(())
    }

    /// Appends a `message` entry. Summary messages are not stored as messages; use
    /// [`Self::append_compaction`] and [`Self::append_branch_summary`].
    /// Appends a message entry; an extension's custom message is a `custom_message` entry,
    /// as pi never stores role `custom` as a `message`.
    /// A message the context holds too is passed as its `Arc`, so both share it.
    pub fn append_message(
        &mut self,
        message: impl Into<Arc<AgentMessage>>,
    ) -> Result<String, StoreError> {
        let message = message.into();
        match &*message {
            AgentMessage::Custom(custom) => self.append(EntryKind::CustomMessage {
                custom_type: custom.custom_type.clone(),
                content: custom.content.clone(),
                display: custom.display,
                details: custom.details.clone(),
            }),
            _ => self.append(EntryKind::Message { message }),
        }
    }

    pub fn append_model_change(
        &mut self,
        provider: &str,
        model_id: &str,
    ) -> Result<String, StoreError> {
        self.append(EntryKind::ModelChange {
            provider: provider.to_owned(),
            model_id: model_id.to_owned(),
        })
    }

    pub fn append_thinking_level_change(&mut self, level: &str) -> Result<String, StoreError> {
        self.append(EntryKind::ThinkingLevelChange {
            thinking_level: level.to_owned(),
        })
    }

    pub fn append_compaction(
        &mut self,
        summary: String,
        first_kept_entry_id: String,
        tokens_before: u64,
        details: Option<Value>,
        from_hook: bool,
    ) -> Result<String, StoreError> {
        self.append(EntryKind::Compaction {
            summary,
            first_kept_entry_id,
            tokens_before,
            details,
            from_hook: Some(from_hook),
        })
    }

    /// Moves the leaf to `from` (`None` = root) and appends a summary of the branch left.
    pub fn append_branch_summary(
        &mut self,
        from: Option<&str>,
        summary: String,
        details: Option<Value>,
        from_hook: Option<bool>,
    ) -> Result<String, StoreError> {
        self.set_leaf(from)?;
        self.append(EntryKind::BranchSummary {
            from_id: from.unwrap_or("root").to_owned(),
            summary,
            details,
            from_hook,
        })
    }

    pub fn append_custom(
        &mut self,
        custom_type: &str,
        data: Option<Value>,
    ) -> Result<String, StoreError> {
        self.append_custom_as(custom_type, data, None)
    }

    /// A `custom` entry under the id its writer chose, when that id is well formed (1 to 64
    /// ASCII letters, digits, `-`, `_`) and not taken; a new id otherwise. An extension's
    /// `appendEntry` in pi returns at once, and what the extension does next (label the new
    /// leaf, navigate to it) names the id it saw: the extension host chooses it and tau keeps it.
    pub fn append_custom_as(
        &mut self,
        custom_type: &str,
        data: Option<Value>,
        proposed_id: Option<&str>,
    ) -> Result<String, StoreError> {
        let kind = EntryKind::Custom {
            custom_type: custom_type.to_owned(),
            data,
        };
        let usable = proposed_id.filter(|id| {
            (1..=64).contains(&id.len())
                && id
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
                && !self.index.contains_key(*id)
        });
        match usable {
            Some(id) => self.append_as(id.to_owned(), kind),
            None => self.append(kind),
        }
    }

    pub fn append_custom_message(
        &mut self,
        custom_type: &str,
        content: UserContent,
        display: bool,
        details: Option<Value>,
    ) -> Result<String, StoreError> {
        self.append(EntryKind::CustomMessage {
            custom_type: custom_type.to_owned(),
            content,
            display,
            details,
        })
    }

    /// Records the session name, trimmed; an empty name clears it.
    pub fn append_session_info(&mut self, name: &str) -> Result<String, StoreError> {
        self.append(EntryKind::SessionInfo {
            name: Some(name.trim().to_owned()),
        })
    }

    /// Sets (or with `None`/empty, clears) the label of an existing entry.
    pub fn append_label(
        &mut self,
        target_id: &str,
        label: Option<&str>,
    ) -> Result<String, StoreError> {
        if !self.index.contains_key(target_id) {
            return Err(StoreError::UnknownEntry(target_id.to_owned()));
        }
        self.append(EntryKind::Label {
            target_id: target_id.to_owned(),
            label: label.filter(|l| !l.is_empty()).map(str::to_owned),
        })
    }

    /// Makes a new entry the child of the leaf and moves the leaf to it. The entry is kept
    /// even when writing it fails; the error is returned so the caller can report it.
    fn append(&mut self, kind: EntryKind) -> Result<String, StoreError> {
        let id = new_entry_id(|candidate| self.index.contains_key(candidate));
        self.append_as(id, kind)
    }

    fn append_as(&mut self, id: String, kind: EntryKind) -> Result<String, StoreError> {
        let entry = SessionEntry {
            id: id.clone(),
            parent_id: self.leaf_id().map(str::to_owned),
            timestamp: now_iso(),
            kind,
            extra: serde_json::Map::new(),
        };
        let assistant = is_assistant(&entry);
        self.push(entry);
        self.has_assistant |= assistant;
        // The entry is in the tree whether or not it reached the disk; a failed write keeps
        // it waiting with the ones before it, and the caller hears of the failure.
        self.persist_pending()?;
        Ok(id)
    }

    fn push(&mut self, entry: SessionEntry) {
        let i = self.entries.len();
        self.index.insert(entry.id.clone(), i);
        self.entries.push(entry);
        self.leaf = Some(i);
    }

    /// rpc.md §7.3: nothing on disk before the first assistant message, then the whole file
    /// at once, then one line per entry: every entry not yet written, in one write.
    fn persist_pending(&mut self) -> Result<(), StoreError> {
        let outcome = if self.file.is_some() {
            self.write_pending_lines()
        } else if self.has_assistant && self.path.is_some() {
            self.write_whole_file()
        } else {
            return Ok(());
        };
        match &outcome {
            Ok(()) => self.save_error = None,
            Err(err) => self.save_error = Some(short_error(err)),
        }
        outcome
    }

    fn write_pending_lines(&mut self) -> Result<(), StoreError> {
        if self.saved >= self.entries.len() {
            return Ok(());
        }
        let (Some(file), Some(path)) = (self.file.as_mut(), self.path.as_ref()) else {
            return Ok(());
        };
        let mut lines = String::new();
        if self.torn_tail {
            lines.push('\n');
        }
        for entry in &self.entries[self.saved..] {
            lines.push_str(&entry.to_line().map_err(StoreError::Encode)?);
            lines.push('\n');
        }
        // One write of whole lines, so a crash leaves at most a torn last line.
        match file.write_all(lines.as_bytes()).and_then(|()| file.flush()) {
            Ok(()) => {
                self.torn_tail = false;
                self.file_len += lines.len() as u64;
                self.saved = self.entries.len();
                Ok(())
            }
            Err(source) => {
                // What part of the write landed is cut off again: the next write starts
                // after the last whole line. Should the cut fail too, the next write starts
                // with a newline so the fragment stays a line of its own.
                if file.set_len(self.file_len).is_err() {
                    self.torn_tail = true;
                }
                Err(StoreError::Io {
                    path: path.clone(),
                    source,
                })
            }
        }
    }

    fn write_whole_file(&mut self) -> Result<(), StoreError> {
        let Some(path) = self.path.clone() else {
            return Ok(());
        };
        let io_err = |source| StoreError::Io {
            path: path.clone(),
            source,
        };
        let mut content = serde_json::to_string(&self.header).map_err(StoreError::Encode)?;
        content.push('\n');
        for entry in &self.entries {
            content.push_str(&entry.to_line().map_err(StoreError::Encode)?);
            content.push('\n');
        }
        if let Some(dir) = path.parent()
            && !dir.as_os_str().is_empty()
        {
            std::fs::create_dir_all(dir).map_err(io_err)?;
        }
        let mut file = OpenOptions::new()
            .append(true)
            .create_new(true)
            .open(&path)
            .map_err(io_err)?;
        lock(&file, &path)?;
        if let Err(err) = file
            .write_all(content.as_bytes())
            .and_then(|()| file.flush())
        {
            // Half a first write is no session file: removed, and made whole next time.
            drop(file);
            let _ = std::fs::remove_file(&path);
            return Err(io_err(err));
        }
        self.file = Some(file);
        self.file_len = content.len() as u64;
        self.saved = self.entries.len();
        Ok(())
    }

    /// Entries from the root to the leaf.
    pub fn branch_path(&self) -> Vec<&SessionEntry> {
        self.path_to(self.leaf)
    }

    /// Entries from the root to `id` (empty for `None` or an id the session does not have).
    pub fn path_of(&self, id: Option<&str>) -> Vec<&SessionEntry> {
        self.path_to(id.and_then(|id| self.index.get(id).copied()))
    }

    fn path_to(&self, leaf: Option<usize>) -> Vec<&SessionEntry> {
        let mut path = Vec::new();
        let mut current = leaf;
        while let Some(i) = current {
            let entry = &self.entries[i];
            path.push(entry);
            // A cycle would be a corrupt file; the length bound stops the walk regardless.
            if path.len() > self.entries.len() {
                tracing::warn!("session entry tree has a cycle; truncating the branch");
                break;
            }
            current = entry
                .parent_id
                .as_deref()
                .and_then(|p| self.index.get(p).copied());
        }
        path.reverse();
        path
    }

    /// The context for the model along the current branch (rpc.md §7.5).
    pub fn build_context(&self) -> SessionContext {
        context_of(&self.branch_path())
    }

    /// The session name: the latest `session_info` in file order (any branch); an empty name
    /// clears it.
    pub fn session_name(&self) -> Option<&str> {
        self.entries
            .iter()
            .rev()
            .find_map(|e| match &e.kind {
                EntryKind::SessionInfo { name } => Some(name.as_deref().unwrap_or("")),
                _ => None,
            })
            .filter(|name| !name.is_empty())
    }

    /// Every user message in file order over the whole tree with its text (rpc.md §3.23).
    pub fn fork_messages(&self) -> Vec<(String, String)> {
        self.entries
            .iter()
            .filter_map(|e| match e.message() {
                Some(AgentMessage::User(user)) => {
                    let text = user.content.text("");
                    (!text.is_empty()).then(|| (e.id.clone(), text))
                }
                _ => None,
            })
            .collect()
    }

    /// For a fork "before" `entry_id`: `Some(parent)` when it is a user message (the parent
    /// being `None` for the first entry), `None` when it is not a user message.
    pub fn fork_point(&self, entry_id: &str) -> Option<Option<&str>> {
        let entry = self.entry(entry_id)?;
        match entry.message() {
            Some(AgentMessage::User(_)) => Some(entry.parent_id.as_deref()),
            _ => None,
        }
    }

    /// A new session holding the path root→`target_leaf` (rpc.md §7.6): labels dropped and the
    /// rest re-chained with ids kept, then one label entry per label still pointing into the
    /// path; `parentSession` = this file. `target_leaf = None` gives an empty session. Written
    /// at once only if the path has an assistant message. `dir` is ignored in memory.
    pub fn branched(
        &self,
        target_leaf: Option<&str>,
        dir: &Path,
    ) -> Result<SessionStore, StoreError> {
        let target = match target_leaf {
            None => None,
            Some(id) => Some(
                *self
                    .index
                    .get(id)
                    .ok_or_else(|| StoreError::UnknownEntry(id.to_owned()))?,
            ),
        };
        let cwd = PathBuf::from(&self.header.cwd);
        let parent = self.path.as_ref().map(|p| p.to_string_lossy().into_owned());
        let mut new = if self.path.is_some() {
            SessionStore::create(dir, &cwd, parent)
        } else {
            SessionStore::in_memory(&cwd)
        };
        let path = self.path_to(target);
        let mut previous: Option<String> = None;
        for entry in path
            .iter()
            .filter(|e| !matches!(e.kind, EntryKind::Label { .. }))
        {
            let mut copy = (*entry).clone();
            copy.parent_id = previous.take();
            previous = Some(copy.id.clone());
            new.has_assistant |= is_assistant(&copy);
            new.push(copy);
        }
        // Labels resolved over the whole file: the latest change wins, a label keeps the
        // position where it was first set (as pi's insertion-ordered map does).
        let mut labels: Vec<(&str, &str)> = Vec::new();
        for entry in &self.entries {
            if let EntryKind::Label { target_id, label } = &entry.kind {
                let slot = labels.iter().position(|(t, _)| *t == target_id.as_str());
                match (label.as_deref().filter(|l| !l.is_empty()), slot) {
                    (Some(label), Some(i)) => labels[i].1 = label,
                    (Some(label), None) => labels.push((target_id, label)),
                    (None, Some(i)) => {
                        labels.remove(i);
                    }
                    (None, None) => {}
                }
            }
        }
        for (target_id, label) in labels {
            if !new.index.contains_key(target_id) {
                continue;
            }
            let id = new_entry_id(|c| new.index.contains_key(c));
            let entry = SessionEntry {
                id: id.clone(),
                parent_id: new.leaf_id().map(str::to_owned),
                timestamp: now_iso(),
                kind: EntryKind::Label {
                    target_id: target_id.to_owned(),
                    label: Some(label.to_owned()),
                },
                extra: serde_json::Map::new(),
            };
            new.push(entry);
        }
        if new.has_assistant && new.path.is_some() {
            new.write_whole_file()?;
        }
        Ok(new)
    }
}

fn new_header(cwd: &Path, parent_session: Option<String>) -> (SessionHeader, DateTime<Utc>) {
    let created = Utc::now();
    let header = SessionHeader {
        version: CURRENT_VERSION,
        id: uuid::Uuid::now_v7().to_string(),
        timestamp: paths::iso_timestamp(created),
        cwd: cwd.to_string_lossy().into_owned(),
        parent_session,
        extra: serde_json::Map::new(),
    };
    (header, created)
}

fn now_iso() -> String {
    paths::iso_timestamp(Utc::now())
}

/// The first 8 hex digits of a random UUID, unique by `taken`; the full UUID after 100
/// collisions.
pub(crate) fn new_entry_id(taken: impl Fn(&str) -> bool) -> String {
    for _ in 0..100 {
        let mut id = uuid::Uuid::new_v4().simple().to_string();
        id.truncate(8);
        if !taken(&id) {
            return id;
        }
    }
    uuid::Uuid::new_v4().to_string()
}

fn is_assistant(entry: &SessionEntry) -> bool {
    matches!(entry.message(), Some(AgentMessage::Assistant(_)))
}

/// What an entry contributes to the model's context (compaction entries are handled by the
/// caller): a message entry's own message, shared, or one built from the entry.
pub fn context_message(entry: &SessionEntry) -> Option<Arc<AgentMessage>> {
    match &entry.kind {
        EntryKind::Message { message } => Some(Arc::clone(message)),
        EntryKind::CustomMessage {
            custom_type,
            content,
            display,
            details,
        } => Some(Arc::new(AgentMessage::Custom(CustomMessage {
            custom_type: custom_type.clone(),
            content: content.clone(),
            display: *display,
            details: details.clone(),
            timestamp: iso_to_ms(&entry.timestamp),
        }))),
        EntryKind::BranchSummary {
            from_id, summary, ..
        } if !summary.is_empty() => Some(Arc::new(AgentMessage::BranchSummary(
            BranchSummaryMessage {
                summary: summary.clone(),
                from_id: from_id.clone(),
                timestamp: iso_to_ms(&entry.timestamp),
            },
        ))),
        _ => None,
    }
}

/// The context a branch path rebuilds to (rpc.md §7.5): with a compaction on the path, its
/// summary, then the entries from its first kept one up to it, then the entries after it.
pub fn context_of(path: &[&SessionEntry]) -> SessionContext {
    let mut context = SessionContext::default();
    let mut compaction = None;
    for (i, entry) in path.iter().enumerate() {
        match &entry.kind {
            EntryKind::ThinkingLevelChange { thinking_level } => {
                context.thinking_level = Some(thinking_level.clone());
            }
            EntryKind::ModelChange { provider, model_id } => {
                context.model = Some((provider.clone(), model_id.clone()));
            }
            EntryKind::Message { message } => {
                if let AgentMessage::Assistant(a) = &**message {
                    context.model = Some((a.provider.clone(), a.model.clone()));
                }
            }
            EntryKind::Compaction { .. } => compaction = Some(i),
            _ => {}
        }
    }
    let Some(at) = compaction else {
        context.messages = Vec::with_capacity(path.len());
        context
            .messages
            .extend(path.iter().filter_map(|e| context_message(e)));
        return context;
    };
    let EntryKind::Compaction {
        summary,
        first_kept_entry_id,
        tokens_before,
        ..
    } = &path[at].kind
    else {
        return context;
    };
    let mut messages = Vec::with_capacity(path.len() - at + 1);
    messages.push(Arc::new(AgentMessage::CompactionSummary(
        CompactionSummaryMessage {
            summary: summary.clone(),
            tokens_before: *tokens_before,
            timestamp: iso_to_ms(&path[at].timestamp),
        },
    )));
    let kept_from = path[..at]
        .iter()
        .position(|e| &e.id == first_kept_entry_id)
        .unwrap_or(at);
    messages.extend(
        path[kept_from..at]
            .iter()
            .filter_map(|e| context_message(e)),
    );
    messages.extend(path[at + 1..].iter().filter_map(|e| context_message(e)));
    context.messages = messages;
    context
}

/// Milliseconds since the epoch of an ISO timestamp; 0 if it does not parse.
pub(crate) fn iso_to_ms(iso: &str) -> i64 {
    DateTime::parse_from_rfc3339(iso).map_or(0, |t| t.timestamp_millis())
}

/// Takes the advisory write lock without waiting.
/// Threads for parsing a large session file: the cores (at most 8). Asked once: on Linux the
/// answer comes from reading cgroup files, which costs more than a switch should.
pub(crate) fn parsing_threads() -> usize {
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *THREADS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get().min(8)))
}

/// What a failed write says to the user: the system's reason, without the path they know.
fn short_error(err: &StoreError) -> String {
    match err {
        StoreError::Io { source, .. } => source.to_string(),
        other => other.to_string(),
    }
}

/// Opens the session file at `path` for reading and appending, if it is a regular file. A FIFO
/// or a device named as the session (`--session`) would block the open or never end the
/// read; it is checked first, then again on the file opened without blocking.
pub(crate) fn open_session_file(path: &Path) -> Result<File, StoreError> {
    use tau_base::bounded::BoundedReadError;
    let mut options = OpenOptions::new();
    options.read(true).append(true);
    tau_base::bounded::open_regular_with(path, options).map_err(|err| match err {
        BoundedReadError::NotFound => StoreError::NotFound(path.to_path_buf()),
        BoundedReadError::Io(source) => StoreError::Io {
            path: path.to_path_buf(),
            source,
        },
        other => StoreError::Io {
            path: path.to_path_buf(),
            source: std::io::Error::other(other.to_string()),
        },
    })
}

/// Opens `path` for reading and appending, takes its lock, and reads it whole.
pub(crate) fn open_locked(path: &Path) -> Result<(File, Vec<u8>), StoreError> {
    use std::io::Read;
    let io_err = |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = open_session_file(path)?;
    lock(&file, path)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(io_err)?;
    Ok((file, bytes))
}

pub(crate) fn lock(file: &File, path: &Path) -> Result<(), StoreError> {
    use rustix::fs::{FlockOperation, flock};
    match flock(file, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(()),
        Err(e) if e == rustix::io::Errno::WOULDBLOCK => {
            Err(StoreError::SessionLocked(path.to_path_buf()))
        }
        Err(e) => Err(StoreError::Io {
            path: path.to_path_buf(),
            source: e.into(),
        }),
    }
}

/// Replaces `path` by a file holding `lines`, atomically (temp file in the same directory,
/// then rename), and returns it opened for appending with the lock held.
fn replace_file(path: &Path, lines: &[String]) -> Result<File, StoreError> {
    let io_err = |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut content = lines.join("\n");
    content.push('\n');
    let mut options = OpenOptions::new();
    options.read(true).append(true);
    // The new file is locked before it takes the old one's place, so no other process can
    // open it unlocked in between.
    tau_base::atomic::replace_file(path, content.as_bytes(), &options, |file| {
        lock(file, path).map_err(std::io::Error::other)
    })
    .map_err(|e| io_err(e.into()))
}

#[cfg(test)]
mod tests;
