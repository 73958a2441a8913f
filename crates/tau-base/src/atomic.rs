//! Replacing a file so that a reader sees the old bytes or the new ones, never a torn file:
//! the one way tau writes whole files (the `write` and `edit` tools, a rewritten session
//! file, an HTML export).

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Why a replacement failed, split so that a caller may fall back when the temporary file
/// cannot even be created (a writable file in a read-only directory).
#[derive(Debug)]
pub enum ReplaceError {
    /// The temporary file beside the target could not be created.
    CreateTemp(io::Error),
    /// Preparing, writing, syncing or renaming failed; the temporary file is gone.
    Write(io::Error),
}

impl From<ReplaceError> for io::Error {
    fn from(err: ReplaceError) -> Self {
        match err {
            ReplaceError::CreateTemp(e) | ReplaceError::Write(e) => e,
        }
    }
}

/// Writes `bytes` to a new hidden file beside `target` (opened with `options` plus
/// `create_new`), lets `prepare` act on it first (take a lock, copy permissions), syncs it and
/// renames it over `target`. Returns the open file, which is now `target`.
pub fn replace_file(
    target: &Path,
    bytes: &[u8],
    options: &OpenOptions,
    prepare: impl FnOnce(&File) -> io::Result<()>,
) -> Result<File, ReplaceError> {
    let temp = temp_path(target);
    let mut options = options.clone();
    let mut file = options
        .create_new(true)
        .open(&temp)
        .map_err(ReplaceError::CreateTemp)?;
    let written = (|| {
        prepare(&file)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&temp, target)
    })();
    match written {
        Ok(()) => Ok(file),
        Err(e) => {
            let _ = std::fs::remove_file(&temp);
            Err(ReplaceError::Write(e))
        }
    }
}

/// [`replace_file`] for a plain write-only file.
pub fn write_atomically(target: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut options = OpenOptions::new();
    options.write(true);
    replace_file(target, bytes, &options, |_| Ok(()))?;
    Ok(())
}

/// A hidden, unique name beside `target` (same directory, so the rename stays on one file
/// system), short enough for file-name limits.
pub(crate) fn temp_path(target: &Path) -> PathBuf {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut cut = name.len().min(200);
    while !name.is_char_boundary(cut) {
        cut -= 1;
    }
    let unique = uuid::Uuid::new_v4().simple().to_string();
    let file = format!(".{}.{}.tmp", &name[..cut], &unique[..12]);
    match target.parent() {
        Some(dir) => dir.join(file),
        None => PathBuf::from(file),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_prepare_leaves_the_old_file_and_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("f.txt");
        std::fs::write(&target, "old").unwrap();
        let mut options = OpenOptions::new();
        options.write(true);
        let result = replace_file(&target, b"new", &options, |_| {
            Err(io::Error::other("no lock"))
        });
        assert!(matches!(result, Err(ReplaceError::Write(_))));
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "old");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        write_atomically(&target, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn temp_names_stay_short_and_beside_the_target() {
        let long = "x".repeat(300);
        let temp = temp_path(&Path::new("/d").join(&long));
        assert_eq!(temp.parent(), Some(Path::new("/d")));
        let name = temp.file_name().map(|n| n.len()).unwrap_or(0);
        assert!(name < 255, "{name}");
    }
}
