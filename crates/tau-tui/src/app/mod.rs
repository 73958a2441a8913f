//! The interactive session's state and rules, free of any terminal: the records of the RPC
//! stream go in (`on_record`), keys go in (`on_key`, `on_paste`), and out come the commands to
//! send (`take_commands`) and what the screen shows. Everything the UI does to the session goes
//! through the RPC commands of `docs/rpc.md`, as `tau-protocol`'s types, so the terminal is one
//! more client of the core.
//!
//! This module owns [`App`] itself, the commands it queues and the footer. The rest is split by
//! what it reacts to: `records` (the server's events), `responses` (answers to the UI's own
//! commands), `dialogs` (extension dialogs and the UI's pickers), `commands` (what the editor
//! submits: slash commands, shell commands, completion, pastes), `builtins` (the built-in
//! commands beyond the conversation's: settings, keys, trust, import, share…), `palette` (the
//! list `/` opens, and which `/name` is a command) and `input` (keys and pastes, and the
//! requests only the terminal layer can carry out).

mod builtins;
mod commands;
mod dialogs;
mod input;
mod palette;
mod records;
mod responses;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::time::Instant;

use serde_json::Value;
use tau_protocol::rpc::{NoFields, RpcCommand};

use crate::editor::Editor;
use crate::theme::Theme;
use crate::transcript::{NoticeKind, Transcript, View};

pub use crate::text::shown_content;
pub use commands::{COMMANDS, HOTKEYS, complete_path};
pub use dialogs::{Dialog, DialogBody, Purpose};
pub use input::{IMAGE_CAP, Request};
pub use palette::{Palette, PaletteItem};
pub use records::decode;
use responses::Pending;

/// The footer's facts.
#[derive(Debug, Clone, Default)]
pub struct Footer {
    pub cwd: String,
    pub model: String,
    pub thinking: String,
    pub context: Option<String>,
    pub cost: f64,
    pub session_name: Option<String>,
    /// The permission mode, when it is not `allowAll` (which pi users know as the only one).
    pub permission_mode: Option<tau_protocol::PermissionMode>,
}

/// The interactive session.
pub struct App {
    pub transcript: Transcript,
    pub editor: Editor,
    pub theme: Theme,
    pub view: View,
    pub streaming: bool,
    pub compacting: bool,
    pub statuses: BTreeMap<String, String>,
    pub widgets: BTreeMap<String, Vec<String>>,
    /// A title an extension set, to apply.
    pub title: Option<String>,
    pub footer: Footer,
    pub dialog: Option<Dialog>,
    /// Permission requests that came while another dialog was open: id, title, rule.
    waiting_permissions: std::collections::VecDeque<(String, String, String)>,
    pub queued_steering: Vec<String>,
    pub queued_follow_up: Vec<String>,
    /// Text to put on the clipboard (OSC 52).
    pub clipboard: Option<String>,
    pub quit: bool,
    pub dirty: bool,
    pending: HashMap<String, Pending>,
    next_id: u64,
    /// Commands (with their ids) and extension answers, serialised: the writer only writes
    /// lines.
    out: Vec<Value>,
    last_ctrl_c: Option<Instant>,
    current_assistant: Option<usize>,
    /// Where this folder's sessions are kept (`/resume`).
    pub session_dir: Option<PathBuf>,
    /// The folder `@` paths complete in.
    pub cwd: PathBuf,
    /// Skills, templates and extension commands (`get_commands`), as `/name`.
    pub session_commands: Vec<(String, String)>,
    /// The MCP servers' resources (`get_mcp_resources`), for `@server:uri` completion.
    pub mcp_resources: Vec<tau_protocol::rpc::McpResourceInfo>,
    /// Large pastes, shown in the editor as a marker and sent whole.
    pastes: Vec<String>,
    /// The keys extensions bound: canonical id, the id as registered, the extension.
    pub shortcuts: Vec<(String, String, String)>,
    /// Extension keys already refused (extension and key), so each is warned about once.
    refused_shortcuts: HashSet<String>,
    /// The slash-command list's state (`palette`).
    pub palette: Palette,
    /// What the terminal layer is asked to do next (Ctrl+G, Ctrl+Z, Ctrl+V, `/share`).
    pub request: Option<Request>,
    /// Images for the next message, each with its marker in the editor.
    images: Vec<(String, tau_protocol::ImageContent)>,
    /// Where `auth.json`, `trust.json` and the user's `settings.json` are.
    pub agent_dir: Option<PathBuf>,
}

impl App {
    pub fn new(theme: Theme, cwd: String, history: Vec<String>) -> Self {
        let mut app = Self {
            transcript: Transcript::default(),
            editor: Editor::with_history(history),
            theme,
            view: View::default(),
            streaming: false,
            compacting: false,
            statuses: BTreeMap::new(),
            widgets: BTreeMap::new(),
            title: None,
            footer: Footer {
                cwd,
                ..Footer::default()
            },
            dialog: None,
            waiting_permissions: std::collections::VecDeque::new(),
            queued_steering: Vec::new(),
            queued_follow_up: Vec::new(),
            clipboard: None,
            quit: false,
            dirty: true,
            pending: HashMap::new(),
            next_id: 0,
            out: Vec::new(),
            last_ctrl_c: None,
            current_assistant: None,
            session_dir: None,
            cwd: PathBuf::from("."),
            session_commands: Vec::new(),
            mcp_resources: Vec::new(),
            pastes: Vec::new(),
            shortcuts: Vec::new(),
            refused_shortcuts: HashSet::new(),
            palette: Palette::default(),
            request: None,
            images: Vec::new(),
            agent_dir: tau_store::paths::agent_dir(),
        };
        app.refresh_footer();
        app.refresh_registrations();
        app
    }

    /// The commands to write to the server, in order.
    pub fn take_commands(&mut self) -> Vec<Value> {
        std::mem::take(&mut self.out)
    }

    /// Queues `command` with an id of its own, so that its response finds `pending`.
    fn send(&mut self, command: RpcCommand, pending: Pending) {
        // Serialising a command cannot fail (no map has non-string keys); if it ever did, the
        // user hears of it rather than waiting for an answer that never comes.
        let Ok(Value::Object(mut object)) = serde_json::to_value(&command) else {
            self.notice(
                format!("The {} command could not be written", command.name()),
                NoticeKind::Error,
            );
            return;
        };
        self.next_id += 1;
        let id = format!("tui-{}", self.next_id);
        object.insert("id".into(), Value::String(id.clone()));
        self.pending.insert(id, pending);
        self.out.push(Value::Object(object));
    }

    fn notice(&mut self, text: impl Into<String>, kind: NoticeKind) {
        self.transcript.notice(text, kind);
        self.dirty = true;
    }

    /// What a new session shows first: the version and the keys and commands that matter first,
    /// and, when no model can answer, why and the shortest ways on.
    pub fn start_screen(&mut self, version: &str, no_model: Option<&str>) {
        self.transcript.notice(
            format!(
                "tau {version}: Enter sends, Shift+Enter or Ctrl+J breaks the line, Esc stops \
                 the reply, Ctrl+C twice quits.\n/ lists the commands, /model picks the model, \
                 /resume opens an earlier session, /hotkeys shows every key."
            ),
            NoticeKind::Info,
        );
        if let Some(help) = no_model {
            self.transcript
                .notice(format!("Warning: {help}"), NoticeKind::Warning);
        }
        self.dirty = true;
    }

    fn refresh_footer(&mut self) {
        self.send(RpcCommand::GetState(NoFields {}), Pending::State);
        self.send(RpcCommand::GetSessionStats(NoFields {}), Pending::Stats);
    }

    /// Asks for the session's slash commands and the extensions' keys (again after each run,
    /// whose handlers may register more).
    fn refresh_registrations(&mut self) {
        self.send(RpcCommand::GetCommands(NoFields {}), Pending::Commands);
        self.send(RpcCommand::GetShortcuts(NoFields {}), Pending::Shortcuts);
        self.refresh_resources();
    }

    /// Asks for the MCP servers' resources (again when a server becomes ready).
    fn refresh_resources(&mut self) {
        self.send(RpcCommand::GetMcpResources(NoFields {}), Pending::Resources);
    }

    /// Asks for the conversation so far (a continued or opened session), to show it.
    pub fn load_history(&mut self) {
        self.send(RpcCommand::GetMessages(NoFields {}), Pending::History(None));
    }
}

/// The last part of a path, for a line that has no room for the whole.
fn file_name(path: &str) -> String {
    std::path::Path::new(path)
        .file_name()
        .map_or_else(|| path.to_string(), |n| n.to_string_lossy().into_owned())
}
