//! The built-in commands beyond the conversation's own: `/settings` (the settings tau changes
//! while it runs, through their RPC commands), `/login` and `/logout` (API keys in the agent
//! directory's `auth.json`, in pi's format), `/trust`, `/scoped-models`, `/import`, `/clone`,
//! `/share`, `/changelog` and `/reload`, and Alt+Up taking the queued messages back; with what
//! their answers and dialogs lead to.

use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};
use tau_protocol::rpc::{
    CancelledData, ExportHtmlCommand, ModelsData, NoFields, PathData, QueueData, RpcCommand,
    RpcSessionState, SetAutoCompactionCommand, SetAutoRetryCommand, SetInterruptModeCommand,
    SetQueueModeCommand, SwitchSessionCommand,
};
use tau_protocol::{InterruptMode, QueueMode};

use super::dialogs::Answer;
use super::input::Request;
use super::responses::Pending;
use super::{App, Dialog, DialogBody, Purpose};
use crate::transcript::NoticeKind;

/// What the answer to one of these commands is for.
#[derive(Debug, Clone)]
pub(super) enum Then {
    /// `get_state` for `/settings`: the settings with their values, to choose from.
    Settings,
    /// A setting changed: said once the server has taken it.
    Changed(String),
    /// `get_available_models` for `/login`: the providers to choose from.
    LoginProviders,
    Clone,
    /// `export_html` for `/share`: the file to put in a gist.
    Share,
    /// `clear_queue` (Alt+Up): what was queued, back into the editor.
    Dequeue,
    /// `get_state` for `/export <path.jsonl>`: the session file to copy there.
    ExportJsonl(String),
}

/// A setting `/settings` offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    Steering,
    FollowUp,
    Interrupt,
    AutoCompaction,
    AutoRetry,
    Thinking,
    Permissions,
}

impl Setting {
    fn label(self) -> &'static str {
        match self {
            Setting::Steering => "Steering mode",
            Setting::FollowUp => "Follow-up mode",
            Setting::Interrupt => "Interrupt mode",
            Setting::AutoCompaction => "Auto-compaction",
            Setting::AutoRetry => "Auto-retry",
            Setting::Thinking => "Thinking level",
            Setting::Permissions => "Permission mode",
        }
    }

    /// The values a two-way or three-way setting takes (the others have pickers of their own).
    fn values(self) -> &'static [&'static str] {
        match self {
            Setting::Steering | Setting::FollowUp => &["one-at-a-time", "all"],
            Setting::Interrupt => &["wait", "immediate"],
            Setting::AutoCompaction | Setting::AutoRetry => &["on", "off"],
            Setting::Thinking | Setting::Permissions => &[],
        }
    }
}

/// A key typed into `/login`'s dialog: kept out of every `Debug` and off the screen.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret(String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<hidden>)")
    }
}

impl Secret {
    pub(super) fn push(&mut self, text: &str) {
        self.0.push_str(text);
    }

    pub(super) fn pop(&mut self) {
        self.0.pop();
    }
}

/// The row of `/login` that asks for a provider's name.
const ANOTHER_PROVIDER: &str = "Another provider (type its name)…";

fn queue_mode(value: &str) -> QueueMode {
    if value == "all" {
        QueueMode::All
    } else {
        QueueMode::OneAtATime
    }
}

fn queue_mode_name(mode: QueueMode) -> &'static str {
    match mode {
        QueueMode::All => "all",
        QueueMode::OneAtATime => "one-at-a-time",
    }
}

fn on_off(enabled: bool) -> &'static str {
    if enabled { "on" } else { "off" }
}

impl App {
    /// The commands of this module; false when `name` is none of them.
    pub(super) fn more_builtin(&mut self, name: &str, arg: &str) -> bool {
        match name {
            "settings" => self.send(
                RpcCommand::GetState(NoFields {}),
                Pending::Action(Then::Settings),
            ),
            "login" => self.send(
                RpcCommand::GetAvailableModels(NoFields {}),
                Pending::Action(Then::LoginProviders),
            ),
            "logout" => self.open_logout(),
            "trust" => self.show_trust(),
            "scoped-models" => self.show_scoped_models(),
            "import" => self.import(arg),
            "clone" => self.send(RpcCommand::Clone(NoFields {}), Pending::Action(Then::Clone)),
            "share" => self.share(),
            "changelog" => self.notice(
                format!(
                    "tau {}. No changelog is bundled with tau: its changes are recorded in its \
                     repository's history (git log), its design decisions in docs/decisions.md.",
                    env!("CARGO_PKG_VERSION")
                ),
                NoticeKind::Info,
            ),
            "reload" => self.notice(
                "/reload is not available yet: tau has no command that reads extensions, skills, \
                 prompt templates, settings and keys again while it runs. Quit and start tau \
                 again (tau --continue reopens this session) to take changes.",
                NoticeKind::Warning,
            ),
            _ => return false,
        }
        true
    }

    /// The answers to this module's commands.
    pub(super) fn on_action(&mut self, then: Then, command: &str, data: Value) {
        match then {
            Then::Settings => {
                if let Some(state) = self.data::<RpcSessionState>(command, data) {
                    self.open_settings(&state);
                }
            }
            Then::Changed(what) => self.notice(what, NoticeKind::Info),
            Then::LoginProviders => {
                if let Some(models) = self.data::<ModelsData>(command, data) {
                    self.open_login(&models);
                }
            }
            Then::Clone => match self.data::<CancelledData>(command, data) {
                Some(CancelledData { cancelled: true }) => {
                    self.notice("Clone cancelled by an extension", NoticeKind::Info)
                }
                Some(CancelledData { cancelled: false }) => {
                    self.transcript.clear();
                    self.send(
                        RpcCommand::GetMessages(NoFields {}),
                        Pending::History(Some("Cloned into a new session".into())),
                    );
                    self.refresh_footer();
                }
                None => {}
            },
            Then::Share => {
                if let Some(exported) = self.data::<PathData>(command, data) {
                    self.request = Some(Request::Share(PathBuf::from(exported.path)));
                }
            }
            Then::ExportJsonl(typed) => {
                if let Some(state) = self.data::<RpcSessionState>(command, data) {
                    self.export_jsonl(state.session_file.as_deref(), &typed);
                }
            }
            Then::Dequeue => {
                let Some(queue) = self.data::<QueueData>(command, data) else {
                    return;
                };
                self.queued_steering.clear();
                self.queued_follow_up.clear();
                let queued: Vec<String> =
                    queue.steering.into_iter().chain(queue.follow_up).collect();
                if queued.is_empty() {
                    self.notice("No queued messages to take back", NoticeKind::Info);
                    return;
                }
                let now = self.editor.text().to_string();
                let mut parts = queued.clone();
                if !now.trim().is_empty() {
                    parts.push(now);
                }
                self.editor.set_text(&parts.join("\n\n"));
                let count = queued.len();
                self.notice(
                    format!(
                        "{count} queued message{} back in the editor",
                        if count == 1 { " is" } else { "s are" }
                    ),
                    NoticeKind::Info,
                );
            }
        }
    }

    /// Alt+Up: the queued messages come back into the editor (`clear_queue` answers with
    /// what it held), to be edited and sent again.
    pub(super) fn dequeue(&mut self) {
        self.send(
            RpcCommand::ClearQueue(NoFields {}),
            Pending::Action(Then::Dequeue),
        );
    }

    fn open_settings(&mut self, state: &RpcSessionState) {
        let rows: Vec<(Setting, String)> = vec![
            (
                Setting::Steering,
                queue_mode_name(state.steering_mode).into(),
            ),
            (
                Setting::FollowUp,
                queue_mode_name(state.follow_up_mode).into(),
            ),
            (
                Setting::Interrupt,
                match state.interrupt_mode {
                    InterruptMode::Wait => "wait",
                    InterruptMode::Immediate => "immediate",
                }
                .into(),
            ),
            (
                Setting::AutoCompaction,
                on_off(state.auto_compaction_enabled).into(),
            ),
            (Setting::AutoRetry, on_off(state.auto_retry_enabled).into()),
            (Setting::Thinking, state.thinking_level.to_string()),
            (Setting::Permissions, state.permission_mode.as_str().into()),
        ];
        self.dialog = Some(Dialog {
            title: "Settings (saved in settings.json where tau keeps them)".into(),
            body: DialogBody::Select {
                options: rows
                    .iter()
                    .map(|(setting, value)| format!("{}: {value}", setting.label()))
                    .collect(),
                selected: 0,
            },
            purpose: Purpose::Settings(rows),
        });
    }

    /// A setting chosen in `/settings`: its values, or the picker it has of its own.
    fn choose_setting(&mut self, setting: Setting, current: &str) {
        match setting {
            Setting::Thinking => self.send(
                RpcCommand::GetAvailableThinkingLevels(NoFields {}),
                Pending::ThinkingPicker,
            ),
            Setting::Permissions => self.open_permission_modes(),
            _ => {
                let values = setting.values();
                self.dialog = Some(Dialog {
                    title: setting.label().into(),
                    body: DialogBody::Select {
                        options: values.iter().map(|v| v.to_string()).collect(),
                        selected: values.iter().position(|v| *v == current).unwrap_or(0),
                    },
                    purpose: Purpose::SettingValue(setting),
                });
            }
        }
    }

    fn set_setting(&mut self, setting: Setting, value: &str) {
        let command = match setting {
            Setting::Steering => RpcCommand::SetSteeringMode(SetQueueModeCommand {
                mode: queue_mode(value),
            }),
            Setting::FollowUp => RpcCommand::SetFollowUpMode(SetQueueModeCommand {
                mode: queue_mode(value),
            }),
            Setting::Interrupt => RpcCommand::SetInterruptMode(SetInterruptModeCommand {
                mode: if value == "immediate" {
                    InterruptMode::Immediate
                } else {
                    InterruptMode::Wait
                },
            }),
            Setting::AutoCompaction => RpcCommand::SetAutoCompaction(SetAutoCompactionCommand {
                enabled: value == "on",
            }),
            Setting::AutoRetry => RpcCommand::SetAutoRetry(SetAutoRetryCommand {
                enabled: value == "on",
            }),
            Setting::Thinking | Setting::Permissions => return,
        };
        self.send(
            command,
            Pending::Action(Then::Changed(format!("{}: {value}", setting.label()))),
        );
    }

    /// `/login`: the providers to store a key for: those that have one already, then every
    /// provider of tau's catalog that takes an API key, then one typed by name (a `models.json`
    /// provider without a key yet).
    fn open_login(&mut self, models: &ModelsData) {
        let mut providers: Vec<String> = Vec::new();
        let catalog = tau_ai::registry::DEFAULT_MODEL_PER_PROVIDER
            .iter()
            .map(|(provider, _)| *provider)
            .filter(|provider| !tau_ai::registry::env_vars_for(provider).is_empty());
        for provider in models
            .models
            .iter()
            .map(|m| m.provider.as_str())
            .chain(catalog)
        {
            if !providers.iter().any(|p| p == provider) {
                providers.push(provider.to_string());
            }
        }
        let mut options: Vec<String> = providers
            .iter()
            .map(
                |provider| match tau_ai::registry::env_vars_for(provider).last() {
                    Some(variable) => format!("{provider} (or ${variable})"),
                    None => provider.clone(),
                },
            )
            .collect();
        options.push(ANOTHER_PROVIDER.into());
        self.dialog = Some(Dialog {
            title: "Store an API key for".into(),
            body: DialogBody::Select {
                options,
                selected: 0,
            },
            purpose: Purpose::LoginProvider(providers),
        });
    }

    fn ask_key(&mut self, provider: String) {
        self.dialog = Some(Dialog {
            title: format!("API key for {provider} (not shown; Enter saves, Esc cancels)"),
            body: DialogBody::Input {
                editor: crate::editor::Editor::default(),
                multiline: false,
            },
            purpose: Purpose::LoginKey {
                provider,
                key: Secret::default(),
            },
        });
    }

    /// Stores `key` for `provider` in `auth.json`.
    pub(super) fn save_key(&mut self, provider: &str, key: Secret) {
        let key = key.0.trim();
        if key.is_empty() {
            self.notice("No key typed: nothing was saved", NoticeKind::Warning);
            return;
        }
        let Some(path) = self.agent_file("auth.json") else {
            return;
        };
        let saved = read_json_object(&path).and_then(|mut entries| {
            entries.insert(provider.into(), json!({"type": "api_key", "key": key}));
            write_private(&path, &entries)
        });
        match saved {
            Ok(()) => self.notice(
                format!(
                    "Saved the API key for {provider} in {}. It counts from the next prompt; \
                     /model lists the models it opens.",
                    path.display()
                ),
                NoticeKind::Info,
            ),
            Err(e) => self.notice(e, NoticeKind::Error),
        }
    }

    /// `/logout`: the providers `auth.json` holds a key or login for.
    fn open_logout(&mut self) {
        let Some(path) = self.agent_file("auth.json") else {
            return;
        };
        let entries = match read_json_object(&path) {
            Ok(entries) => entries,
            Err(e) => {
                self.notice(e, NoticeKind::Error);
                return;
            }
        };
        let providers: Vec<String> = entries.keys().cloned().collect();
        if providers.is_empty() {
            self.notice(
                format!(
                    "{} holds no keys. Keys in the environment (such as ANTHROPIC_API_KEY) are \
                     not tau's to remove.",
                    path.display()
                ),
                NoticeKind::Info,
            );
            return;
        }
        self.dialog = Some(Dialog {
            title: "Remove the key of".into(),
            body: DialogBody::Select {
                options: providers.clone(),
                selected: 0,
            },
            purpose: Purpose::Logout(providers),
        });
    }

    fn remove_key(&mut self, provider: &str) {
        let Some(path) = self.agent_file("auth.json") else {
            return;
        };
        let removed = read_json_object(&path).and_then(|mut entries| {
            entries.shift_remove(provider);
            write_private(&path, &entries)
        });
        match removed {
            Ok(()) => {
                let variables = tau_ai::registry::env_vars_for(provider);
                let mut said = format!(
                    "Removed {provider} from {}; tau stops using it at its next start.",
                    path.display()
                );
                if !variables.is_empty() {
                    said.push_str(&format!(
                        " A key in ${} still counts.",
                        variables.join(" or $")
                    ));
                }
                self.notice(said, NoticeKind::Info);
            }
            Err(e) => self.notice(e, NoticeKind::Error),
        }
    }

    /// `<agent dir>/name`; `None`, said, when the agent directory is unknown.
    fn agent_file(&mut self, name: &str) -> Option<PathBuf> {
        match &self.agent_dir {
            Some(dir) => Some(dir.join(name)),
            None => {
                self.notice(
                    "The agent directory is unknown: set TAU_AGENT_DIR or HOME",
                    NoticeKind::Error,
                );
                None
            }
        }
    }

    /// `/trust`: the decision `trust.json` holds for this folder, and the ways to decide.
    fn show_trust(&mut self) {
        let Some(path) = self.agent_file("trust.json") else {
            return;
        };
        let cwd = std::fs::canonicalize(&self.cwd).unwrap_or_else(|_| self.cwd.clone());
        let decision = match read_json_object(&path) {
            Ok(entries) => cwd.ancestors().find_map(|dir| {
                let decided = entries.get(&dir.display().to_string())?.as_bool()?;
                Some((dir.to_path_buf(), decided))
            }),
            Err(e) => {
                self.notice(e, NoticeKind::Error);
                return;
            }
        };
        let said = match decision {
            Some((dir, true)) if dir == cwd => "trusted (saved in trust.json)".to_string(),
            Some((dir, true)) => format!("trusted, as {} is (saved in trust.json)", dir.display()),
            Some((dir, false)) if dir == cwd => "not trusted (saved in trust.json)".to_string(),
            Some((dir, false)) => format!(
                "not trusted, as {} is not (saved in trust.json)",
                dir.display()
            ),
            None => "no decision saved in trust.json".to_string(),
        };
        self.notice(
            format!(
                "{}: {said}.\n\
                 A project's extensions, settings, MCP servers and packages run only once it is \
                 trusted; a folder with none of them needs no trust. To trust this one: \
                 `tau --approve` for one run; answer `a` (always) when tau asks as it starts; \
                 or add \"{}\": true to {}. \"defaultProjectTrust\": \"always\" in your \
                 settings.json trusts every project nothing else decides. A change counts from \
                 tau's next start.",
                cwd.display(),
                cwd.display(),
                path.display()
            ),
            NoticeKind::Info,
        );
    }

    /// `/scoped-models`: the `enabledModels` patterns that scope Ctrl+P, from the settings files
    /// in the order they apply (the last that sets it wins).
    fn show_scoped_models(&mut self) {
        let Some(user) = self.agent_file("settings.json") else {
            return;
        };
        let files = [
            user.clone(),
            self.cwd.join(".pi").join("settings.json"),
            self.cwd.join(".tau").join("settings.json"),
        ];
        let mut scope: Option<(PathBuf, Vec<String>)> = None;
        for file in files {
            let Ok(settings) = read_json_object(&file) else {
                continue;
            };
            if let Some(Value::Array(patterns)) = settings.get("enabledModels") {
                let patterns = patterns
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect();
                scope = Some((file, patterns));
            }
        }
        let mut said = match scope {
            Some((file, patterns)) if !patterns.is_empty() => format!(
                "Ctrl+P cycles through the models matching enabledModels: {} (from {}; a \
                 project's file counts only once the project is trusted).",
                patterns.join(", "),
                file.display()
            ),
            _ => "No enabledModels: Ctrl+P cycles through every model that has a key.".into(),
        };
        said.push_str(&format!(
            "\nChanging the scope here is not available yet: edit \"enabledModels\" in {} \
             (patterns as --models takes them, such as \"anthropic/*\" or \"openai/gpt-5*\") and \
             start tau again.",
            user.display()
        ));
        self.notice(said, NoticeKind::Info);
    }

    /// `/export <path.jsonl>`: the session file as it is on disk, copied to `typed`.
    fn export_jsonl(&mut self, session_file: Option<&str>, typed: &str) {
        let Some(source) = session_file.map(Path::new).filter(|file| file.is_file()) else {
            self.notice(
                "This session has no file to export yet (nothing said, or --no-session)",
                NoticeKind::Warning,
            );
            return;
        };
        let target = self.resolve(typed);
        match std::fs::copy(source, &target) {
            Ok(_) => self.notice(
                format!("Exported to {}", target.display()),
                NoticeKind::Info,
            ),
            Err(e) => self.notice(
                format!("Could not write {}: {e}", target.display()),
                NoticeKind::Error,
            ),
        }
    }

    /// `/import <path>`: a session file opened in place of this session, once confirmed.
    fn import(&mut self, arg: &str) {
        if arg.is_empty() {
            self.notice(
                "Usage: /import <file.jsonl> opens a session file in place of this session",
                NoticeKind::Warning,
            );
            return;
        }
        let path = self.resolve(arg);
        if !path.is_file() {
            self.notice(
                format!("No session file at {}", path.display()),
                NoticeKind::Error,
            );
            return;
        }
        self.dialog = Some(Dialog {
            title: "Import a session".into(),
            body: DialogBody::Confirm {
                message: format!(
                    "Open {} in place of this session? It is copied into this folder's \
                     sessions first.",
                    path.display()
                ),
            },
            purpose: Purpose::Import(path),
        });
    }

    /// A path as typed: `~/` is the home folder, a relative path starts at the working folder.
    fn resolve(&self, typed: &str) -> PathBuf {
        if let Some(rest) = typed.strip_prefix("~/")
            && let Some(home) = std::env::var_os("HOME")
        {
            return PathBuf::from(home).join(rest);
        }
        self.cwd.join(typed)
    }

    /// The copy of the file in this folder's sessions (as pi does: the file given stays as it
    /// was), then `switch_session` to it.
    fn import_confirmed(&mut self, source: &Path) {
        let target = match (&self.session_dir, source.file_name()) {
            (Some(dir), Some(name)) => {
                let target = dir.join(name);
                let same =
                    std::fs::canonicalize(&target).ok() == std::fs::canonicalize(source).ok();
                if !same {
                    if target.exists() {
                        self.notice(
                            format!(
                                "{} already holds a session named {}: /resume opens it",
                                dir.display(),
                                name.to_string_lossy()
                            ),
                            NoticeKind::Error,
                        );
                        return;
                    }
                    if let Err(e) =
                        std::fs::create_dir_all(dir).and_then(|()| std::fs::copy(source, &target))
                    {
                        self.notice(
                            format!("Could not copy {}: {e}", source.display()),
                            NoticeKind::Error,
                        );
                        return;
                    }
                }
                target
            }
            _ => source.to_path_buf(),
        };
        self.transcript.clear();
        self.send(
            RpcCommand::SwitchSession(SwitchSessionCommand {
                session_path: target.to_string_lossy().into_owned(),
            }),
            Pending::SwitchSession,
        );
        self.send(RpcCommand::GetMessages(NoFields {}), Pending::History(None));
    }

    /// `/share`: the session exported to a file of its own, which the terminal layer then puts
    /// in a secret gist with `gh`.
    fn share(&mut self) {
        let dir = match tempfile::Builder::new().prefix("tau-share-").tempdir() {
            Ok(dir) => dir.keep(),
            Err(e) => {
                self.notice(
                    format!("No temporary folder for the export: {e}"),
                    NoticeKind::Error,
                );
                return;
            }
        };
        self.send(
            RpcCommand::ExportHtml(ExportHtmlCommand {
                output_path: Some(dir.join("session.html").to_string_lossy().into_owned()),
            }),
            Pending::Action(Then::Share),
        );
    }

    /// A choice in one of this module's dialogs.
    pub(super) fn on_builtin_dialog(&mut self, purpose: Purpose, answer: Answer, index: usize) {
        let chosen = !matches!(answer, Answer::Cancelled);
        match purpose {
            Purpose::Settings(rows) if chosen => {
                if let Some((setting, current)) = rows.get(index) {
                    self.choose_setting(*setting, current);
                }
            }
            Purpose::SettingValue(setting) if chosen => {
                if let Some(value) = setting.values().get(index) {
                    self.set_setting(setting, value);
                }
            }
            Purpose::LoginProvider(providers) if chosen => match providers.get(index) {
                Some(provider) => self.ask_key(provider.clone()),
                None => {
                    self.dialog = Some(Dialog {
                        title: "Provider name (as models.json names it)".into(),
                        body: DialogBody::Input {
                            editor: crate::editor::Editor::default(),
                            multiline: false,
                        },
                        purpose: Purpose::LoginProviderName,
                    });
                }
            },
            Purpose::LoginProviderName => {
                if let Answer::Value(name) = answer
                    && !name.trim().is_empty()
                {
                    self.ask_key(name.trim().to_string());
                }
            }
            Purpose::Logout(providers) if chosen => {
                if let Some(provider) = providers.get(index) {
                    self.remove_key(provider);
                }
            }
            Purpose::Import(path) => {
                if matches!(answer, Answer::Confirmed(true)) {
                    self.import_confirmed(&path);
                } else {
                    self.notice("Import cancelled", NoticeKind::Info);
                }
            }
            _ => {}
        }
    }
}

/// A JSON file of the agent directory as an object: none is an empty one; one that cannot be
/// read or is not an object is an error (and is then never written over).
fn read_json_object(path: &Path) -> Result<Map<String, Value>, String> {
    let text = match tau_base::bounded::read_to_string(path, tau_base::bounded::CONFIG_CAP) {
        Ok(text) => text,
        Err(tau_base::bounded::BoundedReadError::NotFound) => return Ok(Map::new()),
        Err(e) => return Err(format!("Cannot read {}: {e}", path.display())),
    };
    if text.trim().is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_str(&text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(format!(
            "{} is not a JSON object; it was left as it is",
            path.display()
        )),
        Err(e) => Err(format!(
            "{} does not parse ({e}); it was left as it is",
            path.display()
        )),
    }
}

/// Writes `entries` to `path` readable by its owner only (it holds keys), whole or not at all:
/// a new file beside it, then renamed over it.
fn write_private(path: &Path, entries: &Map<String, Value>) -> Result<(), String> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
    let failed = |e: &dyn fmt::Display| format!("Cannot write {}: {e}", path.display());
    if let Some(dir) = path.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| failed(&e))?;
    }
    let mut text = serde_json::to_string_pretty(entries).map_err(|e| failed(&e))?;
    text.push('\n');
    let mut options = std::fs::OpenOptions::new();
    options.write(true).mode(0o600);
    // The mode asked for at creation is narrowed by the umask, never widened; set it anyway,
    // so the file is 0600 whatever the umask.
    tau_base::atomic::replace_file(path, text.as_bytes(), &options, |file| {
        file.set_permissions(std::fs::Permissions::from_mode(0o600))
    })
    .map_err(|e| failed(&std::io::Error::from(e)))?;
    Ok(())
}
