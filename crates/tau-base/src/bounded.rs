//! Reading a configuration or resource file that someone else may have planted: only a
//! regular file, and only up to a cap.
//!
//! A project (and, through links, anything it points at) decides what sits at the paths tau
//! reads: `.pi/settings.json` may be a link to `/dev/zero` (an endless read), a FIFO (an open
//! that waits for a writer forever), or a multi-gigabyte file. Every file tau reads from a
//! project or an agent folder goes through [`read`] or [`read_to_string`]: the path must lead to
//! a regular file, the open never blocks (`O_NONBLOCK`, then the opened file is checked again,
//! so a file swapped for a FIFO between the check and the open is still refused), and at most
//! `cap` bytes are read; a longer file is an error, not a silent truncation.

use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Settings, `models.json`, `auth.json`, `trust.json`, `.mcp.json`, a package's
/// `package.json`, an extension's `tau-extension.json`: the largest real one is a few
/// kilobytes; a megabyte leaves room for a long model list without letting a planted file
/// cost more than that.
pub const CONFIG_CAP: u64 = 1 << 20;

/// Context files (`AGENTS.md`, `CLAUDE.md`), `SYSTEM.md`, skills and prompt templates: text
/// that goes into every request's prompt. Four megabytes is already more than any model's
/// context window holds.
pub const TEXT_CAP: u64 = 4 << 20;

/// Why a file was not read.
#[derive(Debug, thiserror::Error)]
pub enum BoundedReadError {
    /// Nothing there (the one error callers usually take as "no file").
    #[error("no such file")]
    NotFound,
    /// A folder, FIFO, socket or device: named by what it is.
    #[error("it is {kind}, not a regular file")]
    NotRegular { kind: &'static str },
    /// Longer than the cap.
    #[error("it is larger than {} (at least {len} bytes)", size(*cap))]
    TooLarge { len: u64, cap: u64 },
    /// Not UTF-8 (only from [`read_to_string`]).
    #[error("it is not UTF-8 text")]
    NotText,
    #[error("{0}")]
    Io(std::io::Error),
}

/// A file that could not be read, named: for warnings.
#[derive(Debug)]
pub struct FileError {
    pub path: PathBuf,
    pub error: BoundedReadError,
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.error)
    }
}

fn size(bytes: u64) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else if bytes >= 1 << 10 && bytes.is_multiple_of(1 << 10) {
        format!("{} KiB", bytes >> 10)
    } else {
        format!("{bytes} bytes")
    }
}

fn kind_of(file_type: std::fs::FileType) -> Option<&'static str> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_fifo() {
            return Some("a FIFO");
        }
        if file_type.is_socket() {
            return Some("a socket");
        }
        if file_type.is_char_device() || file_type.is_block_device() {
            return Some("a device");
        }
    }
    if file_type.is_dir() {
        return Some("a folder");
    }
    if file_type.is_file() {
        return None;
    }
    Some("not a file")
}

fn io_error(err: std::io::Error) -> BoundedReadError {
    if err.kind() == std::io::ErrorKind::NotFound {
        BoundedReadError::NotFound
    } else {
        BoundedReadError::Io(err)
    }
}

/// Whether (following links) `path` is a regular file, from its metadata alone: for a caller
/// that meets a file it will not read now (a walk's entry, a file about to be replaced) and
/// must not open to find out, since opening a FIFO is already a signal to its writer.
pub fn check_regular(path: &Path) -> Result<(), BoundedReadError> {
    let metadata = std::fs::metadata(path).map_err(io_error)?;
    match kind_of(metadata.file_type()) {
        Some(kind) => Err(BoundedReadError::NotRegular { kind }),
        None => Ok(()),
    }
}

/// Opens `path` for reading if (following links) it is a regular file, without ever waiting.
pub fn open_regular(path: &Path) -> Result<std::fs::File, BoundedReadError> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    open_regular_with(path, options)
}

/// [`open_regular`] with the caller's access (a session file is read and appended to).
pub fn open_regular_with(
    path: &Path,
    mut options: std::fs::OpenOptions,
) -> Result<std::fs::File, BoundedReadError> {
    // Checked before the open: opening a FIFO, even without blocking, is already a signal
    // to whoever holds its other end.
    check_regular(path)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        let flags = rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::NOCTTY;
        options.custom_flags(flags.bits() as i32);
    }
    let file = options.open(path).map_err(io_error)?;
    // The path may have been swapped between the check and the open.
    let opened = file.metadata().map_err(BoundedReadError::Io)?;
    if let Some(kind) = kind_of(opened.file_type()) {
        return Err(BoundedReadError::NotRegular { kind });
    }
    Ok(file)
}

/// The bytes of the regular file at `path`, if it holds at most `cap` of them.
pub fn read(path: &Path, cap: u64) -> Result<Vec<u8>, BoundedReadError> {
    let file = open_regular(path)?;
    let len = file.metadata().map_err(BoundedReadError::Io)?.len();
    if len > cap {
        return Err(BoundedReadError::TooLarge { len, cap });
    }
    // The length can change while reading (a file still being written); the cap holds anyway.
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    file.take(cap.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(BoundedReadError::Io)?;
    let read = bytes.len() as u64;
    if read > cap {
        return Err(BoundedReadError::TooLarge { len: read, cap });
    }
    Ok(bytes)
}

/// [`read`], as UTF-8 text.
pub fn read_to_string(path: &Path, cap: u64) -> Result<String, BoundedReadError> {
    String::from_utf8(read(path, cap)?).map_err(|_| BoundedReadError::NotText)
}

/// [`read_to_string`] for a file that may be missing: `Ok(None)` when there is nothing there.
pub fn read_optional(path: &Path, cap: u64) -> Result<Option<String>, FileError> {
    match read_to_string(path, cap) {
        Ok(text) => Ok(Some(text)),
        Err(BoundedReadError::NotFound) => Ok(None),
        Err(error) => Err(FileError {
            path: path.to_path_buf(),
            error,
        }),
    }
}

/// The first line of the regular file at `path` (without its `\n`), read up to `cap` bytes:
/// a session file's header, without reading the rest of the file.
pub fn first_line(path: &Path, cap: u64) -> Result<Vec<u8>, BoundedReadError> {
    let file = open_regular(path)?;
    let mut reader = std::io::BufReader::new(file.take(cap.saturating_add(1)));
    let mut line = Vec::new();
    std::io::BufRead::read_until(&mut reader, b'\n', &mut line).map_err(BoundedReadError::Io)?;
    if line.last() == Some(&b'\n') {
        line.pop();
    } else if line.len() as u64 > cap {
        return Err(BoundedReadError::TooLarge {
            len: line.len() as u64,
            cap,
        });
    }
    Ok(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_regular_file_within_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.json");
        std::fs::write(&path, "{}").unwrap();
        assert_eq!(read_to_string(&path, 2).unwrap(), "{}");
        assert!(matches!(
            read_to_string(&path, 1),
            Err(BoundedReadError::TooLarge { len: 2, cap: 1 })
        ));
    }

    #[test]
    fn refuses_folders_devices_and_fifos_without_waiting() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            read(dir.path(), CONFIG_CAP),
            Err(BoundedReadError::NotRegular { kind: "a folder" })
        ));
        let zero = dir.path().join("zero");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        assert!(matches!(
            read(&zero, CONFIG_CAP),
            Err(BoundedReadError::NotRegular { kind: "a device" })
        ));
        let fifo = dir.path().join("fifo");
        rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, rustix::fs::Mode::RUSR).unwrap();
        // Nobody writes to it: a blocking open would never return.
        let err = read(&fifo, CONFIG_CAP).unwrap_err();
        assert_eq!(err.to_string(), "it is a FIFO, not a regular file");
        assert!(
            read_optional(&dir.path().join("none"), 1)
                .unwrap()
                .is_none()
        );
        assert!(matches!(
            check_regular(&fifo),
            Err(BoundedReadError::NotRegular { kind: "a FIFO" })
        ));
        assert!(matches!(
            check_regular(&dir.path().join("none")),
            Err(BoundedReadError::NotFound)
        ));
    }

    #[test]
    fn the_first_line_is_read_alone_and_capped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        std::fs::write(&path, "{\"type\":\"session\"}\n{\"x\":1}\n").unwrap();
        assert_eq!(first_line(&path, 64).unwrap(), b"{\"type\":\"session\"}");
        assert!(first_line(&path, 4).is_err());
        std::fs::write(&path, "no newline").unwrap();
        assert_eq!(first_line(&path, 64).unwrap(), b"no newline");
    }
}
