//! The run's extensions at start-up: the project-trust decision they take part in, starting
//! them (again per ACP session), their deadlines, and the command-line flags they registered.
//! [`Started`] asks them to end when start-up fails after they were started.

use std::io::{self, Write};

use tau_protocol::extension_event::{ExtensionEvent, ProjectTrustResult, take_result};
use tau_resources::ProjectAccess;
use tau_resources::settings::Settings;
use tau_session::SessionConfig;

use crate::cli::{self, RunMode};
use crate::{oneshot, warn};

/// The extensions started for the run, until a mode takes them. Dropped before that (a later
/// start-up step failed, or the run ended early), they are asked to end, which needs the
/// runtime they run on.
pub(crate) struct Started {
    loaded: Option<tau_rpc::LoadedExtensions>,
    runtime: tokio::runtime::Handle,
}

impl Started {
    pub(crate) fn new(
        loaded: Option<tau_rpc::LoadedExtensions>,
        runtime: tokio::runtime::Handle,
    ) -> Self {
        Self { loaded, runtime }
    }

    pub(crate) fn get(&self) -> Option<&tau_rpc::LoadedExtensions> {
        self.loaded.as_ref()
    }

    /// For the mode that serves the session: from here it ends them.
    pub(crate) fn take(mut self) -> Option<tau_rpc::LoadedExtensions> {
        self.loaded.take()
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        if let Some(loaded) = self.loaded.take() {
            let _context = self.runtime.enter();
            loaded.set.shutdown();
        }
    }
}

/// Decides whether the project is trusted (docs/security.md), applies its settings if so,
/// and starts the run's extensions (`-e`, then the trusted project's and the user's). Trust
/// comes from the user alone, first that applies: `--approve`/`--no-approve`; nothing in the
/// project waiting for trust; an extension of the command line's or the user's answering
/// `project_trust`; the user's `trust.json`; `defaultProjectTrust` in the user's settings;
/// else untrusted (RPC mode cannot ask). Any load failure is fatal before `ready`, as in pi
/// (ext §1.6).
pub(crate) async fn load_extensions(
    cli: &cli::Cli,
    mode: RunMode,
    config: &SessionConfig,
    settings: &mut Settings,
) -> anyhow::Result<(
    ProjectAccess,
    Option<tau_rpc::LoadedExtensions>,
    Vec<tau_extensions::Entry>,
)> {
    let sources = |project_trusted| tau_extensions::Sources {
        cli: cli.extension.clone(),
        no_discovery: cli.no_extensions,
        cwd: config.cwd.clone(),
        agent_dir: config.agent_dir.clone(),
        project_trusted,
    };
    let discover =
        |trusted| tau_extensions::discover(&sources(trusted)).map_err(|e| anyhow::anyhow!("{e}"));
    let package_warnings = |trusted| {
        // Listed but not installed: tau never installs packages at start-up (decision T72).
        for warning in tau_extensions::discovery::package_warnings(&sources(trusted)) {
            warn(&warning);
        }
    };
    let store = tau_extensions::trust::TrustStore::new(&config.agent_dir);
    let settled = match (cli.approve, cli.no_approve) {
        (_, true) => Some(ProjectAccess::Refused),
        (true, false) => Some(ProjectAccess::Trusted),
        // Nothing of the project's waits for trust: there is nothing to decide (pi's
        // answer for such a folder is "trusted"). Whether the user's own processes may
        // start in it is still the user's word, never asked for here.
        (false, false) if tau_resources::waits_for_trust(&config.cwd).is_empty() => {
            let said = match store.get(&config.cwd) {
                Ok(Some(trusted)) => trusted,
                Ok(None) => settings.default_project_trust().as_deref() == Some("always"),
                Err(_) => false,
            };
            Some(if said {
                ProjectAccess::Trusted
            } else {
                ProjectAccess::NothingToTrust
            })
        }
        (false, false) => None,
    };
    if let Some(access) = settled {
        let trusted = access.trusted();
        if trusted {
            settings.trust_project();
        }
        let list = discover(trusted)?;
        package_warnings(trusted);
        let loaded = start_extensions(&list, mode, config, settings, access).await?;
        return Ok((access, loaded, list));
    }
    // The pre-pass: only what the user chose runs before the project is trusted, and is
    // asked first.
    let untrusted = discover(false)?;
    let prepass =
        start_extensions(&untrusted, mode, config, settings, ProjectAccess::Untrusted).await?;
    let asked = match &prepass {
        Some(loaded) => ask_project_trust(&loaded.set, &config.cwd).await,
        None => None,
    };
    let trusted = match asked {
        Some((trusted, remember)) => {
            if remember && let Err(err) = store.set(&config.cwd, trusted) {
                warn(&err.to_string());
            }
            trusted
        }
        None => match store.get(&config.cwd) {
            Ok(Some(trusted)) => trusted,
            Ok(None) if settings.default_project_trust().as_deref() == Some("always") => true,
            // The interactive session has someone to ask, before its screen is taken.
            Ok(None) if mode == RunMode::Interactive => {
                let (trusted, remember) = ask_trust_on_terminal(&config.cwd);
                if remember && let Err(err) = store.set(&config.cwd, trusted) {
                    warn(&err.to_string());
                }
                trusted
            }
            Ok(None) => false,
            Err(err) => {
                warn(&err.to_string());
                false
            }
        },
    };
    package_warnings(trusted);
    if !trusted {
        return Ok((ProjectAccess::Untrusted, prepass, untrusted));
    }
    let timeouts_before = timeouts(settings);
    settings.trust_project();
    let trusted_list = discover(true)?;
    if trusted_list == untrusted && timeouts(settings) == timeouts_before {
        // Nothing more to start: the pre-pass set is the run's, and learns of the trust
        // from the session's first state.
        // Its programs keep the folder they started in before trust was given.
        return Ok((ProjectAccess::Trusted, prepass, trusted_list));
    }
    // pi adds the project's extensions to the instances it already has; tau starts the whole
    // list afresh, so the command line's and the user's factories run a second time (T70).
    if let Some(loaded) = &prepass {
        loaded.set.shutdown();
    }
    let loaded = start_extensions(
        &trusted_list,
        mode,
        config,
        settings,
        ProjectAccess::Trusted,
    )
    .await?;
    Ok((ProjectAccess::Trusted, loaded, trusted_list))
}

/// Asks on the terminal (stderr, a line of stdin) whether to trust the folder, naming what
/// waits for it: yes or no for this run, always or never remembered in `trust.json`. Anything
/// else, or no answer, is no.
fn ask_trust_on_terminal(cwd: &std::path::Path) -> (bool, bool) {
    let mut err = io::stderr().lock();
    let _ = writeln!(
        err,
        "This folder has files that change what tau runs or reads:"
    );
    for path in tau_resources::waits_for_trust(cwd) {
        let shown = path
            .strip_prefix(cwd)
            .unwrap_or(&path)
            .display()
            .to_string();
        let _ = writeln!(err, "  {}", oneshot::for_terminal(&shown, false));
    }
    let _ = write!(
        err,
        "Trust {}? [y]es, [n]o, [a]lways, ne[v]er (remembered): ",
        oneshot::for_terminal(&cwd.display().to_string(), false)
    );
    let _ = err.flush();
    drop(err);
    let mut answer = String::new();
    if io::stdin().read_line(&mut answer).is_err() {
        return (false, false);
    }
    match answer.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => (true, false),
        "a" | "always" => (true, true),
        "v" | "never" => (false, true),
        _ => (false, false),
    }
}

/// What starts `entries` again for each ACP session after the first, with the flags the
/// command line gave them.
pub(crate) fn acp_extension_loader(
    entries: Vec<tau_extensions::Entry>,
    mode: RunMode,
    config: SessionConfig,
    settings: Settings,
    flags: std::collections::HashMap<String, serde_json::Value>,
) -> tau_acp::ExtensionLoader {
    let shared = std::sync::Arc::new((entries, config, settings, flags));
    Box::new(move || {
        let shared = std::sync::Arc::clone(&shared);
        Box::pin(async move {
            let (entries, config, settings, flags) = &*shared;
            let access = config.resources.project;
            let loaded = start_extensions(entries, mode, config, settings, access)
                .await
                .map_err(|e| e.to_string())?;
            Ok(loaded.map(|loaded| {
                loaded.set.set_flags(flags);
                tau_acp::AcpExtensions {
                    set: loaded.set,
                    actions: loaded.actions,
                    outlet: loaded.outlet,
                }
            }))
        })
    })
}

/// The extensions' deadlines (settings `extensionTimeouts`; `0` waits for ever).
fn timeouts(settings: &Settings) -> tau_extensions::Timeouts {
    let millis = |key: &str, default: Option<std::time::Duration>| match settings
        .get::<u64>(&format!("extensionTimeouts.{key}"))
    {
        Some(0) => None,
        Some(ms) => Some(std::time::Duration::from_millis(ms)),
        None => default,
    };
    let defaults = tau_extensions::Timeouts::default();
    tau_extensions::Timeouts {
        handler: millis("handlerMs", defaults.handler),
        command: millis("commandMs", defaults.command),
        tool: millis("toolMs", defaults.tool),
    }
}

/// `project_trust` to the loaded extensions: the first `yes` or `no` decides, with whether to
/// remember it; `None` when every handler was undecided (or none watches the event).
async fn ask_project_trust(
    extensions: &tau_extensions::Extensions,
    cwd: &std::path::Path,
) -> Option<(bool, bool)> {
    if !extensions.subscribed("project_trust") {
        return None;
    }
    let mut decision = None;
    let cwd = cwd.display().to_string();
    let event = ExtensionEvent::ProjectTrust { cwd: &cwd }.to_value();
    extensions
        .emit(event, None, |_, result| {
            let result: ProjectTrustResult = take_result(result);
            let remember = result.remember == Some(true);
            match result.trusted.as_deref() {
                Some("yes") => decision = Some((true, remember)),
                Some("no") => decision = Some((false, remember)),
                _ => return std::ops::ControlFlow::Continue(()),
            }
            std::ops::ControlFlow::Break(())
        })
        .await;
    decision
}

/// Starts `entries` (nothing to start is `None`). Any failure is fatal before `ready`.
async fn start_extensions(
    entries: &[tau_extensions::Entry],
    mode: RunMode,
    config: &SessionConfig,
    settings: &Settings,
    project: ProjectAccess,
) -> anyhow::Result<Option<tau_rpc::LoadedExtensions>> {
    if entries.is_empty() {
        return Ok(None);
    }
    let load = tau_extensions::LoadConfig {
        cwd: config.cwd.clone(),
        agent_dir: config.agent_dir.clone(),
        // pi's `ctx.mode`; RPC and ACP modes have someone to answer dialogs (ACP: `confirm`
        // and `select` as permission requests).
        mode: match mode {
            RunMode::Interactive => "interactive",
            RunMode::Rpc => "rpc",
            RunMode::Acp => "acp",
            RunMode::Text => "print",
            RunMode::Json => "json",
        }
        .into(),
        has_ui: matches!(mode, RunMode::Interactive | RunMode::Rpc | RunMode::Acp),
        tau_version: env!("CARGO_PKG_VERSION").into(),
        node: std::env::var_os("TAU_NODE").map_or_else(|| "node".into(), Into::into),
        node_host: tau_extensions::find_node_host(),
        timeouts: timeouts(settings),
        project_trusted: project.trusted(),
        programs_in_project: project.trusted_by_user(),
    };
    // The first state frame carries the model catalog: made while the processes load
    // instead of after (a spare core; no join: whoever needs it first waits for it).
    if let Err(err) = std::thread::Builder::new()
        .name("tau-catalog".into())
        .spawn(|| {
            tau_ai::registry::builtin_models_json();
        })
    {
        tracing::debug!("the catalog is made when first needed: {err}");
    }
    let outlet = std::sync::Arc::new(tau_session::ExtensionOutlet::default());
    let (set, actions) = tau_extensions::Extensions::load(
        entries,
        &load,
        std::sync::Arc::clone(&outlet) as std::sync::Arc<dyn tau_extensions::Outlet>,
    )
    .await
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(Some(tau_rpc::LoadedExtensions {
        set,
        actions,
        outlet,
    }))
}

/// Gives each `--name[=value]` tau does not know to the extension that registered the flag
/// (ext §7.1): a boolean flag is `true` whatever follows it, a string flag needs its value.
/// Flags nobody registered are pi's startup error.
pub(crate) fn claim_flags(
    given: &[(String, Option<String>)],
    extensions: Option<&tau_extensions::Extensions>,
) -> anyhow::Result<std::collections::HashMap<String, serde_json::Value>> {
    let registered: Vec<tau_protocol::extension::FlagRegistration> = extensions
        .map(|e| {
            e.list()
                .into_iter()
                .flat_map(|x| x.manifest.flags.clone())
                .collect()
        })
        .unwrap_or_default();
    let mut values = std::collections::HashMap::new();
    let mut unknown = Vec::new();
    for (name, value) in given {
        match registered.iter().find(|f| &f.name == name) {
            None => unknown.push(format!("--{name}")),
            Some(flag) => match flag.kind {
                tau_protocol::extension::FlagKind::Boolean => {
                    values.insert(name.clone(), serde_json::Value::Bool(true));
                }
                tau_protocol::extension::FlagKind::String => match value {
                    Some(value) => {
                        values.insert(name.clone(), serde_json::Value::String(value.clone()));
                    }
                    None => anyhow::bail!("Extension flag \"--{name}\" requires a value"),
                },
            },
        }
    }
    match unknown.as_slice() {
        [] => Ok(values),
        [one] => anyhow::bail!("Unknown option: {one}"),
        many => anyhow::bail!("Unknown options: {}", many.join(", ")),
    }
}
