//! Finding session files for the CLI (`--continue`, `--session <id>`): only header lines are
//! read, never whole files.

use super::load::read_header;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// `.jsonl` files in `dir` whose header is valid (and whose `cwd` matches, if asked), with
/// their modification time.
fn sessions_in(dir: &Path, cwd_filter: Option<&Path>) -> Vec<(PathBuf, String, SystemTime)> {
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
        let mtime = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        found.push((path, header.id, mtime));
    }
    found
}

/// The most recently modified session in `dir` (`--continue`); with `cwd_filter`, only
/// sessions started in that directory (custom session dirs are flat).
pub fn most_recent_in(dir: &Path, cwd_filter: Option<&Path>) -> Option<PathBuf> {
    sessions_in(dir, cwd_filter)
        .into_iter()
        .max_by_key(|(_, _, mtime)| *mtime)
        .map(|(path, _, _)| path)
}

/// The session in `dir` whose id is `prefix`, else the most recent one whose id starts
/// with it.
pub fn find_by_id_prefix(dir: &Path, prefix: &str, cwd_filter: Option<&Path>) -> Option<PathBuf> {
    if prefix.is_empty() {
        return None;
    }
    let sessions = sessions_in(dir, cwd_filter);
    if let Some((path, _, _)) = sessions.iter().find(|(_, id, _)| id == prefix) {
        return Some(path.clone());
    }
    sessions
        .into_iter()
        .filter(|(_, id, _)| id.starts_with(prefix))
        .max_by_key(|(_, _, mtime)| *mtime)
        .map(|(path, _, _)| path)
}
