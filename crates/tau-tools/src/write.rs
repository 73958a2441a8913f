//! The `write` tool (tools-resources §1.4), and what the file-changing tools share: atomic
//! replacement of a file's contents and one mutation at a time per file.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};

use rustix::io::Errno;
use serde_json::{Map, Value, json};
use tau_protocol::AgentToolResult;
use tokio::sync::{Mutex, OwnedMutexGuard};
use tokio_util::sync::CancellationToken;

use crate::call::{abort_if_cancelled, args, text_block, until_cancelled};
use crate::os_error::os_error;
use crate::tool::builtin_tool;
use tau_base::atomic::ReplaceError;

const DESCRIPTION: &str = "Writes content to a file, replacing the file if it exists and \
creating it, together with any missing parent directories, if it does not.";

static PARAMETERS: LazyLock<Value> = LazyLock::new(|| {
    json!({
        "type": "object",
        "required": ["path", "content"],
        "properties": {
            "path": {
                "type": "string",
                "description": "The file to create or replace, relative to the working directory or absolute"
            },
            "content": {
                "type": "string",
                "description": "The complete new content of the file"
            }
        }
    })
});

builtin_tool!(
    /// Creates and overwrites files for the model.
    WriteTool,
    "write",
    arguments: owned
);

impl WriteTool {
    /// Runs one call; `execute` delegates here. `Err` carries the error text.
    pub async fn run(
        &self,
        arguments: Map<String, Value>,
        cancel: &CancellationToken,
    ) -> Result<AgentToolResult, String> {
        abort_if_cancelled(cancel)?;
        let path = args::string("write", &arguments, "path")?;
        let content = args::string("write", &arguments, "content")?;
        let absolute = self.env.resolve(&path);

        let _lock = until_cancelled(cancel, lock_file(&absolute)).await?;
        if let Some(dir) = absolute.parent() {
            tokio::fs::create_dir_all(dir)
                .await
                .map_err(|e| os_error(&e, "mkdir", Some(dir)))?;
        }
        // Last moment to back out: once the rename is done the file has changed, and saying
        // "aborted" then would mislead the model.
        abort_if_cancelled(cancel)?;
        let written = content.len();
        let through_client = match &self.env.files {
            Some(files) => files.write_text(&absolute, &content).await?,
            None => false,
        };
        if !through_client {
            replace_contents(&absolute, content.into_bytes()).await?;
        }
        Ok(AgentToolResult {
            extra: Default::default(),
            content: vec![text_block(format!(
                "Successfully wrote {written} bytes to {path}"
            ))],
            details: None,
            terminate: None,
        })
    }
}

/// Held while a tool changes one file; dropping it lets the next change of that file go.
pub(crate) struct FileLock {
    key: PathBuf,
    guard: Option<OwnedMutexGuard<()>>,
}

static FILE_LOCKS: LazyLock<std::sync::Mutex<HashMap<PathBuf, Arc<Mutex<()>>>>> =
    LazyLock::new(Default::default);

/// Serialises `edit` and `write` per file (pi 0.73+): tool calls of one reply run
/// concurrently, and two edits of the same file must not both start from its old contents.
/// The key is the real path, so links to one file share a lock.
pub(crate) async fn lock_file(path: &Path) -> FileLock {
    let key = tokio::fs::canonicalize(path)
        .await
        .unwrap_or_else(|_| path.to_path_buf());
    let mutex = {
        let mut locks = FILE_LOCKS.lock().unwrap_or_else(|e| e.into_inner());
        Arc::clone(locks.entry(key.clone()).or_default())
    };
    let guard = mutex.lock_owned().await;
    FileLock {
        key,
        guard: Some(guard),
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        drop(self.guard.take());
        let mut locks = FILE_LOCKS.lock().unwrap_or_else(|e| e.into_inner());
        // Only the table holds it now (clones are made under the table's lock), so nobody
        // is waiting: forget it rather than grow the table with every file ever touched.
        if locks
            .get(&self.key)
            .is_some_and(|m| Arc::strong_count(m) == 1)
        {
            locks.remove(&self.key);
        }
    }
}

/// [`write_atomic`] with a failure worded as pi words it: as Node's error from `open`.
pub(crate) async fn replace_contents(path: &Path, bytes: Vec<u8>) -> Result<(), String> {
    write_atomic(path, bytes)
        .await
        .map_err(|e| os_error(&e, "open", Some(path)))
}

/// Replaces the contents of `path` (following symlinks) so that readers see either the old
/// or the new file, never a torn one: the bytes go to a temporary file beside it, which is
/// flushed and renamed over it. The file keeps its permissions (and, where allowed, owner).
pub(crate) async fn write_atomic(path: &Path, bytes: Vec<u8>) -> io::Result<()> {
    let path = path.to_path_buf();
    tokio::task::spawn_blocking(move || write_atomic_blocking(&path, &bytes))
        .await
        .map_err(io::Error::other)?
}

fn write_atomic_blocking(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let target = follow_symlinks(path);
    let existing = fs::metadata(&target).ok();
    if existing.as_ref().is_some_and(fs::Metadata::is_dir) {
        return Err(io::Error::from_raw_os_error(Errno::ISDIR.raw_os_error()));
    }
    let mut options = fs::OpenOptions::new();
    options.write(true);
    let replaced = tau_base::atomic::replace_file(&target, bytes, &options, |file| {
        if let Some(meta) = &existing {
            file.set_permissions(meta.permissions())?;
            keep_owner(file, meta);
        }
        Ok(())
    });
    match replaced {
        Ok(_) => Ok(()),
        // A writable file in a directory we may not create files in: pi would write it, so
        // do, in place, rather than refuse.
        Err(ReplaceError::CreateTemp(e))
            if e.kind() == io::ErrorKind::PermissionDenied && existing.is_some() =>
        {
            fs::write(&target, bytes)
        }
        Err(e) => Err(e.into()),
    }
}

#[cfg(unix)]
fn keep_owner(file: &fs::File, meta: &fs::Metadata) {
    use std::os::unix::fs::MetadataExt as _;
    // Only root (or a member of the group) may change these; failing leaves the file ours,
    // which is what any editor's save-by-rename does too.
    let _ = std::os::unix::fs::fchown(file, Some(meta.uid()), Some(meta.gid()));
}

#[cfg(not(unix))]
fn keep_owner(_file: &fs::File, _meta: &fs::Metadata) {}

/// Where a symlink chain ends, so the rename replaces the file and not the link.
fn follow_symlinks(path: &Path) -> PathBuf {
    let mut current = path.to_path_buf();
    // The kernel's own limit on link chains.
    for _ in 0..40 {
        let is_link = fs::symlink_metadata(&current).is_ok_and(|m| m.file_type().is_symlink());
        if !is_link {
            break;
        }
        let Ok(next) = fs::read_link(&current) else {
            break;
        };
        current = match current.parent() {
            Some(dir) if next.is_relative() => dir.join(next),
            _ => next,
        };
    }
    current
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn locks_are_per_file_and_forgotten() {
        let dir = tempfile::tempdir().expect("tempdir");
        let a = dir.path().join("a");
        let first = lock_file(&a).await;
        // Another file is not blocked.
        let other = lock_file(&dir.path().join("b")).await;
        drop(other);
        let waiting = tokio::spawn({
            let a = a.clone();
            async move { lock_file(&a).await }
        });
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(
            !waiting.is_finished(),
            "the second lock waits for the first"
        );
        drop(first);
        let second = waiting.await.expect("joins");
        drop(second);
        let locks = FILE_LOCKS.lock().unwrap_or_else(|e| e.into_inner());
        assert!(!locks.contains_key(&a));
    }
}
