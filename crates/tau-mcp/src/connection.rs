//! One live connection to one server: the transport (a child process, Streamable HTTP or
//! HTTP+SSE), rmcp's client service over it, the notifications it receives (progress, tool
//! and prompt list changes), one `tools/call` with deadline, progress and cancellation,
//! `prompts/get`, and closing it so that no process is left behind.

use std::collections::{HashMap, VecDeque};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::StreamExt;
use process_wrap::tokio::{CommandWrap, KillOnDrop};
use rmcp::handler::client::progress::ProgressDispatcher;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, CancelledNotificationParam, ClientConfig, ClientRequest,
    GetPromptRequestParams, GetPromptResult, Implementation, Prompt, ProtocolVersion,
    ReadResourceRequestParams, ReadResourceResult, Request, RequestId, Resource, ResourceTemplate,
    ServerResult, SubscribeRequestParams, Tool,
};
use rmcp::service::{PeerRequestOptions, RoleClient, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{Peer, ServiceError, ServiceExt};
use serde_json::{Map, Value};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::ChildStderr;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::client::{ClientHost, Handler};
use crate::config::{HttpConfig, HttpTransport, ServerConfig, StdioConfig};
use crate::redact::Redactor;
use crate::sse::SseTransport;

/// How many of a server's last stderr lines are kept for its failure message.
const STDERR_TAIL_LINES: usize = 10;
/// How long closing waits for rmcp's own shutdown (stdin closed, then SIGTERM, then kill;
/// up to 3 s each) before killing the process group itself.
const CLOSE_WAIT: Duration = Duration::from_secs(8);

/// Why a call did not produce a result.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CallError {
    #[error("Operation aborted")]
    Aborted,
    #[error("timed out after {} ms", .0.as_millis())]
    Timeout(Duration),
    #[error("the connection to the server is closed")]
    Closed,
    #[error("{0}")]
    Protocol(String),
}

/// A progress report of a running call.
#[derive(Debug, Clone)]
pub(crate) struct Progress {
    pub progress: f64,
    pub total: Option<f64>,
    pub message: Option<String>,
}

pub(crate) struct Connection {
    peer: Peer<RoleClient>,
    progress: ProgressDispatcher,
    tools_stale: Arc<AtomicBool>,
    prompts_stale: Arc<AtomicBool>,
    resources_stale: Arc<AtomicBool>,
    tools_changed: Arc<Notify>,
    /// Cancels rmcp's service loop, which then closes the transport.
    service_cancel: CancellationToken,
    monitor: Mutex<Option<JoinHandle<()>>>,
    guard: ProcessGuard,
}

/// What establishing a connection needs besides the configuration.
pub(crate) struct ConnectParams<'a> {
    pub client_name: &'a str,
    pub client_version: &'a str,
    pub startup_timeout: Duration,
    /// Hides the server's secrets in the stderr lines it logs.
    pub redactor: Arc<Redactor>,
    /// The server's name, for what the host is told.
    pub server: &'a str,
    /// Serves what the server asks of the client.
    pub host: Option<Arc<dyn ClientHost>>,
    /// Whether `roots` is declared.
    pub roots: bool,
    /// Sent as `logging/setLevel` to a server that logs.
    pub log_level: &'a str,
    /// The user's agent folder, where `tau mcp login` keeps the tokens (oauth.rs).
    pub agent_dir: Option<&'a std::path::Path>,
}

impl Connection {
    /// Starts the transport and runs the `initialize` handshake. `on_closed` runs once when
    /// the connection ends without [`Connection::close`] (the server exited or hung up).
    pub(crate) async fn establish<F>(
        config: &ServerConfig,
        params: ConnectParams<'_>,
        on_closed: F,
    ) -> Result<Arc<Self>, String>
    where
        F: FnOnce(String) + Send + 'static,
    {
        let tools_stale = Arc::new(AtomicBool::new(false));
        let prompts_stale = Arc::new(AtomicBool::new(false));
        let resources_stale = Arc::new(AtomicBool::new(false));
        let tools_changed = Arc::new(Notify::new());
        let handler = Handler {
            server: params.server.to_string(),
            host: params.host.clone(),
            progress: ProgressDispatcher::new(),
            tools_stale: tools_stale.clone(),
            prompts_stale: prompts_stale.clone(),
            resources_stale: resources_stale.clone(),
            tools_changed: tools_changed.clone(),
            // Pinned to the newest version that still has the `initialize` handshake: the
            // servers people run speak it, and with it a server may send progress and
            // list-changed notifications without a `subscriptions/listen` stream.
            info: ClientConfig::new(
                crate::client::capabilities(params.host.as_ref(), params.roots),
                Implementation::new(
                    params.client_name.to_string(),
                    params.client_version.to_string(),
                ),
            )
            .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE),
        };
        let service_cancel = CancellationToken::new();
        let stderr_tail = Arc::new(Mutex::new(VecDeque::new()));
        let mut stderr_task = None;
        let (serving, guard) = match config {
            ServerConfig::Stdio(stdio) => {
                let (transport, pid, stderr) = spawn_child(stdio)?;
                if let Some(stderr) = stderr {
                    stderr_task = Some(tokio::spawn(collect_stderr(
                        stderr,
                        stderr_tail.clone(),
                        params.redactor.clone(),
                    )));
                }
                let guard = ProcessGuard::new(pid, service_cancel.clone());
                let serving = tokio::time::timeout(
                    params.startup_timeout,
                    handler
                        .clone()
                        .serve_with_ct(transport, service_cancel.clone()),
                )
                .await;
                (serving, guard)
            }
            ServerConfig::Http(http) if http.transport == HttpTransport::Sse => {
                let started = tokio::time::Instant::now();
                // Stored OAuth tokens go as a bearer header (refreshed first when expired).
                let http = crate::oauth::with_bearer(params.server, http, params.agent_dir).await;
                let transport = SseTransport::open(&http, params.startup_timeout).await?;
                let guard = ProcessGuard::new(None, service_cancel.clone());
                // Opening the stream and the handshake share the start-up deadline.
                let serving = tokio::time::timeout(
                    params.startup_timeout.saturating_sub(started.elapsed()),
                    handler
                        .clone()
                        .serve_with_ct(transport, service_cancel.clone()),
                )
                .await;
                (serving, guard)
            }
            ServerConfig::Http(http) => {
                let transport = http_transport_config(http)?;
                let guard = ProcessGuard::new(None, service_cancel.clone());
                let serving = tokio::time::timeout(
                    params.startup_timeout,
                    serve_streamable(
                        handler.clone(),
                        transport,
                        http,
                        &params,
                        service_cancel.clone(),
                    ),
                )
                .await;
                (serving, guard)
            }
        };
        let running: RunningService<RoleClient, Handler> = match serving {
            Ok(Ok(running)) => running,
            Ok(Err(error)) => {
                settle_stderr(&mut stderr_task).await;
                // A 401 with no usable tokens: the one thing that helps is a login (T127).
                let message = match config {
                    ServerConfig::Http(http)
                        if error.is_authorization_required()
                            && !crate::oauth::has_static_authorization(http) =>
                    {
                        crate::oauth::needs_login(params.server)
                    }
                    _ => format!("initialization failed: {error}"),
                };
                return Err(with_stderr(message, &stderr_tail));
            }
            Err(_) => {
                settle_stderr(&mut stderr_task).await;
                return Err(with_stderr(
                    format!(
                        "did not finish initialization within {} ms",
                        params.startup_timeout.as_millis()
                    ),
                    &stderr_tail,
                ));
            }
        };
        let peer = running.peer().clone();
        // Not awaited: the level matters for later lines, not for the start.
        tokio::spawn(set_log_level(peer.clone(), params.log_level.to_string()));
        let exited = guard.exited.clone();
        let closing = guard.closing.clone();
        let monitor_tail = stderr_tail.clone();
        let monitor = tokio::spawn(async move {
            let reason = running.waiting().await;
            exited.store(true, Ordering::SeqCst);
            settle_stderr(&mut stderr_task).await;
            // rmcp cancels the token itself when its loop ends, so only our own flag tells
            // a close we asked for from the server going away.
            if !closing.load(Ordering::SeqCst) {
                let message = match reason {
                    Ok(_) => "the server closed the connection".to_string(),
                    Err(error) => format!("the connection task failed: {error}"),
                };
                on_closed(with_stderr(message, &monitor_tail));
            }
        });
        Ok(Arc::new(Self {
            peer,
            progress: handler.progress,
            tools_stale,
            prompts_stale,
            resources_stale,
            tools_changed,
            service_cancel,
            monitor: Mutex::new(Some(monitor)),
            guard,
        }))
    }

    pub(crate) fn pid(&self) -> Option<u32> {
        self.guard.pid
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.guard.exited.load(Ordering::SeqCst)
            || self.guard.closing.load(Ordering::SeqCst)
            || self.peer.is_transport_closed()
            || self.service_cancel.is_cancelled()
    }

    /// Whether a `tools/list_changed` arrived since the last [`Connection::list_tools`].
    pub(crate) fn tools_stale(&self) -> bool {
        self.tools_stale.load(Ordering::SeqCst)
    }

    /// Whether a `prompts/list_changed` arrived since the last [`Connection::list_prompts`].
    pub(crate) fn prompts_stale(&self) -> bool {
        self.prompts_stale.load(Ordering::SeqCst)
    }

    /// Whether the server said in its handshake that it offers prompts.
    pub(crate) fn has_prompts(&self) -> bool {
        self.peer
            .peer_info()
            .is_some_and(|info| info.capabilities.prompts.is_some())
    }

    /// Every prompt, following `nextCursor` to the last page.
    pub(crate) async fn list_prompts(&self, timeout: Duration) -> Result<Vec<Prompt>, CallError> {
        self.prompts_stale.store(false, Ordering::SeqCst);
        match tokio::time::timeout(timeout, self.peer.list_all_prompts()).await {
            Ok(Ok(prompts)) => Ok(prompts),
            Ok(Err(error)) => {
                self.prompts_stale.store(true, Ordering::SeqCst);
                Err(service_error(error))
            }
            Err(_) => {
                self.prompts_stale.store(true, Ordering::SeqCst);
                Err(CallError::Timeout(timeout))
            }
        }
    }

    /// One `prompts/get`; `cancel` gives up at once ([`CallError::Aborted`]).
    pub(crate) async fn get_prompt(
        &self,
        name: &str,
        arguments: Map<String, Value>,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<GetPromptResult, CallError> {
        let mut params = GetPromptRequestParams::new(name.to_string());
        if !arguments.is_empty() {
            params = params.with_arguments(arguments);
        }
        tokio::select! {
            () = cancel.cancelled() => Err(CallError::Aborted),
            answer = tokio::time::timeout(timeout, self.peer.get_prompt(params)) => match answer {
                Ok(Ok(result)) => Ok(result),
                Ok(Err(error)) => Err(service_error(error)),
                Err(_) => Err(CallError::Timeout(timeout)),
            },
        }
    }

    /// Whether the server said in its handshake that it offers resources.
    pub(crate) fn has_resources(&self) -> bool {
        self.peer
            .peer_info()
            .is_some_and(|info| info.capabilities.resources.is_some())
    }

    /// Whether the server lets clients subscribe to a resource's updates.
    pub(crate) fn can_subscribe(&self) -> bool {
        self.peer.peer_info().is_some_and(|info| {
            info.capabilities
                .resources
                .as_ref()
                .is_some_and(|resources| resources.subscribe == Some(true))
        })
    }

    /// Whether a `resources/list_changed` arrived since the last [`Connection::list_resources`].
    pub(crate) fn resources_stale(&self) -> bool {
        self.resources_stale.load(Ordering::SeqCst)
    }

    /// Every resource and resource template, following `nextCursor` to the last page.
    pub(crate) async fn list_resources(
        &self,
        timeout: Duration,
    ) -> Result<(Vec<Resource>, Vec<ResourceTemplate>), CallError> {
        self.resources_stale.store(false, Ordering::SeqCst);
        let both = async {
            tokio::try_join!(
                self.peer.list_all_resources(),
                self.peer.list_all_resource_templates()
            )
        };
        match tokio::time::timeout(timeout, both).await {
            Ok(Ok(lists)) => Ok(lists),
            Ok(Err(error)) => {
                self.resources_stale.store(true, Ordering::SeqCst);
                Err(service_error(error))
            }
            Err(_) => {
                self.resources_stale.store(true, Ordering::SeqCst);
                Err(CallError::Timeout(timeout))
            }
        }
    }

    /// One `resources/read`; `cancel` gives up at once.
    pub(crate) async fn read_resource(
        &self,
        uri: &str,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<ReadResourceResult, CallError> {
        let read = self.peer.read_resource(ReadResourceRequestParams::new(uri));
        tokio::select! {
            () = cancel.cancelled() => Err(CallError::Aborted),
            answer = tokio::time::timeout(timeout, read) => match answer {
                Ok(Ok(result)) => Ok(result),
                Ok(Err(error)) => Err(service_error(error)),
                Err(_) => Err(CallError::Timeout(timeout)),
            },
        }
    }

    /// `resources/subscribe`: the server then sends `notifications/resources/updated`.
    #[allow(deprecated)]
    pub(crate) async fn subscribe(&self, uri: &str, timeout: Duration) -> Result<(), CallError> {
        match tokio::time::timeout(
            timeout,
            self.peer.subscribe(SubscribeRequestParams::new(uri)),
        )
        .await
        {
            Ok(Ok(())) => Ok(()),
            Ok(Err(error)) => Err(service_error(error)),
            Err(_) => Err(CallError::Timeout(timeout)),
        }
    }

    /// `completion/complete` of an argument of a prompt or of a resource template, with the
    /// arguments given so far as context: the server's suggestions.
    pub(crate) async fn complete(
        &self,
        target: &crate::resources::CompletionTarget,
        argument: &str,
        value: &str,
        context: std::collections::HashMap<String, String>,
        timeout: Duration,
    ) -> Result<Vec<String>, CallError> {
        let supported = self
            .peer
            .peer_info()
            .is_some_and(|info| info.capabilities.completions.is_some());
        if !supported {
            return Ok(Vec::new());
        }
        let context =
            (!context.is_empty()).then(|| rmcp::model::CompletionContext::with_arguments(context));
        let asked = async {
            match target {
                crate::resources::CompletionTarget::Prompt(name) => {
                    self.peer
                        .complete_prompt_argument(name.as_str(), argument, value, context)
                        .await
                }
                crate::resources::CompletionTarget::ResourceTemplate(template) => {
                    self.peer
                        .complete_resource_argument(template.as_str(), argument, value, context)
                        .await
                }
            }
        };
        match tokio::time::timeout(timeout, asked).await {
            Ok(Ok(completion)) => Ok(completion.values),
            Ok(Err(error)) => Err(service_error(error)),
            Err(_) => Err(CallError::Timeout(timeout)),
        }
    }

    /// `notifications/roots/list_changed`: the working folder moved.
    pub(crate) async fn roots_changed(&self) {
        if let Err(error) = self.peer.notify_roots_list_changed().await {
            tracing::debug!(%error, "could not send notifications/roots/list_changed");
        }
    }

    /// Signalled on each `tools/list_changed` or `prompts/list_changed`, and the token cancelled when the connection
    /// ends: what a task that relists the tools waits on.
    pub(crate) fn tool_changes(&self) -> (Arc<Notify>, CancellationToken) {
        (self.tools_changed.clone(), self.service_cancel.clone())
    }

    /// Every tool, following `nextCursor` to the last page.
    pub(crate) async fn list_tools(&self, timeout: Duration) -> Result<Vec<Tool>, CallError> {
        // Cleared first: a change announced while listing marks the list stale again.
        self.tools_stale.store(false, Ordering::SeqCst);
        match tokio::time::timeout(timeout, self.peer.list_all_tools()).await {
            Ok(Ok(tools)) => Ok(tools),
            Ok(Err(error)) => {
                self.tools_stale.store(true, Ordering::SeqCst);
                Err(service_error(error))
            }
            Err(_) => {
                self.tools_stale.store(true, Ordering::SeqCst);
                Err(CallError::Timeout(timeout))
            }
        }
    }

    /// One `tools/call`. Progress notifications go to `on_progress`; `cancel` sends
    /// `notifications/cancelled` and answers [`CallError::Aborted`] at once.
    pub(crate) async fn call_tool(
        &self,
        name: &str,
        arguments: Map<String, Value>,
        timeout: Duration,
        cancel: &CancellationToken,
        mut on_progress: impl FnMut(Progress),
    ) -> Result<CallToolResult, CallError> {
        let request = ClientRequest::CallToolRequest(Request::new(
            CallToolRequestParams::new(name.to_string()).with_arguments(arguments),
        ));
        // rmcp's own timeout sends `notifications/cancelled` when it expires.
        let handle = self
            .peer
            .send_request_with_option(request, PeerRequestOptions::with_timeout(timeout))
            .await
            .map_err(service_error)?;
        let id = handle.id.clone();
        // rmcp puts a fresh progress token on every request; the subscription is made before
        // the first notification can have made the round trip.
        let mut progress = self.progress.subscribe(handle.progress_token.clone()).await;
        let mut abandoned = AbandonGuard {
            peer: self.peer.clone(),
            id: Some(id.clone()),
        };
        let response = handle.await_response();
        tokio::pin!(response);
        loop {
            tokio::select! {
                biased;
                () = cancel.cancelled() => {
                    abandoned.id = None;
                    let notice = CancelledNotificationParam::new(Some(id), Some("aborted by the user".into()));
                    if let Err(error) = self.peer.notify_cancelled(notice).await {
                        tracing::debug!(%error, "could not send notifications/cancelled");
                    }
                    return Err(CallError::Aborted);
                }
                result = &mut response => {
                    // Answered, or rmcp's deadline sent its own cancellation.
                    abandoned.id = None;
                    return match result.map_err(service_error)? {
                        ServerResult::CallToolResult(result) => Ok(result),
                        // A reply of `{}`: a tool that returned nothing.
                        ServerResult::EmptyResult(_) => Ok(CallToolResult::success(Vec::new())),
                        other => Err(CallError::Protocol(format!(
                            "unexpected reply to tools/call: {}",
                            serde_json::to_string(&other).unwrap_or_default()
                        ))),
                    };
                }
                Some(update) = progress.next() => on_progress(Progress {
                    progress: update.progress,
                    total: update.total,
                    message: update.message,
                }),
            }
        }
    }

    /// Closes the connection and waits (bounded) until its process is gone.
    pub(crate) async fn close(&self) {
        self.guard.closing.store(true, Ordering::SeqCst);
        self.service_cancel.cancel();
        let monitor = self
            .monitor
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(monitor) = monitor
            && tokio::time::timeout(CLOSE_WAIT, monitor).await.is_err()
        {
            tracing::warn!(pid = ?self.guard.pid, "MCP server did not stop in time; killing it");
        }
        self.guard.kill_if_alive();
    }
}

/// Tells the server a call was abandoned when its future is dropped before the answer (the
/// agent loop dropping a tool call without cancelling it).
struct AbandonGuard {
    peer: Peer<RoleClient>,
    id: Option<RequestId>,
}

impl Drop for AbandonGuard {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else {
            return;
        };
        // Sending is asynchronous; without a runtime (process exit) there is nobody to tell.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let peer = self.peer.clone();
            runtime.spawn(async move {
                let notice =
                    CancelledNotificationParam::new(Some(id), Some("request abandoned".into()));
                let _ = peer.notify_cancelled(notice).await;
            });
        }
    }
}

/// Asks a server that logs to send lines from `level` up; one that refuses keeps its own.
#[allow(deprecated)]
async fn set_log_level(peer: Peer<RoleClient>, level: String) {
    let logs = peer
        .peer_info()
        .is_some_and(|info| info.capabilities.logging.is_some());
    if !logs {
        return;
    }
    let Ok(level) =
        serde_json::from_value::<rmcp::model::LoggingLevel>(Value::from(level.as_str()))
    else {
        return;
    };
    let params = rmcp::model::SetLevelRequestParams::new(level);
    match tokio::time::timeout(Duration::from_secs(5), peer.set_level(params)).await {
        Ok(Ok(())) => {}
        Ok(Err(error)) => tracing::debug!(%error, "logging/setLevel refused"),
        Err(_) => tracing::debug!("logging/setLevel unanswered"),
    }
}

fn service_error(error: ServiceError) -> CallError {
    match error {
        ServiceError::Timeout { timeout } => CallError::Timeout(timeout),
        ServiceError::TransportClosed => CallError::Closed,
        ServiceError::McpError(error) => {
            CallError::Protocol(format!("MCP error {}: {}", error.code.0, error.message))
        }
        other => CallError::Protocol(other.to_string()),
    }
}

/// Starts the server's process in a process group of its own, so that closing it also ends
/// what it started (`npx` and `uvx` run the real server as a grandchild).
fn spawn_child(
    config: &StdioConfig,
) -> Result<(TokioChildProcess, Option<u32>, Option<ChildStderr>), String> {
    let mut command = tokio::process::Command::new(&config.command);
    // Only what the entry lets through of tau's environment (API keys stay behind), then the
    // entry's own values.
    command
        .env_clear()
        .envs(std::env::vars_os().filter(|(name, value)| {
            // A bash function exported as `BASH_FUNC_x%%` holds code; the SDKs skip such values.
            name.to_str()
                .is_some_and(|name| config.inherit_env.passes(name))
                && !value.as_encoded_bytes().starts_with(b"()")
        }))
        .args(&config.args)
        .envs(&config.env);
    if let Some(cwd) = &config.cwd {
        command.current_dir(cwd);
    }
    let mut wrapped = CommandWrap::from(command);
    #[cfg(unix)]
    wrapped.wrap(process_wrap::tokio::ProcessGroup::leader());
    wrapped.wrap(KillOnDrop);
    let (transport, stderr) = TokioChildProcess::builder(wrapped)
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|error| format!("could not start \"{}\": {error}", config.command))?;
    let pid = transport.id();
    Ok((transport, pid, stderr))
}

/// Serves over Streamable HTTP, through the server's stored OAuth tokens when a login made
/// some (oauth.rs); a file of tokens that cannot be read leaves the server without them, and
/// its 401 then asks for a login.
async fn serve_streamable(
    handler: Handler,
    config: StreamableHttpClientTransportConfig,
    http: &HttpConfig,
    params: &ConnectParams<'_>,
    cancel: CancellationToken,
) -> Result<RunningService<RoleClient, Handler>, rmcp::service::ClientInitializeError> {
    let oauth = match params.agent_dir {
        Some(dir) => crate::oauth::streamable_client(params.server, http, dir)
            .await
            .unwrap_or_else(|error| {
                tracing::warn!(server = params.server, "MCP OAuth: {error}");
                None
            }),
        None => None,
    };
    match oauth {
        Some(client) => {
            let transport = StreamableHttpClientTransport::with_client(client, config);
            handler.serve_with_ct(transport, cancel).await
        }
        None => {
            let transport = StreamableHttpClientTransport::from_config(config);
            handler.serve_with_ct(transport, cancel).await
        }
    }
}

fn http_transport_config(
    config: &HttpConfig,
) -> Result<StreamableHttpClientTransportConfig, String> {
    install_crypto_provider();
    let mut headers = HashMap::new();
    for (name, value) in &config.headers {
        // Checked when the configuration was parsed; the value never goes into a message.
        let name = http::HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("header name \"{name}\" is not valid"))?;
        let value = http::HeaderValue::from_str(value)
            .map_err(|_| format!("the value of header \"{name}\" is not valid"))?;
        headers.insert(name, value);
    }
    Ok(StreamableHttpClientTransportConfig::with_uri(config.url.clone()).custom_headers(headers))
}

/// reqwest is built with rustls but no crypto provider (see Cargo.toml); ring becomes the
/// process default unless someone installed one already.
pub(crate) fn install_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing the race to another installer is fine: a provider is installed either way.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

/// Gives the stderr reader a moment to take in the last lines of a process that ended: they
/// usually say why.
async fn settle_stderr(task: &mut Option<JoinHandle<()>>) {
    if let Some(task) = task.as_mut() {
        let _ = tokio::time::timeout(Duration::from_millis(500), task).await;
    }
}

async fn collect_stderr(
    stderr: ChildStderr,
    tail: Arc<Mutex<VecDeque<String>>>,
    redactor: Arc<Redactor>,
) {
    let mut lines = BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        // A server may print what it was given; nothing of it is kept unredacted.
        let line = redactor.redact_owned(line);
        tracing::debug!(target: "tau_mcp::stderr", "{line}");
        let mut tail = tail.lock().unwrap_or_else(PoisonError::into_inner);
        if tail.len() == STDERR_TAIL_LINES {
            tail.pop_front();
        }
        tail.push_back(line);
    }
}

fn with_stderr(message: String, tail: &Mutex<VecDeque<String>>) -> String {
    let tail = tail.lock().unwrap_or_else(PoisonError::into_inner);
    if tail.is_empty() {
        message
    } else {
        let lines: Vec<&str> = tail.iter().map(String::as_str).collect();
        format!("{message}; stderr: {}", lines.join(" | "))
    }
}

/// Kills the server's process group when the connection goes away: the last line of
/// defence against leftover processes, whatever rmcp's asynchronous clean-up managed. The
/// group is killed even when the server itself has exited, because what it started (the
/// real server under `npx`/`uvx`, a helper it left in the background) lives on in the group.
struct ProcessGuard {
    pid: Option<u32>,
    exited: Arc<AtomicBool>,
    /// Set when tau closes the connection (as opposed to the server going away).
    closing: Arc<AtomicBool>,
    /// The group was killed already.
    killed: AtomicBool,
    service_cancel: CancellationToken,
}

impl ProcessGuard {
    fn new(pid: Option<u32>, service_cancel: CancellationToken) -> Self {
        Self {
            pid,
            exited: Arc::new(AtomicBool::new(false)),
            closing: Arc::new(AtomicBool::new(false)),
            killed: AtomicBool::new(false),
            service_cancel,
        }
    }

    fn kill_if_alive(&self) {
        self.exited.store(true, Ordering::SeqCst);
        if self.killed.swap(true, Ordering::SeqCst) {
            return;
        }
        #[cfg(unix)]
        if let Some(pid) = self
            .pid
            .and_then(|pid| i32::try_from(pid).ok())
            .and_then(rustix::process::Pid::from_raw)
        {
            // The group may be gone already (ESRCH); nothing else to do then.
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
    }
}

impl Drop for ProcessGuard {
    fn drop(&mut self) {
        self.closing.store(true, Ordering::SeqCst);
        self.service_cancel.cancel();
        self.kill_if_alive();
    }
}
