//! pi packages as a source of resources: what a package source names (pi's `parseSource`),
//! where pi installs it, which packages the settings list (pi's `dedupePackages`), and which
//! skill, prompt-template and theme files a package gives (pi's `collectPackageResources`:
//! its `package.json` `pi` manifest, else its conventional `skills/`, `prompts/`, `themes/`
//! folders, narrowed by the per-kind patterns of the settings' object form). Extensions of a
//! package are `tau-extensions`' business; installing one is the package manager's
//! (`tau_extensions::packages`).

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::filter::Filter;

/// Where a package comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PackageSource {
    /// `npm:<name>[@version]`.
    Npm {
        /// What follows `npm:`, as npm is given it.
        spec: String,
        name: String,
        version: Option<String>,
    },
    /// `git:<host>/<path>[@ref]`, or an `https://`, `ssh://`, `git://` or `git@host:` URL.
    Git {
        /// What `git clone` is given.
        repo: String,
        host: String,
        /// Without `.git` and the ref.
        path: String,
        reference: Option<String>,
    },
    /// A path (relative to the settings file's folder, or to the working directory when typed
    /// on the command line).
    Local(String),
}

impl PackageSource {
    pub fn parse(source: &str) -> Self {
        let trimmed = source.trim();
        if let Some(spec) = trimmed.strip_prefix("npm:") {
            let spec = spec.trim();
            // The version follows the first `@` that does not start a scope.
            let (name, version) = match spec.char_indices().skip(1).find(|&(_, c)| c == '@') {
                Some((at, _)) if at + 1 < spec.len() => {
                    (&spec[..at], Some(spec[at + 1..].to_string()))
                }
                _ => (spec, None),
            };
            return Self::Npm {
                spec: spec.to_string(),
                name: name.to_string(),
                version,
            };
        }
        let remote = ["git:", "github:", "http:", "https:", "ssh:"]
            .iter()
            .any(|p| trimmed.starts_with(p));
        if !remote {
            return Self::Local(source.to_string());
        }
        parse_git(trimmed).unwrap_or_else(|| Self::Local(source.to_string()))
    }

    /// An exact npm version or a git ref: `update` leaves an npm package so pinned alone.
    pub fn pinned(&self) -> bool {
        match self {
            Self::Npm { version, .. } => version.as_deref().is_some_and(exact_version),
            Self::Git { reference, .. } => reference.is_some(),
            Self::Local(_) => false,
        }
    }

    /// Where pi installs it under `root` (`<agentDir>` or `<cwd>/.pi`); `None` for a local
    /// path, and for a name that would lead out of the install folder.
    pub fn install_dir(&self, root: &Path) -> Option<PathBuf> {
        match self {
            Self::Npm { name, .. } => {
                safe_relative(name).then(|| root.join("npm").join("node_modules").join(name))
            }
            Self::Git { host, path, .. } => Some(root.join("git").join(host).join(path)),
            Self::Local(_) => None,
        }
    }

    /// What makes two sources the same package (versions and refs aside); a local path is
    /// resolved against `base`.
    pub fn identity(&self, base: &Path) -> String {
        match self {
            Self::Npm { name, .. } => format!("npm:{name}"),
            Self::Git { host, path, .. } => format!("git:{host}/{path}"),
            Self::Local(path) => format!("local:{}", resolve_local(base, path).display()),
        }
    }
}

/// A local source as a path: `~` expanded, `file://` URLs read, relative to `base`.
pub fn resolve_local(base: &Path, given: &str) -> PathBuf {
    let given = given.trim();
    let given = given.strip_prefix("file://").unwrap_or(given);
    let expanded = tau_base::paths::expand_tilde(given);
    tau_base::paths::normalize(&if expanded.is_absolute() {
        expanded
    } else {
        base.join(expanded)
    })
}

/// `1.2.3`, `v1.2.3`, `1.2.3-beta.1+build`: what semver calls a valid version.
fn exact_version(version: &str) -> bool {
    let v = version
        .trim()
        .strip_prefix(['v', '='])
        .unwrap_or(version.trim());
    let core = v.split(['-', '+']).next().unwrap_or_default();
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
}

/// pi's `parseGitUrl`: with `git:` the shorthands too (`host/path`, `user/repo` for GitHub),
/// without it only URLs.
fn parse_git(source: &str) -> Option<PackageSource> {
    let (prefixed, url) = match source.strip_prefix("git:") {
        Some(rest) => (true, rest.trim()),
        None => (false, source),
    };
    let scheme = ["https://", "http://", "ssh://", "git://"]
        .into_iter()
        .find(|s| {
            url.get(..s.len())
                .is_some_and(|p| p.eq_ignore_ascii_case(s))
        });
    if !prefixed && scheme.is_none() {
        return None;
    }
    // The ref follows the first `@` of the path (not of a URL's user part).
    let split_at = |url: &str, path_start: usize| -> (String, Option<String>) {
        match url[path_start..].find('@') {
            Some(at) if path_start + at + 1 < url.len() && at > 0 => (
                url[..path_start + at].trim_end_matches('/').to_string(),
                Some(url[path_start + at + 1..].to_string()),
            ),
            _ => (url.to_string(), None),
        }
    };
    let (repo, reference, host, path) = if let Some(scheme) = scheme {
        let rest = &url[scheme.len()..];
        let slash = rest.find('/')?;
        let authority = &rest[..slash];
        let host = authority.rsplit('@').next()?.split(':').next()?;
        let (repo, reference) = split_at(url, scheme.len() + slash + 1);
        let path = repo[scheme.len() + slash + 1..].to_string();
        (repo, reference, host.to_ascii_lowercase(), path)
    } else if let Some(rest) = url.strip_prefix("git@") {
        let (host, _) = rest.split_once(':')?;
        let (repo, reference) = split_at(url, 4 + host.len() + 1);
        let path = repo[4 + host.len() + 1..].to_string();
        (repo, reference, host.to_string(), path)
    } else {
        let (repo, reference) = match url.find('/') {
            Some(slash) => split_at(url, slash + 1),
            None => (url.to_string(), None),
        };
        let hosted = [
            ("github:", "github.com"),
            ("gitlab:", "gitlab.com"),
            ("bitbucket:", "bitbucket.org"),
        ]
        .into_iter()
        .find_map(|(prefix, host)| repo.strip_prefix(prefix).map(|rest| (host, rest)));
        if let Some((host, rest)) = hosted {
            (
                format!("https://{host}/{rest}"),
                reference,
                host.into(),
                rest.into(),
            )
        } else {
            let (first, rest) = repo.split_once('/')?;
            if first.contains('.') || first == "localhost" {
                (
                    format!("https://{repo}"),
                    reference,
                    first.into(),
                    rest.into(),
                )
            } else if !rest.contains('/') {
                // `user/repo`: GitHub's, as hosted-git-info reads it.
                let repo = format!("https://github.com/{repo}");
                (
                    repo,
                    reference,
                    "github.com".into(),
                    format!("{first}/{rest}"),
                )
            } else {
                return None;
            }
        }
    };
    let path = path.trim_matches('/');
    let path = path.strip_suffix(".git").unwrap_or(path);
    let safe = safe_relative(&host) && !host.contains('/') && safe_relative(path);
    (safe && path.contains('/')).then(|| PackageSource::Git {
        repo,
        host,
        path: path.to_string(),
        reference,
    })
}

/// A relative path that stays below its base.
fn safe_relative(path: &str) -> bool {
    !path.contains(['\\', '\0'])
        && path
            .split('/')
            .all(|part| !part.is_empty() && part != "." && part != "..")
}

/// One item of a settings file's `packages`.
#[derive(Debug, Clone)]
pub struct ListedPackage {
    /// The source as the settings give it.
    pub source: String,
    pub parsed: PackageSource,
    /// The object form's keys (`extensions`, `skills`, …); `None` for a plain string.
    pub filter: Option<Map<String, Value>>,
    /// The settings file's folder, which a local path is relative to.
    pub base: PathBuf,
    /// Where npm and git sources are installed (`<agentDir>` or `<cwd>/.pi`).
    pub root: PathBuf,
    /// `user` or `project`.
    pub scope: &'static str,
}

impl ListedPackage {
    /// The package's folder when it is on disk.
    pub fn installed_dir(&self) -> Option<PathBuf> {
        let dir = match &self.parsed {
            PackageSource::Local(path) => resolve_local(&self.base, path),
            other => other.install_dir(&self.root)?,
        };
        dir.exists().then_some(dir)
    }
}

/// The `packages` of one settings file, in order.
pub fn packages_in_file(
    file: &Path,
    root: &Path,
    scope: &'static str,
) -> Result<Vec<ListedPackage>, String> {
    let text = match tau_base::bounded::read_optional(file, tau_base::bounded::CONFIG_CAP) {
        Ok(Some(text)) => text,
        Ok(None) => return Ok(Vec::new()),
        Err(e) => return Err(format!("cannot read {e}")),
    };
    let doc: Value =
        serde_json::from_str(&text).map_err(|e| format!("cannot parse {}: {e}", file.display()))?;
    let base = file.parent().unwrap_or(Path::new("")).to_path_buf();
    let Some(Value::Array(items)) = doc.get("packages") else {
        return Ok(Vec::new());
    };
    Ok(items
        .iter()
        .filter_map(|item| {
            let (source, filter) = match item {
                Value::String(source) => (source.clone(), None),
                Value::Object(object) => (
                    object.get("source")?.as_str()?.to_string(),
                    Some(object.clone()),
                ),
                _ => return None,
            };
            Some(ListedPackage {
                parsed: PackageSource::parse(&source),
                source,
                filter,
                base: base.clone(),
                root: root.to_path_buf(),
                scope,
            })
        })
        .collect())
}

/// The settings' packages that load: the trusted project's (`.pi/`, then `.tau/`) before the
/// user's, one per package (the project's wins). Unreadable files list nothing here; the
/// settings loader reports them.
pub fn listed_packages(agent_dir: &Path, cwd: &Path, project_trusted: bool) -> Vec<ListedPackage> {
    let project_root = cwd.join(".pi");
    let mut files = Vec::new();
    if project_trusted {
        for dir in [".pi", ".tau"] {
            files.push((cwd.join(dir), project_root.clone(), "project"));
        }
    }
    files.push((agent_dir.to_path_buf(), agent_dir.to_path_buf(), "user"));
    let mut seen = std::collections::HashSet::new();
    let mut listed = Vec::new();
    for (dir, root, scope) in files {
        for package in
            packages_in_file(&dir.join("settings.json"), &root, scope).unwrap_or_default()
        {
            if seen.insert(package.parsed.identity(&package.base)) {
                listed.push(package);
            }
        }
    }
    listed
}

/// The resource kinds a package gives besides extensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Skills,
    Prompts,
    Themes,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::Skills, Kind::Prompts, Kind::Themes];

    /// The manifest key and the conventional folder.
    pub fn key(self) -> &'static str {
        match self {
            Self::Skills => "skills",
            Self::Prompts => "prompts",
            Self::Themes => "themes",
        }
    }
}

/// The files of each kind a package gives.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PackageFiles {
    pub skills: Vec<PathBuf>,
    pub prompts: Vec<PathBuf>,
    pub themes: Vec<PathBuf>,
}

impl PackageFiles {
    pub fn of(&self, kind: Kind) -> &[PathBuf] {
        match kind {
            Kind::Skills => &self.skills,
            Kind::Prompts => &self.prompts,
            Kind::Themes => &self.themes,
        }
    }

    fn set(&mut self, kind: Kind, files: Vec<PathBuf>) {
        match kind {
            Kind::Skills => self.skills = files,
            Kind::Prompts => self.prompts = files,
            Kind::Themes => self.themes = files,
        }
    }
}

/// What `root` gives as a package, narrowed by `filter` (the object form's keys). `None` when
/// a plain item names a folder that is no package: no `pi` manifest and none of the
/// conventional folders (pi then loads the folder as an extension).
pub fn package_files(root: &Path, filter: Option<&Map<String, Value>>) -> Option<PackageFiles> {
    let manifest = read_manifest(root);
    let mut files = PackageFiles::default();
    for kind in Kind::ALL {
        let listed = manifest
            .as_ref()
            .and_then(|m| m.get(kind.key()))
            .and_then(Value::as_array)
            .map(|list| strings(list));
        let found = match (filter, &manifest) {
            (Some(filter), _) => match filter.get(kind.key()).and_then(Value::as_array) {
                Some(patterns) => {
                    let patterns = strings(patterns);
                    if patterns.is_empty() {
                        Vec::new()
                    } else {
                        let all = match &listed {
                            Some(list) if !list.is_empty() => manifest_files(root, list, kind),
                            _ => conventional(root, kind),
                        };
                        apply_patterns(all, &patterns, root, PathBuf::as_path)
                    }
                }
                None => match &listed {
                    Some(list) => manifest_files(root, list, kind),
                    None => conventional(root, kind),
                },
            },
            (None, Some(_)) => listed
                .map(|list| manifest_files(root, &list, kind))
                .unwrap_or_default(),
            (None, None) => conventional(root, kind),
        };
        files.set(kind, found);
    }
    let is_package = filter.is_some()
        || manifest.is_some()
        || ["extensions", "skills", "prompts", "themes"]
            .iter()
            .any(|dir| root.join(dir).exists());
    is_package.then_some(files)
}

fn read_manifest(root: &Path) -> Option<Map<String, Value>> {
    // A package can sit in the project (`.pi/npm`, a local path), which decides what its
    // `package.json` is.
    let text =
        tau_base::bounded::read_optional(&root.join("package.json"), tau_base::bounded::CONFIG_CAP)
            .map_err(|e| tracing::warn!("ignoring {e}"))
            .ok()??;
    match serde_json::from_str::<Value>(&text)
        .ok()?
        .get_mut("pi")?
        .take()
    {
        Value::Object(pi) => Some(pi),
        _ => None,
    }
}

fn strings(list: &[Value]) -> Vec<String> {
    list.iter()
        .filter_map(|item| item.as_str().map(str::to_string))
        .collect()
}

fn is_override(entry: &str) -> bool {
    entry.starts_with(['!', '+', '-'])
}

/// The conventional folder's files of `kind`.
fn conventional(root: &Path, kind: Kind) -> Vec<PathBuf> {
    let dir = root.join(kind.key());
    if dir.is_dir() {
        files_in_dir(&dir, kind)
    } else {
        Vec::new()
    }
}

/// A manifest list: paths and globs relative to the package, then its `!`, `+` and `-`
/// entries over what they gave.
fn manifest_files(root: &Path, list: &[String], kind: Kind) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in list.iter().filter(|e| !is_override(e)) {
        let paths = if entry.contains(['*', '?']) {
            expand_glob(root, entry)
        } else {
            vec![tau_base::paths::normalize(
                &root.join(entry.strip_prefix("./").unwrap_or(entry)),
            )]
        };
        for path in paths {
            if path.is_file() {
                found.push(path);
            } else if path.is_dir() {
                found.extend(files_in_dir(&path, kind));
            }
        }
    }
    let overrides: Vec<String> = list.iter().filter(|e| is_override(e)).cloned().collect();
    let filter = Filter::new(root, &overrides);
    let mut seen = std::collections::HashSet::new();
    found
        .into_iter()
        .filter(|f| filter.keeps(f, false) && seen.insert(f.clone()))
        .collect()
}

/// The files of `kind` in a folder: skills as pi finds them in its own skills folder (a
/// `SKILL.md` ends the descent, `.md` files at the top count), templates and themes at any
/// depth. Hidden names and `node_modules` are skipped, ignore files honoured.
fn files_in_dir(dir: &Path, kind: Kind) -> Vec<PathBuf> {
    match kind {
        Kind::Skills => crate::skills::files_in(dir),
        Kind::Prompts => walk_files(dir, "md"),
        Kind::Themes => walk_files(dir, "json"),
    }
}

/// Depth bound of a package walk, as for skills.
const MAX_DEPTH: usize = crate::skills::walk::MAX_DEPTH;

fn walk_files(dir: &Path, extension: &str) -> Vec<PathBuf> {
    let mut builder = ignore::WalkBuilder::new(dir);
    builder
        .standard_filters(false)
        .hidden(true)
        .ignore(true)
        .git_ignore(true)
        .require_git(false)
        .add_custom_ignore_filename(".fdignore")
        .follow_links(true)
        .max_depth(Some(MAX_DEPTH))
        .filter_entry(|e| e.file_name() != "node_modules")
        .sort_by_file_name(std::cmp::Ord::cmp);
    builder
        .build()
        .flatten()
        .filter(|e| e.file_type().is_some_and(|t| t.is_file()))
        .map(ignore::DirEntry::into_path)
        .filter(|p| p.extension().is_some_and(|e| e == extension))
        .collect()
}

/// The files and folders below `root` a manifest glob matches (hidden names never match).
fn expand_glob(root: &Path, pattern: &str) -> Vec<PathBuf> {
    let pattern = pattern.strip_prefix("./").unwrap_or(pattern);
    let Ok(glob) = globset::GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
    else {
        tracing::warn!("ignoring package pattern {pattern:?} in {}", root.display());
        return Vec::new();
    };
    let matcher = glob.compile_matcher();
    let mut builder = ignore::WalkBuilder::new(root);
    builder
        .standard_filters(false)
        .hidden(true)
        .max_depth(Some(MAX_DEPTH))
        .sort_by_file_name(std::cmp::Ord::cmp);
    builder
        .build()
        .flatten()
        .filter(|e| e.depth() > 0)
        .map(ignore::DirEntry::into_path)
        .filter(|p| p.strip_prefix(root).is_ok_and(|rel| matcher.is_match(rel)))
        .collect()
}

/// pi's `applyPatterns` for the object form, over any items with a path (`path_of`): plain
/// entries and globs keep what they match (everything when there are none), `!glob` leaves
/// out, `+path` brings back, `-path` leaves out whatever else says. A plain entry naming a
/// skill's folder keeps its `SKILL.md`.
pub fn apply_patterns<T>(
    items: Vec<T>,
    patterns: &[String],
    base: &Path,
    path_of: impl Fn(&T) -> &Path,
) -> Vec<T> {
    let (overrides, includes): (Vec<String>, Vec<String>) =
        patterns.iter().cloned().partition(|p| is_override(p));
    let (globs, plain): (Vec<String>, Vec<String>) =
        includes.into_iter().partition(|p| p.contains(['*', '?']));
    let globs = (!globs.is_empty()).then(|| Filter::new(base, &globs));
    let kept = Filter::new(base, &overrides);
    // What no include keeps comes back only through `+path`.
    let forced = Filter::new(base, &[vec!["!**".to_string()], overrides].concat());
    let named = |path: &Path| {
        let mut candidates = vec![path.to_path_buf()];
        if path.file_name().is_some_and(|n| n == "SKILL.md")
            && let Some(dir) = path.parent()
        {
            candidates.push(dir.to_path_buf());
        }
        plain.iter().any(|p| {
            let p = Path::new(p.strip_prefix("./").unwrap_or(p));
            candidates.iter().any(|c| {
                c.strip_prefix(base).is_ok_and(|rel| rel == p)
                    || c.file_name().is_some_and(|n| Path::new(n) == p)
                    || c == p
            })
        })
    };
    items
        .into_iter()
        .filter(|item| {
            let file = path_of(item);
            let included = (globs.is_none() && plain.is_empty())
                || globs.as_ref().is_some_and(|g| g.keeps(file, true))
                || named(file);
            if included {
                kept.keeps(file, false)
            } else {
                forced.keeps(file, false)
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{e}"));
        }
        std::fs::write(path, text).unwrap_or_else(|e| panic!("{e}"));
    }

    fn rel(root: &Path, files: &[PathBuf]) -> Vec<String> {
        files
            .iter()
            .map(|f| f.strip_prefix(root).unwrap_or(f).display().to_string())
            .collect()
    }

    #[test]
    fn sources_parse_as_pi_parses_them() {
        let npm = PackageSource::parse("npm:@scope/pkg@1.2.3");
        assert_eq!(
            npm,
            PackageSource::Npm {
                spec: "@scope/pkg@1.2.3".into(),
                name: "@scope/pkg".into(),
                version: Some("1.2.3".into())
            }
        );
        assert!(npm.pinned());
        assert!(!PackageSource::parse("npm:pkg@^1").pinned());
        assert!(!PackageSource::parse("npm:pkg").pinned());
        let git = |s: &str| match PackageSource::parse(s) {
            PackageSource::Git {
                repo,
                host,
                path,
                reference,
            } => (repo, host, path, reference),
            other => panic!("{s}: {other:?}"),
        };
        assert_eq!(
            git("git:github.com/u/r@v1"),
            (
                "https://github.com/u/r".into(),
                "github.com".into(),
                "u/r".into(),
                Some("v1".into())
            )
        );
        assert_eq!(
            git("https://github.com/u/r.git"),
            (
                "https://github.com/u/r.git".into(),
                "github.com".into(),
                "u/r".into(),
                None
            )
        );
        assert_eq!(
            git("ssh://git@host.example/u/r@abc"),
            (
                "ssh://git@host.example/u/r".into(),
                "host.example".into(),
                "u/r".into(),
                Some("abc".into())
            )
        );
        assert_eq!(
            git("git:git@github.com:u/r.git@main"),
            (
                "git@github.com:u/r.git".into(),
                "github.com".into(),
                "u/r".into(),
                Some("main".into())
            )
        );
        assert_eq!(git("git:u/r").0, "https://github.com/u/r");
        assert_eq!(
            PackageSource::parse("./pkgs/x"),
            PackageSource::Local("./pkgs/x".into())
        );
        assert_eq!(
            PackageSource::parse("github.com/u/r"),
            PackageSource::Local("github.com/u/r".into())
        );
        assert!(matches!(
            PackageSource::parse("git:host.example/../../etc"),
            PackageSource::Local(_)
        ));
    }

    #[test]
    fn a_manifest_names_each_kind_and_conventional_folders_stand_in_without_one() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let pkg = tmp.path().join("pkg");
        write(
            &pkg.join("package.json"),
            r#"{"pi": {"skills": ["./skills", "extra/*.md", "!**/old"], "prompts": ["p"]}}"#,
        );
        write(&pkg.join("skills/one/SKILL.md"), "");
        write(&pkg.join("skills/one/nested/SKILL.md"), "");
        write(&pkg.join("skills/old/SKILL.md"), "");
        write(&pkg.join("skills/top.md"), "");
        write(&pkg.join("extra/lone.md"), "");
        write(&pkg.join("p/a.md"), "");
        write(&pkg.join("p/deep/b.md"), "");
        write(&pkg.join("p/node_modules/c.md"), "");
        // With a manifest, folders it does not name give nothing.
        write(&pkg.join("themes/t.json"), "{}");
        let files = package_files(&pkg, None).unwrap_or_default();
        assert_eq!(
            rel(&pkg, &files.skills),
            ["skills/one/SKILL.md", "skills/top.md", "extra/lone.md"]
        );
        assert_eq!(rel(&pkg, &files.prompts), ["p/a.md", "p/deep/b.md"]);
        assert!(files.themes.is_empty());

        let bare = tmp.path().join("bare");
        write(&bare.join("prompts/x.md"), "");
        write(&bare.join("themes/dark.json"), "{}");
        let files = package_files(&bare, None).unwrap_or_default();
        assert_eq!(rel(&bare, &files.prompts), ["prompts/x.md"]);
        assert_eq!(rel(&bare, &files.themes), ["themes/dark.json"]);
        assert_eq!(package_files(&tmp.path().join("nothing"), None), None);
    }

    #[test]
    fn the_object_form_narrows_or_disables_each_kind() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let pkg = tmp.path().join("pkg");
        for name in ["a", "b", "c"] {
            write(&pkg.join("skills").join(name).join("SKILL.md"), "");
            write(&pkg.join("prompts").join(format!("{name}.md")), "");
        }
        let filter: Map<String, Value> = serde_json::from_str(
            r#"{"source": "x", "skills": ["skills/a", "*/c", "!**/c", "+skills/c"],
                "prompts": []}"#,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let files = package_files(&pkg, Some(&filter)).unwrap_or_default();
        assert_eq!(
            rel(&pkg, &files.skills),
            ["skills/a/SKILL.md", "skills/c/SKILL.md"]
        );
        assert!(files.prompts.is_empty());
    }

    #[test]
    fn packages_load_in_pis_order_command_line_first_settings_after_the_agent_directory() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let agent = tmp.path().join("agent");
        let cwd = tmp.path().join("proj");
        write(&agent.join("prompts/dup.md"), "from the agent directory");
        write(
            &agent.join("settings.json"),
            r#"{"packages": ["../listed"]}"#,
        );
        write(&tmp.path().join("listed/prompts/dup.md"), "listed");
        write(&tmp.path().join("listed/prompts/own.md"), "listed own");
        write(&cwd.join("cli/prompts/dup.md"), "from -e");
        write(&cwd.join("cli/prompts/cli-only.md"), "from -e too");
        let mut options = crate::ResourceOptions {
            extension_sources: vec!["./cli".into()],
            ..crate::ResourceOptions::default()
        };
        let load = |options: &crate::ResourceOptions| {
            crate::Resources::load(&agent, &cwd, options)
                .prompts
                .into_iter()
                .map(|p| (p.name, p.content.trim().to_string()))
                .collect::<Vec<_>>()
        };
        let pair = |a: &str, b: &str| (a.to_string(), b.to_string());
        assert_eq!(
            load(&options),
            [
                pair("cli-only", "from -e too"),
                pair("dup", "from -e"),
                pair("own", "listed own"),
            ]
        );
        options.extension_sources.clear();
        assert_eq!(
            load(&options),
            [
                pair("dup", "from the agent directory"),
                pair("own", "listed own")
            ]
        );
        // `--no-prompt-templates` keeps the command line's packages only.
        options.extension_sources = vec!["./cli".into()];
        options.no_prompt_templates = true;
        assert_eq!(load(&options).len(), 2);
    }

    #[test]
    fn settings_packages_are_listed_project_first_once_each() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let agent = tmp.path().join("agent");
        let cwd = tmp.path().join("proj");
        write(
            &agent.join("settings.json"),
            r#"{"packages": ["npm:kit@1.0.0", {"source": "../p", "skills": []}, 7]}"#,
        );
        write(
            &cwd.join(".pi/settings.json"),
            r#"{"packages": ["npm:kit@2.0.0"]}"#,
        );
        let listed = listed_packages(&agent, &cwd, true);
        let shown: Vec<(&str, &str)> = listed
            .iter()
            .map(|p| (p.source.as_str(), p.scope))
            .collect();
        assert_eq!(shown, [("npm:kit@2.0.0", "project"), ("../p", "user")]);
        assert!(listed[1].filter.is_some());
        assert_eq!(listed_packages(&agent, &cwd, false).len(), 2);
    }
}
