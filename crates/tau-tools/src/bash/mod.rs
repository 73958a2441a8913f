//! The `bash` tool (tools-resources §1.2): runs a command through [`run_shell`], streams the
//! output's tail as progress, and words results, truncation notices and failures as pi does.
//! The shell runner itself ([`run_shell`]) is public for the RPC `bash` command. With a
//! [`crate::CommandRunner`] in the environment (an editor's terminal), the command runs there
//! instead ([`client`]), under the same rules and with the same result texts.

mod client;
mod output;
mod sanitize;
mod shell;

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde_json::{Map, Value, json};
use tau_agent::{AgentTool, ToolContext};
use tau_protocol::{AgentToolResult, TruncatedBy};
use tokio_util::sync::CancellationToken;

pub use output::{OutputSnapshot, remove_spill_files};
pub use shell::{
    ShellError, ShellOutcome, ShellRequest, ShellStatus, kill_running_shells, resolve_shell,
    run_shell,
};

use crate::ToolEnv;
use crate::call::{js_number, text_block};
use crate::truncate::{DEFAULT_MAX_BYTES, format_size};

/// pi's throttle for progress updates.
const UPDATE_INTERVAL: Duration = Duration::from_millis(100);

const DESCRIPTION: &str = "Run a bash command in the current working directory and return its \
stdout and stderr together, in the order they were written. Output longer than 2000 lines or \
50KB (whichever is reached first) is cut down to its last part, and the complete output is then \
written to a temporary file whose path the result gives. Pass `timeout` in seconds to stop a \
command that might run too long; there is no limit by default.";

static PARAMETERS: LazyLock<Value> = LazyLock::new(|| {
    json!({
        "type": "object",
        "required": ["command"],
        "properties": {
            "command": {"type": "string", "description": "The shell command to run"},
            "timeout": {"type": "number", "description": "Give up and kill the command after this many seconds (no limit if left out)"}
        }
    })
});

/// The `bash` tool.
#[derive(Debug, Clone)]
pub struct BashTool {
    env: Arc<ToolEnv>,
}

impl BashTool {
    pub fn new(env: Arc<ToolEnv>) -> Self {
        Self { env }
    }

    /// What [`AgentTool::execute`] does, with the cancellation token and the progress sink
    /// passed separately so the tool can be driven without an agent loop.
    ///
    /// `on_update` gets `{content:[]}` first, then the output's tail at most every 100 ms with
    /// `details` `{truncation?, fullOutputPath?}`; when a client runs the command, one update
    /// with `details` `{terminalId}` instead, as soon as it runs. The error strings are pi's: the output
    /// followed by `Command exited with code <n>`, `Command aborted` or
    /// `Command timed out after <t> seconds`.
    pub async fn execute_with(
        &self,
        arguments: Map<String, Value>,
        cancel: &CancellationToken,
        mut on_update: impl FnMut(AgentToolResult),
    ) -> Result<AgentToolResult, String> {
        let command = match arguments.get("command") {
            Some(Value::String(command)) => command.as_str(),
            _ => return Err("Invalid arguments for bash: command must be a string".into()),
        };
        let timeout = parse_timeout(arguments.get("timeout"))?;
        on_update(AgentToolResult {
            extra: Default::default(),
            content: Vec::new(),
            details: None,
            terminate: None,
        });

        let mut request = ShellRequest::new(&self.env, command);
        request.timeout = timeout
            .filter(|t| *t > 0.0)
            .and_then(|t| Duration::try_from_secs_f64(t).ok());
        request.update_interval = Some(UPDATE_INTERVAL);
        let (outcome, client_truncated) = match self.env.commands.as_deref() {
            Some(runner) => {
                let ran = client::run_in_client(runner, &request, cancel, |id| {
                    on_update(terminal_progress(id));
                })
                .await?;
                let outcome = ShellOutcome {
                    status: ran.status,
                    output: ran.output,
                };
                (outcome, ran.truncated)
            }
            None => {
                let outcome = run_shell(request, cancel, |snapshot| on_update(progress(snapshot)))
                    .await
                    .map_err(|e| e.to_string())?;
                (outcome, false)
            }
        };
        let format_output = |snapshot: &OutputSnapshot, empty: &str| {
            let (text, details) = format_output(snapshot, empty);
            if client_truncated {
                (format!("{text}\n{}", client_truncated_notice()), details)
            } else {
                (text, details)
            }
        };

        let snapshot = &outcome.output;
        let failure = match outcome.status {
            ShellStatus::Aborted => "Command aborted".to_string(),
            ShellStatus::TimedOut => format!(
                "Command timed out after {} seconds",
                js_number(timeout.unwrap_or(0.0))
            ),
            ShellStatus::Exited(code) if code != 0 => {
                let (text, _) = format_output(snapshot, "(no output)");
                return Err(append_status(
                    &text,
                    &format!("Command exited with code {code}"),
                ));
            }
            ShellStatus::Exited(_) | ShellStatus::Signaled(_) => {
                let (text, details) = format_output(snapshot, "(no output)");
                return Ok(AgentToolResult {
                    extra: Default::default(),
                    content: vec![text_block(text)],
                    details,
                    terminate: None,
                });
            }
        };
        // pi words aborts and timeouts without the "(no output)" placeholder.
        let (text, _) = format_output(snapshot, "");
        Err(append_status(&text, &failure))
    }
}

impl AgentTool for BashTool {
    fn name(&self) -> &str {
        "bash"
    }

    fn description(&self) -> &str {
        DESCRIPTION
    }

    fn parameters(&self) -> &Value {
        &PARAMETERS
    }

    fn execute<'a>(
        &'a self,
        _call_id: &'a str,
        arguments: Map<String, Value>,
        context: ToolContext,
    ) -> BoxFuture<'a, Result<AgentToolResult, String>> {
        Box::pin(async move {
            let cancel = context.cancel.clone();
            self.execute_with(arguments, &cancel, |update| context.update(update))
                .await
        })
    }
}

/// `timeout` as a number of seconds; a numeric string is accepted as pi's schema coercion
/// would turn it into a number.
fn parse_timeout(value: Option<&Value>) -> Result<Option<f64>, String> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => Ok(n.as_f64()),
        Some(Value::String(s)) => s
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|t| t.is_finite())
            .map(Some)
            .ok_or_else(|| "Invalid arguments for bash: timeout must be a number".to_string()),
        Some(_) => Err("Invalid arguments for bash: timeout must be a number".into()),
    }
}

fn append_status(text: &str, status: &str) -> String {
    if text.is_empty() {
        status.to_string()
    } else {
        format!("{text}\n\n{status}")
    }
}

fn full_output_path(snapshot: &OutputSnapshot) -> String {
    snapshot.full_output_path.as_ref().map_or_else(
        // Only when the temp file could not be created (logged by the runner).
        || "(not saved)".to_string(),
        |p| p.display().to_string(),
    )
}

/// Said after the output when the client kept only its end: the counts and the spill file
/// then start where the client's copy starts.
fn client_truncated_notice() -> String {
    format!(
        "[The editor kept only the last {} of the output; line numbers count from there]",
        format_size(usize::try_from(client::OUTPUT_BYTE_LIMIT).unwrap_or(usize::MAX))
    )
}

/// The progress update that names the client terminal the command runs in
/// (`details.terminalId`), for a front-end to show that terminal with the call.
fn terminal_progress(id: &str) -> AgentToolResult {
    AgentToolResult {
        extra: Default::default(),
        content: Vec::new(),
        details: Some(json!({ "terminalId": id })),
        terminate: None,
    }
}

/// A progress update: the tail so far, with its [`details`].
fn progress(snapshot: &OutputSnapshot) -> AgentToolResult {
    AgentToolResult {
        extra: Default::default(),
        content: vec![text_block(snapshot.truncation.content.clone())],
        details: Some(details(snapshot)),
        terminate: None,
    }
}

/// `{truncation?, fullOutputPath?}`: `truncation` only when the output is cut,
/// `fullOutputPath` once a temp file exists.
fn details(snapshot: &OutputSnapshot) -> Value {
    let mut details = Map::new();
    if snapshot.truncation.truncated {
        details.insert(
            "truncation".into(),
            serde_json::to_value(&snapshot.truncation).unwrap_or(Value::Null),
        );
    }
    if let Some(path) = &snapshot.full_output_path {
        details.insert(
            "fullOutputPath".into(),
            Value::String(path.display().to_string()),
        );
    }
    Value::Object(details)
}

/// The result text (`empty` stands in for no output) with pi's truncation notice, and the
/// `details` a truncated result carries.
fn format_output(snapshot: &OutputSnapshot, empty: &str) -> (String, Option<Value>) {
    let t = &snapshot.truncation;
    let mut text = if t.content.is_empty() {
        empty.to_string()
    } else {
        t.content.clone()
    };
    if !t.truncated {
        return (text, None);
    }
    let path = full_output_path(snapshot);
    let start = t.total_lines + 1 - t.output_lines.min(t.total_lines);
    let end = t.total_lines;
    let notice = if t.last_line_partial {
        format!(
            "[Showing last {} of line {end} (line is {}). Full output: {path}]",
            format_size(t.output_bytes),
            format_size(snapshot.last_line_bytes)
        )
    } else if t.truncated_by == Some(TruncatedBy::Lines) {
        format!(
            "[Showing lines {start}-{end} of {}. Full output: {path}]",
            t.total_lines
        )
    } else {
        format!(
            "[Showing lines {start}-{end} of {} ({} limit). Full output: {path}]",
            t.total_lines,
            format_size(DEFAULT_MAX_BYTES)
        )
    };
    text.push_str("\n\n");
    text.push_str(&notice);
    // Truncated here, so `details` always holds `truncation`.
    (text, Some(details(snapshot)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_parse_numbers_and_numeric_strings() {
        assert_eq!(parse_timeout(None), Ok(None));
        assert_eq!(parse_timeout(Some(&json!(2))), Ok(Some(2.0)));
        assert_eq!(parse_timeout(Some(&json!("2.5"))), Ok(Some(2.5)));
        assert!(parse_timeout(Some(&json!(true))).is_err());
    }

    #[test]
    fn the_schema_is_pis() {
        let tool = BashTool::new(Arc::new(ToolEnv::new("/", "/tmp")));
        assert_eq!(tool.name(), "bash");
        assert_eq!(
            serde_json::to_string(tool.parameters()).unwrap_or_default(),
            r#"{"type":"object","required":["command"],"properties":{"command":{"type":"string","description":"The shell command to run"},"timeout":{"type":"number","description":"Give up and kill the command after this many seconds (no limit if left out)"}}}"#
        );
    }
}
