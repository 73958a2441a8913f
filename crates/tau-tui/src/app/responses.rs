//! Answers to the UI's own commands: each command is sent with what its answer is for (a
//! [`Pending`]), and the answer's `data` is read as the protocol's payload type of that
//! command, to fill the footer, open a picker or say what happened.

use serde::de::DeserializeOwned;
use serde_json::Value;
use tau_protocol::Model;
use tau_protocol::rpc::{
    BashResult, CancelledData, CommandsData, CycleModelData, ForkData, ForkMessagesData,
    LastAssistantTextData, MessagesData, ModelsData, NavigateTreeData, NoFields, PathData,
    Response, RpcCommand, RpcSessionState, SessionStats, ShortcutsData, ThinkingLevelsData,
    TreeData,
};

use super::{App, Dialog, DialogBody, Purpose, file_name};
use crate::text::one_line;
use crate::transcript::NoticeKind;

/// What a response to one of the UI's commands is for.
#[derive(Debug, Clone)]
pub(super) enum Pending {
    /// `get_state`: the footer's model, thinking level and session name.
    State,
    /// `get_session_stats`: the footer's cost and context.
    Stats,
    /// `cycle_model`: the footer's model and thinking level.
    CycledModel,
    ModelPicker,
    /// `set_model` from the picker: a reasoning model asks for its thinking level next.
    ModelSet,
    ThinkingPicker,
    Copy,
    Export,
    /// `/session`: the statistics, shown.
    ShowStats,
    Bash,
    NewSession,
    SwitchSession,
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
    /// `get_mcp_resources`: the servers' resources, for `@` completion.
    Resources,
    /// `complete_mcp_argument`: the editor's text when Tab asked; applied only if unchanged.
    Completion(String),
    /// The built-in commands of `builtins`.
    Action(super::builtins::Then),
    /// A prompt, steer or follow-up, with the text typed: refused, it is said why and the text
    /// goes back into the editor, never lost.
    Message(String),
    Quiet,
}

impl App {
    /// A message the server refused: the reason, what to do when it is the missing key, and
    /// the text back in the editor (after what is there now, if the user typed on).
    fn refused(&mut self, error: &str, typed: String) {
        let mut text = format!("Not sent: {error}");
        if error.contains("API key") || error.contains("No model") {
            text.push_str("\nType /login to store a key, or /model to pick another model.");
        }
        self.notice(text, NoticeKind::Error);
        let now = self.editor.text().to_string();
        if now.trim().is_empty() {
            self.editor.set_text(&typed);
        } else if !now.contains(&typed) {
            self.editor.set_text(&format!("{typed}\n{now}"));
        }
    }

    pub(super) fn on_response(&mut self, response: Response) {
        let Some(pending) = response
            .id
            .as_ref()
            .and_then(Value::as_str)
            .and_then(|id| self.pending.remove(id))
        else {
            return;
        };
        if !response.success {
            let error = response.error.unwrap_or_default();
            match pending {
                Pending::Quiet => {}
                Pending::Message(typed) => self.refused(&error, typed),
                _ => self.notice(error, NoticeKind::Error),
            }
            return;
        }
        let command = response.command;
        let data = response.data.unwrap_or(Value::Null);
        match pending {
            Pending::State => {
                let Some(state) = self.data::<RpcSessionState>(&command, data) else {
                    return;
                };
                self.footer.model = match &state.model {
                    Some(model) if model.id != "unknown" => {
                        format!("{}/{}", model.provider, model.id)
                    }
                    _ => "no model".to_string(),
                };
                self.footer.thinking = state.thinking_level.to_string();
                self.footer.session_name = state.session_name;
                self.footer.permission_mode = (state.permission_mode
                    != tau_protocol::PermissionMode::AllowAll)
                    .then_some(state.permission_mode);
            }
            Pending::Stats => {
                let Some(stats) = self.data::<SessionStats>(&command, data) else {
                    return;
                };
                self.footer.cost = stats.cost;
                self.footer.context = stats.context_usage.map(|usage| match usage.tokens {
                    Some(tokens) => format!(
                        "{}/{} ({:.0}%)",
                        short(tokens),
                        short(usage.context_window),
                        usage.percent.unwrap_or(0.0)
                    ),
                    None => format!("?/{}", short(usage.context_window)),
                });
            }
            // `null`: there was no other model to go to, and the footer stays right.
            Pending::CycledModel => {
                if let Some(Some(cycled)) = self.data::<Option<CycleModelData>>(&command, data) {
                    self.footer.model = format!("{}/{}", cycled.model.provider, cycled.model.id);
                    self.footer.thinking = cycled.thinking_level.to_string();
                }
            }
            Pending::ModelPicker => {
                let Some(data) = self.data::<ModelsData>(&command, data) else {
                    return;
                };
                let models: Vec<(String, String)> = data
                    .models
                    .into_iter()
                    .map(|m| (m.provider, m.id))
                    .collect();
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
                if self
                    .data::<Model>(&command, data)
                    .is_some_and(|model| model.reasoning)
                {
                    self.send(
                        RpcCommand::GetAvailableThinkingLevels(NoFields {}),
                        Pending::ThinkingPicker,
                    );
                }
            }
            Pending::ThinkingPicker => {
                let Some(data) = self.data::<ThinkingLevelsData>(&command, data) else {
                    return;
                };
                let levels = data.levels;
                if levels.len() > 1 {
                    let options: Vec<String> = levels.iter().map(|l| l.to_string()).collect();
                    let selected = options
                        .iter()
                        .position(|l| *l == self.footer.thinking)
                        .unwrap_or(0);
                    self.dialog = Some(Dialog {
                        title: "Thinking level".into(),
                        body: DialogBody::Select { options, selected },
                        purpose: Purpose::Thinking(levels),
                    });
                }
            }
            Pending::Copy => match self
                .data::<LastAssistantTextData>(&command, data)
                .map(|data| data.text)
            {
                Some(Some(text)) => {
                    self.clipboard = Some(text);
                    self.notice("Copied the last answer", NoticeKind::Info);
                }
                Some(None) => self.notice("No answer to copy yet", NoticeKind::Warning),
                None => {}
            },
            Pending::Export => {
                if let Some(data) = self.data::<PathData>(&command, data) {
                    self.notice(format!("Exported to {}", data.path), NoticeKind::Info);
                }
            }
            Pending::ShowStats => {
                if let Some(stats) = self.data::<SessionStats>(&command, data) {
                    self.notice(stats_text(&stats), NoticeKind::Info);
                }
            }
            Pending::Bash => {
                if let Some(result) = self.data::<BashResult>(&command, data) {
                    let code = result
                        .exit_code
                        .map(|c| format!(" (exit {c})"))
                        .unwrap_or_default();
                    self.notice(
                        format!("{}{code}", result.output.trim_end()),
                        NoticeKind::Info,
                    );
                }
            }
            Pending::NewSession => match self.data::<CancelledData>(&command, data) {
                Some(CancelledData { cancelled: true }) => {
                    self.notice("New session cancelled by an extension", NoticeKind::Info)
                }
                Some(CancelledData { cancelled: false }) => {
                    self.transcript.clear();
                    self.refresh_footer();
                    self.notice("New session", NoticeKind::Info);
                }
                None => {}
            },
            Pending::SwitchSession => {
                if let Some(CancelledData { cancelled: false }) =
                    self.data::<CancelledData>(&command, data)
                {
                    self.refresh_footer();
                    self.notice("Session opened", NoticeKind::Info);
                }
            }
            Pending::ForkPicker => {
                let Some(data) = self.data::<ForkMessagesData>(&command, data) else {
                    return;
                };
                if data.messages.is_empty() {
                    self.notice("No message to fork from yet", NoticeKind::Warning);
                    return;
                }
                let options = data
                    .messages
                    .iter()
                    .map(|m| one_line(&m.text, 100))
                    .collect();
                self.dialog = Some(Dialog {
                    title: "Fork from".into(),
                    body: DialogBody::Select {
                        options,
                        selected: 0,
                    },
                    purpose: Purpose::Fork(data.messages.into_iter().map(|m| m.entry_id).collect()),
                });
            }
            Pending::Fork => {
                let Some(fork) = self.data::<ForkData>(&command, data) else {
                    return;
                };
                if !fork.cancelled {
                    self.transcript.clear();
                    self.editor
                        .set_text(fork.text.as_deref().unwrap_or_default());
                    // The new session holds the conversation up to the message forked from.
                    self.send(
                        RpcCommand::GetMessages(NoFields {}),
                        Pending::History(Some("Forked into a new session".into())),
                    );
                    self.refresh_footer();
                }
            }
            Pending::TreePicker => {
                let Some(data) = self.data::<TreeData>(&command, data) else {
                    return;
                };
                let (rows, selected) = crate::tree::rows(&data.tree, data.leaf_id.as_deref());
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
                let Some(data) = self.data::<NavigateTreeData>(&command, data) else {
                    return;
                };
                if data.cancelled {
                    self.notice("Cancelled by an extension", NoticeKind::Warning);
                    return;
                }
                if data.aborted == Some(true) {
                    self.notice("Summary aborted; nothing moved", NoticeKind::Warning);
                    return;
                }
                if let Some(text) = &data.editor_text {
                    self.editor.set_text(text);
                }
                self.transcript.clear();
                let what = if data.summary_entry.as_ref().is_some_and(Value::is_object) {
                    "Moved in the session tree; the branch left is summarised"
                } else {
                    "Moved in the session tree"
                };
                self.send(
                    RpcCommand::GetMessages(NoFields {}),
                    Pending::History(Some(what.into())),
                );
                self.refresh_footer();
            }
            Pending::Shortcuts => {
                let Some(data) = self.data::<ShortcutsData>(&command, data) else {
                    return;
                };
                self.shortcuts.clear();
                for shortcut in data.shortcuts {
                    let (key, extension) = (shortcut.key, shortcut.extension);
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
                let Some(data) = self.data::<CommandsData>(&command, data) else {
                    return;
                };
                self.session_commands = data
                    .commands
                    .into_iter()
                    .map(|c| (format!("/{}", c.name), c.description.unwrap_or_default()))
                    .collect();
            }
            Pending::Resources => {
                let Some(data) = self.data::<tau_protocol::rpc::McpResourcesData>(&command, data)
                else {
                    return;
                };
                self.mcp_resources = data.resources;
            }
            Pending::Completion(typed) => {
                let Some(data) = self.data::<tau_protocol::rpc::McpCompletionData>(&command, data)
                else {
                    return;
                };
                self.offer_argument(&typed, &data.values);
            }
            Pending::History(then) => {
                let Some(data) = self.data::<MessagesData>(&command, data) else {
                    return;
                };
                self.show_messages(&data.messages);
                if let Some(text) = then {
                    self.notice(text, NoticeKind::Info);
                }
            }
            Pending::Action(then) => self.on_action(then, &command, data),
            Pending::Message(_) | Pending::Quiet => {}
        }
    }

    /// The `data` of a successful answer to `command` as its payload type; `None`, said as an
    /// error, when it is not of that shape (a bug on one side), so the user sees why nothing
    /// happened.
    pub(super) fn data<T: DeserializeOwned>(&mut self, command: &str, data: Value) -> Option<T> {
        match serde_json::from_value(data) {
            Ok(data) => Some(data),
            Err(e) => {
                self.notice(
                    format!("Unreadable answer to {command}: {e}"),
                    NoticeKind::Error,
                );
                None
            }
        }
    }
}

fn short(n: u64) -> String {
    match n {
        0..1_000 => n.to_string(),
        1_000..1_000_000 => format!("{:.1}k", n as f64 / 1e3),
        _ => format!("{:.1}M", n as f64 / 1e6),
    }
}

fn stats_text(stats: &SessionStats) -> String {
    let tokens = &stats.tokens;
    let mut text = format!(
        "Session {}\n  messages: {} user, {} assistant, {} tool calls\n  tokens: {} in, {} out, {} cache read, {} cache write\n  cost: ${:.4}",
        stats.session_id,
        stats.user_messages,
        stats.assistant_messages,
        stats.tool_calls,
        tokens.input,
        tokens.output,
        tokens.cache_read,
        tokens.cache_write,
        stats.cost
    );
    if let Some(file) = &stats.session_file {
        text.push_str(&format!("\n  file: {file}"));
    }
    text
}
