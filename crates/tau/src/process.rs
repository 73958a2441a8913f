//! What tau does to its own process: stdout kept for the protocol alone, stderr sent to a log
//! while the terminal UI draws, and the termination signals caught for a clean exit.

use std::fs::File;
use std::io;

/// Gives the protocol writer a private handle on stdout and points file descriptor 1 at
/// stderr, so that nothing else in the process (a library, a child that inherits the
/// descriptor) can write into the protocol stream.
pub(crate) fn take_over_stdout() -> anyhow::Result<File> {
    let stdout = io::stdout();
    let private = rustix::io::fcntl_dupfd_cloexec(&stdout, 3)
        .map_err(|e| anyhow::anyhow!("cannot duplicate stdout: {e}"))?;
    rustix::stdio::dup2_stdout(io::stderr())
        .map_err(|e| anyhow::anyhow!("cannot redirect stdout: {e}"))?;
    // A pipe holds 64 KiB by default: a multi-megabyte record (`get_messages` of a long
    // session, a full-shape `message_update` late in a long reply) then crosses it in a
    // hundred writer/reader hand-offs. 1 MiB (Linux's default maximum) needs a sixteenth of
    // them. Not a pipe, or not allowed: nothing changes.
    let _ = rustix::pipe::fcntl_setpipe_size(&private, 1 << 20);
    Ok(File::from(private))
}

/// Points stderr (and the stdout the protocol no longer uses) at `<agent dir>/tui.log` while
/// the terminal UI runs; returns the terminal's stderr to restore.
pub(crate) fn redirect_stderr(agent_dir: &std::path::Path) -> Option<rustix::fd::OwnedFd> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(agent_dir.join("tui.log"))
        .ok()?;
    let saved = rustix::io::fcntl_dupfd_cloexec(io::stderr(), 3).ok()?;
    rustix::stdio::dup2_stderr(&log).ok()?;
    let _ = rustix::stdio::dup2_stdout(&log);
    Some(saved)
}

pub(crate) fn restore_stderr(saved: Option<rustix::fd::OwnedFd>) {
    if let Some(saved) = saved {
        let _ = rustix::stdio::dup2_stderr(&saved);
        let _ = rustix::stdio::dup2_stdout(&saved);
    }
}

/// SIGINT, SIGTERM and SIGHUP, caught instead of killing the process.
pub(crate) struct TerminationSignals {
    handlers: Option<[(tokio::signal::unix::Signal, i32); 3]>,
}

impl TerminationSignals {
    /// Must run inside the runtime's context.
    pub(crate) fn install() -> Self {
        use tokio::signal::unix::{SignalKind, signal};
        let handlers = match (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
            signal(SignalKind::hangup()),
        ) {
            (Ok(int), Ok(term), Ok(hup)) => Some([(int, 130), (term, 143), (hup, 129)]),
            _ => {
                tracing::warn!("cannot install signal handlers; signals keep their default action");
                None
            }
        };
        Self { handlers }
    }

    /// Resolves with the exit code for the first signal: SIGINT 130, SIGTERM 143, SIGHUP 129.
    pub(crate) async fn first(self) -> i32 {
        let Some([(mut int, a), (mut term, b), (mut hup, c)]) = self.handlers else {
            return std::future::pending().await;
        };
        tokio::select! {
            _ = int.recv() => a,
            _ = term.recv() => b,
            _ = hup.recv() => c,
        }
    }
}
