//! The interactive session's state and rules, free of any terminal: the records of the RPC
//! stream go in (`on_record`), keys go in (`on_key`, `on_paste`), and out come the commands to
//! send (`take_commands`) and what the screen shows. Everything the UI does to the session goes
//! through the RPC commands of `docs/rpc.md`, so the terminal is one more client of the core.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use serde_json::{Value, json};

use crate::editor::Editor;
use crate::text::{content_text, one_line};
use crate::theme::Theme;
use crate::transcript::{BlockKind, NoticeKind, ToolStatus, Transcript, View};

/// A dialog over the conversation: an extension's request or one of the UI's own pickers.
#[derive(Debug, Clone)]
pub struct Dialog {
    pub title: String,
    pub body: DialogBody,
    /// Who gets the answer.
    pub purpose: Purpose,
}

#[derive(Debug, Clone)]
pub enum DialogBody {
    Select {
        options: Vec<String>,
        selected: usize,
    },
    Confirm {
        message: String,
    },
    Input {
        editor: Editor,
        multiline: bool,
    },
}

#[derive(Debug, Clone)]
pub enum Purpose {
    /// An `extension_ui_request` with this id.
    Extension(String),
    /// `/model`: the models offered, as `provider/id`.
    Model(Vec<(String, String)>),
    /// `/fork`: the entries offered.
    Fork(Vec<String>),
    /// `/resume`: the session files offered.
    Resume(Vec<String>),
    /// `/model`, once a reasoning model is chosen: the thinking levels offered.
    Thinking(Vec<String>),
    /// `/tree`: the entries offered.
    Tree(Vec<String>),
    /// `/tree`, once an entry is chosen: whether to summarise the branch left.
    TreeSummary(String),
}

/// What a response to one of the UI's commands is for.
#[derive(Debug, Clone)]
enum Pending {
    State,
    Stats,
    ModelPicker,
    /// `set_model` from the picker: a reasoning model asks for its thinking level next.
    ModelSet,
    ThinkingPicker,
    Copy,
    Show(&'static str),
    ForkPicker,
    Fork,
    TreePicker,
    Navigate,
    /// `get_messages`: the conversation so far, shown, then the notice.
    History(Option<String>),
    /// `get_commands`: the session's own slash commands, for completion.
    Commands,
    /// `get_shortcuts`: the keys extensions bound.
    Shortcuts,
    Quiet,
}

/// The footer's facts.
#[derive(Debug, Clone, Default)]
pub struct Footer {
    pub cwd: String,
    pub model: String,
    pub thinking: String,
    pub context: Option<String>,
    pub cost: f64,
    pub session_name: Option<String>,
}

/// The built-in slash commands, with what they do (for completion and `/hotkeys`).
pub const COMMANDS: &[(&str, &str)] = &[
    ("/model", "choose the model"),
    ("/thinking", "set the thinking level: /thinking high"),
    ("/new", "start a new session"),
    ("/resume", "open an earlier session of this folder"),
    ("/fork", "branch from an earlier message into a new session"),
    (
        "/tree",
        "go to another point of this session (a new branch from there)",
    ),
    ("/compact", "summarise the conversation to free context"),
    ("/name", "name the session: /name <text>"),
    ("/session", "session statistics"),
    ("/export", "write the session as HTML: /export [path]"),
    ("/copy", "copy the last answer to the clipboard"),
    ("/hotkeys", "the keys"),
    ("/quit", "leave tau"),
];

pub const HOTKEYS: &[(&str, &str)] = &[
    ("Enter", "send; while a reply streams, steer it"),
    ("Alt+Enter", "while a reply streams, queue a follow-up"),
    ("Shift+Enter, Ctrl+J", "new line"),
    ("Esc", "abort the reply"),
    ("Ctrl+C", "clear the editor; twice to quit"),
    ("Ctrl+D", "quit (empty editor)"),
    ("Ctrl+O", "expand tool output and thinking"),
    ("Shift+Tab", "next thinking level"),
    ("Ctrl+P", "next model"),
    ("Up/Down", "history (first/last line)"),
    ("PageUp/PageDown", "scroll the conversation"),
    ("Tab", "complete a /command or @path"),
    (
        "!cmd",
        "run a shell command into the context (!!cmd: not into the context)",
    ),
];

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
    /// Lines scrolled up from the bottom.
    pub scroll: usize,
    pub queued_steering: Vec<String>,
    pub queued_follow_up: Vec<String>,
    /// Text to put on the clipboard (OSC 52).
    pub clipboard: Option<String>,
    pub quit: bool,
    pub dirty: bool,
    pending: HashMap<String, Pending>,
    next_id: u64,
    out: Vec<Value>,
    last_ctrl_c: Option<Instant>,
    current_assistant: Option<usize>,
    /// Where this folder's sessions are kept (`/resume`).
    pub session_dir: Option<std::path::PathBuf>,
    /// The folder `@` paths complete in.
    pub cwd: std::path::PathBuf,
    /// Skills, templates and extension commands (`get_commands`), as `/name`.
    pub session_commands: Vec<(String, String)>,
    /// Large pastes, shown in the editor as a marker and sent whole.
    pastes: Vec<String>,
    /// The keys extensions bound: canonical id, the id as registered, the extension.
    pub shortcuts: Vec<(String, String, String)>,
    /// Extension keys already refused (extension and key), so each is warned about once.
    refused_shortcuts: std::collections::HashSet<String>,
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
            scroll: 0,
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
            cwd: std::path::PathBuf::from("."),
            session_commands: Vec::new(),
            pastes: Vec::new(),
            shortcuts: Vec::new(),
            refused_shortcuts: std::collections::HashSet::new(),
        };
        app.refresh_footer();
        app.refresh_registrations();
        app
    }

    /// The commands to write to the server, in order.
    pub fn take_commands(&mut self) -> Vec<Value> {
        std::mem::take(&mut self.out)
    }

    fn send(&mut self, mut command: Value, pending: Pending) {
        self.next_id += 1;
        let id = format!("tui-{}", self.next_id);
        command["id"] = json!(id);
        self.pending.insert(id, pending);
        self.out.push(command);
    }

    fn notice(&mut self, text: impl Into<String>, kind: NoticeKind) {
        self.transcript.notice(text, kind);
        self.dirty = true;
    }

    fn refresh_footer(&mut self) {
        self.send(json!({"type": "get_state"}), Pending::State);
        self.send(json!({"type": "get_session_stats"}), Pending::Stats);
    }

    // ---- records ----

    pub fn on_record(&mut self, record: &Value) {
        self.dirty = true;
        match record["type"].as_str().unwrap_or_default() {
            "response" => self.on_response(record),
            "agent_start" => {
                self.streaming = true;
                self.scroll = 0;
            }
            "agent_end" => {
                self.current_assistant = None;
                self.refresh_footer();
            }
            // The run's last record (T28): until then (retries, compaction, the extensions'
            // post-run work) Enter steers the run rather than starting another.
            "agent_settled" => {
                self.streaming = false;
                self.refresh_footer();
                // A run's handlers may have registered commands or keys.
                self.refresh_registrations();
            }
            "message_start" => self.on_message_start(&record["message"]),
            "message_update" => self.on_message_update(&record["assistantMessageEvent"]),
            "message_end" => self.on_message_end(&record["message"]),
            "tool_execution_start" => {
                self.transcript.push(BlockKind::Tool {
                    id: str_of(&record["toolCallId"]),
                    name: str_of(&record["toolName"]),
                    args: record["args"].clone(),
                    output: String::new(),
                    diff: None,
                    status: ToolStatus::Running,
                });
            }
            "tool_execution_update" => {
                if let Some(block) = self
                    .transcript
                    .tool_mut(record["toolCallId"].as_str().unwrap_or_default())
                    && let BlockKind::Tool { output, .. } = &mut block.kind
                {
                    *output = shown_content(&record["partialResult"]["content"]);
                    block.touch();
                }
            }
            "tool_execution_end" => {
                if let Some(block) = self
                    .transcript
                    .tool_mut(record["toolCallId"].as_str().unwrap_or_default())
                    && let BlockKind::Tool {
                        output,
                        diff,
                        status,
                        ..
                    } = &mut block.kind
                {
                    *output = shown_content(&record["result"]["content"]);
                    *diff = record["result"]["details"]["diff"]
                        .as_str()
                        .map(str::to_string);
                    *status = if record["isError"] == true {
                        ToolStatus::Failed
                    } else {
                        ToolStatus::Done
                    };
                    block.touch();
                }
            }
            "queue_update" => {
                self.queued_steering = strings(&record["steering"]);
                self.queued_follow_up = strings(&record["followUp"]);
            }
            "auto_retry_start" => {
                let seconds = record["delayMs"].as_f64().unwrap_or(0.0) / 1000.0;
                self.notice(
                    format!(
                        "Retrying ({}/{}) in {seconds:.0}s: {}",
                        record["attempt"],
                        record["maxAttempts"],
                        str_of(&record["errorMessage"])
                    ),
                    NoticeKind::Warning,
                );
            }
            "auto_retry_end" if record["success"] != true => {
                self.notice(
                    format!("Retry failed: {}", str_of(&record["finalError"])),
                    NoticeKind::Error,
                );
            }
            "compaction_start" => {
                self.compacting = true;
                self.notice("Compacting the conversation…", NoticeKind::Info);
            }
            "compaction_end" => {
                self.compacting = false;
                if record["aborted"] == true {
                    self.notice("Compaction aborted", NoticeKind::Warning);
                } else if let Some(error) = record["errorMessage"].as_str() {
                    self.notice(format!("Compaction failed: {error}"), NoticeKind::Error);
                } else {
                    let tokens = record["result"]["tokensBefore"].as_u64().unwrap_or(0);
                    self.notice(
                        format!("── Compacted ({tokens} tokens summarised) ──"),
                        NoticeKind::Info,
                    );
                }
                self.refresh_footer();
            }
            "extension_error" => {
                self.notice(
                    format!(
                        "Extension error ({}): {}",
                        str_of(&record["extensionPath"]),
                        str_of(&record["error"])
                    ),
                    NoticeKind::Error,
                );
            }
            "extension_ui_request" => self.on_ui_request(record),
            // The conversation goes on in memory; the user must know it is not kept.
            "session_save_status" => match str_of(&record["state"]).as_str() {
                "failing" => self.notice(
                    format!(
                        "The session cannot be saved ({}): {} entries wait and are written as soon as the disk accepts them",
                        str_of(&record["error"]),
                        record["unsaved"].as_u64().unwrap_or(0)
                    ),
                    NoticeKind::Error,
                ),
                _ => self.notice("The session is saved again", NoticeKind::Info),
            },
            "session_info_changed" | "thinking_level_changed" | "model_select" => {
                self.refresh_footer()
            }
            _ => self.dirty = false,
        }
    }

    fn on_response(&mut self, record: &Value) {
        let Some(pending) = record["id"].as_str().and_then(|id| self.pending.remove(id)) else {
            return;
        };
        if record["success"] != true {
            let error = str_of(&record["error"]);
            if !matches!(pending, Pending::Quiet) {
                self.notice(error, NoticeKind::Error);
            }
            return;
        }
        let data = &record["data"];
        match pending {
            Pending::State => {
                let model = &data["model"];
                self.footer.model = if model["id"].is_string() && model["id"] != "unknown" {
                    format!("{}/{}", str_of(&model["provider"]), str_of(&model["id"]))
                } else {
                    "no model".to_string()
                };
                self.footer.thinking = str_of(&data["thinkingLevel"]);
                self.footer.session_name = data["sessionName"].as_str().map(str::to_string);
            }
            Pending::Stats => {
                self.footer.cost = data["cost"].as_f64().unwrap_or(0.0);
                let usage = &data["contextUsage"];
                self.footer.context =
                    usage["contextWindow"]
                        .as_u64()
                        .map(|window| match usage["tokens"].as_u64() {
                            Some(tokens) => format!(
                                "{}/{} ({:.0}%)",
                                short(tokens),
                                short(window),
                                usage["percent"].as_f64().unwrap_or(0.0)
                            ),
                            None => format!("?/{}", short(window)),
                        });
            }
            Pending::ModelPicker => {
                let models: Vec<(String, String)> = data["models"]
                    .as_array()
                    .map(|list| {
                        list.iter()
                            .map(|m| (str_of(&m["provider"]), str_of(&m["id"])))
                            .collect()
                    })
                    .unwrap_or_default();
                if models.is_empty() {
                    self.notice(
                        "No models available: set a provider's API key or add models.json",
                        NoticeKind::Warning,
                    );
                    return;
                }
                let options: Vec<String> =
                    models.iter().map(|(p, id)| format!("{p}/{id}")).collect();
                let selected = options
                    .iter()
                    .position(|o| *o == self.footer.model)
                    .unwrap_or(0);
                self.dialog = Some(Dialog {
                    title: "Model".into(),
                    body: DialogBody::Select { options, selected },
                    purpose: Purpose::Model(models),
                });
            }
            Pending::ModelSet => {
                if data["reasoning"] == true {
                    self.send(
                        json!({"type": "get_available_thinking_levels"}),
                        Pending::ThinkingPicker,
                    );
                }
            }
            Pending::ThinkingPicker => {
                let levels = strings(&data["levels"]);
                if levels.len() > 1 {
                    let selected = levels
                        .iter()
                        .position(|l| *l == self.footer.thinking)
                        .unwrap_or(0);
                    self.dialog = Some(Dialog {
                        title: "Thinking level".into(),
                        body: DialogBody::Select {
                            options: levels.clone(),
                            selected,
                        },
                        purpose: Purpose::Thinking(levels),
                    });
                }
            }
            Pending::Copy => match data["text"].as_str() {
                Some(text) => {
                    self.clipboard = Some(text.to_string());
                    self.notice("Copied the last answer", NoticeKind::Info);
                }
                None => self.notice("No answer to copy yet", NoticeKind::Warning),
            },
            Pending::Show(what) => {
                let text = match what {
                    "export" => format!("Exported to {}", str_of(&data["path"])),
                    "stats" => stats_text(data),
                    "bash" => {
                        let output = str_of(&data["output"]);
                        let code = data["exitCode"]
                            .as_i64()
                            .map(|c| format!(" (exit {c})"))
                            .unwrap_or_default();
                        format!("{}{code}", output.trim_end())
                    }
                    "new" if data["cancelled"] == true => {
                        "New session cancelled by an extension".into()
                    }
                    "new" => {
                        self.transcript.clear();
                        self.refresh_footer();
                        "New session".into()
                    }
                    "switch" if data["cancelled"] != true => {
                        self.refresh_footer();
                        "Session opened".into()
                    }
                    _ => return,
                };
                self.notice(text, NoticeKind::Info);
            }
            Pending::ForkPicker => {
                let entries: Vec<(String, String)> = data["messages"]
                    .as_array()
                    .map(|list| {
                        list.iter()
                            .map(|m| (str_of(&m["entryId"]), str_of(&m["text"])))
                            .collect()
                    })
                    .unwrap_or_default();
                if entries.is_empty() {
                    self.notice("No message to fork from yet", NoticeKind::Warning);
                    return;
                }
                let options = entries.iter().map(|(_, t)| one_line(t, 100)).collect();
                self.dialog = Some(Dialog {
                    title: "Fork from".into(),
                    body: DialogBody::Select {
                        options,
                        selected: 0,
                    },
                    purpose: Purpose::Fork(entries.into_iter().map(|(id, _)| id).collect()),
                });
            }
            Pending::Fork => {
                if data["cancelled"] != true {
                    self.transcript.clear();
                    self.editor
                        .set_text(data["text"].as_str().unwrap_or_default());
                    // The new session holds the conversation up to the message forked from.
                    self.send(
                        json!({"type": "get_messages"}),
                        Pending::History(Some("Forked into a new session".into())),
                    );
                    self.refresh_footer();
                }
            }
            Pending::TreePicker => {
                let tree = data["tree"].as_array().map_or(&[][..], Vec::as_slice);
                let (rows, selected) = crate::tree::rows(tree, data["leafId"].as_str());
                if rows.is_empty() {
                    self.notice("The session has no messages yet", NoticeKind::Warning);
                    return;
                }
                self.dialog = Some(Dialog {
                    title: "Session tree (● the current branch)".into(),
                    body: DialogBody::Select {
                        options: rows.iter().map(|r| r.label.clone()).collect(),
                        selected,
                    },
                    purpose: Purpose::Tree(rows.into_iter().map(|r| r.entry_id).collect()),
                });
            }
            Pending::Navigate => {
                if data["cancelled"] == true {
                    self.notice("Cancelled by an extension", NoticeKind::Warning);
                    return;
                }
                if data["aborted"] == true {
                    self.notice("Summary aborted; nothing moved", NoticeKind::Warning);
                    return;
                }
                if let Some(text) = data["editorText"].as_str() {
                    self.editor.set_text(text);
                }
                self.transcript.clear();
                let what = if data["summaryEntry"].is_object() {
                    "Moved in the session tree; the branch left is summarised"
                } else {
                    "Moved in the session tree"
                };
                self.send(
                    json!({"type": "get_messages"}),
                    Pending::History(Some(what.into())),
                );
                self.refresh_footer();
            }
            Pending::Shortcuts => {
                self.shortcuts.clear();
                for shortcut in data["shortcuts"].as_array().map_or(&[][..], Vec::as_slice) {
                    let key = str_of(&shortcut["key"]);
                    let extension = str_of(&shortcut["extension"]);
                    let id = crate::keys::canonical(&key);
                    if let Some(why) = crate::keys::refusal(&id) {
                        if self.refused_shortcuts.insert(format!("{extension}\n{id}")) {
                            self.notice(
                                format!(
                                    "{}: shortcut {key} not bound ({why})",
                                    file_name(&extension)
                                ),
                                NoticeKind::Warning,
                            );
                        }
                        continue;
                    }
                    self.shortcuts.push((id, key, extension));
                }
            }
            Pending::Commands => {
                self.session_commands = data["commands"]
                    .as_array()
                    .map(|list| {
                        list.iter()
                            .map(|c| {
                                (
                                    format!("/{}", str_of(&c["name"])),
                                    str_of(&c["description"]),
                                )
                            })
                            .collect()
                    })
                    .unwrap_or_default();
            }
            Pending::History(then) => {
                let messages = data["messages"].as_array().cloned().unwrap_or_default();
                self.show_messages(&messages);
                if let Some(text) = then {
                    self.notice(text, NoticeKind::Info);
                }
            }
            Pending::Quiet => {}
        }
    }

    fn on_message_start(&mut self, message: &Value) {
        match message["role"].as_str() {
            Some("user") => {
                let text = shown_content(&message["content"]);
                self.transcript.push(BlockKind::User { text });
            }
            Some("assistant") => {
                let index = self.transcript.push(BlockKind::Assistant {
                    text: String::new(),
                    thinking: String::new(),
                    error: None,
                });
                self.current_assistant = Some(index);
            }
            Some("custom") if message["display"] == true => {
                self.transcript
                    .notice(content_text(&message["content"]), NoticeKind::Info);
            }
            Some("bashExecution") => {
                self.transcript.push(BlockKind::Tool {
                    id: String::new(),
                    name: "!".into(),
                    args: json!({"command": message["command"]}),
                    output: str_of(&message["output"]),
                    diff: None,
                    status: ToolStatus::Done,
                });
            }
            _ => {}
        }
    }

    fn on_message_update(&mut self, event: &Value) {
        let delta = event["delta"].as_str().unwrap_or_default();
        match event["type"].as_str() {
            Some("text_delta") => self.on_delta(false, delta),
            Some("thinking_delta") => self.on_delta(true, delta),
            _ => {}
        }
    }

    /// Text (or thinking) streamed into the reply being written.
    pub fn on_delta(&mut self, is_thinking: bool, delta: &str) {
        let Some(index) = self.current_assistant else {
            return;
        };
        let Some(block) = self.transcript.blocks.get_mut(index) else {
            return;
        };
        let BlockKind::Assistant { text, thinking, .. } = &mut block.kind else {
            return;
        };
        if is_thinking {
            thinking.push_str(delta);
        } else {
            text.push_str(delta);
        }
        block.touch();
        self.dirty = true;
    }

    fn on_message_end(&mut self, message: &Value) {
        if message["role"] != "assistant" {
            return;
        }
        let Some(index) = self.current_assistant.take() else {
            return;
        };
        let Some(block) = self.transcript.blocks.get_mut(index) else {
            return;
        };
        if let BlockKind::Assistant {
            text,
            thinking,
            error,
        } = &mut block.kind
        {
            let blocks = message["content"].as_array().cloned().unwrap_or_default();
            *text = blocks
                .iter()
                .filter(|b| b["type"] == "text")
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n");
            *thinking = blocks
                .iter()
                .filter(|b| b["type"] == "thinking")
                .filter_map(|b| b["thinking"].as_str())
                .collect::<Vec<_>>()
                .join("\n");
            *error = match message["stopReason"].as_str() {
                Some("aborted") => Some("aborted".into()),
                Some("error") => Some(
                    message["errorMessage"]
                        .as_str()
                        .unwrap_or("the request failed")
                        .to_string(),
                ),
                _ => None,
            };
            block.touch();
        }
        // An answer with nothing to show (only tool calls) takes no room.
        if let Some(BlockKind::Assistant {
            text,
            thinking,
            error,
        }) = self.transcript.blocks.get(index).map(|b| &b.kind)
            && text.is_empty()
            && thinking.is_empty()
            && error.is_none()
        {
            self.transcript.blocks.remove(index);
        }
    }

    fn on_ui_request(&mut self, record: &Value) {
        let id = str_of(&record["id"]);
        let title = str_of(&record["title"]);
        match record["method"].as_str().unwrap_or_default() {
            "notify" => {
                let kind = match record["notifyType"].as_str() {
                    Some("error") => NoticeKind::Error,
                    Some("warning") => NoticeKind::Warning,
                    _ => NoticeKind::Info,
                };
                self.notice(str_of(&record["message"]), kind);
            }
            "setStatus" => match record["statusText"].as_str() {
                Some(text) => {
                    self.statuses
                        .insert(str_of(&record["statusKey"]), text.to_string());
                }
                None => {
                    self.statuses
                        .remove(record["statusKey"].as_str().unwrap_or_default());
                }
            },
            "setWidget" => match record["widgetLines"].as_array() {
                Some(lines) => {
                    self.widgets.insert(
                        str_of(&record["widgetKey"]),
                        lines.iter().map(str_of).collect(),
                    );
                }
                None => {
                    self.widgets
                        .remove(record["widgetKey"].as_str().unwrap_or_default());
                }
            },
            "setTitle" => self.title = Some(title),
            "set_editor_text" => self
                .editor
                .set_text(record["text"].as_str().unwrap_or_default()),
            "select" => {
                let options = strings(&record["options"]);
                self.dialog = Some(Dialog {
                    title,
                    body: DialogBody::Select {
                        options,
                        selected: 0,
                    },
                    purpose: Purpose::Extension(id),
                });
            }
            "confirm" => {
                self.dialog = Some(Dialog {
                    title,
                    body: DialogBody::Confirm {
                        message: str_of(&record["message"]),
                    },
                    purpose: Purpose::Extension(id),
                });
            }
            "input" | "editor" => {
                let mut editor = Editor::default();
                editor.set_text(record["prefill"].as_str().unwrap_or_default());
                self.dialog = Some(Dialog {
                    title,
                    body: DialogBody::Input {
                        editor,
                        multiline: record["method"] == "editor",
                    },
                    purpose: Purpose::Extension(id),
                });
            }
            _ => {}
        }
    }

    // ---- keys ----

    pub fn on_paste(&mut self, text: &str) {
        self.dirty = true;
        let text = text.replace("\r\n", "\n").replace('\r', "\n");
        match &mut self.dialog {
            Some(Dialog {
                body: DialogBody::Input { editor, .. },
                ..
            }) => editor.insert(&text),
            Some(_) => {}
            None => {
                let lines = text.lines().count();
                if lines > PASTE_BLOCK_LINES {
                    // One marker in the editor; the text goes out whole when sent.
                    self.pastes.push(text);
                    let marker = format!("[paste #{} +{lines} lines]", self.pastes.len());
                    self.editor.insert(&marker);
                } else {
                    self.editor.insert(&text);
                }
            }
        }
    }

    /// The editor's text with each paste marker replaced by what was pasted.
    fn expand_pastes(&mut self, text: String) -> String {
        let mut text = text;
        for (i, paste) in self.pastes.iter().enumerate() {
            let lines = paste.lines().count();
            text = text.replace(&format!("[paste #{} +{lines} lines]", i + 1), paste);
        }
        self.pastes.clear();
        text
    }

    pub fn on_key(&mut self, key: KeyEvent) {
        if key.kind == KeyEventKind::Release {
            return;
        }
        self.dirty = true;
        if self.dialog.is_some() {
            self.on_dialog_key(key);
            return;
        }
        if let Some(id) = crate::keys::of_event(&key)
            && let Some((_, registered, _)) = self.shortcuts.iter().find(|s| s.0 == id)
        {
            let command = json!({"type": "run_shortcut", "key": registered});
            self.send(command, Pending::Quiet);
            return;
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let alt = key.modifiers.contains(KeyModifiers::ALT);
        let shift = key.modifiers.contains(KeyModifiers::SHIFT);
        match key.code {
            KeyCode::Char('c') if ctrl => {
                if !self.editor.is_empty() {
                    self.editor.clear();
                } else if self
                    .last_ctrl_c
                    .is_some_and(|t| t.elapsed() < Duration::from_millis(1500))
                {
                    self.quit = true;
                } else {
                    self.last_ctrl_c = Some(Instant::now());
                    self.notice("Press Ctrl+C again to quit", NoticeKind::Info);
                }
            }
            KeyCode::Char('d') if ctrl && self.editor.is_empty() => self.quit = true,
            KeyCode::Char('o') if ctrl => {
                self.view.expanded = !self.view.expanded;
            }
            KeyCode::Char('p') if ctrl => self.send(json!({"type": "cycle_model"}), Pending::State),
            KeyCode::BackTab => self.send(json!({"type": "cycle_thinking_level"}), Pending::Quiet),
            KeyCode::Char('j') if ctrl => self.editor.insert_char('\n'),
            KeyCode::Char('w') if ctrl => self.editor.delete_word(),
            KeyCode::Char('u') if ctrl => {
                self.editor.home();
                let start = self.editor.cursor();
                let text = self.editor.text().to_string();
                let end = text[start..].find('\n').map_or(text.len(), |i| start + i);
                let mut updated = text.clone();
                updated.replace_range(start..end, "");
                self.editor.set_text(&updated);
            }
            KeyCode::Char('a') if ctrl => self.editor.home(),
            KeyCode::Char('e') if ctrl => self.editor.end(),
            KeyCode::Enter if shift => self.editor.insert_char('\n'),
            KeyCode::Enter if alt => self.submit(true),
            KeyCode::Enter => self.submit(false),
            KeyCode::Esc => {
                if self.streaming || self.compacting {
                    self.send(json!({"type": "abort"}), Pending::Quiet);
                    if self.compacting {
                        self.send(json!({"type": "abort_compaction"}), Pending::Quiet);
                    }
                } else {
                    self.dirty = false;
                }
            }
            KeyCode::Tab => self.complete(),
            KeyCode::Backspace => self.editor.backspace(),
            KeyCode::Delete => self.editor.delete(),
            KeyCode::Left => self.editor.left(),
            KeyCode::Right => self.editor.right(),
            KeyCode::Home => self.editor.home(),
            KeyCode::End => self.editor.end(),
            KeyCode::Up => self.editor.up(),
            KeyCode::Down => self.editor.down(),
            KeyCode::PageUp => self.scroll += 10,
            KeyCode::PageDown => self.scroll = self.scroll.saturating_sub(10),
            KeyCode::Char(ch) if !ctrl => self.editor.insert_char(ch),
            _ => self.dirty = false,
        }
    }

    fn on_dialog_key(&mut self, key: KeyEvent) {
        let Some(dialog) = &mut self.dialog else {
            return;
        };
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let answer: Option<Option<Value>> = match &mut dialog.body {
            DialogBody::Select { options, selected } => match key.code {
                KeyCode::Up => {
                    *selected = selected
                        .checked_sub(1)
                        .unwrap_or(options.len().saturating_sub(1));
                    None
                }
                KeyCode::Down | KeyCode::Tab => {
                    *selected = if *selected + 1 >= options.len() {
                        0
                    } else {
                        *selected + 1
                    };
                    None
                }
                KeyCode::Enter => Some(options.get(*selected).map(|o| json!(o))),
                KeyCode::Esc => Some(None),
                KeyCode::Char('c') if ctrl => Some(None),
                _ => None,
            },
            DialogBody::Confirm { .. } => match key.code {
                KeyCode::Char('y' | 'Y') | KeyCode::Enter => Some(Some(json!(true))),
                KeyCode::Char('n' | 'N') => Some(Some(json!(false))),
                KeyCode::Esc => Some(None),
                KeyCode::Char('c') if ctrl => Some(None),
                _ => None,
            },
            DialogBody::Input { editor, multiline } => match key.code {
                KeyCode::Enter
                    if *multiline && !key.modifiers.contains(KeyModifiers::ALT) && !ctrl =>
                {
                    editor.insert_char('\n');
                    None
                }
                KeyCode::Enter => Some(Some(json!(editor.text()))),
                KeyCode::Char('s') if ctrl => Some(Some(json!(editor.text()))),
                KeyCode::Esc => Some(None),
                KeyCode::Char('c') if ctrl => Some(None),
                KeyCode::Backspace => {
                    editor.backspace();
                    None
                }
                KeyCode::Left => {
                    editor.left();
                    None
                }
                KeyCode::Right => {
                    editor.right();
                    None
                }
                KeyCode::Up => {
                    editor.up();
                    None
                }
                KeyCode::Down => {
                    editor.down();
                    None
                }
                KeyCode::Char(ch) if !ctrl => {
                    editor.insert_char(ch);
                    None
                }
                _ => None,
            },
        };
        let Some(answer) = answer else { return };
        let Some(dialog) = self.dialog.take() else {
            return;
        };
        let selected_index = match &dialog.body {
            DialogBody::Select { selected, .. } => *selected,
            _ => 0,
        };
        match dialog.purpose {
            Purpose::Extension(id) => {
                let response = match (&dialog.body, answer) {
                    (_, None) => {
                        json!({"type": "extension_ui_response", "id": id, "cancelled": true})
                    }
                    (DialogBody::Confirm { .. }, Some(value)) => {
                        json!({"type": "extension_ui_response", "id": id, "confirmed": value})
                    }
                    (_, Some(value)) => {
                        json!({"type": "extension_ui_response", "id": id, "value": value})
                    }
                };
                // Fire-and-forget: the protocol sends no response to it.
                self.out.push(response);
            }
            Purpose::Model(models) if answer.is_some() => {
                if let Some((provider, id)) = models.get(selected_index) {
                    self.send(
                        json!({"type": "set_model", "provider": provider, "modelId": id}),
                        Pending::ModelSet,
                    );
                    self.refresh_footer();
                }
            }
            Purpose::Thinking(levels) if answer.is_some() => {
                if let Some(level) = levels.get(selected_index) {
                    self.send(
                        json!({"type": "set_thinking_level", "level": level}),
                        Pending::Quiet,
                    );
                    self.refresh_footer();
                }
            }
            Purpose::Fork(entries) if answer.is_some() => {
                if let Some(entry) = entries.get(selected_index) {
                    self.send(json!({"type": "fork", "entryId": entry}), Pending::Fork);
                }
            }
            Purpose::Tree(entries) if answer.is_some() => {
                if let Some(entry) = entries.get(selected_index) {
                    self.dialog = Some(Dialog {
                        title: "Summarise the branch you leave?".into(),
                        body: DialogBody::Select {
                            options: vec!["No summary".into(), "Summarise it".into()],
                            selected: 0,
                        },
                        purpose: Purpose::TreeSummary(entry.clone()),
                    });
                }
            }
            Purpose::TreeSummary(entry) if answer.is_some() => {
                if selected_index == 1 {
                    self.notice("Summarising the branch left…", NoticeKind::Info);
                }
                self.send(
                    json!({"type": "navigate_tree", "targetId": entry, "summarize": selected_index == 1}),
                    Pending::Navigate,
                );
            }
            Purpose::Resume(paths) if answer.is_some() => {
                if let Some(path) = paths.get(selected_index) {
                    self.transcript.clear();
                    self.send(
                        json!({"type": "switch_session", "sessionPath": path}),
                        Pending::Show("switch"),
                    );
                    self.send(json!({"type": "get_messages"}), Pending::History(None));
                }
            }
            _ => {}
        }
    }

    /// Sends what the editor holds: a built-in command, `!shell`, or a message (while a reply
    /// streams, a steering message, or with `follow_up` a follow-up).
    pub fn submit(&mut self, follow_up: bool) {
        let text = self.editor.text().trim_end().to_string();
        if text.trim().is_empty() {
            return;
        }
        self.scroll = 0;
        if let Some(command) = text.strip_prefix('/')
            && self.builtin(command)
        {
            self.editor.take();
            return;
        }
        if let Some(command) = text.strip_prefix('!') {
            self.editor.take();
            let (command, exclude) = match command.strip_prefix('!') {
                Some(rest) => (rest, true),
                None => (command, false),
            };
            self.send(
                json!({"type": "bash", "command": command.trim(), "excludeFromContext": exclude}),
                Pending::Show("bash"),
            );
            self.notice(format!("$ {}", command.trim()), NoticeKind::Info);
            return;
        }
        let message = self.editor.take();
        let message = self.expand_pastes(message);
        let command = match (self.streaming, follow_up) {
            (false, _) => json!({"type": "prompt", "message": message}),
            (true, false) => json!({"type": "steer", "message": message}),
            (true, true) => json!({"type": "follow_up", "message": message}),
        };
        self.send(command, Pending::Quiet);
    }

    /// Runs a built-in slash command; false when `command` is not one (then it goes to the
    /// session as a prompt: skills, templates and extension commands are expanded there).
    fn builtin(&mut self, command: &str) -> bool {
        let (name, arg) = command
            .split_once(char::is_whitespace)
            .map_or((command, ""), |(n, a)| (n, a.trim()));
        match name {
            "quit" | "exit" => self.quit = true,
            "new" => self.send(json!({"type": "new_session"}), Pending::Show("new")),
            "compact" => {
                let mut command = json!({"type": "compact"});
                if !arg.is_empty() {
                    command["customInstructions"] = json!(arg);
                }
                self.send(command, Pending::Quiet);
            }
            "name" if !arg.is_empty() => {
                self.send(
                    json!({"type": "set_session_name", "name": arg}),
                    Pending::Quiet,
                );
                self.footer.session_name = Some(arg.to_string());
            }
            "session" => self.send(json!({"type": "get_session_stats"}), Pending::Show("stats")),
            "export" => {
                let mut command = json!({"type": "export_html"});
                if !arg.is_empty() {
                    command["outputPath"] = json!(arg);
                }
                self.send(command, Pending::Show("export"));
            }
            "copy" => self.send(json!({"type": "get_last_assistant_text"}), Pending::Copy),
            "model" if arg.is_empty() => self.send(
                json!({"type": "get_available_models"}),
                Pending::ModelPicker,
            ),
            "model" => {
                let (provider, id) = arg.split_once('/').unwrap_or(("", arg));
                self.send(
                    json!({"type": "set_model", "provider": provider, "modelId": id}),
                    Pending::Quiet,
                );
                self.refresh_footer();
            }
            "thinking" if !arg.is_empty() => {
                self.send(
                    json!({"type": "set_thinking_level", "level": arg}),
                    Pending::Quiet,
                );
                self.refresh_footer();
            }
            "fork" => self.send(json!({"type": "get_fork_messages"}), Pending::ForkPicker),
            "resume" => self.open_resume_picker(),
            "tree" if self.streaming => self.notice(
                "Wait for the reply to end (or press Esc) before moving in the tree",
                NoticeKind::Warning,
            ),
            "tree" => self.send(json!({"type": "get_tree"}), Pending::TreePicker),
            "hotkeys" => {
                let mut text = String::from("Keys:\n");
                for (key, what) in HOTKEYS {
                    text.push_str(&format!("  {key:<22} {what}\n"));
                }
                if !self.shortcuts.is_empty() {
                    text.push_str("Extensions' keys:\n");
                    for (_, key, extension) in &self.shortcuts {
                        text.push_str(&format!("  {key:<22} {}\n", file_name(extension)));
                    }
                }
                text.push_str("Commands:\n");
                for (command, what) in COMMANDS {
                    text.push_str(&format!("  {command:<22} {what}\n"));
                }
                self.notice(text.trim_end().to_string(), NoticeKind::Info);
            }
            _ => return false,
        }
        true
    }

    /// `/resume`: this folder's sessions, newest first.
    pub fn open_resume_picker(&mut self) {
        let sessions = self
            .session_dir
            .as_deref()
            .map(crate::sessions::list)
            .unwrap_or_default();
        if sessions.is_empty() {
            self.notice("No earlier sessions in this folder", NoticeKind::Warning);
            return;
        }
        self.dialog = Some(Dialog {
            title: "Resume".into(),
            body: DialogBody::Select {
                options: sessions.iter().map(|s| s.label.clone()).collect(),
                selected: 0,
            },
            purpose: Purpose::Resume(sessions.into_iter().map(|s| s.path).collect()),
        });
    }

    /// Tab: completes a `/command` at the start of the editor (built-in ones, then the
    /// session's skills, templates and extension commands), or the `@path` before the cursor.
    fn complete(&mut self) {
        let text = self.editor.text().to_string();
        if let Some(prefix) = text.strip_prefix('/')
            && !prefix.contains(char::is_whitespace)
        {
            let names: Vec<String> = COMMANDS
                .iter()
                .map(|(c, _)| c.to_string())
                .chain(self.session_commands.iter().map(|(c, _)| c.clone()))
                .filter(|c| c[1..].starts_with(prefix))
                .collect();
            self.offer(&names, &text, " ");
            return;
        }
        let before = &text[..self.editor.cursor()];
        let word_start = before.rfind(char::is_whitespace).map_or(0, |i| i + 1);
        if let Some(partial) = before[word_start..].strip_prefix('@') {
            let names = complete_path(&self.cwd, partial);
            let prefix = format!("@{partial}");
            let candidates: Vec<String> = names.iter().map(|n| format!("@{n}")).collect();
            self.offer_at(&candidates, word_start, &prefix);
        }
    }

    /// Completes the whole editor text from `candidates`: one fills it in, several fill in
    /// their common start and are listed.
    fn offer(&mut self, candidates: &[String], typed: &str, suffix: &str) {
        match candidates {
            [] => self.dirty = false,
            [one] => self.editor.set_text(&format!("{one}{suffix}")),
            many => {
                let common = common_prefix(many);
                if common.len() > typed.len() {
                    self.editor.set_text(&common);
                } else {
                    self.notice(many.join("  "), NoticeKind::Info);
                }
            }
        }
    }

    /// Completes the word at `start` (which the user typed as `typed`) from `candidates`.
    fn offer_at(&mut self, candidates: &[String], start: usize, typed: &str) {
        let replacement = match candidates {
            [] => {
                self.dirty = false;
                return;
            }
            // A folder keeps its `/` to go on; a file ends the word.
            [one] if one.ends_with('/') => one.clone(),
            [one] => format!("{one} "),
            many => {
                let common = common_prefix(many);
                if common.len() <= typed.len() {
                    let shown: Vec<&str> = many.iter().map(String::as_str).take(40).collect();
                    self.notice(shown.join("  "), NoticeKind::Info);
                    return;
                }
                common
            }
        };
        let text = self.editor.text().to_string();
        let cursor = self.editor.cursor();
        let updated = format!("{}{replacement}{}", &text[..start], &text[cursor..]);
        self.editor.set_text(&updated);
        // The cursor goes after the completion, not to the end.
        for _ in 0..text[cursor..].chars().count() {
            self.editor.left();
        }
    }

    /// A session's history, shown after `/resume` or at start.
    pub fn show_messages(&mut self, messages: &[Value]) {
        for message in messages {
            match message["role"].as_str() {
                Some("user") => {
                    self.transcript.push(BlockKind::User {
                        text: shown_content(&message["content"]),
                    });
                }
                Some("assistant") => {
                    self.on_message_start(message);
                    self.on_message_end(message);
                    for call in message["content"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter(|b| b["type"] == "toolCall")
                    {
                        self.transcript.push(BlockKind::Tool {
                            id: str_of(&call["id"]),
                            name: str_of(&call["name"]),
                            args: call["arguments"].clone(),
                            output: String::new(),
                            diff: None,
                            status: ToolStatus::Done,
                        });
                    }
                }
                Some("toolResult") => {
                    if let Some(block) = self
                        .transcript
                        .tool_mut(message["toolCallId"].as_str().unwrap_or_default())
                        && let BlockKind::Tool {
                            output,
                            diff,
                            status,
                            ..
                        } = &mut block.kind
                    {
                        *output = shown_content(&message["content"]);
                        *diff = message["details"]["diff"].as_str().map(str::to_string);
                        if message["isError"] == true {
                            *status = ToolStatus::Failed;
                        }
                        block.touch();
                    }
                }
                Some("compactionSummary") => {
                    self.transcript.notice("── Compacted ──", NoticeKind::Info)
                }
                _ => {}
            }
        }
        self.dirty = true;
    }

    /// Asks for the session's slash commands and the extensions' keys (again after each run,
    /// whose handlers may register more).
    fn refresh_registrations(&mut self) {
        self.send(json!({"type": "get_commands"}), Pending::Commands);
        self.send(json!({"type": "get_shortcuts"}), Pending::Shortcuts);
    }

    /// Asks for the conversation so far (a continued or opened session), to show it.
    pub fn load_history(&mut self) {
        self.send(json!({"type": "get_messages"}), Pending::History(None));
    }
}

fn str_of(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|list| list.iter().map(str_of).collect())
        .unwrap_or_default()
}

/// What the screen shows of a content: its text, and a line naming each image (the terminal
/// cannot draw it).
pub fn shown_content(content: &Value) -> String {
    let mut text = content_text(content);
    for image in content
        .as_array()
        .map_or(&[][..], Vec::as_slice)
        .iter()
        .filter(|b| b["type"] == "image")
    {
        // Base64: four characters carry three bytes.
        let bytes = image["data"].as_str().map_or(0, |d| d.len() / 4 * 3);
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&format!(
            "[image {}, {} KB]",
            image["mimeType"].as_str().unwrap_or("of unknown type"),
            bytes.div_ceil(1024)
        ));
    }
    text
}

/// Pastes of more lines than this become one marker in the editor.
const PASTE_BLOCK_LINES: usize = 10;

/// The longest start all `items` share (on char boundaries).
fn common_prefix(items: &[String]) -> String {
    let Some(first) = items.first() else {
        return String::new();
    };
    let mut end = first.len();
    for item in &items[1..] {
        end = first
            .char_indices()
            .zip(item.chars())
            .take_while(|((_, a), b)| a == b)
            .map(|((i, a), _)| i + a.len_utf8())
            .last()
            .unwrap_or(0)
            .min(end);
    }
    first[..end].to_string()
}

/// The entries of the folder `partial` names (relative to `cwd`, `~/` or absolute) whose names
/// start with its last part; folders end with `/`. Hidden entries only when asked for.
pub fn complete_path(cwd: &std::path::Path, partial: &str) -> Vec<String> {
    let (dir_part, name_part) = match partial.rfind('/') {
        Some(i) => (&partial[..=i], &partial[i + 1..]),
        None => ("", partial),
    };
    let dir = if let Some(rest) = dir_part.strip_prefix("~/") {
        std::env::var_os("HOME")
            .map(std::path::PathBuf::from)
            .unwrap_or_default()
            .join(rest)
    } else if dir_part.starts_with('/') {
        std::path::PathBuf::from(dir_part)
    } else {
        cwd.join(dir_part)
    };
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !name.starts_with(name_part)
                || (name.starts_with('.') && !name_part.starts_with('.'))
            {
                return None;
            }
            let folder = entry.file_type().is_ok_and(|t| t.is_dir());
            Some(format!("{dir_part}{name}{}", if folder { "/" } else { "" }))
        })
        .collect();
    names.sort();
    names
}

/// The last part of a path, for a line that has no room for the whole.
fn file_name(path: &str) -> String {
    std::path::Path::new(path)
        .file_name()
        .map_or_else(|| path.to_string(), |n| n.to_string_lossy().into_owned())
}

fn short(n: u64) -> String {
    match n {
        0..1_000 => n.to_string(),
        1_000..1_000_000 => format!("{:.1}k", n as f64 / 1e3),
        _ => format!("{:.1}M", n as f64 / 1e6),
    }
}

fn stats_text(data: &Value) -> String {
    let tokens = &data["tokens"];
    let mut text = format!(
        "Session {}\n  messages: {} user, {} assistant, {} tool calls\n  tokens: {} in, {} out, {} cache read, {} cache write\n  cost: ${:.4}",
        str_of(&data["sessionId"]),
        data["userMessages"],
        data["assistantMessages"],
        data["toolCalls"],
        tokens["input"],
        tokens["output"],
        tokens["cacheRead"],
        tokens["cacheWrite"],
        data["cost"].as_f64().unwrap_or(0.0)
    );
    if let Some(file) = data["sessionFile"].as_str() {
        text.push_str(&format!("\n  file: {file}"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossterm::event::KeyEvent;

    fn app() -> App {
        let mut app = App::new(Theme::new(true), "~/p".into(), Vec::new());
        app.take_commands();
        app
    }

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    fn type_text(app: &mut App, text: &str) {
        for ch in text.chars() {
            app.on_key(key(KeyCode::Char(ch)));
        }
    }

    #[test]
    fn a_session_that_cannot_be_saved_is_said_and_so_is_its_recovery() {
        let mut app = app();
        app.on_record(&json!({"type": "session_save_status", "state": "failing",
            "file": "/s.jsonl", "error": "No space left on device", "unsaved": 2}));
        app.on_record(
            &json!({"type": "session_save_status", "state": "saved", "file": "/s.jsonl"}),
        );
        let notices: Vec<(String, NoticeKind)> = app
            .transcript
            .blocks
            .iter()
            .filter_map(|b| match &b.kind {
                BlockKind::Notice { text, kind } => Some((text.clone(), *kind)),
                _ => None,
            })
            .collect();
        assert_eq!(
            notices.len(),
            2,
            "{:?}",
            notices.iter().map(|n| &n.0).collect::<Vec<_>>()
        );
        assert!(
            notices[0]
                .0
                .contains("cannot be saved (No space left on device): 2 entries")
        );
        assert_eq!(notices[0].1, NoticeKind::Error);
        assert_eq!(notices[1].0, "The session is saved again");
    }

    #[test]
    fn enter_prompts_when_idle_and_steers_while_streaming() {
        let mut app = app();
        type_text(&mut app, "hello");
        app.on_key(key(KeyCode::Enter));
        let sent = app.take_commands();
        assert_eq!(sent[0]["type"], "prompt");
        assert_eq!(sent[0]["message"], "hello");
        app.on_record(&json!({"type": "agent_start"}));
        type_text(&mut app, "faster");
        app.on_key(key(KeyCode::Enter));
        assert_eq!(app.take_commands()[0]["type"], "steer");
        type_text(&mut app, "then this");
        app.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::ALT));
        assert_eq!(app.take_commands()[0]["type"], "follow_up");
        app.on_key(key(KeyCode::Esc));
        assert_eq!(app.take_commands()[0]["type"], "abort");
    }

    #[test]
    fn the_run_ends_at_agent_settled_not_agent_end() {
        let mut app = app();
        app.on_record(&json!({"type": "agent_start"}));
        app.on_record(&json!({"type": "agent_end", "messages": []}));
        type_text(&mut app, "more");
        app.on_key(key(KeyCode::Enter));
        let sent = app.take_commands();
        assert_eq!(
            sent.iter()
                .find(|c| c["message"] == "more")
                .map(|c| c["type"].clone()),
            Some(json!("steer"))
        );
        app.on_record(&json!({"type": "agent_settled", "aborted": false}));
        type_text(&mut app, "next");
        app.on_key(key(KeyCode::Enter));
        let sent = app.take_commands();
        assert_eq!(
            sent.iter()
                .find(|c| c["message"] == "next")
                .map(|c| c["type"].clone()),
            Some(json!("prompt"))
        );
    }

    #[test]
    fn deltas_build_the_answer() {
        let mut app = app();
        app.on_record(
            &json!({"type": "message_start", "message": {"role": "assistant", "content": []}}),
        );
        for delta in ["Hel", "lo"] {
            app.on_record(&json!({"type": "message_update", "assistantMessageEvent": {"type": "text_delta", "contentIndex": 0, "delta": delta}}));
        }
        let lines = app.transcript.lines(40, View::default(), &app.theme);
        assert_eq!(crate::wrap::plain(&lines[0]), "Hello");
    }

    #[test]
    fn an_extension_select_is_answered_with_the_chosen_option() {
        let mut app = app();
        app.on_record(&json!({"type": "extension_ui_request", "id": "u1", "method": "select", "title": "Pick", "options": ["a", "b"]}));
        app.on_key(key(KeyCode::Down));
        app.on_key(key(KeyCode::Enter));
        let sent = app.take_commands();
        assert_eq!(
            sent,
            [json!({"type": "extension_ui_response", "id": "u1", "value": "b"})]
        );
        assert!(app.dialog.is_none());
    }

    #[test]
    fn keys_are_asked_again_after_each_run_and_a_refused_one_warned_once() {
        let mut app = App::new(Theme::new(true), "~/p".into(), Vec::new());
        let answer = |app: &mut App| {
            let asked = app
                .take_commands()
                .into_iter()
                .find(|c| c["type"] == "get_shortcuts")
                .expect("get_shortcuts asked");
            app.on_record(&json!({
                "type": "response", "id": asked["id"], "command": "get_shortcuts", "success": true,
                "data": {"shortcuts": [
                    {"key": "ctrl+c", "extension": "/x/e.ts"},
                    {"key": "ctrl+alt+k", "extension": "/x/e.ts"},
                ]},
            }));
        };
        answer(&mut app);
        app.on_record(&json!({"type": "agent_settled", "aborted": false}));
        answer(&mut app);
        let warnings = app
            .transcript
            .blocks
            .iter()
            .filter(
                |b| matches!(&b.kind, BlockKind::Notice { text, .. } if text.contains("not bound")),
            )
            .count();
        assert_eq!(warnings, 1);
        let bound: Vec<&str> = app.shortcuts.iter().map(|s| s.1.as_str()).collect();
        assert_eq!(bound, ["ctrl+alt+k"]);
    }

    #[test]
    fn images_are_named_with_their_type_and_size() {
        let content = json!([
            {"type": "text", "text": "Read image file [image/png]"},
            {"type": "image", "mimeType": "image/png", "data": "A".repeat(4096)},
        ]);
        assert_eq!(
            shown_content(&content),
            "Read image file [image/png]\n[image image/png, 3 KB]"
        );
    }

    #[test]
    fn tab_completes_commands_and_paths() {
        let mut app = app();
        app.session_commands = vec![("/skill:review".into(), String::new())];
        type_text(&mut app, "/ski");
        app.on_key(key(KeyCode::Tab));
        assert_eq!(app.editor.text(), "/skill:review ");

        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir(dir.path().join("src")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("src/main.rs"), "").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("src/lib.rs"), "").unwrap_or_else(|e| panic!("{e}"));
        app.cwd = dir.path().to_path_buf();
        app.editor.clear();
        type_text(&mut app, "look at @sr");
        app.on_key(key(KeyCode::Tab));
        assert_eq!(app.editor.text(), "look at @src/");
        type_text(&mut app, "m");
        app.on_key(key(KeyCode::Tab));
        assert_eq!(app.editor.text(), "look at @src/main.rs ");
    }

    #[test]
    fn a_large_paste_is_one_marker_and_is_sent_whole() {
        let mut app = app();
        let pasted: String = (1..=20).map(|i| format!("line {i}\n")).collect();
        type_text(&mut app, "see ");
        app.on_paste(&pasted);
        assert_eq!(app.editor.text(), "see [paste #1 +20 lines]");
        app.on_key(key(KeyCode::Enter));
        let sent = app.take_commands();
        assert_eq!(
            sent[0]["message"],
            format!("see {pasted}"),
            "the paste is sent as pasted"
        );
    }

    #[test]
    fn ctrl_c_clears_then_quits_on_the_second_press() {
        let mut app = app();
        type_text(&mut app, "draft");
        let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        app.on_key(ctrl_c);
        assert!(app.editor.is_empty() && !app.quit);
        app.on_key(ctrl_c);
        assert!(!app.quit);
        app.on_key(ctrl_c);
        assert!(app.quit);
    }
}
