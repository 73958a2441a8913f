//! The RPC `bash` commands a session has running, so that `abort_bash` reaches them and their
//! temp files go with the session. Its own module: the tool set holds it and the session's
//! `bash` command uses it, and neither should depend on the other for it.

use std::path::PathBuf;
use std::sync::Mutex;

use tau_ai::provider::CancellationToken;

/// The `bash` commands still running, newest last, and the temp files they left.
#[derive(Debug, Default)]
pub(crate) struct BashCommands {
    running: Mutex<Vec<(u64, CancellationToken)>>,
    next: std::sync::atomic::AtomicU64,
    pub(crate) temp_files: Mutex<Vec<PathBuf>>,
}

impl BashCommands {
    pub(crate) fn start(&self) -> (u64, CancellationToken) {
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let cancel = CancellationToken::new();
        lock(&self.running).push((id, cancel.clone()));
        (id, cancel)
    }

    pub(crate) fn end(&self, id: u64) {
        lock(&self.running).retain(|(i, _)| *i != id);
    }

    /// `abort_bash`: the newest command still running. pi keeps one slot (the last started);
    /// a stack makes every one of several concurrent commands reachable, newest first.
    pub fn abort_newest(&self) {
        if let Some((_, cancel)) = lock(&self.running).pop() {
            cancel.cancel();
        }
    }
}

impl Drop for BashCommands {
    /// The session's temp files go with it (pi leaves them in the temp directory forever).
    fn drop(&mut self) {
        for (_, cancel) in lock(&self.running).drain(..) {
            cancel.cancel();
        }
        for path in lock(&self.temp_files).drain(..) {
            let _ = std::fs::remove_file(path);
        }
    }
}

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
