//! The `bash` tool through a client's terminal (a fake [`CommandRunner`]): the same command is
//! handed over, the same rules apply, and the model reads what a local run gives.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Map, Value, json};
use tau_protocol::{AgentToolResult, UserContentBlock};
use tau_tools::bash::BashTool;
use tau_tools::{
    ClientCommand, CommandExit, CommandFuture, CommandOutput, CommandRunner, RunningCommand,
    ToolEnv,
};
use tokio_util::sync::CancellationToken;

/// What the fake client does with a command, and what it saw.
#[derive(Debug, Default)]
struct Script {
    output: String,
    truncated: bool,
    /// `None`: the command never ends by itself.
    exit: Option<CommandExit>,
    refuse: Option<String>,
    created: Vec<ClientCommand>,
    calls: Vec<&'static str>,
}

#[derive(Debug, Clone, Default)]
struct FakeClient(Arc<Mutex<Script>>);

struct FakeTerminal(Arc<Mutex<Script>>);

impl FakeClient {
    fn with(script: Script) -> Self {
        Self(Arc::new(Mutex::new(script)))
    }

    fn calls(&self) -> Vec<&'static str> {
        self.0.lock().unwrap().calls.clone()
    }
}

impl CommandRunner for FakeClient {
    fn create<'a>(
        &'a self,
        command: &'a ClientCommand,
    ) -> CommandFuture<'a, Box<dyn RunningCommand>> {
        Box::pin(async move {
            let mut script = self.0.lock().unwrap();
            script.calls.push("create");
            script.created.push(command.clone());
            if let Some(refusal) = &script.refuse {
                return Err(refusal.clone());
            }
            Ok(Box::new(FakeTerminal(Arc::clone(&self.0))) as Box<dyn RunningCommand>)
        })
    }
}

impl RunningCommand for FakeTerminal {
    fn id(&self) -> &str {
        "term-1"
    }

    fn wait_for_exit(&self) -> CommandFuture<'_, CommandExit> {
        Box::pin(async move {
            let exit = {
                let mut script = self.0.lock().unwrap();
                script.calls.push("wait_for_exit");
                script.exit.clone()
            };
            match exit {
                Some(exit) => Ok(exit),
                None => std::future::pending().await,
            }
        })
    }

    fn kill(&self) -> CommandFuture<'_, ()> {
        Box::pin(async move {
            self.0.lock().unwrap().calls.push("kill");
            Ok(())
        })
    }

    fn output(&self) -> CommandFuture<'_, CommandOutput> {
        Box::pin(async move {
            let mut script = self.0.lock().unwrap();
            script.calls.push("output");
            Ok(CommandOutput {
                text: script.output.clone(),
                truncated: script.truncated,
            })
        })
    }

    fn release(&self) -> CommandFuture<'_, ()> {
        Box::pin(async move {
            self.0.lock().unwrap().calls.push("release");
            Ok(())
        })
    }
}

fn exited(code: u32) -> Option<CommandExit> {
    Some(CommandExit {
        code: Some(code),
        signal: None,
    })
}

fn args(value: Value) -> Map<String, Value> {
    value.as_object().cloned().unwrap_or_default()
}

fn text(result: &Result<AgentToolResult, String>) -> String {
    match result {
        Ok(result) => match result.content.as_slice() {
            [UserContentBlock::Text(t)] => t.text.clone(),
            other => panic!("expected one text block, got {other:?}"),
        },
        Err(error) => error.clone(),
    }
}

fn env(dir: &Path, client: Option<&FakeClient>) -> ToolEnv {
    let mut env = ToolEnv::new(dir, dir.join("agent"));
    env.commands = client.map(|c| Arc::new(c.clone()) as Arc<dyn CommandRunner>);
    env
}

async fn run_with(
    env: ToolEnv,
    arguments: Map<String, Value>,
    cancel: &CancellationToken,
) -> (Result<AgentToolResult, String>, Vec<AgentToolResult>) {
    let mut updates = Vec::new();
    let result = BashTool::new(Arc::new(env))
        .execute_with(arguments, cancel, |u| updates.push(u))
        .await;
    (result, updates)
}

#[tokio::test]
async fn the_client_runs_tau_s_shell_command_and_the_model_reads_what_a_local_run_gives() {
    let dir = tempfile::tempdir().unwrap();
    let command = "printf 'one\\ntwo\\n'; exit 3";
    let (local, _) = run_with(
        env(dir.path(), None),
        args(json!({"command": command})),
        &CancellationToken::new(),
    )
    .await;
    // A terminal writes CR LF and colours; the model still reads the local run's text.
    let client = FakeClient::with(Script {
        output: "\u{1b}[1mone\u{1b}[0m\r\ntwo\r\n".into(),
        exit: exited(3),
        ..Script::default()
    });
    let (through_client, updates) = run_with(
        env(dir.path(), Some(&client)),
        args(json!({"command": command})),
        &CancellationToken::new(),
    )
    .await;
    assert_eq!(text(&through_client), text(&local));
    assert!(through_client.is_err(), "exit 3 is the tool's error");
    assert!(text(&through_client).ends_with("Command exited with code 3"));
    assert_eq!(
        client.calls(),
        ["create", "wait_for_exit", "output", "release"]
    );
    let created = client.0.lock().unwrap().created[0].clone();
    assert_eq!(created.args, ["-c", command]);
    assert_eq!(created.cwd, dir.path());
    assert!(Path::new(&created.program).is_absolute() || created.program == "sh");
    assert!(
        created
            .env
            .iter()
            .any(|(k, v)| k.eq_ignore_ascii_case("path")
                && v.starts_with(&dir.path().join("agent/bin").display().to_string())),
        "{:?}",
        created.env
    );
    assert!(
        created
            .env
            .contains(&("TAU_CODING_AGENT".into(), "true".into()))
    );
    assert_eq!(created.output_byte_limit, 1 << 20);
    // The front-end learns which terminal shows the command.
    assert!(
        updates
            .iter()
            .any(|u| u.details == Some(json!({"terminalId": "term-1"}))),
        "{updates:?}"
    );
}

#[tokio::test]
async fn success_and_empty_output_are_worded_as_locally() {
    let dir = tempfile::tempdir().unwrap();
    let client = FakeClient::with(Script {
        output: "hello\r\n".into(),
        exit: exited(0),
        ..Script::default()
    });
    let (result, _) = run_with(
        env(dir.path(), Some(&client)),
        args(json!({"command": "echo hello"})),
        &CancellationToken::new(),
    )
    .await;
    assert_eq!(text(&result), "hello\n");
    assert!(result.is_ok());
    let quiet = FakeClient::with(Script {
        exit: exited(0),
        ..Script::default()
    });
    let (result, _) = run_with(
        env(dir.path(), Some(&quiet)),
        args(json!({"command": "true"})),
        &CancellationToken::new(),
    )
    .await;
    assert_eq!(text(&result), "(no output)");
}

#[tokio::test]
async fn an_abort_kills_and_releases_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let client = FakeClient::with(Script {
        output: "started\r\n".into(),
        exit: None,
        ..Script::default()
    });
    let cancel = CancellationToken::new();
    let later = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        later.cancel();
    });
    let (result, _) = run_with(
        env(dir.path(), Some(&client)),
        args(json!({"command": "sleep 100"})),
        &cancel,
    )
    .await;
    assert_eq!(text(&result), "started\n\n\nCommand aborted");
    assert_eq!(
        client.calls(),
        ["create", "wait_for_exit", "kill", "output", "release"]
    );
    // Cancelled before the start: nothing is created.
    let idle = FakeClient::default();
    let (result, _) = run_with(
        env(dir.path(), Some(&idle)),
        args(json!({"command": "sleep 100"})),
        &cancel,
    )
    .await;
    assert_eq!(text(&result), "Command aborted");
    assert!(idle.calls().is_empty());
}

#[tokio::test]
async fn a_timeout_kills_the_command_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let client = FakeClient::with(Script {
        exit: None,
        ..Script::default()
    });
    let (result, _) = run_with(
        env(dir.path(), Some(&client)),
        args(json!({"command": "sleep 100", "timeout": 0.05})),
        &CancellationToken::new(),
    )
    .await;
    assert_eq!(text(&result), "Command timed out after 0.05 seconds");
    assert_eq!(
        client.calls(),
        ["create", "wait_for_exit", "kill", "output", "release"]
    );
}

#[tokio::test]
async fn a_refused_terminal_is_the_tool_s_error() {
    let dir = tempfile::tempdir().unwrap();
    let client = FakeClient::with(Script {
        refuse: Some("terminals are off".into()),
        ..Script::default()
    });
    let (result, _) = run_with(
        env(dir.path(), Some(&client)),
        args(json!({"command": "ls"})),
        &CancellationToken::new(),
    )
    .await;
    assert_eq!(
        result.err().as_deref(),
        Some("The editor did not run the command: terminals are off")
    );
}

#[tokio::test]
async fn output_the_client_cut_is_truncated_as_locally_and_says_where_counting_starts() {
    let dir = tempfile::tempdir().unwrap();
    let lines: String = (1..=3000).map(|i| format!("line {i}\r\n")).collect();
    let client = FakeClient::with(Script {
        output: lines,
        truncated: true,
        exit: exited(0),
        ..Script::default()
    });
    let (result, _) = run_with(
        env(dir.path(), Some(&client)),
        args(json!({"command": "seq"})),
        &CancellationToken::new(),
    )
    .await;
    let text = text(&result);
    assert!(text.starts_with("line 1001\n"), "{}", &text[..40]);
    assert!(
        text.contains("[Showing lines 1001-3000 of 3000. Full output: "),
        "{text}"
    );
    assert!(
        text.ends_with(
            "[The editor kept only the last 1.0MB of the output; line numbers count from there]"
        ),
        "{}",
        &text[text.len() - 200..]
    );
}
