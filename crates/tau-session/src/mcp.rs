//! The session's MCP servers (decisions T86, T90): which servers the configuration names,
//! merged by precedence and trust ([`configured_servers`]), their deadlines ([`options`]),
//! and the running servers ([`McpServers`]): their tools, which join the session's tool set
//! and each model call of a run ([`McpRunTools`]), their states, written as
//! `mcp_server_status` events on the session's output, their prompts as slash commands
//! (decision T95), and their shutdown.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tau_agent::AgentTool;
use tau_mcp::{McpManager, ServerState, ServerStatus};
use tau_protocol::{McpServerState, McpTransport, SessionEvent};
use tokio::sync::broadcast::error::RecvError;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub(crate) use tau_mcp::{McpOptions, McpServer};

use crate::{EventSink, Settings};

/// The project's own MCP configuration, in the shape Claude Code and Cursor read.
pub const PROJECT_FILE: &str = ".mcp.json";

/// Where MCP servers are configured, lowest precedence first: the user's settings, the
/// project's settings and `.mcp.json` (both only when the project is trusted), then the
/// command line's `--mcp-config` files in their order.
#[derive(Debug, Clone, Copy)]
pub struct McpSources<'a> {
    /// The settings as trust left them: the project's files are applied only when trusted.
    pub settings: &'a Settings,
    pub cwd: &'a Path,
    pub project_trusted: bool,
    /// `--mcp-config`, the user's own: always read.
    pub files: &'a [PathBuf],
}

/// The servers to start, and one warning line for each file or entry that could not be used
/// (the other servers still start).
#[derive(Debug, Default)]
pub struct Configured {
    pub servers: Vec<McpServer>,
    pub warnings: Vec<String>,
}

/// Reads and merges every source: a later source replaces an earlier server of the same
/// name whole. `env` expands `${VAR}` (the process environment in tau).
pub fn configured_servers(
    sources: McpSources<'_>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Configured {
    let mut warnings = Vec::new();
    let mut layers: Vec<Vec<McpServer>> = Vec::new();
    let mut add = |source: &str,
                   parsed: Result<tau_mcp::ParsedServers, String>,
                   warnings: &mut Vec<String>| match parsed {
        Ok(parsed) => {
            warnings.extend(
                parsed
                    .errors
                    .iter()
                    .map(|error| format!("{source}: {error}; it is not started")),
            );
            layers.push(parsed.servers);
        }
        Err(error) => warnings.push(format!("{source}: {error}; no MCP server of it starts")),
    };
    // The settings layers arrive trusted or not already: an untrusted project's files are
    // not among them.
    for (file, value) in sources.settings.layers_of("mcpServers") {
        let source = match file {
            Some(file) => format!("{} (mcpServers)", file.display()),
            None => "settings (mcpServers)".to_string(),
        };
        let parsed = match value {
            serde_json::Value::Object(servers) => Ok(tau_mcp::parse_servers(servers, env)),
            serde_json::Value::Null => Ok(tau_mcp::ParsedServers::default()),
            _ => Err("\"mcpServers\" must be an object".to_string()),
        };
        add(&source, parsed, &mut warnings);
    }
    let project_file = sources.cwd.join(PROJECT_FILE);
    if project_file.symlink_metadata().is_ok() {
        if sources.project_trusted {
            add(
                &project_file.display().to_string(),
                read_document(&project_file, env),
                &mut warnings,
            );
        } else {
            warnings.push(format!(
                "ignoring {}: the project is not trusted (start tau with --approve to trust it \
                 for this run)",
                project_file.display()
            ));
        }
    }
    for file in sources.files {
        add(
            &file.display().to_string(),
            read_document(file, env),
            &mut warnings,
        );
    }
    layers.reverse();
    Configured {
        servers: tau_mcp::merge_layers(layers),
        warnings,
    }
}

fn read_document(
    path: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<tau_mcp::ParsedServers, String> {
    // A planted `.mcp.json` may be a FIFO or a link to a device: read bounded (T117).
    let text = tau_base::bounded::read_to_string(path, tau_base::bounded::CONFIG_CAP)
        .map_err(|error| format!("cannot read it: {error}"))?;
    tau_mcp::parse_config_document(&text, env).map_err(|error| error.to_string())
}

/// Where the user's own stdio servers start (and what their relative parts are taken
/// from): the project once the user trusted it, the user's agent folder before
/// (docs/security.md).
pub fn process_dir(config: &crate::SessionConfig) -> PathBuf {
    if config.resources.project.trusted_by_user() {
        config.cwd.clone()
    } else {
        // A first run may not have made it yet; a server cannot start in a missing folder.
        if let Err(err) = std::fs::create_dir_all(&config.agent_dir) {
            tracing::warn!("cannot create {}: {err}", config.agent_dir.display());
        }
        config.agent_dir.clone()
    }
}

/// `server` with its working directory and relative command settled in `dir`
/// ([`tau_mcp::StdioConfig::placed_in`]).
pub fn placed_in(mut server: McpServer, dir: &Path) -> McpServer {
    if let tau_mcp::ServerConfig::Stdio(stdio) = server.config {
        server.config = tau_mcp::ServerConfig::Stdio(stdio.placed_in(dir));
    }
    server
}

/// The deadlines of settings `mcp` (`requestTimeoutMs`, `startupTimeoutMs`, `maxRestarts`);
/// a missing, mistyped or zero deadline keeps the default.
pub fn options(settings: &Settings) -> McpOptions {
    let defaults = McpOptions::default();
    let millis = |key: &str| {
        settings
            .get::<u64>(key)
            .filter(|ms| *ms > 0)
            .map(Duration::from_millis)
    };
    McpOptions {
        request_timeout: millis("mcp.requestTimeoutMs").unwrap_or(defaults.request_timeout),
        startup_timeout: millis("mcp.startupTimeoutMs").unwrap_or(defaults.startup_timeout),
        max_restarts: settings
            .get::<u32>("mcp.maxRestarts")
            .unwrap_or(defaults.max_restarts),
        log_level: settings
            .get::<String>("mcp.logLevel")
            .unwrap_or_else(|| defaults.log_level.clone()),
        ..defaults
    }
}

/// The running servers of a session.
pub struct McpServers {
    manager: McpManager,
    startup_timeout: Duration,
    /// Ends the status forwarder once the last states are written.
    stop: CancellationToken,
    /// How many states were written, and how many of them [`McpServers::take_changed`]
    /// has seen: the extensions' mirror is brought up to date when they differ.
    written: Arc<AtomicU64>,
    seen: AtomicU64,
    forwarder: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for McpServers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServers")
            .field("manager", &self.manager)
            .finish_non_exhaustive()
    }
}

impl McpServers {
    /// Starts every server in parallel and returns at once; each server's state, then each
    /// change of it, goes to `events`. Must be called inside the runtime, after `ready`.
    pub(crate) fn start(
        servers: Vec<McpServer>,
        options: McpOptions,
        events: EventSink,
        host: Option<Arc<dyn tau_mcp::ClientHost>>,
    ) -> Self {
        let startup_timeout = options.startup_timeout;
        let manager = McpManager::start_with_host(servers, options, host);
        let stop = CancellationToken::new();
        // Subscribed before the first snapshot: no change falls between the two.
        let receiver = manager.subscribe();
        let written = Arc::new(AtomicU64::new(0));
        let forwarder = tokio::spawn(forward_statuses(
            manager.clone(),
            receiver,
            events,
            stop.clone(),
            written.clone(),
        ));
        Self {
            manager,
            startup_timeout,
            stop,
            written,
            seen: AtomicU64::new(0),
            forwarder: Mutex::new(Some(forwarder)),
        }
    }

    pub fn manager(&self) -> &McpManager {
        &self.manager
    }

    /// Whether a server's state or tools changed since the last call: servers change
    /// outside any command, so the extensions' mirror (`getAllTools`, `getCommands`) is
    /// refreshed on the next command when this says so.
    pub fn take_changed(&self) -> bool {
        let written = self.written.load(Ordering::Acquire);
        self.seen.swap(written, Ordering::AcqRel) != written
    }

    /// Closes every server and waits until their processes are gone; their `stopped` states
    /// are written before this returns.
    pub async fn shutdown(&self) {
        self.manager.shutdown().await;
        self.stop.cancel();
        let forwarder = self
            .forwarder
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(forwarder) = forwarder {
            let _ = forwarder.await;
        }
    }

    /// The servers' prompts as `get_commands` lists them: `mcp:<server>:<prompt>`, `source`
    /// `mcp`, the prompt's description with its arguments (`<required> [optional]`).
    pub fn prompt_commands(&self) -> Vec<serde_json::Value> {
        self.manager
            .current_prompts()
            .into_iter()
            .map(|prompt| {
                let usage = prompt.usage();
                let description = match (prompt.description.as_deref(), usage.is_empty()) {
                    (Some(text), true) => Some(text.to_string()),
                    (Some(text), false) => Some(format!("{text} (arguments: {usage})")),
                    (None, false) => Some(format!("arguments: {usage}")),
                    (None, true) => None,
                };
                let mut command = serde_json::Map::new();
                command.insert("name".into(), prompt.command.into());
                if let Some(description) = description {
                    command.insert("description".into(), description.into());
                }
                command.insert("source".into(), "mcp".into());
                serde_json::Value::Object(command)
            })
            .collect()
    }

    /// `/mcp:<server>:<prompt> words…` expanded through `prompts/get`, the words bound to the
    /// prompt's arguments in order; `None` when `text` names no prompt of these servers.
    pub async fn expand_prompt(
        &self,
        text: &str,
        cancel: &CancellationToken,
    ) -> Option<Result<tau_mcp::ExpandedPrompt, tau_mcp::PromptError>> {
        let rest = text.strip_prefix('/')?;
        let (command, args) = rest.split_once([' ', '\t', '\n']).unwrap_or((rest, ""));
        let prompt = self.manager.prompt(command)?;
        let words = crate::resources::prompts::parse_args(args);
        Some(match prompt.bind(&words) {
            Ok(arguments) => self.manager.get_prompt(&prompt, arguments, cancel).await,
            Err(error) => Err(error),
        })
    }

    /// Attaches each `@<server>:<uri>` of `text` naming a server of this session (decision
    /// T129): the resource is read and its text follows the prompt in a `<resource>` block,
    /// its images join the message's; the mention itself stays. `None` when `text` names
    /// none; an error names the resource that could not be read. A resource whose server
    /// offers subscriptions is subscribed to, so its updates are announced.
    pub async fn attach_mentions(
        &self,
        text: &str,
        cancel: &CancellationToken,
    ) -> Option<Result<(String, Vec<tau_protocol::ImageContent>), String>> {
        let servers: Vec<String> = self
            .manager
            .statuses()
            .into_iter()
            .map(|status| status.name)
            .collect();
        let mentions = mentions(text, &servers);
        if mentions.is_empty() {
            return None;
        }
        let mut attached = text.to_string();
        let mut images = Vec::new();
        for (server, uri) in mentions {
            let blocks = match self.manager.read_resource(&server, &uri, cancel).await {
                Ok(blocks) => blocks,
                Err(error) => {
                    return Some(Err(format!("cannot attach @{server}:{uri}: {error}")));
                }
            };
            let mut body = Vec::new();
            for block in blocks {
                match block {
                    tau_protocol::UserContentBlock::Text(text) => body.push(text.text),
                    tau_protocol::UserContentBlock::Image(image) => images.push(image),
                }
            }
            attached.push_str(&format!(
                "\n\n<resource server=\"{server}\" uri=\"{uri}\">\n{}\n</resource>",
                body.join("\n")
            ));
            let manager = self.manager.clone();
            tokio::spawn(async move {
                if let Err(error) = manager.subscribe_resource(&server, &uri).await {
                    tracing::debug!("not subscribed to @{server}:{uri}: {error}");
                }
            });
        }
        Some(Ok((attached, images)))
    }

    /// Completions of the last word of `text` (empty after a space), each a replacement
    /// for that word (decision T129): an argument of `/mcp:<server>:<prompt> words…` (the
    /// words before it given to the server as context), or the placeholder being typed in
    /// a mention of a resource template, `@<server>:<uri typed so far>`. The argument's
    /// name comes with them; nothing when the word is neither. Bounded by `timeout`.
    pub async fn complete_argument(
        &self,
        text: &str,
        timeout: Duration,
    ) -> Result<(Option<String>, Vec<String>), String> {
        let last = if text.ends_with(char::is_whitespace) {
            ""
        } else {
            text.split_whitespace().last().unwrap_or_default()
        };
        let asked = match last.strip_prefix('@') {
            Some(mention) => self.template_completion(mention),
            None => self.prompt_completion(text, last),
        };
        let Some((server, target, argument, value, context, to_word)) = asked else {
            return Ok((None, Vec::new()));
        };
        let values = self
            .manager
            .complete_argument(&server, &target, &argument, &value, context);
        let values = tokio::time::timeout(timeout, values)
            .await
            .map_err(|_| format!("no completion within {} ms", timeout.as_millis()))??;
        Ok((Some(argument), values.iter().map(|v| to_word(v)).collect()))
    }

    /// The prompt argument the last word of `text` is.
    fn prompt_completion(&self, text: &str, last: &str) -> Option<Completion> {
        let rest = text.strip_prefix('/')?;
        let (command, args) = rest.split_once(char::is_whitespace)?;
        let prompt = self.manager.prompt(command)?;
        let words: Vec<&str> = args.split_whitespace().collect();
        let index = if last.is_empty() {
            words.len()
        } else {
            words.len().checked_sub(1)?
        };
        let argument = prompt.arguments.get(index)?;
        let context = prompt
            .arguments
            .iter()
            .zip(&words[..index])
            .map(|(argument, word)| (argument.name.clone(), (*word).to_string()))
            .collect();
        Some((
            prompt.server.clone(),
            tau_mcp::CompletionTarget::Prompt(prompt.name.clone()),
            argument.name.clone(),
            last.to_string(),
            context,
            Box::new(|value: &str| value.to_string()),
        ))
    }

    /// The placeholder of a template being typed in `mention` (`<server>:<uri so far>`): the
    /// template whose text before its first `{name}` the typed URI starts with.
    fn template_completion(&self, mention: &str) -> Option<Completion> {
        let (server, typed) = mention.split_once(':')?;
        self.manager
            .current_resources()
            .into_iter()
            .filter(|entry| entry.template && entry.server == server)
            .find_map(|entry| {
                let open = entry.uri.find('{')?;
                let close = open + entry.uri[open..].find('}')?;
                let prefix = &entry.uri[..open];
                let value = typed.strip_prefix(prefix)?;
                let argument = entry.uri[open + 1..close].to_string();
                let word_start = format!("@{server}:{prefix}");
                Some((
                    server.to_string(),
                    tau_mcp::CompletionTarget::ResourceTemplate(entry.uri.clone()),
                    argument,
                    value.to_string(),
                    std::collections::HashMap::new(),
                    Box::new(move |value: &str| format!("{word_start}{value}"))
                        as Box<dyn Fn(&str) -> String + Send>,
                ))
            })
    }

    /// The servers' resources and templates as last listed (for completion).
    pub fn resources(&self) -> Vec<tau_mcp::ResourceEntry> {
        self.manager.current_resources()
    }

    /// What a run needs to follow the servers' tools from one model call to the next.
    pub(crate) fn run_tools(&self, filter: ToolFilter) -> McpRunTools {
        McpRunTools {
            manager: self.manager.clone(),
            startup_timeout: self.startup_timeout,
            filter,
            waited: Arc::new(AtomicBool::new(false)),
        }
    }
}

/// What completing one argument takes: the server, what the argument belongs to, its
/// name, the value typed, the arguments before it, and how a value becomes the word.
type Completion = (
    String,
    tau_mcp::CompletionTarget,
    String,
    String,
    std::collections::HashMap<String, String>,
    Box<dyn Fn(&str) -> String + Send>,
);

/// The `@<server>:<uri>` mentions of `text` whose server is one of `servers`: a mention
/// starts a word (after an opening bracket or quote) and runs to the next whitespace (a
/// closing bracket, quote, `,`, `.` or `;` at its end left out), each once.
fn mentions(text: &str, servers: &[String]) -> Vec<(String, String)> {
    let mut found: Vec<(String, String)> = Vec::new();
    for word in text.split_whitespace() {
        let word = word.trim_start_matches(['(', '"', '\'']);
        let Some(rest) = word.strip_prefix('@') else {
            continue;
        };
        let Some((server, uri)) = rest.split_once(':') else {
            continue;
        };
        let uri = uri.trim_end_matches([')', ',', '.', ';', '"', '\'']);
        if uri.is_empty() || !servers.iter().any(|name| name == server) {
            continue;
        }
        let mention = (server.to_string(), uri.to_string());
        if !found.contains(&mention) {
            found.push(mention);
        }
    }
    found
}

#[cfg(test)]
mod mention_tests {
    use super::mentions;

    #[test]
    fn mentions_name_known_servers_only_each_once() {
        let servers = vec!["docs".to_string(), "every thing".to_string()];
        assert_eq!(
            mentions(
                "see @docs:file:///a.md, and (@docs:demo://b). mail me@docs:x @other:y @docs:file:///a.md",
                &servers
            ),
            [
                ("docs".to_string(), "file:///a.md".to_string()),
                ("docs".to_string(), "demo://b".to_string())
            ]
        );
        assert!(mentions("@docs: nothing", &servers).is_empty());
    }
}

/// Which MCP tools a list may hold: the names other tools hold, what the tool flags allow,
/// and `pi.setActiveTools`' set (shared with the tool set, so a change during a run counts).
#[derive(Clone)]
pub(crate) struct ToolFilter {
    /// The built-in, extension and host tools' names: MCP tools never take them.
    pub reserved: Arc<Vec<String>>,
    pub allows: Arc<dyn Fn(&str) -> bool + Send + Sync>,
    pub active: Arc<Mutex<Option<Vec<String>>>>,
}

impl ToolFilter {
    /// The servers' tools as last listed that this filter lets through, in the servers'
    /// order.
    pub(crate) fn mcp_tools(&self, manager: &McpManager) -> Vec<Arc<dyn AgentTool>> {
        self.admit(
            manager,
            manager.current_tools(self.reserved.iter().cloned()),
        )
    }

    /// The servers' tools this filter lets through, then the resource tools while some
    /// server has resources (decision T129).
    fn admit(
        &self,
        manager: &McpManager,
        tools: Vec<Arc<tau_mcp::McpTool>>,
    ) -> Vec<Arc<dyn AgentTool>> {
        let mut admitted: Vec<Arc<dyn AgentTool>> = tools
            .into_iter()
            .map(|tool| tool as Arc<dyn AgentTool>)
            .collect();
        if manager.has_resources() {
            let (list, read) = tau_mcp::resource_tools(manager);
            admitted.push(Arc::new(list));
            admitted.push(Arc::new(read));
        }
        admitted.retain(|tool| (self.allows)(tool.name()));
        admitted
    }
}

/// A run's view of the servers: before each model call, the tools it offers are those of
/// the session's other tools it already has plus the servers' tools as they are now.
#[derive(Clone)]
pub(crate) struct McpRunTools {
    manager: McpManager,
    startup_timeout: Duration,
    filter: ToolFilter,
    /// The first model call of the run has waited for servers still starting.
    waited: Arc<AtomicBool>,
}

impl McpRunTools {
    /// `current` with its MCP tools replaced by the servers' present ones. The first call of
    /// a run waits (at most the start-up deadline, or until `cancel`) for servers still
    /// starting, so that the first answer can already use their tools.
    pub(crate) async fn refresh(
        &self,
        current: &[Arc<dyn AgentTool>],
        cancel: &CancellationToken,
    ) -> Vec<Arc<dyn AgentTool>> {
        if !self.waited.swap(true, Ordering::SeqCst) && self.manager.any_starting() {
            tokio::select! {
                _ = self.manager.wait_settled(self.startup_timeout) => {}
                () = cancel.cancelled() => {}
            }
        }
        let others: Vec<Arc<dyn AgentTool>> = current
            .iter()
            .filter(|tool| self.filter.reserved.iter().any(|name| name == tool.name()))
            .cloned()
            .collect();
        // A server whose list changed and was not listed again yet (the notification came
        // with the last tool's result) is listed now: the change applies to this call.
        let servers = self.filter.admit(
            &self.manager,
            self.manager
                .tools(self.filter.reserved.iter().cloned())
                .await,
        );
        let active = self
            .filter
            .active
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        match active {
            None => others.into_iter().chain(servers).collect(),
            Some(names) => names
                .iter()
                .filter_map(|name| {
                    others
                        .iter()
                        .chain(&servers)
                        .find(|tool| tool.name() == name)
                        .cloned()
                })
                .collect(),
        }
    }
}

/// Writes every server's state, then each change, until `stop` (after the last states).
async fn forward_statuses(
    manager: McpManager,
    mut receiver: tokio::sync::broadcast::Receiver<ServerStatus>,
    events: EventSink,
    stop: CancellationToken,
    written: Arc<AtomicU64>,
) {
    let mut last: HashMap<String, SessionEvent> = HashMap::new();
    let write = |last: &mut HashMap<String, SessionEvent>, status: &ServerStatus| {
        let event = status_event(status);
        if last.get(&status.name) == Some(&event) {
            return None;
        }
        last.insert(status.name.clone(), event.clone());
        // Counted before the record is out: whoever reads it finds the change counted.
        written.fetch_add(1, Ordering::AcqRel);
        Some(event)
    };
    for status in manager.statuses() {
        if let Some(event) = write(&mut last, &status) {
            events.emit(event).await;
        }
    }
    loop {
        let received = tokio::select! {
            biased;
            received = receiver.recv() => received,
            () = stop.cancelled() => {
                // What the shutdown announced is still written.
                while let Ok(status) = receiver.try_recv() {
                    if let Some(event) = write(&mut last, &status) {
                        events.emit(event).await;
                    }
                }
                return;
            }
        };
        // A state equal to the last one written for its server is not written again (a
        // change may arrive both in the first snapshot and on the channel).
        let statuses = match received {
            Ok(status) => vec![status],
            // Changes were missed: the present states say where each server stands.
            Err(RecvError::Lagged(_)) => manager.statuses(),
            Err(RecvError::Closed) => return,
        };
        for status in statuses {
            if let Some(event) = write(&mut last, &status) {
                events.emit(event).await;
            }
        }
    }
}

/// The protocol's record of a server's state.
pub fn status_event(status: &ServerStatus) -> SessionEvent {
    let info = server_info(status);
    SessionEvent::McpServerStatus {
        server: info.server,
        transport: info.transport,
        state: info.state,
        tools: info.tools,
        restarts: info.restarts,
        message: info.message,
    }
}

/// A server's state as `get_mcp_servers` lists it (the same fields as its status event).
pub fn server_info(status: &ServerStatus) -> tau_protocol::rpc::McpServerInfo {
    let (state, message) = match &status.state {
        ServerState::Starting => (McpServerState::Starting, None),
        ServerState::Ready => (McpServerState::Ready, None),
        ServerState::Failed { message } => (McpServerState::Failed, Some(message.clone())),
        ServerState::Stopped => (McpServerState::Stopped, None),
    };
    tau_protocol::rpc::McpServerInfo {
        server: status.name.clone(),
        transport: match status.transport {
            "sse" => McpTransport::Sse,
            "http" => McpTransport::Http,
            _ => McpTransport::Stdio,
        },
        state,
        tools: status.tools.clone(),
        restarts: status.restarts,
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn env(name: &str) -> Option<String> {
        (name == "TOKEN").then(|| "secret".to_string())
    }

    fn names(configured: &Configured) -> Vec<(String, String)> {
        configured
            .servers
            .iter()
            .map(|server| {
                let command = match &server.config {
                    tau_mcp::ServerConfig::Stdio(stdio) => stdio.command.clone(),
                    tau_mcp::ServerConfig::Http(http) => http.url.clone(),
                };
                (server.name.clone(), command)
            })
            .collect()
    }

    #[test]
    fn later_sources_replace_earlier_servers_and_untrusted_projects_count_for_nothing() {
        let agent = tempfile::tempdir().unwrap();
        let cwd = tempfile::tempdir().unwrap();
        std::fs::write(
            agent.path().join("settings.json"),
            json!({"mcpServers": {"a": {"command": "user-a"}, "b": {"command": "user-b"},
                                  "c": {"command": "user-c"}, "d": {"command": "user-d"}}})
            .to_string(),
        )
        .unwrap();
        std::fs::create_dir(cwd.path().join(".pi")).unwrap();
        std::fs::write(
            cwd.path().join(".pi/settings.json"),
            json!({"mcpServers": {"b": {"command": "project-b"}}}).to_string(),
        )
        .unwrap();
        std::fs::write(
            cwd.path().join(".mcp.json"),
            json!({"mcpServers": {"c": {"url": "https://example.invalid/${TOKEN}"},
                                  "bad": {"args": []}}})
            .to_string(),
        )
        .unwrap();
        let flag = cwd.path().join("flag.json");
        std::fs::write(
            &flag,
            json!({"mcpServers": {"d": {"command": "flag-d"}}}).to_string(),
        )
        .unwrap();
        let missing = cwd.path().join("missing.json");
        let files = [flag, missing.clone()];

        let mut settings = Settings::load(agent.path(), cwd.path());
        let untrusted = configured_servers(
            McpSources {
                settings: &settings,
                cwd: cwd.path(),
                project_trusted: false,
                files: &files,
            },
            &env,
        );
        let mut got = names(&untrusted);
        got.sort();
        assert_eq!(
            got,
            [
                ("a".to_string(), "user-a".to_string()),
                ("b".into(), "user-b".into()),
                ("c".into(), "user-c".into()),
                ("d".into(), "flag-d".into()),
            ]
        );
        assert_eq!(untrusted.warnings.len(), 2, "{:?}", untrusted.warnings);
        assert!(untrusted.warnings[0].contains(".mcp.json"));
        assert!(untrusted.warnings[1].contains(&missing.display().to_string()));

        settings.trust_project();
        let trusted = configured_servers(
            McpSources {
                settings: &settings,
                cwd: cwd.path(),
                project_trusted: true,
                files: &files,
            },
            &env,
        );
        let mut got = names(&trusted);
        got.sort();
        assert_eq!(
            got,
            [
                ("a".to_string(), "user-a".to_string()),
                ("b".into(), "project-b".into()),
                ("c".into(), "https://example.invalid/secret".into()),
                ("d".into(), "flag-d".into()),
            ]
        );
        // The broken entry of `.mcp.json` and the missing file, each named.
        assert_eq!(trusted.warnings.len(), 2, "{:?}", trusted.warnings);
        assert!(trusted.warnings[0].contains(".mcp.json") && trusted.warnings[0].contains("bad"));
    }

    #[test]
    fn deadlines_come_from_settings_with_defaults() {
        let settings = Settings::from_value(
            json!({"mcp": {"requestTimeoutMs": 1500, "startupTimeoutMs": 0, "maxRestarts": 1}})
                .as_object()
                .cloned()
                .unwrap(),
        );
        let options = options(&settings);
        assert_eq!(options.request_timeout, Duration::from_millis(1500));
        assert_eq!(
            options.startup_timeout,
            McpOptions::default().startup_timeout
        );
        assert_eq!(options.max_restarts, 1);
    }

    #[test]
    fn a_failed_status_carries_its_message_and_the_others_none() {
        let failed = status_event(&ServerStatus {
            name: "x".into(),
            transport: "http",
            state: ServerState::Failed {
                message: "gone".into(),
            },
            tools: vec!["t".into()],
            restarts: 2,
            pid: None,
        });
        assert_eq!(
            serde_json::to_value(&failed).unwrap(),
            json!({"type": "mcp_server_status", "server": "x", "transport": "http",
                   "state": "failed", "tools": ["t"], "restarts": 2, "message": "gone"})
        );
    }
}
