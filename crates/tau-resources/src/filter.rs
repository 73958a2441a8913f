//! The pattern entries of a settings file's `skills` / `prompts` array (tools-resources §3.1):
//! a glob keeps only the files it matches, `!glob` leaves files out, `+path` brings an exact
//! path back, `-path` leaves an exact path out whatever else says. Paths listed in the array
//! are subject to all four; the folders tau finds on its own only to the last three.

use std::path::{Path, PathBuf};

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

/// The patterns of one settings file.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// The settings file's folder, which relative patterns are relative to.
    base_dir: PathBuf,
    includes: Option<GlobSet>,
    excludes: Option<GlobSet>,
    force_in: Vec<String>,
    force_out: Vec<String>,
}

/// Whether an entry is a pattern rather than a path to load.
pub fn is_pattern(entry: &str) -> bool {
    entry.starts_with(['!', '+', '-']) || entry.contains(['*', '?'])
}

impl Filter {
    pub fn new(base_dir: &Path, entries: &[String]) -> Self {
        let mut includes = Vec::new();
        let mut excludes = Vec::new();
        let mut force_in = Vec::new();
        let mut force_out = Vec::new();
        for entry in entries.iter().filter(|e| is_pattern(e)) {
            if let Some(p) = entry.strip_prefix('+') {
                force_in.push(exact(p));
            } else if let Some(p) = entry.strip_prefix('-') {
                force_out.push(exact(p));
            } else if let Some(p) = entry.strip_prefix('!') {
                excludes.push(p.to_string());
            } else {
                includes.push(entry.clone());
            }
        }
        Self {
            base_dir: base_dir.to_path_buf(),
            includes: glob_set(&includes),
            excludes: glob_set(&excludes),
            force_in,
            force_out,
        }
    }

    /// Whether `file` (absolute) stays; `listed` says it came from a path in the array, so
    /// the plain globs apply to it too.
    pub fn keeps(&self, file: &Path, listed: bool) -> bool {
        let names = self.names_of(file);
        let any = |set: &Option<GlobSet>| {
            set.as_ref()
                .is_some_and(|s| names.iter().any(|n| s.is_match(n)))
        };
        let exact = |list: &[String]| list.iter().any(|p| names.iter().any(|n| n == p));
        let mut keep = !(listed && self.includes.is_some()) || any(&self.includes);
        if keep && any(&self.excludes) {
            keep = false;
        }
        if exact(&self.force_in) {
            keep = true;
        }
        if exact(&self.force_out) {
            keep = false;
        }
        keep
    }

    /// What a pattern is matched against: the path relative to the settings folder, the
    /// file name and the absolute path, and for a `SKILL.md` the same of its folder.
    fn names_of(&self, file: &Path) -> Vec<String> {
        let mut names = Vec::new();
        let mut add = |path: &Path| {
            let relative = path.strip_prefix(&self.base_dir).unwrap_or(path);
            names.push(relative.to_string_lossy().into_owned());
            if let Some(name) = path.file_name() {
                names.push(name.to_string_lossy().into_owned());
            }
            names.push(path.to_string_lossy().into_owned());
        };
        add(file);
        if file.file_name().is_some_and(|n| n == "SKILL.md")
            && let Some(dir) = file.parent()
        {
            add(dir);
        }
        names
    }
}

fn exact(pattern: &str) -> String {
    pattern.strip_prefix("./").unwrap_or(pattern).to_string()
}

fn glob_set(patterns: &[String]) -> Option<GlobSet> {
    if patterns.is_empty() {
        return None;
    }
    let mut builder = GlobSetBuilder::new();
    for pattern in patterns {
        // `*` stays within one path component, as in minimatch.
        match GlobBuilder::new(pattern).literal_separator(true).build() {
            Ok(glob) => {
                builder.add(glob);
            }
            Err(err) => tracing::warn!("ignoring resource pattern {pattern:?}: {err}"),
        }
    }
    builder
        .build()
        .map_err(|err| tracing::warn!("ignoring resource patterns {patterns:?}: {err}"))
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(entries: &[&str]) -> Filter {
        let entries: Vec<String> = entries.iter().map(|e| e.to_string()).collect();
        Filter::new(Path::new("/agent"), &entries)
    }

    #[test]
    fn overrides_apply_in_pi_s_order() {
        let f = filter(&[
            "!*-old",
            "+skills/keep-old",
            "-skills/alpha/SKILL.md",
            "plain/path",
        ]);
        assert!(f.keeps(Path::new("/agent/skills/beta/SKILL.md"), false));
        assert!(!f.keeps(Path::new("/agent/skills/beta-old/SKILL.md"), false));
        assert!(f.keeps(Path::new("/agent/skills/keep-old/SKILL.md"), false));
        assert!(!f.keeps(Path::new("/agent/skills/alpha/SKILL.md"), false));
        // A glob matches whole names: `*-old` is not `x-old.md`.
        assert!(f.keeps(Path::new("/agent/prompts/x-old.md"), true));
    }

    #[test]
    fn plain_globs_narrow_listed_paths_only() {
        let f = filter(&["prompts/review-*.md"]);
        assert!(f.keeps(Path::new("/agent/prompts/review-code.md"), true));
        assert!(!f.keeps(Path::new("/agent/prompts/plan.md"), true));
        assert!(!f.keeps(Path::new("/agent/prompts/deep/review-x.md"), true));
        assert!(f.keeps(Path::new("/agent/prompts/plan.md"), false));
        assert!(filter(&[]).keeps(Path::new("/x.md"), true));
    }
}
