//! What the agent reads from disk besides sessions: settings files ([`settings`]), context
//! files and the system prompt built from them ([`system_prompt`]), and skills and prompt
//! templates (tools-resources §3–§5, this module): where they are found, what `get_commands`
//! lists, and how a `/skill:name` or `/template` message is expanded.
//!
//! Locations, first wins on a name clash: paths listed in the project's settings, the
//! project's `.tau/` and `.pi/` folders (and, for skills, `.agents/skills` in the working
//! directory and each parent up to the repository root), paths listed in the user's
//! settings, the agent directory (and `~/.agents/skills`), then `--skill` /
//! `--prompt-template` paths. `--no-skills` / `--no-prompt-templates` keep only the command
//! line's. The project's own folders are read before it is trusted, since skills and templates
//! are text (decision T54); the paths its settings files list wait for trust, and
//! `--no-approve` leaves the project out altogether ([`ProjectAccess`]).
//!
//! pi packages add theirs ([`packages`]): those of `-e` packages before everything else
//! (kept under `--no-skills` / `--no-prompt-templates`, as pi keeps them), those of the
//! settings' `packages` after the agent directory's and before the command line's paths.
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

pub mod settings;
pub mod system_prompt;

pub mod filter;
mod frontmatter;
pub mod packages;
pub mod prompts;
pub mod skills;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tau_protocol::rpc::SourceInfo;

use filter::Filter;

pub use prompts::PromptTemplate;
pub use skills::Skill;

/// A folder (or file) resources are loaded from, and how they are reported.
#[derive(Debug, Clone)]
pub struct Root {
    pub path: PathBuf,
    source: &'static str,
    scope: &'static str,
    base_dir: PathBuf,
    /// Listed in a settings file: templates are searched all the way down, and the file's
    /// plain globs apply.
    listed: bool,
    /// The settings files' patterns this root's files must pass.
    filters: Vec<Arc<Filter>>,
    /// A package's file: reported with this `sourceInfo` (its `path` replaced).
    fixed: Option<SourceInfo>,
}

impl Root {
    /// A known folder of the user's or the project's.
    pub fn auto(path: PathBuf, scope: &'static str, base_dir: PathBuf) -> Self {
        Self {
            path,
            source: "auto",
            scope,
            base_dir,
            listed: false,
            filters: Vec::new(),
            fixed: None,
        }
    }

    /// One file a package gives, reported as `info` says.
    fn package_file(path: PathBuf, scope: &'static str, info: SourceInfo) -> Self {
        Self {
            base_dir: path.parent().unwrap_or(&path).to_path_buf(),
            path,
            source: "package",
            scope,
            listed: true,
            filters: Vec::new(),
            fixed: Some(info),
        }
    }

    fn filtered_by(mut self, filters: &[Arc<Filter>]) -> Self {
        self.filters.extend(filters.iter().cloned());
        self
    }

    /// Whether the settings' patterns let `file` (found under this root) load.
    fn keeps(&self, file: &Path) -> bool {
        self.filters.iter().all(|f| f.keeps(file, self.listed))
    }

    /// A path listed in a settings file (relative to that file's folder).
    fn listed(settings_dir: &Path, entry: &str, scope: &'static str, filter: Arc<Filter>) -> Self {
        Self {
            path: tau_base::paths::normalize(
                &settings_dir.join(tau_base::paths::expand_tilde(entry)),
            ),
            source: "local",
            scope,
            base_dir: settings_dir.to_path_buf(),
            listed: true,
            filters: vec![filter],
            fixed: None,
        }
    }

    /// A path from the command line (relative to the working directory).
    fn cli(cwd: &Path, arg: &str) -> Self {
        let path = tau_base::paths::normalize(&cwd.join(tau_base::paths::expand_tilde(arg)));
        let base_dir = if path.is_dir() {
            path.clone()
        } else {
            path.parent().unwrap_or(cwd).to_path_buf()
        };
        Self {
            path,
            source: "local",
            scope: "temporary",
            base_dir,
            listed: false,
            filters: Vec::new(),
            fixed: None,
        }
    }

    fn source_info(&self, file: &Path) -> SourceInfo {
        if let Some(info) = &self.fixed {
            return SourceInfo {
                path: file.display().to_string(),
                ..info.clone()
            };
        }
        SourceInfo {
            path: file.display().to_string(),
            source: self.source.to_string(),
            scope: self.scope.to_string(),
            origin: "top-level".to_string(),
            base_dir: Some(self.base_dir.display().to_string()),
        }
    }
}

/// The command line's say on resources.
#[derive(Debug, Clone, Default)]
pub struct ResourceOptions {
    /// `--skill` paths.
    pub skills: Vec<String>,
    pub no_skills: bool,
    /// `--prompt-template` paths.
    pub prompt_templates: Vec<String>,
    pub no_prompt_templates: bool,
    /// How far the project's own files are read.
    pub project: ProjectAccess,
    /// `-e` values: those naming a package (a folder with a `pi` manifest or resource
    /// folders, or an installed `npm:`/`git:` source) give their skills and templates too.
    pub extension_sources: Vec<String>,
}

/// How much of the project's own files a session uses (docs/security.md).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ProjectAccess {
    /// `--no-approve`: nothing of the project's but its context files.
    Refused,
    /// Not trusted: the skills and prompt templates of the project's own folders, which are
    /// text the model reads as it reads `AGENTS.md` (decision T54). Nothing the project's
    /// settings name, no project `SYSTEM.md`.
    #[default]
    Untrusted,
    /// Nothing in the project waits for trust (no settings, extensions, `SYSTEM.md` or
    /// `.mcp.json`): trusted for all it holds, as pi answers, but the user has not said the
    /// repository's code may run, so the user's own processes (MCP servers, extension
    /// programs) do not start in it (docs/security.md).
    NothingToTrust,
    /// Trusted by the user: everything, the project's settings files included.
    Trusted,
}

impl ProjectAccess {
    /// Whether the project's files apply (its settings, extensions, `SYSTEM.md`).
    pub fn trusted(self) -> bool {
        matches!(self, Self::Trusted | Self::NothingToTrust)
    }

    /// Whether the user said they trust the project: only then do the user's MCP servers and
    /// extension programs start in it, where a committed `node_modules/.bin` or a Python
    /// module of the repository's would be found by them.
    pub fn trusted_by_user(self) -> bool {
        self == Self::Trusted
    }
}

/// Everything loaded for one working directory.
#[derive(Debug, Clone, Default)]
pub struct Resources {
    pub skills: Vec<Skill>,
    pub prompts: Vec<PromptTemplate>,
    /// Theme files packages give, collected as pi collects them (tau has no terminal UI to
    /// use them).
    pub themes: Vec<PathBuf>,
}

impl Resources {
    pub fn load(agent_dir: &Path, cwd: &Path, options: &ResourceOptions) -> Self {
        let project = options.project != ProjectAccess::Refused;
        // Settings files that list resources, with the folder their entries are relative
        // to: the project's first (once it is trusted: a list can name any folder on the
        // machine), then the user's.
        let mut project_settings = Vec::new();
        if options.project.trusted() {
            for dir in [".tau", ".pi"] {
                project_settings.push(cwd.join(dir));
            }
        }
        let user_settings = [agent_dir.to_path_buf()];
        // Each settings file's array: the paths it lists, and its patterns as a filter.
        let listed = |dirs: &[PathBuf], key: &str, scope: &'static str| {
            let mut roots = Vec::new();
            let mut filters = Vec::new();
            for dir in dirs {
                let entries = settings::array_in_file(&dir.join("settings.json"), key);
                let filter = Arc::new(Filter::new(dir, &entries));
                for entry in entries.iter().filter(|e| !filter::is_pattern(e)) {
                    roots.push(Root::listed(dir, entry, scope, Arc::clone(&filter)));
                }
                filters.push(filter);
            }
            (roots, filters)
        };
        let (project_skills, project_skill_filters) =
            listed(&project_settings, "skills", "project");
        let (user_skills, user_skill_filters) = listed(&user_settings, "skills", "user");
        let (project_prompts, project_prompt_filters) =
            listed(&project_settings, "prompts", "project");
        let (user_prompts, user_prompt_filters) = listed(&user_settings, "prompts", "user");
        let (cli_packages, settings_packages) = package_roots(agent_dir, cwd, options);
        let mut skill_roots = Vec::new();
        skill_roots.extend(
            cli_packages
                .skills
                .into_iter()
                .map(|r| (r, skills::Layout::Own)),
        );
        if !options.no_skills {
            for root in project_skills {
                skill_roots.push((root, skills::Layout::Own));
            }
            if project {
                for dir in [".tau", ".pi"] {
                    let base = cwd.join(dir);
                    let root = Root::auto(base.join("skills"), "project", base);
                    skill_roots.push((
                        root.filtered_by(&project_skill_filters),
                        skills::Layout::Own,
                    ));
                }
                for base in agents_dirs(cwd) {
                    let root = Root::auto(base.join("skills"), "project", base);
                    skill_roots.push((
                        root.filtered_by(&project_skill_filters),
                        skills::Layout::Agents,
                    ));
                }
            }
            for root in user_skills {
                skill_roots.push((root, skills::Layout::Own));
            }
            let root = Root::auto(agent_dir.join("skills"), "user", agent_dir.to_path_buf());
            skill_roots.push((root.filtered_by(&user_skill_filters), skills::Layout::Own));
            if let Some(home) = std::env::home_dir() {
                let base = home.join(".agents");
                let root = Root::auto(base.join("skills"), "user", base);
                skill_roots.push((
                    root.filtered_by(&user_skill_filters),
                    skills::Layout::Agents,
                ));
            }
            skill_roots.extend(
                settings_packages
                    .skills
                    .into_iter()
                    .map(|r| (r, skills::Layout::Own)),
            );
        }
        for arg in &options.skills {
            let root = Root::cli(cwd, arg);
            if !root.path.exists() {
                tracing::warn!("Skill path does not exist: {}", root.path.display());
            }
            skill_roots.push((root, skills::Layout::Own));
        }

        let mut prompt_roots = cli_packages.prompts;
        if !options.no_prompt_templates {
            prompt_roots.extend(project_prompts);
            if project {
                for dir in [".tau", ".pi"] {
                    let base = cwd.join(dir);
                    let root = Root::auto(base.join("prompts"), "project", base);
                    prompt_roots.push(root.filtered_by(&project_prompt_filters));
                }
            }
            prompt_roots.extend(user_prompts);
            let root = Root::auto(agent_dir.join("prompts"), "user", agent_dir.to_path_buf());
            prompt_roots.push(root.filtered_by(&user_prompt_filters));
            prompt_roots.extend(settings_packages.prompts);
        }
        for arg in &options.prompt_templates {
            let root = Root::cli(cwd, arg);
            if !root.path.exists() {
                tracing::warn!(
                    "Prompt template path does not exist: {}",
                    root.path.display()
                );
            }
            prompt_roots.push(root);
        }
        let mut themes = cli_packages.themes;
        themes.extend(settings_packages.themes);
        let mut seen = std::collections::HashSet::new();
        themes.retain(|t| seen.insert(std::fs::canonicalize(t).unwrap_or_else(|_| t.clone())));
        Self {
            skills: skills::load(&skill_roots),
            prompts: prompts::load(&prompt_roots),
            themes,
        }
    }

    /// A user message's text with a `/skill:` command or a `/template` expanded (skills
    /// first, then templates, as pi does). A skill whose file has become unreadable leaves
    /// the text as it is, and its file and the error come back beside it.
    pub fn expand(&self, text: &str) -> (String, Option<(PathBuf, String)>) {
        let (text, failure) = match skills::expand(text, &self.skills) {
            Ok(Some(expanded)) => (expanded, None),
            Ok(None) => (text.to_string(), None),
            Err((file, error)) => (text.to_string(), Some((file, error))),
        };
        (
            prompts::expand(&text, &self.prompts).unwrap_or(text),
            failure,
        )
    }
}

/// The roots of the packages' files, by kind.
#[derive(Default)]
struct PackageRoots {
    skills: Vec<Root>,
    prompts: Vec<Root>,
    themes: Vec<PathBuf>,
}

/// The `-e` packages' files and the settings packages' files, with the `sourceInfo` pi 0.79
/// reports for each: a settings package's files name its source string, scope and folder; an
/// `-e` package's skills are the command line's (`cli`, no folder) while its templates name
/// the package (its absolute path, or its `npm:`/`git:` source).
fn package_roots(
    agent_dir: &Path,
    cwd: &Path,
    options: &ResourceOptions,
) -> (PackageRoots, PackageRoots) {
    let info = |source: String, scope: &str, origin: &str, base: Option<&Path>| SourceInfo {
        path: String::new(),
        source,
        scope: scope.to_string(),
        origin: origin.to_string(),
        base_dir: base.map(|b| b.display().to_string()),
    };
    let mut cli = PackageRoots::default();
    for given in &options.extension_sources {
        let (dir, source) = match packages::PackageSource::parse(given) {
            packages::PackageSource::Local(path) => {
                let dir = packages::resolve_local(cwd, &path);
                let shown = dir.display().to_string();
                (dir, shown)
            }
            remote => match remote.install_dir(agent_dir) {
                Some(dir) => (dir, given.clone()),
                None => continue,
            },
        };
        if !dir.is_dir() {
            continue;
        }
        let Some(files) = packages::package_files(&dir, None) else {
            continue;
        };
        let skill = info("cli".into(), "temporary", "top-level", None);
        let package = info(source, "temporary", "package", Some(&dir));
        cli.skills.extend(
            files
                .skills
                .into_iter()
                .map(|f| Root::package_file(f, "temporary", skill.clone())),
        );
        cli.prompts.extend(
            files
                .prompts
                .into_iter()
                .map(|f| Root::package_file(f, "temporary", package.clone())),
        );
        cli.themes.extend(files.themes);
    }
    let mut listed = PackageRoots::default();
    let trusted = options.project.trusted();
    for package in packages::listed_packages(agent_dir, cwd, trusted) {
        let Some(dir) = package.installed_dir().filter(|d| d.is_dir()) else {
            continue;
        };
        let Some(files) = packages::package_files(&dir, package.filter.as_ref()) else {
            continue;
        };
        let meta = info(package.source.clone(), package.scope, "package", Some(&dir));
        let root = |f| Root::package_file(f, package.scope, meta.clone());
        listed.skills.extend(files.skills.into_iter().map(root));
        listed.prompts.extend(files.prompts.into_iter().map(root));
        listed.themes.extend(files.themes);
    }
    (cli, listed)
}

/// The project's files and folders that do nothing until the user trusts the project: its
/// settings files, its extensions folders, its `SYSTEM.md`/`APPEND_SYSTEM.md`, and an
/// `.mcp.json` of MCP servers to start. Only when there are some is anyone asked about
/// trust; a folder without any has nothing to trust (docs/security.md).
pub fn waits_for_trust(cwd: &Path) -> Vec<PathBuf> {
    [".pi", ".tau"]
        .iter()
        .flat_map(|dir| {
            [
                "settings.json",
                "extensions",
                "SYSTEM.md",
                "APPEND_SYSTEM.md",
            ]
            .map(|name| cwd.join(dir).join(name))
        })
        .chain([cwd.join(".mcp.json")])
        .filter(|path| path.symlink_metadata().is_ok())
        .collect()
}

/// `.agents` folders from the working directory up to the repository root (the folder
/// holding `.git`), or to the file system's root outside a repository; `~/.agents` is the
/// user's, not the project's.
fn agents_dirs(cwd: &Path) -> Vec<PathBuf> {
    let home_agents = std::env::home_dir().map(|h| h.join(".agents"));
    let mut dirs = Vec::new();
    for dir in cwd.ancestors() {
        let agents = dir.join(".agents");
        if Some(&agents) != home_agents.as_ref() {
            dirs.push(agents);
        }
        if dir.join(".git").exists() {
            break;
        }
    }
    dirs
}

/// A resource known by name.
trait Named {
    fn name(&self) -> &str;
    fn file(&self) -> &Path;
}

/// Adds `item` unless one of that name is already there: the first one found wins, and the
/// clash is reported.
fn push_unless_taken<T: Named>(list: &mut Vec<T>, item: T, kind: &str) {
    if let Some(winner) = list.iter().find(|t| t.name() == item.name()) {
        tracing::warn!(
            "{kind}\"{}\" collision: {} is kept, {} is not",
            item.name(),
            winner.file().display(),
            item.file().display()
        );
        return;
    }
    list.push(item);
}

fn is_hidden_or_vendored(name: &OsStr) -> bool {
    name.to_str()
        .is_some_and(|n| n.starts_with('.') || n == "node_modules")
}
