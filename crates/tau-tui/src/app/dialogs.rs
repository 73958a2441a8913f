//! Dialogs over the conversation: an extension's requests (`extension_ui_request`, answered
//! with an `extension_ui_response`) and the UI's own pickers (model, thinking level, fork,
//! tree, resume), whose choice becomes the command it stands for.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use tau_protocol::rpc::{
    ExtensionUiRequest, ExtensionUiResponse, ForkCommand, NavigateTreeCommand, NoFields,
    PermissionResponse, RpcCommand, SetModelCommand, SetPermissionModeCommand,
    SetThinkingLevelCommand, SwitchSessionCommand, UiMethod,
};
use tau_protocol::{PermissionMode, PermissionOutcome, ThinkingLevel};

use super::App;
use super::builtins::{Secret, Setting};
use super::responses::Pending;
use crate::editor::Editor;
use crate::transcript::NoticeKind;

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
    Thinking(Vec<ThinkingLevel>),
    /// `/tree`: the entries offered.
    Tree(Vec<String>),
    /// `/tree`, once an entry is chosen: whether to summarise the branch left.
    TreeSummary(String),
    /// A tool call waiting for the user's word: the request's id.
    Permission(String),
    /// `/permissions`: the modes offered.
    PermissionMode,
    /// `/settings`: the settings offered, with their values now.
    Settings(Vec<(Setting, String)>),
    /// `/settings`, a setting chosen: its values offered.
    SettingValue(Setting),
    /// `/login`: the providers offered; the row after them asks for a name.
    LoginProvider(Vec<String>),
    /// `/login`, another provider: its name being typed.
    LoginProviderName,
    /// `/login`: the key being typed for `provider`, kept here and shown as dots.
    LoginKey { provider: String, key: Secret },
    /// `/logout`: the providers `auth.json` names.
    Logout(Vec<String>),
    /// `/import`: the session file to open, once confirmed.
    Import(std::path::PathBuf),
}

/// The answers to a permission request, in the order the dialog offers them.
const PERMISSION_ANSWERS: [(PermissionOutcome, bool); 4] = [
    (PermissionOutcome::Allow, false),
    (PermissionOutcome::AllowAlways, false),
    (PermissionOutcome::AllowAlways, true),
    (PermissionOutcome::Reject, false),
];

/// How a dialog was closed.
pub(super) enum Answer {
    Cancelled,
    /// An option chosen or a text entered.
    Value(String),
    Confirmed(bool),
}

impl App {
    pub(super) fn on_ui_request(&mut self, request: ExtensionUiRequest) {
        let id = request.id;
        match request.method {
            UiMethod::Notify {
                message,
                notify_type,
            } => {
                let kind = match notify_type.as_deref() {
                    Some("error") => NoticeKind::Error,
                    Some("warning") => NoticeKind::Warning,
                    _ => NoticeKind::Info,
                };
                self.notice(message, kind);
            }
            UiMethod::SetStatus {
                status_key,
                status_text,
            } => match status_text {
                Some(text) => {
                    self.statuses.insert(status_key, text);
                }
                None => {
                    self.statuses.remove(&status_key);
                }
            },
            UiMethod::SetWidget {
                widget_key,
                widget_lines,
                ..
            } => match widget_lines {
                Some(lines) => {
                    self.widgets.insert(widget_key, lines);
                }
                None => {
                    self.widgets.remove(&widget_key);
                }
            },
            UiMethod::SetTitle { title } => self.title = Some(title),
            UiMethod::SetEditorText { text } => self.editor.set_text(&text),
            UiMethod::Select { title, options, .. } => {
                self.dialog = Some(Dialog {
                    title,
                    body: DialogBody::Select {
                        options,
                        selected: 0,
                    },
                    purpose: Purpose::Extension(id),
                });
            }
            UiMethod::Confirm { title, message, .. } => {
                self.dialog = Some(Dialog {
                    title,
                    body: DialogBody::Confirm { message },
                    purpose: Purpose::Extension(id),
                });
            }
            UiMethod::Input { title, .. } => self.open_input(title, id, "", false),
            UiMethod::Editor { title, prefill, .. } => {
                self.open_input(title, id, prefill.as_deref().unwrap_or_default(), true)
            }
            _ => {}
        }
    }

    fn open_input(&mut self, title: String, id: String, prefill: &str, multiline: bool) {
        let mut editor = Editor::default();
        editor.set_text(prefill);
        self.dialog = Some(Dialog {
            title,
            body: DialogBody::Input { editor, multiline },
            purpose: Purpose::Extension(id),
        });
    }

    pub(super) fn on_dialog_key(&mut self, key: KeyEvent) {
        let Some(dialog) = &mut self.dialog else {
            return;
        };
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        if let Dialog {
            body: DialogBody::Input { editor, .. },
            purpose: Purpose::LoginKey { key: secret, .. },
            ..
        } = dialog
        {
            // The key goes to the secret, a dot per character to the screen; the cursor stays
            // at the end, as nothing shown could be edited in place.
            match key.code {
                KeyCode::Char(ch) if !ctrl => {
                    secret.push(ch.encode_utf8(&mut [0; 4]));
                    editor.insert_char('•');
                    return;
                }
                KeyCode::Backspace => {
                    secret.pop();
                    editor.backspace();
                    return;
                }
                KeyCode::Enter => {
                    if let Some(Dialog {
                        purpose: Purpose::LoginKey { provider, key },
                        ..
                    }) = self.dialog.take()
                    {
                        self.save_key(&provider, key);
                    }
                    self.next_permission();
                    return;
                }
                KeyCode::Esc => {}
                KeyCode::Char('c') if ctrl => {}
                _ => return,
            }
        }
        let answer: Option<Answer> = match &mut dialog.body {
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
                KeyCode::Enter => Some(
                    options
                        .get(*selected)
                        .map_or(Answer::Cancelled, |o| Answer::Value(o.clone())),
                ),
                KeyCode::Esc => Some(Answer::Cancelled),
                KeyCode::Char('c') if ctrl => Some(Answer::Cancelled),
                _ => None,
            },
            DialogBody::Confirm { .. } => match key.code {
                KeyCode::Char('y' | 'Y') | KeyCode::Enter => Some(Answer::Confirmed(true)),
                KeyCode::Char('n' | 'N') => Some(Answer::Confirmed(false)),
                KeyCode::Esc => Some(Answer::Cancelled),
                KeyCode::Char('c') if ctrl => Some(Answer::Cancelled),
                _ => None,
            },
            DialogBody::Input { editor, multiline } => match key.code {
                KeyCode::Enter
                    if *multiline && !key.modifiers.contains(KeyModifiers::ALT) && !ctrl =>
                {
                    editor.insert_char('\n');
                    None
                }
                KeyCode::Enter => Some(Answer::Value(editor.text().to_string())),
                KeyCode::Char('s') if ctrl => Some(Answer::Value(editor.text().to_string())),
                KeyCode::Esc => Some(Answer::Cancelled),
                KeyCode::Char('c') if ctrl => Some(Answer::Cancelled),
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
        let chosen = !matches!(answer, Answer::Cancelled);
        match dialog.purpose {
            Purpose::Extension(id) => self.answer_extension(id, answer),
            // Closed without a choice: nothing was allowed.
            Purpose::Permission(id) => {
                let (outcome, remember) = if chosen {
                    PERMISSION_ANSWERS
                        .get(selected_index)
                        .copied()
                        .unwrap_or((PermissionOutcome::Reject, false))
                } else {
                    (PermissionOutcome::Reject, false)
                };
                self.answer_permission(id, outcome, remember);
            }
            Purpose::PermissionMode if chosen => {
                if let Some(&mode) = PermissionMode::ALL.get(selected_index) {
                    self.set_permission_mode(mode);
                }
            }
            Purpose::Model(models) if chosen => {
                if let Some((provider, id)) = models.get(selected_index) {
                    self.send(
                        RpcCommand::SetModel(SetModelCommand {
                            provider: provider.clone(),
                            model_id: id.clone(),
                        }),
                        Pending::ModelSet,
                    );
                    self.refresh_footer();
                }
            }
            Purpose::Thinking(levels) if chosen => {
                if let Some(&level) = levels.get(selected_index) {
                    self.send(
                        RpcCommand::SetThinkingLevel(SetThinkingLevelCommand { level }),
                        Pending::Quiet,
                    );
                    self.refresh_footer();
                }
            }
            Purpose::Fork(entries) if chosen => {
                if let Some(entry) = entries.get(selected_index) {
                    self.send(
                        RpcCommand::Fork(ForkCommand {
                            entry_id: entry.clone(),
                        }),
                        Pending::Fork,
                    );
                }
            }
            Purpose::Tree(entries) if chosen => {
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
            Purpose::TreeSummary(entry) if chosen => {
                let summarize = selected_index == 1;
                if summarize {
                    self.notice("Summarising the branch left…", NoticeKind::Info);
                }
                self.send(
                    RpcCommand::NavigateTree(NavigateTreeCommand {
                        target_id: entry,
                        summarize,
                        custom_instructions: None,
                        replace_instructions: false,
                        label: None,
                    }),
                    Pending::Navigate,
                );
            }
            Purpose::Resume(paths) if chosen => {
                if let Some(path) = paths.get(selected_index) {
                    self.transcript.clear();
                    self.send(
                        RpcCommand::SwitchSession(SwitchSessionCommand {
                            session_path: path.clone(),
                        }),
                        Pending::SwitchSession,
                    );
                    self.send(RpcCommand::GetMessages(NoFields {}), Pending::History(None));
                }
            }
            other => self.on_builtin_dialog(other, answer, selected_index),
        }
        self.next_permission();
    }

    /// Answers the extension's request `id`. Fire-and-forget: the protocol sends no response
    /// to it, so it gets no id of the UI's and nothing waits for it.
    fn answer_extension(&mut self, id: String, answer: Answer) {
        let mut response = ExtensionUiResponse {
            id,
            value: None,
            confirmed: None,
            cancelled: None,
            timed_out: None,
        };
        match answer {
            Answer::Cancelled => response.cancelled = Some(true),
            Answer::Value(value) => response.value = Some(value),
            Answer::Confirmed(confirmed) => response.confirmed = Some(confirmed),
        }
        match serde_json::to_value(&response) {
            Ok(frame) => self.out.push(frame),
            Err(e) => self.notice(
                format!("The answer to the extension could not be written: {e}"),
                NoticeKind::Error,
            ),
        }
    }

    /// A tool call asks for the user's word: at once, or when the dialog open now closes
    /// (an extension's question or a picker is not taken away from the user).
    pub(super) fn open_permission(&mut self, id: String, title: String, rule: String) {
        if self.dialog.is_some() {
            self.waiting_permissions.push_back((id, title, rule));
            return;
        }
        self.dialog = Some(Dialog {
            title: format!("Allow? {title}"),
            body: DialogBody::Select {
                options: vec![
                    "Allow".into(),
                    format!("Always allow {rule} in this session"),
                    format!("Always allow {rule} (saved in settings)"),
                    "Reject".into(),
                ],
                selected: 0,
            },
            purpose: Purpose::Permission(id),
        });
    }

    /// The request `id` no longer waits (the run was aborted): its dialog goes.
    pub(super) fn close_permission(&mut self, id: &str) {
        self.waiting_permissions
            .retain(|(waiting, ..)| waiting != id);
        if matches!(&self.dialog, Some(Dialog { purpose: Purpose::Permission(open), .. }) if open == id)
        {
            self.dialog = None;
            self.notice("The permission request was withdrawn", NoticeKind::Info);
            self.next_permission();
        }
    }

    /// Opens the next permission request that waited for a dialog to close.
    fn next_permission(&mut self) {
        if self.dialog.is_none()
            && let Some((id, title, rule)) = self.waiting_permissions.pop_front()
        {
            self.open_permission(id, title, rule);
        }
    }

    /// Fire-and-forget, as the dialog answers are: the protocol sends no response to it.
    fn answer_permission(&mut self, id: String, outcome: PermissionOutcome, remember: bool) {
        let response = PermissionResponse {
            id,
            outcome,
            remember,
        };
        match serde_json::to_value(&response) {
            Ok(frame) => self.out.push(frame),
            Err(e) => self.notice(
                format!("The answer could not be written: {e}"),
                NoticeKind::Error,
            ),
        }
    }

    /// `/permissions` without a mode: the modes to choose from.
    pub(super) fn open_permission_modes(&mut self) {
        let current = self
            .footer
            .permission_mode
            .unwrap_or(PermissionMode::AllowAll);
        self.dialog = Some(Dialog {
            title: "Permission mode".into(),
            body: DialogBody::Select {
                options: PermissionMode::ALL
                    .iter()
                    .map(|mode| {
                        let what = match mode {
                            PermissionMode::Ask => "ask before edits, commands and other tools",
                            PermissionMode::AcceptEdits => "edit without asking, ask for the rest",
                            PermissionMode::Plan => "read-only",
                            PermissionMode::AllowAll => "ask nothing",
                        };
                        format!("{} ({what})", mode.as_str())
                    })
                    .collect(),
                selected: PermissionMode::ALL
                    .iter()
                    .position(|m| *m == current)
                    .unwrap_or(0),
            },
            purpose: Purpose::PermissionMode,
        });
    }

    pub(super) fn set_permission_mode(&mut self, mode: PermissionMode) {
        self.send(
            RpcCommand::SetPermissionMode(SetPermissionModeCommand { mode }),
            Pending::Quiet,
        );
        self.refresh_footer();
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
}
