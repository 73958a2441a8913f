//! Paths as tau prints and compares them: lexically normalised, with `~` expanded; and the
//! programs tau starts, found on `PATH` without its relative entries.

use std::path::{Component, Path, PathBuf};

/// The user's home directory, from `$HOME` first.
pub fn home_dir() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .or_else(std::env::home_dir)
}

/// Expands a leading `~` or `~/` to the home directory.
pub fn expand_tilde(path: &str) -> PathBuf {
    if path == "~" {
        return home_dir().unwrap_or_else(|| PathBuf::from(path));
    }
    if let Some(rest) = path.strip_prefix("~/")
        && let Some(home) = home_dir()
    {
        return home.join(rest);
    }
    PathBuf::from(path)
}

/// Lexical normalisation as Node's `path.resolve` does it: `.` dropped, `..` pops a
/// component, trailing separators removed. pi prints and matches against such paths.
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                // `..` above the root stays at the root, as in Node.
                if !out.pop() && !out.has_root() {
                    out.push("..");
                }
            }
            other => out.push(other),
        }
    }
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    out
}

/// The program `name` as a `PATH` lookup finds it, counting only absolute entries of `PATH`;
/// a name with a `/` is returned as given. A relative entry (`.`, an empty one,
/// `node_modules/.bin`) is relative to whatever folder the process runs in, so a process
/// started in a cloned repository would run the repository's file of that name.
pub fn find_program(name: &Path) -> Option<PathBuf> {
    if name.components().count() != 1 || name.is_absolute() {
        return Some(name.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    let Ok(metadata) = std::fs::metadata(path) else {
        return false;
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        metadata.is_file() && metadata.permissions().mode() & 0o111 != 0
    }
    #[cfg(not(unix))]
    {
        metadata.is_file()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_are_found_on_absolute_path_entries_only() {
        // `sh` is in an absolute folder of PATH on every machine tau builds on.
        let sh = find_program(Path::new("sh")).unwrap();
        assert!(sh.is_absolute(), "{}", sh.display());
        assert_eq!(
            find_program(Path::new("./x")).unwrap(),
            PathBuf::from("./x")
        );
        assert!(find_program(Path::new("tau-no-such-program")).is_none());
    }

    #[test]
    fn normalises_as_node_resolves() {
        assert_eq!(normalize(Path::new("/a/./b/../c/")), Path::new("/a/c"));
        assert_eq!(normalize(Path::new("/a/.")), Path::new("/a"));
        assert_eq!(normalize(Path::new("/../x")), Path::new("/x"));
        assert_eq!(normalize(Path::new("/")), Path::new("/"));
        assert_eq!(normalize(Path::new("a/..")), Path::new("."));
    }
}
