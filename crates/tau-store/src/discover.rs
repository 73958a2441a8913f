//! Finding and listing session files (`--continue`, `--session <id>`, ACP's list, the
//! terminal's `/resume`): only header lines are read, never whole files.

use super::load::read_header;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// A session file as a listing sees it: its header's id and folder, and when it last changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionFile {
    pub path: PathBuf,
    pub id: String,
    /// The folder the session works in (its header's `cwd`).
    pub cwd: String,
    pub modified: SystemTime,
}

impl SessionFile {
    /// What a listing calls the session: its name, else its first user message
    /// ([`crate::title::session_title`]). Read from the file when asked, so listings that only
    /// need ids (`--continue`) pay nothing for it.
    pub fn title(&self) -> Option<String> {
        crate::title::session_title(&self.path)
    }
}

/// Every session file in `dirs` (regular `.jsonl` files whose first line is a valid header;
/// with `cwd_filter`, only those started in that folder), newest first. Only header lines are
/// read. The one listing every front-end uses: the RPC start-up (`--continue`, `--session
/// <id>`), ACP's `session/list` and `session/load`, the terminal's `/resume`.
pub fn list_sessions(dirs: &[PathBuf], cwd_filter: Option<&Path>) -> Vec<SessionFile> {
    let mut found: Vec<SessionFile> = dirs
        .iter()
        .flat_map(|dir| sessions_in(dir, cwd_filter))
        .collect();
    found.sort_by_key(|file| std::cmp::Reverse(file.modified));
    found
}

/// The session folders below the agent folder's `sessions/`: one per project.
pub fn project_session_dirs(agent_dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(agent_dir.join("sessions")) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.is_dir())
        .collect();
    dirs.sort();
    dirs
}

/// `.jsonl` files in `dir` whose header is valid (and whose `cwd` matches, if asked).
fn sessions_in(dir: &Path, cwd_filter: Option<&Path>) -> Vec<SessionFile> {
    let Ok(read_dir) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for dirent in read_dir.flatten() {
        let path = dirent.path();
        if path.extension().and_then(|e| e.to_str()) != Some("jsonl") {
            continue;
        }
        let Ok(meta) = dirent.metadata() else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        let Some(header) = read_header(&path) else {
            continue;
        };
        if let Some(cwd) = cwd_filter
            && Path::new(&header.cwd) != cwd
        {
            continue;
        }
        found.push(SessionFile {
            path,
            id: header.id,
            cwd: header.cwd,
            modified: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
        });
    }
    found
}

/// The most recently modified session in `dir` (`--continue`); with `cwd_filter`, only
/// sessions started in that directory (custom session dirs are flat).
pub fn most_recent_in(dir: &Path, cwd_filter: Option<&Path>) -> Option<PathBuf> {
    list_sessions(&[dir.to_path_buf()], cwd_filter)
        .into_iter()
        .next()
        .map(|file| file.path)
}

/// The session in `dir` whose id is `prefix`, else the most recent one whose id starts
/// with it.
pub fn find_by_id_prefix(dir: &Path, prefix: &str, cwd_filter: Option<&Path>) -> Option<PathBuf> {
    if prefix.is_empty() {
        return None;
    }
    let sessions = list_sessions(&[dir.to_path_buf()], cwd_filter);
    if let Some(file) = sessions.iter().find(|file| file.id == prefix) {
        return Some(file.path.clone());
    }
    sessions
        .into_iter()
        .find(|file| file.id.starts_with(prefix))
        .map(|file| file.path)
}
