//! Sessions handed out before their file exists (decision T122): a session file is written
//! only with the first reply, as pi does, so a session an ACP client made and has not prompted
//! yet would be unknown to the next process. Such a session is kept as a small record,
//! `<session dir>/pending/<id>.json` (`{id, cwd, createdAt, model?, thinkingLevel?}`), which
//! pi never reads (it lists `*.jsonl` files only), written atomically and readable by its owner
//! only, and removed once the session file exists. This module owns those records: writing,
//! reading, finding one by id, listing them, and pruning those that are done with.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

/// The folder inside a session directory that holds the records.
pub const PENDING_DIR: &str = "pending";

/// A record not touched for this long is removed when its folder is listed: an editor that
/// opens a new thread for every panel it shows would otherwise leave one per panel forever.
pub const PENDING_LIFETIME: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// A record is a few hundred bytes; anything much larger is not one of ours.
const RECORD_CAP: u64 = 64 * 1024;

/// The longest id a record is kept under (session ids are UUIDs, 36 characters).
const MAX_ID_LEN: usize = 128;

/// A session that has an id and a folder but no file yet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingSession {
    pub id: String,
    /// The folder the session works in.
    pub cwd: String,
    /// ISO 8601, as session headers write their timestamp.
    pub created_at: String,
    /// The model the client chose before the first prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<PendingModel>,
    /// The thinking level the client chose before the first prompt (`off`, `low`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_level: Option<String>,
}

/// A model by its provider and id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingModel {
    pub provider: String,
    pub id: String,
}

impl PendingSession {
    /// A record for a session made now.
    pub fn new(id: impl Into<String>, cwd: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            cwd: cwd.into(),
            created_at: crate::paths::iso_timestamp(chrono::Utc::now()),
            model: None,
            thinking_level: None,
        }
    }
}

/// A record as a listing finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedPending {
    pub record: PendingSession,
    /// The session directory whose `pending/` folder holds it.
    pub session_dir: PathBuf,
    /// When the record was last written.
    pub modified: SystemTime,
}

/// Why a record could not be written or removed.
#[derive(Debug, thiserror::Error)]
pub enum PendingError {
    /// An id that cannot name a file (a separator, `..`, control characters, too long).
    #[error("\"{0}\" cannot be the id of a stored session")]
    InvalidId(String),
    #[error("pending session record {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("could not encode the pending session record: {0}")]
    Encode(#[from] serde_json::Error),
}

/// Whether `id` may name a record file: letters, digits, `-`, `_` and `.`, not starting with a
/// dot. Ids come from clients (`session/load`), so nothing else reaches a path.
pub fn is_valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_ID_LEN
        && !id.starts_with('.')
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

fn record_path(session_dir: &Path, id: &str) -> Result<PathBuf, PendingError> {
    if !is_valid_id(id) {
        return Err(PendingError::InvalidId(id.to_string()));
    }
    Ok(session_dir.join(PENDING_DIR).join(format!("{id}.json")))
}

/// Writes (or replaces) `record` in `session_dir`: a reader sees the old record or the new
/// one, never half of one; the file is its owner's only, since it names the user's folders.
pub fn write(session_dir: &Path, record: &PendingSession) -> Result<(), PendingError> {
    let path = record_path(session_dir, &record.id)?;
    let io = |source| PendingError::Io {
        path: path.clone(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let mut bytes = serde_json::to_vec_pretty(record)?;
    bytes.push(b'\n');
    let mut options = std::fs::OpenOptions::new();
    options.write(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    tau_base::atomic::replace_file(&path, &bytes, &options, |_| Ok(()))
        .map(drop)
        .map_err(|e| io(e.into()))
}

/// Removes the record of `id` from `session_dir`; none there is no error.
pub fn remove(session_dir: &Path, id: &str) -> Result<(), PendingError> {
    let path = record_path(session_dir, id)?;
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(PendingError::Io { path, source }),
    }
}

/// The record of `id` in `session_dir`, if there is a readable one.
pub fn read(session_dir: &Path, id: &str) -> Option<PendingSession> {
    let path = record_path(session_dir, id).ok()?;
    read_record(&path).filter(|record| record.id == id)
}

fn read_record(path: &Path) -> Option<PendingSession> {
    let bytes = tau_base::bounded::read(path, RECORD_CAP).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// The record of `id` in the first of `dirs` that holds one whose session file does not exist
/// yet, with that directory. Records that are done with are pruned on the way.
pub fn find(dirs: &[PathBuf], id: &str) -> Option<(PathBuf, PendingSession)> {
    if !is_valid_id(id) {
        return None;
    }
    dirs.iter().find_map(|dir| {
        let record = read(dir, id)?;
        if has_session_file(dir, id) {
            let _ = remove(dir, id);
            return None;
        }
        Some((dir.clone(), record))
    })
}

/// Every pending session in `dirs` (with `cwd_filter`, only those working there), newest
/// first. Each folder is pruned first: records whose session file now exists, records older
/// than [`PENDING_LIFETIME`], and files that are not records go.
pub fn list(dirs: &[PathBuf], cwd_filter: Option<&Path>) -> Vec<ListedPending> {
    let mut found: Vec<ListedPending> = dirs
        .iter()
        .flat_map(|dir| list_in(dir, SystemTime::now()))
        .filter(|listed| cwd_filter.is_none_or(|cwd| Path::new(&listed.record.cwd) == cwd))
        .collect();
    found.sort_by_key(|listed| std::cmp::Reverse(listed.modified));
    found
}

fn list_in(session_dir: &Path, now: SystemTime) -> Vec<ListedPending> {
    let Ok(read_dir) = std::fs::read_dir(session_dir.join(PENDING_DIR)) else {
        return Vec::new();
    };
    let stored = session_file_ids(session_dir);
    let mut found = Vec::new();
    for dirent in read_dir.flatten() {
        let path = dirent.path();
        let Some(id) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".json"))
        else {
            // Temporary files of a write in progress, and anything else: not ours to judge.
            continue;
        };
        let Ok(meta) = dirent.metadata() else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        let expired = now
            .duration_since(modified)
            .is_ok_and(|age| age > PENDING_LIFETIME);
        let record = read_record(&path).filter(|r| r.id == id && is_valid_id(id));
        match record {
            Some(record) if !expired && !stored.iter().any(|s| s == id) => {
                found.push(ListedPending {
                    record,
                    session_dir: session_dir.to_path_buf(),
                    modified,
                });
            }
            _ => {
                if let Err(error) = std::fs::remove_file(&path) {
                    tracing::debug!("cannot prune {}: {error}", path.display());
                }
            }
        }
    }
    found
}

/// Whether `session_dir` holds the session file of `id` (named `<time>_<id>.jsonl`, as tau
/// and pi name the files they create).
pub fn has_session_file(session_dir: &Path, id: &str) -> bool {
    session_file_ids(session_dir).iter().any(|s| s == id)
}

/// The ids in the names of `session_dir`'s session files.
fn session_file_ids(session_dir: &Path) -> Vec<String> {
    let Ok(read_dir) = std::fs::read_dir(session_dir) else {
        return Vec::new();
    };
    read_dir
        .flatten()
        .filter_map(|dirent| {
            let name = dirent.file_name();
            let name = name.to_str()?;
            let stem = name.strip_suffix(".jsonl")?;
            Some(stem.split_once('_')?.1.to_string())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str, cwd: &str) -> PendingSession {
        PendingSession::new(id, cwd)
    }

    #[test]
    fn a_record_round_trips_and_is_its_owner_s_only() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = record("0197-abc", "/home/u/work");
        r.model = Some(PendingModel {
            provider: "mock".into(),
            id: "mock-1".into(),
        });
        r.thinking_level = Some("low".into());
        write(dir.path(), &r).unwrap();
        assert_eq!(read(dir.path(), "0197-abc"), Some(r.clone()));
        let path = dir.path().join("pending/0197-abc.json");
        let text = std::fs::read_to_string(&path).unwrap();
        let wire: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(wire["cwd"], "/home/u/work");
        assert_eq!(wire["model"]["provider"], "mock");
        assert_eq!(wire["thinkingLevel"], "low");
        assert!(wire["createdAt"].as_str().unwrap().ends_with('Z'));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        // Nothing but the record is left beside it (the temporary file was renamed).
        assert_eq!(
            std::fs::read_dir(dir.path().join("pending"))
                .unwrap()
                .count(),
            1
        );
        // Rewritten in place.
        r.thinking_level = Some("high".into());
        write(dir.path(), &r).unwrap();
        assert_eq!(
            read(dir.path(), "0197-abc").and_then(|r| r.thinking_level),
            Some("high".into())
        );
        remove(dir.path(), "0197-abc").unwrap();
        assert_eq!(read(dir.path(), "0197-abc"), None);
        remove(dir.path(), "0197-abc").unwrap();
    }

    #[test]
    fn ids_that_could_leave_the_folder_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        for id in ["../x", "a/b", "", ".hidden", "a\\b", "x\n"] {
            assert!(!is_valid_id(id), "{id:?}");
            assert!(matches!(
                write(dir.path(), &record(id, "/w")),
                Err(PendingError::InvalidId(_))
            ));
            assert_eq!(find(&[dir.path().to_path_buf()], id), None);
        }
        assert!(is_valid_id("01a2009e-13c9-716f-9266-e01318c25d76"));
    }

    #[test]
    fn listing_filters_by_folder_and_prunes_what_is_done_with() {
        let dir = tempfile::tempdir().unwrap();
        let other = tempfile::tempdir().unwrap();
        write(dir.path(), &record("fresh", "/w")).unwrap();
        write(dir.path(), &record("elsewhere", "/x")).unwrap();
        write(dir.path(), &record("stored", "/w")).unwrap();
        write(other.path(), &record("far", "/w")).unwrap();
        // `stored` got its file: its record is done with.
        std::fs::write(
            dir.path().join("2026-11-22T00-18-09-481Z_stored.jsonl"),
            "{}\n",
        )
        .unwrap();
        // An old record expires.
        write(dir.path(), &record("old", "/w")).unwrap();
        let old = dir.path().join("pending/old.json");
        std::fs::File::options()
            .write(true)
            .open(&old)
            .unwrap()
            .set_modified(SystemTime::now() - PENDING_LIFETIME - Duration::from_secs(60))
            .unwrap();
        // Garbage in the folder goes too; a temporary file of a write in progress stays.
        std::fs::write(dir.path().join("pending/junk.json"), "not json").unwrap();
        std::fs::write(dir.path().join("pending/.x.json.1234.tmp"), "").unwrap();

        let dirs = [dir.path().to_path_buf(), other.path().to_path_buf()];
        let mut here: Vec<String> = list(&dirs, Some(Path::new("/w")))
            .into_iter()
            .map(|l| l.record.id)
            .collect();
        here.sort();
        assert_eq!(here, ["far", "fresh"]);
        let all = list(&dirs, None);
        assert_eq!(all.len(), 3, "{all:?}");
        assert!(!dir.path().join("pending/stored.json").exists());
        assert!(!old.exists());
        assert!(!dir.path().join("pending/junk.json").exists());
        assert!(dir.path().join("pending/.x.json.1234.tmp").exists());
    }

    #[test]
    fn find_looks_through_every_folder_and_skips_sessions_that_have_their_file() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        write(b.path(), &record("s1", "/w")).unwrap();
        let dirs = [a.path().to_path_buf(), b.path().to_path_buf()];
        let (dir, found) = find(&dirs, "s1").unwrap();
        assert_eq!(dir, b.path());
        assert_eq!(found.cwd, "/w");
        std::fs::write(b.path().join("2026-01-01T00-00-00-000Z_s1.jsonl"), "{}\n").unwrap();
        assert!(has_session_file(b.path(), "s1"));
        assert_eq!(find(&dirs, "s1"), None);
        assert!(!b.path().join("pending/s1.json").exists());
    }
}
