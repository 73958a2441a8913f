//! The ACP server: the connection's handlers hand every request to one loop that owns the
//! sessions, so requests are carried out in the order they came, a long turn never holds
//! the connection's dispatch, and a `session/cancel` reaches the loop while a turn streams.
//! Each ACP session is an [`AgentSession`] of its own, with its own event channel; the loop
//! turns those events into `session/update` notifications and answers a `session/prompt`
//! when its run has settled.

use std::collections::HashMap;
use std::future::Future;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::task::Poll;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, AuthMethod, AuthMethodAgent, AuthenticateRequest, AuthenticateResponse,
    AvailableCommand, AvailableCommandInput, AvailableCommandsUpdate, CancelNotification,
    ConfigOptionUpdate, Implementation, InitializeRequest, InitializeResponse, ListSessionsRequest,
    ListSessionsResponse, LoadSessionRequest, LoadSessionResponse, McpCapabilities, McpServer,
    NewSessionRequest, NewSessionResponse, PromptCapabilities, PromptRequest, PromptResponse,
    SessionCapabilities, SessionListCapabilities, SessionNotification, SessionUpdate,
    SetSessionConfigOptionRequest, SetSessionConfigOptionResponse, StopReason,
    UnstructuredCommandInput,
};
use agent_client_protocol::v1::schema::{
    CloseSessionRequest, CloseSessionResponse, ForkSessionRequest, ForkSessionResponse,
    ResumeSessionRequest, ResumeSessionResponse, SessionCloseCapabilities, SessionForkCapabilities,
    SessionResumeCapabilities,
};
use agent_client_protocol::v1::schema::{
    CurrentModeUpdate, SetSessionModeRequest, SetSessionModeResponse,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Client, Lines};
use serde_json::Value;
use tau_ai::registry::Registry;
use tau_protocol::SessionEvent;
use tau_protocol::extension::ExtensionAction;
use tau_resources::ProjectAccess;
use tau_resources::settings::Settings;
use tau_session::carrying_out::Carried;
use tau_session::{
    AgentSession, EventSink, InputSource, Outbound, SessionChoice, SessionConfig, SessionError,
    Submitted, resolve_startup_model, startup_store,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::dialogs::Dialogs;
use crate::files::ClientFiles;
use crate::terminal::ClientTerminals;
use crate::updates::{Context, Translator};
use crate::{AcpError, dialogs, options, prompt, transport};

mod sessions;

/// Capacity of each session's event channel, in records (as RPC mode's writer queue).
const EVENTS_CAPACITY: usize = 1024;

/// Why [`serve`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitReason {
    /// The client closed the connection.
    InputClosed,
    /// A termination signal; the value is the exit code to use.
    Signal(i32),
    /// The output could not be written, or the connection failed.
    OutputFailed,
}

/// A running set of the extensions (the binary's `LoadedExtensions`): the one loaded before
/// the server starts, or one started for a later session.
pub struct AcpExtensions {
    pub set: Arc<tau_extensions::Extensions>,
    pub actions: mpsc::UnboundedReceiver<tau_extensions::Work>,
    pub outlet: Arc<tau_session::ExtensionOutlet>,
}

/// Starts the run's extensions afresh (the same entries, trust and flags as the set loaded at
/// start-up): every session after the first gets a set of its own (decision T103).
pub type ExtensionLoader = Box<
    dyn Fn() -> futures::future::BoxFuture<'static, Result<Option<AcpExtensions>, String>>
        + Send
        + Sync,
>;

/// What a session is made from: the binary's configuration, settings and MCP servers as
/// the trust decision left them, and a way to build the model registry afresh (with the
/// providers extensions registered) for each session.
pub struct Launcher {
    pub config: SessionConfig,
    pub settings: Settings,
    pub make_registry: Box<dyn Fn() -> Registry + Send>,
    /// The MCP servers tau's own configuration names; a client's join them per session.
    pub mcp_servers: Vec<tau_mcp::McpServer>,
    pub mcp_options: tau_mcp::McpOptions,
    /// What the servers may ask of the editor: sampling through its permission requests
    /// (forms are not offered: decision T129).
    pub mcp_client: tau_session::mcp_client::McpClientFeatures,
    pub version: String,
    /// Starts the extensions for each session after the first (none without extensions).
    pub load_extensions: Option<ExtensionLoader>,
    /// The permission mode each session starts in (decision T123).
    pub permission_mode: tau_protocol::PermissionMode,
}

impl Launcher {
    /// The configuration for a session working in `cwd`. The trust decision was made for
    /// the directory tau started in; another directory is not trusted (decision T92).
    fn config_for(&self, cwd: &Path) -> SessionConfig {
        let mut config = self.config.clone();
        if cwd != config.cwd {
            config.cwd = cwd.to_path_buf();
            if config.resources.project.trusted() {
                config.resources.project = ProjectAccess::Untrusted;
            }
        }
        config
    }

    /// Opens (`choice`) or creates a session in `cwd`, its MCP servers started.
    fn open(
        &self,
        cwd: &Path,
        choice: &SessionChoice,
        client_servers: &[McpServer],
        sink: EventSink,
    ) -> Result<AgentSession, AcpError> {
        if !cwd.is_absolute() {
            return Err(AcpError::InvalidParams(format!(
                "cwd must be an absolute path, not \"{}\"",
                cwd.display()
            )));
        }
        let config = self.config_for(cwd);
        let mut registry = (self.make_registry)();
        let startup = resolve_startup_model(&mut registry, &config, &self.settings)
            .map_err(AcpError::Session)?;
        if startup.model.is_none() {
            return Err(AcpError::NoCredentials(NO_MODEL.to_string()));
        }
        let store = startup_store(&config, &self.settings, choice).map_err(AcpError::Session)?;
        let mut session = AgentSession::new(
            config,
            self.settings.clone(),
            registry,
            startup,
            store,
            sink,
        );
        session.settle();
        session.permissions().set_mode(self.permission_mode);
        // The client's servers replace tau's own of the same name, as a later source does.
        let servers =
            tau_mcp::merge_layers([client_mcp_servers(client_servers), self.mcp_servers.clone()]);
        session.start_mcp(servers, self.mcp_options.clone(), self.mcp_client);
        Ok(session)
    }

    /// The folder the sessions of `cwd` are stored in.
    fn session_dir(&self, cwd: &Path) -> PathBuf {
        tau_session::session_dir(&self.config_for(cwd), &self.settings).0
    }

    /// Every folder sessions are stored in: `cwd`'s first, then every project's.
    fn session_dirs(&self, cwd: Option<&Path>) -> Vec<PathBuf> {
        let mut dirs: Vec<PathBuf> = cwd.map(|cwd| self.session_dir(cwd)).into_iter().collect();
        for dir in tau_store::project_session_dirs(&self.config.agent_dir) {
            if !dirs.contains(&dir) {
                dirs.push(dir);
            }
        }
        dirs
    }

    /// The file of the session whose id is exactly `id`.
    fn find_session(&self, cwd: &Path, id: &str) -> Option<PathBuf> {
        tau_store::list_sessions(&self.session_dirs(Some(cwd)), None)
            .into_iter()
            .find(|file| file.id == id)
            .map(|file| file.path)
    }
}

const NO_MODEL: &str = "No models available. Set a provider's API key in the environment \
(for example ANTHROPIC_API_KEY or OPENAI_API_KEY) before starting tau, store one in auth.json \
in tau's agent directory, or add a model to models.json there.";

/// The client's MCP servers in tau's configuration shape (`mcpServers` entries), parsed by
/// tau's MCP support; an entry it cannot use is left out with a warning.
fn client_mcp_servers(servers: &[McpServer]) -> Vec<tau_mcp::McpServer> {
    let mut entries = serde_json::Map::new();
    for server in servers {
        let (name, entry) = match server {
            McpServer::Stdio(stdio) => (
                stdio.name.clone(),
                serde_json::json!({
                    "command": stdio.command.to_string_lossy(),
                    "args": stdio.args,
                    "env": stdio.env.iter()
                        .map(|v| (v.name.clone(), Value::String(v.value.clone())))
                        .collect::<serde_json::Map<_, _>>(),
                }),
            ),
            McpServer::Http(http) => (
                http.name.clone(),
                serde_json::json!({"type": "http", "url": http.url, "headers": headers(&http.headers)}),
            ),
            McpServer::Sse(sse) => (
                sse.name.clone(),
                serde_json::json!({"type": "sse", "url": sse.url, "headers": headers(&sse.headers)}),
            ),
            #[allow(unreachable_patterns)]
            _ => continue,
        };
        entries.insert(name, entry);
    }
    // The client's values are used as given: no `${VAR}` of tau's environment is expanded.
    let parsed = tau_mcp::parse_servers(&entries, &|_| None);
    for error in &parsed.errors {
        tracing::warn!("the client's MCP server: {error}; it is not started");
    }
    parsed.servers
}

fn headers(
    headers: &[agent_client_protocol::v1::schema::HttpHeader],
) -> serde_json::Map<String, Value> {
    headers
        .iter()
        .map(|h| (h.name.clone(), Value::String(h.value.clone())))
        .collect()
}

/// A request or notification, handed from the connection's handlers to the loop.
enum Incoming {
    Initialize(Box<InitializeRequest>, Responder<InitializeResponse>),
    Authenticate(Responder<AuthenticateResponse>),
    NewSession(NewSessionRequest, Responder<NewSessionResponse>),
    LoadSession(LoadSessionRequest, Responder<LoadSessionResponse>),
    ListSessions(ListSessionsRequest, Responder<ListSessionsResponse>),
    Prompt(PromptRequest, Responder<PromptResponse>),
    SetConfigOption(
        SetSessionConfigOptionRequest,
        Responder<SetSessionConfigOptionResponse>,
    ),
    Cancel(CancelNotification),
    Resume(ResumeSessionRequest, Responder<ResumeSessionResponse>),
    Close(CloseSessionRequest, Responder<CloseSessionResponse>),
    Fork(ForkSessionRequest, Responder<ForkSessionResponse>),
    SetMode(SetSessionModeRequest, Responder<SetSessionModeResponse>),
}

/// One open ACP session.
struct Slot {
    session: AgentSession,
    events: mpsc::Receiver<Outbound>,
    translator: Translator,
    /// The prompt whose turn is running, answered when the run settles. Reached only through
    /// `&mut`, which keeps the slot `Sync` so the connection can run on the runtime's workers.
    pending: sync_wrapper::SyncWrapper<Option<Responder<PromptResponse>>>,
    /// `session/cancel` came for the pending prompt.
    cancelled: bool,
    /// Where the session's extensions write for RPC clients, let go of at exit.
    outlet: Option<Arc<tau_session::ExtensionOutlet>>,
}

/// Runs ACP over `input`/`output` until the client closes the connection, `shutdown`
/// resolves (with an exit code), or the output fails.
pub async fn serve<I, O>(
    input: I,
    output: O,
    launcher: Launcher,
    extensions: Option<AcpExtensions>,
    shutdown: impl Future<Output = i32>,
) -> ExitReason
where
    I: Read + Send + 'static,
    O: Write + Send + 'static,
{
    let stdio = match transport::start(input, output) {
        Ok(stdio) => stdio,
        Err(err) => {
            tracing::error!("cannot start the ACP transport: {err}");
            return ExitReason::OutputFailed;
        }
    };
    let transport::Stdio {
        incoming,
        outgoing,
        writer,
        failed,
    } = stdio;
    let (tx, rx) = mpsc::unbounded_channel::<Incoming>();
    macro_rules! forward {
        ($builder:expr, $request:ty, $variant:ident) => {{
            let tx = tx.clone();
            $builder.on_receive_request(
                async move |request: $request, responder, _cx| {
                    // The loop is gone only on the way out: the dropped responder answers.
                    let _ = tx.send(Incoming::$variant(request.into(), responder));
                    Ok(())
                },
                agent_client_protocol::on_receive_request!(),
            )
        }};
    }
    let builder = Agent.v1().name("tau");
    let builder = forward!(builder, InitializeRequest, Initialize);
    let auth_tx = tx.clone();
    let builder = builder.on_receive_request(
        async move |_: AuthenticateRequest, responder, _cx| {
            let _ = auth_tx.send(Incoming::Authenticate(responder));
            Ok(())
        },
        agent_client_protocol::on_receive_request!(),
    );
    let builder = forward!(builder, NewSessionRequest, NewSession);
    let builder = forward!(builder, LoadSessionRequest, LoadSession);
    let builder = forward!(builder, ListSessionsRequest, ListSessions);
    let builder = forward!(builder, ResumeSessionRequest, Resume);
    let builder = forward!(builder, CloseSessionRequest, Close);
    let builder = forward!(builder, ForkSessionRequest, Fork);
    let builder = forward!(builder, PromptRequest, Prompt);
    let builder = forward!(builder, SetSessionConfigOptionRequest, SetConfigOption);
    let builder = forward!(builder, SetSessionModeRequest, SetMode);
    let cancel_tx = tx.clone();
    let shared_dialogs = Arc::new(Dialogs::default());
    let cancel_dialogs = Arc::clone(&shared_dialogs);
    let permission_prompts: Arc<crate::permissions::Prompts> = Arc::default();
    let cancel_prompts = Arc::clone(&permission_prompts);
    let builder = builder.on_receive_notification(
        async move |notification: CancelNotification, _cx| {
            // Here rather than in the loop: the loop may be waiting on the handler whose
            // dialog this withdraws.
            cancel_dialogs.mark_cancelled(&notification.session_id.0);
            cancel_dialogs.cancel_session(&notification.session_id.0);
            cancel_prompts.cancel_session(&notification.session_id.0);
            let _ = cancel_tx.send(Incoming::Cancel(notification));
            Ok(())
        },
        agent_client_protocol::on_receive_notification!(),
    );
    drop(tx);
    let lines = Lines::new(transport::line_sink(outgoing), incoming);
    let (work_tx, work) = mpsc::unbounded_channel();
    let server = Server {
        launcher,
        slots: HashMap::new(),
        spare: extensions,
        work_tx,
        dialogs: shared_dialogs,
        permission_prompts,
        commands: HashMap::new(),
        client_fs: (false, false),
        client_terminal: false,
        client_forms: false,
        http: None,
        stale_mirrors: std::collections::HashSet::new(),
    };
    let result = builder
        .connect_with(lines, async move |cx: ConnectionTo<Client>| {
            Ok(server.run(cx, rx, work, shutdown).await)
        })
        .await;
    // Every sender of the writer's channel is gone with the connection: it drains and ends.
    let joined = tokio::task::spawn_blocking(move || writer.join()).await;
    if !matches!(joined, Ok(Ok(()))) {
        tracing::error!("the stdout writer did not finish cleanly");
    }
    match result {
        Ok(reason) if failed.load(std::sync::atomic::Ordering::Acquire) => {
            let _ = reason;
            ExitReason::OutputFailed
        }
        Ok(reason) => reason,
        Err(err) => {
            tracing::error!("the ACP connection failed: {err}");
            ExitReason::OutputFailed
        }
    }
}

/// At most this many queued extension work items are carried out in one turn of the loop.
const WORK_BURST: usize = 1024;

struct Server {
    launcher: Launcher,
    slots: HashMap<String, Slot>,
    /// The extensions loaded at start-up, until the first session takes them.
    spare: Option<AcpExtensions>,
    /// Where each bound set's work (`action` frames, barriers) comes in, with its session.
    work_tx: mpsc::UnboundedSender<(String, tau_extensions::Work)>,
    dialogs: Arc<Dialogs>,
    /// The core's permission requests open on the wire.
    permission_prompts: Arc<crate::permissions::Prompts>,
    /// The extension command each session runs, cancelled by `session/cancel`.
    commands: HashMap<String, CancellationToken>,
    /// The client offered `fs/read_text_file` and `fs/write_text_file`.
    client_fs: (bool, bool),
    /// The client offered `terminal/*`: `bash` runs in its terminals.
    client_terminal: bool,
    /// The client draws forms (`elicitation.form`): MCP servers' forms go to it.
    client_forms: bool,
    /// One HTTP client for every session: they share its connections to the providers, and
    /// it is made when the first session opens rather than on the first prompt.
    http: Option<tau_ai::provider::HttpClient>,
    /// Sessions whose extensions' mirror a model-registry write left behind: refreshed at the
    /// end of the burst of work it came in (`refresh_mirrors`).
    stale_mirrors: std::collections::HashSet<String>,
}

impl Server {
    async fn run(
        mut self,
        cx: ConnectionTo<Client>,
        mut rx: mpsc::UnboundedReceiver<Incoming>,
        mut work: mpsc::UnboundedReceiver<(String, tau_extensions::Work)>,
        shutdown: impl Future<Output = i32>,
    ) -> ExitReason {
        tokio::pin!(shutdown);
        let closed = cx.incoming_closed();
        tokio::pin!(closed);
        let reason = loop {
            tokio::select! {
                biased;
                code = &mut shutdown => break ExitReason::Signal(code),
                () = &mut closed => {
                    // What was read before the input ended is still answered: a client may
                    // write its requests and close its end (`printf … | tau --mode acp`).
                    while let Ok(incoming) = rx.try_recv() {
                        self.handle(&cx, incoming).await;
                    }
                    break ExitReason::InputClosed;
                }
                Some((id, outbound)) = next_event(&mut self.slots) => {
                    self.on_outbound(&cx, &id, outbound);
                }
                Some((id, item)) = work.recv() => {
                    self.on_work(&id, item).await;
                    // What is already queued goes in the same turn (bounded, so that requests
                    // are not kept waiting), then the mirrors are refreshed once.
                    for _ in 0..WORK_BURST {
                        let Ok((id, item)) = work.try_recv() else {
                            break;
                        };
                        self.on_work(&id, item).await;
                    }
                    self.refresh_mirrors();
                }
                Some(work) = async {
                    match self.spare.as_mut() {
                        Some(spare) => spare.actions.recv().await,
                        None => std::future::pending().await,
                    }
                } => unbound_work(work),
                incoming = rx.recv() => match incoming {
                    Some(incoming) => self.handle(&cx, incoming).await,
                    None => break ExitReason::InputClosed,
                },
            }
        };
        drop(work);
        for slot in self.slots.values_mut() {
            slot.session.runs_mut().abort().await;
        }
        for slot in self.slots.values() {
            if let Some(extensions) = slot.session.extension_binding().extensions() {
                tau_session::extension_hooks::quit(extensions, reason != ExitReason::OutputFailed)
                    .await;
            }
        }
        if let Some(spare) = self.spare.take() {
            spare.set.shutdown();
        }
        // No MCP server may outlive tau.
        for slot in self.slots.values() {
            slot.session.tools().shutdown_mcp().await;
        }
        for outlet in self.slots.values().filter_map(|slot| slot.outlet.as_ref()) {
            outlet.detach().await;
        }
        reason
    }

    async fn handle(&mut self, cx: &ConnectionTo<Client>, incoming: Incoming) {
        // MCP servers change outside any request; what a request makes an extension do must
        // see their tools (T98, as RPC mode does before each command).
        for slot in self.slots.values_mut() {
            slot.session.settle();
        }
        match incoming {
            Incoming::Initialize(request, responder) => {
                let fs = &request.client_capabilities.fs;
                self.client_fs = (fs.read_text_file, fs.write_text_file);
                self.client_terminal = request.client_capabilities.terminal;
                self.client_forms = request
                    .client_capabilities
                    .elicitation
                    .as_ref()
                    .is_some_and(|elicitation| elicitation.form.is_some());
                // Declared to each session's servers from now on.
                self.launcher.mcp_client.elicitation = self.client_forms;
                let _ = responder.respond(self.initialize(&request));
            }
            Incoming::Authenticate(responder) => {
                let has_model = !(self.launcher.make_registry)()
                    .available_models()
                    .is_empty();
                let _ = if has_model {
                    responder.respond(AuthenticateResponse::new())
                } else {
                    responder
                        .respond_with_error(AcpError::NoCredentials(NO_MODEL.to_string()).to_rpc())
                };
            }
            Incoming::NewSession(request, responder) => {
                self.new_session(cx, request, responder).await;
            }
            Incoming::LoadSession(request, responder) => {
                self.load_session(cx, request, responder).await;
            }
            Incoming::ListSessions(request, responder) => {
                let _ = responder.respond(self.list_sessions(&request));
            }
            Incoming::Prompt(request, responder) => self.prompt(cx, request, responder).await,
            Incoming::SetConfigOption(request, responder) => {
                let outcome = self.set_config_option(&request).await;
                let _ = match outcome {
                    Ok(response) => responder.respond(response),
                    Err(err) => responder.respond_with_error(err.to_rpc()),
                };
            }
            Incoming::Resume(request, responder) => {
                self.resume_session(cx, request, responder).await;
            }
            Incoming::Close(request, responder) => {
                self.close_session(cx, request, responder).await;
            }
            Incoming::Fork(request, responder) => {
                self.fork_session(cx, request, responder).await;
            }
            Incoming::Cancel(notification) => {
                let id = notification.session_id.0.to_string();
                self.cancel(cx, &id).await;
            }
            Incoming::SetMode(request, responder) => {
                let _ = match self.set_mode(cx, &request) {
                    Ok(()) => responder.respond(SetSessionModeResponse::new()),
                    Err(err) => responder.respond_with_error(err.to_rpc()),
                };
            }
        }
    }

    fn initialize(&self, _request: &InitializeRequest) -> InitializeResponse {
        let capabilities = AgentCapabilities::new()
            .load_session(true)
            .prompt_capabilities(PromptCapabilities::new().image(true).embedded_context(true))
            .mcp_capabilities(McpCapabilities::new().http(true).sse(true))
            .session_capabilities(
                SessionCapabilities::new()
                    .list(SessionListCapabilities::new())
                    .resume(SessionResumeCapabilities::new())
                    .close(SessionCloseCapabilities::new())
                    .fork(SessionForkCapabilities::new()),
            );
        let agent_dir = self.launcher.config.agent_dir.display();
        let auth_methods =
            vec![
            AuthMethod::Agent(AuthMethodAgent::new("env", "Environment variable").description(
                "Set the provider's API key in the environment tau starts with (for example \
                 ANTHROPIC_API_KEY or OPENAI_API_KEY).",
            )),
            AuthMethod::Agent(
                AuthMethodAgent::new("auth-json", "auth.json").description(format!(
                    "Store the provider's key in {agent_dir}/auth.json, or add a model to \
                     {agent_dir}/models.json."
                )),
            ),
        ];
        // tau speaks protocol v1 only; a client asking for another version gets v1 and
        // decides whether it can go on.
        InitializeResponse::new(ProtocolVersion::V1)
            .agent_capabilities(capabilities)
            .auth_methods(auth_methods)
            .agent_info(Implementation::new("tau", self.launcher.version.clone()).title("tau"))
    }

    /// A new session channel and slot for `session`, its file tools and `bash` through the
    /// client when it offered them.
    fn insert(
        &mut self,
        cx: &ConnectionTo<Client>,
        id: String,
        mut session: AgentSession,
        events: mpsc::Receiver<Outbound>,
    ) {
        let http = self
            .http
            .get_or_insert_with(tau_ai::provider::http_client)
            .clone();
        session.runs_mut().share_client(http);
        let (read, write) = self.client_fs;
        if read || write {
            session.tools().set_client_files(Arc::new(ClientFiles {
                cx: cx.clone(),
                session: id.clone(),
                read,
                write,
            }));
        }
        if self.client_forms {
            session
                .tools()
                .mcp_client()
                .set_forms(Arc::new(crate::forms::ClientForms {
                    cx: cx.clone(),
                    session: id.clone(),
                }));
        }
        if self.client_terminal {
            session
                .tools()
                .set_client_commands(Arc::new(ClientTerminals {
                    cx: cx.clone(),
                    session: id.clone(),
                }));
        }
        let translator = Translator::new(session.workspace().cwd().to_path_buf());
        self.slots.insert(
            id,
            Slot {
                session,
                events,
                translator,
                pending: sync_wrapper::SyncWrapper::new(None),
                cancelled: false,
                outlet: None,
            },
        );
    }

    /// A set of the extensions for a session being opened: the one loaded at start-up for
    /// the first, a new one for each after it (decision T103); none without extensions.
    async fn extensions_for_session(&mut self) -> Result<Option<AcpExtensions>, AcpError> {
        if let Some(spare) = self.spare.take() {
            return Ok(Some(spare));
        }
        let Some(load) = &self.launcher.load_extensions else {
            return Ok(None);
        };
        load().await.map_err(|err| {
            AcpError::Session(format!(
                "the extensions could not start for this session: {err}"
            ))
        })
    }

    /// Binds a set of the extensions to the session `id`: what they write for RPC clients
    /// goes to the dialogs (their `confirm` and `select` as permission requests on this
    /// session), their actions to this session, then `session_start` and the paths
    /// `resources_discover` adds.
    async fn bind_extensions(
        &mut self,
        cx: &ConnectionTo<Client>,
        id: &str,
        loaded: AcpExtensions,
    ) {
        let AcpExtensions {
            set: extensions,
            mut actions,
            outlet,
        } = loaded;
        let Some(slot) = self.slots.get_mut(id) else {
            extensions.shutdown();
            return;
        };
        let (records_tx, records_rx) = mpsc::channel::<Outbound>(EVENTS_CAPACITY);
        outlet.attach(EventSink::new(records_tx)).await;
        slot.outlet = Some(outlet);
        tokio::spawn(dialogs::serve(
            records_rx,
            cx.clone(),
            Arc::clone(&extensions),
            Arc::clone(&self.dialogs),
            id.to_string(),
        ));
        self.dialogs.bind(id, Arc::clone(&extensions));
        // The set's work joins the loop's, marked with its session, in the order it came.
        let work_tx = self.work_tx.clone();
        let session = id.to_string();
        tokio::spawn(async move {
            while let Some(work) = actions.recv().await {
                if work_tx.send((session.clone(), work)).is_err() {
                    break;
                }
            }
        });
        slot.session.set_extensions(Arc::clone(&extensions));
        let cwd = slot.session.workspace().cwd().to_path_buf();
        tau_session::extension_hooks::session_started(&extensions, &cwd)
            .await
            .join(&mut slot.session);
    }

    /// Opens a session (a new one, or one from its file) with its extensions and takes it
    /// in; its id. Nothing is left open when it fails.
    async fn open_slot(
        &mut self,
        cx: &ConnectionTo<Client>,
        cwd: &Path,
        choice: &SessionChoice,
        client_servers: &[McpServer],
    ) -> Result<String, AcpError> {
        let (sink_tx, events) = mpsc::channel(EVENTS_CAPACITY);
        let session = self
            .launcher
            .open(cwd, choice, client_servers, EventSink::new(sink_tx))?;
        let extensions = match self.extensions_for_session().await {
            Ok(extensions) => extensions,
            Err(err) => {
                session.tools().shutdown_mcp().await;
                return Err(err);
            }
        };
        let id = session.conversation().session_id();
        self.insert(cx, id.clone(), session, events);
        if let Some(extensions) = extensions {
            self.bind_extensions(cx, &id, extensions).await;
        }
        Ok(id)
    }

    async fn new_session(
        &mut self,
        cx: &ConnectionTo<Client>,
        request: NewSessionRequest,
        responder: Responder<NewSessionResponse>,
    ) {
        let opened = self
            .open_slot(cx, &request.cwd, &SessionChoice::New, &request.mcp_servers)
            .await;
        let id = match opened {
            Ok(id) => id,
            Err(err) => {
                let _ = responder.respond_with_error(err.to_rpc());
                return;
            }
        };
        // Findable by its id from now on, also by another process (T122).
        self.record_pending(&id);
        let Some(slot) = self.slots.get(&id) else {
            return;
        };
        let response = NewSessionResponse::new(id.clone())
            .config_options(options::current(&slot.session))
            .modes(crate::permissions::modes(slot.session.permissions().mode()));
        let _ = responder.respond(response);
        self.announce_commands(cx, &id);
    }

    async fn load_session(
        &mut self,
        cx: &ConnectionTo<Client>,
        request: LoadSessionRequest,
        responder: Responder<LoadSessionResponse>,
    ) {
        let id = request.session_id.0.to_string();
        // From its file, or from its pending record when it has none yet (T122).
        let opened = self
            .ensure_open(cx, &request.cwd, &id, &request.mcp_servers)
            .await;
        if let Err(err) = opened {
            let _ = responder.respond_with_error(err.to_rpc());
            return;
        }
        let Some(slot) = self.slots.get_mut(&id) else {
            let _ = responder.respond_with_error(AcpError::UnknownSession(id).to_rpc());
            return;
        };
        // The history first, then the answer (the protocol's order), then live updates.
        let updates = slot
            .session
            .conversation()
            .with_messages(|messages| slot.translator.replay(messages));
        for update in updates {
            notify(cx, &id, update);
        }
        let response = LoadSessionResponse::new()
            .config_options(options::current(&slot.session))
            .modes(crate::permissions::modes(slot.session.permissions().mode()));
        let _ = responder.respond(response);
        self.announce_commands(cx, &id);
    }

    /// The sessions stored and pending for the request's folder (`sessions.rs`).
    fn list_sessions(&self, request: &ListSessionsRequest) -> ListSessionsResponse {
        self.list_stored(request)
    }

    async fn prompt(
        &mut self,
        cx: &ConnectionTo<Client>,
        request: PromptRequest,
        responder: Responder<PromptResponse>,
    ) {
        let id = request.session_id.0.to_string();
        let Some(slot) = self.slots.get_mut(&id) else {
            let _ = responder.respond_with_error(AcpError::UnknownSession(id).to_rpc());
            return;
        };
        if slot.pending.get_mut().is_some() {
            let _ = responder.respond_with_error(AcpError::Busy(id).to_rpc());
            return;
        }
        let auto_resize = slot
            .session
            .preferences()
            .settings()
            .get("images.autoResize")
            .unwrap_or(true);
        let prompt =
            prompt::from_blocks(&request.prompt, slot.session.workspace().cwd(), auto_resize);
        if let Some((command, args)) = slot.session.extension_binding().command_for(&prompt.text) {
            let cancel = CancellationToken::new();
            self.commands.insert(id.clone(), cancel.clone());
            run_extension_command(&slot.session, command, args, responder, cancel);
            return;
        }
        let cancel = CancellationToken::new();
        // A cancel that came before this prompt is not for it.
        self.dialogs.take_cancelled(&id);
        let mut submitted = slot
            .session
            .submit(&prompt.text, prompt.images, None, InputSource::Rpc, &cancel)
            .await;
        if let Ok(Submitted::Held(message)) = submitted {
            // The last run is finishing its post-run work: the prompt goes in after it.
            slot.session.runs_mut().finished().await;
            submitted = slot.session.admit(message, None, &cancel).await;
        }
        // Cancelled while in the input path (an `input` handler's dialog was withdrawn):
        // nothing runs.
        if self.dialogs.take_cancelled(&id) && submitted.is_ok() {
            let _ = responder.respond(PromptResponse::new(StopReason::Cancelled));
            self.drain(cx, &id);
            return;
        }
        match submitted {
            Ok(Submitted::Start(launch)) => {
                *slot.pending.get_mut() = Some(responder);
                slot.cancelled = false;
                slot.session.launch(*launch);
            }
            Ok(Submitted::Handled | Submitted::Queued | Submitted::Held(_)) => {
                let _ = responder.respond(PromptResponse::new(StopReason::EndTurn));
            }
            Err(SessionError::NoApiKey(provider)) => {
                let error = AcpError::NoCredentials(SessionError::NoApiKey(provider).to_string());
                let _ = responder.respond_with_error(error.to_rpc());
            }
            Err(err) => {
                let _ = responder.respond_with_error(AcpError::Session(err.to_string()).to_rpc());
            }
        }
        // What the input path already emitted (an expansion's events) goes out now.
        self.drain(cx, &id);
    }

    /// `session/set_mode`: the session's permission mode (decision T123).
    fn set_mode(
        &mut self,
        cx: &ConnectionTo<Client>,
        request: &SetSessionModeRequest,
    ) -> Result<(), AcpError> {
        let id = request.session_id.0.to_string();
        let slot = self
            .slots
            .get_mut(&id)
            .ok_or_else(|| AcpError::UnknownSession(id.clone()))?;
        let mode = tau_protocol::PermissionMode::parse(&request.mode_id.0)
            .ok_or_else(|| AcpError::InvalidParams(format!("no mode \"{}\"", request.mode_id.0)))?;
        if slot.session.permissions().set_mode(mode) {
            notify(
                cx,
                &id,
                SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(mode.as_str())),
            );
        }
        Ok(())
    }

    /// Ends the session's turn: the run is aborted (its last events written), and the
    /// prompt is answered `cancelled` as those events are translated.
    async fn cancel(&mut self, cx: &ConnectionTo<Client>, id: &str) {
        self.dialogs.take_cancelled(id);
        if let Some(command) = self.commands.remove(id) {
            command.cancel();
        }
        let Some(slot) = self.slots.get_mut(id) else {
            return;
        };
        if slot.pending.get_mut().is_some() {
            slot.cancelled = true;
        }
        slot.session.runs_mut().abort().await;
        self.drain(cx, id);
    }

    /// Handles every event the session has queued so far.
    fn drain(&mut self, cx: &ConnectionTo<Client>, id: &str) {
        loop {
            let Some(slot) = self.slots.get_mut(id) else {
                return;
            };
            let Ok(outbound) = slot.events.try_recv() else {
                return;
            };
            self.on_outbound(cx, id, outbound);
        }
    }

    async fn set_config_option(
        &mut self,
        request: &SetSessionConfigOptionRequest,
    ) -> Result<SetSessionConfigOptionResponse, AcpError> {
        let id = request.session_id.0.to_string();
        let slot = self
            .slots
            .get_mut(&id)
            .ok_or_else(|| AcpError::UnknownSession(id.clone()))?;
        let value = request
            .value
            .as_value_id()
            .ok_or_else(|| AcpError::InvalidParams("tau's options take a value id".to_string()))?;
        options::set(&mut slot.session, &request.config_id.0, &value.0).await?;
        let response = SetSessionConfigOptionResponse::new(options::current(&slot.session));
        // Before the first reply, the choice is kept for another process's load (T122).
        self.note_pending_options(&id);
        Ok(response)
    }

    /// One record of a session's output: its events become updates; a run that settled
    /// answers the prompt it was running for.
    fn on_outbound(&mut self, cx: &ConnectionTo<Client>, id: &str, outbound: Outbound) {
        let Outbound::Event(event) = outbound else {
            // RPC-only records (host-tool frames, pre-serialised RPC lines): nothing in ACP.
            return;
        };
        let Some(slot) = self.slots.get_mut(id) else {
            return;
        };
        let session = &slot.session;
        let todos = || session.tools().todo_phases();
        let context = Context {
            todos: &todos,
            context_window: session.models().model().map(|m| m.context_window),
        };
        for update in slot.translator.event(&event, &context) {
            notify(cx, id, update);
        }
        match &*event {
            SessionEvent::PermissionRequest {
                id: request,
                tool_call_id,
                args,
                kind,
                title,
                rule,
                ..
            } => self.permission_prompts.ask(
                cx,
                id,
                std::sync::Arc::clone(slot.session.permissions()),
                crate::permissions::Asked {
                    id: request.clone(),
                    tool_call_id: tool_call_id.clone(),
                    args: args.clone(),
                    kind: *kind,
                    title: title.clone(),
                    rule: rule.clone(),
                },
            ),
            SessionEvent::PermissionWithdrawn { id: request } => {
                self.permission_prompts.withdraw(request);
            }
            SessionEvent::PermissionModeChanged { mode } => notify(
                cx,
                id,
                SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(mode.as_str())),
            ),
            _ => {}
        }
        if let SessionEvent::ThinkingLevelChanged { .. } = *event {
            // Changed by tau (a new model's levels, an extension): the client's select follows.
            let options = options::current(&slot.session);
            notify(
                cx,
                id,
                SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate::new(options)),
            );
        }
        if let SessionEvent::AgentSettled { .. } = *event {
            // The first reply wrote the session file: its pending record is done with (T122).
            sessions::settle_pending(&slot.session, id);
        }
        if let SessionEvent::AgentSettled { aborted } = *event
            && let Some(responder) = slot.pending.get_mut().take()
        {
            let cancelled = std::mem::take(&mut slot.cancelled);
            let last = &slot.translator.last_reply;
            let outcome = if cancelled || aborted {
                Ok(StopReason::Cancelled)
            } else {
                match last.stop_reason {
                    Some(tau_protocol::StopReason::Length) => Ok(StopReason::MaxTokens),
                    Some(tau_protocol::StopReason::Aborted) => Ok(StopReason::Cancelled),
                    Some(tau_protocol::StopReason::Error) => Err(AcpError::Turn(
                        last.error
                            .clone()
                            .unwrap_or_else(|| "the model call failed".to_string()),
                    )),
                    _ => Ok(StopReason::EndTurn),
                }
            };
            let _ = match outcome {
                Ok(reason) => responder.respond(PromptResponse::new(reason)),
                Err(err) => responder.respond_with_error(err.to_rpc()),
            };
        }
    }

    /// `available_commands_update`: extension commands, prompt templates and skills, as
    /// tau's `get_commands` lists them.
    fn announce_commands(&self, cx: &ConnectionTo<Client>, id: &str) {
        let Some(slot) = self.slots.get(id) else {
            return;
        };
        let listed = slot.session.workspace().slash_commands(
            slot.session
                .extension_binding()
                .extensions()
                .map(Arc::as_ref),
        );
        let commands = listed
            .iter()
            .filter_map(|command| {
                let name = command.get("name")?.as_str()?;
                let description = command
                    .get("description")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                Some(AvailableCommand::new(name, description).input(
                    AvailableCommandInput::Unstructured(UnstructuredCommandInput::new("arguments")),
                ))
            })
            .collect();
        notify(
            cx,
            id,
            SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate::new(commands)),
        );
    }

    /// What a session's extensions ask for (their `action` frames): carried out on that
    /// session as far as that needs no RPC client; the rest is refused (decision T92).
    async fn on_work(&mut self, id: &str, work: tau_extensions::Work) {
        match work {
            tau_extensions::Work::Action(request) => {
                let action = match request.frame.parse() {
                    Ok(action) => action,
                    Err(error) => {
                        request.reply(Err(error));
                        return;
                    }
                };
                let Some(slot) = self.slots.get_mut(id) else {
                    request.reply(Err("the session is closed".to_string()));
                    return;
                };
                if tau_session::extension_binding::writes_only_the_registry(&action) {
                    let name = request.frame.action.clone();
                    match slot.session.apply_extension_action(action).await {
                        Ok(outcome) => request.reply(outcome),
                        Err(_) => request.reply(Err(format!("{name}: not carried out"))),
                    }
                    self.stale_mirrors.insert(id.to_string());
                    return;
                }
                if self.stale_mirrors.remove(id) {
                    slot.session.refresh_extension_state();
                }
                let name = request.frame.action.clone();
                if replaces_the_session(&action) {
                    // The editor holds the session by its id (T92).
                    request.reply(Err(format!("{name}: not available in ACP mode")));
                    return;
                }
                // Nothing in ACP interrupts an action's extension events but the session's
                // own `session/cancel`, which aborts the run they belong to.
                let cancel = CancellationToken::new();
                match tau_session::carrying_out::carry_out(&mut slot.session, action, &cancel).await
                {
                    Carried::Answered(outcome) => request.reply(outcome),
                    Carried::Later(answer) => {
                        tokio::spawn(async move { request.reply(answer.await) });
                    }
                    // `shutdown`: the editor owns the process.
                    Carried::FrontEnd(_) => {
                        request.reply(Err(format!("{name}: not available in ACP mode")));
                    }
                }
                slot.session.refresh_extension_state();
            }
            tau_extensions::Work::Record(..) => {}
            tau_extensions::Work::Barrier(done) => {
                // Whoever waits reads the mirror next.
                self.refresh_mirrors();
                let _ = done.send(());
            }
        }
    }

    /// Brings the mirrors that registry writes left behind up to date.
    fn refresh_mirrors(&mut self) {
        for id in std::mem::take(&mut self.stale_mirrors) {
            if let Some(slot) = self.slots.get(&id) {
                slot.session.refresh_extension_state();
            }
        }
    }
}

/// The actions that put another session (or another point of it) in place of the one the
/// editor holds: refused in ACP (T92).
fn replaces_the_session(action: &ExtensionAction) -> bool {
    matches!(
        action,
        ExtensionAction::NewSession { .. }
            | ExtensionAction::SwitchSession { .. }
            | ExtensionAction::Fork { .. }
            | ExtensionAction::NavigateTree { .. }
            | ExtensionAction::Reload
    )
}

/// What the extensions loaded at start-up ask for before any session has them: refused.
fn unbound_work(work: tau_extensions::Work) {
    match work {
        tau_extensions::Work::Action(request) => {
            request.reply(Err("no session is open yet".to_string()));
        }
        tau_extensions::Work::Record(..) => {}
        tau_extensions::Work::Barrier(done) => {
            let _ = done.send(());
        }
    }
}

/// The next record of any session, with the session's id (pending while there is none).
async fn next_event(slots: &mut HashMap<String, Slot>) -> Option<(String, Outbound)> {
    std::future::poll_fn(|task| {
        for (id, slot) in slots.iter_mut() {
            if let Poll::Ready(Some(outbound)) = slot.events.poll_recv(task) {
                return Poll::Ready(Some((id.clone(), outbound)));
            }
        }
        Poll::Pending
    })
    .await
}

fn notify(cx: &ConnectionTo<Client>, id: &str, update: SessionUpdate) {
    if let Err(err) = cx.send_notification(SessionNotification::new(id.to_string(), update)) {
        tracing::debug!("session/update not sent: {err}");
    }
}

/// Runs an extension command beside the loop (its actions come back through it); the
/// prompt is answered when the handler and what it asked for are done, `cancelled` if a
/// `session/cancel` came meanwhile (which also withdrew its dialogs).
fn run_extension_command(
    session: &AgentSession,
    command: tau_extensions::CommandInfo,
    args: String,
    responder: Responder<PromptResponse>,
    cancel: CancellationToken,
) {
    let Some(extensions) = session.extension_binding().extensions().cloned() else {
        let _ = responder.respond(PromptResponse::new(StopReason::EndTurn));
        return;
    };
    tokio::spawn(async move {
        tau_session::extension_hooks::run_command(&extensions, &command, &args).await;
        let reason = if cancel.is_cancelled() {
            StopReason::Cancelled
        } else {
            StopReason::EndTurn
        };
        let _ = responder.respond(PromptResponse::new(reason));
    });
}

/// `time` in UTC as ISO 8601 (`2026-11-26T04:35:08Z`), to the second.
fn rfc3339(time: std::time::SystemTime) -> String {
    let secs = time
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // Days to a civil date (the proleptic Gregorian calendar), after Howard Hinnant.
    let z = i64::try_from(days).unwrap_or(0) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_written_as_utc_iso_8601() {
        let at = |secs| std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
        assert_eq!(rfc3339(at(0)), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(at(951_782_400)), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(at(1_795_667_708)), "2026-11-26T04:35:08Z");
    }
}
