//! Which tools a run offers (tools-resources §1): pi's default built-in set, or what
//! `--tools`, `--exclude-tools`, `--no-tools` and `--no-builtin-tools` select, then the
//! extensions' tools, the active host tools and the MCP servers' tools the same flags allow.
//! [`ToolSet`] owns what decides that besides the flags (the active set `pi.setActiveTools`
//! chose, the host tools and the bridge their calls go through, the MCP servers); where tools
//! run ([`tool_env`]) is computed from the session each time, as its directory, settings and
//! model change.

use std::sync::{Arc, Mutex, PoisonError};

use tau_agent::AgentTool;
use tau_protocol::Model;

use crate::mcp::{McpOptions, McpRunTools, McpServer, McpServers, ToolFilter};
use crate::{
    BUILTIN_TOOL_NAMES, EventSink, HostToolBridge, HostToolDefinition, HostToolError,
    HostToolRegistry, SessionConfig, Settings,
};

/// The command line's tool flags.
#[derive(Debug, Clone, Copy)]
pub struct ToolSelection<'a> {
    /// `--tools`: only these (built-in and host).
    pub only: Option<&'a [String]>,
    /// `--exclude-tools`.
    pub exclude: &'a [String],
    /// `--no-tools`: none at all (unless `--tools` names some).
    pub none: bool,
    /// `--no-builtin-tools`.
    pub no_builtin: bool,
}

impl<'a> ToolSelection<'a> {
    pub fn of(config: &'a SessionConfig) -> Self {
        Self {
            only: config.tools.as_deref(),
            exclude: &config.exclude_tools,
            none: config.no_tools,
            no_builtin: config.no_builtin_tools,
        }
    }

    /// Whether the flags allow a tool of this name at all (a host tool must also be active).
    pub fn allows(&self, name: &str) -> bool {
        let listed = match self.only {
            Some(list) => list.iter().any(|t| t.trim() == name),
            None => !self.none,
        };
        listed && !self.exclude.iter().any(|t| t.trim() == name)
    }

    /// Every built-in tool the flags allow, inactive ones included (`pi.getAllTools`).
    pub fn every_builtin(&self) -> Vec<&'static str> {
        tau_tools::BUILTIN_TOOLS
            .into_iter()
            .filter(|name| (self.only.is_some() || !self.no_builtin) && self.allows(name))
            .collect()
    }

    /// The built-in tools a run offers, in tau's fixed order: with `--tools`, those it names;
    /// otherwise pi's default set, unless `--no-builtin-tools`.
    pub fn builtin(&self) -> Vec<&'static str> {
        tau_tools::BUILTIN_TOOLS
            .into_iter()
            .filter(|name| match self.only {
                Some(_) => self.allows(name),
                None => {
                    !self.no_builtin
                        && tau_tools::DEFAULT_ACTIVE_TOOLS.contains(name)
                        && self.allows(name)
                }
            })
            .collect()
    }
}

/// The command line's tool flags, kept for the life of the session.
#[derive(Debug, Clone, Default)]
struct Flags {
    only: Option<Vec<String>>,
    exclude: Vec<String>,
    none: bool,
    no_builtin: bool,
}

impl Flags {
    fn selection(&self) -> ToolSelection<'_> {
        ToolSelection {
            only: self.only.as_deref(),
            exclude: &self.exclude,
            none: self.none,
            no_builtin: self.no_builtin,
        }
    }
}

/// The tools a session can offer and which of them it does.
#[derive(Debug)]
pub struct ToolSet {
    flags: Flags,
    /// `pi.setActiveTools`: the tools runs offer, by name, instead of the default set. Shared
    /// with the runs, which place the MCP tools that appear meanwhile by it.
    active: Arc<Mutex<Option<Vec<String>>>>,
    host_tools: HostToolRegistry,
    host_bridge: Arc<HostToolBridge>,
    /// The list `todo_write` writes (shared with the runs and the auto-clear timers).
    todos: Arc<crate::todos::Todos>,
    /// Where host-tool calls announce themselves.
    events: EventSink,
    /// RPC `bash` commands in flight (they run in the tools' environment), and their temp
    /// files.
    bash_commands: Arc<crate::bash_commands::BashCommands>,
    /// The MCP servers, once started.
    mcp: Option<McpServers>,
    /// What the MCP servers ask of the client (decision T129).
    mcp_client: crate::mcp_client::McpClientSide,
    /// Where the file tools read and write text files instead of the disk (ACP mode's
    /// client), once a front-end sets it.
    files: Mutex<Option<Arc<dyn tau_tools::FileAccess>>>,
    /// Who runs `bash`'s commands instead of tau (ACP mode's client terminals), once a
    /// front-end sets it.
    commands: Mutex<Option<Arc<dyn tau_tools::CommandRunner>>>,
}

impl ToolSet {
    pub(crate) fn new(
        config: &SessionConfig,
        todos: Arc<crate::todos::Todos>,
        events: EventSink,
    ) -> Self {
        Self {
            flags: Flags {
                only: config.tools.clone(),
                exclude: config.exclude_tools.clone(),
                none: config.no_tools,
                no_builtin: config.no_builtin_tools,
            },
            active: Arc::default(),
            host_tools: HostToolRegistry::default(),
            host_bridge: Arc::default(),
            todos,
            events,
            bash_commands: Arc::default(),
            mcp: None,
            mcp_client: Default::default(),
            files: Mutex::default(),
            commands: Mutex::default(),
        }
    }

    /// Has `read`, `edit` and `write` go through `files` from the next run on.
    pub fn set_client_files(&self, files: Arc<dyn tau_tools::FileAccess>) {
        *self.files.lock().unwrap_or_else(PoisonError::into_inner) = Some(files);
    }

    /// Has `bash` run its commands through `commands` from the next run on.
    pub fn set_client_commands(&self, commands: Arc<dyn tau_tools::CommandRunner>) {
        *self.commands.lock().unwrap_or_else(PoisonError::into_inner) = Some(commands);
    }

    /// Starts the MCP servers (in parallel, returning at once); their tools join the tools
    /// as they are listed. Must run inside the runtime, after `ready`: their status events
    /// follow it. Nothing to start starts nothing.
    pub(crate) fn start_mcp(
        &mut self,
        servers: Vec<McpServer>,
        options: McpOptions,
        host: Option<Arc<dyn tau_mcp::ClientHost>>,
    ) {
        if servers.is_empty() || self.mcp.is_some() {
            return;
        }
        self.mcp = Some(McpServers::start(
            servers,
            options,
            self.events.clone(),
            host,
        ));
    }

    /// What the MCP servers ask of the client: the core's dialogs, a front-end's forms.
    pub fn mcp_client(&self) -> &crate::mcp_client::McpClientSide {
        &self.mcp_client
    }

    pub(crate) fn mcp_client_mut(&mut self) -> &mut crate::mcp_client::McpClientSide {
        &mut self.mcp_client
    }

    /// The running MCP servers, if any are configured.
    pub fn mcp(&self) -> Option<&McpServers> {
        self.mcp.as_ref()
    }

    /// Shuts the MCP servers down and waits until their processes are gone: tau calls it on
    /// every way out (end of input, signals, `ctx.shutdown()`, the end of a one-shot run).
    pub async fn shutdown_mcp(&self) {
        if let Some(mcp) = &self.mcp {
            mcp.shutdown().await;
        }
    }

    /// What keeps MCP tools from taking another tool's name, and which of them the flags and
    /// the active set let through.
    fn mcp_filter(&self, extensions: Option<&Arc<tau_extensions::Extensions>>) -> ToolFilter {
        let mut reserved: Vec<String> = BUILTIN_TOOL_NAMES.iter().map(|n| n.to_string()).collect();
        reserved.extend(
            extensions
                .map(|e| e.tools())
                .unwrap_or_default()
                .into_iter()
                .map(|t| t.registration.name),
        );
        reserved.extend(self.host_tools.tools().iter().map(|t| t.name.clone()));
        let flags = self.flags.clone();
        ToolFilter {
            reserved: Arc::new(reserved),
            allows: Arc::new(move |name| flags.selection().allows(name)),
            active: Arc::clone(&self.active),
        }
    }

    /// A run's way to follow the MCP servers' tools from one model call to the next; `None`
    /// without servers.
    pub(crate) fn mcp_run_tools(
        &self,
        extensions: Option<&Arc<tau_extensions::Extensions>>,
    ) -> Option<McpRunTools> {
        let mcp = self.mcp.as_ref()?;
        Some(mcp.run_tools(self.mcp_filter(extensions)))
    }

    fn selection(&self) -> ToolSelection<'_> {
        self.flags.selection()
    }

    pub fn host_tools(&self) -> &HostToolRegistry {
        &self.host_tools
    }

    /// Routes host-tool replies to waiting calls.
    pub fn host_bridge(&self) -> &HostToolBridge {
        &self.host_bridge
    }

    /// Replaces the host tool set; the registered names in request order.
    pub fn set_host_tools(
        &mut self,
        tools: Vec<HostToolDefinition>,
    ) -> Result<Vec<String>, HostToolError> {
        self.host_tools.replace(tools, &BUILTIN_TOOL_NAMES)
    }

    /// The todo list `todo_write` writes (`get_state.todoPhases`).
    pub fn todo_phases(&self) -> Vec<tau_protocol::TodoPhase> {
        self.todos.phases()
    }

    /// `abort_bash`: the newest RPC `bash` command still running.
    pub fn abort_bash(&self) {
        self.bash_commands.abort_newest();
    }

    pub(crate) fn bash_commands(&self) -> &Arc<crate::bash_commands::BashCommands> {
        &self.bash_commands
    }

    /// `pi.setActiveTools`'s names, when an extension chose them.
    pub fn active(&self) -> Option<Vec<String>> {
        self.active
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// `pi.setActiveTools` (names no tool has are ignored, as in pi, but kept: an MCP tool
    /// named before its server has listed it joins once it is). Crate-only: a running run
    /// must be told too, which the session does.
    pub(crate) fn set_active(&mut self, names: Vec<String>) {
        *self.active.lock().unwrap_or_else(PoisonError::into_inner) = Some(names);
    }

    /// The tools a run offers: the active built-in tools (pi's default set, or what the flags
    /// select), the extensions' tools (an extension tool with a built-in's name replaces it,
    /// ext §5.4), the active host tools, then the MCP servers' tools as last listed; or the
    /// active set, in its order.
    pub fn offered(
        &self,
        env: tau_tools::ToolEnv,
        extensions: Option<&Arc<tau_extensions::Extensions>>,
    ) -> Vec<Arc<dyn AgentTool>> {
        match &self.active() {
            None => self.tools_from(false, env, extensions),
            Some(names) => {
                let all = self.tools_from(true, env, extensions);
                names
                    .iter()
                    .filter_map(|name| all.iter().find(|t| t.name() == name).cloned())
                    .collect()
            }
        }
    }

    /// Every tool a run could offer (`pi.getAllTools`): the built-in tools the flags allow
    /// (also those inactive by default), the extensions' tools, the active host tools, the
    /// MCP servers' tools.
    pub fn all(
        &self,
        env: tau_tools::ToolEnv,
        extensions: Option<&Arc<tau_extensions::Extensions>>,
    ) -> Vec<Arc<dyn AgentTool>> {
        self.tools_from(true, env, extensions)
    }

    /// The default set, or with `every_builtin` all the built-in tools the flags allow.
    fn tools_from(
        &self,
        every_builtin: bool,
        env: tau_tools::ToolEnv,
        extensions: Option<&Arc<tau_extensions::Extensions>>,
    ) -> Vec<Arc<dyn AgentTool>> {
        let selection = self.selection();
        let mut env = env;
        env.files = self
            .files
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        env.commands = self
            .commands
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let env = Arc::new(env);
        let extension_tools: Vec<tau_extensions::ExtensionTool> = extensions
            .map(|e| e.tools())
            .unwrap_or_default()
            .into_iter()
            .filter(|t| selection.allows(&t.registration.name))
            .collect();
        let builtin = if every_builtin {
            selection.every_builtin()
        } else {
            selection.builtin()
        };
        let mut tools: Vec<Arc<dyn AgentTool>> = builtin
            .into_iter()
            .filter(|name| !extension_tools.iter().any(|t| t.registration.name == *name))
            .filter_map(|name| match name {
                tau_tools::todo_write::NAME => Some(Arc::new(
                    tau_tools::todo_write::TodoWriteTool::new(Arc::clone(&self.todos) as _),
                ) as Arc<dyn AgentTool>),
                _ => tau_tools::builtin_tool(name, &env),
            })
            .collect();
        tools.extend(
            extension_tools
                .into_iter()
                .map(|t| Arc::new(t) as Arc<dyn AgentTool>),
        );
        tools.extend(
            self.host_tools
                .tools()
                .iter()
                .filter(|t| t.active && selection.allows(&t.name))
                .map(|t| {
                    Arc::new(crate::HostTool::new(
                        t.clone(),
                        Arc::clone(&self.host_bridge),
                        self.events.clone(),
                    )) as Arc<dyn AgentTool>
                }),
        );
        if let Some(mcp) = &self.mcp {
            tools.extend(self.mcp_filter(extensions).mcp_tools(mcp.manager()));
        }
        tools
    }
}

/// Where and how tools and the RPC `bash` command run: the session's directory, the shell
/// settings, and whether the current model takes images.
pub fn tool_env(
    config: &SessionConfig,
    settings: &Settings,
    model: Option<&Model>,
) -> tau_tools::ToolEnv {
    tau_tools::ToolEnv {
        cwd: config.cwd.clone(),
        home: tau_base::paths::home_dir(),
        agent_dir: config.agent_dir.clone(),
        shell_path: settings.get("shellPath"),
        shell_command_prefix: settings.get("shellCommandPrefix"),
        auto_resize_images: settings.get("images.autoResize").unwrap_or(true),
        model_accepts_images: model
            .is_some_and(|m| m.input.contains(&tau_protocol::InputModality::Image)),
        files: None,
        commands: None,
    }
}

/// What the next model call offers: its tools and the system prompt written for them.
pub struct NextCall {
    pub tools: Vec<Arc<dyn AgentTool>>,
    pub system_prompt: String,
}

impl NextCall {
    /// Name, description and parameter schema of each tool (`get_state.dumpTools`).
    pub fn tool_descriptions(&self) -> Vec<(String, String, serde_json::Value)> {
        self.tools
            .iter()
            .map(|t| {
                (
                    t.name().to_string(),
                    t.description().to_string(),
                    t.parameters().clone(),
                )
            })
            .collect()
    }

    /// The tools' names, in order.
    pub fn tool_names(&self) -> Vec<String> {
        self.tools.iter().map(|t| t.name().to_string()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_flags_select_as_pi_does() {
        let none: &[String] = &[];
        let default = ToolSelection {
            only: None,
            exclude: none,
            none: false,
            no_builtin: false,
        };
        assert_eq!(
            default.builtin(),
            ["read", "bash", "edit", "write", "todo_write"]
        );
        assert!(default.allows("my_host_tool"));

        let only = names(&["grep", " ls ", "my_host_tool"]);
        let listed = ToolSelection {
            only: Some(&only),
            ..default
        };
        assert_eq!(listed.builtin(), ["grep", "ls"]);
        assert!(listed.allows("my_host_tool") && !listed.allows("other"));

        let exclude = names(&["bash"]);
        let excluded = ToolSelection {
            exclude: &exclude,
            ..default
        };
        assert_eq!(excluded.builtin(), ["read", "edit", "write", "todo_write"]);

        let nothing = ToolSelection {
            none: true,
            ..default
        };
        assert!(nothing.builtin().is_empty() && !nothing.allows("my_host_tool"));
        // `--tools` wins over `--no-tools`.
        let named = ToolSelection {
            only: Some(&only),
            none: true,
            ..default
        };
        assert_eq!(named.builtin(), ["grep", "ls"]);

        let hosts_only = ToolSelection {
            no_builtin: true,
            ..default
        };
        assert!(hosts_only.builtin().is_empty() && hosts_only.allows("my_host_tool"));
    }
}

#[cfg(test)]
mod tool_set_tests {
    use super::*;
    use serde_json::json;

    fn config(cwd: &std::path::Path) -> SessionConfig {
        SessionConfig {
            agent_dir: cwd.join("agent"),
            cwd: cwd.to_path_buf(),
            no_session: true,
            no_context_files: true,
            exclude_tools: vec!["ls".into()],
            ..SessionConfig::default()
        }
    }

    fn tool_set(config: &SessionConfig) -> ToolSet {
        let (tx, _rx) = tokio::sync::mpsc::channel(8);
        let events = EventSink::new(tx);
        let todos = crate::todos::Todos::new(events.clone(), false, None);
        ToolSet::new(config, todos, events)
    }

    fn env(config: &SessionConfig) -> tau_tools::ToolEnv {
        tool_env(config, &Settings::from_value(serde_json::Map::new()), None)
    }

    fn names(tools: &[Arc<dyn AgentTool>]) -> Vec<String> {
        tools.iter().map(|t| t.name().to_string()).collect()
    }

    fn host_tool(name: &str) -> HostToolDefinition {
        serde_json::from_value(json!({"name": name, "description": "d",
            "parameters": {"type": "object"}}))
        .unwrap()
    }

    #[test]
    fn the_active_set_replaces_the_default_in_its_own_order() {
        let dir = tempfile::tempdir().unwrap();
        let config = config(dir.path());
        let mut tools = tool_set(&config);
        assert_eq!(
            names(&tools.offered(env(&config), None)),
            ["read", "bash", "edit", "write", "todo_write"]
        );
        let all = names(&tools.all(env(&config), None));
        assert!(all.contains(&"grep".to_string()) && !all.contains(&"ls".to_string()));
        tools.set_active(vec![
            "grep".into(),
            "no_such_tool".into(),
            "ls".into(),
            "read".into(),
        ]);
        assert_eq!(tools.active().map(|names| names.len()), Some(4));
        assert_eq!(names(&tools.offered(env(&config), None)), ["grep", "read"]);
    }

    #[test]
    fn host_tools_join_when_active_and_allowed() {
        let dir = tempfile::tempdir().unwrap();
        let config = config(dir.path());
        let mut tools = tool_set(&config);
        assert_eq!(
            tools.set_host_tools(vec![host_tool("deploy")]),
            Ok(vec!["deploy".to_string()])
        );
        assert_eq!(
            tools.set_host_tools(vec![host_tool("read")]),
            Err(HostToolError::Conflict("read".into()))
        );
        let offered = names(&tools.offered(env(&config), None));
        assert_eq!(offered.last().map(String::as_str), Some("deploy"));
        let excluded = SessionConfig {
            exclude_tools: vec!["deploy".into()],
            ..config.clone()
        };
        let mut tools = tool_set(&excluded);
        tools.set_host_tools(vec![host_tool("deploy")]).unwrap();
        assert!(!names(&tools.offered(env(&excluded), None)).contains(&"deploy".to_string()));
    }

    #[test]
    fn the_environment_follows_the_settings_and_the_model() {
        let dir = tempfile::tempdir().unwrap();
        let config = config(dir.path());
        let settings = Settings::from_value(
            json!({"shellPath": "/bin/zsh", "images": {"autoResize": false}})
                .as_object()
                .cloned()
                .unwrap(),
        );
        let env = tool_env(&config, &settings, None);
        assert_eq!(env.cwd, dir.path());
        assert_eq!(env.shell_path.as_deref(), Some("/bin/zsh"));
        assert!(!env.auto_resize_images && !env.model_accepts_images);
    }
}
