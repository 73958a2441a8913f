//! Which session a starting tau works in (rpc.md §7.7): `--no-session`, `--session <path|id>`,
//! `--continue`, or a new one in the session directory.

use std::path::{Path, PathBuf};

use crate::store::{DeferredOpen, SessionStore, find_by_id_prefix, most_recent_in};
use crate::{SessionConfig, Settings, paths};

/// How the command line asked to pick the session.
#[derive(Debug, Clone, Default)]
pub enum SessionChoice {
    /// A new session (the default).
    #[default]
    New,
    /// `--continue`: the most recently modified session of this directory, else a new one.
    Continue,
    /// `--session <path|id prefix>`.
    Open(String),
    /// `--session-id <id>`: the session of this directory with exactly that id, else a new
    /// one with it.
    WithId(String),
    /// `--fork <path|id prefix>`: a copy of that session, made in this directory.
    Fork(String),
}

/// The session directory and whether it is a custom one (used flat, filtered by `cwd`).
pub fn session_dir(config: &SessionConfig, settings: &Settings) -> (PathBuf, bool) {
    match config.session_dir.clone().or_else(|| {
        settings
            .session_dir()
            .map(|d| tau_base::paths::expand_tilde(&d))
    }) {
        Some(dir) => (dir, true),
        None => (
            paths::default_session_dir(&config.agent_dir, &config.cwd),
            false,
        ),
    }
}

/// The session a starting tau works in.
#[derive(Debug)]
pub enum StartupStore {
    /// New, forked, or in memory.
    Ready(SessionStore),
    /// An existing file, opened as `switch_session` opens one: its messages can be served
    /// from the file while the typed parse waits (decision T53).
    Opening(DeferredOpen),
}

impl From<SessionStore> for StartupStore {
    fn from(store: SessionStore) -> Self {
        Self::Ready(store)
    }
}

/// Opens or creates the session to start in. Errors are the CLI's messages.
pub fn startup_store(
    config: &SessionConfig,
    settings: &Settings,
    choice: &SessionChoice,
) -> Result<StartupStore, String> {
    if config.no_session {
        return Ok(SessionStore::in_memory(&config.cwd).into());
    }
    let (dir, custom) = session_dir(config, settings);
    // Created eagerly, as pi does, so a host can watch it from the start.
    if let Err(err) = std::fs::create_dir_all(&dir) {
        tracing::warn!(
            "cannot create the session directory {}: {err}",
            dir.display()
        );
    }
    let filter = custom.then_some(config.cwd.as_path());
    let open = |path: &Path| {
        SessionStore::open_deferred(path)
            .map(StartupStore::Opening)
            .map_err(|e| e.to_string())
    };
    match choice {
        SessionChoice::New => Ok(SessionStore::create(&dir, &config.cwd, None).into()),
        SessionChoice::Continue => match most_recent_in(&dir, filter) {
            Some(path) => open(&path),
            None => Ok(SessionStore::create(&dir, &config.cwd, None).into()),
        },
        SessionChoice::WithId(id) => {
            let exact = std::fs::read_dir(&dir).ok().and_then(|files| {
                files.filter_map(Result::ok).map(|f| f.path()).find(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.ends_with(&format!("_{id}.jsonl")))
                })
            });
            match exact {
                Some(path) => open(&path),
                None => Ok(SessionStore::create_with_id(&dir, &config.cwd, id).into()),
            }
        }
        SessionChoice::Open(arg) => {
            let path = locate(config, &dir, filter, arg)?;
            if path.exists() {
                open(&path)
            } else {
                Ok(SessionStore::create_at(path, &config.cwd, None).into())
            }
        }
        SessionChoice::Fork(arg) => {
            let path = locate(config, &dir, filter, arg)?;
            let source = SessionStore::open(&path).map_err(|e| e.to_string())?;
            source
                .copied_to(&dir, &config.cwd)
                .map(StartupStore::Ready)
                .map_err(|e| e.to_string())
        }
    }
}

/// A session named by path (anything with a separator or ending in `.jsonl`; it need not
/// exist) or by id prefix: this project first, then every project's sessions. pi asks on the
/// terminal before taking a session of another project; RPC mode cannot ask, and the host
/// named the session, so tau takes it.
fn locate(
    config: &SessionConfig,
    dir: &Path,
    filter: Option<&Path>,
    arg: &str,
) -> Result<PathBuf, String> {
    if arg.contains('/') || arg.contains('\\') || arg.ends_with(".jsonl") {
        return Ok(config.cwd.join(tau_base::paths::expand_tilde(arg)));
    }
    find_by_id_prefix(dir, arg, filter)
        .or_else(|| {
            crate::store::project_session_dirs(&config.agent_dir)
                .iter()
                .find_map(|project| find_by_id_prefix(project, arg, None))
        })
        .ok_or_else(|| format!("No session found matching '{arg}'"))
}
