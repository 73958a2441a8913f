//! The `tau` binary: command-line parsing, stdout takeover, signals and exit codes around
//! RPC mode ([`tau_rpc::serve`]) and ACP mode ([`tau_acp::serve`]).

mod alloc_stats;
mod cli;
mod list_models;
mod oneshot;
mod packages;

use std::fs::File;
use std::io::{self, Write};
use std::process::ExitCode;
use tau_protocol::extension_event::{ExtensionEvent, ProjectTrustResult, take_result};

use tau_ai::registry::Registry;
use tau_resources::ProjectAccess;
use tau_resources::settings::Settings;
use tau_rpc::ExitReason;
use tau_session::{
    AgentSession, SessionChoice, SessionConfig, resolve_startup_model, startup_store,
};
use tau_store::paths;

use crate::cli::{Invocation, RunMode, RunOptions};

#[global_allocator]
static GLOBAL: alloc_stats::Counting = alloc_stats::Counting::new();

fn main() -> ExitCode {
    let stats_file = GLOBAL.start_from_env();
    let code = tau_main();
    if let Some(file) = stats_file
        && let Err(err) = std::fs::write(&file, GLOBAL.report())
    {
        warn(&format!("cannot write {}: {err}", file.display()));
    }
    code
}

fn tau_main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    // Package commands and `--export` do their work and exit before any mode starts.
    if let Some(code) = packages::dispatch(&args) {
        return code;
    }
    let invocation = match cli::parse(args) {
        Ok(invocation) => invocation,
        Err(message) => return fail(&message),
    };
    let options = match invocation {
        Invocation::Print(text) => {
            // Help and version are the only things tau prints outside the protocol.
            let mut out = io::stdout().lock();
            let _ = out.write_all(text.as_bytes());
            let _ = out.flush();
            return ExitCode::SUCCESS;
        }
        Invocation::Run(options) => options,
    };
    init_logging(options.cli.verbose);
    for warning in &options.warnings {
        warn(warning);
    }
    match run(*options) {
        Ok(code) => ExitCode::from(code),
        Err(err) => fail(&format!("{err:#}")),
    }
}

/// Writes `Error: <message>` to stderr; exit status 1.
fn fail(message: &str) -> ExitCode {
    let mut err = io::stderr().lock();
    // Messages carry file names, package names and extension errors a project may have
    // chosen: no control sequence of theirs reaches the user's terminal.
    let _ = writeln!(err, "Error: {}", oneshot::for_terminal(message, false));
    ExitCode::FAILURE
}

/// Every warning written so far: the interactive session shows them too, since its screen
/// covers what was written before it started.
static WARNINGS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Writes `Warning: <message>` to stderr and goes on.
fn warn(message: &str) {
    if let Ok(mut warnings) = WARNINGS.lock() {
        warnings.push(message.to_string());
    }
    let _ = writeln!(
        io::stderr().lock(),
        "Warning: {}",
        oneshot::for_terminal(message, false)
    );
}

fn init_logging(verbose: bool) {
    let default = if verbose { "info" } else { "warn" };
    let level = std::env::var("TAU_LOG")
        .ok()
        .and_then(|l| l.parse::<tracing::Level>().ok())
        .unwrap_or_else(|| default.parse().unwrap_or(tracing::Level::WARN));
    // rmcp logs what a server answered as it came (an HTTP 401's body echoing the headers it
    // was sent); tau-mcp reports every server failure itself, with the server's env and
    // header values hidden (decision T96), so rmcp's own lines are left out.
    let targets = tracing_subscriber::filter::Targets::new()
        .with_default(level)
        .with_target("rmcp", tracing_subscriber::filter::LevelFilter::OFF);
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    tracing_subscriber::fmt()
        .with_writer(io::stderr)
        .with_max_level(level)
        .with_ansi(false)
        .with_target(false)
        .without_time()
        .finish()
        .with(targets)
        .init();
}

fn run(options: RunOptions) -> anyhow::Result<u8> {
    let agent_dir = paths::agent_dir().ok_or_else(|| {
        anyhow::anyhow!("cannot locate the agent directory: set TAU_AGENT_DIR or HOME")
    })?;
    let cwd = std::env::current_dir()
        .map_err(|e| anyhow::anyhow!("cannot read the working directory: {e}"))?;
    let mut config = session_config(&options, &agent_dir, &cwd);
    // The user's settings only: the project's wait until the project is trusted below.
    let mut settings = Settings::load(&agent_dir, &cwd);
    let mut registry = Registry::from_process_env(&agent_dir);
    // The CLI has already refused combinations of these.
    let cli = &options.cli;
    let choice = if let Some(arg) = &cli.session {
        SessionChoice::Open(arg.clone())
    } else if let Some(id) = &cli.session_id {
        SessionChoice::WithId(id.clone())
    } else if let Some(arg) = &cli.fork {
        SessionChoice::Fork(arg.clone())
    } else if cli.r#continue {
        SessionChoice::Continue
    } else {
        SessionChoice::New
    };
    // One-shot modes read piped stdin whole before anything starts, as pi does.
    let listing = options.cli.list_models.clone();
    let one_shot = matches!(options.mode, RunMode::Text | RunMode::Json) && listing.is_none();
    let piped = if one_shot {
        oneshot::read_piped_stdin()
    } else {
        None
    };

    let protocol_out = take_over_stdout()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    // Handlers are installed before `ready` is written, so a host that signals as soon as it
    // sees `ready` always gets the documented exit code.
    let signals = {
        let _context = runtime.enter();
        TerminationSignals::install()
    };
    let shape = match options.cli.message_updates {
        cli::MessageUpdates::Full => tau_rpc::UpdateShape::Full,
        cli::MessageUpdates::Lean => tau_rpc::UpdateShape::Lean,
    };
    // The user's own files are reported at once; the project's once they apply.
    for warning in settings.warnings() {
        warn(warning);
    }
    let reported = settings.warnings().len();
    // Trust is decided first: until then nothing of the project's may run or apply.
    let (access, extensions, extension_entries) = runtime.block_on(load_extensions(
        &options.cli,
        options.mode,
        &config,
        &mut settings,
    ))?;
    config.resources.project = access;
    for warning in settings.warnings().iter().skip(reported) {
        warn(warning);
    }
    let held = settings.held_project_files();
    if !held.is_empty() {
        let files: Vec<String> = held.iter().map(|p| p.display().to_string()).collect();
        warn(&format!(
            "ignoring {}: the project is not trusted (start tau with --approve to trust it \
             for this run)",
            files.join(" and ")
        ));
    }
    // Extensions already run when a later step fails: they are asked to end (which needs
    // the runtime's context) before tau exits.
    let shut_down = |extensions: &Option<tau_rpc::LoadedExtensions>| {
        if let Some(loaded) = extensions {
            let _context = runtime.enter();
            loaded.set.shutdown();
        }
    };
    let flag_values = match claim_flags(
        &options.extension_flags,
        extensions.as_ref().map(|e| e.set.as_ref()),
    ) {
        Ok(values) => values,
        Err(err) => {
            shut_down(&extensions);
            return Err(err);
        }
    };
    if let Some(loaded) = &extensions {
        loaded.set.set_flags(&flag_values);
        // Providers registered while loading count before the model is chosen, as in pi.
        for extension in loaded.set.list() {
            for provider in &extension.manifest.providers {
                if let Err(e) = registry.register_provider(&provider.name, provider.config.clone())
                {
                    shut_down(&extensions);
                    anyhow::bail!("Extension \"{}\" error: {e}", extension.path);
                }
            }
        }
    }
    if let Some(search) = listing {
        // pi lists after loading extensions, so the providers they register are listed.
        if let Some(error) = registry.models_json_error() {
            warn(&format!("errors loading models.json:\n{error}"));
        }
        let models = registry.available_models();
        let text = list_models::table(&models, Some(search.as_str()));
        let mut out = protocol_out;
        out.write_all(text.as_bytes())?;
        shut_down(&extensions);
        return Ok(0);
    }
    // Then the `@file` arguments (a missing file is fatal), and the session, both with the
    // settings trust allows.
    let prompts = if one_shot || options.mode == RunMode::Interactive {
        let files: Vec<String> = options
            .cli
            .messages
            .iter()
            .filter_map(|m| m.strip_prefix('@').map(str::to_string))
            .collect();
        let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
        let attached = tau_tools::attach::attach_files(
            &files,
            &cwd,
            home.as_deref(),
            settings.get("images.autoResize").unwrap_or(true),
        );
        match attached {
            Ok(attached) => oneshot::prompts(&options.cli.messages, piped, attached),
            Err(e) => {
                shut_down(&extensions);
                anyhow::bail!("{e}");
            }
        }
    } else {
        Vec::new()
    };
    // The interactive session lists this folder's sessions (`/resume`) and shows the
    // conversation of one it continues.
    let listing_dir = tau_session::session_dir(&config, &settings).0;
    let resumed = !matches!(choice, SessionChoice::New);
    let store = match startup_store(&config, &settings, &choice) {
        Ok(store) => store,
        Err(message) => {
            shut_down(&extensions);
            anyhow::bail!(message);
        }
    };
    // JSON mode prints the session header first, as pi does.
    let header = match (&store, options.mode) {
        (_, RunMode::Rpc | RunMode::Acp | RunMode::Text | RunMode::Interactive) => None,
        (tau_session::StartupStore::Ready(store), RunMode::Json) => {
            serde_json::to_value(store.header()).ok()
        }
        (tau_session::StartupStore::Opening(open), RunMode::Json) => {
            serde_json::to_value(open.header()).ok()
        }
    };
    let startup = match resolve_startup_model(&mut registry, &config, &settings) {
        Ok(startup) => startup,
        Err(message) => {
            shut_down(&extensions);
            anyhow::bail!(message);
        }
    };
    for warning in &startup.warnings {
        tracing::warn!("{warning}");
    }
    let has_model = startup.model.is_some();
    // The MCP servers trust allows, and the command line's; they start with the session
    // (after `ready`, which does not wait for them).
    let mcp = configured_mcp_servers(&options.cli, &cwd, &settings, &config);
    for warning in &mcp.warnings {
        warn(warning);
    }
    let mcp_options = tau_session::mcp::options(&settings);
    // ACP mode opens a session per `session/new` or `session/load`, each from these.
    let acp_launcher = (options.mode == RunMode::Acp).then(|| {
        let providers: Vec<_> = extensions
            .iter()
            .flat_map(|loaded| loaded.set.list())
            .flat_map(|extension| extension.manifest.providers.clone())
            .collect();
        let registry_dir = agent_dir.clone();
        tau_acp::Launcher {
            config: config.clone(),
            settings: settings.clone(),
            make_registry: Box::new(move || {
                let mut registry = Registry::from_process_env(&registry_dir);
                for provider in &providers {
                    // Checked when tau started: a provider that failed then stopped it.
                    let _ = registry.register_provider(&provider.name, provider.config.clone());
                }
                registry
            }),
            mcp_servers: mcp.servers.clone(),
            mcp_options: mcp_options.clone(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            // Each session after the first starts the same extensions afresh (T103).
            load_extensions: extensions.is_some().then(|| {
                acp_extension_loader(
                    extension_entries,
                    options.mode,
                    config.clone(),
                    settings.clone(),
                    flag_values.clone(),
                )
            }),
        }
    });
    // Read before the settings move into the session: the terminal UI picks its colours.
    let theme_setting = settings.get::<String>("theme");
    let make_session = |sink| {
        let mut session = AgentSession::new(config, settings, registry, startup, store, sink);
        session.start_mcp(mcp.servers, mcp_options);
        session
    };
    let version = env!("CARGO_PKG_VERSION");
    let (reason, decided) = match options.mode {
        RunMode::Rpc => {
            let serving = tau_rpc::serve(
                io::stdin(),
                protocol_out,
                version,
                shape,
                make_session,
                extensions,
                signals.first(),
            );
            (runtime.block_on(serving), 0)
        }
        RunMode::Acp => {
            let Some(launcher) = acp_launcher else {
                anyhow::bail!("the ACP launcher was not prepared");
            };
            let extensions = extensions.map(|loaded| tau_acp::AcpExtensions {
                set: loaded.set,
                actions: loaded.actions,
                outlet: loaded.outlet,
            });
            let serving = tau_acp::serve(
                io::stdin(),
                protocol_out,
                launcher,
                extensions,
                signals.first(),
            );
            let reason = match runtime.block_on(serving) {
                tau_acp::ExitReason::InputClosed => ExitReason::InputClosed,
                tau_acp::ExitReason::Signal(code) => ExitReason::Signal(code),
                tau_acp::ExitReason::OutputFailed => ExitReason::OutputFailed,
            };
            (reason, 0)
        }
        RunMode::Interactive => {
            let (commands_in, commands_out) = io::pipe()?;
            let (records_in, records_out) = io::pipe()?;
            let options = tau_tui::Options {
                cwd_label: home_relative(&cwd),
                cwd: cwd.clone(),
                history_file: Some(history_file(&agent_dir, &cwd)),
                session_dir: Some(listing_dir),
                show_history: resumed,
                resume: options.cli.resume,
                initial_prompt: prompts.into_iter().next().map(|p| p.text),
                warnings: WARNINGS.lock().map(|w| w.clone()).unwrap_or_default(),
                theme: theme_setting,
            };
            // What tau and its extension processes write to stderr would land on the screen
            // the UI draws: it goes to a log file in the agent directory while the UI runs.
            let stderr_log = redirect_stderr(&agent_dir);
            let driving = std::thread::Builder::new()
                .name("tau-tui".into())
                .spawn(move || tau_tui::run(records_in, commands_out, protocol_out, options))?;
            // The UI gets pi's lean stream: it adds up the deltas itself.
            let serving = tau_rpc::serve(
                commands_in,
                records_out,
                version,
                tau_rpc::UpdateShape::Lean,
                make_session,
                extensions,
                signals.first(),
            );
            let reason = runtime.block_on(serving);
            let code = match driving.join() {
                Ok(Ok(code)) => code,
                Ok(Err(e)) => {
                    restore_stderr(stderr_log);
                    anyhow::bail!("the terminal UI failed: {e}");
                }
                Err(_) => 1,
            };
            restore_stderr(stderr_log);
            (reason, code)
        }
        RunMode::Text | RunMode::Json => {
            if !has_model {
                shut_down(&extensions);
                anyhow::bail!(
                    "No models available. Set a provider's API key in the environment (for \
                     example ANTHROPIC_API_KEY or OPENAI_API_KEY), store one in auth.json, or \
                     add a model to models.json in the agent directory."
                );
            }
            let driver = oneshot::Driver {
                output: match options.mode {
                    RunMode::Json => oneshot::Output::Json,
                    _ => oneshot::Output::Text,
                },
                prompts,
                header,
                progress: io::IsTerminal::is_terminal(&io::stderr()),
            };
            let (commands_in, commands_out) = io::pipe()?;
            let (records_in, records_out) = io::pipe()?;
            let driving = std::thread::Builder::new()
                .name("tau-oneshot".into())
                .spawn(move || driver.drive(records_in, commands_out, protocol_out))?;
            // The one-shot modes print pi's full event shape.
            let serving = tau_rpc::serve(
                commands_in,
                records_out,
                version,
                tau_rpc::UpdateShape::Full,
                make_session,
                extensions,
                signals.first(),
            );
            let reason = runtime.block_on(serving);
            (reason, driving.join().unwrap_or(1))
        }
    };
    if matches!(reason, ExitReason::Signal(_)) {
        // The aborted run already killed its shells; this catches any that were still
        // starting, since the process exits without running their destructors.
        tau_tools::bash::kill_running_shells();
    }
    // The stdin reader thread may still be blocked in read(); do not wait for it.
    runtime.shutdown_background();
    // The bash overflow logs were for this run's client and model only.
    tau_tools::bash::remove_spill_files();
    Ok(match reason {
        ExitReason::InputClosed => decided,
        ExitReason::OutputFailed => 1,
        ExitReason::Signal(code) => u8::try_from(code).unwrap_or(1),
    })
}

/// The session's configuration from the checked command line, before the trust decision (the
/// project untrusted until `load_extensions` decides).
fn session_config(
    options: &RunOptions,
    agent_dir: &std::path::Path,
    cwd: &std::path::Path,
) -> SessionConfig {
    let session_dir = options.cli.session_dir.as_ref().map(|dir| {
        let dir = tau_base::paths::expand_tilde(&dir.to_string_lossy());
        if dir.is_absolute() {
            dir
        } else {
            cwd.join(dir)
        }
    });
    SessionConfig {
        agent_dir: agent_dir.to_path_buf(),
        cwd: cwd.to_path_buf(),
        session_dir,
        no_session: options.cli.no_session,
        name: options.name.clone(),
        thinking: options.thinking,
        provider: options.cli.provider.clone(),
        model_pattern: options.cli.model.clone(),
        models_scope: options.cli.models.clone(),
        api_key: options.cli.api_key.clone(),
        system_prompt: options.cli.system_prompt.clone(),
        append_system_prompt: options.cli.append_system_prompt.clone(),
        no_context_files: options.cli.no_context_files,
        tools: options.cli.tools.clone(),
        exclude_tools: options.cli.exclude_tools.clone(),
        no_tools: options.cli.no_tools,
        no_builtin_tools: options.cli.no_builtin_tools,
        resources: tau_resources::ResourceOptions {
            skills: options.cli.skill.clone(),
            no_skills: options.cli.no_skills,
            prompt_templates: options.cli.prompt_template.clone(),
            no_prompt_templates: options.cli.no_prompt_templates,
            project: ProjectAccess::Untrusted,
            extension_sources: options.cli.extension.clone(),
        },
    }
}

/// The MCP servers trust allows, and the command line's (`--mcp-config`, relative to `cwd`).
fn configured_mcp_servers(
    cli: &cli::Cli,
    cwd: &std::path::Path,
    settings: &Settings,
    config: &SessionConfig,
) -> tau_session::mcp::Configured {
    let files: Vec<std::path::PathBuf> = cli
        .mcp_config
        .iter()
        .map(|file| {
            let file = tau_base::paths::expand_tilde(&file.to_string_lossy());
            if file.is_absolute() {
                file
            } else {
                cwd.join(file)
            }
        })
        .collect();
    tau_session::mcp::configured_servers(
        tau_session::mcp::McpSources {
            settings,
            cwd,
            project_trusted: config.resources.project.trusted(),
            files: &files,
        },
        &tau_mcp::process_env,
    )
}

/// Decides whether the project is trusted (docs/security.md), applies its settings if so,
/// and starts the run's extensions (`-e`, then the trusted project's and the user's). Trust
/// comes from the user alone, first that applies: `--approve`/`--no-approve`; nothing in the
/// project waiting for trust; an extension of the command line's or the user's answering
/// `project_trust`; the user's `trust.json`; `defaultProjectTrust` in the user's settings;
/// else untrusted (RPC mode cannot ask). Any load failure is fatal before `ready`, as in pi
/// (ext §1.6).
async fn load_extensions(
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
fn acp_extension_loader(
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
fn claim_flags(
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

/// Gives the protocol writer a private handle on stdout and points file descriptor 1 at
/// stderr, so that nothing else in the process (a library, a child that inherits the
/// descriptor) can write into the protocol stream.
fn take_over_stdout() -> anyhow::Result<File> {
    let stdout = io::stdout();
    let private = rustix::io::fcntl_dupfd_cloexec(&stdout, 3)
        .map_err(|e| anyhow::anyhow!("cannot duplicate stdout: {e}"))?;
    rustix::stdio::dup2_stdout(io::stderr())
        .map_err(|e| anyhow::anyhow!("cannot redirect stdout: {e}"))?;
    // A pipe holds 64 KiB by default: a multi-megabyte record (`get_messages` of a long
    // session, a full-shape `message_update` late in a long reply) then crosses it in a
    // hundred writer/reader hand-offs. 1 MiB (Linux's default maximum) needs a sixteenth of
    // them. Not a pipe, or not allowed: nothing changes.
    let _ = rustix::pipe::fcntl_setpipe_size(&private, 1 << 20);
    Ok(File::from(private))
}

/// The folder as the terminal UI's footer shows it: `~/…` below the home directory.
fn home_relative(cwd: &std::path::Path) -> String {
    match std::env::var_os("HOME").map(std::path::PathBuf::from) {
        Some(home) if cwd.starts_with(&home) && home.as_os_str().len() > 1 => format!(
            "~/{}",
            cwd.strip_prefix(&home)
                .map(|p| p.display().to_string())
                .unwrap_or_default()
        )
        .trim_end_matches('/')
        .to_string(),
        _ => cwd.display().to_string(),
    }
}

/// The terminal UI's prompt history for this folder (one file per folder, in the agent
/// directory, named as the folder's default session directory is).
fn history_file(agent_dir: &std::path::Path, cwd: &std::path::Path) -> std::path::PathBuf {
    let sessions = tau_store::paths::default_session_dir(agent_dir, cwd);
    let name = sessions
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "default".into());
    agent_dir.join("history").join(format!("{name}.jsonl"))
}

/// Points stderr (and the stdout the protocol no longer uses) at `<agent dir>/tui.log` while
/// the terminal UI runs; returns the terminal's stderr to restore.
fn redirect_stderr(agent_dir: &std::path::Path) -> Option<rustix::fd::OwnedFd> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(agent_dir.join("tui.log"))
        .ok()?;
    let saved = rustix::io::fcntl_dupfd_cloexec(io::stderr(), 3).ok()?;
    rustix::stdio::dup2_stderr(&log).ok()?;
    let _ = rustix::stdio::dup2_stdout(&log);
    Some(saved)
}

fn restore_stderr(saved: Option<rustix::fd::OwnedFd>) {
    if let Some(saved) = saved {
        let _ = rustix::stdio::dup2_stderr(&saved);
        let _ = rustix::stdio::dup2_stdout(&saved);
    }
}

/// SIGINT, SIGTERM and SIGHUP, caught instead of killing the process.
struct TerminationSignals {
    handlers: Option<[(tokio::signal::unix::Signal, i32); 3]>,
}

impl TerminationSignals {
    /// Must run inside the runtime's context.
    fn install() -> Self {
        use tokio::signal::unix::{SignalKind, signal};
        let handlers = match (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
            signal(SignalKind::hangup()),
        ) {
            (Ok(int), Ok(term), Ok(hup)) => Some([(int, 130), (term, 143), (hup, 129)]),
            _ => {
                tracing::warn!("cannot install signal handlers; signals keep their default action");
                None
            }
        };
        Self { handlers }
    }

    /// Resolves with the exit code for the first signal: SIGINT 130, SIGTERM 143, SIGHUP 129.
    async fn first(self) -> i32 {
        let Some([(mut int, a), (mut term, b), (mut hup, c)]) = self.handlers else {
            return std::future::pending().await;
        };
        tokio::select! {
            _ = int.recv() => a,
            _ = term.recv() => b,
            _ = hup.recv() => c,
        }
    }
}
