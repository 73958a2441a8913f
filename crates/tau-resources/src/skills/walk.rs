//! Bounded walks of skill and prompt-template folders.
//!
//! A project's folders are read without asking for trust (they hold text), so a hostile
//! repository decides what the walk meets. Symlinks are followed, as pi does, but:
//! - in a project's folder, a link whose target lies outside the folder is not followed
//!   (a link to `/` would otherwise walk the machine, and a file link would read any file);
//! - each real directory is entered once, so a loop or a diamond of links (2^n paths through
//!   n levels of two links each) costs one visit per directory;
//! - the depth is capped at [`MAX_DEPTH`], and one load examines at most [`MAX_ENTRIES`]
//!   entries per scope (project, user, command line), so a hostile project can neither stall
//!   start-up nor use up what the user's own folders need.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use ignore::{DirEntry, WalkBuilder};

use crate::{Root, is_hidden_or_vendored};

/// Real skills sit a few levels down (`skills/group/name/SKILL.md` is depth 3); ten levels
/// leave room for deep grouping while bounding a walk that links keep extending.
pub(crate) const MAX_DEPTH: usize = 10;

/// Entries (files and folders) one load may examine per scope. A large real collection (a
/// few hundred skills; the walk does not enter a skill's own folder beyond its `SKILL.md`) is
/// well under a thousand; ten thousand cost a fraction of a second even in a debug build, so
/// a hostile tree cannot hold up start-up or a `new_session`.
pub(crate) const MAX_ENTRIES: usize = 10_000;

/// What remains of each scope's entry budget during one load.
#[derive(Debug, Default)]
pub(crate) struct Budgets {
    used: HashMap<&'static str, usize>,
}

/// Whether an entry found in the walk may be kept beyond the walker's own rules.
pub(crate) type Keep = fn(&DirEntry) -> bool;

struct State {
    /// The root's real path, when links must stay inside it.
    inside: Option<PathBuf>,
    visited: HashSet<PathBuf>,
    examined: usize,
    allowed: usize,
    entries_capped: bool,
    depth_capped: bool,
    /// Links out of the root that were not followed: the first one, and how many.
    outside: Option<(PathBuf, PathBuf)>,
    outside_count: usize,
}

impl Budgets {
    /// The files under `root` (a folder) that `builder` (set up by the caller with its
    /// ignore-file rules, order and semantic depth) yields within the caps, in walk order.
    pub(crate) fn files(
        &mut self,
        root: &Root,
        mut builder: WalkBuilder,
        keep: Keep,
    ) -> Vec<DirEntry> {
        let used = self.used.entry(root.scope).or_default();
        let Ok(real_root) = std::fs::canonicalize(&root.path) else {
            return Vec::new();
        };
        let state = Arc::new(Mutex::new(State {
            inside: (root.scope == "project").then(|| real_root.clone()),
            visited: HashSet::from([real_root]),
            examined: 0,
            allowed: MAX_ENTRIES.saturating_sub(*used),
            entries_capped: false,
            depth_capped: false,
            outside: None,
            outside_count: 0,
        }));
        let shared = Arc::clone(&state);
        builder.follow_links(true).filter_entry(move |entry| {
            let mut state = shared.lock().unwrap_or_else(PoisonError::into_inner);
            admit(&mut state, entry, keep)
        });
        let files: Vec<DirEntry> = builder
            .build()
            .flatten()
            .filter(|e| e.file_type().is_some_and(|t| t.is_file()))
            .collect();
        let state = state.lock().unwrap_or_else(PoisonError::into_inner);
        *used += state.examined;
        if let Some((link, target)) = &state.outside {
            let more = match state.outside_count {
                0 | 1 => String::new(),
                n => format!(" (and {} more links out of it)", n - 1),
            };
            tracing::warn!(
                "{} is not read: it links to {}, outside {}{more}",
                link.display(),
                target.display(),
                root.path.display()
            );
        }
        if state.entries_capped {
            tracing::warn!(
                "stopped reading {}: one load reads at most {MAX_ENTRIES} entries of {} folders; what lies beyond is not loaded",
                root.path.display(),
                root.scope
            );
        }
        if state.depth_capped {
            tracing::warn!(
                "{}: folders more than {MAX_DEPTH} levels down are not read",
                root.path.display()
            );
        }
        files
    }
}

/// Whether `path`, found in `root` without a walk, may be read: in a project's folder, only
/// when it does not lead out of it.
pub(crate) fn stays_inside(root: &Root, path: &Path) -> bool {
    if root.scope != "project" {
        return true;
    }
    match (
        std::fs::canonicalize(&root.path),
        std::fs::canonicalize(path),
    ) {
        (Ok(inside), Ok(real)) if real.starts_with(&inside) => true,
        (Ok(inside), Ok(real)) => {
            tracing::warn!(
                "{} is not read: it links to {}, outside {}",
                path.display(),
                real.display(),
                inside.display()
            );
            false
        }
        _ => false,
    }
}

/// Whether the walk takes `entry` (and, for a folder, goes into it).
fn admit(state: &mut State, entry: &DirEntry, keep: Keep) -> bool {
    if state.examined >= state.allowed {
        state.entries_capped = true;
        return false;
    }
    state.examined += 1;
    if is_hidden_or_vendored(entry.file_name()) || !keep(entry) {
        return false;
    }
    let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
    if !is_dir && !entry.path_is_symlink() {
        return true;
    }
    // A dangling link, or one the process may not resolve, leads nowhere worth reading.
    let Ok(real) = std::fs::canonicalize(entry.path()) else {
        return false;
    };
    if let Some(inside) = &state.inside
        && !real.starts_with(inside)
    {
        state.outside_count += 1;
        // One warning per root, said when the walk is done: a tree of links must not flood
        // stderr.
        state
            .outside
            .get_or_insert_with(|| (entry.path().to_path_buf(), real));
        return false;
    }
    if !is_dir {
        return true;
    }
    if entry.depth() >= MAX_DEPTH {
        state.depth_capped = true;
        return false;
    }
    state.visited.insert(real)
}

/// Every entry the caller's own rules keep.
pub(crate) fn keep_all(_: &DirEntry) -> bool {
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// Temporary folders may sit behind a link (`/tmp` on some systems).
    fn real(path: &Path) -> PathBuf {
        std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
    }

    fn project_root(path: &Path) -> Root {
        Root::auto(path.to_path_buf(), "project", path.to_path_buf())
    }

    fn names(files: &[DirEntry], root: &Path) -> Vec<String> {
        let root = real(root);
        let mut names: Vec<String> = files
            .iter()
            .map(|f| {
                let path = f.path();
                path.strip_prefix(&root)
                    .unwrap_or(path)
                    .display()
                    .to_string()
            })
            .collect();
        names.sort();
        names
    }

    fn walk(root: &Root) -> Vec<DirEntry> {
        let mut builder = WalkBuilder::new(&root.path);
        builder.standard_filters(false).sort_by_file_name(Ord::cmp);
        Budgets::default().files(root, builder, keep_all)
    }

    #[test]
    fn a_diamond_of_links_is_walked_once_per_directory() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let d = real(dir.path());
        // 40 levels of two links each: 2^40 paths without a visited set.
        for i in 0..40 {
            std::fs::create_dir_all(d.join(format!("d{i}"))).unwrap_or_else(|e| panic!("{e}"));
        }
        for i in 0..39 {
            for link in ["a", "b"] {
                symlink(format!("../d{}", i + 1), d.join(format!("d{i}/{link}")))
                    .unwrap_or_else(|e| panic!("{e}"));
            }
        }
        std::fs::write(d.join("d5/f.md"), "x").unwrap_or_else(|e| panic!("{e}"));
        let files = walk(&project_root(&d));
        // d5 is entered once: through the first chain of links that reaches it (the walk
        // is sorted, so `d0/a/…` comes before `d5`).
        assert_eq!(names(&files, &d), ["d0/a/a/a/a/a/f.md"]);
    }

    #[test]
    fn links_out_of_a_project_folder_are_not_followed_but_inner_ones_are() {
        let outside = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(outside.path().join("secret.md"), "s").unwrap_or_else(|e| panic!("{e}"));
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let d = real(dir.path());
        std::fs::create_dir_all(d.join("real")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(d.join("real/in.md"), "i").unwrap_or_else(|e| panic!("{e}"));
        symlink(outside.path(), d.join("out-dir")).unwrap_or_else(|e| panic!("{e}"));
        symlink(outside.path().join("secret.md"), d.join("out-file.md"))
            .unwrap_or_else(|e| panic!("{e}"));
        symlink("real", d.join("in-dir")).unwrap_or_else(|e| panic!("{e}"));
        symlink("real/in.md", d.join("in-file.md")).unwrap_or_else(|e| panic!("{e}"));
        symlink("/", d.join("root")).unwrap_or_else(|e| panic!("{e}"));
        let files = walk(&project_root(&d));
        // `in-dir` and `real` are one directory: whichever the sorted walk meets first.
        assert_eq!(names(&files, &d), ["in-dir/in.md", "in-file.md"]);
        std::fs::remove_file(d.join("root")).unwrap_or_else(|e| panic!("{e}"));

        // A root that is itself a skill folder: its SKILL.md is checked alike.
        symlink(outside.path().join("secret.md"), d.join("SKILL.md"))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(!stays_inside(&project_root(&d), &d.join("SKILL.md")));
        assert!(stays_inside(&project_root(&d), &d.join("in-file.md")));
        std::fs::remove_file(d.join("SKILL.md")).unwrap_or_else(|e| panic!("{e}"));

        // The user's own folders may link anywhere (a skill kept in a dotfiles repository).
        let user = Root::auto(d.clone(), "user", d.clone());
        let files = walk(&user);
        assert!(
            names(&files, &d).contains(&"out-file.md".to_string()),
            "{:?}",
            names(&files, &d)
        );
    }

    #[test]
    fn depth_and_entries_are_capped() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let d = real(dir.path());
        let mut deep = d.clone();
        for i in 0..MAX_DEPTH + 3 {
            deep.push(format!("l{i}"));
            std::fs::create_dir_all(&deep).unwrap_or_else(|e| panic!("{e}"));
            std::fs::write(deep.join("f.md"), "x").unwrap_or_else(|e| panic!("{e}"));
        }
        // Entries down to depth MAX_DEPTH are seen (`l8/f.md`); `l9`, at that depth, is not
        // entered.
        assert_eq!(walk(&project_root(&d)).len(), MAX_DEPTH - 1);

        let wide = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        for i in 0..MAX_ENTRIES + 50 {
            std::fs::write(wide.path().join(format!("{i}.md")), "")
                .unwrap_or_else(|e| panic!("{e}"));
        }
        let root = project_root(wide.path());
        let mut budgets = Budgets::default();
        let mut builder = WalkBuilder::new(&root.path);
        builder.standard_filters(false);
        assert_eq!(budgets.files(&root, builder, keep_all).len(), MAX_ENTRIES);
        // The scope's budget is spent: a second project folder in the same load gets nothing,
        // while the user's folders keep their own.
        let builder = WalkBuilder::new(&d);
        assert!(
            budgets
                .files(&project_root(&d), builder, keep_all)
                .is_empty()
        );
        let builder = WalkBuilder::new(&d);
        let user = Root::auto(d.clone(), "user", d.clone());
        assert_eq!(budgets.files(&user, builder, keep_all).len(), MAX_DEPTH - 1);
    }
}
