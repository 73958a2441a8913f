//! The session-file side of an [`AgentSession`]: what a new session records, how an opened one
//! is resumed, the commands that replace the session (new, switch, fork/branch, clone), and
//! the HTML export. The read-only views of the entry tree are the conversation's
//! (`conversation/views.rs`).

use std::path::{Path, PathBuf};

use serde_json::Value;
use tau_protocol::{AgentMessage, ThinkingLevel};

use super::{AgentSession, SessionError};
use crate::conversation::Conversation;
use crate::model_choice::ModelChoice;
use crate::store::SessionStore;
use crate::store::{DeferredOpen, OpenedFile};
use crate::todos::Todos;
use crate::workspace::Workspace;

/// What takes the current session's place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Replacement {
    /// `new_session`: an empty session in the same directory; `parent_session` goes into its
    /// header unchanged.
    New { parent_session: Option<String> },
    /// `switch_session`: another session file (relative paths against the working directory).
    Switch(String),
    /// pi's `fork`: a new session holding the path up to, not including, this user message.
    Fork(String),
    /// xcsh's `branch`: the same operation, another error text.
    Branch(String),
    /// `clone`: a new session holding the whole active branch, with the same entry ids.
    Clone,
}

/// A brand-new session starts with its model and thinking level, as pi's files do.
pub(super) fn record_start(conversation: &Conversation, models: &ModelChoice) {
    if let Some(model) = models.model() {
        let (provider, id) = (model.provider.clone(), model.id.clone());
        conversation.persist(|store| store.append_model_change(&provider, &id));
    }
    let level = models.thinking_level().as_str();
    conversation.persist(|store| store.append_thinking_level_change(level));
}

/// Rebuilds the context of an opened session (rpc.md §7.5): its messages, its model if that
/// still exists with credentials (unless `keep_model`: a `--model` given on the command line
/// wins), and its thinking level (else the current default), clamped to the model.
pub(super) fn restore_from_store(
    conversation: &Conversation,
    todos: &Todos,
    models: &mut ModelChoice,
    keep_model: bool,
) {
    let context = conversation.store().build_context();
    conversation.lock().messages = context.messages;
    sync_todos(conversation, todos);
    let level = context
        .thinking_level
        .and_then(|l| serde_json::from_value::<ThinkingLevel>(Value::String(l)).ok());
    models.restore(context.model.as_ref(), level, keep_model);
}

/// The todo list in effect at the leaf (xcsh's resync): replaces the list of the conversation
/// that was there before.
pub(super) fn sync_todos(conversation: &Conversation, todos: &Todos) {
    let phases = crate::todos::latest_on_branch(&conversation.store().branch_path());
    todos.reset(phases);
}

/// Puts `store` in place of the current session (the old store is dropped here, which
/// releases its file lock) and restores it, or records the start of a new one.
pub(super) fn install(
    store: SessionStore,
    workspace: &mut Workspace,
    conversation: &Conversation,
    todos: &Todos,
    models: &mut ModelChoice,
) {
    // Like pi's new runtime for each session: skills or templates added meanwhile count.
    workspace.reload_resources();
    let resumed = !store.entries().is_empty();
    *conversation.store() = store;
    conversation.lock().messages.clear();
    if resumed {
        restore_from_store(
            conversation,
            todos,
            models,
            workspace.config().model_pattern.is_some(),
        );
    } else {
        todos.reset(Vec::new());
        record_start(conversation, models);
    }
}

impl AgentSession {
    /// Replaces the session (new, switch, fork, branch, clone). Whatever runs is ended and
    /// the queues emptied first: they belonged to the old conversation. A fork or branch
    /// returns the text of the user message it starts before (else the text is empty). A
    /// failure leaves the current session as it was, except a switch to a long file whose
    /// read fails, which leaves an empty stand-in (as a failed parse does in `settle`).
    pub async fn replace_session(&mut self, how: Replacement) -> Result<String, SessionError> {
        if let Replacement::Switch(path) = &how {
            // A missing or unreadable file is an error and the current session stays
            // (decision 13); tools then work in the opened session's directory.
            let (cwd, next) = open_to_switch(&self.conversation, self.workspace.cwd(), path)?;
            self.workspace.move_to(cwd);
            self.tools
                .mcp_client()
                .roots_moved(self.workspace.cwd(), self.tools.mcp())
                .await;
            self.runs.abort().await;
            self.clear_queues().await;
            // The old session's list never shows through while the new one is parsed.
            self.todos.reset(Vec::new());
            // Until `settle` (which every command but `get_messages` calls first) an empty
            // in-memory session stands in; the old one is freed by the parse thread.
            let old_store = std::mem::replace(
                &mut *self.conversation.store(),
                SessionStore::in_memory(self.workspace.cwd()),
            );
            let old_messages = std::mem::take(&mut self.conversation.lock().messages);
            let opening = match next {
                Ok(opening) => {
                    opening.discard((old_store, old_messages));
                    opening
                }
                Err(opened) => {
                    // A long file: the session left is freed before the file's bytes are
                    // read, or both would be held at once (see `LONG_FILE_BYTES`). That takes
                    // some milliseconds here, and a read error now leaves the empty stand-in
                    // session, as a failed parse does in `settle`.
                    drop((old_store, old_messages));
                    opened
                        .read()
                        .map_err(|e| SessionError::Store(e.to_string()))?
                }
            };
            self.opening = Some(opening);
            return Ok(String::new());
        }
        let current_file = self.conversation.session_file();
        let dir = self
            .workspace
            .sessions_dir(current_file.as_deref(), self.preferences.settings());
        let (store, text) = match how {
            Replacement::Switch(_) => return Ok(String::new()),
            Replacement::New { parent_session } => {
                let store = if self.workspace.config().no_session {
                    SessionStore::in_memory(self.workspace.cwd())
                } else {
                    SessionStore::create(&dir, self.workspace.cwd(), parent_session)
                };
                (store, String::new())
            }
            Replacement::Fork(entry_id) => {
                fork_before(&self.conversation, &entry_id, &dir, "forking")?
            }
            Replacement::Branch(entry_id) => {
                fork_before(&self.conversation, &entry_id, &dir, "branching")?
            }
            Replacement::Clone => (clone_branch(&self.conversation, &dir)?, String::new()),
        };
        self.runs.abort().await;
        self.clear_queues().await;
        install(
            store,
            &mut self.workspace,
            &self.conversation,
            &self.todos,
            &mut self.models,
        );
        Ok(text)
    }

    /// Completes a `switch_session` whose file is still being parsed: every command but
    /// `get_messages` calls this first, so they all see the opened session.
    ///
    /// MCP servers change outside any command; what a command makes an extension do must see
    /// their tools in `getAllTools` (T98), so a change since the last look refreshes the
    /// extensions' mirror here too.
    pub fn settle(&mut self) {
        if self.tools.mcp().is_some_and(|mcp| mcp.take_changed()) {
            self.refresh_extension_state();
        }
        let Some(opening) = self.opening.take() else {
            return;
        };
        match opening.finish() {
            Ok(store) => install(
                store,
                &mut self.workspace,
                &self.conversation,
                &self.todos,
                &mut self.models,
            ),
            Err(err) => {
                // The header was valid and the file locked, so only an I/O failure gets
                // here; the conversation continues in memory rather than in a broken file.
                tracing::error!("cannot finish opening the session: {err}");
                let stand_in = SessionStore::in_memory(self.workspace.cwd());
                install(
                    stand_in,
                    &mut self.workspace,
                    &self.conversation,
                    &self.todos,
                    &mut self.models,
                );
            }
        }
    }

    /// While a switched-to session is still being parsed: its messages as JSON, straight from
    /// the file, when they can be served that way.
    pub fn opening_messages(&self) -> Option<crate::store::RawJsonArray> {
        self.opening.as_ref().and_then(|o| o.messages())
    }
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

/// `fork` (pi) and `branch` (xcsh, `doing` names it in the error): a new session in `dir`
/// holding the path up to, not including, the user message `entry_id`, and that message's
/// text.
fn fork_before(
    conversation: &Conversation,
    entry_id: &str,
    dir: &Path,
    doing: &str,
) -> Result<(SessionStore, String), SessionError> {
    let current = conversation.store();
    let target = current
        .fork_point(entry_id)
        .ok_or_else(|| SessionError::Store(format!("Invalid entry ID for {doing}")))?;
    let text = current
        .entry(entry_id)
        .and_then(|e| e.message())
        .map(user_text)
        .unwrap_or_default();
    let store = current
        .branched(target, dir)
        .map_err(|e| SessionError::Store(e.to_string()))?;
    Ok((store, text))
}

/// `clone`: a new session in `dir` holding the whole active branch, with the same entry ids.
fn clone_branch(conversation: &Conversation, dir: &Path) -> Result<SessionStore, SessionError> {
    let current = conversation.store();
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
        .branched(Some(leaf), dir)
        .map_err(|e| SessionError::Store(e.to_string()))
}

/// `switch_session`'s checks before anything changes: the file (relative paths against `cwd`)
/// opens and its working directory exists. A file that is not long is read here too, so that a
/// read error leaves the current session as it was; a long one (`Err`) is read once the current
/// session is freed. Only the current file's own lock is let go of first: it would refuse a
/// second open.
fn open_to_switch(
    conversation: &Conversation,
    cwd: &Path,
    path: &str,
) -> Result<(PathBuf, Result<DeferredOpen, OpenedFile>), SessionError> {
    let path = cwd.join(tau_base::paths::expand_tilde(path));
    let current = conversation.session_file();
    if current.is_some_and(|c| same_file(&c, &path)) {
        *conversation.store() = SessionStore::in_memory(cwd);
    }
    let store_error = |e: crate::store::StoreError| SessionError::Store(e.to_string());
    let opened = SessionStore::open_header(&path).map_err(store_error)?;
    let target = PathBuf::from(&opened.header().cwd);
    if !target.is_dir() {
        return Err(SessionError::Store(format!(
            "Stored session working directory does not exist: {}\nSession file: {}\nCurrent working directory: {}",
            target.display(),
            path.display(),
            cwd.display()
        )));
    }
    let next = if opened.is_long() {
        Err(opened)
    } else {
        Ok(opened.read().map_err(store_error)?)
    };
    Ok((target, next))
}
