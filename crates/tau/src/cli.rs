//! The command line: pi's RPC-relevant options (document 004, `rpc.md` §14), parsed with clap
//! and checked the way pi checks them, so a host that spawns pi can spawn tau unchanged.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{ArgAction, Parser, ValueEnum};
use tau_protocol::ThinkingLevel;

/// Output mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// JSON commands on stdin, responses and events on stdout.
    Rpc,
    /// The Agent Client Protocol on stdin/stdout, for editors (Zed, JetBrains, …).
    Acp,
    /// Run the messages, then print the final answer (as `-p`).
    Text,
    /// Run the messages, printing every event as one JSON line.
    Json,
}

/// Shape of `message_update` records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum MessageUpdates {
    /// Document 004 / pi 0.79: the delta plus the whole message so far, twice.
    #[default]
    Full,
    /// pi 1.x: `{type, usage, assistantMessageEvent}` without snapshots.
    Lean,
}

#[derive(Debug, Parser)]
#[command(
    name = "tau",
    version,
    about = "tau: a coding agent for your terminal, your editor and your programs.",
    long_about = "tau: a coding agent for your terminal, your editor and your programs.\n\n\
        Start:\n  \
        tau                          open an interactive session in this folder\n  \
        tau \"fix the failing test\"   open it with a first message\n  \
        tau -c / tau -r              continue the last session / pick an earlier one\n  \
        tau -p \"explain main.rs\"     one answer printed, then exit (piped input is read too)\n  \
        tau --mode acp               for editors (Zed, JetBrains, Neovim, ...) over the Agent \
        Client Protocol\n  \
        tau --mode rpc               for programs: JSON commands on stdin, responses and events \
        on stdout, compatible with pi's RPC mode\n  \
        tau --mode json              like -p, printing every event as a JSON line\n\n\
        A model needs a key: set a provider's variable (ANTHROPIC_API_KEY, OPENAI_API_KEY, \
        GEMINI_API_KEY, ...), or store one with /login in the session, or add models.json to the \
        agent directory. To try tau without a key, run tau-mock-llm (see the README).\n\n\
        Commands:\n  tau install <source> [-l]    install a pi package (npm:, git:, a path) and \
        add it to settings\n  tau remove <source> [-l]     remove one (also `uninstall`)\n  \
        tau update [source|--extensions]  update installed packages (tau does not update \
        itself)\n  tau list                     list the packages of the settings\n  \
        tau --export <session.jsonl> [out.html]  write a session file as HTML\n\n\
        Environment:\n  TAU_AGENT_DIR  agent directory (settings.json, models.json, auth.json, \
        sessions/); else PI_CODING_AGENT_DIR; else ~/.tau/agent if it exists, \
        else an existing ~/.pi/agent, else ~/.tau/agent\n  TAU_LOG        log level on stderr \
        (error, warn, info, debug, trace); default warn",
    disable_help_subcommand = true
)]
pub struct Cli {
    /// Output mode: `rpc` (the protocol on stdin/stdout), `acp` (the Agent Client Protocol,
    /// for editors), `text` (as `-p`) or `json`.
    #[arg(long, value_enum, value_name = "MODE")]
    pub mode: Option<Mode>,
    /// Run the messages, print the final answer and exit.
    #[arg(long, short = 'p')]
    pub print: bool,
    /// Shape of `message_update` records: `full` (pi 0.79, default) or `lean` (pi 1.x).
    #[arg(long, value_enum, value_name = "SHAPE", default_value_t = MessageUpdates::Full)]
    pub message_updates: MessageUpdates,

    /// Provider used to resolve --model (anthropic, openai, google, …).
    #[arg(long, value_name = "NAME")]
    pub provider: Option<String>,
    /// Model id or pattern; `provider/id` and a `:<thinking>` suffix are accepted.
    #[arg(long, value_name = "PATTERN")]
    pub model: Option<String>,
    /// Initial thinking level: off, minimal, low, medium, high, xhigh.
    #[arg(long, value_name = "LEVEL")]
    pub thinking: Option<String>,
    /// Models `cycle_model` cycles through (comma-separated patterns).
    #[arg(long, value_name = "PATTERNS", value_delimiter = ',')]
    pub models: Vec<String>,
    /// API key for the selected model's provider.
    #[arg(long, value_name = "KEY")]
    pub api_key: Option<String>,

    /// Display name of the session.
    #[arg(long, short = 'n', value_name = "NAME")]
    pub name: Option<String>,
    /// Keep the session in memory only.
    #[arg(long)]
    pub no_session: bool,
    /// Open a session file, or a session by id prefix.
    #[arg(long, value_name = "PATH|ID")]
    pub session: Option<String>,
    /// Open or create the session with exactly this id.
    #[arg(long, value_name = "ID")]
    pub session_id: Option<String>,
    /// Copy a session into a new one in this directory.
    #[arg(long, value_name = "PATH|ID")]
    pub fork: Option<String>,
    /// Continue the most recent session of this directory.
    #[arg(long, short = 'c')]
    pub r#continue: bool,
    /// Pick a session interactively (not available in RPC mode).
    #[arg(long, short = 'r')]
    pub resume: bool,
    /// Directory for session files.
    #[arg(long, value_name = "DIR")]
    pub session_dir: Option<PathBuf>,

    /// Only these tools (comma-separated): read, bash, edit, write, grep, find, ls.
    #[arg(long, short = 't', value_name = "NAMES", value_delimiter = ',')]
    pub tools: Option<Vec<String>>,
    /// Tools to leave out (comma-separated); also `-xt`.
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    pub exclude_tools: Vec<String>,
    /// No tools at all; also `-nt`.
    #[arg(long)]
    pub no_tools: bool,
    /// No built-in tools; also `-nbt`.
    #[arg(long)]
    pub no_builtin_tools: bool,

    /// Replace the system prompt (text, or the path of a file holding it).
    #[arg(long, value_name = "TEXT|FILE")]
    pub system_prompt: Option<String>,
    /// Append to the system prompt (text or file; repeatable).
    #[arg(long, value_name = "TEXT|FILE", action = ArgAction::Append)]
    pub append_system_prompt: Vec<String>,

    /// MCP servers from a file of `{"mcpServers": {...}}` (repeatable; later files win).
    #[arg(long, value_name = "FILE", action = ArgAction::Append)]
    pub mcp_config: Vec<PathBuf>,
    /// Load an extension (repeatable).
    #[arg(long, short = 'e', value_name = "PATH", action = ArgAction::Append)]
    pub extension: Vec<String>,
    /// Do not discover extensions; also `-ne`.
    #[arg(long)]
    pub no_extensions: bool,
    /// Load a skill (repeatable).
    #[arg(long, value_name = "PATH", action = ArgAction::Append)]
    pub skill: Vec<String>,
    /// Do not discover skills; also `-ns`.
    #[arg(long)]
    pub no_skills: bool,
    /// Load a prompt template (repeatable).
    #[arg(long, value_name = "PATH", action = ArgAction::Append)]
    pub prompt_template: Vec<String>,
    /// Do not discover prompt templates; also `-np`.
    #[arg(long)]
    pub no_prompt_templates: bool,
    /// A theme file or folder for pi's terminal UI: accepted for pi's command lines, with a
    /// warning (tau's terminal has its own colours for light and dark backgrounds).
    #[arg(long, value_name = "PATH", action = ArgAction::Append)]
    pub theme: Vec<String>,
    /// Do not load themes (no effect: tau reads no theme files).
    #[arg(long)]
    pub no_themes: bool,
    /// Do not load AGENTS.md / CLAUDE.md; also `-nc`.
    #[arg(long)]
    pub no_context_files: bool,
    /// Trust project-local resources for this run.
    #[arg(long, short = 'a')]
    pub approve: bool,
    /// Ignore project-local resources for this run; also `-na`.
    #[arg(long)]
    pub no_approve: bool,
    /// What tools may do without asking: ask, acceptEdits, plan or allowAll (the default in
    /// RPC and one-shot modes; ACP asks by default).
    #[arg(long, value_name = "MODE", value_parser = parse_permission_mode)]
    pub permission_mode: Option<tau_protocol::PermissionMode>,
    /// Whether MCP servers may have the model answer them (`sampling/createMessage`):
    /// `off`, `ask` (a permission request each time) or `allow`. Default: `ask` in the
    /// terminal and ACP, `off` in RPC and the one-shot modes (setting `mcp.sampling`).
    #[arg(long, value_name = "POLICY", value_parser = ["off", "ask", "allow"])]
    pub mcp_sampling: Option<String>,
    /// Make no network calls at startup (tau never does: it installs no packages and checks
    /// for no updates).
    #[arg(long)]
    pub offline: bool,
    /// More diagnostics on stderr.
    #[arg(long)]
    pub verbose: bool,
    /// List the models that have credentials (those matching SEARCH, fuzzily) and exit.
    #[arg(long, value_name = "SEARCH", num_args = 0..=1, default_missing_value = "")]
    pub list_models: Option<String>,

    /// Messages to send, in order (`@path` attaches a file); one-shot modes only.
    #[arg(value_name = "MESSAGE")]
    pub messages: Vec<String>,
}

/// What the command line asks for.
#[derive(Debug)]
pub enum Invocation {
    /// Print this text on stdout and exit 0 (`--help`, `--version`).
    Print(String),
    /// Run the agent in one of its modes.
    Run(Box<RunOptions>),
}

/// How the agent is driven (pi's app modes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunMode {
    /// The terminal UI: stdin and stdout are a terminal and no mode was named.
    Interactive,
    /// JSON commands on stdin, responses and events on stdout.
    Rpc,
    /// The Agent Client Protocol on stdin and stdout.
    Acp,
    /// The messages run in order; the last answer's text is printed (`-p`).
    Text,
    /// The messages run in order; every event is printed as a JSON line.
    Json,
}

/// Whether stdin and stdout are terminals, which decides the mode when none is named.
#[derive(Debug, Clone, Copy, Default)]
pub struct Terminal {
    pub stdin: bool,
    pub stdout: bool,
}

impl Terminal {
    pub fn detect() -> Self {
        use std::io::IsTerminal;
        Self {
            stdin: std::io::stdin().is_terminal(),
            stdout: std::io::stdout().is_terminal(),
        }
    }
}

/// Checked options.
#[derive(Debug)]
pub struct RunOptions {
    pub mode: RunMode,
    pub cli: Cli,
    /// `--thinking` (a `:level` suffix of `--model` is applied when the model resolves).
    pub thinking: Option<ThinkingLevel>,
    /// `--name`, trimmed.
    pub name: Option<String>,
    /// pi's non-fatal diagnostics (an unknown `--thinking` level), for stderr.
    pub warnings: Vec<String>,
    /// `--<name>[=value]` options tau does not know: flags for extensions to claim once
    /// they are loaded (ext §7.1). A value is `=value` or the next word not starting with
    /// `-` or `@`, which pi takes even for a boolean flag.
    pub extension_flags: Vec<(String, Option<String>)>,
}

/// Takes the `--long` options clap does not know out of `args` (with their values, as pi
/// reads them), leaving the rest for clap.
fn split_extension_flags(args: Vec<OsString>) -> (Vec<OsString>, Vec<(String, Option<String>)>) {
    use clap::CommandFactory;
    let command = Cli::command();
    let mut known: std::collections::HashMap<String, bool> = std::collections::HashMap::new();
    for arg in command.get_arguments() {
        let takes_value = arg.get_action().takes_values();
        for long in arg
            .get_long()
            .into_iter()
            .chain(arg.get_all_aliases().unwrap_or_default())
        {
            known.insert(long.to_string(), takes_value);
        }
    }
    for builtin in ["help", "version"] {
        known.insert(builtin.to_string(), false);
    }
    let mut kept = Vec::new();
    let mut flags = Vec::new();
    let mut args = args.into_iter().peekable();
    while let Some(arg) = args.next() {
        let Some(text) = arg.to_str().and_then(|a| a.strip_prefix("--")) else {
            kept.push(arg);
            continue;
        };
        if text.is_empty() {
            // `--`: everything after it is for clap as it is.
            kept.push(arg);
            kept.extend(args.by_ref());
            break;
        }
        let (name, inline) = match text.split_once('=') {
            Some((name, value)) => (name.to_string(), Some(value.to_string())),
            None => (text.to_string(), None),
        };
        match known.get(&name) {
            Some(&takes_value) => {
                kept.push(arg);
                if takes_value
                    && inline.is_none()
                    && let Some(value) = args.next()
                {
                    kept.push(value);
                }
            }
            None => {
                let value = inline.or_else(|| {
                    let next = args.peek()?.to_str()?;
                    (!next.starts_with('-') && !next.starts_with('@')).then(|| next.to_string())
                });
                if value.is_some() && !text.contains('=') {
                    args.next();
                }
                flags.push((name, value));
            }
        }
    }
    (kept, flags)
}

fn parse_permission_mode(text: &str) -> Result<tau_protocol::PermissionMode, String> {
    tau_protocol::PermissionMode::parse(text).ok_or_else(|| {
        let names: Vec<&str> = tau_protocol::PermissionMode::ALL
            .iter()
            .map(|m| m.as_str())
            .collect();
        format!("expected one of {}", names.join(", "))
    })
}

/// pi's multi-letter single-dash flags, which clap cannot express as short options.
const DASH_ALIASES: [(&str, &str); 8] = [
    ("-xt", "--exclude-tools"),
    ("-nt", "--no-tools"),
    ("-nbt", "--no-builtin-tools"),
    ("-ne", "--no-extensions"),
    ("-ns", "--no-skills"),
    ("-np", "--no-prompt-templates"),
    ("-nc", "--no-context-files"),
    ("-na", "--no-approve"),
];

/// Parses and checks the arguments (without the program name). The error is the text
/// after `Error: `.
pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Invocation, String> {
    parse_in(args, Terminal::detect())
}

/// [`parse`] with the terminal state given.
pub fn parse_in(
    args: impl IntoIterator<Item = OsString>,
    terminal: Terminal,
) -> Result<Invocation, String> {
    let args: Vec<OsString> = args.into_iter().collect();
    // `tau schema` alone: the protocol's JSON Schema. (Any other bare word is a message, as in
    // pi, and messages need a one-shot mode.)
    if args.len() == 1 && args[0] == "schema" {
        return Ok(Invocation::Print(
            tau_protocol::schema::protocol_schema_text(),
        ));
    }
    let args: Vec<OsString> = args
        .into_iter()
        .map(|arg| {
            DASH_ALIASES
                .iter()
                .find(|(short, _)| arg == *short)
                .map_or(arg, |(_, long)| OsString::from(*long))
        })
        .collect();
    // The usual command line has no extension flags: clap alone decides. Only an unknown
    // `--option` makes it worth describing every known option to set the unknown ones aside
    // (that description costs as much as the parse itself, on every start).
    let with_name = |args: Vec<OsString>| std::iter::once(OsString::from("tau")).chain(args);
    let (cli, extension_flags) = match Cli::try_parse_from(with_name(args.clone())) {
        Ok(cli) => (cli, Vec::new()),
        Err(err) if err.kind() == ErrorKind::UnknownArgument => {
            let (args, extension_flags) = split_extension_flags(args);
            match Cli::try_parse_from(with_name(args)) {
                Ok(cli) => (cli, extension_flags),
                Err(err) => return clap_error(err),
            }
        }
        Err(err) => return clap_error(err),
    };
    // pi's choice: a named mode, else `-p` or anything not a terminal means print mode, and a
    // terminal the interactive session.
    let mode = match (cli.mode, cli.print) {
        (Some(Mode::Rpc), _) => RunMode::Rpc,
        (Some(Mode::Acp), _) => RunMode::Acp,
        (Some(Mode::Json), _) => RunMode::Json,
        (Some(Mode::Text), _) | (None, true) => RunMode::Text,
        (None, false) if !terminal.stdin || !terminal.stdout || cli.list_models.is_some() => {
            RunMode::Text
        }
        (None, false) => RunMode::Interactive,
    };
    if mode == RunMode::Rpc && cli.messages.iter().any(|m| m.starts_with('@')) {
        return Err("@file arguments are not supported in RPC mode".to_string());
    }
    if mode == RunMode::Acp && !cli.messages.is_empty() {
        return Err("messages are not taken on the command line in ACP mode".to_string());
    }
    // The client opens sessions in ACP mode (decision T104).
    if mode == RunMode::Acp
        && (cli.session.is_some()
            || cli.session_id.is_some()
            || cli.fork.is_some()
            || cli.r#continue)
    {
        return Err(
            "--session, --session-id, --fork and --continue are not taken in ACP mode: the \
             editor opens sessions (session/new, or session/load with an id from session/list)"
                .to_string(),
        );
    }
    if cli.resume && mode != RunMode::Interactive {
        return Err(
            "--resume needs the interactive session (a terminal, no --mode or -p)".to_string(),
        );
    }
    let name = match cli.name.as_deref().map(str::trim) {
        Some("") => return Err("--name requires a non-empty value".to_string()),
        other => other.map(str::to_string),
    };
    let mut warnings = Vec::new();
    if !cli.theme.is_empty() || cli.no_themes {
        warnings.push(
            "--theme and --no-themes have no effect: tau reads no theme files (its terminal \
             picks its colours for the background; extensions' ctx.ui.theme follows the \
             \"theme\" setting)"
                .to_string(),
        );
    }
    // pi warns about a level it does not know and goes on with the default.
    let thinking = match cli.thinking.as_deref() {
        Some(raw) => match raw.parse::<ThinkingLevel>() {
            Ok(level) => Some(level),
            Err(_) => {
                warnings.push(format!(
                    "Invalid thinking level \"{raw}\". Valid values: off, minimal, low, medium, high, xhigh"
                ));
                None
            }
        },
        None => None,
    };
    let session_choices = [
        cli.session.is_some(),
        cli.r#continue,
        cli.no_session,
        cli.session_id.is_some(),
        cli.fork.is_some(),
    ];
    if session_choices.iter().filter(|&&set| set).count() > 1 {
        return Err(
            "--session, --session-id, --fork, --continue and --no-session cannot be combined"
                .to_string(),
        );
    }
    if let Some(id) = &cli.session_id
        && !valid_session_id(id)
    {
        return Err(format!(
            "Invalid --session-id '{id}': use letters, digits, '.', '_' and '-', starting and ending with a letter or digit"
        ));
    }
    Ok(Invocation::Run(Box::new(RunOptions {
        mode,
        cli,
        thinking,
        name,
        warnings,
        extension_flags,
    })))
}

/// pi's rule: `^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$`; the id becomes part of a file
/// name.
fn valid_session_id(id: &str) -> bool {
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    edge(id.chars().next())
        && edge(id.chars().last())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

fn clap_error(err: clap::Error) -> Result<Invocation, String> {
    match err.kind() {
        // The bare version, as pi prints it: hosts parse it (one showed `pi vtau 0.1.0`).
        ErrorKind::DisplayVersion => Ok(Invocation::Print(format!(
            "{}\n",
            env!("CARGO_PKG_VERSION")
        ))),
        ErrorKind::DisplayHelp => Ok(Invocation::Print(err.to_string())),
        ErrorKind::UnknownArgument => {
            let arg = match err.get(ContextKind::InvalidArg) {
                Some(ContextValue::String(arg)) => arg.clone(),
                _ => "?".to_string(),
            };
            Err(format!("Unknown option: {arg}"))
        }
        _ => {
            let text = err.to_string();
            let first = text.lines().next().unwrap_or_default();
            Err(first.trim_start_matches("error: ").to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Result<Invocation, String> {
        parse(args.iter().map(OsString::from))
    }

    fn rpc(args: &[&str]) -> RunOptions {
        match run(args) {
            Ok(Invocation::Run(opts)) => *opts,
            other => panic!("{args:?}: {other:?}"),
        }
    }

    #[test]
    fn explicit_thinking_is_parsed() {
        let o = rpc(&[
            "--mode",
            "rpc",
            "--model",
            "sonnet:high",
            "--thinking",
            "low",
        ]);
        assert_eq!(o.thinking, Some(ThinkingLevel::Low));
        assert_eq!(o.cli.model.as_deref(), Some("sonnet:high"));
    }

    #[test]
    fn unknown_long_options_are_kept_for_extensions_as_pi_reads_them() {
        let o = rpc(&[
            "--plan",
            "--mode",
            "rpc",
            "--preset=fast",
            "--verbose",
            "--tag",
            "word",
            "--model",
            "m",
            "--bare",
            "-e",
            "x.ts",
            "--last",
        ]);
        assert_eq!(
            o.extension_flags,
            vec![
                ("plan".to_string(), None),
                ("preset".to_string(), Some("fast".to_string())),
                ("tag".to_string(), Some("word".to_string())),
                ("bare".to_string(), None),
                ("last".to_string(), None),
            ]
        );
        assert!(o.cli.verbose);
        assert_eq!(o.cli.model.as_deref(), Some("m"));
        assert_eq!(o.cli.extension, ["x.ts"]);
    }

    #[test]
    fn pi_style_errors() {
        assert_eq!(
            run(&["--mode", "rpc", "@notes.md"]).unwrap_err(),
            "@file arguments are not supported in RPC mode"
        );
        assert_eq!(
            run(&["--mode", "rpc", "-n", "   "]).unwrap_err(),
            "--name requires a non-empty value"
        );
        let o = rpc(&["--mode", "rpc", "--thinking", "max"]);
        assert_eq!(o.thinking, None);
        assert!(o.warnings[0].contains("Invalid thinking level"));
        assert!(run(&["--mode", "rpc", "--no-session", "-c"]).is_err());
    }

    #[test]
    fn multi_letter_short_flags() {
        let o = rpc(&["--mode", "rpc", "-nt", "-xt", "bash,edit", "-nc"]);
        assert!(o.cli.no_tools && o.cli.no_context_files);
        assert_eq!(o.cli.exclude_tools, vec!["bash", "edit"]);
    }

    #[test]
    fn the_mode_follows_pi() {
        let mode = |args: &[&str], stdin: bool, stdout: bool| match parse_in(
            args.iter().map(OsString::from),
            Terminal { stdin, stdout },
        ) {
            Ok(Invocation::Run(o)) => Ok(o.mode),
            Ok(Invocation::Print(_)) => Err("printed".to_string()),
            Err(e) => Err(e),
        };
        assert_eq!(mode(&["--mode", "rpc"], true, true), Ok(RunMode::Rpc));
        assert_eq!(
            mode(&["--mode", "json", "hi"], true, true),
            Ok(RunMode::Json)
        );
        assert_eq!(mode(&["-p", "hi"], true, true), Ok(RunMode::Text));
        assert_eq!(
            mode(&["--mode", "text", "hi"], true, true),
            Ok(RunMode::Text)
        );
        // Piped in or out: print mode, as pi decides.
        assert_eq!(mode(&["hi"], false, true), Ok(RunMode::Text));
        assert_eq!(mode(&["hi"], true, false), Ok(RunMode::Text));
        assert_eq!(mode(&["hi"], true, true), Ok(RunMode::Interactive));
        assert_eq!(mode(&[], true, true), Ok(RunMode::Interactive));
        assert!(mode(&["--resume", "-p", "hi"], true, true).is_err_and(|e| e.contains("--resume")));
        assert_eq!(mode(&["-p", "@notes.md"], true, true), Ok(RunMode::Text));
    }

    #[test]
    fn help_and_version_print() {
        assert!(matches!(run(&["--help"]), Ok(Invocation::Print(t)) if t.contains("--mode")));
        assert!(
            matches!(run(&["--version"]), Ok(Invocation::Print(t)) if t.contains(env!("CARGO_PKG_VERSION")))
        );
    }
}
