//! Which extensions a run loads, in what order, and how each is started (ext §1.1–1.3,
//! `docs/extensions.md` §1): `-e` entries first, then the project's auto directories (when the
//! project is trusted), then the user's; paths made canonical, the first occurrence kept.
//! pi packages load too when already on disk (settings `packages`, `-e npm:…`, `-e <package
//! folder>`); none is installed here (`tau install` does that: `crate::packages`).

use std::path::{Path, PathBuf};

use tau_resources::filter::{self, Filter};
use tau_resources::packages::{self, PackageSource};

/// How an entry is started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Launch {
    /// TypeScript or JavaScript: hosted by the Node host.
    Node,
    /// A program of its own: `program args…`.
    Program { program: PathBuf, args: Vec<String> },
}

/// One extension to load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Absolute path: the extension's identity (`extensionPath`).
    pub path: PathBuf,
    pub launch: Launch,
    /// `sourceInfo.source`: `cli`, `auto`, …
    pub source: &'static str,
    /// `sourceInfo.scope`: `temporary`, `project`, `user`.
    pub scope: &'static str,
    /// Set for an extension of a settings package: pi reports it with the package's source
    /// string, `origin: "package"` and the package's folder.
    pub package: Option<PackageOrigin>,
}

/// The package a settings-listed extension came from, as `sourceInfo` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackageOrigin {
    /// The source as the settings give it.
    pub source: String,
    /// The package's folder (`sourceInfo.baseDir`).
    pub base_dir: PathBuf,
}

/// Why an entry could not be resolved; the text follows ext §1.6.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Failed to load extension \"{path}\": {reason}")]
pub struct DiscoveryError {
    pub path: String,
    pub reason: String,
}

/// Where to look.
#[derive(Debug, Clone, Default)]
pub struct Sources {
    /// `-e` values, in flag order.
    pub cli: Vec<String>,
    /// `--no-extensions`: only `cli` entries.
    pub no_discovery: bool,
    pub cwd: PathBuf,
    pub agent_dir: PathBuf,
    /// Whether project-scoped extensions may load (ext §1.5; RPC mode has no trust dialog).
    pub project_trusted: bool,
}

const SCRIPT_SUFFIXES: [&str; 4] = [".ts", ".js", ".mjs", ".cjs"];

/// The entries to load, in load order.
pub fn discover(sources: &Sources) -> Result<Vec<Entry>, DiscoveryError> {
    let mut entries = Vec::new();
    for given in &sources.cli {
        let remote = PackageSource::parse(given);
        if !matches!(remote, PackageSource::Local(_)) {
            // pi would install it in a temporary folder; tau only uses pi's user install.
            let Some(dir) = remote
                .install_dir(&sources.agent_dir)
                .filter(|dir| dir.is_dir())
            else {
                return Err(DiscoveryError {
                    path: given.clone(),
                    reason: not_installed(given),
                });
            };
            entries.extend(
                package_entries(&dir, &Selection::All, "cli", "temporary").unwrap_or_default(),
            );
            continue;
        }
        let path = absolute(&sources.cwd, given);
        if !path.exists() {
            let shown = path.display().to_string();
            return Err(DiscoveryError {
                path: shown.clone(),
                reason: format!("Extension path does not exist: {shown}"),
            });
        }
        // A package folder gives what its manifest or resource folders name (nothing, for a
        // package of skills alone), as pi reads `-e <package>`; a tau extension folder is not
        // one.
        if path.is_dir()
            && !path.join("tau-extension.json").exists()
            && let Some(found) = package_entries(&path, &Selection::All, "cli", "temporary")
        {
            entries.extend(found);
            continue;
        }
        entries.extend(resolve_explicit(&path, "cli", "temporary")?);
    }
    if !sources.no_discovery {
        // pi's ranks (ext §1.3): project settings paths, project auto directories, user
        // settings paths, the user's auto directory. Each settings list's patterns filter its
        // own paths, and its `!glob`, `+path` and `-path` the auto directories of its scope.
        let mut discovered = Vec::new();
        let mut scope = |bases: &[PathBuf], autos: &[PathBuf], scope: &'static str| {
            let mut filters = Vec::new();
            for base in bases {
                let (listed, filter) = listed_in_settings(base, scope);
                discovered.extend(listed.into_iter().filter(|e| filter.keeps(&e.path, true)));
                filters.push(filter);
            }
            for auto in autos {
                discovered.extend(
                    scan_auto_dir(auto, scope)
                        .into_iter()
                        .filter(|e| filters.iter().all(|f| f.keeps(&e.path, false))),
                );
            }
        };
        if sources.project_trusted {
            let bases = [".pi", ".tau"].map(|d| sources.cwd.join(d));
            scope(
                &bases,
                &bases.clone().map(|b| b.join("extensions")),
                "project",
            );
        }
        let user = [sources.agent_dir.clone()];
        scope(&user, &[sources.agent_dir.join("extensions")], "user");
        // Packages rank last, the project's first; settings patterns do not reach them (pi).
        for package in listed_packages(sources) {
            discovered.extend(package.entries());
        }
        entries.extend(discovered);
    }
    let mut seen = std::collections::HashSet::new();
    entries.retain(|entry: &Entry| seen.insert(canonical(&entry.path)));
    for entry in &mut entries {
        entry.path = canonical(&entry.path);
    }
    Ok(entries)
}

/// The `extensions` list of `<base>/settings.json` (paths relative to `base`): each listed
/// path resolved to its entries, and the list's patterns (tools-resources §6) as a filter.
fn listed_in_settings(base: &Path, scope: &'static str) -> (Vec<Entry>, Filter) {
    let list = tau_resources::settings::array_in_file(&base.join("settings.json"), "extensions");
    let filter = Filter::new(base, &list);
    let mut entries = Vec::new();
    for item in list.iter().filter(|i| !filter::is_pattern(i)) {
        let path = absolute(base, item);
        if path.is_dir() {
            entries.extend(collect_dir(&path, "local", scope));
        } else if path.is_file() {
            entries.push(file_entry(&path, "local", scope));
        }
    }
    (entries, filter)
}

/// The warnings for packages the settings list but that are not installed (they are skipped).
/// None under `--no-extensions`, which loads no package.
pub fn package_warnings(sources: &Sources) -> Vec<String> {
    if sources.no_discovery {
        return Vec::new();
    }
    listed_packages(sources)
        .into_iter()
        // A missing local path is skipped silently, as pi does.
        .filter(|package| {
            !matches!(package.parsed, PackageSource::Local(_))
                && package
                    .parsed
                    .install_dir(&package.root)
                    .is_none_or(|dir| !dir.is_dir())
        })
        .map(|package| not_installed(&package.source))
        .collect()
}

fn not_installed(source: &str) -> String {
    format!(
        "Package {source} is not installed (tau installs nothing at start-up): run `tau install \
         {source}` (`-l` for the project's) or `pi install {source}`, or pass its folder with -e"
    )
}

/// What a `packages` item keeps of a package's extensions.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Selection {
    /// A plain source string.
    All,
    /// The object form without `extensions`.
    Object,
    /// The object form's `extensions` patterns; `[]` keeps none.
    Patterns(Vec<String>),
}

/// One item of a settings file's `packages`.
struct ListedPackage {
    source: String,
    parsed: PackageSource,
    selection: Selection,
    /// The settings file's folder, which a local path is relative to.
    base: PathBuf,
    /// Where npm and git sources are installed.
    root: PathBuf,
    scope: &'static str,
}

impl ListedPackage {
    /// Its entries; none when it is not installed (a local path that does not exist).
    fn entries(&self) -> Vec<Entry> {
        let mut entries = self.own_entries();
        let base_dir = match &self.parsed {
            PackageSource::Local(path) => {
                let path = absolute(&self.base, path);
                if path.is_file() {
                    path.parent().map(Path::to_path_buf).unwrap_or(path)
                } else {
                    path
                }
            }
            other => other.install_dir(&self.root).unwrap_or_default(),
        };
        for entry in &mut entries {
            entry.package = Some(PackageOrigin {
                source: self.source.clone(),
                base_dir: tau_base::paths::normalize(&base_dir),
            });
        }
        entries
    }

    fn own_entries(&self) -> Vec<Entry> {
        let (source, scope) = ("package", self.scope);
        let PackageSource::Local(path) = &self.parsed else {
            return self
                .parsed
                .install_dir(&self.root)
                .filter(|dir| dir.is_dir())
                .and_then(|dir| package_entries(&dir, &self.selection, source, scope))
                .unwrap_or_default();
        };
        let path = absolute(&self.base, path);
        if path.is_file() {
            vec![file_entry(&path, source, scope)]
        } else if path.is_dir() {
            // A folder that is no package loads as an extension itself.
            package_entries(&path, &self.selection, source, scope)
                .unwrap_or_else(|| resolve_dir(&path, source, scope))
        } else {
            Vec::new()
        }
    }
}

/// The `packages` of the trusted project's settings, then the user's, one item per package
/// (pi's `dedupePackages`: the first, so the project's, wins), as the resource loader lists
/// them, each with what it selects of its extensions.
fn listed_packages(sources: &Sources) -> Vec<ListedPackage> {
    packages::listed_packages(&sources.agent_dir, &sources.cwd, sources.project_trusted)
        .into_iter()
        .map(|package| {
            let selection = match &package.filter {
                None => Selection::All,
                Some(object) => match object.get("extensions").and_then(|e| e.as_array()) {
                    Some(list) => Selection::Patterns(strings(list)),
                    None => Selection::Object,
                },
            };
            ListedPackage {
                source: package.source,
                parsed: package.parsed,
                selection,
                base: package.base,
                root: package.root,
                scope: package.scope,
            }
        })
        .collect()
}

fn strings(list: &[serde_json::Value]) -> Vec<String> {
    list.iter()
        .filter_map(|item| item.as_str().map(str::to_string))
        .collect()
}

/// A package folder's extensions (pi's `collectPackageResources`): its `package.json`
/// `pi.extensions`, else its `extensions/` folder. `None` when a plain item names a folder
/// that is no package (no `pi` manifest and no resource folder).
fn package_entries(
    root: &Path,
    selection: &Selection,
    source: &'static str,
    scope: &'static str,
) -> Option<Vec<Entry>> {
    let manifest = read_manifest(&root.join("package.json"))
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
        .and_then(|mut package| package.get_mut("pi").map(serde_json::Value::take))
        .filter(|pi| !pi.is_null());
    let listed = manifest
        .as_ref()
        .and_then(|pi| pi.get("extensions"))
        .and_then(|e| e.as_array())
        .map(|list| strings(list));
    let from_manifest = |list: &[String]| manifest_entries(root, list, source, scope);
    let conventional = || collect_dir(&root.join("extensions"), source, scope);
    // pi's three paths differ on a manifest without (or with an empty) `extensions`.
    Some(match selection {
        Selection::All if manifest.is_some() => {
            listed.map(|l| from_manifest(&l)).unwrap_or_default()
        }
        Selection::All => {
            if !["extensions", "skills", "prompts", "themes"]
                .iter()
                .any(|dir| root.join(dir).exists())
            {
                return None;
            }
            conventional()
        }
        Selection::Object => listed.map_or_else(conventional, |l| from_manifest(&l)),
        Selection::Patterns(patterns) if patterns.is_empty() => Vec::new(),
        Selection::Patterns(patterns) => {
            let all = match listed {
                Some(list) if !list.is_empty() => from_manifest(&list),
                _ => conventional(),
            };
            packages::apply_patterns(all, patterns, root, |entry: &Entry| entry.path.as_path())
        }
    })
}

/// A manifest's list: paths and globs relative to the package, then its `!`, `+` and `-`
/// entries over what they gave.
fn manifest_entries(
    root: &Path,
    list: &[String],
    source: &'static str,
    scope: &'static str,
) -> Vec<Entry> {
    let (overrides, items): (Vec<String>, Vec<String>) = list
        .iter()
        .cloned()
        .partition(|item| item.starts_with(['!', '+', '-']));
    let mut entries = Vec::new();
    for item in &items {
        let paths = if item.contains(['*', '?']) {
            expand_glob(root, item)
        } else {
            vec![root.join(item.strip_prefix("./").unwrap_or(item))]
        };
        for path in paths {
            if path.is_file() {
                entries.push(file_entry(&path, source, scope));
            } else if path.is_dir() {
                entries.extend(collect_dir(&path, source, scope));
            }
        }
    }
    let filter = Filter::new(root, &overrides);
    entries.retain(|entry| filter.keeps(&entry.path, false));
    entries
}

/// The files and folders below `root` a manifest glob matches, in walk order; hidden names
/// never match (glob's `dot: false`).
fn expand_glob(root: &Path, pattern: &str) -> Vec<PathBuf> {
    let pattern = pattern.strip_prefix("./").unwrap_or(pattern);
    // Without `**` a match is exactly as deep as the pattern, which also keeps the filter's
    // file-name match from reaching deeper files.
    let depth = (!pattern.contains("**"))
        .then(|| pattern.split('/').filter(|part| !part.is_empty()).count());
    let filter = Filter::new(root, &[pattern.to_string()]);
    let mut found = Vec::new();
    walk(root, 1, depth, &filter, &mut found);
    found
}

fn walk(dir: &Path, level: usize, depth: Option<usize>, filter: &Filter, found: &mut Vec<PathBuf>) {
    let Ok(read) = std::fs::read_dir(dir) else {
        return;
    };
    let mut children: Vec<std::fs::DirEntry> = read
        .filter_map(Result::ok)
        .filter(|child| !child.file_name().to_string_lossy().starts_with('.'))
        .collect();
    children.sort_by_key(std::fs::DirEntry::file_name);
    for child in children {
        let path = child.path();
        if depth.is_none_or(|d| d == level) && filter.keeps(&path, true) {
            found.push(path.clone());
        }
        // `**` does not follow symbolic links to folders (glob's default): no cycles.
        let descend = match depth {
            Some(d) => level < d && path.is_dir(),
            None => child.file_type().is_ok_and(|t| t.is_dir()),
        };
        if descend {
            walk(&path, level + 1, depth, filter, found);
        }
    }
}

fn absolute(cwd: &Path, given: &str) -> PathBuf {
    let expanded = match given.strip_prefix("~/") {
        Some(rest) => std::env::var_os("HOME")
            .map_or_else(|| PathBuf::from(given), |h| PathBuf::from(h).join(rest)),
        None => PathBuf::from(given),
    };
    if expanded.is_absolute() {
        expanded
    } else {
        cwd.join(expanded)
    }
}

fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

fn is_script(path: &Path) -> bool {
    let name = path.to_string_lossy();
    SCRIPT_SUFFIXES.iter().any(|s| name.ends_with(s))
}

/// An entry named explicitly: a file loads whatever its name, a directory resolves to what
/// it declares.
fn resolve_explicit(
    path: &Path,
    source: &'static str,
    scope: &'static str,
) -> Result<Vec<Entry>, DiscoveryError> {
    if path.is_dir() {
        let found = resolve_dir(path, source, scope);
        if found.is_empty() {
            let shown = path.display().to_string();
            return Err(DiscoveryError {
                path: shown.clone(),
                reason: format!("No extension entry found in {shown}"),
            });
        }
        return Ok(found);
    }
    Ok(vec![file_entry(path, source, scope)])
}

fn file_entry(path: &Path, source: &'static str, scope: &'static str) -> Entry {
    let launch = if is_script(path) {
        Launch::Node
    } else {
        Launch::Program {
            program: path.to_path_buf(),
            args: Vec::new(),
        }
    };
    Entry {
        path: path.to_path_buf(),
        launch,
        source,
        scope,
        package: None,
    }
}

/// A folder named as a source of extensions: what it declares, else its contents scanned like
/// an auto directory (ext §1.2, pi's `collectAutoExtensionEntries`).
fn collect_dir(dir: &Path, source: &'static str, scope: &'static str) -> Vec<Entry> {
    let found = resolve_dir(dir, source, scope);
    if !found.is_empty() {
        return found;
    }
    scan_auto_dir(dir, scope)
        .into_iter()
        .map(|mut entry| {
            entry.source = source;
            entry
        })
        .collect()
}

/// A directory: `tau-extension.json`'s command, else `package.json` `pi.extensions`, else
/// `index.ts`, else `index.js` (ext §1.2).
fn resolve_dir(dir: &Path, source: &'static str, scope: &'static str) -> Vec<Entry> {
    if let Some(entry) = tau_manifest(dir, source, scope) {
        return vec![entry];
    }
    if let Some(text) = read_manifest(&dir.join("package.json"))
        && let Ok(package) = serde_json::from_str::<serde_json::Value>(&text)
        && let Some(list) = package
            .get("pi")
            .and_then(|pi| pi.get("extensions"))
            .and_then(|e| e.as_array())
    {
        let found: Vec<Entry> = list
            .iter()
            .filter_map(|item| item.as_str())
            .map(|item| dir.join(item))
            .filter(|path| path.is_file())
            .map(|path| file_entry(&path, source, scope))
            .collect();
        if !found.is_empty() {
            return found;
        }
    }
    ["index.ts", "index.js"]
        .iter()
        .map(|name| dir.join(name))
        .find(|path| path.is_file())
        .map(|path| vec![file_entry(&path, source, scope)])
        .unwrap_or_default()
}

/// A manifest's text (`package.json`, `tau-extension.json`), or `None` when there is none
/// to use. An extension's folder may be the project's, which decides what sits there: a
/// FIFO or a device is not opened and a file over [`CONFIG_CAP`] not read, and either is
/// named; a missing or unreadable manifest is no manifest, as before.
///
/// [`CONFIG_CAP`]: tau_base::bounded::CONFIG_CAP
fn read_manifest(path: &Path) -> Option<String> {
    use tau_base::bounded::BoundedReadError;
    match tau_base::bounded::read_to_string(path, tau_base::bounded::CONFIG_CAP) {
        Ok(text) => Some(text),
        Err(e @ (BoundedReadError::NotRegular { .. } | BoundedReadError::TooLarge { .. })) => {
            tracing::warn!("ignoring {}: {e}", path.display());
            None
        }
        Err(_) => None,
    }
}

/// `tau-extension.json`: `{"command": ["python3", "main.py"]}`, relative to the directory.
fn tau_manifest(dir: &Path, source: &'static str, scope: &'static str) -> Option<Entry> {
    let text = read_manifest(&dir.join("tau-extension.json"))?;
    let manifest: serde_json::Value = serde_json::from_str(&text).ok()?;
    let command: Vec<String> = manifest
        .get("command")?
        .as_array()?
        .iter()
        .filter_map(|part| part.as_str().map(str::to_string))
        .collect();
    let (program, args) = command.split_first()?;
    // The process runs in the project's folder, so a relative path left as it is would name
    // the project's file (a hostile repository's `main.py`), not the extension's.
    let dir = canonical(dir);
    let program = if program.contains('/') {
        dir.join(program)
    } else {
        PathBuf::from(program)
    };
    let args = args.iter().map(|arg| command_arg(&dir, arg)).collect();
    Some(Entry {
        path: dir,
        launch: Launch::Program { program, args },
        source,
        scope,
        package: None,
    })
}

/// An argument of a `tau-extension.json` command: a relative path naming something that
/// exists in the extension's folder becomes that absolute path; flags, absolute paths and
/// other text stay as written.
fn command_arg(dir: &Path, arg: &str) -> String {
    if arg.is_empty() || arg.starts_with('-') || Path::new(arg).is_absolute() {
        return arg.to_string();
    }
    let path = dir.join(arg);
    if path.exists() {
        // A folder whose name is not UTF-8 gives a path that names nothing: the start fails,
        // which is safer than falling back to the project's file.
        path.to_string_lossy().into_owned()
    } else {
        arg.to_string()
    }
}

/// An auto directory: its `.ts`/`.js` files and resolvable subdirectories, one level deep,
/// byte-wise by name; hidden names and `node_modules` skipped.
fn scan_auto_dir(dir: &Path, scope: &'static str) -> Vec<Entry> {
    let Ok(read) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut children: Vec<PathBuf> = read.filter_map(|e| e.ok().map(|e| e.path())).collect();
    children.sort_by(|a, b| a.file_name().cmp(&b.file_name()));
    let mut entries = Vec::new();
    for child in children {
        let name = child
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if name.starts_with('.') || name == "node_modules" {
            continue;
        }
        if child.is_dir() {
            entries.extend(resolve_dir(&child, "auto", scope));
        } else if name.ends_with(".ts") || name.ends_with(".js") {
            entries.push(file_entry(&child, "auto", scope));
        }
    }
    entries
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap_or_else(|e| panic!("{e}"));
        }
        std::fs::write(path, text).unwrap_or_else(|e| panic!("{e}"));
    }

    #[test]
    fn cli_first_then_trusted_project_then_user_without_duplicates() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let cwd = tmp.path().join("project");
        let agent = tmp.path().join("agent");
        write(&cwd.join(".pi/extensions/b.ts"), "");
        write(&cwd.join(".pi/extensions/.hidden.ts"), "");
        write(&agent.join("extensions/a.js"), "");
        write(&agent.join("extensions/notes.md"), "");
        write(&agent.join("extensions/pkg/index.ts"), "");
        write(
            &agent.join("extensions/py/tau-extension.json"),
            r#"{"command":["python3","main.py"]}"#,
        );
        write(&tmp.path().join("tool.py"), "");
        let mut sources = Sources {
            cli: vec!["../tool.py".into(), "../agent/extensions/a.js".into()],
            cwd: cwd.clone(),
            agent_dir: agent.clone(),
            project_trusted: false,
            ..Sources::default()
        };
        std::fs::create_dir_all(&cwd).unwrap_or_else(|e| panic!("{e}"));
        let names = |entries: Vec<Entry>| -> Vec<String> {
            entries
                .iter()
                .map(|e| {
                    e.path
                        .strip_prefix(canonical(tmp.path()))
                        .map(|p| p.display().to_string())
                        .unwrap_or_default()
                })
                .collect()
        };
        let untrusted = discover(&sources).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(untrusted[0].source, "cli");
        assert!(matches!(untrusted[0].launch, Launch::Program { .. }));
        assert_eq!(untrusted[1].launch, Launch::Node);
        assert_eq!(
            names(untrusted),
            [
                "tool.py",
                "agent/extensions/a.js",
                "agent/extensions/pkg/index.ts",
                "agent/extensions/py"
            ]
        );
        sources.project_trusted = true;
        let trusted = names(discover(&sources).unwrap_or_else(|e| panic!("{e}")));
        assert_eq!(trusted[2], "project/.pi/extensions/b.ts");
        sources.no_discovery = true;
        assert_eq!(
            names(discover(&sources).unwrap_or_else(|e| panic!("{e}"))).len(),
            2
        );
    }

    #[test]
    fn a_manifest_command_names_the_extensions_own_files() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let dir = canonical(tmp.path()).join("py");
        write(&dir.join("main.py"), "");
        write(&dir.join("src/ext.py"), "");
        write(
            &dir.join("tau-extension.json"),
            r#"{"command":["python3","-u","main.py","src/ext.py","missing.py","/abs/x.py",""]}"#,
        );
        let entry = tau_manifest(&dir, "auto", "user").unwrap_or_else(|| panic!("no entry"));
        let in_dir = |p: &str| dir.join(p).display().to_string();
        assert_eq!(
            entry.launch,
            Launch::Program {
                program: PathBuf::from("python3"),
                args: vec![
                    "-u".into(),
                    in_dir("main.py"),
                    in_dir("src/ext.py"),
                    "missing.py".into(),
                    "/abs/x.py".into(),
                    String::new(),
                ],
            }
        );
        write(
            &dir.join("tau-extension.json"),
            r#"{"command":["./run.sh","."]}"#,
        );
        let entry = tau_manifest(&dir, "auto", "user").unwrap_or_else(|| panic!("no entry"));
        assert_eq!(
            entry.launch,
            Launch::Program {
                program: dir.join("./run.sh"),
                args: vec![in_dir(".")],
            }
        );
    }

    #[test]
    fn planted_manifests_are_refused_without_waiting() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let dir = canonical(tmp.path()).join("ext");
        write(&dir.join("index.ts"), "");
        let status = std::process::Command::new("mkfifo")
            .arg(dir.join("tau-extension.json"))
            .status()
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(status.success());
        std::os::unix::fs::symlink("/dev/zero", dir.join("package.json"))
            .unwrap_or_else(|e| panic!("{e}"));
        // Neither manifest is read: the folder falls back to its `index.ts`.
        let entries = resolve_dir(&dir, "auto", "user");
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].launch, Launch::Node);
        // Read as a package, the folder has no manifest and no resource folder: no package.
        assert!(package_entries(&dir, &Selection::All, "auto", "user").is_none());
    }

    #[test]
    fn settings_lists_come_before_auto_directories_and_can_exclude() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let cwd = tmp.path().join("project");
        let agent = tmp.path().join("agent");
        write(&agent.join("extensions/auto.ts"), "");
        write(&agent.join("extensions/unwanted.ts"), "");
        write(&agent.join("mine/listed.py"), "");
        write(
            &agent.join("settings.json"),
            r#"{"extensions": ["mine/listed.py", "-extensions/unwanted.ts", "missing.ts", "!x/*"]}"#,
        );
        write(
            &cwd.join(".pi/settings.json"),
            r#"{"extensions": ["tools/p.ts"]}"#,
        );
        write(&cwd.join(".pi/tools/p.ts"), "");
        let sources = Sources {
            cwd: cwd.clone(),
            agent_dir: agent.clone(),
            project_trusted: true,
            ..Sources::default()
        };
        let found = discover(&sources).unwrap_or_else(|e| panic!("{e}"));
        let names: Vec<String> = found
            .iter()
            .map(|e| {
                e.path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default()
            })
            .collect();
        assert_eq!(names, ["p.ts", "listed.py", "auto.ts"]);
        assert_eq!((found[0].source, found[0].scope), ("local", "project"));
        assert_eq!((found[1].source, found[1].scope), ("local", "user"));
    }

    #[test]
    fn settings_patterns_narrow_listed_folders_and_filter_auto_directories() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let agent = tmp.path().join("agent");
        for name in ["keep.ts", "also.ts", "skip.ts", "notes.js"] {
            write(&agent.join("bundle").join(name), "");
        }
        for name in ["auto.ts", "off.ts", "hidden-by-glob.ts"] {
            write(&agent.join("extensions").join(name), "");
        }
        // A plain glob narrows what the listed folder gives; `!glob` and `-path` also reach
        // the auto directory, and `+path` brings one file back.
        write(
            &agent.join("settings.json"),
            r#"{"extensions": ["bundle", "bundle/*.ts", "!**/skip.ts", "!**/hidden-*",
                "-extensions/off.ts", "+bundle/skip.ts"]}"#,
        );
        let sources = Sources {
            cwd: tmp.path().to_path_buf(),
            agent_dir: agent.clone(),
            ..Sources::default()
        };
        let found = discover(&sources).unwrap_or_else(|e| panic!("{e}"));
        let names: Vec<String> = found
            .iter()
            .map(|e| {
                e.path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default()
            })
            .collect();
        assert_eq!(names, ["also.ts", "keep.ts", "skip.ts", "auto.ts"]);
    }

    /// Paths below `root`, canonical on both sides (a temporary folder may be a symlink).
    fn below(root: &Path, entries: &[Entry]) -> Vec<String> {
        entries
            .iter()
            .map(|e| {
                e.path
                    .strip_prefix(canonical(root))
                    .map(|p| p.display().to_string())
                    .unwrap_or_else(|_| e.path.display().to_string())
            })
            .collect()
    }

    #[test]
    fn installed_packages_load_last_project_first_as_package_entries() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let cwd = tmp.path().join("project");
        let agent = tmp.path().join("agent");
        write(&agent.join("extensions/auto.ts"), "");
        write(&cwd.join(".pi/extensions/proj.ts"), "");
        // A scoped npm package without a manifest: its `extensions/` folder.
        let npm = agent.join("npm/node_modules/@scope/pkg");
        write(&npm.join("package.json"), r#"{"name": "@scope/pkg"}"#);
        write(&npm.join("extensions/one.ts"), "");
        write(&npm.join("extensions/sub/index.ts"), "");
        write(&agent.join("git/github.com/user/repo/extensions/g.ts"), "");
        write(
            &cwd.join(".pi/git/gitlab.com/team/tool/extensions/t.js"),
            "",
        );
        write(&agent.join("mine/index.ts"), "");
        write(
            &agent.join("settings.json"),
            r#"{"packages": ["npm:@scope/pkg@1.2.3", "https://github.com/user/repo.git",
                "./mine", "npm:@scope/pkg"]}"#,
        );
        write(
            &cwd.join(".pi/settings.json"),
            r#"{"packages": ["git:gitlab.com/team/tool@v2"]}"#,
        );
        let mut sources = Sources {
            cwd: cwd.clone(),
            agent_dir: agent.clone(),
            project_trusted: true,
            ..Sources::default()
        };
        let found = discover(&sources).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            below(tmp.path(), &found),
            [
                "project/.pi/extensions/proj.ts",
                "agent/extensions/auto.ts",
                "project/.pi/git/gitlab.com/team/tool/extensions/t.js",
                "agent/npm/node_modules/@scope/pkg/extensions/one.ts",
                "agent/npm/node_modules/@scope/pkg/extensions/sub/index.ts",
                "agent/git/github.com/user/repo/extensions/g.ts",
                "agent/mine/index.ts",
            ]
        );
        let tags: Vec<(&str, &str)> = found.iter().map(|e| (e.source, e.scope)).collect();
        assert_eq!(tags[2], ("package", "project"));
        assert!(tags[3..].iter().all(|t| *t == ("package", "user")));
        assert!(package_warnings(&sources).is_empty());
        // An untrusted project's packages stay out; `--no-extensions` drops them all.
        sources.project_trusted = false;
        assert_eq!(
            discover(&sources).unwrap_or_else(|e| panic!("{e}")).len(),
            5
        );
        sources.no_discovery = true;
        assert!(
            discover(&sources)
                .unwrap_or_else(|e| panic!("{e}"))
                .is_empty()
        );
    }

    #[test]
    fn a_package_manifest_lists_paths_globs_and_exclusions() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let agent = tmp.path().join("agent");
        let pkg = agent.join("npm/node_modules/kit");
        write(
            &pkg.join("package.json"),
            r#"{"pi": {"extensions": ["src/*.ts", "!src/old-*", "./tools", "lib/**/main.js"]}}"#,
        );
        for name in ["a.ts", "b.ts", "old-c.ts", "notes.md", "deep/d.ts"] {
            write(&pkg.join("src").join(name), "");
        }
        write(&pkg.join("tools/x.ts"), "");
        write(&pkg.join("lib/one/two/main.js"), "");
        // Ignored: a manifest takes the place of the conventional folder.
        write(&pkg.join("extensions/ignored.ts"), "");
        write(
            &agent.join("settings.json"),
            r#"{"packages": ["npm:kit@^2"]}"#,
        );
        let sources = Sources {
            cwd: tmp.path().to_path_buf(),
            agent_dir: agent.clone(),
            ..Sources::default()
        };
        let found = discover(&sources).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            below(&pkg, &found),
            ["src/a.ts", "src/b.ts", "tools/x.ts", "lib/one/two/main.js"]
        );
    }

    #[test]
    fn the_object_form_filters_or_disables_a_packages_extensions() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let agent = tmp.path().join("agent");
        for pkg in ["off", "some"] {
            for name in ["a.ts", "b.ts", "c.ts"] {
                write(
                    &agent
                        .join("npm/node_modules")
                        .join(pkg)
                        .join("extensions")
                        .join(name),
                    "",
                );
            }
        }
        write(
            &agent.join("settings.json"),
            r#"{"packages": [
                {"source": "npm:off", "extensions": []},
                {"source": "npm:some",
                 "extensions": ["extensions/a.ts", "*/c.ts", "!**/c.ts", "+extensions/c.ts"]}
            ]}"#,
        );
        let sources = Sources {
            cwd: tmp.path().to_path_buf(),
            agent_dir: agent.clone(),
            ..Sources::default()
        };
        let found = discover(&sources).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            below(&agent.join("npm/node_modules"), &found),
            ["some/extensions/a.ts", "some/extensions/c.ts"]
        );
    }

    #[test]
    fn a_package_not_installed_is_skipped_and_reported() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let agent = tmp.path().join("agent");
        write(&agent.join("extensions/auto.ts"), "");
        write(
            &agent.join("settings.json"),
            r#"{"packages": ["npm:absent@1.0.0", {"source": "git:github.com/u/gone"},
                "./no-such-dir"]}"#,
        );
        let mut sources = Sources {
            cwd: tmp.path().to_path_buf(),
            agent_dir: agent.clone(),
            ..Sources::default()
        };
        let found = discover(&sources).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(below(&agent, &found), ["extensions/auto.ts"]);
        assert_eq!(
            package_warnings(&sources),
            [
                "Package npm:absent@1.0.0 is not installed (tau installs nothing at start-up): \
                 run `tau install npm:absent@1.0.0` (`-l` for the project's) or `pi install \
                 npm:absent@1.0.0`, or pass its folder with -e",
                "Package git:github.com/u/gone is not installed (tau installs nothing at \
                 start-up): run `tau install git:github.com/u/gone` (`-l` for the project's) or \
                 `pi install git:github.com/u/gone`, or pass its folder with -e",
            ]
        );
        sources.no_discovery = true;
        assert!(package_warnings(&sources).is_empty());
    }

    #[test]
    fn cli_package_sources_load_when_installed_and_fail_otherwise() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let agent = tmp.path().join("agent");
        let pkg = agent.join("npm/node_modules/installed");
        write(
            &pkg.join("package.json"),
            r#"{"pi": {"extensions": ["main.ts"]}}"#,
        );
        write(&pkg.join("main.ts"), "");
        write(&agent.join("git/example.com/org/repo/extensions/r.ts"), "");
        let mut sources = Sources {
            cli: vec![
                "npm:installed".into(),
                "git:git@example.com:org/repo.git@main".into(),
            ],
            cwd: tmp.path().to_path_buf(),
            agent_dir: agent.clone(),
            no_discovery: true,
            ..Sources::default()
        };
        let found = discover(&sources).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            below(&agent, &found),
            [
                "npm/node_modules/installed/main.ts",
                "git/example.com/org/repo/extensions/r.ts"
            ]
        );
        assert_eq!((found[0].source, found[0].scope), ("cli", "temporary"));
        sources.cli = vec!["npm:missing".into()];
        let err = discover(&sources)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert_eq!(
            err,
            "Failed to load extension \"npm:missing\": Package npm:missing is not installed (tau \
             installs nothing at start-up): run `tau install npm:missing` (`-l` for the \
             project's) or `pi install npm:missing`, or pass its folder with -e"
        );
    }

    #[test]
    fn package_sources_map_to_pis_install_folders() {
        let root = Path::new("/r");
        let dir = |source: &str| PackageSource::parse(source).install_dir(root);
        let npm = |rest: &str| Some(root.join("npm/node_modules").join(rest));
        let git = |rest: &str| Some(root.join("git").join(rest));
        assert_eq!(dir("npm:@scope/pkg@1.2.3"), npm("@scope/pkg"));
        assert_eq!(dir("npm:pkg@latest"), npm("pkg"));
        assert_eq!(dir("npm:@scope/pkg"), npm("@scope/pkg"));
        assert_eq!(dir("git:github.com/u/r@v1"), git("github.com/u/r"));
        assert_eq!(dir("git:u/r"), git("github.com/u/r"));
        assert_eq!(dir("https://github.com/u/r.git"), git("github.com/u/r"));
        assert_eq!(
            dir("https://Host.example:8443/g/sub/r@abc"),
            git("host.example/g/sub/r")
        );
        assert_eq!(dir("ssh://git@host.example/u/r"), git("host.example/u/r"));
        // Without `git:` pi reads an scp-style address as a local path.
        assert_eq!(dir("git@github.com:u/r.git"), None);
        assert_eq!(dir("git:git@github.com:u/r@main"), git("github.com/u/r"));
        // Local paths, and git sources that would leave the install folder, install nowhere.
        assert_eq!(dir("./pkgs/x"), None);
        assert_eq!(dir("git:host.example/../../etc"), None);
        assert_eq!(dir("npm:../x"), None);
    }

    #[test]
    fn a_missing_cli_path_is_pis_load_error() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let sources = Sources {
            cli: vec!["nope.ts".into()],
            cwd: tmp.path().to_path_buf(),
            agent_dir: tmp.path().join("agent"),
            ..Sources::default()
        };
        let err = discover(&sources)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        let missing = tmp.path().join("nope.ts").display().to_string();
        assert_eq!(
            err,
            format!(
                "Failed to load extension \"{missing}\": Extension path does not exist: {missing}"
            )
        );
    }
}
