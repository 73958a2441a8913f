//! The `mcpServers` configuration: parsing the map Claude Code and Cursor use (in tau's
//! settings, a project `.mcp.json`, a `--mcp-config` file), `${VAR}` expansion, and merging
//! layers by precedence. Which layers may be used at all (trust) is the caller's decision.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::path::PathBuf;

use serde_json::{Map, Value};
use thiserror::Error;

/// One configured server, by the name its tools are prefixed with.
#[derive(Clone, PartialEq, Eq)]
pub struct McpServer {
    pub name: String,
    pub config: ServerConfig,
    /// What `${VAR}` expansion put into the entry (in `command`, `args`, `cwd`, `url`, `env`
    /// or `headers`): values from the environment, which may be tokens. With the entry's
    /// env and header values they are kept out of every message about the server
    /// (decision T96).
    pub expanded: Vec<String>,
    /// Whether the server is offered the working folder as its root (`"roots": false`
    /// turns it off for a server that would put it in place of its own folders).
    pub roots: bool,
}

impl McpServer {
    /// A server without `${VAR}` expansions (tests, callers that build configurations).
    pub fn new(name: impl Into<String>, config: ServerConfig) -> Self {
        Self {
            name: name.into(),
            config,
            expanded: Vec::new(),
            roots: true,
        }
    }
}

// The expanded values are as secret as env values: Debug names only how many there are.
impl fmt::Debug for McpServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpServer")
            .field("name", &self.name)
            .field("config", &self.config)
            .field("expanded", &self.expanded.len())
            .finish()
    }
}

/// How to reach a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerConfig {
    Stdio(StdioConfig),
    Http(HttpConfig),
}

/// A server started as a child process speaking MCP on its stdin and stdout.
#[derive(Clone, PartialEq, Eq)]
pub struct StdioConfig {
    pub command: String,
    pub args: Vec<String>,
    /// Set over what the server inherits of tau's environment ([`Self::inherit_env`]).
    pub env: BTreeMap<String, String>,
    /// The working directory; a relative one is relative to the folder [`Self::placed_in`]
    /// names, where the server also starts when the entry gives none.
    pub cwd: Option<PathBuf>,
    /// Which of tau's environment variables the server sees besides [`BASE_ENV`].
    pub inherit_env: InheritEnv,
}

/// The variables every stdio server inherits from tau's environment, as the MCP SDKs pass
/// them (their `DEFAULT_INHERITED_ENV_VARS`), with the locale and the temporary folder added:
/// what a program needs to find itself and its user, and nothing that is usually a secret.
/// API keys and tokens stay with tau unless an entry passes them (docs/security.md).
pub const BASE_ENV: &[&str] = &[
    "HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR",
    "TZ",
];

/// An entry's `inheritEnv`: more of tau's environment for one server.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum InheritEnv {
    /// [`BASE_ENV`] only (no `inheritEnv`, or `false`).
    #[default]
    Base,
    /// `true`: all of tau's environment, as before this rule.
    All,
    /// Names, each exact or a prefix ending in `*` (`AWS_*`), on top of [`BASE_ENV`].
    Names(Vec<String>),
}

impl InheritEnv {
    /// Whether the variable `name` of tau's environment reaches the server.
    pub fn passes(&self, name: &str) -> bool {
        if BASE_ENV.contains(&name) {
            return true;
        }
        match self {
            Self::Base => false,
            Self::All => true,
            Self::Names(names) => names.iter().any(|pattern| match pattern.strip_suffix('*') {
                Some(prefix) => name.starts_with(prefix),
                None => pattern == name,
            }),
        }
    }
}

impl StdioConfig {
    /// The entry with its places settled in `dir`: the server starts there unless the entry
    /// names a `cwd`, a relative `cwd` is taken from `dir`, and a relative command with a
    /// `/` (`./server`, `bin/server`) from the working directory so settled. tau passes the
    /// project only once the user trusted it, and the user's agent folder before: a server
    /// started in an untrusted repository would find its `node_modules/.bin` (`npx`), its
    /// Python modules (`python -m`) and its files (`node server.js`).
    pub fn placed_in(mut self, dir: &std::path::Path) -> Self {
        let cwd = match self.cwd.take() {
            Some(cwd) if cwd.is_absolute() => cwd,
            Some(cwd) => dir.join(cwd),
            None => dir.to_path_buf(),
        };
        let command = std::path::Path::new(&self.command);
        if !command.is_absolute() && command.components().count() > 1 {
            self.command = cwd.join(command).to_string_lossy().into_owned();
        }
        self.cwd = Some(cwd);
        self
    }
}

/// A server reached over HTTP.
#[derive(Clone, PartialEq, Eq)]
pub struct HttpConfig {
    pub url: String,
    pub headers: BTreeMap<String, String>,
    /// What the entry asked for: the Streamable HTTP transport or the older HTTP+SSE one
    /// (decisions T86, T128).
    pub transport: HttpTransport,
    /// `oauth.clientId`: a client registered with the server's authorization server
    /// beforehand, used by `tau mcp login` instead of registering one (decision T127).
    pub oauth_client_id: Option<String>,
}

/// The `type` an HTTP entry gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpTransport {
    StreamableHttp,
    /// `type: "sse"`, the protocol's older HTTP+SSE transport.
    Sse,
}

// Env values and headers hold tokens; Debug (and so every log line and error built from
// it) shows their names only.
impl fmt::Debug for StdioConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StdioConfig")
            .field("command", &self.command)
            .field("args", &self.args)
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .field("cwd", &self.cwd)
            .field("inherit_env", &self.inherit_env)
            .finish()
    }
}

impl fmt::Debug for HttpConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpConfig")
            .field("url", &self.url)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("transport", &self.transport)
            .field("oauth_client_id", &self.oauth_client_id)
            .finish()
    }
}

/// A bad entry of an `mcpServers` map; the other entries are still used.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("MCP server \"{server}\": {reason}")]
pub struct ConfigError {
    pub server: String,
    pub reason: ConfigErrorReason,
}

/// Why an entry was refused. Never carries a value from `env` or `headers`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ConfigErrorReason {
    #[error("the entry is not an object")]
    NotAnObject,
    #[error("the name is empty")]
    EmptyName,
    #[error("\"{field}\" must be {expected}")]
    WrongType {
        field: String,
        expected: &'static str,
    },
    #[error(
        "unknown \"type\" \"{0}\" (expected \"stdio\", \"http\", \"streamable-http\" or \"sse\")"
    )]
    UnknownType(String),
    #[error("neither \"command\" nor \"url\" is given")]
    NoCommandOrUrl,
    #[error("a {kind} server needs \"{field}\"")]
    Missing {
        kind: &'static str,
        field: &'static str,
    },
    #[error("\"{field}\" is empty")]
    Empty { field: String },
    #[error("\"{field}\" uses ${{{variable}}}, which is not set and has no default")]
    MissingVariable { field: String, variable: String },
    #[error("\"url\" must start with http:// or https://")]
    BadUrl,
    #[error("header name \"{0}\" is not valid")]
    BadHeaderName(String),
    #[error("the value of header \"{0}\" is not valid")]
    BadHeaderValue(String),
}

/// A whole configuration document that cannot be read at all.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ConfigFileError {
    #[error("not valid JSON: {0}")]
    Json(String),
    #[error("the document is not a JSON object")]
    NotAnObject,
    #[error("\"mcpServers\" must be an object")]
    ServersNotAnObject,
}

/// The servers of one layer, and the entries that were refused.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParsedServers {
    pub servers: Vec<McpServer>,
    pub errors: Vec<ConfigError>,
}

/// Reads an environment variable for `${VAR}` expansion; `None` when unset.
pub type EnvLookup<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The process environment, as Claude Code reads it: a variable set to the empty string is
/// set.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// Parses a configuration document: `{"mcpServers": {...}}` (`.mcp.json`, `--mcp-config`
/// files). A document without `mcpServers` has no servers.
pub fn parse_config_document(
    text: &str,
    env: EnvLookup<'_>,
) -> Result<ParsedServers, ConfigFileError> {
    let document: Value =
        serde_json::from_str(text).map_err(|error| ConfigFileError::Json(error.to_string()))?;
    let Value::Object(document) = document else {
        return Err(ConfigFileError::NotAnObject);
    };
    match document.get("mcpServers") {
        None | Some(Value::Null) => Ok(ParsedServers::default()),
        Some(Value::Object(servers)) => Ok(parse_servers(servers, env)),
        Some(_) => Err(ConfigFileError::ServersNotAnObject),
    }
}

/// Parses the value of an `mcpServers` key (tau's settings hold one too), keeping the map's
/// order.
pub fn parse_servers(servers: &Map<String, Value>, env: EnvLookup<'_>) -> ParsedServers {
    let mut parsed = ParsedServers::default();
    for (name, entry) in servers {
        let mut expanded = Vec::new();
        match parse_entry(
            name,
            entry,
            &mut Expander {
                env,
                expanded: &mut expanded,
            },
        ) {
            Ok(config) => parsed.servers.push(McpServer {
                name: name.clone(),
                config,
                expanded,
                roots: entry.get("roots").and_then(Value::as_bool) != Some(false),
            }),
            Err(reason) => parsed.errors.push(ConfigError {
                server: name.clone(),
                reason,
            }),
        }
    }
    parsed
}

/// Merges layers given highest precedence first (for example `--mcp-config` files, then the
/// project's `.mcp.json`, then settings). A name defined in a higher layer replaces the whole
/// entry of a lower one; nothing is merged field by field. The result lists the highest
/// layer's servers first, each layer in its own order.
pub fn merge_layers<I>(layers: I) -> Vec<McpServer>
where
    I: IntoIterator<Item = Vec<McpServer>>,
{
    let mut seen = HashSet::new();
    let mut merged = Vec::new();
    for layer in layers {
        for server in layer {
            if seen.insert(server.name.clone()) {
                merged.push(server);
            }
        }
    }
    merged
}

/// `${VAR}` expansion that remembers what it put in.
struct Expander<'a, 'b> {
    env: EnvLookup<'a>,
    expanded: &'b mut Vec<String>,
}

fn parse_entry(
    name: &str,
    entry: &Value,
    env: &mut Expander<'_, '_>,
) -> Result<ServerConfig, ConfigErrorReason> {
    if name.is_empty() {
        return Err(ConfigErrorReason::EmptyName);
    }
    let Value::Object(entry) = entry else {
        return Err(ConfigErrorReason::NotAnObject);
    };
    let kind = optional_string(entry, "type")?;
    let has_command = entry.get("command").is_some_and(|value| !value.is_null());
    let has_url = entry.get("url").is_some_and(|value| !value.is_null());
    match kind.as_deref() {
        Some("stdio") => parse_stdio(entry, env),
        Some("http" | "streamable-http" | "streamableHttp") => {
            parse_http(entry, env, HttpTransport::StreamableHttp)
        }
        Some("sse") => parse_http(entry, env, HttpTransport::Sse),
        Some(other) => Err(ConfigErrorReason::UnknownType(other.to_string())),
        // Without a type, Claude Code takes `command` as stdio and `url` as HTTP.
        None if has_command => parse_stdio(entry, env),
        None if has_url => parse_http(entry, env, HttpTransport::StreamableHttp),
        None => Err(ConfigErrorReason::NoCommandOrUrl),
    }
}

fn parse_stdio(
    entry: &Map<String, Value>,
    env: &mut Expander<'_, '_>,
) -> Result<ServerConfig, ConfigErrorReason> {
    let command = optional_string(entry, "command")?.ok_or(ConfigErrorReason::Missing {
        kind: "stdio",
        field: "command",
    })?;
    let command = expand(&command, "command", env)?;
    if command.trim().is_empty() {
        return Err(ConfigErrorReason::Empty {
            field: "command".into(),
        });
    }
    let args = match entry.get("args") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(index, item)| {
                let field = format!("args[{index}]");
                match item {
                    Value::String(text) => expand(text, &field, env),
                    _ => Err(ConfigErrorReason::WrongType {
                        field,
                        expected: "a string",
                    }),
                }
            })
            .collect::<Result<_, _>>()?,
        Some(_) => {
            return Err(ConfigErrorReason::WrongType {
                field: "args".into(),
                expected: "an array of strings",
            });
        }
    };
    let env_map = string_map(entry, "env", env)?;
    let cwd = optional_string(entry, "cwd")?
        .map(|cwd| expand(&cwd, "cwd", env))
        .transpose()?
        .filter(|cwd| !cwd.is_empty())
        .map(PathBuf::from);
    let inherit_env = match entry.get("inheritEnv") {
        None | Some(Value::Null) | Some(Value::Bool(false)) => InheritEnv::Base,
        Some(Value::Bool(true)) => InheritEnv::All,
        Some(Value::Array(items)) => InheritEnv::Names(
            items
                .iter()
                .enumerate()
                .map(|(index, item)| match item {
                    Value::String(name) if !name.is_empty() => Ok(name.clone()),
                    _ => Err(ConfigErrorReason::WrongType {
                        field: format!("inheritEnv[{index}]"),
                        expected: "a variable name",
                    }),
                })
                .collect::<Result<_, _>>()?,
        ),
        Some(_) => {
            return Err(ConfigErrorReason::WrongType {
                field: "inheritEnv".into(),
                expected: "true, false or an array of variable names",
            });
        }
    };
    Ok(ServerConfig::Stdio(StdioConfig {
        command,
        args,
        env: env_map,
        cwd,
        inherit_env,
    }))
}

fn parse_http(
    entry: &Map<String, Value>,
    env: &mut Expander<'_, '_>,
    transport: HttpTransport,
) -> Result<ServerConfig, ConfigErrorReason> {
    let url = optional_string(entry, "url")?.ok_or(ConfigErrorReason::Missing {
        kind: "HTTP",
        field: "url",
    })?;
    let url = expand(&url, "url", env)?;
    let lower = url.to_ascii_lowercase();
    if !(lower.starts_with("http://") || lower.starts_with("https://")) {
        return Err(ConfigErrorReason::BadUrl);
    }
    let headers = string_map(entry, "headers", env)?;
    for (name, value) in &headers {
        if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
            return Err(ConfigErrorReason::BadHeaderName(name.clone()));
        }
        if http::HeaderValue::from_str(value).is_err() {
            return Err(ConfigErrorReason::BadHeaderValue(name.clone()));
        }
    }
    let oauth_client_id = match entry.get("oauth") {
        None | Some(Value::Null) => None,
        Some(Value::Object(oauth)) => optional_string(oauth, "clientId")
            .map_err(|_| ConfigErrorReason::WrongType {
                field: "oauth.clientId".into(),
                expected: "a string",
            })?
            .map(|id| expand(&id, "oauth.clientId", env))
            .transpose()?
            .filter(|id| !id.is_empty()),
        Some(_) => {
            return Err(ConfigErrorReason::WrongType {
                field: "oauth".into(),
                expected: "an object",
            });
        }
    };
    Ok(ServerConfig::Http(HttpConfig {
        url,
        headers,
        transport,
        oauth_client_id,
    }))
}

fn optional_string(
    entry: &Map<String, Value>,
    field: &str,
) -> Result<Option<String>, ConfigErrorReason> {
    match entry.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(_) => Err(ConfigErrorReason::WrongType {
            field: field.to_string(),
            expected: "a string",
        }),
    }
}

fn string_map(
    entry: &Map<String, Value>,
    field: &str,
    env: &mut Expander<'_, '_>,
) -> Result<BTreeMap<String, String>, ConfigErrorReason> {
    match entry.get(field) {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(key, value)| {
                let item = format!("{field}.{key}");
                match value {
                    Value::String(text) => Ok((key.clone(), expand(text, &item, env)?)),
                    // Cursor's files carry numbers and booleans in env now and then.
                    Value::Number(number) => Ok((key.clone(), number.to_string())),
                    Value::Bool(flag) => Ok((key.clone(), flag.to_string())),
                    _ => Err(ConfigErrorReason::WrongType {
                        field: item,
                        expected: "a string",
                    }),
                }
            })
            .collect(),
        Some(_) => Err(ConfigErrorReason::WrongType {
            field: field.to_string(),
            expected: "an object of strings",
        }),
    }
}

fn expand(
    text: &str,
    field: &str,
    env: &mut Expander<'_, '_>,
) -> Result<String, ConfigErrorReason> {
    let lookup = env.env;
    let expanded = &mut *env.expanded;
    expand_with(text, &mut |name| {
        let value = lookup(name);
        if let Some(value) = &value {
            expanded.push(value.clone());
        }
        value
    })
    .map_err(|variable| ConfigErrorReason::MissingVariable {
        field: field.to_string(),
        variable,
    })
}

/// Expands `${VAR}` and `${VAR:-default}` as Claude Code does: a set variable (even to the
/// empty string) gives its value, an unset one its default; `$VAR`, `${}` and an unclosed
/// `${` stay as written. `Err` names the first variable that is unset without a default.
pub fn expand_variables(text: &str, env: EnvLookup<'_>) -> Result<String, String> {
    expand_with(text, &mut |name| env(name))
}

fn expand_with(text: &str, env: &mut dyn FnMut(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return Ok(out);
        };
        let content = &after[..end];
        if content.is_empty() {
            out.push_str("${}");
        } else {
            let (name, default) = match content.split_once(":-") {
                Some((name, default)) => (name, Some(default)),
                None => (content, None),
            };
            match (env(name), default) {
                (Some(value), _) => out.push_str(&value),
                (None, Some(default)) => out.push_str(default),
                (None, None) => return Err(name.to_string()),
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}
