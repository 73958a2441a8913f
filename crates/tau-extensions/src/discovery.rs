//! Which extensions a run loads, in what order, and how each is started (ext §1.1–1.3,
//! `docs/extensions.md` §1): `-e` entries first, then the project's auto directories (when the
//! project is trusted), then the user's; paths made canonical, the first occurrence kept.

use std::path::{Path, PathBuf};

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
        let path = absolute(&sources.cwd, given);
        if !path.exists() {
            let shown = path.display().to_string();
            return Err(DiscoveryError {
                path: shown.clone(),
                reason: format!("Extension path does not exist: {shown}"),
            });
        }
        entries.extend(resolve_explicit(&path, "cli", "temporary")?);
    }
    if !sources.no_discovery {
        // pi's ranks (ext §1.3): project settings paths, project auto directories, user
        // settings paths, the user's auto directory. `-path` in a settings list keeps an
        // auto-discovered entry out.
        let mut excluded = Vec::new();
        let mut discovered = Vec::new();
        if sources.project_trusted {
            for dir in [".pi", ".tau"] {
                let base = sources.cwd.join(dir);
                discovered.extend(listed_in_settings(&base, "project", &mut excluded));
            }
            for dir in [".pi", ".tau"] {
                let auto = sources.cwd.join(dir).join("extensions");
                discovered.extend(scan_auto_dir(&auto, "project"));
            }
        }
        discovered.extend(listed_in_settings(
            &sources.agent_dir,
            "user",
            &mut excluded,
        ));
        discovered.extend(scan_auto_dir(&sources.agent_dir.join("extensions"), "user"));
        discovered
            .retain(|entry| entry.source != "auto" || !excluded.contains(&canonical(&entry.path)));
        entries.extend(discovered);
    }
    let mut seen = std::collections::HashSet::new();
    entries.retain(|entry: &Entry| seen.insert(canonical(&entry.path)));
    for entry in &mut entries {
        entry.path = canonical(&entry.path);
    }
    Ok(entries)
}

/// The `extensions` list of `<base>/settings.json` (paths relative to `base`): each existing
/// path resolved as an entry, `-path` noted in `excluded`, `+path` forced in; a `!glob`
/// (pi's exclusion pattern over the same scope) and other globs are not expanded here.
fn listed_in_settings(base: &Path, scope: &'static str, excluded: &mut Vec<PathBuf>) -> Vec<Entry> {
    let Ok(text) = std::fs::read_to_string(base.join("settings.json")) else {
        return Vec::new();
    };
    let Ok(settings) = serde_json::from_str::<serde_json::Value>(&text) else {
        // The settings loader reports a malformed file.
        return Vec::new();
    };
    let Some(list) = settings.get("extensions").and_then(|e| e.as_array()) else {
        return Vec::new();
    };
    let mut entries = Vec::new();
    for item in list.iter().filter_map(|i| i.as_str()) {
        if let Some(path) = item.strip_prefix('-') {
            excluded.push(canonical(&absolute(base, path)));
            continue;
        }
        let item = item.strip_prefix('+').unwrap_or(item);
        if item.starts_with('!') || item.contains('*') {
            continue;
        }
        let path = absolute(base, item);
        if path.is_dir() {
            entries.extend(resolve_dir(&path, "local", scope));
        } else if path.is_file() {
            entries.push(file_entry(&path, "local", scope));
        }
    }
    entries
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
    }
}

/// A directory: `tau-extension.json`'s command, else `package.json` `pi.extensions`, else
/// `index.ts`, else `index.js` (ext §1.2).
fn resolve_dir(dir: &Path, source: &'static str, scope: &'static str) -> Vec<Entry> {
    if let Some(entry) = tau_manifest(dir, source, scope) {
        return vec![entry];
    }
    if let Ok(text) = std::fs::read_to_string(dir.join("package.json"))
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

/// `tau-extension.json`: `{"command": ["python3", "main.py"]}`, relative to the directory.
fn tau_manifest(dir: &Path, source: &'static str, scope: &'static str) -> Option<Entry> {
    let text = std::fs::read_to_string(dir.join("tau-extension.json")).ok()?;
    let manifest: serde_json::Value = serde_json::from_str(&text).ok()?;
    let command: Vec<String> = manifest
        .get("command")?
        .as_array()?
        .iter()
        .filter_map(|part| part.as_str().map(str::to_string))
        .collect();
    let (program, args) = command.split_first()?;
    let program = if program.contains('/') {
        dir.join(program)
    } else {
        PathBuf::from(program)
    };
    Some(Entry {
        path: dir.to_path_buf(),
        launch: Launch::Program {
            program,
            args: args.to_vec(),
        },
        source,
        scope,
    })
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
