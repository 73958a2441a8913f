//! Running one shell command the way pi does (tools-resources §1.2, rpc §10.1, decision 18),
//! shared by the `bash` tool and the RPC `bash` command: shell selection, the child's
//! environment, its own process group, merged output, timeout and abort, and not hanging on
//! background jobs that keep the output pipe open.

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use rustix::process::{Pid, Signal, kill_process, kill_process_group};
use tokio::io::AsyncReadExt;
use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;

use super::output::{OutputAccumulator, OutputSnapshot};
use crate::ToolEnv;

/// After the shell exits, how long the pipe may stay open before we stop reading. A background
/// job that inherited it would otherwise keep the call waiting for as long as it runs.
const EXIT_GRACE: Duration = Duration::from_millis(100);

/// Bytes read from the pipe at a time (a Linux pipe holds 64 KiB).
const READ_CHUNK: usize = 64 * 1024;

/// What to run and how.
#[derive(Debug, Clone, PartialEq)]
pub struct ShellRequest {
    /// The script passed to `<shell> -c`, with any command prefix already applied.
    pub command: String,
    /// Working directory; it must exist.
    pub cwd: PathBuf,
    /// Settings `shellPath`; when set it must exist.
    pub shell_path: Option<String>,
    /// `<agent_dir>/bin` goes in front of the child's `PATH`.
    pub agent_dir: PathBuf,
    /// Kill the process group after this long. `None`: no limit.
    pub timeout: Option<Duration>,
    /// Strip ANSI escapes and control characters and delete CRs (the RPC command does, the
    /// tool does not). Totals, snapshots and the temp file then describe the cleaned text.
    pub sanitize: bool,
    /// How often `on_update` may be called while output arrives (the first batch of output is
    /// reported at once, later ones at most once per interval, and anything unreported just
    /// before returning). `None`: never.
    pub update_interval: Option<Duration>,
}

impl ShellRequest {
    /// A request for `command` in the session described by `env`: its working directory,
    /// shell, command prefix (`<prefix>\n<command>`) and agent directory; no timeout, no
    /// sanitising, no progress updates.
    pub fn new(env: &ToolEnv, command: &str) -> Self {
        let command = match env.shell_command_prefix.as_deref() {
            Some(prefix) if !prefix.is_empty() => format!("{prefix}\n{command}"),
            _ => command.to_string(),
        };
        Self {
            command,
            cwd: env.cwd.clone(),
            shell_path: env.shell_path.clone(),
            agent_dir: env.agent_dir.clone(),
            timeout: None,
            sanitize: false,
            update_interval: None,
        }
    }
}

/// How the command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShellStatus {
    /// The shell exited with this code.
    Exited(i32),
    /// The shell was killed by a signal that was not ours (pi counts this as success).
    Signaled(i32),
    /// The cancellation token fired (checked last, so it wins over an exit in the meantime).
    Aborted,
    /// The timeout fired and the process group was killed.
    TimedOut,
}

/// A finished command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellOutcome {
    pub status: ShellStatus,
    /// The final state of the output (the temp file is complete and closed).
    pub output: OutputSnapshot,
}

/// Why a command could not be run. The messages are pi's.
#[derive(Debug, thiserror::Error)]
pub enum ShellError {
    #[error("Custom shell path not found: {0}")]
    ShellNotFound(String),
    #[error("Working directory does not exist: {}\nCannot execute bash commands.", .0.display())]
    MissingCwd(PathBuf),
    /// Creating the pipe, spawning or waiting failed; the OS message is passed on as is.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// The shell for `-c`: settings `shellPath` (must exist), else `$SHELL` when it is bash or zsh,
/// else `/bin/bash`, else `bash` on `PATH`, else `sh` (decision 18).
pub fn resolve_shell(shell_path: Option<&str>) -> Result<PathBuf, ShellError> {
    if let Some(custom) = shell_path.filter(|p| !p.is_empty()) {
        return if Path::new(custom).exists() {
            Ok(PathBuf::from(custom))
        } else {
            Err(ShellError::ShellNotFound(custom.to_string()))
        };
    }
    if let Some(shell) = std::env::var_os("SHELL").map(PathBuf::from) {
        let known = shell
            .file_name()
            .is_some_and(|name| name == "bash" || name == "zsh");
        if known && shell.is_absolute() && is_executable(&shell) {
            return Ok(shell);
        }
    }
    let bin_bash = Path::new("/bin/bash");
    if bin_bash.exists() {
        return Ok(bin_bash.to_path_buf());
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let candidate = dir.join("bash");
            if dir.is_absolute() && is_executable(&candidate) {
                return Ok(candidate);
            }
        }
    }
    Ok(PathBuf::from("sh"))
}

fn is_executable(path: &Path) -> bool {
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The child's `PATH`: `<agent_dir>/bin` in front unless already listed. The variable's name is
/// matched case-insensitively, as pi does.
pub(crate) fn child_path(agent_dir: &Path) -> (OsString, OsString) {
    let bin = agent_dir.join("bin");
    let (key, current) = std::env::vars_os()
        .find(|(k, _)| k.to_str().is_some_and(|k| k.eq_ignore_ascii_case("path")))
        .unwrap_or_else(|| (OsString::from("PATH"), OsString::new()));
    if std::env::split_paths(&current).any(|entry| entry == bin) {
        return (key, current);
    }
    let mut value = bin.into_os_string();
    if !current.is_empty() {
        value.push(":");
        value.push(&current);
    }
    (key, value)
}

/// SIGKILLs the child's process group; the plain pid is the fallback (pi's order) but only
/// while the child is unreaped, since afterwards the pid may belong to someone else.
fn kill_group(pid: Option<Pid>, child_alive: bool) {
    let Some(pid) = pid else { return };
    if kill_process_group(pid, Signal::KILL).is_err() && child_alive {
        let _ = kill_process(pid, Signal::KILL);
    }
}

/// Process groups of shells still running, for [`kill_running_shells`].
static RUNNING: Mutex<Vec<Pid>> = Mutex::new(Vec::new());

fn running() -> std::sync::MutexGuard<'static, Vec<Pid>> {
    // The list stays consistent even if a holder panicked: each operation is one push/retain.
    RUNNING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// SIGKILLs the process group of every shell still running. For the binary's SIGTERM/SIGHUP
/// handling: pi kills its tracked groups then, and an exiting process runs no destructors.
pub fn kill_running_shells() {
    for pid in running().drain(..) {
        kill_group(Some(pid), true);
    }
}

/// Tracks the shell's process group while the shell runs, and kills the group if `run_shell`
/// is dropped before the shell exits, so an abandoned call leaves nothing behind. Disarmed once
/// the shell has exited: what remains then is the user's background jobs.
struct GroupGuard(Option<Pid>);

impl GroupGuard {
    fn new(pid: Option<Pid>) -> Self {
        if let Some(pid) = pid {
            running().push(pid);
        }
        Self(pid)
    }

    fn disarm(&mut self) {
        if let Some(pid) = self.0.take() {
            running().retain(|p| *p != pid);
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            self.disarm();
            kill_group(Some(pid), true);
        }
    }
}

/// Runs `request.command` with `<shell> -c` and collects its output.
///
/// The child gets stdin from `/dev/null`; its stdout and stderr are one pipe, so the output is
/// in exactly the order it was written. It runs in a process group of its own, which abort
/// (`cancel`) and timeout SIGKILL as a whole. Once the shell has exited, output is read until
/// the pipe closes or for at most 100 ms more, so a background job that keeps the pipe open
/// neither hangs the call nor gets killed.
///
/// `on_update` receives throttled snapshots while output arrives (see
/// [`ShellRequest::update_interval`]). A token cancelled before the start returns
/// [`ShellStatus::Aborted`] without spawning anything.
pub async fn run_shell(
    request: ShellRequest,
    cancel: &CancellationToken,
    mut on_update: impl FnMut(&OutputSnapshot),
) -> Result<ShellOutcome, ShellError> {
    let shell = resolve_shell(request.shell_path.as_deref())?;
    if !request.cwd.exists() {
        return Err(ShellError::MissingCwd(request.cwd));
    }
    let mut output = OutputAccumulator::new(request.sanitize);
    if cancel.is_cancelled() {
        output.finish();
        return Ok(ShellOutcome {
            status: ShellStatus::Aborted,
            output: output.snapshot(),
        });
    }

    let (reader, writer) = std::io::pipe()?;
    let writer_for_stderr = writer.try_clone()?;
    let (path_key, path_value) = child_path(&request.agent_dir);
    let mut command = tokio::process::Command::new(&shell);
    command
        .arg("-c")
        .arg(&request.command)
        .current_dir(&request.cwd)
        .env(path_key, path_value)
        .env("PI_CODING_AGENT", "true")
        .env("TAU_CODING_AGENT", "true")
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(writer_for_stderr)
        .process_group(0);
    let spawned = command.spawn();
    // The command keeps our copies of the pipe's write end; they must close for EOF to come.
    drop(command);
    let mut child = spawned?;
    let pid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .and_then(Pid::from_raw);
    let mut guard = GroupGuard::new(pid);
    let mut pipe = tokio::process::ChildStdout::from_std(std::process::ChildStdout::from(
        OwnedFd::from(reader),
    ))?;

    let timeout_at = request.timeout.and_then(|t| Instant::now().checked_add(t));
    let mut buf = vec![0u8; READ_CHUNK];
    let mut eof = false;
    let mut exit: Option<ExitStatus> = None;
    let mut grace_until: Option<Instant> = None;
    let mut killed_for_abort = false;
    let mut timed_out = false;
    let mut last_update: Option<Instant> = None;
    let mut update_at: Option<Instant> = None;
    let mut dirty = false;

    let mut emit =
        |output: &mut OutputAccumulator, dirty: &mut bool, last: &mut Option<Instant>| {
            if *dirty {
                *dirty = false;
                *last = Some(Instant::now());
                on_update(&output.snapshot());
            }
        };

    while !(eof && exit.is_some()) {
        let now = Instant::now();
        // Reading comes last: a pipe that is always readable (a flood of output) must not
        // starve the exit, grace, abort and timeout branches.
        tokio::select! {
            biased;
            () = cancel.cancelled(), if !killed_for_abort => {
                killed_for_abort = true;
                kill_group(pid, exit.is_none());
            }
            () = sleep_until(timeout_at.unwrap_or(now)), if timeout_at.is_some() && !timed_out && !killed_for_abort => {
                timed_out = true;
                kill_group(pid, exit.is_none());
            }
            status = child.wait(), if exit.is_none() => {
                exit = Some(status?);
                guard.disarm();
                grace_until = Some(Instant::now() + EXIT_GRACE);
            }
            () = sleep_until(grace_until.unwrap_or(now)), if grace_until.is_some() => break,
            () = sleep_until(update_at.unwrap_or(now)), if update_at.is_some() => {
                update_at = None;
                emit(&mut output, &mut dirty, &mut last_update);
            }
            read = pipe.read(&mut buf), if !eof => match read {
                Ok(0) => eof = true,
                Ok(n) => {
                    output.append(&buf[..n]);
                    if let Some(interval) = request.update_interval {
                        dirty = true;
                        match last_update {
                            Some(last) if Instant::now() < last + interval => {
                                update_at.get_or_insert(last + interval);
                            }
                            _ => {
                                update_at = None;
                                emit(&mut output, &mut dirty, &mut last_update);
                            }
                        }
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, "reading the command's output failed");
                    eof = true;
                }
            },
        }
    }
    // Dropping the read end now: a background job still writing gets SIGPIPE, as under pi.
    drop(pipe);

    output.finish();
    emit(&mut output, &mut dirty, &mut last_update);
    let snapshot = output.snapshot();
    output.close_file();

    let status = if cancel.is_cancelled() {
        ShellStatus::Aborted
    } else if timed_out {
        ShellStatus::TimedOut
    } else {
        match exit {
            Some(status) => match (
                status.code(),
                std::os::unix::process::ExitStatusExt::signal(&status),
            ) {
                (Some(code), _) => ShellStatus::Exited(code),
                (None, Some(signal)) => ShellStatus::Signaled(signal),
                (None, None) => ShellStatus::Exited(0),
            },
            None => ShellStatus::Exited(0),
        }
    };
    Ok(ShellOutcome {
        status,
        output: snapshot,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_gets_the_bin_dir_once() {
        let (key, value) = child_path(Path::new("/agent"));
        assert!(key.eq_ignore_ascii_case("path"));
        let value = value.to_string_lossy().into_owned();
        assert!(value.starts_with("/agent/bin"), "{value}");
    }

    #[test]
    fn a_missing_custom_shell_is_an_error() {
        let err = resolve_shell(Some("/no/such/shell"))
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("Custom shell path not found: /no/such/shell")
        );
        assert!(resolve_shell(None).is_ok());
    }
}
