//! Permissions, a concept of the core (decision T123): the session's mode, the `allow` and
//! `deny` rules of the user's settings (a project's only once it is trusted) and those allowed
//! for the session, the check every tool call passes after the extensions' `tool_call` hook,
//! and the one request path every front-end answers its own way: a `permission_request`
//! event out, [`Permissions::answer`] back (RPC from a `permission_response` frame, ACP from
//! `session/request_permission`, the terminal from its dialog).
//!
//! Rules are written `tool` or `tool(pattern)`: `bash(git status)` covers a command that is
//! `git status` or starts with it followed by a space (`bash(cargo *)` ends in `*`: any
//! continuation), `edit(src/**)` and `write(docs/*.md)` a path glob relative to the working
//! directory (or absolute), any other tool by its name (`mcp_files_*` by a prefix). A command
//! made of several (`a && b`, `a | b`, `a; b`) is covered only when each is; one with a
//! substitution (`$(…)`, backticks) only by `bash` or `bash(*)`. `deny` wins over everything.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde_json::{Map, Value};
use tau_protocol::{PermissionMode, PermissionOutcome, SessionEvent, ToolCall, ToolKind};
use tau_resources::settings::Settings;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::EventSink;

/// What the model reads when the user refused a call.
pub const REFUSED_BY_USER: &str = "The user did not allow this tool call.";

/// What the model reads when a call waited for the user and nobody can answer any more.
pub const NO_ONE_TO_ASK: &str =
    "This tool call needs the user's permission, and no one can be asked any more.";

/// The settings key (`permissions.defaultMode`, `.allow`, `.deny`).
pub const SETTINGS_KEY: &str = "permissions";

/// A rule, as written in settings and as `allowAlways` adds it.
#[derive(Debug, Clone)]
pub struct Rule {
    text: String,
    tool: ToolPattern,
    argument: Argument,
}

#[derive(Debug, Clone)]
enum ToolPattern {
    Exact(String),
    Prefix(String),
}

#[derive(Debug, Clone)]
enum Argument {
    Any,
    /// `bash`: the command is this or starts with it and a space; `open` (written with a
    /// trailing `*`): starts with it.
    Command {
        prefix: String,
        open: bool,
    },
    /// `edit`, `write`: the path, resolved against the working directory, matches.
    Path(globset::GlobMatcher),
}

/// Why a rule could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    #[error("permission rule \"{0}\": write `tool` or `tool(pattern)`")]
    Shape(String),
    #[error("permission rule \"{rule}\": {detail}")]
    Glob { rule: String, detail: String },
}

impl Rule {
    /// Reads `text`; relative path globs are taken relative to `cwd`.
    pub fn parse(text: &str, cwd: &Path) -> Result<Rule, RuleError> {
        let text = text.trim();
        let (tool, pattern) = match text.split_once('(') {
            Some((tool, rest)) => {
                let pattern = rest
                    .strip_suffix(')')
                    .ok_or_else(|| RuleError::Shape(text.to_string()))?;
                (tool.trim(), Some(pattern.trim()))
            }
            None => (text, None),
        };
        if tool.is_empty() || tool.contains(char::is_whitespace) {
            return Err(RuleError::Shape(text.to_string()));
        }
        let tool_pattern = match tool.strip_suffix('*') {
            Some(prefix) => ToolPattern::Prefix(prefix.to_string()),
            None => ToolPattern::Exact(tool.to_string()),
        };
        let argument = match pattern {
            None | Some("*") | Some("") => Argument::Any,
            Some(pattern) if tool == "bash" => match pattern.strip_suffix('*') {
                Some(prefix) => Argument::Command {
                    prefix: prefix.to_string(),
                    open: true,
                },
                None => Argument::Command {
                    prefix: pattern.to_string(),
                    open: false,
                },
            },
            Some(pattern) => {
                let expanded = tau_base::paths::expand_tilde(pattern);
                let absolute = if expanded.is_absolute() {
                    expanded
                } else {
                    cwd.join(expanded)
                };
                let glob = globset::GlobBuilder::new(&absolute.to_string_lossy())
                    .literal_separator(true)
                    .build()
                    .map_err(|e| RuleError::Glob {
                        rule: text.to_string(),
                        detail: e.kind().to_string(),
                    })?;
                Argument::Path(glob.compile_matcher())
            }
        };
        Ok(Rule {
            text: text.to_string(),
            tool: tool_pattern,
            argument,
        })
    }

    fn covers_tool(&self, name: &str) -> bool {
        match &self.tool {
            ToolPattern::Exact(tool) => tool == name,
            ToolPattern::Prefix(prefix) => name.starts_with(prefix.as_str()),
        }
    }

    /// Whether the rule covers the call `name(args)`.
    fn covers(&self, name: &str, args: &Map<String, Value>, cwd: &Path) -> bool {
        if !self.covers_tool(name) {
            return false;
        }
        match &self.argument {
            Argument::Any => true,
            Argument::Command { .. } => {
                let command = args.get("command").and_then(Value::as_str).unwrap_or("");
                match split_command(command) {
                    Some(parts) => !parts.is_empty() && parts.iter().all(|p| self.covers_one(p)),
                    None => false,
                }
            }
            Argument::Path(glob) => match args.get("path").and_then(Value::as_str) {
                Some(path) => glob.is_match(resolve(path, cwd)),
                None => false,
            },
        }
    }

    /// Whether the rule covers one simple command.
    fn covers_one(&self, command: &str) -> bool {
        let Argument::Command { prefix, open } = &self.argument else {
            return true;
        };
        let command = command.trim();
        if *open {
            command.starts_with(prefix.as_str())
        } else {
            command == prefix
                || command
                    .strip_prefix(prefix.as_str())
                    .is_some_and(|rest| rest.starts_with(char::is_whitespace))
        }
    }

    /// Whether a `deny` rule refuses the call: like [`Self::covers`], but a command is refused
    /// when any part of it is (a substitution does not hide one).
    fn refuses(&self, name: &str, args: &Map<String, Value>, cwd: &Path) -> bool {
        if !self.covers_tool(name) {
            return false;
        }
        match &self.argument {
            Argument::Command { .. } => {
                let command = args.get("command").and_then(Value::as_str).unwrap_or("");
                let parts = split_command(command).unwrap_or_else(|| {
                    command
                        .split(['$', '`', '(', ')'])
                        .flat_map(|piece| split_command(piece).unwrap_or_default())
                        .collect()
                });
                self.covers_one(command) || parts.iter().any(|p| self.covers_one(p))
            }
            _ => self.covers(name, args, cwd),
        }
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// The simple commands of a command line, split at `&&`, `||`, `;`, `|`, `&` and line
/// breaks outside quotes; `None` when it holds a substitution (`$(`, backticks, `<(`, `>(`),
/// whose inner command no prefix can vouch for.
fn split_command(command: &str) -> Option<Vec<String>> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut quote: Option<char> = None;
    let mut chars = command.chars().peekable();
    while let Some(ch) = chars.next() {
        match (quote, ch) {
            (Some('\''), '\'') => {
                quote = None;
                current.push(ch);
            }
            (Some('\''), _) => current.push(ch),
            (_, '\\') => {
                current.push(ch);
                if let Some(next) = chars.next() {
                    current.push(next);
                }
            }
            (Some('"'), '"') => {
                quote = None;
                current.push(ch);
            }
            (_, '`') => return None,
            (_, '$') if chars.peek() == Some(&'(') => return None,
            (Some(_), _) => current.push(ch),
            (None, '\'' | '"') => {
                quote = Some(ch);
                current.push(ch);
            }
            (None, '<' | '>') if chars.peek() == Some(&'(') => return None,
            (None, ';' | '\n' | '|' | '&') => {
                // `&&`, `||`, `|&` are one separator.
                while matches!(chars.peek(), Some('&' | '|')) {
                    chars.next();
                }
                parts.push(std::mem::take(&mut current));
            }
            (None, _) => current.push(ch),
        }
    }
    parts.push(current);
    Some(
        parts
            .into_iter()
            .map(|p| p.trim().to_string())
            .filter(|p| !p.is_empty())
            .collect(),
    )
}

fn resolve(path: &str, cwd: &Path) -> PathBuf {
    let expanded = tau_base::paths::expand_tilde(path);
    let absolute = if expanded.is_absolute() {
        expanded
    } else {
        cwd.join(expanded)
    };
    tau_base::paths::normalize(&absolute)
}

/// What a built-in tool does; the rest (MCP servers', extensions') may do anything.
pub fn kind_of(tool: &str) -> ToolKind {
    match tool {
        "read" | "grep" | "find" | "ls" | "todo_write" => ToolKind::Read,
        "edit" | "write" => ToolKind::Edit,
        "bash" => ToolKind::Command,
        _ => ToolKind::Other,
    }
}

/// The decision for one call.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    Allow,
    /// Refused; the text is the model's.
    Deny(String),
    /// The user is asked.
    Ask {
        kind: ToolKind,
        title: String,
        /// The rule `allowAlways` adds.
        rule: String,
    },
}

/// The rules one settings file layer gave, with the problems found reading them.
#[derive(Debug, Default)]
struct RuleSet {
    allow: Vec<Rule>,
    deny: Vec<Rule>,
}

struct State {
    mode: PermissionMode,
    rules: RuleSet,
    /// `allowAlways` answers of this session.
    session_allow: Vec<Rule>,
    /// Tools that are not tau's to ask about (the RPC client's host tools run in the client).
    exempt: Vec<String>,
    pending: HashMap<String, oneshot::Sender<(PermissionOutcome, bool)>>,
    next_id: u64,
    /// Input ended: nobody answers any more.
    closed: bool,
}

/// A session's permissions, shared by the session and its runs.
pub struct Permissions {
    state: Mutex<State>,
    cwd: PathBuf,
    /// The user's settings file, where a remembered rule goes.
    user_settings: Option<PathBuf>,
    /// The user's own `allow` rules as that file holds them.
    user_allow: Mutex<Vec<String>>,
}

impl std::fmt::Debug for Permissions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Permissions")
            .field("mode", &self.mode())
            .finish_non_exhaustive()
    }
}

impl Permissions {
    /// The rules of `settings` (see [`Self::load_rules`]), in mode `allowAll`: a front-end
    /// that asks sets its mode. Returns the problems found in the rules, each to report once.
    pub fn new(cwd: &Path, agent_dir: &Path, settings: &Settings) -> (Self, Vec<String>) {
        let permissions = Permissions {
            state: Mutex::new(State {
                mode: PermissionMode::AllowAll,
                rules: RuleSet::default(),
                session_allow: Vec::new(),
                exempt: Vec::new(),
                pending: HashMap::new(),
                next_id: 0,
                closed: false,
            }),
            cwd: cwd.to_path_buf(),
            user_settings: Some(agent_dir.join("settings.json")),
            user_allow: Mutex::new(Vec::new()),
        };
        let warnings = permissions.load_rules(settings);
        (permissions, warnings)
    }

    /// Reads the `allow` and `deny` rules of `settings` again (at start and on reload): the
    /// user's file, and the project's when it is applied, which is only once trusted. Returns
    /// the problems found, each rule that has one left out.
    pub fn load_rules(&self, settings: &Settings) -> Vec<String> {
        let mut warnings = Vec::new();
        let mut rules = RuleSet::default();
        let mut user_allow = Vec::new();
        for (file, layer) in settings.layers_of(SETTINGS_KEY) {
            let from_user = file.is_some() && file == self.user_settings.as_deref();
            for (list, out) in [("allow", &mut rules.allow), ("deny", &mut rules.deny)] {
                let Some(items) = layer.get(list) else {
                    continue;
                };
                let Some(items) = items.as_array() else {
                    warnings.push(format!("Ignoring setting permissions.{list}: not an array"));
                    continue;
                };
                for item in items {
                    let Some(text) = item.as_str() else {
                        warnings.push(format!("Ignoring permission rule {item}: not a string"));
                        continue;
                    };
                    match Rule::parse(text, &self.cwd) {
                        Ok(rule) => out.push(rule),
                        Err(err) => warnings.push(format!("Ignoring {err}")),
                    }
                    if list == "allow" && from_user {
                        user_allow.push(text.to_string());
                    }
                }
            }
        }
        self.lock().rules = rules;
        *self
            .user_allow
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = user_allow;
        warnings
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn mode(&self) -> PermissionMode {
        self.lock().mode
    }

    /// Sets the mode; whether it changed.
    pub fn set_mode(&self, mode: PermissionMode) -> bool {
        let mut state = self.lock();
        let changed = state.mode != mode;
        state.mode = mode;
        changed
    }

    /// The mode `permissions.defaultMode` names in `settings`, if it names one.
    pub fn mode_in(settings: &Settings) -> Option<PermissionMode> {
        settings
            .get::<Value>(SETTINGS_KEY)?
            .get("defaultMode")
            .and_then(Value::as_str)
            .and_then(PermissionMode::parse)
    }

    /// Tools that are never asked about (the RPC client's own host tools).
    pub fn set_exempt(&self, tools: Vec<String>) {
        self.lock().exempt = tools;
    }

    /// The decision for the call `name(args)`, before anyone is asked.
    pub fn decide(&self, name: &str, args: &Map<String, Value>) -> Decision {
        let state = self.lock();
        if let Some(rule) = state
            .rules
            .deny
            .iter()
            .find(|rule| rule.refuses(name, args, &self.cwd))
        {
            return Decision::Deny(format!(
                "The permission rule \"{rule}\" does not allow this tool call."
            ));
        }
        let kind = kind_of(name);
        if kind == ToolKind::Read || state.exempt.iter().any(|tool| tool == name) {
            return Decision::Allow;
        }
        let allowed = state
            .rules
            .allow
            .iter()
            .chain(&state.session_allow)
            .any(|rule| rule.covers(name, args, &self.cwd));
        match state.mode {
            PermissionMode::AllowAll => Decision::Allow,
            _ if allowed && !(state.mode == PermissionMode::Plan && kind == ToolKind::Edit) => {
                Decision::Allow
            }
            PermissionMode::Plan => Decision::Deny(
                "Plan mode is read-only: files cannot be changed and only commands an allow rule \
                 covers can run. Read, search and plan; the user leaves plan mode to carry it out."
                    .to_string(),
            ),
            PermissionMode::AcceptEdits if kind == ToolKind::Edit => Decision::Allow,
            PermissionMode::Ask | PermissionMode::AcceptEdits => Decision::Ask {
                kind,
                title: title_of(name, args),
                rule: rule_for(name, args),
            },
        }
    }

    /// The check a tool call passes after the extensions' `tool_call` hook: allowed, refused
    /// (the text is the model's), or asked through `events` and waited for until answered or
    /// `cancel` ends the run.
    pub async fn check(
        &self,
        call: &ToolCall,
        args: &Map<String, Value>,
        events: &EventSink,
        cancel: &CancellationToken,
    ) -> Result<(), String> {
        let (kind, title, rule) = match self.decide(&call.name, args) {
            Decision::Allow => return Ok(()),
            Decision::Deny(reason) => return Err(reason),
            Decision::Ask { kind, title, rule } => (kind, title, rule),
        };
        self.wait_for_user(call, args, kind, title, rule, events, cancel)
            .await
    }

    /// Asks the user about something other than a model's tool call (an MCP server's
    /// sampling request, named by `call.name`): `deny` and `allow` rules for the name answer
    /// first, then the user is asked whatever the mode (the mode is about the model's calls).
    pub async fn ask(
        &self,
        call: &ToolCall,
        args: &Map<String, Value>,
        title: String,
        events: &EventSink,
        cancel: &CancellationToken,
    ) -> Result<(), String> {
        {
            let state = self.lock();
            if let Some(rule) = state
                .rules
                .deny
                .iter()
                .find(|rule| rule.refuses(&call.name, args, &self.cwd))
            {
                return Err(format!("The permission rule \"{rule}\" does not allow it."));
            }
            if state
                .rules
                .allow
                .iter()
                .chain(&state.session_allow)
                .any(|rule| rule.covers(&call.name, args, &self.cwd))
            {
                return Ok(());
            }
        }
        let rule = call.name.clone();
        self.wait_for_user(call, args, ToolKind::Other, title, rule, events, cancel)
            .await
    }

    /// Sends a `permission_request` and waits for its answer (or the end of `cancel`).
    #[allow(clippy::too_many_arguments)]
    async fn wait_for_user(
        &self,
        call: &ToolCall,
        args: &Map<String, Value>,
        kind: ToolKind,
        title: String,
        rule: String,
        events: &EventSink,
        cancel: &CancellationToken,
    ) -> Result<(), String> {
        let (id, answer) = {
            let mut state = self.lock();
            if state.closed {
                return Err(NO_ONE_TO_ASK.to_string());
            }
            state.next_id += 1;
            let id = format!("permission-{}", state.next_id);
            let (tx, rx) = oneshot::channel();
            state.pending.insert(id.clone(), tx);
            (id, rx)
        };
        events
            .emit(SessionEvent::PermissionRequest {
                id: id.clone(),
                tool_call_id: call.id.clone(),
                tool_name: call.name.clone(),
                args: Value::Object(args.clone()),
                kind,
                title,
                rule: rule.clone(),
            })
            .await;
        // However the wait ends without an answer (the run aborted, input ended, the call's
        // future dropped), the request is withdrawn and the front-end told.
        let mut waiting = Waiting {
            permissions: self,
            events,
            id,
            answered: false,
        };
        let outcome = tokio::select! {
            answer = answer => answer.ok(),
            () = cancel.cancelled() => None,
        };
        let Some((outcome, remember)) = outcome else {
            return Err(if cancel.is_cancelled() {
                "Aborted".to_string()
            } else {
                NO_ONE_TO_ASK.to_string()
            });
        };
        waiting.answered = true;
        match outcome {
            PermissionOutcome::Allow => Ok(()),
            PermissionOutcome::AllowAlways => {
                self.allow_always(&rule, remember);
                Ok(())
            }
            PermissionOutcome::Reject => Err(REFUSED_BY_USER.to_string()),
        }
    }

    /// A front-end's answer to the request `id`; false when nothing waits for it (answered,
    /// withdrawn, or never asked).
    pub fn answer(&self, id: &str, outcome: PermissionOutcome, remember: bool) -> bool {
        let Some(tx) = self.lock().pending.remove(id) else {
            return false;
        };
        tx.send((outcome, remember)).is_ok()
    }

    /// Input ended (T77): what waits is withdrawn, and later calls that would ask are refused.
    pub fn close(&self) {
        let mut state = self.lock();
        state.closed = true;
        // Dropping the senders wakes the waiting checks, which report the withdrawal.
        state.pending.clear();
    }

    /// Ids of the requests still waiting (for a front-end that withdraws its own prompts).
    pub fn waiting(&self) -> Vec<String> {
        self.lock().pending.keys().cloned().collect()
    }

    fn allow_always(&self, rule: &str, remember: bool) {
        match Rule::parse(rule, &self.cwd) {
            Ok(parsed) => self.lock().session_allow.push(parsed),
            Err(err) => tracing::warn!("{err}"),
        }
        if !remember {
            return;
        }
        let Some(file) = &self.user_settings else {
            return;
        };
        let mut user_allow = self
            .user_allow
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if user_allow.iter().any(|r| r == rule) {
            return;
        }
        user_allow.push(rule.to_string());
        let list = Value::from(user_allow.clone());
        if let Err(err) = tau_resources::settings::write_key(file, "permissions.allow", list) {
            tracing::warn!("the permission rule was not saved: {err}");
        }
    }
}

/// A request out and not yet answered; dropped unanswered, it is withdrawn.
struct Waiting<'a> {
    permissions: &'a Permissions,
    events: &'a EventSink,
    id: String,
    answered: bool,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if self.answered {
            return;
        }
        self.permissions.lock().pending.remove(&self.id);
        self.events.emit_now(SessionEvent::PermissionWithdrawn {
            id: std::mem::take(&mut self.id),
        });
    }
}

/// A line saying what the call would do.
fn title_of(name: &str, args: &Map<String, Value>) -> String {
    let text = |key: &str| args.get(key).and_then(Value::as_str).unwrap_or_default();
    let one_line = |s: &str| {
        let line = s.lines().next().unwrap_or_default();
        if line.chars().count() > 120 || s.contains('\n') {
            format!("{}…", line.chars().take(120).collect::<String>())
        } else {
            line.to_string()
        }
    };
    match name {
        "bash" => format!("Run {}", one_line(text("command"))),
        "edit" => format!("Edit {}", text("path")),
        "write" => format!("Write {}", text("path")),
        other => format!("Use {other}"),
    }
}

/// Programs whose second word names what they do (`git push`, `cargo test`, `npm run`): an
/// `allowAlways` for one of them covers that subcommand, not the whole program.
const SUBCOMMAND_PROGRAMS: &[&str] = &[
    "apt",
    "apt-get",
    "brew",
    "bun",
    "bunx",
    "cargo",
    "deno",
    "dnf",
    "docker",
    "dotnet",
    "gh",
    "git",
    "go",
    "gradle",
    "helm",
    "just",
    "kubectl",
    "make",
    "mvn",
    "npm",
    "npx",
    "pip",
    "pip3",
    "pnpm",
    "pnpx",
    "podman",
    "poetry",
    "rustup",
    "swift",
    "systemctl",
    "terraform",
    "uv",
    "uvx",
    "yarn",
];

/// The rule an `allowAlways` answer adds: a command by its program (with its subcommand for
/// the programs that have them), an edit or write tool whole, another tool by its name.
fn rule_for(name: &str, args: &Map<String, Value>) -> String {
    if name != "bash" {
        return name.to_string();
    }
    let command = args.get("command").and_then(Value::as_str).unwrap_or("");
    let first = split_command(command)
        .and_then(|parts| parts.into_iter().next())
        .unwrap_or_default();
    let mut words = first.split_whitespace();
    let Some(program) = words.next() else {
        return "bash".to_string();
    };
    let subcommand = words.next().filter(|word| {
        SUBCOMMAND_PROGRAMS.contains(&program)
            && word.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && word
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | ':' | '.'))
    });
    match subcommand {
        Some(sub) => format!("bash({program} {sub})"),
        None => format!("bash({program})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => Map::new(),
        }
    }

    fn permissions(settings: Value) -> (Permissions, Vec<String>, tempfile::TempDir) {
        let agent = tempfile::tempdir().unwrap();
        std::fs::write(
            agent.path().join("settings.json"),
            serde_json::to_string(&settings).unwrap(),
        )
        .unwrap();
        let cwd = Path::new("/work/project");
        let loaded = Settings::load_for(agent.path(), cwd, false);
        let (p, warnings) = Permissions::new(cwd, agent.path(), &loaded);
        (p, warnings, agent)
    }

    #[test]
    fn commands_are_covered_by_their_prefix_and_each_part() {
        let cwd = Path::new("/w");
        let rule = Rule::parse("bash(git status)", cwd).unwrap();
        let covers = |c: &str| rule.covers("bash", &args(json!({"command": c})), cwd);
        assert!(covers("git status"));
        assert!(covers("git status --short"));
        assert!(!covers("git statusx"));
        assert!(!covers("git push"));
        assert!(covers("git status && git status -s"));
        assert!(!covers("git status && rm -rf /"));
        assert!(!covers("git status | sh"));
        assert!(!covers("git status $(rm -rf /)"));
        assert!(!covers("git status `rm -rf /`"));
        // Quoted separators are the command's own text.
        assert!(covers("git status 'a && b'"));
        let open = Rule::parse("bash(cargo *)", cwd).unwrap();
        assert!(open.covers("bash", &args(json!({"command": "cargo test -q"})), cwd));
        assert!(!open.covers("bash", &args(json!({"command": "cargox"})), cwd));
        let any = Rule::parse("bash", cwd).unwrap();
        assert!(any.covers("bash", &args(json!({"command": "a $(b)"})), cwd));
    }

    #[test]
    fn a_deny_rule_finds_its_command_anywhere_in_the_line() {
        let cwd = Path::new("/w");
        let rule = Rule::parse("bash(rm -rf*)", cwd).unwrap();
        let refuses = |c: &str| rule.refuses("bash", &args(json!({"command": c})), cwd);
        assert!(refuses("rm -rf /"));
        assert!(refuses("ls && rm -rf /"));
        assert!(refuses("echo $(rm -rf /)"));
        assert!(!refuses("ls -la"));
    }

    #[test]
    fn paths_are_globs_relative_to_the_working_directory() {
        let cwd = Path::new("/work/project");
        let rule = Rule::parse("edit(src/**)", cwd).unwrap();
        let covers = |p: &str| rule.covers("edit", &args(json!({"path": p})), cwd);
        assert!(covers("src/main.rs"));
        assert!(covers("/work/project/src/a/b.rs"));
        assert!(covers("./src/../src/x.rs"));
        assert!(!covers("src/../Cargo.toml"));
        assert!(!covers("/etc/passwd"));
        assert!(!rule.covers("write", &args(json!({"path": "src/main.rs"})), cwd));
        let one = Rule::parse("write(*.md)", cwd).unwrap();
        assert!(one.covers("write", &args(json!({"path": "README.md"})), cwd));
        assert!(!one.covers("write", &args(json!({"path": "docs/a.md"})), cwd));
    }

    #[test]
    fn bad_rules_are_refused_with_a_reason() {
        let cwd = Path::new("/w");
        assert!(matches!(
            Rule::parse("bash(git", cwd),
            Err(RuleError::Shape(_))
        ));
        assert!(matches!(Rule::parse("", cwd), Err(RuleError::Shape(_))));
        assert!(matches!(
            Rule::parse("edit(src/[)", cwd),
            Err(RuleError::Glob { .. })
        ));
    }

    #[test]
    fn modes_decide_by_what_a_tool_does() {
        let (p, warnings, _agent) = permissions(json!({"permissions": {
            "allow": ["bash(git status)"],
            "deny": ["bash(rm*)", "write(.env)"]
        }}));
        assert!(warnings.is_empty(), "{warnings:?}");
        let bash = |c: &str| args(json!({"command": c}));
        let edit = args(json!({"path": "src/main.rs"}));
        // allowAll: pi's behaviour, but deny rules hold.
        assert_eq!(p.decide("bash", &bash("make")), Decision::Allow);
        assert!(matches!(
            p.decide("bash", &bash("rm -r x")),
            Decision::Deny(_)
        ));
        assert!(matches!(
            p.decide("write", &args(json!({"path": ".env"}))),
            Decision::Deny(_)
        ));
        p.set_mode(PermissionMode::Ask);
        assert_eq!(p.decide("read", &edit), Decision::Allow);
        assert_eq!(p.decide("bash", &bash("git status")), Decision::Allow);
        assert!(matches!(
            p.decide("bash", &bash("git push origin main")),
            Decision::Ask { kind: ToolKind::Command, ref rule, .. } if rule == "bash(git push)"
        ));
        assert!(matches!(
            p.decide("edit", &edit),
            Decision::Ask { kind: ToolKind::Edit, ref title, .. } if title == "Edit src/main.rs"
        ));
        assert!(matches!(
            p.decide("mcp_files_write", &edit),
            Decision::Ask {
                kind: ToolKind::Other,
                ..
            }
        ));
        p.set_mode(PermissionMode::AcceptEdits);
        assert_eq!(p.decide("edit", &edit), Decision::Allow);
        assert!(matches!(
            p.decide("bash", &bash("make")),
            Decision::Ask { .. }
        ));
        p.set_mode(PermissionMode::Plan);
        assert!(matches!(p.decide("edit", &edit), Decision::Deny(_)));
        assert!(matches!(p.decide("bash", &bash("make")), Decision::Deny(_)));
        assert_eq!(p.decide("bash", &bash("git status")), Decision::Allow);
        assert_eq!(p.decide("grep", &edit), Decision::Allow);
        // The client's own host tools are its own to ask about.
        p.set_mode(PermissionMode::Ask);
        p.set_exempt(vec!["deploy".into()]);
        assert_eq!(p.decide("deploy", &edit), Decision::Allow);
    }

    #[test]
    fn problems_in_the_rules_are_reported_and_the_rest_kept() {
        let (p, warnings, _agent) = permissions(json!({"permissions": {
            "allow": ["bash(git", 7, "bash(ls)"],
            "deny": "rm"
        }}));
        assert_eq!(warnings.len(), 3, "{warnings:?}");
        p.set_mode(PermissionMode::Ask);
        assert_eq!(
            p.decide("bash", &args(json!({"command": "ls -la"}))),
            Decision::Allow
        );
    }

    /// Starts `p.check` of `command` beside the test; returns it and the request it made.
    async fn asked(
        p: &std::sync::Arc<Permissions>,
        command: &str,
        events: &EventSink,
        rx: &mut tokio::sync::mpsc::Receiver<crate::Outbound>,
        cancel: &CancellationToken,
    ) -> (tokio::task::JoinHandle<Result<(), String>>, SessionEvent) {
        let call = ToolCall {
            id: "c1".into(),
            name: "bash".into(),
            arguments: Map::new(),
            thought_signature: None,
        };
        let args = args(json!({ "command": command }));
        let (p, events, cancel) = (p.clone(), events.clone(), cancel.clone());
        let waiting = tokio::spawn(async move { p.check(&call, &args, &events, &cancel).await });
        match rx.recv().await {
            Some(crate::Outbound::Event(event)) => (waiting, *event),
            other => panic!("no request: {other:?}"),
        }
    }

    fn request_id(event: &SessionEvent) -> String {
        match event {
            SessionEvent::PermissionRequest { id, .. } => id.clone(),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn a_request_is_answered_remembered_or_withdrawn() {
        let (p, _, agent) = permissions(json!({"permissions": {"allow": ["bash(ls)"]}}));
        let p = std::sync::Arc::new(p);
        p.set_mode(PermissionMode::Ask);
        let (tx, mut rx) = tokio::sync::mpsc::channel(16);
        let events = EventSink::new(tx);
        let cancel = CancellationToken::new();
        // Answered "always, remember": the next such call runs without asking.
        let (waiting, request) = asked(&p, "cargo test", &events, &mut rx, &cancel).await;
        let SessionEvent::PermissionRequest { rule, title, .. } = &request else {
            panic!("{request:?}");
        };
        assert_eq!(rule, "bash(cargo test)");
        assert_eq!(title, "Run cargo test");
        let id = request_id(&request);
        assert!(p.answer(&id, PermissionOutcome::AllowAlways, true));
        assert_eq!(waiting.await.unwrap(), Ok(()));
        assert!(
            !p.answer(&id, PermissionOutcome::Allow, false),
            "answered once"
        );
        assert_eq!(
            p.decide("bash", &args(json!({"command": "cargo test"}))),
            Decision::Allow
        );
        let saved: Value = serde_json::from_str(
            &std::fs::read_to_string(agent.path().join("settings.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(
            saved["permissions"]["allow"],
            json!(["bash(ls)", "bash(cargo test)"])
        );
        // Rejected: the model reads why.
        let (waiting, request) = asked(&p, "make", &events, &mut rx, &cancel).await;
        assert!(p.answer(&request_id(&request), PermissionOutcome::Reject, false));
        assert_eq!(waiting.await.unwrap(), Err(REFUSED_BY_USER.to_string()));
        // Aborted while waiting: withdrawn.
        let (waiting, request) = asked(&p, "make", &events, &mut rx, &cancel).await;
        cancel.cancel();
        assert_eq!(waiting.await.unwrap(), Err("Aborted".to_string()));
        match rx.recv().await {
            Some(crate::Outbound::Event(event)) => assert_eq!(
                *event,
                SessionEvent::PermissionWithdrawn {
                    id: request_id(&request)
                }
            ),
            other => panic!("{other:?}"),
        }
        // Input ended: nobody is asked any more.
        p.close();
        let call = ToolCall {
            id: "c2".into(),
            name: "bash".into(),
            arguments: Map::new(),
            thought_signature: None,
        };
        assert_eq!(
            p.check(
                &call,
                &args(json!({"command": "make"})),
                &events,
                &CancellationToken::new()
            )
            .await,
            Err(NO_ONE_TO_ASK.to_string())
        );
    }
}
