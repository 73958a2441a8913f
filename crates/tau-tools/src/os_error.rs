//! OS errors worded as Node words them (`ENOENT: no such file or directory, open '/a'`): pi
//! passes those texts through to the model, so the file tools must say the same.

use std::io;
use std::path::Path;

use rustix::io::Errno;

/// Node's wording of an OS error: `ENOENT: no such file or directory, open '/abs/path'`.
pub(crate) fn os_error(err: &io::Error, syscall: &str, path: Option<&Path>) -> String {
    let Some((code, text)) = Errno::from_io_error(err).and_then(errno_words) else {
        return err.to_string();
    };
    match path {
        Some(path) => format!("{code}: {text}, {syscall} '{}'", path.display()),
        None => format!("{code}: {text}, {syscall}"),
    }
}

/// The error's code alone (`ENOENT`), as the edit tool reports access failures.
pub(crate) fn os_error_code(err: &io::Error) -> Option<&'static str> {
    Errno::from_io_error(err)
        .and_then(errno_words)
        .map(|(code, _)| code)
}

/// libuv's names and messages for the errors file operations meet.
fn errno_words(errno: Errno) -> Option<(&'static str, &'static str)> {
    let words = [
        (Errno::ACCESS, "EACCES", "permission denied"),
        (Errno::AGAIN, "EAGAIN", "resource temporarily unavailable"),
        (Errno::BUSY, "EBUSY", "resource busy or locked"),
        (Errno::DQUOT, "EDQUOT", "disk quota exceeded"),
        (Errno::EXIST, "EEXIST", "file already exists"),
        (Errno::FBIG, "EFBIG", "file too large"),
        (Errno::INTR, "EINTR", "interrupted system call"),
        (Errno::INVAL, "EINVAL", "invalid argument"),
        (Errno::IO, "EIO", "i/o error"),
        (Errno::ISDIR, "EISDIR", "illegal operation on a directory"),
        (Errno::LOOP, "ELOOP", "too many symbolic links encountered"),
        (Errno::MFILE, "EMFILE", "too many open files"),
        (Errno::NAMETOOLONG, "ENAMETOOLONG", "name too long"),
        (Errno::NFILE, "ENFILE", "file table overflow"),
        (Errno::NODEV, "ENODEV", "no such device"),
        (Errno::NOENT, "ENOENT", "no such file or directory"),
        (Errno::NOMEM, "ENOMEM", "not enough memory"),
        (Errno::NOSPC, "ENOSPC", "no space left on device"),
        (Errno::NOTDIR, "ENOTDIR", "not a directory"),
        (Errno::NOTEMPTY, "ENOTEMPTY", "directory not empty"),
        (Errno::NXIO, "ENXIO", "no such device or address"),
        (Errno::PERM, "EPERM", "operation not permitted"),
        (Errno::ROFS, "EROFS", "read-only file system"),
        (Errno::TXTBSY, "ETXTBSY", "text file is busy"),
        (Errno::XDEV, "EXDEV", "cross-device link not permitted"),
    ];
    words
        .into_iter()
        .find(|(e, _, _)| *e == errno)
        .map(|(_, code, text)| (code, text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_style_errors() {
        let err = io::Error::from_raw_os_error(Errno::NOENT.raw_os_error());
        assert_eq!(
            os_error(&err, "access", Some(Path::new("/x/y"))),
            "ENOENT: no such file or directory, access '/x/y'"
        );
        let err = io::Error::from_raw_os_error(Errno::ISDIR.raw_os_error());
        assert_eq!(
            os_error(&err, "read", None),
            "EISDIR: illegal operation on a directory, read"
        );
        assert_eq!(os_error_code(&err), Some("EISDIR"));
        assert_eq!(os_error(&io::Error::other("boom"), "open", None), "boom");
    }
}
