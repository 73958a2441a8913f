//! Everything between a checked command line and a running mode, in the order it must
//! happen: stdout taken for the protocol, the runtime and signal handlers, the trust decision
//! and the extensions it allows, their flags and providers, the one-shot modes' prompts, the
//! session file, the model and the MCP servers. A problem here is fatal before `ready`.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use tau_ai::registry::Registry;
use tau_protocol::PermissionMode;
use tau_resources::ProjectAccess;
use tau_resources::settings::Settings;
use tau_session::{
    AgentSession, EventSink, SessionChoice, SessionConfig, StartupModel, StartupStore,
    resolve_startup_model, startup_store,
};
use tau_store::paths;

use crate::cli::{self, RunMode, RunOptions};
use crate::extensions::{Started, acp_extension_loader, claim_flags, load_extensions};
use crate::process::{TerminationSignals, take_over_stdout};
use crate::{list_models, oneshot, warn};

/// What start-up ends with.
pub(crate) enum Start {
    /// The work is done already (`--list-models`): the exit code.
    Done(u8),
    Serve(Box<Prepared>),
}

/// A run ready for its mode, and the runtime it runs on.
pub(crate) struct Prepared {
    // Fields drop in this order: the extensions are asked to end while the runtime lives.
    pub run: Run,
    pub runtime: tokio::runtime::Runtime,
}

/// What the mode serves.
pub(crate) struct Run {
    pub extensions: Started,
    pub session: SessionParts,
    pub mode: RunMode,
    pub cli: cli::Cli,
    /// The one-shot modes' and the terminal's messages from the command line.
    pub prompts: Vec<oneshot::Prompt>,
    /// JSON mode's first line.
    pub header: Option<serde_json::Value>,
    pub acp_launcher: Option<tau_acp::Launcher>,
    pub agent_dir: PathBuf,
    pub cwd: PathBuf,
    /// Where this folder's sessions are (the terminal's `/resume`).
    pub listing_dir: PathBuf,
    /// An earlier session is continued or opened (the terminal shows its conversation).
    pub resumed: bool,
    /// The `theme` setting, read before the settings move into the session.
    pub theme: Option<String>,
    pub protocol_out: File,
    pub signals: TerminationSignals,
}

/// What the session is made of once the mode's output exists.
pub(crate) struct SessionParts {
    config: SessionConfig,
    settings: Settings,
    registry: Registry,
    startup: StartupModel,
    store: StartupStore,
    mcp: tau_session::mcp::Configured,
    mcp_options: tau_mcp::McpOptions,
    /// The mode tool calls start in, and whether anyone answers when one asks.
    permission_mode: PermissionMode,
    can_ask: bool,
    /// What the MCP servers may ask of this front-end (decision T129).
    mcp_client: tau_session::mcp_client::McpClientFeatures,
}

impl SessionParts {
    /// Whether a model can answer (the one-shot modes stop at once without one).
    pub(crate) fn has_model(&self) -> bool {
        self.startup.model.is_some()
    }

    pub(crate) fn into_session(self, sink: EventSink) -> AgentSession {
        let mut session = AgentSession::new(
            self.config,
            self.settings,
            self.registry,
            self.startup,
            self.store,
            sink,
        );
        session.permissions().set_mode(self.permission_mode);
        if !self.can_ask {
            // A call that would ask is refused at once rather than waiting for ever.
            session.permissions().close();
            session.tools().mcp_client().dialogs().close();
        }
        session.start_mcp(self.mcp.servers, self.mcp_options, self.mcp_client);
        session
    }
}

pub(crate) fn prepare(options: RunOptions) -> anyhow::Result<Start> {
    let agent_dir = paths::agent_dir().ok_or_else(|| {
        anyhow::anyhow!("cannot locate the agent directory: set TAU_AGENT_DIR or HOME")
    })?;
    let cwd = std::env::current_dir()
        .map_err(|e| anyhow::anyhow!("cannot read the working directory: {e}"))?;
    let mut config = session_config(&options, &agent_dir, &cwd);
    // The user's settings only: the project's wait until the project is trusted below.
    let mut settings = Settings::load(&agent_dir, &cwd);
    let mut registry = Registry::from_process_env(&agent_dir);
    let cli = &options.cli;
    // One-shot modes read piped stdin whole before anything starts, as pi does.
    let one_shot =
        matches!(options.mode, RunMode::Text | RunMode::Json) && cli.list_models.is_none();
    let piped = if one_shot {
        oneshot::read_piped_stdin()
    } else {
        None
    };

    let protocol_out = take_over_stdout()?;
    // One worker: a reply's bytes are read, parsed, turned into events and queued for the
    // writer on the same thread, with no hand-off between workers for each delta a model
    // sends (issue 44); blocking work (file tools, session parses) has its own threads.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    // Handlers are installed before `ready` is written, so a host that signals as soon as it
    // sees `ready` always gets the documented exit code.
    let signals = {
        let _context = runtime.enter();
        TerminationSignals::install()
    };
    // The user's own files are reported at once; the project's once they apply.
    for warning in settings.warnings() {
        warn(warning);
    }
    let reported = settings.warnings().len();
    // Trust is decided first: until then nothing of the project's may run or apply.
    let (access, loaded, extension_entries) =
        runtime.block_on(load_extensions(cli, options.mode, &config, &mut settings))?;
    let extensions = Started::new(loaded, runtime.handle().clone());
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
    let flag_values = claim_flags(
        &options.extension_flags,
        extensions.get().map(|e| e.set.as_ref()),
    )?;
    if let Some(loaded) = extensions.get() {
        loaded.set.set_flags(&flag_values);
        // Providers registered while loading count before the model is chosen, as in pi.
        for extension in loaded.set.list() {
            for provider in &extension.manifest.providers {
                registry
                    .register_provider(&provider.name, provider.config.clone())
                    .map_err(|e| anyhow::anyhow!("Extension \"{}\" error: {e}", extension.path))?;
            }
        }
    }
    if let Some(search) = &cli.list_models {
        // pi lists after loading extensions, so the providers they register are listed.
        if let Some(error) = registry.models_json_error() {
            warn(&format!("errors loading models.json:\n{error}"));
        }
        let models = registry.available_models();
        let text = list_models::table(&models, Some(search.as_str()));
        let mut out = protocol_out;
        out.write_all(text.as_bytes())?;
        return Ok(Start::Done(0));
    }
    // Then the `@file` arguments (a missing file is fatal), and the session, both with the
    // settings trust allows.
    let prompts = if one_shot || options.mode == RunMode::Interactive {
        attached_prompts(cli, &cwd, &settings, piped)?
    } else {
        Vec::new()
    };
    let listing_dir = tau_session::session_dir(&config, &settings).0;
    let choice = session_choice(cli);
    let resumed = !matches!(choice, SessionChoice::New);
    let store = startup_store(&config, &settings, &choice).map_err(anyhow::Error::msg)?;
    // JSON mode prints the session header first, as pi does.
    let header = match (&store, options.mode) {
        (StartupStore::Ready(store), RunMode::Json) => serde_json::to_value(store.header()).ok(),
        (StartupStore::Opening(open), RunMode::Json) => serde_json::to_value(open.header()).ok(),
        _ => None,
    };
    let startup =
        resolve_startup_model(&mut registry, &config, &settings).map_err(anyhow::Error::msg)?;
    for warning in &startup.warnings {
        tracing::warn!("{warning}");
    }
    // The MCP servers trust allows, and the command line's; they start with the session
    // (after `ready`, which does not wait for them).
    let mcp = configured_mcp_servers(cli, &cwd, &settings, &config);
    for warning in &mcp.warnings {
        warn(warning);
    }
    let mcp_options = tau_session::mcp::options(&settings);
    let (permission_mode, can_ask) = permission_start(options.mode, cli, &settings);
    let mcp_client = mcp_client_features(options.mode, cli, &settings);
    // ACP mode opens a session per `session/new` or `session/load`, each from these.
    let acp_launcher = (options.mode == RunMode::Acp).then(|| tau_acp::Launcher {
        config: config.clone(),
        settings: settings.clone(),
        make_registry: registry_maker(&extensions, &agent_dir),
        mcp_servers: mcp.servers.clone(),
        mcp_options: mcp_options.clone(),
        mcp_client,
        version: env!("CARGO_PKG_VERSION").to_string(),
        // Each session after the first starts the same extensions afresh (T103).
        load_extensions: extensions.get().is_some().then(|| {
            acp_extension_loader(
                extension_entries,
                options.mode,
                config.clone(),
                settings.clone(),
                flag_values.clone(),
            )
        }),
        permission_mode,
    });
    let theme = settings.get::<String>("theme");
    let run = Run {
        extensions,
        session: SessionParts {
            config,
            settings,
            registry,
            startup,
            store,
            mcp,
            mcp_options,
            permission_mode,
            can_ask,
            mcp_client,
        },
        mode: options.mode,
        cli: options.cli,
        prompts,
        header,
        acp_launcher,
        agent_dir,
        cwd,
        listing_dir,
        resumed,
        theme,
        protocol_out,
        signals,
    };
    Ok(Start::Serve(Box::new(Prepared { run, runtime })))
}

/// What MCP servers may ask of this front-end (decision T129): forms wherever someone
/// answers dialogs (RPC clients, the terminal), sampling asked about in the terminal and
/// refused over RPC unless the host turns it on (`--mcp-sampling`, `mcp.sampling`); the
/// one-shot modes have nobody to ask.
fn mcp_client_features(
    mode: RunMode,
    cli: &cli::Cli,
    settings: &Settings,
) -> tau_session::mcp_client::McpClientFeatures {
    use tau_session::mcp_client::{McpClientFeatures, SamplingPolicy};
    let defaults = match mode {
        RunMode::Interactive => McpClientFeatures {
            sampling: SamplingPolicy::Ask,
            elicitation: true,
        },
        RunMode::Rpc => McpClientFeatures {
            sampling: SamplingPolicy::Off,
            elicitation: true,
        },
        RunMode::Acp => McpClientFeatures {
            sampling: SamplingPolicy::Ask,
            elicitation: false,
        },
        RunMode::Text | RunMode::Json => return McpClientFeatures::NONE,
    };
    let mut features = McpClientFeatures::from_settings(settings, defaults);
    features.sampling = match cli.mcp_sampling.as_deref() {
        Some("off") => SamplingPolicy::Off,
        Some("ask") => SamplingPolicy::Ask,
        Some("allow") => SamplingPolicy::Allow,
        _ => features.sampling,
    };
    features
}

/// The permission mode a session starts in, and whether anyone can answer a request
/// (decision T123): `--permission-mode`, else the settings' `permissions.defaultMode` where a
/// person answers (the terminal, ACP), else what each mode does by default: ACP asks, as
/// editors expect; RPC and the one-shot modes ask nothing, as pi (an RPC client opts in with
/// the flag or `set_permission_mode`).
fn permission_start(mode: RunMode, cli: &cli::Cli, settings: &Settings) -> (PermissionMode, bool) {
    let from_settings = tau_session::permissions::Permissions::mode_in(settings);
    let chosen = match mode {
        RunMode::Acp => cli
            .permission_mode
            .or(from_settings)
            .unwrap_or(PermissionMode::Ask),
        RunMode::Interactive => cli.permission_mode.or(from_settings).unwrap_or_default(),
        RunMode::Rpc | RunMode::Text | RunMode::Json => cli.permission_mode.unwrap_or_default(),
    };
    (chosen, !matches!(mode, RunMode::Text | RunMode::Json))
}

/// The session the command line asks for (it has already refused combinations).
fn session_choice(cli: &cli::Cli) -> SessionChoice {
    if let Some(arg) = &cli.session {
        SessionChoice::Open(arg.clone())
    } else if let Some(id) = &cli.session_id {
        SessionChoice::WithId(id.clone())
    } else if let Some(arg) = &cli.fork {
        SessionChoice::Fork(arg.clone())
    } else if cli.r#continue {
        SessionChoice::Continue
    } else {
        SessionChoice::New
    }
}

/// The command line's messages with their `@file` attachments (a missing file is fatal) and
/// piped stdin, as the one-shot modes and the terminal send them.
fn attached_prompts(
    cli: &cli::Cli,
    cwd: &Path,
    settings: &Settings,
    piped: Option<String>,
) -> anyhow::Result<Vec<oneshot::Prompt>> {
    let files: Vec<String> = cli
        .messages
        .iter()
        .filter_map(|m| m.strip_prefix('@').map(str::to_string))
        .collect();
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let attached = tau_tools::attach::attach_files(
        &files,
        cwd,
        home.as_deref(),
        settings.get("images.autoResize").unwrap_or(true),
    )
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(oneshot::prompts(&cli.messages, piped, attached))
}

/// A fresh registry for each ACP session, with the providers the extensions registered.
fn registry_maker(extensions: &Started, agent_dir: &Path) -> Box<dyn Fn() -> Registry + Send> {
    let providers: Vec<_> = extensions
        .get()
        .iter()
        .flat_map(|loaded| loaded.set.list())
        .flat_map(|extension| extension.manifest.providers.clone())
        .collect();
    let agent_dir = agent_dir.to_path_buf();
    Box::new(move || {
        let mut registry = Registry::from_process_env(&agent_dir);
        for provider in &providers {
            // Checked when tau started: a provider that failed then stopped it.
            let _ = registry.register_provider(&provider.name, provider.config.clone());
        }
        registry
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

/// `--mcp-config` files as paths: `~/` expanded, relative ones taken from `cwd`.
pub(crate) fn mcp_config_files(
    files: &[std::path::PathBuf],
    cwd: &std::path::Path,
) -> Vec<std::path::PathBuf> {
    files
        .iter()
        .map(|file| {
            let file = tau_base::paths::expand_tilde(&file.to_string_lossy());
            if file.is_absolute() {
                file
            } else {
                cwd.join(file)
            }
        })
        .collect()
}

/// The MCP servers trust allows, and the command line's (`--mcp-config`, relative to `cwd`).
fn configured_mcp_servers(
    cli: &cli::Cli,
    cwd: &std::path::Path,
    settings: &Settings,
    config: &SessionConfig,
) -> tau_session::mcp::Configured {
    let files = mcp_config_files(&cli.mcp_config, cwd);
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
