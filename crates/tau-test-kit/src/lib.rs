//! Black-box test support for tau: spawns the real `tau` binary with a temp agent directory,
//! temp HOME and temp working directory, writes JSONL commands to its stdin, and reads its
//! stdout with a strict LF splitter (independent of tau's own framing code), so tests can await
//! a response by id or an event by type.
//!
//! Waits panic with the records seen so far and tau's stderr, which is what a failing test
//! needs to show.

pub mod png_bomb;

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;
use tempfile::TempDir;

/// How long a wait lasts by default. Generous: CI machines are shared and noisy, and a wait
/// returns as soon as its record arrives.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(15);

/// The protocol's schema, as checked in (`tau schema` prints the same text).
pub const PROTOCOL_SCHEMA: &str = include_str!("../../../docs/protocol.schema.json");

/// Checks one stdout record against `#/$defs/StdoutRecord` of the protocol's schema; the
/// error lists what does not match and where.
pub fn check_stdout_record(record: &Value) -> Result<(), String> {
    check_definition("StdoutRecord", record)
}

/// Checks a value against `#/$defs/<definition>` of the protocol's schema (the frames of the
/// extension protocol, which are not stdout records); the error lists what does not match.
pub fn check_definition(definition: &str, value: &Value) -> Result<(), String> {
    type Compiled = std::sync::Arc<Result<jsonschema::Validator, String>>;
    // Compiled once per definition and shared; validation runs outside the lock, as every
    // test thread checks every record it reads.
    static VALIDATORS: std::sync::Mutex<Option<std::collections::HashMap<String, Compiled>>> =
        std::sync::Mutex::new(None);
    let validator: Compiled = {
        let mut validators = VALIDATORS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let validators = validators.get_or_insert_with(Default::default);
        match validators.get(definition) {
            Some(compiled) => compiled.clone(),
            None => {
                let compiled = std::sync::Arc::new(compile(definition));
                validators.insert(definition.to_string(), compiled.clone());
                compiled
            }
        }
    };
    let validator = validator
        .as_ref()
        .as_ref()
        .map_err(|e| format!("the schema does not compile: {e}"))?;
    let problems: Vec<String> = validator
        .iter_errors(value)
        .map(|e| format!("  at {}: {e}", e.instance_path()))
        .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n"))
    }
}

/// The validator of `#/$defs/<definition>` of the checked-in schema.
fn compile(definition: &str) -> Result<jsonschema::Validator, String> {
    let mut schema: Value = serde_json::from_str(PROTOCOL_SCHEMA).map_err(|e| e.to_string())?;
    if schema["$defs"].get(definition).is_none() {
        return Err(format!("the schema has no definition {definition}"));
    }
    schema["$ref"] = Value::String(format!("#/$defs/{definition}"));
    if let Some(object) = schema.as_object_mut() {
        object.remove("anyOf");
    }
    jsonschema::validator_for(&schema).map_err(|e| e.to_string())
}

/// One stdout record.
#[derive(Debug, Clone)]
pub struct Record {
    /// The bytes of the line, without the LF.
    pub raw: Vec<u8>,
    /// The parsed JSON, if the line was valid JSON.
    pub json: Option<Value>,
    /// True for bytes after the last LF at end of stream (tau must never produce this).
    pub unterminated: bool,
}

impl Record {
    /// The record's `type`, if any.
    pub fn kind(&self) -> Option<&str> {
        self.json.as_ref()?.get("type")?.as_str()
    }
}

/// The temporary directories of a tau process. Cloning shares them: they are removed when the
/// last holder is dropped, so a later process can reuse the agent directory, HOME and working
/// directory of an earlier one (`--continue`, two processes on one session file).
#[derive(Clone)]
pub struct Dirs {
    pub agent_dir: Arc<TempDir>,
    pub home: Arc<TempDir>,
    pub cwd: Arc<TempDir>,
}

impl Dirs {
    /// Three fresh temporary directories.
    pub fn new() -> Self {
        Self {
            agent_dir: Arc::new(tempfile::tempdir().expect("temp agent dir")),
            home: Arc::new(tempfile::tempdir().expect("temp home")),
            cwd: Arc::new(tempfile::tempdir().expect("temp cwd")),
        }
    }

    pub fn agent_dir(&self) -> &Path {
        self.agent_dir.path()
    }

    pub fn home(&self) -> &Path {
        self.home.path()
    }

    pub fn cwd(&self) -> &Path {
        self.cwd.path()
    }
}

impl Default for Dirs {
    fn default() -> Self {
        Self::new()
    }
}

/// Prepares a tau process.
pub struct TauBuilder {
    bin: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
    agent_files: Vec<(PathBuf, Vec<u8>)>,
    cwd_files: Vec<(PathBuf, Vec<u8>)>,
    dirs: Option<Dirs>,
    /// A folder below the working directory to start in instead.
    subfolder: Option<PathBuf>,
}

impl TauBuilder {
    /// `bin` is the path of the tau binary (`env!("CARGO_BIN_EXE_tau")` in tests).
    pub fn new(bin: impl Into<PathBuf>) -> Self {
        Self {
            bin: bin.into(),
            args: vec!["--mode".into(), "rpc".into()],
            env: Vec::new(),
            agent_files: Vec::new(),
            cwd_files: Vec::new(),
            dirs: None,
            subfolder: None,
        }
    }

    /// Starts in `relative`, a folder below the working directory (created if missing),
    /// instead of the working directory itself.
    pub fn in_subfolder(mut self, relative: impl Into<PathBuf>) -> Self {
        self.subfolder = Some(relative.into());
        self
    }

    /// Runs in these directories (e.g. `earlier.dirs()`) instead of fresh temporary ones.
    /// Files added with `agent_file`/`cwd_file` are still written (over existing ones).
    pub fn dirs(mut self, dirs: Dirs) -> Self {
        self.dirs = Some(dirs);
        self
    }

    /// Replaces the default arguments (`--mode rpc`).
    pub fn raw_args<I: IntoIterator<Item = S>, S: Into<String>>(mut self, args: I) -> Self {
        self.args = args.into_iter().map(Into::into).collect();
        self
    }

    /// Adds an argument after the existing ones.
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }

    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Writes a file into the agent directory before start (e.g. `settings.json`).
    pub fn agent_file(
        mut self,
        relative: impl Into<PathBuf>,
        contents: impl Into<Vec<u8>>,
    ) -> Self {
        self.agent_files.push((relative.into(), contents.into()));
        self
    }

    /// Writes a file into the working directory before start (e.g. `.pi/settings.json`).
    pub fn cwd_file(mut self, relative: impl Into<PathBuf>, contents: impl Into<Vec<u8>>) -> Self {
        self.cwd_files.push((relative.into(), contents.into()));
        self
    }

    /// Starts tau. Panics if the directories or the process cannot be created.
    /// Writes the fixture files and builds the command, with a clean environment: provider
    /// keys or settings of the machine running the tests must not change what tau does.
    fn prepare(&self) -> (Command, Dirs) {
        let dirs = self.dirs.clone().unwrap_or_default();
        for (root, files) in [
            (dirs.agent_dir(), &self.agent_files),
            (dirs.cwd(), &self.cwd_files),
        ] {
            for (relative, contents) in files {
                let path = root.join(relative);
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent).expect("create parent dir");
                }
                std::fs::write(&path, contents).expect("write fixture file");
            }
        }
        let start_in = match &self.subfolder {
            Some(relative) => {
                let folder = dirs.cwd().join(relative);
                std::fs::create_dir_all(&folder).expect("create the subfolder");
                folder
            }
            None => dirs.cwd().to_path_buf(),
        };
        let mut command = Command::new(&self.bin);
        command
            .args(&self.args)
            .current_dir(start_in)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", dirs.home())
            .env("TAU_AGENT_DIR", dirs.agent_dir())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (key, value) in &self.env {
            command.env(key, value);
        }
        (command, dirs)
    }

    /// Starts tau without reading its stdout as protocol records (the one-shot modes):
    /// the caller owns the child and its pipes.
    pub fn spawn_raw(self) -> (std::process::Child, Dirs) {
        let (mut command, dirs) = self.prepare();
        let child = command
            .spawn()
            .unwrap_or_else(|e| panic!("cannot spawn {}: {e}", self.bin.display()));
        (child, dirs)
    }

    /// Runs tau to the end with `stdin` as its input (closed after it), and returns its exit
    /// status, stdout and stderr, and its directories.
    pub fn run(self, stdin: &[u8]) -> (ExitStatus, Vec<u8>, String, Dirs) {
        let (mut child, dirs) = self.spawn_raw();
        if let Some(mut input) = child.stdin.take() {
            let _ = input.write_all(stdin);
        }
        let output = child.wait_with_output().expect("wait for tau");
        (
            output.status,
            output.stdout,
            String::from_utf8_lossy(&output.stderr).into_owned(),
            dirs,
        )
    }

    pub fn spawn(self) -> Tau {
        let (mut command, dirs) = self.prepare();
        let Dirs {
            agent_dir,
            home,
            cwd,
        } = dirs;
        let mut child = command
            .spawn()
            .unwrap_or_else(|e| panic!("cannot spawn {}: {e}", self.bin.display()));
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr = child.stderr.take().expect("piped stderr");

        let (tx, records) = channel();
        thread::spawn(move || read_records(stdout, tx));
        let stderr_buf = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&stderr_buf);
        let stderr_done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let done = Arc::clone(&stderr_done);
        thread::spawn(move || {
            let mut stderr = stderr;
            let mut chunk = [0u8; 8192];
            while let Ok(n) = stderr.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .expect("stderr lock")
                    .extend_from_slice(&chunk[..n]);
            }
            done.store(true, std::sync::atomic::Ordering::Release);
        });
        Tau {
            child,
            stdin,
            records,
            pending: VecDeque::new(),
            history: Vec::new(),
            stdout_closed: false,
            stderr: stderr_buf,
            stderr_done,
            next_id: 0,
            agent_dir,
            home,
            cwd,
        }
    }
}

/// Splits stdout on LF only, keeping every byte of each record.
fn read_records(mut stdout: impl Read, tx: std::sync::mpsc::Sender<Record>) {
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = match stdout.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        let mut start = 0;
        while let Some(pos) = buf[start..].iter().position(|&b| b == b'\n') {
            let raw = buf[start..start + pos].to_vec();
            start += pos + 1;
            let json = serde_json::from_slice(&raw).ok();
            if tx
                .send(Record {
                    raw,
                    json,
                    unterminated: false,
                })
                .is_err()
            {
                return;
            }
        }
        buf.drain(..start);
    }
    if !buf.is_empty() {
        let json = serde_json::from_slice(&buf).ok();
        let _ = tx.send(Record {
            raw: buf,
            json,
            unterminated: true,
        });
    }
}

/// A running tau process.
pub struct Tau {
    child: Child,
    stdin: Option<ChildStdin>,
    records: Receiver<Record>,
    /// Received but not yet returned by a wait.
    pending: VecDeque<Record>,
    /// Every record received, in order.
    history: Vec<Record>,
    stdout_closed: bool,
    stderr: Arc<Mutex<Vec<u8>>>,
    /// The stderr reader saw the end of the stream.
    stderr_done: Arc<std::sync::atomic::AtomicBool>,
    next_id: u64,
    pub agent_dir: Arc<TempDir>,
    pub home: Arc<TempDir>,
    pub cwd: Arc<TempDir>,
}

impl Tau {
    pub fn agent_dir(&self) -> &Path {
        self.agent_dir.path()
    }

    pub fn cwd(&self) -> &Path {
        self.cwd.path()
    }

    /// The directories of this process, to start another one in them.
    pub fn dirs(&self) -> Dirs {
        Dirs {
            agent_dir: Arc::clone(&self.agent_dir),
            home: Arc::clone(&self.home),
            cwd: Arc::clone(&self.cwd),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Writes raw bytes to stdin (no newline added).
    pub fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin already closed");
        stdin.write_all(bytes).expect("write to tau's stdin");
        stdin.flush().expect("flush tau's stdin");
    }

    /// Writes one JSON value as a line.
    pub fn send(&mut self, value: &Value) {
        let mut line = serde_json::to_vec(value).expect("serialise command");
        line.push(b'\n');
        self.send_raw(&line);
    }

    /// Sends a command (adding a fresh `id` if it has none) and returns its response.
    pub fn request(&mut self, mut command: Value) -> Value {
        let id = match command.get("id") {
            Some(Value::String(id)) => id.clone(),
            _ => {
                self.next_id += 1;
                let id = format!("kit-{}", self.next_id);
                command["id"] = Value::String(id.clone());
                id
            }
        };
        self.send(&command);
        self.response(&id)
    }

    /// Closes stdin (EOF for tau).
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Sends a signal to the process.
    pub fn signal(&self, signal: rustix::process::Signal) {
        let pid = rustix::process::Pid::from_raw(i32::try_from(self.child.id()).expect("pid"))
            .expect("non-zero pid");
        rustix::process::kill_process(pid, signal).expect("send signal");
    }

    /// The next record, or `None` on timeout or end of stream.
    pub fn next_record(&mut self, timeout: Duration) -> Option<Record> {
        if let Some(record) = self.pending.pop_front() {
            return Some(record);
        }
        self.receive(timeout)
    }

    fn receive(&mut self, timeout: Duration) -> Option<Record> {
        if self.stdout_closed {
            return None;
        }
        match self.records.recv_timeout(timeout) {
            Ok(record) => {
                if let Some(json) = &record.json
                    && let Err(problems) = check_stdout_record(json)
                {
                    panic!(
                        "tau wrote a record that docs/protocol.schema.json does not allow:\n{}\n{problems}",
                        String::from_utf8_lossy(&record.raw)
                    );
                }
                self.history.push(record.clone());
                Some(record)
            }
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => {
                self.stdout_closed = true;
                None
            }
        }
    }

    /// Waits for the first record matching `pred`; records passed over stay available to
    /// later waits. Panics on timeout or end of stream.
    pub fn wait_for(
        &mut self,
        what: &str,
        timeout: Duration,
        pred: impl Fn(&Record) -> bool,
    ) -> Record {
        if let Some(pos) = self.pending.iter().position(&pred) {
            return self.pending.remove(pos).expect("position is valid");
        }
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.receive(left) {
                Some(record) if pred(&record) => return record,
                Some(record) => self.pending.push_back(record),
                None => panic!(
                    "no {what} within {timeout:?} (stdout {}).\nrecords:\n{}\nstderr:\n{}",
                    if self.stdout_closed { "closed" } else { "open" },
                    self.history_text(),
                    self.stderr()
                ),
            }
        }
    }

    /// The JSON records from now up to and including the first of type `kind` (a run's
    /// `agent_settled`, say). Panics if none comes within `timeout` of the previous one.
    pub fn records_until(&mut self, kind: &str, timeout: Duration) -> Vec<Value> {
        let mut records = Vec::new();
        loop {
            let Some(record) = self.next_record(timeout) else {
                panic!(
                    "no {kind} within {timeout:?}.\nrecords:\n{}\nstderr:\n{}",
                    self.history_text(),
                    self.stderr()
                );
            };
            let json = record.json.expect("JSON records");
            let done = json["type"] == kind;
            records.push(json);
            if done {
                return records;
            }
        }
    }

    /// Waits for the response with this `id`.
    pub fn response(&mut self, id: &str) -> Value {
        self.response_within(id, DEFAULT_TIMEOUT)
    }

    pub fn response_within(&mut self, id: &str, timeout: Duration) -> Value {
        let record = self.wait_for(&format!("response {id:?}"), timeout, |r| {
            r.kind() == Some("response")
                && r.json
                    .as_ref()
                    .and_then(|j| j.get("id"))
                    .and_then(Value::as_str)
                    == Some(id)
        });
        record.json.expect("matched records are JSON")
    }

    /// Waits for the next record of this `type`.
    pub fn event(&mut self, kind: &str) -> Value {
        let record = self.wait_for(&format!("record of type {kind:?}"), DEFAULT_TIMEOUT, |r| {
            r.kind() == Some(kind)
        });
        record.json.expect("matched records are JSON")
    }

    /// Reads until stdout closes, returning the records not yet returned by a wait.
    pub fn drain(&mut self, timeout: Duration) -> Vec<Record> {
        let deadline = Instant::now() + timeout;
        while !self.stdout_closed {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                panic!(
                    "stdout did not close within {timeout:?}\nstderr:\n{}",
                    self.stderr()
                );
            }
            if let Some(record) = self.receive(left) {
                self.pending.push_back(record);
            }
        }
        self.pending.drain(..).collect()
    }

    /// Every record received so far, in order.
    pub fn history(&self) -> &[Record] {
        &self.history
    }

    fn history_text(&self) -> String {
        self.history
            .iter()
            .map(|r| String::from_utf8_lossy(&r.raw).into_owned())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// What tau wrote to stderr so far.
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().expect("stderr lock")).into_owned()
    }

    /// Waits for the process to exit. Panics on timeout.
    pub fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                // What tau wrote last may still be in the pipe: let the reader reach the end
                // (children that inherited stderr may hold it open, so not for ever).
                let drained = Instant::now() + Duration::from_secs(3);
                while !self.stderr_done.load(std::sync::atomic::Ordering::Acquire)
                    && Instant::now() < drained
                {
                    thread::sleep(Duration::from_millis(5));
                }
                return status;
            }
            if Instant::now() >= deadline {
                panic!(
                    "tau did not exit within {timeout:?}\nstderr:\n{}",
                    self.stderr()
                );
            }
            thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Tau {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Runs tau to completion with `args`, feeding it `stdin`, and returns (status, stdout, stderr).
/// For command-line tests that never reach the protocol.
pub fn run_once(bin: &Path, args: &[&str], stdin: &[u8]) -> (ExitStatus, Vec<u8>, String) {
    let agent_dir = tempfile::tempdir().expect("temp agent dir");
    let home = tempfile::tempdir().expect("temp home");
    let mut child = Command::new(bin)
        .args(args)
        .current_dir(home.path())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("TAU_AGENT_DIR", agent_dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn tau");
    if let Some(mut input) = child.stdin.take() {
        let _ = input.write_all(stdin);
    }
    let output = child.wait_with_output().expect("wait for tau");
    (
        output.status,
        output.stdout,
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::check_stdout_record;
    use serde_json::json;

    #[test]
    fn the_schema_check_rejects_what_tau_must_not_write() {
        for good in [
            json!({"type": "ready", "version": "0.1.0"}),
            json!({"type": "agent_start"}),
            json!({"type": "agent_end", "messages": [], "willRetry": false}),
            json!({"id": "a", "type": "response", "command": "get_state", "success": false, "error": "x"}),
            json!({"type": "response", "command": "abort", "success": true}),
            json!({"type": "response", "command": "cycle_model", "success": true, "data": null}),
            json!({"type": "queue_update", "steering": [], "followUp": ["a"]}),
        ] {
            assert_eq!(check_stdout_record(&good), Ok(()), "{good}");
        }
        for bad in [
            json!({"type": "bogus"}),
            json!({"type": "agent_end"}),
            json!({"type": "response", "command": "get_state", "success": true}),
            json!({"type": "response", "command": "abort", "success": true, "data": {}}),
            json!({"type": "response", "command": "abort", "success": false}),
            json!({"type": "response", "command": "x", "success": true, "extra": 1}),
            json!({"type": "message_end", "message": {"role": "assistant", "content": []}}),
            json!({"type": "message_start", "message": {"role": "user", "content": [{"type": "txt", "text": "a"}], "timestamp": 1}}),
        ] {
            assert!(check_stdout_record(&bad).is_err(), "accepted {bad}");
        }
    }
}
