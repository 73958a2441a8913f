//! What the editor submits: a message (a prompt, or while a reply streams a steering message
//! or a follow-up), a `!` shell command, or a built-in slash command; and what helps write it:
//! Tab completion of commands and `@` paths, and large pastes held as markers.

use std::path::{Path, PathBuf};

use tau_protocol::ThinkingLevel;
use tau_protocol::rpc::{
    BashCommand, CompactCommand, CompleteMcpArgumentCommand, ExportHtmlCommand, NewSessionCommand,
    NoFields, PromptCommand, QueueMessageCommand, RpcCommand, SetModelCommand,
    SetSessionNameCommand, SetThinkingLevelCommand,
};

use super::responses::Pending;
use super::{App, file_name};
use crate::transcript::NoticeKind;

/// The built-in slash commands, with what they do (for the list `/` opens, and completion).
pub const COMMANDS: &[(&str, &str)] = &[
    (
        "/settings",
        "change the queue, interrupt, compaction, retry, thinking and permission settings",
    ),
    ("/model", "choose the model (Ctrl+L)"),
    (
        "/scoped-models",
        "the models Ctrl+P cycles through (enabledModels)",
    ),
    ("/thinking", "set the thinking level: /thinking [level]"),
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
    (
        "/permissions",
        "what tools may do without asking: /permissions [ask|acceptEdits|plan|allowAll]",
    ),
    (
        "/export",
        "write the session as HTML, or copy its file: /export [path.html|path.jsonl]",
    ),
    (
        "/import",
        "open a session file in place of this one: /import <file.jsonl>",
    ),
    (
        "/share",
        "share the session as a secret GitHub gist (needs gh)",
    ),
    ("/copy", "copy the last answer to the clipboard"),
    ("/clone", "copy this session as it stands into a new one"),
    (
        "/trust",
        "whether this folder is trusted, and how to trust it",
    ),
    ("/login", "store a provider's API key in auth.json"),
    ("/logout", "remove a provider's key from auth.json"),
    (
        "/changelog",
        "tau's version and where its changes are listed",
    ),
    (
        "/reload",
        "read extensions, skills and settings again (not available yet)",
    ),
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
    ("Ctrl+L", "choose the model"),
    ("Ctrl+T", "show or hide thinking"),
    ("Ctrl+G", "edit the message in $VISUAL or $EDITOR"),
    (
        "Ctrl+V",
        "attach an image from the clipboard (or paste an image's path)",
    ),
    ("Alt+Up", "queued messages back into the editor"),
    ("Ctrl+Z", "suspend tau (fg brings it back)"),
    ("Up/Down", "history (first/last line)"),
    (
        "Shift+PageUp, wheel",
        "the terminal scrolls the conversation (it is in its scrollback)",
    ),
    (
        "/",
        "the commands, narrowed as you type (Up/Down, Tab, Enter, Esc)",
    ),
    ("Tab", "complete a /command or @path"),
    (
        "!cmd",
        "run a shell command into the context (!!cmd: not into the context)",
    ),
];

/// Pastes of more lines than this become one marker in the editor.
const PASTE_BLOCK_LINES: usize = 10;

impl App {
    /// Sends what the editor holds: a built-in command, `!shell`, or a message (while a reply
    /// streams, a steering message, or with `follow_up` a follow-up).
    pub fn submit(&mut self, follow_up: bool) {
        let text = self.editor.text().trim_end().to_string();
        if text.trim().is_empty() {
            return;
        }
        if let Some(command) = text.strip_prefix('/')
            && self.builtin(command)
        {
            self.editor.take();
            return;
        }
        // Refused with the text kept in the editor, to be corrected.
        if let Some(refusal) = self.unknown_command(&text) {
            self.notice(refusal, NoticeKind::Warning);
            return;
        }
        if let Some(command) = text.strip_prefix('!') {
            self.editor.take();
            let (command, exclude) = match command.strip_prefix('!') {
                Some(rest) => (rest, true),
                None => (command, false),
            };
            let command = command.trim();
            self.send(
                RpcCommand::Bash(BashCommand {
                    command: command.to_string(),
                    exclude_from_context: Some(exclude),
                }),
                Pending::Bash,
            );
            self.notice(format!("$ {command}"), NoticeKind::Info);
            return;
        }
        let typed = self.editor.take();
        let message = self.expand_pastes(typed.clone());
        let images = self.take_images(&message);
        // Kept until the answer: a refused message goes back into the editor (issue 48).
        let pending = Pending::Message(typed);
        let command = match (self.streaming, follow_up) {
            (false, _) => RpcCommand::Prompt(PromptCommand {
                message,
                images,
                streaming_behavior: None,
                locale: None,
            }),
            (true, false) => RpcCommand::Steer(QueueMessageCommand { message, images }),
            (true, true) => RpcCommand::FollowUp(QueueMessageCommand { message, images }),
        };
        self.send(command, pending);
    }

    /// Runs a built-in slash command; false when `command` is not one (then it goes to the
    /// session as a prompt: skills, templates and extension commands are expanded there).
    pub(super) fn builtin(&mut self, command: &str) -> bool {
        let (name, arg) = command
            .split_once(char::is_whitespace)
            .map_or((command, ""), |(n, a)| (n, a.trim()));
        // An empty argument is no argument: the server then uses its default.
        let given = (!arg.is_empty()).then(|| arg.to_string());
        match name {
            "quit" | "exit" => self.quit = true,
            "new" => self.send(
                RpcCommand::NewSession(NewSessionCommand::default()),
                Pending::NewSession,
            ),
            "compact" => self.send(
                RpcCommand::Compact(CompactCommand {
                    custom_instructions: given,
                }),
                Pending::Quiet,
            ),
            "name" if !arg.is_empty() => {
                self.send(
                    RpcCommand::SetSessionName(SetSessionNameCommand {
                        name: arg.to_string(),
                    }),
                    Pending::Quiet,
                );
                self.footer.session_name = Some(arg.to_string());
            }
            "name" => self.notice(
                match &self.footer.session_name {
                    Some(name) => format!("The session is named {name}. /name <text> renames it"),
                    None => "Usage: /name <text> names the session".to_string(),
                },
                NoticeKind::Info,
            ),
            "session" => self.send(RpcCommand::GetSessionStats(NoFields {}), Pending::ShowStats),
            // pi's other export: the session file itself, copied.
            "export" if arg.ends_with(".jsonl") => self.send(
                RpcCommand::GetState(NoFields {}),
                Pending::Action(super::builtins::Then::ExportJsonl(arg.to_string())),
            ),
            "export" => self.send(
                RpcCommand::ExportHtml(ExportHtmlCommand { output_path: given }),
                Pending::Export,
            ),
            "copy" => self.send(RpcCommand::GetLastAssistantText(NoFields {}), Pending::Copy),
            "model" if arg.is_empty() => self.send(
                RpcCommand::GetAvailableModels(NoFields {}),
                Pending::ModelPicker,
            ),
            "model" => {
                let (provider, id) = arg.split_once('/').unwrap_or(("", arg));
                self.send(
                    RpcCommand::SetModel(SetModelCommand {
                        provider: provider.to_string(),
                        model_id: id.to_string(),
                    }),
                    Pending::Quiet,
                );
                self.refresh_footer();
            }
            // A level the protocol does not name is refused here, as the server would refuse
            // it, since the command cannot carry it.
            "thinking" if !arg.is_empty() => match arg.parse::<ThinkingLevel>() {
                Ok(level) => {
                    self.send(
                        RpcCommand::SetThinkingLevel(SetThinkingLevelCommand { level }),
                        Pending::Quiet,
                    );
                    self.refresh_footer();
                }
                Err(e) => self.notice(e.to_string(), NoticeKind::Error),
            },
            "thinking" => self.send(
                RpcCommand::GetAvailableThinkingLevels(NoFields {}),
                Pending::ThinkingPicker,
            ),
            "fork" => self.send(
                RpcCommand::GetForkMessages(NoFields {}),
                Pending::ForkPicker,
            ),
            "resume" => self.open_resume_picker(),
            "permissions" if arg.is_empty() => self.open_permission_modes(),
            "permissions" => match tau_protocol::PermissionMode::parse(arg) {
                Some(mode) => self.set_permission_mode(mode),
                None => self.notice(
                    format!("No permission mode \"{arg}\": ask, acceptEdits, plan or allowAll"),
                    NoticeKind::Error,
                ),
            },
            "tree" if self.streaming => self.notice(
                "Wait for the reply to end (or press Esc) before moving in the tree",
                NoticeKind::Warning,
            ),
            "tree" => self.send(RpcCommand::GetTree(NoFields {}), Pending::TreePicker),
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
                // The commands are not repeated here: `/` lists them with what they do.
                self.notice(text.trim_end().to_string(), NoticeKind::Info);
            }
            _ => return self.more_builtin(name, arg),
        }
        true
    }

    /// Puts pasted text into the editor; a paste of many lines as one marker, so the editor
    /// stays readable, and the text itself is sent in its place.
    pub(super) fn paste_into_editor(&mut self, text: String) {
        let lines = text.lines().count();
        if lines > PASTE_BLOCK_LINES {
            self.pastes.push(text);
            let marker = format!("[paste #{} +{lines} lines]", self.pastes.len());
            self.editor.insert(&marker);
        } else {
            self.editor.insert(&text);
        }
    }

    /// The editor's text with each paste marker replaced by what was pasted.
    pub(super) fn expand_pastes(&mut self, text: String) -> String {
        let mut text = text;
        for (i, paste) in self.pastes.iter().enumerate() {
            let lines = paste.lines().count();
            text = text.replace(&format!("[paste #{} +{lines} lines]", i + 1), paste);
        }
        self.pastes.clear();
        text
    }

    /// Tab: completes a `/command` at the start of the editor (built-in ones, then the
    /// session's skills, templates and extension commands), or the `@path` before the cursor.
    pub(super) fn complete(&mut self) {
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
        // An MCP prompt's arguments: the server suggests, and the answer comes later.
        if before.starts_with("/mcp:") && before.contains(char::is_whitespace) {
            self.ask_completion(before.to_string());
            return;
        }
        let word_start = before.rfind(char::is_whitespace).map_or(0, |i| i + 1);
        if let Some(partial) = before[word_start..].strip_prefix('@') {
            let prefix = format!("@{partial}");
            let mut candidates = self.mention_candidates(partial);
            // A template's placeholder is the server's to complete.
            if candidates.is_empty() && self.names_a_template(partial) {
                self.ask_completion(before.to_string());
                return;
            }
            if !partial.contains(':') || candidates.is_empty() {
                candidates.extend(
                    complete_path(&self.cwd, partial)
                        .iter()
                        .map(|n| format!("@{n}")),
                );
            }
            self.offer_at(&candidates, word_start, &prefix);
        }
    }

    /// `@server:uri` mentions that start with `partial` (what follows the `@`): the
    /// servers' names with a `:` while no server is named, then that server's resources
    /// (templates are for the model: they need their placeholders filled).
    fn mention_candidates(&self, partial: &str) -> Vec<String> {
        let mut servers: Vec<&str> = self
            .mcp_resources
            .iter()
            .map(|resource| resource.server.as_str())
            .collect();
        servers.dedup();
        match partial.split_once(':') {
            Some((server, _)) => self
                .mcp_resources
                .iter()
                .filter(|resource| resource.server == server && !resource.template)
                .map(|resource| format!("@{}:{}", resource.server, resource.uri))
                .filter(|mention| mention[1..].starts_with(partial))
                .collect(),
            None => servers
                .into_iter()
                .filter(|server| server.starts_with(partial))
                .map(|server| format!("@{server}:"))
                .collect(),
        }
    }

    /// Asks the server to complete the last word of `typed` (the editor up to the cursor); the
    /// answer is applied only if the editor still holds it.
    fn ask_completion(&mut self, typed: String) {
        self.send(
            RpcCommand::CompleteMcpArgument(CompleteMcpArgumentCommand {
                text: typed.clone(),
            }),
            Pending::Completion(typed),
        );
        self.dirty = false;
    }

    /// Whether `partial` (`<server>:<uri so far>`) starts a URI of one of the server's
    /// templates (the part before its first placeholder).
    fn names_a_template(&self, partial: &str) -> bool {
        let Some((server, typed)) = partial.split_once(':') else {
            return false;
        };
        self.mcp_resources.iter().any(|resource| {
            resource.template
                && resource.server == server
                && resource
                    .uri
                    .split('{')
                    .next()
                    .is_some_and(|prefix| typed.starts_with(prefix))
        })
    }

    /// The server's values for the argument being typed, if the editor still holds what
    /// was typed when Tab asked.
    pub(super) fn offer_argument(&mut self, typed: &str, values: &[String]) {
        if self.editor.text() != typed || self.editor.cursor() != typed.len() {
            self.dirty = false;
            return;
        }
        let word_start = typed.rfind(char::is_whitespace).map_or(0, |i| i + 1);
        let partial = typed[word_start..].to_string();
        let candidates: Vec<String> = values
            .iter()
            .filter(|value| value.starts_with(&partial))
            .cloned()
            .collect();
        self.offer_at(&candidates, word_start, &partial);
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
            // A folder keeps its `/` to go on, a server its `:`; a file ends the word.
            [one] if one.ends_with('/') || one.ends_with(':') => one.clone(),
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
}

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
pub fn complete_path(cwd: &Path, partial: &str) -> Vec<String> {
    let (dir_part, name_part) = match partial.rfind('/') {
        Some(i) => (&partial[..=i], &partial[i + 1..]),
        None => ("", partial),
    };
    let dir = if let Some(rest) = dir_part.strip_prefix("~/") {
        std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_default()
            .join(rest)
    } else if dir_part.starts_with('/') {
        PathBuf::from(dir_part)
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
