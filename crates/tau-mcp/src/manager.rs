//! The servers of a session: starting them in parallel, their state, waiting for one still
//! starting, restarting one that failed or died (on the next call, a bounded number of
//! times), re-listing tools and prompts after a list change, getting a prompt, and shutting
//! everything down. Every message about a server passes its [`Redactor`] first.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::model::{CallToolResult, Prompt, Tool};
use serde_json::{Map, Value};
use tokio::sync::{broadcast, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::client::ClientHost;
use crate::config::{HttpTransport, McpServer, ServerConfig};
use crate::connection::{CallError, ConnectParams, Connection, Progress};
use crate::names::NameAllocator;
use crate::prompt::{ExpandedPrompt, McpPrompt, PromptError, command_name, map_prompt};
use crate::redact::Redactor;
use crate::tool::McpTool;

/// Settings of the manager (from tau's settings; the defaults are Claude Code's).
#[derive(Debug, Clone)]
pub struct McpOptions {
    /// Deadline of each request (`tools/list`, `tools/call`), and the longest a call waits
    /// for a server still starting.
    pub request_timeout: Duration,
    /// Deadline of start-up: the process or connection and the `initialize` handshake.
    pub startup_timeout: Duration,
    /// How many times a server that failed or died is started again by a call.
    pub max_restarts: u32,
    /// The `clientInfo` sent to servers.
    pub client_name: String,
    pub client_version: String,
    /// The least level of the lines a server that logs is asked to send (`logging/setLevel`).
    pub log_level: String,
    /// The user's agent folder: an HTTP server's OAuth tokens are read from (and refreshed
    /// into) its `mcp-auth.json` (decision T127). `None` uses no stored tokens.
    pub agent_dir: Option<std::path::PathBuf>,
}

impl Default for McpOptions {
    fn default() -> Self {
        Self {
            request_timeout: Duration::from_secs(60),
            startup_timeout: Duration::from_secs(30),
            max_restarts: 3,
            client_name: "tau".to_string(),
            client_version: env!("CARGO_PKG_VERSION").to_string(),
            log_level: "info".to_string(),
            agent_dir: None,
        }
    }
}

/// Where a server stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerState {
    Starting,
    Ready,
    /// Failed to start or died; `message` says why (it never holds env or header values).
    Failed {
        message: String,
    },
    /// Shut down with the manager.
    Stopped,
}

/// A server's state, for the host (RPC events and the server list).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerStatus {
    pub name: String,
    /// `"stdio"`, `"http"` or `"sse"`.
    pub transport: &'static str,
    pub state: ServerState,
    /// The server's own names of its tools, as last listed.
    pub tools: Vec<String>,
    /// Restarts made by calls since the start or the last [`McpManager::restart`].
    pub restarts: u32,
    /// The process id of a stdio server while it runs.
    pub pid: Option<u32>,
}

/// Why a manager operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpError {
    #[error("no MCP server is named \"{0}\"")]
    UnknownServer(String),
    #[error("MCP server \"{server}\" is not available: {message}")]
    Unavailable { server: String, message: String },
    #[error("MCP server \"{server}\" is still starting after {} ms", .waited.as_millis())]
    StillStarting { server: String, waited: Duration },
    #[error("MCP server \"{0}\" was shut down")]
    Stopped(String),
}

#[derive(Clone)]
enum Phase {
    Starting,
    Ready(Arc<Connection>),
    Failed(String),
    Stopped,
}

/// The phase with a generation that grows with each start, so a late report of an old
/// connection (its start finishing, its process dying) changes nothing.
#[derive(Clone)]
struct Slot {
    generation: u64,
    phase: Phase,
}

pub(crate) struct Server {
    pub(crate) name: String,
    config: ServerConfig,
    pub(crate) options: Arc<McpOptions>,
    slot: watch::Sender<Slot>,
    restarts: AtomicU32,
    /// The last listed tools: kept while the server is down, so that calling one restarts it.
    tools: Mutex<Option<Vec<Tool>>>,
    /// The last listed prompts (none when the server offers none).
    prompts: Mutex<Vec<Prompt>>,
    /// The last listed resources and templates (none when the server offers none).
    pub(crate) resources: Mutex<crate::resources::Listed>,
    /// URIs subscribed to, subscribed again after a restart.
    pub(crate) subscribed: Mutex<std::collections::BTreeSet<String>>,
    /// Serves what the server asks of the client.
    host: Option<Arc<dyn ClientHost>>,
    /// Whether the working folder is declared as its root.
    roots: bool,
    /// Hides the server's env and header values in every message about it.
    pub(crate) redactor: Arc<Redactor>,
    events: broadcast::Sender<ServerStatus>,
    shutdown: CancellationToken,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

/// The MCP servers of one session. Cheap to clone; every clone is the same set of servers.
#[derive(Clone)]
pub struct McpManager {
    pub(crate) servers: Arc<Vec<Arc<Server>>>,
    events: broadcast::Sender<ServerStatus>,
}

impl std::fmt::Debug for McpManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpManager")
            .field("servers", &self.statuses())
            .finish()
    }
}

impl McpManager {
    /// Starts every server in parallel and returns at once; each is `Starting` until it is
    /// ready or has failed. Must be called inside a Tokio runtime.
    pub fn start(servers: Vec<McpServer>, options: McpOptions) -> Self {
        Self::start_with_host(servers, options, None)
    }

    /// [`McpManager::start`], with `host` serving what servers ask of the client (roots,
    /// sampling, elicitation) and hearing their logs and resource updates.
    pub fn start_with_host(
        servers: Vec<McpServer>,
        options: McpOptions,
        host: Option<Arc<dyn ClientHost>>,
    ) -> Self {
        let options = Arc::new(options);
        let (events, _) = broadcast::channel(64);
        let servers: Vec<Arc<Server>> = servers
            .into_iter()
            .map(|server| {
                let redactor = Arc::new(Redactor::for_server(&server));
                let (slot, _) = watch::channel(Slot {
                    generation: 0,
                    phase: Phase::Starting,
                });
                Arc::new(Server {
                    name: server.name,
                    config: server.config,
                    options: options.clone(),
                    slot,
                    restarts: AtomicU32::new(0),
                    tools: Mutex::new(None),
                    prompts: Mutex::new(Vec::new()),
                    resources: Mutex::default(),
                    subscribed: Mutex::default(),
                    host: host.clone(),
                    roots: server.roots,
                    redactor,
                    events: events.clone(),
                    shutdown: CancellationToken::new(),
                    tasks: Mutex::new(Vec::new()),
                })
            })
            .collect();
        for server in &servers {
            server.emit();
            server.spawn_connect(0);
        }
        Self {
            servers: Arc::new(servers),
            events,
        }
    }

    /// Every server's state, in configuration order.
    pub fn statuses(&self) -> Vec<ServerStatus> {
        self.servers.iter().map(|server| server.status()).collect()
    }

    /// One server's state.
    pub fn status(&self, name: &str) -> Option<ServerStatus> {
        self.server(name).ok().map(|server| server.status())
    }

    /// Each change of a server's state, as it happens.
    pub fn subscribe(&self) -> broadcast::Receiver<ServerStatus> {
        self.events.subscribe()
    }

    /// Waits until no server is starting, or `timeout` has passed; true when none is.
    pub async fn wait_settled(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        for server in self.servers.iter() {
            let mut slot = server.slot.subscribe();
            let settled = tokio::time::timeout_at(
                deadline,
                slot.wait_for(|slot| !matches!(slot.phase, Phase::Starting)),
            )
            .await;
            if !matches!(settled, Ok(Ok(_))) {
                return false;
            }
        }
        true
    }

    /// The tools of every server, named `<server>_<tool>` (see [`crate::names`]); names in
    /// `reserved` (built-in and extension tools) are not handed out. A server whose tool list
    /// changed since it was listed is listed again first. A server that is down keeps its
    /// last tools, so that calling one restarts it; one that never started has none.
    pub async fn tools<I, S>(&self, reserved: I) -> Vec<Arc<McpTool>>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let relists = self.servers.iter().map(|server| server.refresh_tools());
        futures_util::future::join_all(relists).await;
        self.current_tools(reserved)
    }

    /// The tools as last listed, named as [`McpManager::tools`] names them, without listing
    /// anything again: for callers that cannot wait (a server relists on its own when it
    /// announces `tools/list_changed`).
    pub fn current_tools<I, S>(&self, reserved: I) -> Vec<Arc<McpTool>>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut names = NameAllocator::new(reserved);
        let mut tools = Vec::new();
        for server in self.servers.iter() {
            let listed = server
                .tools
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            for tool in listed.unwrap_or_default() {
                let name = names.allocate(&server.name, &tool.name);
                tools.push(Arc::new(McpTool::new(server.clone(), name, &tool)));
            }
        }
        tools
    }

    /// The prompts of every server as last listed, each as its command
    /// (`mcp:<server>:<prompt>`, see [`crate::prompt`]); a second prompt whose command would
    /// repeat one gets `_2`, `_3`, ….
    pub fn current_prompts(&self) -> Vec<McpPrompt> {
        let mut taken = std::collections::HashSet::new();
        let mut prompts = Vec::new();
        for server in self.servers.iter() {
            let listed = server
                .prompts
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            for prompt in listed {
                let base = command_name(&server.name, &prompt.name);
                let mut command = base.clone();
                let mut counter = 2u64;
                while !taken.insert(command.clone()) {
                    command = format!("{base}_{counter}");
                    counter += 1;
                }
                prompts.push(McpPrompt::new(&server.name, command, &prompt));
            }
        }
        prompts
    }

    /// The prompt whose command is `command` (without the slash).
    pub fn prompt(&self, command: &str) -> Option<McpPrompt> {
        if !command.starts_with(crate::prompt::COMMAND_PREFIX) {
            return None;
        }
        self.current_prompts()
            .into_iter()
            .find(|prompt| prompt.command == command)
    }

    /// `prompts/get` of `prompt` with `arguments`, within the request deadline (a server
    /// starting is waited for, one down is started again as for a call); `cancel` gives up.
    pub async fn get_prompt(
        &self,
        prompt: &McpPrompt,
        arguments: Map<String, Value>,
        cancel: &CancellationToken,
    ) -> Result<ExpandedPrompt, PromptError> {
        let failed = |message: String| PromptError::Server {
            command: prompt.command.clone(),
            message,
        };
        let server = self
            .server(&prompt.server)
            .map_err(|error| failed(error.to_string()))?;
        server
            .get_prompt(&prompt.name, arguments, cancel)
            .await
            .map(map_prompt)
            .map_err(failed)
    }

    /// Whether any server is still starting.
    pub fn any_starting(&self) -> bool {
        self.servers
            .iter()
            .any(|server| matches!(server.slot.borrow().phase, Phase::Starting))
    }

    /// Starts a server again (the RPC command): closes its connection if it has one and
    /// resets its count of restarts. Returns once the new start is under way.
    pub async fn restart(&self, name: &str) -> Result<(), McpError> {
        let server = self.server(name)?;
        server.restarts.store(0, Ordering::SeqCst);
        let mut old = None;
        let mut generation = 0;
        let started = server.slot.send_if_modified(|slot| {
            if matches!(slot.phase, Phase::Stopped) {
                return false;
            }
            if let Phase::Ready(connection) = &slot.phase {
                old = Some(connection.clone());
            }
            slot.generation += 1;
            generation = slot.generation;
            slot.phase = Phase::Starting;
            true
        });
        if !started {
            return Err(McpError::Stopped(name.to_string()));
        }
        if let Some(old) = old {
            old.close().await;
        }
        server.emit();
        server.spawn_connect(generation);
        Ok(())
    }

    /// Closes every server and waits until their processes are gone.
    pub async fn shutdown(&self) {
        let closing = self.servers.iter().map(|server| server.stop());
        futures_util::future::join_all(closing).await;
    }

    /// Calls `tool` (the server's own name) on `server` as [`McpTool`] does, for callers that
    /// hold no tool object.
    pub async fn call_tool(
        &self,
        server: &str,
        tool: &str,
        arguments: Map<String, Value>,
    ) -> Result<CallToolResult, String> {
        let server = self.server(server).map_err(|error| error.to_string())?;
        server
            .call(tool, arguments, &CancellationToken::new(), |_| {})
            .await
    }

    fn server(&self, name: &str) -> Result<&Arc<Server>, McpError> {
        self.servers
            .iter()
            .find(|server| server.name == name)
            .ok_or_else(|| McpError::UnknownServer(name.to_string()))
    }
}

impl Server {
    fn status(&self) -> ServerStatus {
        let slot = self.slot.borrow().clone();
        let (state, pid) = match &slot.phase {
            Phase::Starting => (ServerState::Starting, None),
            Phase::Ready(connection) => (ServerState::Ready, connection.pid()),
            Phase::Failed(message) => (
                ServerState::Failed {
                    message: message.clone(),
                },
                None,
            ),
            Phase::Stopped => (ServerState::Stopped, None),
        };
        let tools = self
            .tools
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(|tools| tools.iter().map(|tool| tool.name.to_string()).collect())
            .unwrap_or_default();
        ServerStatus {
            name: self.name.clone(),
            transport: match &self.config {
                ServerConfig::Stdio(_) => "stdio",
                ServerConfig::Http(http) if http.transport == HttpTransport::Sse => "sse",
                ServerConfig::Http(_) => "http",
            },
            state,
            tools,
            restarts: self.restarts.load(Ordering::SeqCst),
            pid,
        }
    }

    fn emit(&self) {
        // Nobody listening is fine.
        let _ = self.events.send(self.status());
    }

    fn spawn_connect(self: &Arc<Self>, generation: u64) {
        let server = self.clone();
        let task = tokio::spawn(async move { server.connect(generation).await });
        let mut tasks = self.tasks.lock().unwrap_or_else(PoisonError::into_inner);
        tasks.retain(|task| !task.is_finished());
        tasks.push(task);
    }

    async fn connect(self: Arc<Self>, generation: u64) {
        let weak = Arc::downgrade(&self);
        let params = ConnectParams {
            client_name: &self.options.client_name,
            client_version: &self.options.client_version,
            startup_timeout: self.options.startup_timeout,
            redactor: self.redactor.clone(),
            server: &self.name,
            host: self.host.clone(),
            roots: self.roots,
            log_level: &self.options.log_level,
            agent_dir: self.options.agent_dir.as_deref(),
        };
        let on_closed = move |message: String| {
            if let Some(server) = weak.upgrade() {
                server.connection_lost(generation, message);
            }
        };
        let established = tokio::select! {
            // Dropping a start under way drops its transport, which kills the process.
            () = self.shutdown.cancelled() => return,
            established = Connection::establish(&self.config, params, on_closed) => established,
        };
        let outcome = match established {
            Ok(connection) => {
                // The lists at once: prompts and resources cost the start no extra round trip.
                let (listed, prompts, resources) = tokio::select! {
                    () = self.shutdown.cancelled() => {
                        connection.close().await;
                        return;
                    }
                    lists = async {
                        tokio::join!(
                            connection.list_tools(self.options.request_timeout),
                            self.fetch_prompts(&connection),
                            self.fetch_resources(&connection),
                        )
                    } => lists,
                };
                match listed {
                    Ok(tools) => {
                        *self.tools.lock().unwrap_or_else(PoisonError::into_inner) = Some(tools);
                        *self.prompts.lock().unwrap_or_else(PoisonError::into_inner) = prompts;
                        *self
                            .resources
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner) = resources;
                        self.resubscribe(&connection);
                        Ok(connection)
                    }
                    Err(error) => {
                        connection.close().await;
                        Err(format!("tools/list failed: {error}"))
                    }
                }
            }
            Err(message) => Err(message),
        };
        let outcome = outcome.map_err(|message| self.redactor.redact_owned(message));
        let mut superseded = None;
        let changed = self.slot.send_if_modified(|slot| {
            if slot.generation != generation || !matches!(slot.phase, Phase::Starting) {
                if let Ok(connection) = &outcome {
                    superseded = Some(connection.clone());
                }
                return false;
            }
            slot.phase = match &outcome {
                Ok(connection) => Phase::Ready(connection.clone()),
                Err(message) => Phase::Failed(message.clone()),
            };
            true
        });
        if let Some(connection) = superseded {
            connection.close().await;
        }
        if changed {
            match &outcome {
                Ok(connection) => self.spawn_relister(connection),
                Err(message) => tracing::warn!(server = %self.name, "MCP server failed: {message}"),
            }
            self.emit();
        }
    }

    /// Lists the tools again as soon as the server says they changed, so that the
    /// synchronous [`McpManager::current_tools`] (and the status) follow without waiting for
    /// the next [`McpManager::tools`]. Ends with the connection or the manager.
    fn spawn_relister(self: &Arc<Self>, connection: &Connection) {
        let (changed, closed) = connection.tool_changes();
        let shutdown = self.shutdown.clone();
        // Weak: the task must not keep a server alive that everyone else dropped.
        let weak = Arc::downgrade(self);
        let task = tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = closed.cancelled() => return,
                    () = shutdown.cancelled() => return,
                    () = changed.notified() => {}
                }
                let Some(server) = weak.upgrade() else {
                    return;
                };
                server.refresh_tools().await;
                server.refresh_prompts().await;
                server.refresh_resources().await;
            }
        });
        let mut tasks = self.tasks.lock().unwrap_or_else(PoisonError::into_inner);
        tasks.retain(|task| !task.is_finished());
        tasks.push(task);
    }

    fn connection_lost(&self, generation: u64, message: String) {
        let message = self.redactor.redact_owned(message);
        let changed = self.slot.send_if_modified(|slot| {
            if slot.generation != generation || !matches!(slot.phase, Phase::Ready(_)) {
                return false;
            }
            slot.phase = Phase::Failed(message.clone());
            true
        });
        if changed {
            tracing::warn!(server = %self.name, "MCP server stopped: {message}");
            self.emit();
        }
    }

    /// A live connection: waits for one starting, restarts one failed or dead while the
    /// restarts last, all within the request deadline.
    async fn connection(self: &Arc<Self>, deadline: Instant) -> Result<Arc<Connection>, McpError> {
        loop {
            let slot = self.slot.borrow().clone();
            match slot.phase {
                Phase::Ready(connection) if !connection.is_closed() => return Ok(connection),
                Phase::Stopped => return Err(McpError::Stopped(self.name.clone())),
                Phase::Starting => {
                    let mut watcher = self.slot.subscribe();
                    let waited = tokio::time::timeout_at(
                        deadline,
                        watcher.wait_for(|now| {
                            now.generation != slot.generation
                                || !matches!(now.phase, Phase::Starting)
                        }),
                    )
                    .await;
                    if waited.is_err() {
                        return Err(McpError::StillStarting {
                            server: self.name.clone(),
                            waited: self.options.request_timeout,
                        });
                    }
                }
                Phase::Ready(_) | Phase::Failed(_) => {
                    let message = match &slot.phase {
                        Phase::Failed(message) => message.clone(),
                        _ => "the server closed the connection".to_string(),
                    };
                    self.restart_after_failure(slot.generation, message)?;
                }
            }
        }
    }

    /// Starts a failed or dead server again unless its restarts are used up. Another caller
    /// may have restarted it already; then this only returns so the caller looks again.
    fn restart_after_failure(
        self: &Arc<Self>,
        seen_generation: u64,
        message: String,
    ) -> Result<(), McpError> {
        let max = self.options.max_restarts;
        let mut exhausted = false;
        let mut generation = 0;
        let mut old = None;
        let restarted = self.slot.send_if_modified(|slot| {
            if slot.generation != seen_generation {
                return false;
            }
            if self.restarts.load(Ordering::SeqCst) >= max {
                exhausted = true;
                return false;
            }
            self.restarts.fetch_add(1, Ordering::SeqCst);
            if let Phase::Ready(connection) = &slot.phase {
                old = Some(connection.clone());
            }
            slot.generation += 1;
            generation = slot.generation;
            slot.phase = Phase::Starting;
            true
        });
        if exhausted {
            return Err(McpError::Unavailable {
                server: self.name.clone(),
                message: format!("{message} (not restarted again after {max} restarts)"),
            });
        }
        if restarted {
            tracing::info!(server = %self.name, "restarting MCP server");
            if let Some(old) = old {
                tokio::spawn(async move { old.close().await });
            }
            self.emit();
            self.spawn_connect(generation);
        }
        Ok(())
    }

    /// The live connection, if the server is ready (no waiting, no restart).
    pub(crate) fn ready_connection(&self) -> Option<Arc<Connection>> {
        match &self.slot.borrow().phase {
            Phase::Ready(connection) if !connection.is_closed() => Some(connection.clone()),
            _ => None,
        }
    }

    /// Lists the tools again when the server said they changed.
    async fn refresh_tools(&self) {
        let Phase::Ready(connection) = self.slot.borrow().phase.clone() else {
            return;
        };
        if !connection.tools_stale() || connection.is_closed() {
            return;
        }
        match connection.list_tools(self.options.request_timeout).await {
            Ok(tools) => {
                *self.tools.lock().unwrap_or_else(PoisonError::into_inner) = Some(tools);
                self.emit();
            }
            // The old list stays; the next call of `tools()` tries again.
            Err(error) => tracing::warn!(server = %self.name, "tools/list failed: {error}"),
        }
    }

    /// The prompts of a server that offers them; a failure leaves it without prompts (its
    /// tools still work).
    async fn fetch_prompts(&self, connection: &Connection) -> Vec<Prompt> {
        if !connection.has_prompts() {
            return Vec::new();
        }
        match connection.list_prompts(self.options.request_timeout).await {
            Ok(prompts) => prompts,
            Err(error) => {
                let error = self.redactor.redact_owned(error.to_string());
                tracing::warn!(server = %self.name, "prompts/list failed: {error}");
                Vec::new()
            }
        }
    }

    /// Lists the prompts again when the server said they changed.
    async fn refresh_prompts(&self) {
        let Phase::Ready(connection) = self.slot.borrow().phase.clone() else {
            return;
        };
        if connection.prompts_stale() && !connection.is_closed() {
            let prompts = self.fetch_prompts(&connection).await;
            *self.prompts.lock().unwrap_or_else(PoisonError::into_inner) = prompts;
        }
    }

    /// The server's connection for one request, waiting for a start within the request's
    /// deadline, and what is left of that deadline afterwards (at least a moment).
    pub(crate) async fn connection_for_request(
        self: &Arc<Self>,
        cancel: &CancellationToken,
    ) -> Result<(Arc<Connection>, Duration), String> {
        let deadline = Instant::now() + self.options.request_timeout;
        let connection = tokio::select! {
            () = cancel.cancelled() => return Err(CallError::Aborted.to_string()),
            connection = self.connection(deadline) => connection.map_err(|error| error.to_string())?,
        };
        let remaining = deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1));
        Ok((connection, remaining))
    }

    async fn get_prompt(
        self: &Arc<Self>,
        name: &str,
        arguments: Map<String, Value>,
        cancel: &CancellationToken,
    ) -> Result<rmcp::model::GetPromptResult, String> {
        let timeout = self.options.request_timeout;
        let (connection, remaining) = self.connection_for_request(cancel).await?;
        connection
            .get_prompt(name, arguments, remaining, cancel)
            .await
            .map_err(|error| match error {
                CallError::Timeout(_) => format!("timed out after {} ms", timeout.as_millis()),
                other => other.to_string(),
            })
            .map_err(|message| self.redactor.redact_owned(message))
    }

    pub(crate) async fn call(
        self: &Arc<Self>,
        tool: &str,
        arguments: Map<String, Value>,
        cancel: &CancellationToken,
        on_progress: impl FnMut(Progress),
    ) -> Result<CallToolResult, String> {
        let timeout = self.options.request_timeout;
        let (connection, remaining) = self.connection_for_request(cancel).await?;
        let result = connection
            .call_tool(tool, arguments, remaining, cancel, on_progress)
            .await
            .map_err(|error| match error {
                CallError::Aborted => error.to_string(),
                CallError::Closed => format!(
                    "MCP server \"{}\" closed the connection during the call",
                    self.name
                ),
                // The deadline the user configured, not what was left of it after a start.
                CallError::Timeout(_) => format!(
                    "MCP server \"{}\": timed out after {} ms",
                    self.name,
                    timeout.as_millis()
                ),
                other => format!("MCP server \"{}\": {other}", self.name),
            });
        result.map_err(|message| self.redactor.redact_owned(message))
    }

    async fn stop(&self) {
        self.shutdown.cancel();
        let mut old = None;
        self.slot.send_modify(|slot| {
            if let Phase::Ready(connection) = &slot.phase {
                old = Some(connection.clone());
            }
            slot.generation += 1;
            slot.phase = Phase::Stopped;
        });
        if let Some(old) = old {
            old.close().await;
        }
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(PoisonError::into_inner));
        for task in tasks {
            let _ = task.await;
        }
        self.emit();
    }
}

impl crate::tool::ToolServer for Server {
    fn name(&self) -> &str {
        &self.name
    }

    fn call<'a>(
        self: Arc<Self>,
        tool: &'a str,
        arguments: Map<String, Value>,
        cancel: &'a CancellationToken,
        on_progress: Box<dyn FnMut(Progress) + Send + 'a>,
    ) -> futures_util::future::BoxFuture<'a, Result<rmcp::model::CallToolResult, String>> {
        Box::pin(async move { Server::call(&self, tool, arguments, cancel, on_progress).await })
    }

    fn redact(&self, message: String) -> String {
        self.redactor.redact_owned(message)
    }
}
