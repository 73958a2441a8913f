//! Where a tool's path argument points (tools-resources §1.0.2): a leading `@` is dropped,
//! exotic Unicode spaces become plain spaces, `~` is the home directory, and relative paths
//! resolve against the session's working directory.

use std::path::{Path, PathBuf};

const UNICODE_SPACES: [char; 15] = [
    '\u{00A0}', '\u{2000}', '\u{2001}', '\u{2002}', '\u{2003}', '\u{2004}', '\u{2005}', '\u{2006}',
    '\u{2007}', '\u{2008}', '\u{2009}', '\u{200A}', '\u{202F}', '\u{205F}', '\u{3000}',
];

/// pi's `expandPath`.
pub fn expand_path(path: &str, home: Option<&Path>) -> PathBuf {
    let path = path.strip_prefix('@').unwrap_or(path);
    let path: String = path
        .chars()
        .map(|c| if UNICODE_SPACES.contains(&c) { ' ' } else { c })
        .collect();
    match (path.as_str(), home) {
        ("~", Some(home)) => home.to_path_buf(),
        (p, Some(home)) if p.starts_with("~/") => home.join(&p[2..]),
        (p, _) => PathBuf::from(p),
    }
}

/// pi's `resolveToCwd`: absolute paths stay, relative ones join the working directory.
pub fn resolve_to_cwd(path: &str, cwd: &Path, home: Option<&Path>) -> PathBuf {
    let expanded = expand_path(path, home);
    if expanded.is_absolute() {
        expanded
    } else {
        cwd.join(expanded)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expansion_rules() {
        let home = Path::new("/home/u");
        let cwd = Path::new("/work");
        assert_eq!(
            resolve_to_cwd("@src/main.rs", cwd, Some(home)),
            Path::new("/work/src/main.rs")
        );
        assert_eq!(
            resolve_to_cwd("~/notes.md", cwd, Some(home)),
            Path::new("/home/u/notes.md")
        );
        assert_eq!(resolve_to_cwd("~", cwd, Some(home)), Path::new("/home/u"));
        assert_eq!(
            resolve_to_cwd("/etc/hosts", cwd, Some(home)),
            Path::new("/etc/hosts")
        );
        assert_eq!(
            resolve_to_cwd("a\u{00A0}b.txt", cwd, Some(home)),
            Path::new("/work/a b.txt")
        );
        assert_eq!(
            resolve_to_cwd("~user/x", cwd, Some(home)),
            Path::new("/work/~user/x")
        );
    }
}
