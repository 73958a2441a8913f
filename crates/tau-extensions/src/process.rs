//! One extension process: starting it, writing frames to its stdin, reading frames from its
//! stdout, matching replies to the calls that wait for them, and noticing when it dies.
//! Frames the process starts itself (dialogs, actions, registrations, errors) go to the
//! runner through a channel, in the order the process wrote them.

use std::collections::HashMap;
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tau_protocol::extension::{FromExtension, Reply, ToExtension};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// Why a call to an extension produced no result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// The extension answered with an error (its handler threw).
    #[error("{0}")]
    Failed(String),
    /// The deadline passed; the process was told to cancel.
    #[error("Timed out after {0} ms")]
    TimedOut(u64),
    /// The caller gave up (abort); the process was told to cancel.
    #[error("Operation aborted")]
    Cancelled,
    /// The process is gone.
    #[error("{0}")]
    Exited(String),
}

/// Handles what a process sends that no call was waiting for. Called on the process's reader
/// task and awaited there, so everything a process writes takes effect in the order written:
/// a dialog it opened is on stdout before the reply that follows it releases its caller.
pub trait FrameHandler: Send + Sync + 'static {
    fn frame<'a>(
        &'a self,
        index: usize,
        process: &'a Arc<Process>,
        frame: FromExtension,
    ) -> futures_util::future::BoxFuture<'a, ()>;
    /// stdout closed ([`Process::exit_text`] says how the process ended).
    fn exited<'a>(
        &'a self,
        index: usize,
        process: &'a Arc<Process>,
    ) -> futures_util::future::BoxFuture<'a, ()>;
}

/// A frame on its way to the process: typed, or already serialised (without its newline).
#[derive(Debug)]
enum Outgoing {
    Frame(Box<ToExtension>),
    Raw(Vec<u8>),
}

struct Pending {
    reply: oneshot::Sender<Result<Value, CallError>>,
    updates: Option<mpsc::UnboundedSender<Value>>,
}

/// Where the reply to a sent request arrives.
pub(crate) type Answer = oneshot::Receiver<Result<Value, CallError>>;

/// A running extension process.
pub struct Process {
    /// The file name the process was started for, for logs and stderr prefixes.
    pub label: String,
    writer: mpsc::UnboundedSender<Outgoing>,
    pending: Arc<Mutex<HashMap<String, Pending>>>,
    next_id: AtomicU64,
    exited: Arc<Mutex<Option<String>>>,
    /// Dialogs the process has open: a deadline does not run while the user is answering.
    open_dialogs: AtomicUsize,
    shut_down: AtomicBool,
    child: Mutex<Option<Child>>,
}

impl std::fmt::Debug for Process {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Process")
            .field("label", &self.label)
            .finish_non_exhaustive()
    }
}

impl Process {
    /// Starts `program args…` in `cwd` with the protocol's environment. Frames no call waits
    /// for go to `handler` with `index`.
    pub fn spawn(
        label: String,
        program: &Path,
        args: &[String],
        cwd: &Path,
        env: &[(String, String)],
        index: usize,
        handler: Arc<dyn FrameHandler>,
    ) -> std::io::Result<Arc<Self>> {
        let mut command = Command::new(program);
        command
            .args(args)
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .env("TAU_EXTENSION_PROTOCOL", "1");
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command.spawn()?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(std::io::Error::other("the process has no pipes"));
        };
        let (writer, mut frames) = mpsc::unbounded_channel::<Outgoing>();
        let process = Arc::new(Self {
            label: label.clone(),
            writer,
            pending: Arc::default(),
            next_id: AtomicU64::new(1),
            exited: Arc::default(),
            open_dialogs: AtomicUsize::new(0),
            shut_down: AtomicBool::new(false),
            child: Mutex::new(Some(child)),
        });

        tokio::spawn(async move {
            let mut stdin = stdin;
            let mut buffer = Vec::new();
            while let Some(frame) = frames.recv().await {
                // Frames that queued up meanwhile (a token's `message_update` each) go out in
                // one write: one system call for many frames.
                let mut next = Some(frame);
                while let Some(frame) = next {
                    match frame {
                        Outgoing::Frame(frame) => {
                            match serde_json::to_writer(&mut buffer, &frame) {
                                Ok(()) => buffer.push(b'\n'),
                                Err(err) => {
                                    tracing::warn!("extension frame not serialisable: {err}")
                                }
                            }
                        }
                        Outgoing::Raw(line) => {
                            buffer.extend_from_slice(&line);
                            buffer.push(b'\n');
                        }
                    }
                    next = if buffer.len() < 1 << 16 {
                        frames.try_recv().ok()
                    } else {
                        None
                    };
                }
                if stdin.write_all(&buffer).await.is_err() || stdin.flush().await.is_err() {
                    break;
                }
                buffer.clear();
            }
        });

        let prefix = format!("[{label}] ");
        tokio::spawn(async move {
            // Extension diagnostics are the user's to see, as pi shows them: copied to
            // tau's stderr as they come, each line naming its extension. Not held back until
            // a newline: a terminal escape written without one (a desktop notification, a
            // title) must reach the terminal when written, as it does in pi.
            use std::io::Write;
            let mut stderr = stderr;
            let mut chunk = vec![0u8; 8192];
            let mut at_line_start = true;
            loop {
                let read = match stderr.read(&mut chunk).await {
                    Ok(0) | Err(_) => break,
                    Ok(read) => read,
                };
                let mut out = Vec::with_capacity(read + prefix.len());
                for piece in chunk[..read].split_inclusive(|&b| b == b'\n') {
                    if at_line_start {
                        out.extend_from_slice(prefix.as_bytes());
                    }
                    out.extend_from_slice(piece);
                    at_line_start = piece.ends_with(b"\n");
                }
                let mut err = std::io::stderr().lock();
                let _ = err.write_all(&out);
                let _ = err.flush();
            }
            if !at_line_start {
                let _ = std::io::stderr().lock().write_all(b"\n");
            }
        });

        let reader = Arc::clone(&process);
        tokio::spawn(async move {
            let mut stdout = BufReader::new(stdout);
            let mut line = Vec::new();
            loop {
                line.clear();
                match stdout.read_until(b'\n', &mut line).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                let text = line.strip_suffix(b"\n").unwrap_or(&line);
                if text.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                match serde_json::from_slice::<FromExtension>(text) {
                    Ok(frame) => reader.receive(frame, index, &handler).await,
                    Err(err) => tracing::warn!(
                        "{}: unreadable frame ({err}): {}",
                        reader.label,
                        String::from_utf8_lossy(text)
                    ),
                }
            }
            let status = reader.wait_status().await;
            reader.end(&status);
            handler.exited(index, &reader).await;
        });
        Ok(process)
    }

    async fn receive(
        self: &Arc<Self>,
        frame: FromExtension,
        index: usize,
        handler: &Arc<dyn FrameHandler>,
    ) {
        match frame {
            FromExtension::Response(Reply { id, result, error }) => {
                let pending = self.lock_pending().remove(&id);
                if let Some(pending) = pending {
                    let outcome = match error {
                        Some(error) => Err(CallError::Failed(error)),
                        None => Ok(result.unwrap_or(Value::Null)),
                    };
                    let _ = pending.reply.send(outcome);
                }
            }
            FromExtension::ToolUpdate { id, partial_result } => {
                if let Some(updates) = self.lock_pending().get(&id).and_then(|p| p.updates.clone())
                {
                    let _ = updates.send(partial_result);
                }
            }
            other => handler.frame(index, self, other).await,
        }
    }

    async fn wait_status(&self) -> String {
        let child = self.child.lock().ok().and_then(|mut c| c.take());
        let Some(mut child) = child else {
            return "shut down".into();
        };
        let waited = tokio::time::timeout(Duration::from_secs(2), child.wait()).await;
        match waited {
            Ok(Ok(status)) => match status.code() {
                Some(code) => format!("exit code {code}"),
                None => "killed by a signal".into(),
            },
            Ok(Err(err)) => err.to_string(),
            Err(_) => {
                let _ = child.start_kill();
                "stdout closed".into()
            }
        }
    }

    fn end(&self, status: &str) {
        if let Ok(mut exited) = self.exited.lock() {
            *exited = Some(status.to_string());
        }
        let calls: Vec<Pending> = self.lock_pending().drain().map(|(_, p)| p).collect();
        let text = self.exit_text();
        for pending in calls {
            let _ = pending.reply.send(Err(CallError::Exited(text.clone())));
        }
    }

    fn lock_pending(&self) -> std::sync::MutexGuard<'_, HashMap<String, Pending>> {
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether the process has ended.
    pub fn has_exited(&self) -> bool {
        self.exited.lock().map(|e| e.is_some()).unwrap_or(true)
    }

    /// `Extension process exited (<status>)`.
    pub fn exit_text(&self) -> String {
        let status = self
            .exited
            .lock()
            .ok()
            .and_then(|e| e.clone())
            .unwrap_or_else(|| "running".into());
        format!("Extension process exited ({status})")
    }

    /// Sends a frame that is not answered.
    pub fn notify(&self, frame: ToExtension) {
        let _ = self.writer.send(Outgoing::Frame(Box::new(frame)));
    }

    /// Sends a frame serialised by the caller (one JSON object, no newline).
    pub fn notify_raw(&self, line: Vec<u8>) {
        let _ = self.writer.send(Outgoing::Raw(line));
    }

    /// A fresh request id.
    pub fn next_id(&self) -> String {
        format!("t{}", self.next_id.fetch_add(1, Ordering::Relaxed))
    }

    /// Sends a request built around `id` and waits for its reply: until `deadline` (not
    /// counting time a dialog of this process is open), or until `cancel` fires. Either way
    /// out, the process is told to `cancel` the request. Progress frames go to `updates`.
    pub async fn call(
        &self,
        request: impl FnOnce(String) -> ToExtension,
        deadline: Option<Duration>,
        cancel: Option<&CancellationToken>,
        updates: Option<mpsc::UnboundedSender<Value>>,
    ) -> Result<Value, CallError> {
        let (id, answer) = self.begin(request, updates)?;
        self.wait(id, answer, deadline, cancel).await
    }

    /// Sends a request built around a fresh id without waiting: the frame is in the writer's
    /// queue when this returns, so a caller holding a lock across it orders its frames.
    pub(crate) fn begin(
        &self,
        request: impl FnOnce(String) -> ToExtension,
        updates: Option<mpsc::UnboundedSender<Value>>,
    ) -> Result<(String, Answer), CallError> {
        if self.has_exited() {
            return Err(CallError::Exited(self.exit_text()));
        }
        let id = self.next_id();
        let (reply, answer) = oneshot::channel();
        self.lock_pending()
            .insert(id.clone(), Pending { reply, updates });
        if self
            .writer
            .send(Outgoing::Frame(Box::new(request(id.clone()))))
            .is_err()
        {
            self.lock_pending().remove(&id);
            return Err(CallError::Exited(self.exit_text()));
        }
        Ok((id, answer))
    }

    /// Waits for the reply to a request [`Process::begin`] sent.
    pub(crate) async fn wait(
        &self,
        id: String,
        mut answer: Answer,
        deadline: Option<Duration>,
        cancel: Option<&CancellationToken>,
    ) -> Result<Value, CallError> {
        let never = CancellationToken::new();
        let cancel = cancel.unwrap_or(&never);
        loop {
            let timer = async {
                match deadline {
                    Some(limit) => tokio::time::sleep(limit).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                outcome = &mut answer => {
                    return outcome.unwrap_or_else(|_| Err(CallError::Exited(self.exit_text())));
                }
                () = cancel.cancelled() => {
                    self.abandon(&id);
                    return Err(CallError::Cancelled);
                }
                () = timer => {
                    if self.open_dialogs.load(Ordering::Acquire) > 0 {
                        continue;
                    }
                    self.abandon(&id);
                    let ms = deadline.map_or(0, |d| d.as_millis() as u64);
                    return Err(CallError::TimedOut(ms));
                }
            }
        }
    }

    fn abandon(&self, id: &str) {
        self.lock_pending().remove(id);
        self.notify(ToExtension::Cancel { id: id.to_string() });
    }

    /// Counts a dialog opened (`true`) or closed (`false`).
    pub fn dialog(&self, open: bool) {
        if open {
            self.open_dialogs.fetch_add(1, Ordering::AcqRel);
        } else {
            let _ = self
                .open_dialogs
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
        }
    }

    /// Asks the process to finish; it is killed if it has not after a grace period.
    pub fn shutdown(self: &Arc<Self>) {
        if self.shut_down.swap(true, Ordering::AcqRel) {
            return;
        }
        self.notify(ToExtension::Shutdown);
        let process = Arc::clone(self);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(2)).await;
            if let Ok(mut child) = process.child.lock()
                && let Some(child) = child.as_mut()
            {
                let _ = child.start_kill();
            }
        });
    }
}
