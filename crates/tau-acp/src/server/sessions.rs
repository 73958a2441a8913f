//! Where ACP sessions live between processes and requests (decision T122): a session handed
//! out before its file exists is kept as a pending record (`tau_store::pending`) so another
//! process can load, configure, list and prompt it; `session/list` with titles;
//! `session/resume` (a load without the history), `session/close` (the slot ended, its
//! extensions and MCP servers stopped) and `session/fork` (a copy of the session as a new one).

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use agent_client_protocol::Client;
use agent_client_protocol::v1::schema::{
    CloseSessionRequest, CloseSessionResponse, ForkSessionRequest, ForkSessionResponse,
    ListSessionsRequest, ListSessionsResponse, McpServer, PromptResponse, ResumeSessionRequest,
    ResumeSessionResponse, SessionInfo, StopReason,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use tau_session::{AgentSession, SessionChoice};
use tau_store::pending::{self, PendingModel, PendingSession};

use super::{Server, rfc3339};
use crate::{AcpError, options};

impl Server {
    /// Notes a session just handed out whose file does not exist yet, so that it can be
    /// found by its id before its first reply. Nothing for sessions kept in memory.
    pub(super) fn record_pending(&self, id: &str) {
        let Some(slot) = self.slots.get(id) else {
            return;
        };
        let Some((dir, false)) = file_state(&slot.session) else {
            return;
        };
        let cwd = slot.session.workspace().cwd().display().to_string();
        let record = PendingSession::new(id, cwd);
        if let Err(error) = pending::write(&dir, &record) {
            tracing::warn!("the new session {id} cannot be found by other processes: {error}");
        }
    }

    /// Keeps the model and thinking level the client chose in the record of a session that
    /// has no file yet, so a later `session/load` in another process applies them.
    pub(super) fn note_pending_options(&self, id: &str) {
        let Some(slot) = self.slots.get(id) else {
            return;
        };
        let Some((dir, false)) = file_state(&slot.session) else {
            return;
        };
        let mut record = pending::read(&dir, id).unwrap_or_else(|| {
            PendingSession::new(id, slot.session.workspace().cwd().display().to_string())
        });
        let (model, thinking_level) = chosen_options(&slot.session);
        record.model = model;
        record.thinking_level = thinking_level;
        if let Err(error) = pending::write(&dir, &record) {
            tracing::warn!("the options of session {id} are not kept for other processes: {error}");
        }
    }

    /// Opens the session `id` unless it is open: from its file, else from its pending record
    /// (a new session with that id, in the recorded folder, with the recorded choices).
    pub(super) async fn ensure_open(
        &mut self,
        cx: &ConnectionTo<Client>,
        cwd: &Path,
        id: &str,
        servers: &[McpServer],
    ) -> Result<(), AcpError> {
        if self.slots.contains_key(id) {
            return Ok(());
        }
        // Only the exact id: an id prefix (as `--session` takes) could open another.
        if let Some(file) = self.launcher.find_session(cwd, id) {
            let choice = SessionChoice::Open(file.to_string_lossy().into_owned());
            self.open_slot(cx, cwd, &choice, servers).await?;
            return Ok(());
        }
        let dirs = self.launcher.session_dirs(Some(cwd));
        let Some((_, record)) = pending::find(&dirs, id) else {
            return Err(AcpError::UnknownSession(id.to_string()));
        };
        let opened = self
            .open_slot(
                cx,
                Path::new(&record.cwd),
                &SessionChoice::WithId(id.to_string()),
                servers,
            )
            .await?;
        self.apply_recorded(
            &opened,
            record.model.as_ref(),
            record.thinking_level.as_deref(),
        )
        .await;
        Ok(())
    }

    /// The model and thinking level a record (or a source session) names, applied as the
    /// client's `session/set_config_option` would; one that no longer applies is left out.
    async fn apply_recorded(
        &mut self,
        id: &str,
        model: Option<&PendingModel>,
        thinking_level: Option<&str>,
    ) {
        let Some(slot) = self.slots.get_mut(id) else {
            return;
        };
        let choices = [
            model.map(|m| (options::MODEL, format!("{}/{}", m.provider, m.id))),
            thinking_level.map(|level| (options::THINKING, level.to_string())),
        ];
        for (option, value) in choices.into_iter().flatten() {
            if let Err(error) = options::set(&mut slot.session, option, &value).await {
                tracing::warn!(
                    "session {id}: the recorded {option} \"{value}\" is not applied: {error}"
                );
            }
        }
    }

    /// The sessions stored for the request's folder (every folder's without one), newest
    /// first, with their titles, and the sessions handed out that have no file yet. Everything
    /// fits one page.
    pub(super) fn list_stored(&self, request: &ListSessionsRequest) -> ListSessionsResponse {
        let dirs: Vec<PathBuf> = match &request.cwd {
            Some(cwd) => vec![self.launcher.session_dir(cwd)],
            None => self.launcher.session_dirs(None),
        };
        let cwd = request.cwd.as_deref();
        let mut listed: Vec<(SystemTime, SessionInfo)> = tau_store::list_sessions(&dirs, cwd)
            .into_iter()
            .map(|file| {
                // An open session's name may be newer than what its file's start says.
                let title = self
                    .slots
                    .get(&file.id)
                    .and_then(|slot| slot.session.conversation().session_name())
                    .or_else(|| file.title());
                let info = SessionInfo::new(file.id.clone(), file.cwd.clone())
                    .updated_at(rfc3339(file.modified))
                    .title(title);
                (file.modified, info)
            })
            .collect();
        for waiting in pending::list(&dirs, cwd) {
            let id = waiting.record.id;
            if listed.iter().any(|(_, info)| *info.session_id.0 == *id) {
                continue;
            }
            let info =
                SessionInfo::new(id, waiting.record.cwd).updated_at(rfc3339(waiting.modified));
            listed.push((waiting.modified, info));
        }
        listed.sort_by_key(|(modified, _)| std::cmp::Reverse(*modified));
        ListSessionsResponse::new(listed.into_iter().map(|(_, info)| info).collect())
    }

    /// `session/resume`: the session opened as `session/load` opens it, without sending its
    /// history (the client has it).
    pub(super) async fn resume_session(
        &mut self,
        cx: &ConnectionTo<Client>,
        request: ResumeSessionRequest,
        responder: Responder<ResumeSessionResponse>,
    ) {
        let id = request.session_id.0.to_string();
        if let Err(error) = self
            .ensure_open(cx, &request.cwd, &id, &request.mcp_servers)
            .await
        {
            let _ = responder.respond_with_error(error.to_rpc());
            return;
        }
        let Some(slot) = self.slots.get(&id) else {
            let _ = responder.respond_with_error(AcpError::UnknownSession(id).to_rpc());
            return;
        };
        let response = ResumeSessionResponse::new()
            .config_options(options::current(&slot.session))
            .modes(crate::permissions::modes(slot.session.permissions().mode()));
        let _ = responder.respond(response);
        self.announce_commands(cx, &id);
    }

    /// `session/close`: the turn cancelled as `session/cancel` does, then the session let go
    /// of: its extensions told `session_shutdown` and stopped, its MCP servers stopped, its
    /// file closed. It stays stored; `session/load` opens it again.
    pub(super) async fn close_session(
        &mut self,
        cx: &ConnectionTo<Client>,
        request: CloseSessionRequest,
        responder: Responder<CloseSessionResponse>,
    ) {
        let id = request.session_id.0.to_string();
        if !self.slots.contains_key(&id) {
            let _ = responder.respond_with_error(AcpError::UnknownSession(id).to_rpc());
            return;
        }
        self.dialogs.cancel_session(&id);
        self.cancel(cx, &id).await;
        self.stale_mirrors.remove(&id);
        let Some(mut slot) = self.slots.remove(&id) else {
            let _ = responder.respond(CloseSessionResponse::new());
            return;
        };
        settle_pending(&slot.session, &id);
        if let Some(prompt) = slot.pending.get_mut().take() {
            let _ = prompt.respond(PromptResponse::new(StopReason::Cancelled));
        }
        if let Some(extensions) = slot.session.extension_binding().extensions() {
            tau_session::extension_hooks::quit(extensions, true).await;
        }
        slot.session.tools().shutdown_mcp().await;
        if let Some(outlet) = &slot.outlet {
            outlet.detach().await;
        }
        drop(slot);
        let _ = responder.respond(CloseSessionResponse::new());
    }

    /// `session/fork`: a new session holding a copy of the source's entries (its file as
    /// written so far, read without taking it from whoever writes it), in the request's folder.
    /// A source with no file yet gives a new session with its model and thinking level.
    pub(super) async fn fork_session(
        &mut self,
        cx: &ConnectionTo<Client>,
        request: ForkSessionRequest,
        responder: Responder<ForkSessionResponse>,
    ) {
        match self.fork(cx, &request).await {
            Ok(id) => {
                let Some(slot) = self.slots.get(&id) else {
                    let _ = responder.respond_with_error(AcpError::UnknownSession(id).to_rpc());
                    return;
                };
                let response = ForkSessionResponse::new(id.clone())
                    .config_options(options::current(&slot.session))
                    .modes(crate::permissions::modes(slot.session.permissions().mode()));
                let _ = responder.respond(response);
                self.announce_commands(cx, &id);
            }
            Err(error) => {
                let _ = responder.respond_with_error(error.to_rpc());
            }
        }
    }

    async fn fork(
        &mut self,
        cx: &ConnectionTo<Client>,
        request: &ForkSessionRequest,
    ) -> Result<String, AcpError> {
        let source = request.session_id.0.to_string();
        let cwd = request.cwd.as_path();
        let open_file = self
            .slots
            .get(&source)
            .and_then(|slot| slot.session.conversation().session_file())
            .filter(|file| file.exists());
        let file = open_file.or_else(|| self.launcher.find_session(cwd, &source));
        if let Some(file) = file {
            let dir = self.launcher.session_dir(cwd);
            let copy = tau_store::SessionStore::fork_file(&file, &dir, cwd)
                .map_err(|e| AcpError::Session(e.to_string()))?;
            let written = copy
                .is_persisted()
                .then(|| copy.file_path().map(Path::to_path_buf))
                .flatten();
            // The copy's lock goes with it; the slot opens the file afresh.
            drop(copy);
            if let Some(path) = written {
                let choice = SessionChoice::Open(path.to_string_lossy().into_owned());
                return self.open_slot(cx, cwd, &choice, &request.mcp_servers).await;
            }
        }
        // Nothing written yet: the fork starts empty, with the source's choices.
        let (model, thinking_level) = match self.slots.get(&source) {
            Some(slot) => chosen_options(&slot.session),
            None => {
                let dirs = self.launcher.session_dirs(Some(cwd));
                let (_, record) = pending::find(&dirs, &source)
                    .ok_or_else(|| AcpError::UnknownSession(source.clone()))?;
                (record.model, record.thinking_level)
            }
        };
        let id = self
            .open_slot(cx, cwd, &SessionChoice::New, &request.mcp_servers)
            .await?;
        self.apply_recorded(&id, model.as_ref(), thinking_level.as_deref())
            .await;
        self.record_pending(&id);
        self.note_pending_options(&id);
        Ok(id)
    }
}

/// Drops the record of a session whose file now exists (as a prompt settles, as the session
/// closes).
pub(super) fn settle_pending(session: &AgentSession, id: &str) {
    if let Some((dir, true)) = file_state(session)
        && let Err(error) = pending::remove(&dir, id)
    {
        tracing::debug!("the pending record of {id} stays: {error}");
    }
}

/// The folder of the session's file and whether the file exists; `None` for a session kept
/// in memory (`--no-session`).
fn file_state(session: &AgentSession) -> Option<(PathBuf, bool)> {
    let file = session.conversation().session_file()?;
    let dir = file.parent()?.to_path_buf();
    Some((dir, file.exists()))
}

/// The session's model and thinking level as a record keeps them.
fn chosen_options(session: &AgentSession) -> (Option<PendingModel>, Option<String>) {
    let models = session.models();
    let model = models.model().map(|m| PendingModel {
        provider: m.provider.clone(),
        id: m.id.clone(),
    });
    let level = serde_json::to_value(models.thinking_level())
        .ok()
        .and_then(|v| v.as_str().map(str::to_string));
    (model, level)
}
