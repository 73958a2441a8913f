//! The `bash` tool's command run through a [`CommandRunner`] (an editor's terminal in ACP
//! mode) instead of a child of tau's: the same shell, script, working directory and variables,
//! and the same rules around it (abort and timeout kill the command, the output is collected
//! into the same snapshot and spill file), so the model reads what tau's own run would give.
//! The client shows the command live; its output is read once, when the command has ended.

use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;

use super::output::{OutputAccumulator, OutputSnapshot};
use super::shell::{ShellError, ShellRequest, ShellStatus, child_path, resolve_shell};
use crate::runner::{ClientCommand, CommandExit, CommandRunner};

/// How much output the client is asked to keep: twenty times what the result shows (50 KB),
/// so the counts and the spill file are exact for all but very long outputs.
pub(crate) const OUTPUT_BYTE_LIMIT: u64 = 1 << 20;

/// A command the client ran to its end (or was made to end).
pub(crate) struct ClientOutcome {
    pub status: ShellStatus,
    pub output: OutputSnapshot,
    /// The client dropped the output's beginning to stay within [`OUTPUT_BYTE_LIMIT`].
    pub truncated: bool,
}

/// The program, arguments and variables tau's own run would use, for the client.
pub(crate) fn client_command(request: &ShellRequest) -> Result<ClientCommand, ShellError> {
    let shell = resolve_shell(request.shell_path.as_deref())?;
    if !request.cwd.exists() {
        return Err(ShellError::MissingCwd(request.cwd.clone()));
    }
    let (path_key, path_value) = child_path(&request.agent_dir);
    Ok(ClientCommand {
        program: shell.display().to_string(),
        args: vec!["-c".to_string(), request.command.clone()],
        cwd: request.cwd.clone(),
        env: vec![
            (
                path_key.to_string_lossy().into_owned(),
                path_value.to_string_lossy().into_owned(),
            ),
            ("PI_CODING_AGENT".to_string(), "true".to_string()),
            ("TAU_CODING_AGENT".to_string(), "true".to_string()),
        ],
        output_byte_limit: OUTPUT_BYTE_LIMIT,
    })
}

/// Runs `request` through `runner`: `started` gets the client's id for it as soon as it runs;
/// `cancel` and `request.timeout` kill it; it is always released. A token cancelled before
/// the start starts nothing.
pub(crate) async fn run_in_client(
    runner: &dyn CommandRunner,
    request: &ShellRequest,
    cancel: &CancellationToken,
    mut started: impl FnMut(&str),
) -> Result<ClientOutcome, String> {
    let command = client_command(request).map_err(|e| e.to_string())?;
    if cancel.is_cancelled() {
        return Ok(ClientOutcome {
            status: ShellStatus::Aborted,
            output: snapshot(""),
            truncated: false,
        });
    }
    let running = runner
        .create(&command)
        .await
        .map_err(|e| format!("The editor did not run the command: {e}"))?;
    started(running.id());
    let timeout_at = request.timeout.and_then(|t| Instant::now().checked_add(t));
    let ended = tokio::select! {
        biased;
        () = cancel.cancelled() => Ended::Aborted,
        () = sleep_until(timeout_at.unwrap_or_else(Instant::now)), if timeout_at.is_some() => {
            Ended::TimedOut
        }
        exit = running.wait_for_exit() => Ended::Exited(exit),
    };
    if matches!(ended, Ended::Aborted | Ended::TimedOut)
        && let Err(error) = running.kill().await
    {
        tracing::debug!("terminal/kill failed: {error}");
    }
    let output = running.output().await;
    if let Err(error) = running.release().await {
        tracing::debug!("terminal/release failed: {error}");
    }
    let status = match ended {
        // Checked last, as the local run does: an abort wins over an exit meanwhile.
        _ if cancel.is_cancelled() => ShellStatus::Aborted,
        Ended::Aborted => ShellStatus::Aborted,
        Ended::TimedOut => ShellStatus::TimedOut,
        Ended::Exited(Err(error)) => {
            return Err(format!("The editor's terminal failed: {error}"));
        }
        Ended::Exited(Ok(exit)) => exit_status(&exit),
    };
    let output = match output {
        Ok(output) => output,
        Err(error) => {
            tracing::warn!("terminal/output failed: {error}");
            Default::default()
        }
    };
    Ok(ClientOutcome {
        status,
        output: snapshot(&output.text),
        truncated: output.truncated,
    })
}

enum Ended {
    Aborted,
    TimedOut,
    Exited(Result<CommandExit, String>),
}

/// pi's reading of an exit: a code is the code; a signal that was not ours is no failure.
fn exit_status(exit: &CommandExit) -> ShellStatus {
    match (exit.code, &exit.signal) {
        (Some(code), _) => ShellStatus::Exited(i32::try_from(code).unwrap_or(i32::MAX)),
        (None, Some(signal)) => ShellStatus::Signaled(signal_number(signal)),
        (None, None) => ShellStatus::Exited(0),
    }
}

/// The usual number of a signal's name (`SIGTERM`, `TERM`), 0 for one not known here; only
/// kept for the record, since no result text names it.
fn signal_number(name: &str) -> i32 {
    match name.trim_start_matches("SIG") {
        "HUP" => 1,
        "INT" => 2,
        "QUIT" => 3,
        "ABRT" => 6,
        "KILL" => 9,
        "SEGV" => 11,
        "PIPE" => 13,
        "ALRM" => 14,
        "TERM" => 15,
        _ => 0,
    }
}

/// The client's output as the local run would have collected it. A terminal writes what a
/// screen shows (CR LF line ends, colours, cursor moves), so it is cleaned as the RPC `bash`
/// command cleans a pipe's output; the spill file then holds the cleaned text.
fn snapshot(text: &str) -> OutputSnapshot {
    let mut output = OutputAccumulator::new(true);
    output.append(text.as_bytes());
    output.finish();
    let snapshot = output.snapshot();
    output.close_file();
    snapshot
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exits_read_as_the_local_run_reads_them() {
        let exit = |code: Option<u32>, signal: Option<&str>| CommandExit {
            code,
            signal: signal.map(str::to_string),
        };
        assert_eq!(exit_status(&exit(Some(0), None)), ShellStatus::Exited(0));
        assert_eq!(exit_status(&exit(Some(2), None)), ShellStatus::Exited(2));
        assert_eq!(
            exit_status(&exit(None, Some("SIGTERM"))),
            ShellStatus::Signaled(15)
        );
        assert_eq!(exit_status(&exit(None, None)), ShellStatus::Exited(0));
    }

    #[test]
    fn terminal_output_is_cleaned_of_screen_codes() {
        let s = snapshot("\u{1b}[32mok\u{1b}[0m\r\nnext\r\n");
        assert_eq!(s.truncation.content, "ok\nnext\n");
        assert_eq!(s.truncation.total_lines, 2);
    }
}
