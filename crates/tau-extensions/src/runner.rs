//! The loaded extensions as one set: starting their processes, the handshake and the
//! registration rules across all of them (ext §1.6, §6.2), calling handlers in load order with
//! deadlines, and routing what processes start themselves (dialogs, actions, errors,
//! late registrations) to where it belongs.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures_util::future::{BoxFuture, join_all};
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};
use tau_protocol::SessionEvent;
use tau_protocol::extension::{
    ActionFrame, FrameState, FromExtension, Initialized, Manifest, PROTOCOL_VERSION, Reply,
    ToExtension, ToolRegistration,
};
use tau_protocol::rpc::{ExtensionUiRequest, ExtensionUiResponse, OutboundRecord, UiMethod};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::discovery::{Entry, Launch};
use crate::process::{CallError, FrameHandler, Process};

/// Where records for the RPC client go (the session's event sink). Writes are awaited in
/// order, so an `extension_error` a handler caused is on stdout before the event it was for.
pub trait Outlet: Send + Sync + 'static {
    fn write(&self, record: OutboundRecord) -> BoxFuture<'_, ()>;
}

/// What tau knows that extensions read synchronously (docs/extensions.md §5). Read whenever a
/// frame is about to carry state; only what changed since the last frame to that process is
/// sent.
pub trait StateSource: Send + Sync + 'static {
    /// The mirror's plain keys (`model`, `thinkingLevel`, `isIdle`, …) as they are now.
    fn fields(&self) -> Map<String, Value>;
    /// Keys that do not change during a run of tau: sent once per process, on its first
    /// frame that carries state, after every other key.
    fn constant_fields(&self) -> Map<String, Value> {
        Map::new()
    }
    /// The model catalog (`allModels`) as JSON text, constant like the keys above and sent
    /// with them, last of all (docs/extensions.md §5).
    fn catalog(&self) -> Option<&RawValue> {
        None
    }
    /// The session's entries from index `from` on, how many there are in all and the leaf,
    /// read together (a leaf read apart from the entries can name an entry before the last
    /// one sent); `None` when the list is no longer a continuation of what was sent (the
    /// session changed).
    fn entries_since(&self, from: usize, session_id: &str) -> Option<EntriesSince>;
}

/// The session's entries appended since a frame, as [`StateSource::entries_since`] reads them.
#[derive(Debug, Default)]
pub struct EntriesSince {
    pub appended: Vec<Value>,
    /// How many entries the session has.
    pub total: usize,
    pub leaf_id: Option<String>,
}

/// What a process was last told (its mirror, as tau believes it to be).
#[derive(Default)]
struct Sent {
    fields: Map<String, Value>,
    entries: usize,
    session_id: String,
    constants_sent: bool,
    /// Counts the states sent (docs/extensions.md §5 `version`).
    version: u64,
}

/// Deadlines (settings `extensionTimeouts`); `None` waits for ever.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    pub handler: Option<Duration>,
    pub command: Option<Duration>,
    pub tool: Option<Duration>,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            handler: Some(Duration::from_secs(30)),
            command: Some(Duration::from_secs(600)),
            tool: Some(Duration::from_secs(600)),
        }
    }
}

/// What loading needs to know.
#[derive(Debug, Clone)]
pub struct LoadConfig {
    pub cwd: PathBuf,
    pub agent_dir: PathBuf,
    pub mode: String,
    pub has_ui: bool,
    pub tau_version: String,
    /// The Node.js executable for the Node host.
    pub node: PathBuf,
    /// The Node host's entry (`host.cjs`), when one was found.
    pub node_host: Option<PathBuf>,
    pub timeouts: Timeouts,
    /// What `ctx.isProjectTrusted()` answers until the session's state says otherwise.
    pub project_trusted: bool,
    /// Whether the user trusted the project, so that extension programs (not the Node host)
    /// start in `cwd`. Before that each starts in its own folder: a `python3 -m module` or an
    /// `npx` there must not find the repository's module or `node_modules/.bin`
    /// (docs/security.md).
    pub programs_in_project: bool,
}

/// Why the extensions did not load. Fatal at startup, as in pi (ext §1.6).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct LoadError(pub String);

/// Carries out, where their frame arrives, the actions that need only the session's record
/// and output (docs/extensions.md §4): pi runs them inside the handler, so their effects
/// must come out before what the handler does next.
pub trait ActionApplier: Send + Sync + 'static {
    /// The action's outcome, or `None` when it needs the session's input loop.
    fn apply<'a>(&'a self, frame: &'a ActionFrame) -> BoxFuture<'a, Option<Result<Value, String>>>;
}

/// Counts what a process has waiting in the input loop's queue, for as long as it waits: while
/// anything does, the process's later actions and displays queue behind it, so they come out
/// in the order the extension made them.
#[derive(Debug)]
pub struct Waiting(Arc<AtomicUsize>);

impl Waiting {
    fn enter(count: &Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, AtomicOrdering::AcqRel);
        Self(Arc::clone(count))
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.fetch_sub(1, AtomicOrdering::AcqRel);
    }
}

/// An `action` frame, with the way to answer it.
#[derive(Debug)]
pub struct ActionRequest {
    /// The extension's path.
    pub extension: String,
    pub frame: ActionFrame,
    replier: Option<(Arc<Process>, String)>,
    _waiting: Option<Waiting>,
}

impl ActionRequest {
    /// Answers the action (nothing happens when the extension did not ask for an answer).
    pub fn reply(self, outcome: Result<Value, String>) {
        if let Some((process, id)) = self.replier {
            let (result, error) = match outcome {
                Ok(value) => (Some(value), None),
                Err(error) => (None, Some(error)),
            };
            process.notify(ToExtension::Response(Reply { id, result, error }));
        }
    }
}

/// What the extensions ask of the session's input loop, in the order their processes wrote it.
#[derive(Debug)]
pub enum Work {
    /// Carry out an `action` frame.
    Action(ActionRequest),
    /// Write a display request (`notify`, `setStatus`, …) that a process made after an
    /// action still in this queue.
    Record(Box<OutboundRecord>, Waiting),
    /// Signal when everything before this has been carried out.
    Barrier(tokio::sync::oneshot::Sender<()>),
}

/// One loaded extension.
#[derive(Debug, Clone)]
pub struct Extension {
    pub path: String,
    pub source: &'static str,
    pub scope: &'static str,
    /// The settings package it came from.
    pub package: Option<crate::discovery::PackageOrigin>,
    /// Shared, because the set is copied out for every dispatch (once per token for a
    /// `message_update` watcher) and manifests carry whole JSON Schemas.
    pub manifest: Arc<Manifest>,
    process: usize,
}

impl Extension {
    pub fn subscribes(&self, event: &str) -> bool {
        self.manifest.events.iter().any(|e| e == event)
    }
}

/// A command as `get_commands` lists it and `/name` invokes it.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandInfo {
    /// The invocation name (numbered when two extensions registered the same name).
    pub name: String,
    pub registered: String,
    pub description: Option<String>,
    pub extension: String,
    pub source: &'static str,
    pub scope: &'static str,
    /// The settings package of its extension.
    pub package: Option<crate::discovery::PackageOrigin>,
}

/// A key an extension bound with `registerShortcut`.
#[derive(Debug, Clone, PartialEq)]
pub struct ShortcutInfo {
    /// pi's key id as registered (`ctrl+shift+p`).
    pub key: String,
    pub extension: String,
}

/// A dialog or display request on its way to the RPC client.
struct OpenDialog {
    process: usize,
    id: String,
}

/// The loaded extensions.
pub struct Extensions {
    processes: Vec<Arc<Process>>,
    shared: Arc<Shared>,
    timeouts: Timeouts,
    state: RwLock<Option<Arc<dyn StateSource>>>,
    /// Per process, in `processes` order.
    sent: Vec<Mutex<Sent>>,
}

/// What the processes' reader tasks share with the set: the registrations (a process may add
/// to them at any time), the dialogs waiting for the client, and the ways out.
struct Shared {
    extensions: RwLock<Vec<Extension>>,
    outlet: Arc<dyn Outlet>,
    dialogs: Mutex<HashMap<String, OpenDialog>>,
    actions: mpsc::UnboundedSender<Work>,
    /// Carries out the session-only actions at once; absent, every action goes to the loop.
    applier: RwLock<Option<Arc<dyn ActionApplier>>>,
    /// Per process index: its work waiting in the loop's queue.
    waiting: Mutex<HashMap<usize, Arc<AtomicUsize>>>,
    /// Set by [`Extensions::shutdown`]: processes ending after it are not failures.
    shutting_down: std::sync::atomic::AtomicBool,
    /// Set by [`Extensions::client_gone`]: nobody can answer a dialog any more.
    client_gone: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for Extensions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Extensions")
            .field("processes", &self.processes)
            .finish_non_exhaustive()
    }
}

/// One process to start and the entries it hosts (indexes into the entry list).
struct ProcessPlan {
    label: String,
    program: PathBuf,
    args: Vec<String>,
    /// The arguments to start it with instead should it die before its first answer: the Node
    /// host without its start-up snapshot (snapshot.rs).
    fallback_args: Option<Vec<String>>,
    /// The process's working directory.
    cwd: PathBuf,
    members: Vec<usize>,
}

/// How to start the processes for `entries`: one Node host for every script, one process per
/// program.
fn plan(entries: &[Entry], config: &LoadConfig) -> Result<Vec<ProcessPlan>, LoadError> {
    let mut plans = Vec::new();
    let scripts: Vec<usize> = entries
        .iter()
        .enumerate()
        .filter(|(_, e)| e.launch == Launch::Node)
        .map(|(i, _)| i)
        .collect();
    if let Some(&first) = scripts.first() {
        let Some(host) = &config.node_host else {
            return Err(LoadError(format!(
                "Failed to load extension \"{}\": the Node extension host is not installed (set TAU_NODE_HOST, or run the README's set-up)",
                entries[first].path.display()
            )));
        };
        // Found on PATH now, skipping relative entries: the host runs in the project, where a
        // `node_modules/.bin` entry of PATH would find the repository's `node`.
        let program =
            tau_base::paths::find_program(&config.node).unwrap_or_else(|| config.node.clone());
        let plain = vec![host.display().to_string()];
        let (args, fallback_args) = match crate::snapshot::usable_blob(host, &program) {
            Some(blob) => (
                vec![
                    "--snapshot-blob".to_string(),
                    blob.display().to_string(),
                    host.display().to_string(),
                ],
                Some(plain),
            ),
            None => (plain, None),
        };
        plans.push(ProcessPlan {
            label: "node-host".to_string(),
            program,
            args,
            fallback_args,
            // pi runs extensions inside its own process, in the project; TypeScript extensions
            // read `process.cwd()` as the project. Node and jiti load the host and each
            // extension by absolute path and resolve imports from the importing file.
            cwd: config.cwd.clone(),
            members: scripts,
        });
    }
    for (i, entry) in entries.iter().enumerate() {
        if let Launch::Program { program, args } = &entry.launch {
            let label = entry
                .path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| entry.path.display().to_string());
            // A `tau-extension.json` folder, or the folder of an executable file.
            let own_folder = if entry.path.is_dir() {
                entry.path.clone()
            } else {
                entry
                    .path
                    .parent()
                    .map_or_else(|| config.agent_dir.clone(), Path::to_path_buf)
            };
            plans.push(ProcessPlan {
                label,
                program: program.clone(),
                args: args.clone(),
                fallback_args: None,
                cwd: if config.programs_in_project {
                    config.cwd.clone()
                } else {
                    own_folder
                },
                members: vec![i],
            });
        }
    }
    Ok(plans)
}

impl Extensions {
    /// Starts the processes, loads every entry and checks the registrations. Returns the set
    /// and the channel its `action` frames arrive on.
    pub async fn load(
        entries: &[Entry],
        config: &LoadConfig,
        outlet: Arc<dyn Outlet>,
    ) -> Result<(Arc<Self>, mpsc::UnboundedReceiver<Work>), LoadError> {
        let (actions_tx, actions_rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            extensions: RwLock::default(),
            outlet,
            dialogs: Mutex::default(),
            client_gone: std::sync::atomic::AtomicBool::new(false),
            actions: actions_tx,
            applier: RwLock::new(None),
            waiting: Mutex::default(),
            shutting_down: std::sync::atomic::AtomicBool::new(false),
        });
        let env = vec![(
            "PI_CODING_AGENT_DIR".to_string(),
            config.agent_dir.display().to_string(),
        )];
        let plans = plan(entries, config)?;
        let mut processes = Vec::new();
        for (index, plan) in plans.iter().enumerate() {
            processes.push(start(plan, &plan.args, index, &env, &shared, entries)?);
        }
        let hosted: Vec<&Vec<usize>> = plans.iter().map(|plan| &plan.members).collect();
        let initializing = processes
            .iter()
            .zip(&hosted)
            .map(|(process, members)| initialize(process, entries, members, config));
        let mut answers = join_all(initializing).await;
        // A Node host started from its snapshot that dies before answering met a blob its Node
        // could not use (a damaged one crashes Node): it starts again without, once.
        for (index, (plan, answer)) in plans.iter().zip(answers.iter_mut()).enumerate() {
            let Some(fallback) = &plan.fallback_args else {
                continue;
            };
            if !matches!(answer, Err(CallError::Exited(_))) {
                continue;
            }
            tracing::warn!(
                "the Node extension host failed to start from its snapshot; starting it without"
            );
            let process = start(plan, fallback, index, &env, &shared, entries)?;
            *answer = initialize(&process, entries, &plan.members, config).await;
            if let Some(slot) = processes.get_mut(index) {
                *slot = process;
            }
        }
        let mut loaded: Vec<Option<Extension>> = vec![None; entries.len()];
        for (index, (answer, &members)) in answers.into_iter().zip(&hosted).enumerate() {
            let first = entries[members[0]].path.display().to_string();
            let answer = answer
                .map_err(|err| LoadError(format!("Failed to load extension \"{first}\": {err}")))?;
            let initialized: Initialized = serde_json::from_value(answer).map_err(|err| {
                LoadError(format!(
                    "Failed to load extension \"{first}\": unreadable initialize answer: {err}"
                ))
            })?;
            for &member in members {
                let path = entries[member].path.display().to_string();
                let outcome = initialized.extensions.iter().find(|o| o.path == path);
                let manifest = match outcome {
                    Some(o) if o.error.is_some() => {
                        return Err(LoadError(format!(
                            "Failed to load extension \"{path}\": {}",
                            o.error.clone().unwrap_or_default()
                        )));
                    }
                    Some(o) => o.manifest.clone().unwrap_or_default(),
                    None => {
                        return Err(LoadError(format!(
                            "Failed to load extension \"{path}\": the extension process did not report it"
                        )));
                    }
                };
                loaded[member] = Some(Extension {
                    path,
                    source: entries[member].source,
                    scope: entries[member].scope,
                    package: entries[member].package.clone(),
                    manifest: Arc::new(manifest),
                    process: index,
                });
            }
        }
        let extensions: Vec<Extension> = loaded.into_iter().flatten().collect();
        check_conflicts(&extensions)?;
        if let Ok(mut registered) = shared.extensions.write() {
            *registered = extensions;
        }
        let sent = processes.iter().map(|_| Mutex::default()).collect();
        let set = Arc::new(Self {
            processes,
            shared,
            timeouts: config.timeouts,
            state: RwLock::new(None),
            sent,
        });
        Ok((set, actions_rx))
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Vec<Extension>> {
        self.shared.read()
    }

    /// The loaded extensions, in load order.
    pub fn list(&self) -> Vec<Extension> {
        self.read().clone()
    }

    /// Whether any extension watches `event` (nothing is built or sent otherwise).
    pub fn subscribed(&self, event: &str) -> bool {
        self.read().iter().any(|e| e.subscribes(event))
    }

    /// The extensions that watch `event`, in load order.
    pub fn subscribers(&self, event: &str) -> Vec<Extension> {
        self.read()
            .iter()
            .filter(|e| e.subscribes(event))
            .cloned()
            .collect()
    }

    fn process(&self, extension: &Extension) -> Option<&Arc<Process>> {
        self.processes.get(extension.process)
    }

    /// The live process hosting the extension at `path`, and its index.
    fn running(&self, path: &str) -> Result<(&Arc<Process>, usize), CallError> {
        let index = self
            .read()
            .iter()
            .find(|e| e.path == path)
            .map(|e| e.process);
        match index.and_then(|i| self.processes.get(i).map(|p| (p, i))) {
            Some((process, index)) if !process.has_exited() => Ok((process, index)),
            _ => Err(CallError::Exited(format!(
                "Extension \"{path}\" is not running"
            ))),
        }
    }

    /// Connects what carries out the session-only actions where they arrive.
    pub fn set_action_applier(&self, applier: Arc<dyn ActionApplier>) {
        if let Ok(mut slot) = self.shared.applier.write() {
            *slot = Some(applier);
        }
    }

    /// Connects the session whose state the processes mirror.
    pub fn set_state_source(&self, source: Arc<dyn StateSource>) {
        if let Ok(mut state) = self.state.write() {
            *state = Some(source);
        }
    }

    /// Sends process `index` the request `request` builds around an id and the `state` that
    /// changed since its last frame, then waits for the reply.
    ///
    /// The state is read and the frame queued under the process's `sent` lock: two frames
    /// built at once on two tasks (a `tool_call` event and a command) otherwise leave in the
    /// other order, and the later one, carrying the older `leafId` and entries, sends the
    /// process's mirror backwards.
    async fn call_with_state(
        &self,
        process: &Process,
        index: usize,
        request: impl FnOnce(String, Option<FrameState>) -> ToExtension,
        deadline: Option<Duration>,
        cancel: Option<&CancellationToken>,
        updates: Option<mpsc::UnboundedSender<Value>>,
    ) -> Result<Value, CallError> {
        let (id, answer) = {
            let mut sent = self
                .sent
                .get(index)
                .map(|m| m.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
            let state = sent.as_deref_mut().and_then(|sent| self.state_delta(sent));
            process.begin(|id| request(id, state), updates)?
        };
        process.wait(id, answer, deadline, cancel).await
    }

    /// The `state` a frame to process `index` carries: the keys that changed since the last
    /// one, and the entries appended since (`reset` when the session is another one).
    fn state_delta(&self, sent: &mut Sent) -> Option<FrameState> {
        let source = self.state.read().ok()?.clone()?;
        let mut fields = source.fields();
        let session_id = fields
            .get("sessionId")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let same_session = session_id == sent.session_id;
        let from = if same_session { sent.entries } else { 0 };
        let (since, reset) = match source.entries_since(from, &session_id) {
            Some(since) => (since, !same_session),
            None => (
                source.entries_since(0, &session_id).unwrap_or_default(),
                true,
            ),
        };
        fields.insert(
            "leafId".into(),
            since.leaf_id.clone().map_or(Value::Null, Value::String),
        );
        let mut delta = Map::new();
        for (key, value) in &fields {
            if sent.fields.get(key) != Some(value) {
                delta.insert(key.clone(), value.clone());
            }
        }
        let EntriesSince {
            appended, total, ..
        } = since;
        if reset || !appended.is_empty() {
            let mut entries = Map::new();
            if reset {
                entries.insert("reset".into(), Value::Bool(true));
            }
            entries.insert("append".into(), Value::Array(appended));
            delta.insert("entries".into(), Value::Object(entries));
        }
        sent.fields = fields;
        sent.entries = total;
        sent.session_id = session_id;
        let mut catalog = None;
        if !sent.constants_sent {
            sent.constants_sent = true;
            delta.extend(source.constant_fields());
            catalog = source.catalog();
        }
        if delta.is_empty() && catalog.is_none() {
            return None;
        }
        sent.version += 1;
        delta.shift_insert(0, "version".into(), sent.version.into());
        match FrameState::new(&delta, catalog) {
            Ok(state) => Some(state),
            Err(err) => {
                // Only a map of values and valid JSON text go in; kept for the record.
                tracing::error!("cannot serialise the extensions' state: {err}");
                None
            }
        }
    }

    /// Calls `extension`'s handlers for `event` (an object with `type`) and returns their
    /// result; a failure is returned, not reported.
    pub async fn call_event(
        &self,
        extension: &Extension,
        event: Value,
        cancel: Option<&CancellationToken>,
    ) -> Result<Value, CallError> {
        let Some(process) = self.process(extension) else {
            return Err(CallError::Exited("no process".into()));
        };
        let path = extension.path.clone();
        self.call_with_state(
            process,
            extension.process,
            |id, state| ToExtension::Event {
                id: Some(id),
                extension: path,
                event,
                state,
            },
            self.timeouts.handler,
            cancel,
            None,
        )
        .await
    }

    /// Calls every subscriber's handlers for `event` in load order; failures become
    /// `extension_error` records and count as "returned nothing". Each result is offered to
    /// `fold`, which may stop the chain (first-wins events) or rewrite the event the next
    /// extension sees (chained events).
    pub async fn emit(
        &self,
        mut event: Value,
        cancel: Option<&CancellationToken>,
        mut fold: impl FnMut(&mut Value, Value) -> std::ops::ControlFlow<()>,
    ) -> Value {
        let Some(kind) = event
            .get("type")
            .and_then(Value::as_str)
            .map(str::to_string)
        else {
            return event;
        };
        for extension in self.subscribers(&kind) {
            match self.call_event(&extension, event.clone(), cancel).await {
                Ok(result) => {
                    if fold(&mut event, result).is_break() {
                        break;
                    }
                }
                Err(CallError::Cancelled) => break,
                Err(err) => self.report(&extension.path, &kind, &err.to_string()).await,
            }
        }
        event
    }

    /// Sends an event of type `kind`, given as its JSON text, to every subscriber without
    /// waiting for answers: a token's `message_update` (observation only, and one per token),
    /// and a run's events after an abort, which must not hold the run's end. The frame is
    /// assembled around the text, so the event is serialised once, not once per subscriber.
    pub fn emit_detached(&self, kind: &str, event_json: &str) {
        for extension in self.read().iter().filter(|e| e.subscribes(kind)) {
            let Some(process) = self.processes.get(extension.process) else {
                continue;
            };
            // No state: these frames are many and nothing in them is read synchronously;
            // the next awaited frame brings the mirror up to date.
            let path = serde_json::to_string(&extension.path).unwrap_or_default();
            let mut line = Vec::with_capacity(event_json.len() + path.len() + 40);
            line.extend_from_slice(br#"{"type":"event","extension":"#);
            line.extend_from_slice(path.as_bytes());
            line.extend_from_slice(br#","event":"#);
            line.extend_from_slice(event_json.as_bytes());
            line.push(b'}');
            process.notify_raw(line);
        }
    }

    /// Writes an `extension_error` record.
    pub async fn report(&self, path: &str, event: &str, error: &str) {
        self.shared.report(path, event, error).await;
    }
}

impl Shared {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Vec<Extension>> {
        self.extensions
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Reports `error` once for every extension process `index` hosts.
    async fn report_all(&self, index: usize, event: &str, error: &str) {
        let paths: Vec<String> = self
            .read()
            .iter()
            .filter(|e| e.process == index)
            .map(|e| e.path.clone())
            .collect();
        for path in paths {
            self.report(&path, event, error).await;
        }
    }

    async fn report(&self, path: &str, event: &str, error: &str) {
        self.outlet
            .write(OutboundRecord::Event(Box::new(
                SessionEvent::ExtensionError {
                    extension_path: path.to_string(),
                    event: event.to_string(),
                    error: error.to_string(),
                },
            )))
            .await;
    }
}

impl Extensions {
    /// Every registered tool with the extension that owns it; the first registration of a
    /// name wins (ext §5.4).
    pub fn tools(self: &Arc<Self>) -> Vec<crate::ExtensionTool> {
        let mut seen = std::collections::HashSet::new();
        let mut tools = Vec::new();
        for extension in self.read().iter() {
            for tool in &extension.manifest.tools {
                if seen.insert(tool.name.clone()) {
                    tools.push(crate::ExtensionTool::new(
                        Arc::clone(self),
                        extension.path.clone(),
                        tool.clone(),
                    ));
                }
            }
        }
        tools
    }

    /// A tool's `prepareArguments` (`prepare_arguments`): the upgraded arguments.
    pub(crate) async fn prepare_arguments(
        &self,
        path: &str,
        tool_name: &str,
        arguments: Value,
    ) -> Result<Value, CallError> {
        let (process, _) = self.running(path)?;
        process
            .call(
                |id| ToExtension::PrepareArguments {
                    id,
                    extension: path.to_string(),
                    tool_name: tool_name.to_string(),
                    arguments,
                },
                self.timeouts.handler,
                None,
                None,
            )
            .await
    }

    /// Runs a registered tool (`execute_tool`), streaming progress to `updates`.
    pub(crate) async fn execute_tool(
        &self,
        path: &str,
        registration: &ToolRegistration,
        tool_call_id: &str,
        params: Value,
        cancel: &CancellationToken,
        updates: mpsc::UnboundedSender<Value>,
    ) -> Result<Value, CallError> {
        let (process, index) = self.running(path)?;
        self.call_with_state(
            process,
            index,
            |id, state| ToExtension::ExecuteTool {
                id,
                extension: path.to_string(),
                tool_call_id: tool_call_id.to_string(),
                tool_name: registration.name.clone(),
                params,
                state,
            },
            self.timeouts.tool,
            Some(cancel),
            Some(updates),
        )
        .await
    }

    /// The commands, numbered `name:1`, `name:2`… where two extensions share a name (ext §6.2).
    pub fn commands(&self) -> Vec<CommandInfo> {
        let extensions = self.read();
        let mut counts: HashMap<&str, usize> = HashMap::new();
        for extension in extensions.iter() {
            for command in &extension.manifest.commands {
                *counts.entry(command.name.as_str()).or_default() += 1;
            }
        }
        let mut taken: std::collections::HashSet<String> = counts
            .iter()
            .filter(|(_, n)| **n == 1)
            .map(|(name, _)| name.to_string())
            .collect();
        let mut next: HashMap<&str, usize> = HashMap::new();
        let mut list = Vec::new();
        for extension in extensions.iter() {
            for command in &extension.manifest.commands {
                let name = if counts.get(command.name.as_str()) == Some(&1) {
                    command.name.clone()
                } else {
                    let n = next.entry(command.name.as_str()).or_insert(0);
                    loop {
                        *n += 1;
                        let candidate = format!("{}:{n}", command.name);
                        if taken.insert(candidate.clone()) {
                            break candidate;
                        }
                    }
                };
                list.push(CommandInfo {
                    name,
                    registered: command.name.clone(),
                    description: command.description.clone(),
                    extension: extension.path.clone(),
                    source: extension.source,
                    scope: extension.scope,
                    package: extension.package.clone(),
                });
            }
        }
        list
    }

    /// Asks every process for new instances (`reason`: `new`, `resume`, `fork`, `reload`;
    /// docs/extensions.md §2.4) and takes their manifests in place of the old ones. A process
    /// that fails to answer keeps its old registrations, reported as an `extension_error`.
    pub async fn reinitialize(&self, reason: &str) {
        let calls = self
            .processes
            .iter()
            .enumerate()
            .map(|(index, process)| async move {
                let answer = self
                    .call_with_state(
                        process,
                        index,
                        |id, state| ToExtension::Reinitialize {
                            id,
                            reason: reason.to_string(),
                            state,
                        },
                        self.timeouts.handler,
                        None,
                        None,
                    )
                    .await;
                (index, answer)
            });
        for (index, answer) in join_all(calls).await {
            let outcome = answer.map_err(|e| e.to_string()).and_then(|value| {
                serde_json::from_value::<Initialized>(value).map_err(|e| e.to_string())
            });
            match outcome {
                Ok(initialized) => {
                    if let Ok(mut extensions) = self.shared.extensions.write() {
                        for extension in extensions.iter_mut().filter(|e| e.process == index) {
                            if let Some(manifest) = initialized
                                .extensions
                                .iter()
                                .find(|o| o.path == extension.path)
                                .and_then(|o| o.manifest.clone())
                            {
                                extension.manifest = Arc::new(manifest);
                            }
                        }
                    }
                }
                Err(error) => self.shared.report_all(index, "reinitialize", &error).await,
            }
        }
    }

    /// Returns once the input loop has carried out every action the processes sent so far
    /// (a command's `sendMessage` is on stdout before the command's response, as in pi).
    pub async fn actions_applied(&self) {
        let (done, applied) = tokio::sync::oneshot::channel();
        if self.shared.actions.send(Work::Barrier(done)).is_ok() {
            let _ = applied.await;
        }
    }

    /// Runs a command's handler; a failure is reported as pi reports it
    /// (`extensionPath: "command:<name>"`, `event: "command"`).
    pub async fn run_command(
        &self,
        command: &CommandInfo,
        args: &str,
        cancel: Option<&CancellationToken>,
    ) {
        let target = format!("command:{}", command.name);
        let (process, index) = match self.running(&command.extension) {
            Ok(running) => running,
            Err(err) => return self.report(&target, "command", &err.to_string()).await,
        };
        let outcome = self
            .call_with_state(
                process,
                index,
                |id, state| ToExtension::RunCommand {
                    id,
                    extension: command.extension.clone(),
                    name: command.registered.clone(),
                    args: args.to_string(),
                    state,
                },
                self.timeouts.command,
                cancel,
                None,
            )
            .await;
        if let Err(err) = outcome
            && err != CallError::Cancelled
        {
            self.report(&target, "command", &err.to_string()).await;
        }
    }

    /// The keys extensions bound, one per key: a key two extensions bound goes to the one
    /// loaded later, as in pi.
    pub fn shortcuts(&self) -> Vec<ShortcutInfo> {
        let mut list: Vec<ShortcutInfo> = Vec::new();
        for extension in self.read().iter() {
            for key in &extension.manifest.shortcuts {
                list.retain(|s| !same_key(&s.key, key));
                list.push(ShortcutInfo {
                    key: key.clone(),
                    extension: extension.path.clone(),
                });
            }
        }
        list
    }

    /// Runs a shortcut's handler; a failure is reported as a command's is, with
    /// `extensionPath: "shortcut:<key>"`.
    pub async fn run_shortcut(&self, shortcut: &ShortcutInfo) {
        let target = format!("shortcut:{}", shortcut.key);
        let (process, index) = match self.running(&shortcut.extension) {
            Ok(running) => running,
            Err(err) => return self.report(&target, "shortcut", &err.to_string()).await,
        };
        let outcome = self
            .call_with_state(
                process,
                index,
                |id, state| ToExtension::RunShortcut {
                    id,
                    extension: shortcut.extension.clone(),
                    shortcut: shortcut.key.clone(),
                    state,
                },
                self.timeouts.command,
                None,
                None,
            )
            .await;
        if let Err(err) = outcome
            && err != CallError::Cancelled
        {
            self.report(&target, "shortcut", &err.to_string()).await;
        }
    }

    /// Routes a client's `extension_ui_response` to the dialog it answers. Unknown ids are
    /// ignored, as pi ignores them.
    pub fn resolve_ui(&self, response: &ExtensionUiResponse) {
        let open = self
            .shared
            .dialogs
            .lock()
            .ok()
            .and_then(|mut d| d.remove(&response.id));
        let Some(open) = open else {
            return;
        };
        if let Some(process) = self.processes.get(open.process) {
            process.dialog(false);
            process.notify(ToExtension::UiResponse {
                id: open.id,
                value: response.value.clone(),
                confirmed: response.confirmed,
                cancelled: response.cancelled,
            });
        }
    }

    /// The client closed its input (T77): every open dialog is answered `cancelled`, and so is
    /// every dialog opened from now on, instead of waiting for a reply that cannot come.
    pub fn client_gone(&self) {
        self.shared
            .client_gone
            .store(true, std::sync::atomic::Ordering::Release);
        let open: Vec<OpenDialog> = self
            .shared
            .dialogs
            .lock()
            .map(|mut d| d.drain().map(|(_, dialog)| dialog).collect())
            .unwrap_or_default();
        for dialog in open {
            if let Some(process) = self.processes.get(dialog.process) {
                process.dialog(false);
                process.notify(ToExtension::UiResponse {
                    id: dialog.id,
                    value: None,
                    confirmed: None,
                    cancelled: Some(true),
                });
            }
        }
    }

    /// Tells every process to finish.
    pub fn shutdown(&self) {
        self.shared
            .shutting_down
            .store(true, std::sync::atomic::Ordering::Release);
        // The applier writes through the session's event sink: the output ends only when
        // every sender is gone, and the processes' reader tasks may outlive the session.
        if let Ok(mut applier) = self.shared.applier.write() {
            *applier = None;
        }
        for process in &self.processes {
            process.shutdown();
        }
    }

    /// Sends each extension the values of the flags it registered.
    pub fn set_flags(&self, values: &HashMap<String, Value>) {
        for extension in self.read().iter() {
            let mine: Map<String, Value> = extension
                .manifest
                .flags
                .iter()
                .filter_map(|f| values.get(&f.name).map(|v| (f.name.clone(), v.clone())))
                .collect();
            if let (false, Some(process)) = (mine.is_empty(), self.process(extension)) {
                process.notify(ToExtension::Flags {
                    extension: extension.path.clone(),
                    values: mine,
                });
            }
        }
    }
}

impl FrameHandler for Shared {
    fn frame<'a>(
        &'a self,
        index: usize,
        process: &'a Arc<Process>,
        frame: FromExtension,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            match frame {
                FromExtension::UiRequest(request) => {
                    let dialog = matches!(
                        request.method,
                        UiMethod::Select { .. }
                            | UiMethod::Confirm { .. }
                            | UiMethod::Input { .. }
                            | UiMethod::Editor { .. }
                    );
                    let id = uuid::Uuid::new_v4().to_string();
                    if dialog && self.client_gone.load(std::sync::atomic::Ordering::Acquire) {
                        // The client has closed its input: the dialog is cancelled at once
                        // rather than left to its deadline.
                        process.notify(ToExtension::UiResponse {
                            id: request.id,
                            value: None,
                            confirmed: None,
                            cancelled: Some(true),
                        });
                        return;
                    }
                    if dialog {
                        process.dialog(true);
                        if let Ok(mut dialogs) = self.dialogs.lock() {
                            dialogs.insert(
                                id.clone(),
                                OpenDialog {
                                    process: index,
                                    id: request.id,
                                },
                            );
                        }
                    }
                    let record = OutboundRecord::ExtensionUiRequest(ExtensionUiRequest {
                        id,
                        method: request.method,
                    });
                    // A dialog is written at once even behind queued actions: the loop may
                    // be waiting on this very handler, and the dialog's answer with it.
                    let waiting = self.waiting(index);
                    if !dialog && waiting.load(AtomicOrdering::Acquire) > 0 {
                        let work = Work::Record(Box::new(record), Waiting::enter(&waiting));
                        if let Err(unsent) = self.actions.send(work)
                            && let Work::Record(record, _) = unsent.0
                        {
                            self.outlet.write(*record).await;
                        }
                        return;
                    }
                    self.outlet.write(record).await;
                }
                FromExtension::UiCancel { id } => {
                    let withdrawn = self.dialogs.lock().ok().and_then(|mut dialogs| {
                        let key = dialogs
                            .iter()
                            .find(|(_, d)| d.process == index && d.id == id)
                            .map(|(k, _)| k.clone())?;
                        dialogs.remove(&key)
                    });
                    if withdrawn.is_some() {
                        process.dialog(false);
                    }
                }
                FromExtension::Action(frame) => {
                    let replier = frame.id.clone().map(|id| (Arc::clone(process), id));
                    let waiting = self.waiting(index);
                    let applier = self.applier.read().ok().and_then(|a| a.clone());
                    if waiting.load(AtomicOrdering::Acquire) == 0
                        && let Some(applier) = applier
                        && let Some(outcome) = applier.apply(&frame).await
                    {
                        let request = ActionRequest {
                            extension: frame.extension.clone(),
                            frame,
                            replier,
                            _waiting: None,
                        };
                        request.reply(outcome);
                        return;
                    }
                    let request = ActionRequest {
                        extension: frame.extension.clone(),
                        frame,
                        replier,
                        _waiting: Some(Waiting::enter(&waiting)),
                    };
                    if let Err(unsent) = self.actions.send(Work::Action(request))
                        && let Work::Action(request) = unsent.0
                    {
                        request.reply(Err("tau is shutting down".into()));
                    }
                }
                FromExtension::Register(frame) => self.register(frame.extension, frame.manifest),
                FromExtension::ExtensionError {
                    extension,
                    event,
                    error,
                } => self.report(&extension, &event, &error).await,
                FromExtension::Response(_) | FromExtension::ToolUpdate { .. } => {}
            }
        })
    }

    fn exited<'a>(&'a self, index: usize, process: &'a Arc<Process>) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if self
                .shutting_down
                .load(std::sync::atomic::Ordering::Acquire)
            {
                return;
            }
            self.report_all(index, "process", &process.exit_text())
                .await;
        })
    }
}

impl Shared {
    /// The count of process `index`'s work waiting in the loop's queue.
    fn waiting(&self, index: usize) -> Arc<AtomicUsize> {
        let mut waiting = self
            .waiting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Arc::clone(waiting.entry(index).or_default())
    }

    /// Adds registrations made after loading: new tools, commands, events and flags.
    fn register(&self, path: String, manifest: Manifest) {
        let Ok(mut extensions) = self.extensions.write() else {
            return;
        };
        let Some(extension) = extensions.iter_mut().find(|e| e.path == path) else {
            return;
        };
        let mine = Arc::make_mut(&mut extension.manifest);
        for tool in manifest.tools {
            mine.tools.retain(|t| t.name != tool.name);
            mine.tools.push(tool);
        }
        for command in manifest.commands {
            mine.commands.retain(|c| c.name != command.name);
            mine.commands.push(command);
        }
        for event in manifest.events {
            if !mine.events.contains(&event) {
                mine.events.push(event);
            }
        }
        mine.flags.extend(manifest.flags);
        mine.shortcuts.extend(manifest.shortcuts);
    }
}

/// A tool or flag registered by two extensions while loading is a load error naming the
/// earlier one (ext §1.6).
fn check_conflicts(extensions: &[Extension]) -> Result<(), LoadError> {
    let mut tools: HashMap<&str, &str> = HashMap::new();
    let mut flags: HashMap<&str, &str> = HashMap::new();
    for extension in extensions {
        for tool in &extension.manifest.tools {
            if let Some(earlier) = tools.insert(&tool.name, &extension.path)
                && earlier != extension.path
            {
                return Err(LoadError(format!(
                    "Failed to load extension \"{}\": Tool \"{}\" conflicts with {earlier}",
                    extension.path, tool.name
                )));
            }
        }
        for flag in &extension.manifest.flags {
            if let Some(earlier) = flags.insert(&flag.name, &extension.path)
                && earlier != extension.path
            {
                return Err(LoadError(format!(
                    "Failed to load extension \"{}\": Flag \"--{}\" conflicts with {earlier}",
                    extension.path, flag.name
                )));
            }
        }
    }
    Ok(())
}

/// Starts the process `plan` describes, with `args`.
fn start(
    plan: &ProcessPlan,
    args: &[String],
    index: usize,
    env: &[(String, String)],
    shared: &Arc<Shared>,
    entries: &[Entry],
) -> Result<Arc<Process>, LoadError> {
    Process::spawn(
        plan.label.clone(),
        &plan.program,
        args,
        &plan.cwd,
        env,
        index,
        Arc::clone(shared) as Arc<dyn FrameHandler>,
    )
    .map_err(|err| {
        let path = plan
            .members
            .first()
            .and_then(|&i| entries.get(i))
            .map_or_else(String::new, |e| e.path.display().to_string());
        LoadError(format!(
            "Failed to load extension \"{path}\": cannot start {}: {err}",
            plan.program.display()
        ))
    })
}

/// The `initialize` call that loads `members` in `process` (ext §2.1).
async fn initialize(
    process: &Arc<Process>,
    entries: &[Entry],
    members: &[usize],
    config: &LoadConfig,
) -> Result<Value, CallError> {
    let paths: Vec<String> = members
        .iter()
        .filter_map(|&i| entries.get(i))
        .map(|e| e.path.display().to_string())
        .collect();
    process
        .call(
            |id| ToExtension::Initialize {
                id,
                protocol: PROTOCOL_VERSION,
                tau: config.tau_version.clone(),
                cwd: config.cwd.display().to_string(),
                agent_dir: config.agent_dir.display().to_string(),
                mode: config.mode.clone(),
                has_ui: config.has_ui,
                extensions: paths,
                state: json!({"projectTrusted": config.project_trusted}),
            },
            Some(Duration::from_secs(60)),
            None,
            None,
        )
        .await
}

/// Finds the Node host: `TAU_NODE_HOST`, else `<exe dir>/../share/tau/node-host/host.cjs` (an
/// installed layout), else `extensions/node-host/host.cjs` in a directory above the running
/// executable (a checkout's `target/<profile>/tau`).
pub fn find_node_host() -> Option<PathBuf> {
    if let Some(given) = std::env::var_os("TAU_NODE_HOST") {
        return Some(PathBuf::from(given));
    }
    let exe = std::env::current_exe().ok()?;
    let exe_dir = exe.parent()?;
    let installed = exe_dir.join("../share/tau/node-host/host.cjs");
    if installed.is_file() {
        return Some(installed);
    }
    exe_dir
        .ancestors()
        .map(|dir| dir.join("extensions/node-host/host.cjs"))
        .find(|candidate| Path::is_file(candidate))
}

/// Whether two of pi's key ids name the same key: the modifiers in any order, any case
/// (`shift+ctrl+P` is `ctrl+shift+p`).
pub fn same_key(a: &str, b: &str) -> bool {
    fn parts(id: &str) -> (Vec<String>, String) {
        let lower = id.to_ascii_lowercase();
        let mut parts: Vec<String> = lower.split('+').map(str::to_string).collect();
        let key = parts.pop().unwrap_or_default();
        parts.sort();
        (parts, key)
    }
    parts(a) == parts(b)
}
