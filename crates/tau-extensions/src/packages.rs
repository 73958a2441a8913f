//! Installing pi packages (`tau install`, `remove`, `update`, `list`) where pi 0.79 installs
//! them, so both agents share them: npm packages under `<root>/npm` (a private npm project,
//! `npm install <spec> --prefix <root>/npm --legacy-peer-deps`), git packages cloned to
//! `<root>/git/<host>/<path>`, local paths only recorded; `<root>` is the agent directory, or
//! the project's `.pi` folder for `-l`. The settings' `packages` list changes in pi's format,
//! only after the install succeeded, atomically; a failed install removes what it created.
//! npm and git write their output to stderr, so stdout carries only the caller's messages.

use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;
use tau_resources::packages::{PackageSource, resolve_local};

/// Which settings and install folder a command acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The agent directory's settings and folders.
    User,
    /// The project's `.pi/settings.json` and `.pi/` folders (trusted projects only).
    Project,
}

impl Scope {
    fn name(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Project => "project",
        }
    }
}

/// Why a package command failed; the text is what the user reads.
#[derive(Debug, thiserror::Error)]
pub enum PackageError {
    #[error("Path does not exist: {0}")]
    MissingPath(String),
    #[error("Unsupported source: {0}")]
    Unsupported(String),
    #[error("Project is not trusted; refusing to access project package storage")]
    Untrusted,
    #[error("{command} failed with exit code {code}")]
    Failed { command: String, code: String },
    #[error("cannot run {command}: {reason}")]
    Spawn { command: String, reason: String },
    #[error("{0}")]
    NoMatch(String),
    #[error("Invalid npmCommand: first array entry must be a non-empty command")]
    InvalidNpmCommand,
    #[error("{0}")]
    Io(String),
    #[error("settings not changed: {0}")]
    Settings(String),
}

/// A package as `list` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Configured {
    pub source: String,
    pub scope: Scope,
    /// The object form (resource filters) rather than a plain source.
    pub filtered: bool,
    pub installed_path: Option<PathBuf>,
}

/// The package manager of one working directory.
#[derive(Debug, Clone)]
pub struct Manager {
    pub agent_dir: PathBuf,
    pub cwd: PathBuf,
    pub project_trusted: bool,
    /// The `npmCommand` setting (empty: `npm`).
    pub npm_command: Vec<String>,
    /// `PI_OFFLINE`: `update` does nothing, as in pi.
    pub offline: bool,
}

impl Manager {
    /// Installs `source` and adds it to the scope's settings; the settings are written only
    /// once the install succeeded. `progress` hears pi's "Installing …" line.
    pub fn install(
        &self,
        source: &str,
        scope: Scope,
        progress: &mut dyn FnMut(&str),
    ) -> Result<(), PackageError> {
        self.check_scope(scope)?;
        let parsed = PackageSource::parse(source);
        let settings = self.settings_file(scope);
        // A settings file that cannot be written must stop the install before it starts.
        let packages = read_packages(&settings)?;
        progress(&format!("Installing {source}..."));
        match &parsed {
            PackageSource::Npm { spec, .. } => {
                self.install_npm(std::slice::from_ref(spec), scope)?
            }
            PackageSource::Git { .. } => self.install_git(&parsed, scope)?,
            PackageSource::Local(path) => {
                let resolved = resolve_local(&self.cwd, path);
                if !resolved.exists() {
                    return Err(PackageError::MissingPath(resolved.display().to_string()));
                }
            }
        }
        let normalized = self.normalize_for_settings(source, scope);
        let input = self.input_key(source);
        let mut next = packages.clone();
        match next
            .iter()
            .position(|item| self.settings_key(item_source(item), scope) == input)
        {
            Some(index) if item_source(&next[index]) == normalized => return Ok(()),
            Some(index) => match &mut next[index] {
                Value::Object(object) => {
                    object.insert("source".into(), Value::String(normalized));
                }
                item => *item = Value::String(normalized),
            },
            None => next.push(Value::String(normalized)),
        }
        write_packages(&settings, next)
    }

    /// Uninstalls `source` and takes it out of the scope's settings; `false` when the settings
    /// did not list it (pi's "No matching package").
    pub fn remove(
        &self,
        source: &str,
        scope: Scope,
        progress: &mut dyn FnMut(&str),
    ) -> Result<bool, PackageError> {
        self.check_scope(scope)?;
        let settings = self.settings_file(scope);
        let packages = read_packages(&settings)?;
        progress(&format!("Removing {source}..."));
        let parsed = PackageSource::parse(source);
        let root = self.root(scope);
        match &parsed {
            PackageSource::Npm { name, .. } => {
                let install_root = root.join("npm");
                if install_root.exists() {
                    let prefix = if self.manager_name() == "bun" {
                        "--cwd"
                    } else {
                        "--prefix"
                    };
                    let args = vec![
                        "uninstall".to_string(),
                        name.clone(),
                        prefix.into(),
                        path_arg(&install_root),
                    ];
                    self.run_npm(&args, None)?;
                }
            }
            PackageSource::Git { .. } => {
                if let Some(dir) = parsed.install_dir(&root)
                    && dir.exists()
                {
                    std::fs::remove_dir_all(&dir).map_err(|e| {
                        PackageError::Io(format!("cannot remove {}: {e}", dir.display()))
                    })?;
                    prune_empty_parents(&dir, &root.join("git"));
                }
            }
            PackageSource::Local(_) => {}
        }
        let input = self.input_key(source);
        let next: Vec<Value> = packages
            .iter()
            .filter(|item| self.settings_key(item_source(item), scope) != input)
            .cloned()
            .collect();
        if next.len() == packages.len() {
            return Ok(false);
        }
        write_packages(&settings, next)?;
        Ok(true)
    }

    /// Updates every listed package (or the one `source` names): npm packages not pinned to
    /// an exact version are installed again at `latest` (or their range) when npm reports a
    /// newer version; git packages fetch and reset to their ref or upstream branch.
    pub fn update(
        &self,
        source: Option<&str>,
        progress: &mut dyn FnMut(&str),
    ) -> Result<(), PackageError> {
        let mut listed = Vec::new();
        for scope in [Scope::User, Scope::Project] {
            if scope == Scope::Project && !self.project_trusted {
                continue;
            }
            for item in read_packages(&self.settings_file(scope))? {
                listed.push((item_source(&item).to_string(), scope));
            }
        }
        if let Some(source) = source {
            let wanted = self.input_key(source);
            listed.retain(|(listed, scope)| self.settings_key(listed, *scope) == wanted);
            if listed.is_empty() {
                return Err(PackageError::NoMatch(format!(
                    "No matching package found for {source}"
                )));
            }
        }
        if self.offline {
            return Ok(());
        }
        for scope in [Scope::User, Scope::Project] {
            let mut specs = Vec::new();
            let mut labels = Vec::new();
            for (source, _) in listed.iter().filter(|(_, s)| *s == scope) {
                let parsed = PackageSource::parse(source);
                let PackageSource::Npm {
                    spec,
                    name,
                    version,
                } = &parsed
                else {
                    continue;
                };
                if parsed.pinned() || !self.npm_needs_update(&parsed, scope) {
                    continue;
                }
                specs.push(match version {
                    Some(_) => spec.clone(),
                    None => format!("{name}@latest"),
                });
                labels.push(source.clone());
            }
            if specs.is_empty() {
                continue;
            }
            progress(&match labels.as_slice() {
                [one] => format!("Updating {one}..."),
                _ => format!("Updating {} npm packages...", scope.name()),
            });
            self.install_npm(&specs, scope)?;
        }
        for (source, scope) in &listed {
            let parsed = PackageSource::parse(source);
            if matches!(parsed, PackageSource::Git { .. }) {
                progress(&format!("Updating {source}..."));
                self.update_git(&parsed, *scope)?;
            }
        }
        Ok(())
    }

    /// The packages of the user's settings, then the trusted project's.
    pub fn list(&self) -> Result<Vec<Configured>, PackageError> {
        let mut out = Vec::new();
        for scope in [Scope::User, Scope::Project] {
            if scope == Scope::Project && !self.project_trusted {
                continue;
            }
            for item in read_packages(&self.settings_file(scope))? {
                let source = item_source(&item).to_string();
                let installed_path = match PackageSource::parse(&source) {
                    PackageSource::Local(path) => Some(resolve_local(&self.base_dir(scope), &path)),
                    remote => remote.install_dir(&self.root(scope)),
                }
                .filter(|path| path.exists());
                out.push(Configured {
                    filtered: item.is_object(),
                    source,
                    scope,
                    installed_path,
                });
            }
        }
        Ok(out)
    }

    fn check_scope(&self, scope: Scope) -> Result<(), PackageError> {
        if scope == Scope::Project && !self.project_trusted {
            return Err(PackageError::Untrusted);
        }
        Ok(())
    }

    /// `<agentDir>` or `<cwd>/.pi`: where npm and git packages go.
    fn root(&self, scope: Scope) -> PathBuf {
        match scope {
            Scope::User => self.agent_dir.clone(),
            Scope::Project => self.cwd.join(".pi"),
        }
    }

    /// The folder a local path in the scope's settings is relative to.
    fn base_dir(&self, scope: Scope) -> PathBuf {
        self.root(scope)
    }

    fn settings_file(&self, scope: Scope) -> PathBuf {
        self.root(scope).join("settings.json")
    }

    /// What identifies a typed source: a local path against the working directory.
    fn input_key(&self, source: &str) -> String {
        PackageSource::parse(source).identity(&self.cwd)
    }

    /// What identifies a listed source: a local path against its settings file's folder.
    fn settings_key(&self, source: &str, scope: Scope) -> String {
        PackageSource::parse(source).identity(&self.base_dir(scope))
    }

    /// A local path as the settings keep it: relative to the settings file's folder.
    fn normalize_for_settings(&self, source: &str, scope: Scope) -> String {
        match PackageSource::parse(source) {
            PackageSource::Local(path) => {
                let resolved = resolve_local(&self.cwd, &path);
                let relative = relative_path(&self.base_dir(scope), &resolved);
                if relative.is_empty() {
                    ".".into()
                } else {
                    relative
                }
            }
            _ => source.to_string(),
        }
    }

    fn npm_program(&self) -> Result<(String, Vec<String>), PackageError> {
        match self.npm_command.split_first() {
            None => Ok(("npm".into(), Vec::new())),
            Some((program, _)) if program.is_empty() => Err(PackageError::InvalidNpmCommand),
            Some((program, args)) => Ok((program.clone(), args.to_vec())),
        }
    }

    /// `npm`, `pnpm` or `bun`: the command after a `--` in `npmCommand`, else its program.
    fn manager_name(&self) -> String {
        let parts: Vec<&str> = if self.npm_command.is_empty() {
            vec!["npm"]
        } else {
            self.npm_command.iter().map(String::as_str).collect()
        };
        let command = match parts.iter().rposition(|p| *p == "--") {
            Some(at) => parts.get(at + 1).copied().unwrap_or_default(),
            None => parts[0],
        };
        let base = Path::new(command)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let lower = base.to_ascii_lowercase();
        match lower
            .strip_suffix(".cmd")
            .or_else(|| lower.strip_suffix(".exe"))
        {
            Some(stem) => base[..stem.len()].to_string(),
            None => base,
        }
    }

    fn run_npm(&self, args: &[String], cwd: Option<&Path>) -> Result<(), PackageError> {
        let (program, mut full) = self.npm_program()?;
        full.extend(args.iter().cloned());
        run(&program, &full, cwd.unwrap_or(&self.cwd))
    }

    /// `specs` into the scope's npm project, with the arguments pi gives each package manager
    /// (host-provided peers are never installed).
    fn install_npm(&self, specs: &[String], scope: Scope) -> Result<(), PackageError> {
        let install_root = self.root(scope).join("npm");
        let created = !install_root.exists();
        let result = (|| {
            ensure_npm_project(&install_root)?;
            let root = path_arg(&install_root);
            let mut args = vec!["install".to_string()];
            args.extend(specs.iter().cloned());
            match self.manager_name().as_str() {
                "bun" => args.extend(["--cwd".into(), root, "--omit=peer".into()]),
                "pnpm" => args.extend([
                    "--prefix".into(),
                    root,
                    "--config.auto-install-peers=false".into(),
                    "--config.strict-peer-dependencies=false".into(),
                    "--config.strict-dep-builds=false".into(),
                ]),
                _ => args.extend(["--prefix".into(), root, "--legacy-peer-deps".into()]),
            }
            self.run_npm(&args, None)
        })();
        if result.is_err() && created {
            // Nothing of a first install that failed stays behind.
            let _ = std::fs::remove_dir_all(&install_root);
        }
        result
    }

    /// Whether npm knows a version other than the installed one (a failed lookup counts as
    /// yes, as in pi).
    fn npm_needs_update(&self, source: &PackageSource, scope: Scope) -> bool {
        let PackageSource::Npm {
            spec,
            name,
            version,
        } = source
        else {
            return false;
        };
        let Some(installed) = source
            .install_dir(&self.root(scope))
            .and_then(|dir| installed_version(&dir))
        else {
            return true;
        };
        let Ok((program, mut args)) = self.npm_program() else {
            return true;
        };
        let target = if version.is_some() { spec } else { name };
        args.extend([
            "view".into(),
            target.clone(),
            "version".into(),
            "--json".into(),
        ]);
        let Some(output) = capture(&program, &args, &self.cwd) else {
            return true;
        };
        match serde_json::from_str::<Value>(output.trim()) {
            Ok(Value::String(latest)) => latest != installed,
            // A range answers every matching version; the last is npm's highest.
            Ok(Value::Array(all)) => all.last().and_then(Value::as_str) != Some(installed.as_str()),
            _ => true,
        }
    }

    fn install_git(&self, source: &PackageSource, scope: Scope) -> Result<(), PackageError> {
        let PackageSource::Git {
            repo, reference, ..
        } = source
        else {
            return Err(PackageError::Unsupported(format!("{source:?}")));
        };
        let root = self.root(scope);
        let Some(target) = source.install_dir(&root) else {
            return Err(PackageError::Unsupported(repo.clone()));
        };
        if target.exists() {
            return self.update_git(source, scope);
        }
        let git_root = root.join("git");
        let created_root = !git_root.exists();
        ensure_git_ignore(&git_root)?;
        let result = (|| {
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent).map_err(|e| {
                    PackageError::Io(format!("cannot create {}: {e}", parent.display()))
                })?;
            }
            let target_arg = path_arg(&target);
            run(
                "git",
                &["clone".into(), repo.clone(), target_arg],
                &self.cwd,
            )?;
            if let Some(reference) = reference {
                run("git", &["checkout".into(), reference.clone()], &target)?;
            }
            if target.join("package.json").exists() {
                self.run_npm(&self.git_dependency_args(), Some(&target))?;
            }
            Ok(())
        })();
        if result.is_err() {
            // Nothing of a failed clone stays behind (git removes its own folder, not ours).
            if target.exists() {
                let _ = std::fs::remove_dir_all(&target);
            }
            prune_empty_parents(&target, &git_root);
            if created_root {
                let _ = std::fs::remove_dir_all(&git_root);
            }
        }
        result
    }

    /// pi installs a cloned package's dependencies without dev ones, unless `npmCommand` names
    /// another package manager.
    fn git_dependency_args(&self) -> Vec<String> {
        if self.npm_command.is_empty() {
            vec!["install".into(), "--omit=dev".into()]
        } else {
            vec!["install".into()]
        }
    }

    fn update_git(&self, source: &PackageSource, scope: Scope) -> Result<(), PackageError> {
        let PackageSource::Git { reference, .. } = source else {
            return Ok(());
        };
        let Some(target) = source.install_dir(&self.root(scope)) else {
            return Ok(());
        };
        if !target.exists() {
            return self.install_git(source, scope);
        }
        let (fetch, wanted) = match reference {
            Some(reference) => (
                vec!["fetch".into(), "origin".into(), reference.clone()],
                "FETCH_HEAD".to_string(),
            ),
            None => upstream_target(&target),
        };
        run("git", &fetch, &target)?;
        let head = capture("git", &["rev-parse".into(), "HEAD".into()], &target);
        let commit = format!("{wanted}^{{commit}}");
        let want = capture("git", &["rev-parse".into(), commit.clone()], &target);
        if head.is_some() && head == want {
            return Ok(());
        }
        run("git", &["reset".into(), "--hard".into(), commit], &target)?;
        run("git", &["clean".into(), "-fdx".into()], &target)?;
        if target.join("package.json").exists() {
            self.run_npm(&self.git_dependency_args(), Some(&target))?;
        }
        Ok(())
    }
}

/// The fetch that brings a clone's upstream branch up to date, and the ref it updates.
fn upstream_target(dir: &Path) -> (Vec<String>, String) {
    let fetch = |refspec: String| {
        vec![
            "fetch".into(),
            "--prune".into(),
            "--no-tags".into(),
            "origin".into(),
            refspec,
        ]
    };
    let upstream = capture(
        "git",
        &[
            "rev-parse".into(),
            "--abbrev-ref".into(),
            "@{upstream}".into(),
        ],
        dir,
    );
    if let Some(branch) = upstream
        .as_deref()
        .and_then(|u| u.trim().strip_prefix("origin/"))
        .filter(|b| !b.is_empty())
    {
        return (
            fetch(format!("+refs/heads/{branch}:refs/remotes/origin/{branch}")),
            "@{upstream}".into(),
        );
    }
    let _ = capture(
        "git",
        &[
            "remote".into(),
            "set-head".into(),
            "origin".into(),
            "-a".into(),
        ],
        dir,
    );
    let head = capture(
        "git",
        &["symbolic-ref".into(), "refs/remotes/origin/HEAD".into()],
        dir,
    );
    match head
        .as_deref()
        .and_then(|h| h.trim().strip_prefix("refs/remotes/origin/"))
        .filter(|b| !b.is_empty())
    {
        Some(branch) => (
            fetch(format!("+refs/heads/{branch}:refs/remotes/origin/{branch}")),
            "origin/HEAD".into(),
        ),
        None => (
            fetch("+HEAD:refs/remotes/origin/HEAD".into()),
            "origin/HEAD".into(),
        ),
    }
}

/// A settings item's source: the string, or the object form's `source`.
fn item_source(item: &Value) -> &str {
    match item {
        Value::String(source) => source,
        other => other.get("source").and_then(Value::as_str).unwrap_or(""),
    }
}

/// The `packages` of a settings file; a file that does not parse is an error, since writing
/// it would lose what it holds.
fn read_packages(file: &Path) -> Result<Vec<Value>, PackageError> {
    // A project's settings file may be a planted FIFO or device: refused, never waited on.
    let text = match tau_base::bounded::read_optional(file, tau_base::bounded::CONFIG_CAP) {
        Ok(Some(text)) => text,
        Ok(None) => return Ok(Vec::new()),
        Err(e) => return Err(PackageError::Settings(format!("cannot read {e}"))),
    };
    let doc: Value = serde_json::from_str(&text)
        .map_err(|e| PackageError::Settings(format!("cannot parse {}: {e}", file.display())))?;
    if !doc.is_object() {
        return Err(PackageError::Settings(format!(
            "{} is not a JSON object",
            file.display()
        )));
    }
    Ok(match doc.get("packages") {
        Some(Value::Array(items)) => items
            .iter()
            .filter(|item| item.is_string() || item.get("source").is_some_and(Value::is_string))
            .cloned()
            .collect(),
        _ => Vec::new(),
    })
}

fn write_packages(file: &Path, packages: Vec<Value>) -> Result<(), PackageError> {
    tau_resources::settings::write_key(file, "packages", Value::Array(packages))
        .map_err(PackageError::Settings)
}

/// `None` when unknown, which makes `update` reinstall the package: what a missing, broken or
/// refused (a FIFO, a device, over the cap) `package.json` leads to alike.
fn installed_version(dir: &Path) -> Option<String> {
    let text =
        tau_base::bounded::read_optional(&dir.join("package.json"), tau_base::bounded::CONFIG_CAP)
            .ok()??;
    let doc: Value = serde_json::from_str(&text).ok()?;
    doc.get("version")?.as_str().map(str::to_string)
}

/// pi's private npm project: a `package.json` that names nothing, and a `.gitignore` keeping
/// the folder out of a repository it may sit in.
fn ensure_npm_project(root: &Path) -> Result<(), PackageError> {
    ensure_git_ignore(root)?;
    let manifest = root.join("package.json");
    if !manifest.exists() {
        std::fs::write(
            &manifest,
            "{\n  \"name\": \"pi-extensions\",\n  \"private\": true\n}",
        )
        .map_err(|e| PackageError::Io(format!("cannot write {}: {e}", manifest.display())))?;
    }
    Ok(())
}

fn ensure_git_ignore(dir: &Path) -> Result<(), PackageError> {
    std::fs::create_dir_all(dir)
        .map_err(|e| PackageError::Io(format!("cannot create {}: {e}", dir.display())))?;
    let ignore = dir.join(".gitignore");
    if !ignore.exists() {
        std::fs::write(&ignore, "*\n!.gitignore\n")
            .map_err(|e| PackageError::Io(format!("cannot write {}: {e}", ignore.display())))?;
    }
    Ok(())
}

/// Removes the folders left empty between a removed clone and the install root.
fn prune_empty_parents(removed: &Path, root: &Path) {
    let mut current = removed.parent();
    while let Some(dir) = current {
        if !dir.starts_with(root) || dir == root {
            break;
        }
        if std::fs::remove_dir(dir).is_err() && dir.exists() {
            break;
        }
        current = dir.parent();
    }
}

fn path_arg(path: &Path) -> String {
    path.display().to_string()
}

/// `target` relative to `base` (both absolute), with `..` where it leaves `base`.
fn relative_path(base: &Path, target: &Path) -> String {
    let (base, target) = (
        tau_base::paths::normalize(base),
        tau_base::paths::normalize(target),
    );
    let base: Vec<Component> = base.components().collect();
    let target: Vec<Component> = target.components().collect();
    let common = base.iter().zip(&target).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<String> = vec!["..".into(); base.len() - common];
    parts.extend(
        target[common..]
            .iter()
            .map(|c| c.as_os_str().to_string_lossy().into_owned()),
    );
    parts.join("/")
}

/// Runs a command to its end with its output on stderr (pi's choice when stdout is taken).
fn run(program: &str, args: &[String], cwd: &Path) -> Result<(), PackageError> {
    let shown = std::iter::once(program)
        .chain(args.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join(" ");
    let stderr = || {
        std::io::stderr()
            .as_fd_owned()
            .map_or_else(|_| Stdio::inherit(), Stdio::from)
    };
    let status = Command::new(program)
        .args(args)
        .current_dir(cwd)
        .stdout(stderr())
        .stderr(Stdio::inherit())
        .status()
        .map_err(|e| PackageError::Spawn {
            command: program.to_string(),
            reason: e.to_string(),
        })?;
    if status.success() {
        return Ok(());
    }
    Err(PackageError::Failed {
        command: shown,
        code: status
            .code()
            .map_or_else(|| "none (killed by a signal)".into(), |c| c.to_string()),
    })
}

/// A command's stdout when it succeeds (no terminal prompt for credentials).
fn capture(program: &str, args: &[String], cwd: &Path) -> Option<String> {
    let output = Command::new(program)
        .args(args)
        .current_dir(cwd)
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).trim().to_string())
}

/// Duplicating stderr for a child's stdout.
trait AsFdOwned {
    fn as_fd_owned(&self) -> std::io::Result<std::os::fd::OwnedFd>;
}

impl AsFdOwned for std::io::Stderr {
    fn as_fd_owned(&self) -> std::io::Result<std::os::fd::OwnedFd> {
        use std::os::fd::AsFd;
        self.as_fd().try_clone_to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_paths_are_kept_relative_to_the_settings_folder() {
        assert_eq!(
            relative_path(Path::new("/a/agent"), Path::new("/a/pkgs/x")),
            "../pkgs/x"
        );
        assert_eq!(relative_path(Path::new("/a"), Path::new("/a")), "");
        assert_eq!(relative_path(Path::new("/a"), Path::new("/a/b/c")), "b/c");
    }

    #[test]
    fn the_package_manager_is_named_by_npm_command() {
        let manager = |command: &[&str]| Manager {
            agent_dir: PathBuf::new(),
            cwd: PathBuf::new(),
            project_trusted: false,
            npm_command: command.iter().map(|s| s.to_string()).collect(),
            offline: false,
        };
        assert_eq!(manager(&[]).manager_name(), "npm");
        assert_eq!(manager(&["/usr/bin/pnpm"]).manager_name(), "pnpm");
        assert_eq!(
            manager(&["mise", "exec", "--", "bun"]).manager_name(),
            "bun"
        );
        assert!(matches!(
            manager(&[""]).npm_program(),
            Err(PackageError::InvalidNpmCommand)
        ));
    }
}
