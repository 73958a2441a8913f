//! The command-line commands that do their work and exit before any mode starts: pi's
//! package commands (`tau install|remove|uninstall|update|list`, parsed as pi 0.79 parses
//! them, carried out by `tau_extensions::packages`) and `--export <session.jsonl> [out.html]`.
//! What they print goes to stdout (progress and results) or stderr (errors, exit 1).

use std::ffi::OsString;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use tau_extensions::packages::{Configured, Manager, Scope};
use tau_resources::settings::Settings;

/// The exit of a command handled here, or `None` when the arguments are for a mode.
pub fn dispatch(args: &[OsString]) -> Option<ExitCode> {
    let words: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let command = match words.first().map(String::as_str) {
        Some("install") => Command::Install,
        Some("remove" | "uninstall") => Command::Remove,
        Some("update") => Command::Update,
        Some("list") => Command::List,
        _ => return export(&words),
    };
    Some(match run_package_command(command, &words[1..]) {
        Ok(code) => code,
        Err(message) => {
            eprint_line(&format!("Error: {message}"));
            ExitCode::FAILURE
        }
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Command {
    Install,
    Remove,
    Update,
    List,
}

impl Command {
    fn name(self) -> &'static str {
        match self {
            Self::Install => "install",
            Self::Remove => "remove",
            Self::Update => "update",
            Self::List => "list",
        }
    }

    fn usage(self) -> &'static str {
        match self {
            Self::Install => "tau install <source> [-l] [--approve|--no-approve]",
            Self::Remove => "tau remove <source> [-l] [--approve|--no-approve]",
            Self::Update => {
                "tau update [source] [--extensions|--all] [--extension <source>] \
                 [--approve|--no-approve]"
            }
            Self::List => "tau list [--approve|--no-approve]",
        }
    }

    fn help(self) -> String {
        let body = match self {
            Self::Install => {
                "Install a pi package and add it to settings.\n\nOptions:\n  -l, --local       \
                 Install for this project (.pi/settings.json; the project must be trusted)\n  \
                 -a, --approve     Trust the project for this command\n  -na, --no-approve \
                 Ignore the project for this command\n\nExamples:\n  tau install \
                 npm:@foo/bar\n  tau install npm:@foo/bar@1.2.3\n  tau install \
                 git:github.com/user/repo@v1\n  tau install https://github.com/user/repo\n  \
                 tau install ssh://git@github.com/user/repo\n  tau install ./local/path\n"
            }
            Self::Remove => {
                "Remove a package and its source from settings.\nAlias: tau uninstall <source> \
                 [-l]\n\nOptions:\n  -l, --local       Remove from the project's settings\n  \
                 -a, --approve     Trust the project for this command\n  -na, --no-approve \
                 Ignore the project for this command\n"
            }
            Self::Update => {
                "Update installed packages. tau does not update itself.\n\nOptions:\n  \
                 --extensions          Update every installed package\n  --all                 \
                 The same (tau itself is not updated)\n  --extension <source>  Update one \
                 package\n  -a, --approve         Trust the project for this command\n  -na, \
                 --no-approve      Ignore the project for this command\n\n  tau update \
                 <source>    Update one package\n"
            }
            Self::List => {
                "List the packages of the user's and the project's settings.\n\nOptions:\n  \
                 -a, --approve      Trust the project for this command\n  -na, --no-approve  \
                 Ignore the project for this command\n"
            }
        };
        format!("Usage:\n  {}\n\n{body}", self.usage())
    }
}

/// What `update` is asked to update.
#[derive(Debug, PartialEq, Eq)]
enum Target {
    /// pi itself (`update`, `--self`, `self`, `pi`): tau has no self-update.
    Itself,
    /// Every package, and pi itself (`--all`).
    All,
    /// Every package, or one.
    Packages(Option<String>),
}

/// A package command's arguments, checked as pi checks them.
#[derive(Debug, Default)]
struct Parsed {
    source: Option<String>,
    local: bool,
    trust: Option<bool>,
    help: bool,
    self_flag: bool,
    extensions: bool,
    all: bool,
    extension: Option<String>,
}

fn parse(command: Command, args: &[String]) -> Result<Parsed, String> {
    let mut parsed = Parsed::default();
    let usage = || command.usage();
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_str();
        let update = command == Command::Update;
        let for_command = |ok: bool| {
            if ok {
                Ok(())
            } else {
                Err(format!(
                    "Unknown option {arg} for \"{}\".\nUse \"tau --help\" or \"{}\".",
                    command.name(),
                    usage()
                ))
            }
        };
        match arg {
            "-h" | "--help" => parsed.help = true,
            "-l" | "--local" => {
                for_command(matches!(command, Command::Install | Command::Remove))?;
                parsed.local = true;
            }
            "--self" => {
                for_command(update)?;
                parsed.self_flag = true;
            }
            "--extensions" => {
                for_command(update)?;
                parsed.extensions = true;
            }
            "--all" => {
                for_command(update)?;
                parsed.all = true;
            }
            "--force" => for_command(update)?,
            "-a" | "--approve" => parsed.trust = Some(true),
            "-na" | "--no-approve" => parsed.trust = Some(false),
            "--extension" => {
                for_command(update)?;
                match args.get(i + 1) {
                    Some(value) if !value.starts_with('-') => {
                        if parsed.extension.is_some() {
                            return Err(format!(
                                "--extension can only be provided once\nUsage: {}",
                                usage()
                            ));
                        }
                        parsed.extension = Some(value.clone());
                        i += 1;
                    }
                    _ => return Err(format!("Missing value for {arg}.\nUsage: {}", usage())),
                }
            }
            _ if arg.starts_with('-') => for_command(false)?,
            _ if parsed.source.is_none() => parsed.source = Some(arg.to_string()),
            _ => return Err(format!("Unexpected argument {arg}.\nUsage: {}", usage())),
        }
        i += 1;
    }
    Ok(parsed)
}

fn update_target(parsed: &Parsed) -> Result<Target, String> {
    let usage = Command::Update.usage();
    let conflict = |text: &str| Err(format!("{text}\nUsage: {usage}"));
    if parsed.all && (parsed.self_flag || parsed.extensions || parsed.extension.is_some()) {
        return conflict("--all cannot be combined with --self, --extensions, or --extension");
    }
    if parsed.all && parsed.source.is_some() {
        return conflict("--all cannot be combined with a positional source");
    }
    if let Some(source) = &parsed.extension {
        if parsed.self_flag || parsed.extensions {
            return conflict("--extension cannot be combined with --self, --extensions, or --all");
        }
        if parsed.source.is_some() {
            return conflict("--extension cannot be combined with a positional source");
        }
        return Ok(Target::Packages(Some(source.clone())));
    }
    if let Some(source) = &parsed.source {
        if matches!(source.as_str(), "self" | "pi" | "tau") {
            return Ok(if parsed.extensions {
                Target::All
            } else {
                Target::Itself
            });
        }
        if parsed.extensions || parsed.self_flag {
            return conflict(
                "positional update targets cannot be combined with --self, --extensions, or --all",
            );
        }
        return Ok(Target::Packages(Some(source.clone())));
    }
    Ok(match (parsed.all, parsed.self_flag, parsed.extensions) {
        (true, _, _) | (_, true, true) => Target::All,
        (_, false, true) => Target::Packages(None),
        _ => Target::Itself,
    })
}

/// Why tau does not do what `pi update` does by default.
const NO_SELF_UPDATE: &str = "tau does not update itself: install a newer tau the way this one \
     was installed (for a checkout, `bash scripts/install.sh` again). `tau update \
     --extensions` updates the installed packages.";

fn run_package_command(command: Command, args: &[String]) -> Result<ExitCode, String> {
    let parsed = parse(command, args)?;
    if parsed.help {
        print_out(&command.help());
        return Ok(ExitCode::SUCCESS);
    }
    let target = match command {
        Command::Update => Some(update_target(&parsed)?),
        _ => None,
    };
    let source = parsed.source.clone();
    if matches!(command, Command::Install | Command::Remove) && source.is_none() {
        return Err(format!(
            "Missing {} source.\nUsage: {}",
            command.name(),
            command.usage()
        ));
    }
    if target == Some(Target::Itself) {
        return Err(NO_SELF_UPDATE.to_string());
    }
    let agent_dir = tau_store::paths::agent_dir()
        .ok_or("cannot locate the agent directory: set TAU_AGENT_DIR or HOME")?;
    let cwd =
        std::env::current_dir().map_err(|e| format!("cannot read the working directory: {e}"))?;
    let trusted = project_trusted(&agent_dir, &cwd, parsed.trust, command == Command::Update);
    if parsed.local && !trusted {
        return Err("Project is not trusted. Use --approve to modify local package config.".into());
    }
    let settings = Settings::load_for(&agent_dir, &cwd, trusted);
    for warning in settings.warnings() {
        eprint_line(&format!("Warning: {warning}"));
    }
    let manager = Manager {
        npm_command: settings
            .get::<Vec<String>>("npmCommand")
            .unwrap_or_default(),
        offline: std::env::var("PI_OFFLINE")
            .is_ok_and(|v| matches!(v.to_ascii_lowercase().as_str(), "1" | "true" | "yes")),
        agent_dir,
        cwd,
        project_trusted: trusted,
    };
    let scope = if parsed.local {
        Scope::Project
    } else {
        Scope::User
    };
    let mut progress = |line: &str| print_out(&format!("{line}\n"));
    let fail = |e: tau_extensions::packages::PackageError| e.to_string();
    match command {
        Command::Install => {
            let source = source.unwrap_or_default();
            manager
                .install(&source, scope, &mut progress)
                .map_err(fail)?;
            print_out(&format!("Installed {source}\n"));
        }
        Command::Remove => {
            let source = source.unwrap_or_default();
            if !manager
                .remove(&source, scope, &mut progress)
                .map_err(fail)?
            {
                return Err(format!("No matching package found for {source}"));
            }
            print_out(&format!("Removed {source}\n"));
        }
        Command::List => print_out(&listing(&manager.list().map_err(fail)?)),
        Command::Update => {
            let one = match &target {
                Some(Target::Packages(one)) => one.clone(),
                _ => None,
            };
            manager
                .update(one.as_deref(), &mut progress)
                .map_err(fail)?;
            match one {
                Some(source) => print_out(&format!("Updated {source}\n")),
                None => print_out("Updated packages\n"),
            }
            if target == Some(Target::All) {
                eprint_line(NO_SELF_UPDATE);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// pi's listing: the user's packages, then the project's, each with its folder when installed.
fn listing(packages: &[Configured]) -> String {
    if packages.is_empty() {
        return "No packages installed.\n".into();
    }
    let mut out = String::new();
    for (scope, title) in [
        (Scope::User, "User packages:"),
        (Scope::Project, "Project packages:"),
    ] {
        let of_scope: Vec<&Configured> = packages.iter().filter(|p| p.scope == scope).collect();
        if of_scope.is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(title);
        out.push('\n');
        for package in of_scope {
            let filtered = if package.filtered { " (filtered)" } else { "" };
            out.push_str(&format!("  {}{filtered}\n", package.source));
            if let Some(path) = &package.installed_path {
                out.push_str(&format!("    {}\n", path.display()));
            }
        }
    }
    out
}

/// Whether the project is trusted for a package command: `--approve`/`--no-approve`; a folder
/// with nothing waiting for trust; the user's `trust.json`; `defaultProjectTrust: "always"` in
/// the user's settings. `update` uses the override and `trust.json` alone, as pi does.
pub(crate) fn project_trusted(
    agent_dir: &Path,
    cwd: &Path,
    given: Option<bool>,
    saved_only: bool,
) -> bool {
    if let Some(trusted) = given {
        return trusted;
    }
    let saved = || {
        tau_extensions::trust::TrustStore::new(agent_dir)
            .get(cwd)
            .unwrap_or_else(|e| {
                eprint_line(&format!("Warning: {e}"));
                None
            })
    };
    if saved_only {
        return saved() == Some(true);
    }
    if tau_resources::waits_for_trust(cwd).is_empty() {
        return true;
    }
    saved().unwrap_or_else(|| {
        Settings::load(agent_dir, cwd)
            .default_project_trust()
            .as_deref()
            == Some("always")
    })
}

/// `--export <session.jsonl> [out.html]`: the session file as HTML, then exit.
fn export(words: &[String]) -> Option<ExitCode> {
    let at = words
        .iter()
        .position(|w| w == "--export" || w.starts_with("--export="))?;
    let (input, rest) = match words[at].strip_prefix("--export=") {
        Some(value) => (value.to_string(), [&words[..at], &words[at + 1..]].concat()),
        None => (
            words.get(at + 1)?.clone(),
            [&words[..at], words.get(at + 2..).unwrap_or_default()].concat(),
        ),
    };
    // pi takes the first message as the output file.
    let output = output_argument(&rest);
    Some(match export_session(&input, output.as_deref()) {
        Ok(written) => {
            print_out(&format!("Exported to: {written}\n"));
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprint_line(&format!("Error: {message}"));
            ExitCode::FAILURE
        }
    })
}

/// The first positional argument of the rest of the command line, read as tau reads it.
fn output_argument(rest: &[String]) -> Option<String> {
    use clap::Parser as _;
    let argv = std::iter::once("tau".to_string()).chain(rest.iter().cloned());
    match crate::cli::Cli::try_parse_from(argv) {
        Ok(cli) => cli.messages.first().cloned(),
        Err(_) => rest.iter().find(|w| !w.starts_with('-')).cloned(),
    }
}

fn export_session(input: &str, output: Option<&str>) -> Result<String, String> {
    use tau_session::export_html::{ExportInput, default_export_file_name, render_session_html};
    let cwd =
        std::env::current_dir().map_err(|e| format!("cannot read the working directory: {e}"))?;
    let resolve = |given: &str| -> PathBuf {
        let path = tau_base::paths::expand_tilde(given.trim());
        if path.is_absolute() {
            path
        } else {
            cwd.join(path)
        }
    };
    let file = resolve(input);
    // The session store opens what it is given and reads it whole: a FIFO would hang it.
    match tau_base::bounded::check_regular(&file) {
        Ok(()) => {}
        Err(e @ tau_base::bounded::BoundedReadError::NotRegular { .. }) => {
            return Err(format!("cannot read {}: {e}", file.display()));
        }
        Err(_) => return Err(format!("File not found: {}", file.display())),
    }
    let store = tau_store::SessionStore::open(&file)
        .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    let header = serde_json::to_value(store.header()).unwrap_or(serde_json::Value::Null);
    let entries: Vec<serde_json::Value> = store
        .entries()
        .iter()
        .filter_map(|e| serde_json::to_value(e).ok())
        .collect();
    let html = render_session_html(&ExportInput {
        header: &header,
        entries: &entries,
        leaf_id: store.leaf_id(),
        system_prompt: None,
        tools: &[],
        session_name: store.session_name(),
    });
    let shown = match output {
        Some(given) => given.to_string(),
        None => default_export_file_name(&file),
    };
    let target = resolve(&shown);
    tau_base::atomic::write_atomically(&target, html.as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", target.display()))?;
    Ok(shown)
}

fn print_out(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

fn eprint_line(text: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{text}");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(args: &[&str]) -> Vec<String> {
        args.iter().map(|a| a.to_string()).collect()
    }

    #[test]
    fn update_targets_follow_pis_flags_and_never_update_tau() {
        let target =
            |args: &[&str]| parse(Command::Update, &words(args)).and_then(|p| update_target(&p));
        assert_eq!(target(&[]), Ok(Target::Itself));
        assert_eq!(target(&["--self"]), Ok(Target::Itself));
        assert_eq!(target(&["pi"]), Ok(Target::Itself));
        assert_eq!(target(&["--all"]), Ok(Target::All));
        assert_eq!(target(&["--extensions"]), Ok(Target::Packages(None)));
        assert_eq!(
            target(&["npm:x"]),
            Ok(Target::Packages(Some("npm:x".into())))
        );
        assert_eq!(
            target(&["--extension", "npm:x"]),
            Ok(Target::Packages(Some("npm:x".into())))
        );
        assert!(target(&["--all", "npm:x"]).is_err());
        assert!(target(&["-l"]).is_err());
        assert!(parse(Command::Install, &words(&["a", "b"])).is_err());
        assert!(parse(Command::List, &words(&["--all"])).is_err());
    }
}
