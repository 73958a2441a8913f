//! Settings from `settings.json`: the global file in the agent directory, then the project's
//! `.pi/settings.json` and `.tau/settings.json` (later files win; an object is merged with the
//! one below it key by key, one level deep, exactly as pi's `deepMergeSettings` does, so
//! `retry.provider` in a project file replaces the global `retry.provider` whole).
//!
//! The project's files are read but held back until the project is trusted
//! ([`Settings::trust_project`]): a cloned repository must not change how commands run or
//! where data goes by shipping a settings file (docs/security.md). [`KEYS`] names every key
//! tau reads and what it can do. A file that
//! does not parse, or a known key with a value of the wrong type, is reported once through
//! [`Settings::warnings`] (the binary prints them) and ignored: a broken settings file must
//! not keep the agent from starting.
//!
//! Commands that change a setting write it to the global file as pi's setters do
//! ([`Settings::set_global`]): the file is read again, only the changed keys are replaced
//! (a nested key within its object), every other key keeps its value and place, and the
//! result replaces the file atomically. A global file that did not parse is never written.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use tau_base::bounded::{BoundedReadError, CONFIG_CAP};
use tau_protocol::ThinkingLevel;
use tau_protocol::{InterruptMode, QueueMode};

/// pi's default `httpIdleTimeoutMs`: five minutes.
pub const DEFAULT_HTTP_IDLE_TIMEOUT: Duration = Duration::from_secs(300);

/// pi's default `retry.provider.maxRetryDelayMs`: one minute.
pub const DEFAULT_MAX_RETRY_DELAY: Duration = Duration::from_secs(60);

/// One settings file's document, or the warning the file gave.
type Layer = Result<Map<String, Value>, String>;

/// The effective settings, typed where tau uses them, with the merged document kept for
/// keys later issues read.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    merged: Map<String, Value>,
    /// The global file's document as loaded (plus what setters changed), and the project
    /// layers once the project is trusted: `merged` is rebuilt from them after a change.
    global: Map<String, Value>,
    project: Vec<Map<String, Value>>,
    /// The file of each of `project`'s layers.
    project_files: Vec<PathBuf>,
    /// The project's files as read, applied by [`Self::trust_project`]: each layer, or the
    /// warning its file gave.
    held: Vec<(PathBuf, Layer)>,
    /// `<agentDir>/settings.json`; `None` for in-memory settings, which are never written.
    global_file: Option<PathBuf>,
    /// The global file exists but could not be read or parsed: pi never overwrites it.
    global_unreadable: bool,
    warnings: Vec<String>,
}

impl Settings {
    /// Reads the global settings file, and the project's files without applying them: until
    /// [`Self::trust_project`], only the user's settings count. Missing files are simply
    /// absent; a file that cannot be read or parsed counts as empty and is reported in
    /// [`Self::warnings`] (a project file only once it is applied, unless it was refused
    /// unread: see [`Unusable::Refused`]).
    pub fn load(agent_dir: &Path, cwd: &Path) -> Self {
        let mut warnings = Vec::new();
        let global_path = agent_dir.join("settings.json");
        let (global, global_unreadable) = match read_layer(&global_path) {
            Ok(layer) => (layer.unwrap_or_default(), false),
            Err(unusable) => {
                warnings.push(unusable.into_warning());
                (Map::new(), true)
            }
        };
        let mut held = Vec::new();
        for path in project_files(cwd) {
            match read_layer(&path) {
                Ok(Some(layer)) => held.push((path, Ok(layer))),
                Ok(None) => {}
                Err(Unusable::Refused(warning)) => warnings.push(warning),
                Err(Unusable::Broken(warning)) => held.push((path, Err(warning))),
            }
        }
        let mut settings = Self {
            merged: Map::new(),
            global,
            project: Vec::new(),
            project_files: Vec::new(),
            held,
            global_file: Some(global_path),
            global_unreadable,
            warnings,
        };
        settings.remerge();
        let mistyped = settings.mistyped_values();
        settings.warnings.extend(mistyped);
        settings
    }

    /// [`Self::load`], with the project's files applied when `project_trusted`.
    pub fn load_for(agent_dir: &Path, cwd: &Path, project_trusted: bool) -> Self {
        let mut settings = Self::load(agent_dir, cwd);
        if project_trusted {
            settings.trust_project();
        }
        settings
    }

    /// The project is trusted: its settings files apply from now on, over the user's, and
    /// what was wrong with them joins [`Self::warnings`]. A second call finds nothing held.
    pub fn trust_project(&mut self) {
        if self.held.is_empty() {
            return;
        }
        let before = self.mistyped_values();
        for (path, layer) in std::mem::take(&mut self.held) {
            match layer {
                Ok(layer) => {
                    self.project.push(layer);
                    self.project_files.push(path);
                }
                Err(warning) => self.warnings.push(warning),
            }
        }
        self.remerge();
        let after = self.mistyped_values();
        self.warnings
            .extend(after.into_iter().filter(|w| !before.contains(w)));
    }

    /// The project's settings files that exist but are held back until it is trusted.
    pub fn held_project_files(&self) -> Vec<&Path> {
        self.held.iter().map(|(path, _)| path.as_path()).collect()
    }

    /// A top-level key as each applied file sets it, lowest precedence first, with the file
    /// (`None` for in-memory settings): the user's, then the trusted project's. For keys whose
    /// layers the caller merges by rules of its own and reports per file (`mcpServers`).
    pub fn layers_of(&self, key: &str) -> Vec<(Option<&Path>, &Value)> {
        debug_assert!(
            KEYS.iter().any(|k| k.name == key),
            "settings key {key} is not in settings::KEYS"
        );
        let global = self
            .global
            .get(key)
            .map(|value| (self.global_file.as_deref(), value));
        let project = self
            .project
            .iter()
            .zip(&self.project_files)
            .filter_map(|(layer, path)| layer.get(key).map(|value| (Some(path.as_path()), value)));
        global.into_iter().chain(project).collect()
    }

    /// `defaultProjectTrust` as the user set it: only the user's own file may say how far a
    /// project is trusted, never the project's.
    pub fn default_project_trust(&self) -> Option<String> {
        match self.global.get("defaultProjectTrust") {
            Some(Value::String(value)) => Some(value.clone()),
            _ => None,
        }
    }

    /// Builds settings from an in-memory document (tests, embedding); never written to disk.
    pub fn from_value(value: Map<String, Value>) -> Self {
        let mut settings = Self {
            global: value,
            ..Self::default()
        };
        settings.remerge();
        settings
    }

    /// What was wrong with the files when they were loaded, one line each (without a
    /// `Warning:` prefix): a file that could not be read or parsed (named, with the JSON
    /// error), or a known key whose value has the wrong type. The binary prints them.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    fn remerge(&mut self) {
        let mut merged = migrated(self.global.clone());
        for layer in &self.project {
            merge_into(&mut merged, migrated(layer.clone()));
        }
        self.merged = merged;
    }

    fn lookup(&self, key: &str) -> Option<&Value> {
        // Every key read is in the catalogue, so what a project could set is always known.
        debug_assert!(
            KEYS.iter().any(|k| k.name == key),
            "settings key {key} is not in settings::KEYS"
        );
        let mut parts = key.split('.');
        let first = parts.next()?;
        let mut value = self.merged.get(first)?;
        for part in parts {
            value = value.get(part)?;
        }
        Some(value)
    }

    /// A top-level or dotted (`compaction.enabled`) key, typed; `None` if unset or mistyped
    /// (a mistyped known key was reported once by [`Self::load`]).
    pub fn get<T: DeserializeOwned>(&self, key: &str) -> Option<T> {
        let value = self.lookup(key)?;
        match T::deserialize(value) {
            Ok(v) => Some(v),
            Err(err) => {
                tracing::debug!("ignoring setting {key}: {err}");
                None
            }
        }
    }

    /// The known keys whose value does not have the type tau reads them as.
    fn mistyped_values(&self) -> Vec<String> {
        fn check<T: DeserializeOwned>(s: &Settings, key: &str, out: &mut Vec<String>) {
            if let Some(value) = s.lookup(key)
                && let Err(err) = T::deserialize(value)
            {
                out.push(format!("Ignoring setting {key}: {err}"));
            }
        }
        let mut out = Vec::new();
        for key in [
            "defaultProvider",
            "defaultModel",
            "sessionDir",
            "shellPath",
            "shellCommandPrefix",
            "defaultProjectTrust",
        ] {
            check::<String>(self, key, &mut out);
        }
        check::<ThinkingLevel>(self, "defaultThinkingLevel", &mut out);
        check::<QueueMode>(self, "steeringMode", &mut out);
        check::<QueueMode>(self, "followUpMode", &mut out);
        check::<InterruptMode>(self, "interruptMode", &mut out);
        check::<Vec<String>>(self, "enabledModels", &mut out);
        for key in [
            "compaction.enabled",
            "retry.enabled",
            "images.autoResize",
            "images.blockImages",
        ] {
            check::<bool>(self, key, &mut out);
        }
        for key in [
            "compaction.reserveTokens",
            "compaction.keepRecentTokens",
            "branchSummary.reserveTokens",
            "retry.baseDelayMs",
            "retry.provider.timeoutMs",
            "retry.provider.maxRetryDelayMs",
            "thinkingBudgets.minimal",
            "thinkingBudgets.low",
            "thinkingBudgets.medium",
            "thinkingBudgets.high",
        ] {
            check::<u64>(self, key, &mut out);
        }
        check::<u32>(self, "retry.maxRetries", &mut out);
        check::<u32>(self, "retry.provider.maxRetries", &mut out);
        if let Some(value) = self.lookup("httpIdleTimeoutMs")
            && parse_timeout_ms(value).is_none()
        {
            out.push(format!(
                "Ignoring setting httpIdleTimeoutMs: {value} is not a number of milliseconds or \"disabled\""
            ));
        }
        out
    }

    /// Changes a setting for this process and in the global settings file, as pi's setters
    /// do. `key` is top-level or `parent.child`. The project files still win where they set
    /// the key, as in pi. Settings not loaded from files, or whose global file did not
    /// parse, change in memory only. The error says why the file could not be written.
    pub fn set_global(&mut self, key: &str, value: Value) -> Result<(), String> {
        self.set_global_all(&[(key, value)])
    }

    /// [`Self::set_global`] for several keys in one write (pi's `setDefaultModelAndProvider`).
    pub fn set_global_all(&mut self, changes: &[(&str, Value)]) -> Result<(), String> {
        for (key, value) in changes {
            set_path(&mut self.global, key, value.clone());
        }
        self.remerge();
        match &self.global_file {
            Some(path) if !self.global_unreadable => update_file(path, changes),
            _ => Ok(()),
        }
    }

    pub fn default_thinking_level(&self) -> ThinkingLevel {
        self.get("defaultThinkingLevel")
            .unwrap_or(ThinkingLevel::Medium)
    }

    pub fn steering_mode(&self) -> QueueMode {
        self.get("steeringMode").unwrap_or_default()
    }

    pub fn follow_up_mode(&self) -> QueueMode {
        self.get("followUpMode").unwrap_or_default()
    }

    pub fn interrupt_mode(&self) -> InterruptMode {
        self.get("interruptMode").unwrap_or_default()
    }

    pub fn compaction_enabled(&self) -> bool {
        self.get("compaction.enabled").unwrap_or(true)
    }

    /// Tokens left free for the reply: compaction starts above `contextWindow - reserve`.
    pub fn compaction_reserve_tokens(&self) -> u64 {
        self.get("compaction.reserveTokens").unwrap_or(16384)
    }

    /// How much recent conversation a compaction keeps verbatim.
    pub fn compaction_keep_recent_tokens(&self) -> u64 {
        self.get("compaction.keepRecentTokens").unwrap_or(20000)
    }

    pub fn retry_enabled(&self) -> bool {
        self.get("retry.enabled").unwrap_or(true)
    }

    /// Automatic retries after a transient provider error, per prompt.
    pub fn retry_max_retries(&self) -> u32 {
        self.get("retry.maxRetries").unwrap_or(3)
    }

    /// The first retry's delay; each later one doubles it.
    pub fn retry_base_delay_ms(&self) -> u64 {
        self.get("retry.baseDelayMs").unwrap_or(2000)
    }

    pub fn session_dir(&self) -> Option<String> {
        self.get("sessionDir")
    }

    /// `images.blockImages`: images in user and tool-result content never reach the model.
    pub fn block_images(&self) -> bool {
        self.get("images.blockImages").unwrap_or(false)
    }

    /// `httpIdleTimeoutMs`: how long a provider response may send nothing (headers or body)
    /// before the request fails; `Duration::ZERO` when set to `0` or `"disabled"`.
    pub fn http_idle_timeout(&self) -> Duration {
        self.lookup("httpIdleTimeoutMs")
            .and_then(parse_timeout_ms)
            .map_or(DEFAULT_HTTP_IDLE_TIMEOUT, Duration::from_millis)
    }

    /// `retry.provider.timeoutMs`: how long a provider request may take to answer (pi's SDK
    /// request timeout); unset means the idle timeout.
    pub fn provider_timeout(&self) -> Option<Duration> {
        self.get("retry.provider.timeoutMs")
            .map(Duration::from_millis)
    }

    /// `retry.provider.maxRetries`: retries of a failed request inside one provider call
    /// (pi's SDK retries), 0 by default.
    pub fn provider_max_retries(&self) -> u32 {
        self.get("retry.provider.maxRetries").unwrap_or(0)
    }

    /// `retry.provider.maxRetryDelayMs`: the longest server-requested wait a provider-level
    /// retry accepts (longer fails at once); `Duration::ZERO` removes the cap.
    pub fn provider_max_retry_delay(&self) -> Duration {
        self.get("retry.provider.maxRetryDelayMs")
            .map_or(DEFAULT_MAX_RETRY_DELAY, Duration::from_millis)
    }

    /// `thinkingBudgets.<level>` (`minimal`, `low`, `medium`, `high`): the token budget of
    /// that level for budget-based thinking.
    pub fn thinking_budget(&self, level: &str) -> Option<u64> {
        self.get(&format!("thinkingBudgets.{level}"))
    }

    /// `branchSummary.reserveTokens`: what a branch summary's request leaves free.
    pub fn branch_summary_reserve_tokens(&self) -> u64 {
        self.get("branchSummary.reserveTokens").unwrap_or(16384)
    }
}

/// `.pi/settings.json` and `.tau/settings.json` of `cwd`, in the order they apply.
pub fn project_files(cwd: &Path) -> [PathBuf; 2] {
    [
        cwd.join(".pi").join("settings.json"),
        cwd.join(".tau").join("settings.json"),
    ]
}

/// What a setting can do if someone other than the user sets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// Runs a program, or changes the program or command line a command runs with.
    RunsCode,
    /// Changes where conversation data is written or sent, or what is read into it.
    MovesData,
    /// Decides how far a project is trusted: read from the user's file alone.
    GrantsTrust,
    /// Changes behaviour within what the user already allowed (modes, limits, numbers).
    Behaviour,
}

/// A settings key tau reads (dotted for a nested one) and what it can do.
#[derive(Debug, Clone, Copy)]
pub struct SettingKey {
    pub name: &'static str,
    pub reach: Reach,
}

const fn key(name: &'static str, reach: Reach) -> SettingKey {
    SettingKey { name, reach }
}

/// Every settings key tau reads. A project sets none of them before it is trusted: its
/// files are not applied at all, as in pi 0.79 (docs/security.md), whatever the key's reach.
pub const KEYS: &[SettingKey] = &[
    key("shellPath", Reach::RunsCode),
    key("shellCommandPrefix", Reach::RunsCode),
    key("extensions", Reach::RunsCode),
    key("packages", Reach::RunsCode),
    key("npmCommand", Reach::RunsCode),
    key("sessionDir", Reach::MovesData),
    key("defaultProvider", Reach::MovesData),
    key("defaultModel", Reach::MovesData),
    key("enabledModels", Reach::MovesData),
    key("skills", Reach::MovesData),
    key("prompts", Reach::MovesData),
    key("defaultProjectTrust", Reach::GrantsTrust),
    key("defaultThinkingLevel", Reach::Behaviour),
    key("steeringMode", Reach::Behaviour),
    key("followUpMode", Reach::Behaviour),
    key("interruptMode", Reach::Behaviour),
    key("compaction.enabled", Reach::Behaviour),
    key("compaction.reserveTokens", Reach::Behaviour),
    key("compaction.keepRecentTokens", Reach::Behaviour),
    key("branchSummary.reserveTokens", Reach::Behaviour),
    key("retry.enabled", Reach::Behaviour),
    key("retry.maxRetries", Reach::Behaviour),
    key("retry.baseDelayMs", Reach::Behaviour),
    key("retry.provider.timeoutMs", Reach::Behaviour),
    key("retry.provider.maxRetries", Reach::Behaviour),
    key("retry.provider.maxRetryDelayMs", Reach::Behaviour),
    key("httpIdleTimeoutMs", Reach::Behaviour),
    key("thinkingBudgets.minimal", Reach::Behaviour),
    key("thinkingBudgets.low", Reach::Behaviour),
    key("thinkingBudgets.medium", Reach::Behaviour),
    key("thinkingBudgets.high", Reach::Behaviour),
    key("images.autoResize", Reach::Behaviour),
    key("images.blockImages", Reach::Behaviour),
    key("tasks.todoClearDelay", Reach::Behaviour),
    key("extensionTimeouts.handlerMs", Reach::Behaviour),
    key("extensionTimeouts.commandMs", Reach::Behaviour),
    key("extensionTimeouts.toolMs", Reach::Behaviour),
    key("mcpServers", Reach::RunsCode),
    key("mcp.requestTimeoutMs", Reach::Behaviour),
    key("mcp.startupTimeoutMs", Reach::Behaviour),
    key("mcp.maxRestarts", Reach::Behaviour),
    key("mcp.logLevel", Reach::Behaviour),
    key("mcp.elicitation", Reach::Behaviour),
    // A server's request is answered by the model, on the user's key (decision T129).
    key("mcp.sampling", Reach::MovesData),
    key("theme", Reach::Behaviour),
    // An `allow` rule lets a command run without asking (decision T123).
    // The whole object (`defaultMode`, `allow`, `deny`): one key, read whole.
    key("permissions", Reach::RunsCode),
];

/// pi's `parseHttpIdleTimeoutMs`: a non-negative number (floored), a string holding one, or
/// `"disabled"` (0).
fn parse_timeout_ms(value: &Value) -> Option<u64> {
    match value {
        Value::String(text) => {
            let text = text.trim();
            if text.eq_ignore_ascii_case("disabled") {
                return Some(0);
            }
            text.parse::<f64>()
                .ok()
                .and_then(|n| parse_timeout_ms(&Value::from(n)))
        }
        Value::Number(n) => n.as_u64().or_else(|| {
            n.as_f64()
                .filter(|f| f.is_finite() && *f >= 0.0)
                .map(|f| f as u64)
        }),
        _ => None,
    }
}

/// Sets `key` (top-level or `parent.child`) in `doc`; a parent that is not an object becomes
/// one.
fn set_path(doc: &mut Map<String, Value>, key: &str, value: Value) {
    match key.split_once('.') {
        None => {
            doc.insert(key.to_string(), value);
        }
        Some((parent, child)) => {
            let slot = doc
                .entry(parent.to_string())
                .or_insert_with(|| Value::Object(Map::new()));
            if !slot.is_object() {
                *slot = Value::Object(Map::new());
            }
            if let Value::Object(object) = slot {
                set_path(object, child, value);
            }
        }
    }
}

/// pi's load-time migrations, applied to the in-memory view only (the file keeps what the
/// user wrote): `queueMode` is the old name of `steeringMode`, `retry.maxDelayMs` of
/// `retry.provider.maxRetryDelayMs`.
fn migrated(mut layer: Map<String, Value>) -> Map<String, Value> {
    if !layer.contains_key("steeringMode")
        && let Some(mode) = layer.remove("queueMode")
    {
        layer.insert("steeringMode".into(), mode);
    }
    if let Some(Value::Object(retry)) = layer.get_mut("retry")
        && let Some(delay) = retry.remove("maxDelayMs")
        && delay.is_number()
    {
        let provider = retry
            .entry("provider")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(provider) = provider
            && provider.get("maxRetryDelayMs").is_none_or(Value::is_null)
        {
            provider.insert("maxRetryDelayMs".into(), delay);
        }
    }
    layer
}

/// Sets the top-level `key` of one settings file (a project's, or the user's when the loaded
/// [`Settings`] are not at hand) as [`Settings::set_global`] writes: under pi's lock, other
/// keys kept in place, replaced atomically. A file that does not parse is an error and stays
/// as it is.
pub fn write_key(path: &Path, key: &str, value: Value) -> Result<(), String> {
    update_file(path, &[(key, value)])
}

/// Writes `changes` into the settings file at `path`: the file is read again under pi's lock
/// (`<file>.lock`), the changed keys are replaced (a nested key inside its object, the other
/// keys of that object kept), and the document replaces the file atomically, pretty-printed
/// with two spaces as pi writes it. A file that no longer parses is left alone.
fn update_file(path: &Path, changes: &[(&str, Value)]) -> Result<(), String> {
    // Write through a symbolic link (dotfile managers link settings files) to its target.
    let target = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    // Before the lock, which is a folder made next to the target: a link to `/dev/zero` must
    // not lead to `/dev/zero.lock`, nor the atomic replace to a new `/dev/zero`.
    match tau_base::bounded::check_regular(&target) {
        Ok(()) | Err(BoundedReadError::NotFound) => {}
        Err(err) => return Err(format!("cannot write {}: {err}", path.display())),
    }
    if let Some(dir) = target.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let _lock = FileLock::acquire(&target)?;
    let (mut doc, permissions) = match tau_base::bounded::read(&target, CONFIG_CAP) {
        Ok(bytes) => match serde_json::from_slice::<Value>(&bytes) {
            Ok(Value::Object(doc)) => (
                doc,
                std::fs::metadata(&target).ok().map(|m| m.permissions()),
            ),
            Ok(_) => return Err(format!("{} is not a JSON object", target.display())),
            Err(err) => return Err(format!("cannot parse {}: {err}", target.display())),
        },
        Err(BoundedReadError::NotFound) => (Map::new(), None),
        Err(err) => return Err(format!("cannot read {}: {err}", target.display())),
    };
    for (key, value) in changes {
        set_path(&mut doc, key, value.clone());
    }
    let text = serde_json::to_string_pretty(&Value::Object(doc))
        .map_err(|e| format!("cannot serialise settings: {e}"))?;
    let mut options = std::fs::OpenOptions::new();
    options.write(true);
    tau_base::atomic::replace_file(
        &target,
        text.as_bytes(),
        &options,
        |file| match &permissions {
            Some(permissions) => file.set_permissions(permissions.clone()),
            None => Ok(()),
        },
    )
    .map_err(|e| {
        format!(
            "cannot write {}: {}",
            target.display(),
            std::io::Error::from(e)
        )
    })?;
    Ok(())
}

/// pi's settings lock (`proper-lockfile`): a `<file>.lock` directory, tried 10 times 20 ms
/// apart; a lock older than 10 s is stale (its holder died) and is taken over.
struct FileLock(PathBuf);

impl FileLock {
    fn acquire(file: &Path) -> Result<Self, String> {
        let mut name = file.as_os_str().to_owned();
        name.push(".lock");
        let lock = PathBuf::from(name);
        for _ in 0..10 {
            match std::fs::create_dir(&lock) {
                Ok(()) => return Ok(Self(lock)),
                Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {
                    let stale = std::fs::metadata(&lock)
                        .and_then(|m| m.modified())
                        .ok()
                        .and_then(|t| t.elapsed().ok())
                        .is_some_and(|age| age > Duration::from_secs(10));
                    if stale {
                        let _ = std::fs::remove_dir(&lock);
                    } else {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                }
                Err(err) => return Err(format!("cannot lock {}: {err}", file.display())),
            }
        }
        Err(format!(
            "cannot lock {}: {} is held by another process",
            file.display(),
            lock.display()
        ))
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// The strings of an array setting in one settings file alone (resources that are listed
/// per file, relative to that file's folder).
/// A file that cannot be read or parsed gives nothing here: [`Settings::load`] reports it.
pub fn array_in_file(path: &Path, key: &str) -> Vec<String> {
    debug_assert!(
        KEYS.iter().any(|k| k.name == key),
        "settings key {key} is not in settings::KEYS"
    );
    read_layer(path)
        .ok()
        .flatten()
        .and_then(|mut layer| layer.remove(key))
        .and_then(|value| match value {
            Value::Array(items) => Some(items),
            _ => None,
        })
        .map(|items| {
            items
                .into_iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Why a settings file that exists gives no settings, with the warning to show.
enum Unusable {
    /// Not read at all: a FIFO, a device, a folder, or larger than [`CONFIG_CAP`]. Said at
    /// once even for a project that is not trusted: the warning tells what sits at the path,
    /// never what a file holds, and trusting the project later would not make it readable.
    Refused(String),
    /// Read and found wrong (not JSON, not an object), or unreadable for an ordinary reason.
    Broken(String),
}

impl Unusable {
    fn into_warning(self) -> String {
        match self {
            Self::Refused(warning) | Self::Broken(warning) => warning,
        }
    }
}

/// One settings file: `Ok(None)` when it does not exist, `Err` when it cannot be read or is
/// not a JSON object. Only a regular file is opened, and only up to [`CONFIG_CAP`]: a project
/// may plant a link to `/dev/zero` or a FIFO there.
fn read_layer(path: &Path) -> Result<Option<Map<String, Value>>, Unusable> {
    let cannot_read = |err: &BoundedReadError| {
        format!(
            "Cannot read {}: {err}; its settings are ignored",
            path.display()
        )
    };
    let text = match tau_base::bounded::read(path, CONFIG_CAP) {
        Ok(text) => text,
        Err(BoundedReadError::NotFound) => return Ok(None),
        Err(err @ (BoundedReadError::NotRegular { .. } | BoundedReadError::TooLarge { .. })) => {
            return Err(Unusable::Refused(cannot_read(&err)));
        }
        Err(err) => return Err(Unusable::Broken(cannot_read(&err))),
    };
    if text.is_empty() {
        // pi reads an empty file as no settings.
        return Ok(Some(Map::new()));
    }
    match serde_json::from_slice::<Value>(&text) {
        Ok(Value::Object(map)) => Ok(Some(map)),
        Ok(_) => Err(Unusable::Broken(format!(
            "{} is not a JSON object; its settings are ignored",
            path.display()
        ))),
        Err(err) => Err(Unusable::Broken(format!(
            "Cannot parse {}: {err}; its settings are ignored",
            path.display()
        ))),
    }
}

/// pi's merge: objects merge one level deep, everything else is replaced.
fn merge_into(base: &mut Map<String, Value>, layer: Map<String, Value>) {
    for (key, value) in layer {
        match (base.get_mut(&key), value) {
            (Some(Value::Object(existing)), Value::Object(incoming)) => {
                existing.extend(incoming);
            }
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn project_settings_merge_one_level_deep() {
        let agent = tempfile::tempdir().unwrap();
        let cwd = tempfile::tempdir().unwrap();
        std::fs::write(
            agent.path().join("settings.json"),
            r#"{"steeringMode":"all","compaction":{"enabled":false,"reserveTokens":5}}"#,
        )
        .unwrap();
        std::fs::create_dir(cwd.path().join(".pi")).unwrap();
        std::fs::write(
            cwd.path().join(".pi/settings.json"),
            r#"{"compaction":{"reserveTokens":7},"followUpMode":"all"}"#,
        )
        .unwrap();
        let mut s = Settings::load(agent.path(), cwd.path());
        assert_eq!(
            s.follow_up_mode(),
            QueueMode::OneAtATime,
            "held until trusted"
        );
        assert_eq!(s.get::<u64>("compaction.reserveTokens"), Some(5));
        s.trust_project();
        assert_eq!(s.steering_mode(), QueueMode::All);
        assert_eq!(s.follow_up_mode(), QueueMode::All);
        assert!(!s.compaction_enabled());
        assert_eq!(s.get::<u64>("compaction.reserveTokens"), Some(7));
    }

    #[test]
    fn layers_of_a_key_name_their_files_and_wait_for_trust() {
        let agent = tempfile::tempdir().unwrap();
        let cwd = tempfile::tempdir().unwrap();
        std::fs::write(
            agent.path().join("settings.json"),
            r#"{"mcpServers":{"a":{"command":"x"}}}"#,
        )
        .unwrap();
        std::fs::create_dir(cwd.path().join(".tau")).unwrap();
        std::fs::write(
            cwd.path().join(".tau/settings.json"),
            r#"{"mcpServers":{"b":{"command":"y"}}}"#,
        )
        .unwrap();
        let mut s = Settings::load(agent.path(), cwd.path());
        let files = |s: &Settings| -> Vec<PathBuf> {
            s.layers_of("mcpServers")
                .into_iter()
                .filter_map(|(file, _)| file.map(Path::to_path_buf))
                .collect()
        };
        assert_eq!(files(&s), [agent.path().join("settings.json")]);
        s.trust_project();
        assert_eq!(
            files(&s),
            [
                agent.path().join("settings.json"),
                cwd.path().join(".tau/settings.json")
            ]
        );
        assert_eq!(
            s.layers_of("mcpServers")[1].1,
            &json!({"b": {"command": "y"}})
        );
    }

    #[test]
    fn broken_files_and_bad_values_fall_back_to_defaults() {
        let agent = tempfile::tempdir().unwrap();
        std::fs::write(agent.path().join("settings.json"), "{not json").unwrap();
        let s = Settings::load(agent.path(), agent.path());
        assert_eq!(s.steering_mode(), QueueMode::OneAtATime);

        let s = Settings::from_value(
            json!({"steeringMode": "sideways", "defaultThinkingLevel": "high"})
                .as_object()
                .cloned()
                .unwrap(),
        );
        assert_eq!(s.steering_mode(), QueueMode::OneAtATime);
        assert_eq!(s.default_thinking_level(), ThinkingLevel::High);
        assert!(s.retry_enabled());
    }

    #[test]
    fn compaction_and_retry_numbers_have_pi_defaults() {
        let s = Settings::default();
        assert_eq!(s.compaction_reserve_tokens(), 16384);
        assert_eq!(s.compaction_keep_recent_tokens(), 20000);
        assert_eq!(s.retry_max_retries(), 3);
        assert_eq!(s.retry_base_delay_ms(), 2000);
        let s = Settings::from_value(
            json!({
                "compaction": {"reserveTokens": 500, "keepRecentTokens": 40},
                "retry": {"maxRetries": 5, "baseDelayMs": "soon"}
            })
            .as_object()
            .cloned()
            .unwrap(),
        );
        assert_eq!(s.compaction_reserve_tokens(), 500);
        assert_eq!(s.compaction_keep_recent_tokens(), 40);
        assert_eq!(s.retry_max_retries(), 5);
        assert_eq!(s.retry_base_delay_ms(), 2000, "a mistyped value falls back");
    }

    #[test]
    fn a_broken_file_is_one_warning_and_a_mistyped_key_another() {
        let agent = tempfile::tempdir().unwrap();
        let cwd = tempfile::tempdir().unwrap();
        std::fs::write(agent.path().join("settings.json"), "{broken").unwrap();
        std::fs::create_dir(cwd.path().join(".pi")).unwrap();
        std::fs::write(
            cwd.path().join(".pi/settings.json"),
            r#"{"retry":{"baseDelayMs":"soon"},"steeringMode":"all"}"#,
        )
        .unwrap();
        let mut s = Settings::load(agent.path(), cwd.path());
        assert_eq!(s.warnings().len(), 1, "the project's only once applied");
        s.trust_project();
        let path = agent.path().join("settings.json");
        assert_eq!(s.warnings().len(), 2, "{:?}", s.warnings());
        assert!(
            s.warnings()[0].starts_with(&format!(
                "Cannot parse {}: key must be a string",
                path.display()
            )),
            "{:?}",
            s.warnings()
        );
        assert_eq!(
            s.warnings()[1],
            "Ignoring setting retry.baseDelayMs: invalid type: string \"soon\", expected u64"
        );
        assert_eq!(
            s.steering_mode(),
            QueueMode::All,
            "the good file still counts"
        );
        // Reading an array from the broken file reports nothing more.
        assert!(array_in_file(&path, "extensions").is_empty());
        assert_eq!(
            Settings::load(cwd.path(), agent.path()).warnings(),
            [] as [String; 0]
        );
    }

    #[test]
    fn a_project_object_replaces_a_nested_object_whole_as_in_pi() {
        let s = Settings::from_value(Map::new());
        let mut merged = s.merged;
        merge_into(
            &mut merged,
            json!({"retry": {"enabled": false, "provider": {"timeoutMs": 5, "maxRetries": 2}}})
                .as_object()
                .cloned()
                .unwrap(),
        );
        merge_into(
            &mut merged,
            json!({"retry": {"maxRetries": 7, "provider": {"timeoutMs": 9}}})
                .as_object()
                .cloned()
                .unwrap(),
        );
        assert_eq!(
            Value::Object(merged),
            json!({"retry": {"enabled": false, "provider": {"timeoutMs": 9}, "maxRetries": 7}})
        );
    }

    #[test]
    fn old_key_names_are_read_as_pi_migrates_them() {
        let s = Settings::from_value(
            json!({"queueMode": "all", "retry": {"maxDelayMs": 5000}})
                .as_object()
                .cloned()
                .unwrap(),
        );
        assert_eq!(s.steering_mode(), QueueMode::All);
        assert_eq!(s.provider_max_retry_delay(), Duration::from_secs(5));
    }

    #[test]
    fn idle_timeouts_parse_as_pi_parses_them() {
        let of = |v: Value| {
            Settings::from_value(
                json!({"httpIdleTimeoutMs": v})
                    .as_object()
                    .cloned()
                    .unwrap(),
            )
            .http_idle_timeout()
        };
        assert_eq!(
            Settings::default().http_idle_timeout(),
            Duration::from_secs(300)
        );
        assert_eq!(of(json!(1500)), Duration::from_millis(1500));
        assert_eq!(of(json!(1500.9)), Duration::from_millis(1500));
        assert_eq!(of(json!(" 2500 ")), Duration::from_millis(2500));
        assert_eq!(of(json!("Disabled")), Duration::ZERO);
        assert_eq!(of(json!(0)), Duration::ZERO);
        assert_eq!(of(json!(-1)), Duration::from_secs(300));
        assert_eq!(of(json!("soon")), Duration::from_secs(300));
    }

    #[test]
    fn setters_rewrite_only_their_keys_of_the_current_file() {
        let agent = tempfile::tempdir().unwrap();
        let path = agent.path().join("settings.json");
        std::fs::write(
            &path,
            r#"{"theme":"light","compaction":{"reserveTokens":5,"enabled":true},"zeta":[1,2]}"#,
        )
        .unwrap();
        let mut s = Settings::load(agent.path(), agent.path());
        // Someone edits the file meanwhile: the edit survives, as in pi.
        std::fs::write(
            &path,
            r#"{"theme":"light","compaction":{"reserveTokens":6,"enabled":true},"zeta":[1,2],"added":1}"#,
        )
        .unwrap();
        s.set_global("compaction.enabled", json!(false)).unwrap();
        s.set_global("steeringMode", json!("all")).unwrap();
        assert!(!s.compaction_enabled());
        assert_eq!(s.steering_mode(), QueueMode::All);
        let written = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            written,
            serde_json::to_string_pretty(&json!({
                "theme": "light",
                "compaction": {"reserveTokens": 6, "enabled": false},
                "zeta": [1, 2],
                "added": 1,
                "steeringMode": "all"
            }))
            .unwrap()
        );
        assert!(!agent.path().join("settings.json.lock").exists());
        assert_eq!(
            std::fs::read_dir(agent.path()).unwrap().count(),
            1,
            "no temp file left"
        );
    }

    #[test]
    fn a_missing_file_is_created_and_a_broken_one_never_written() {
        let agent = tempfile::tempdir().unwrap();
        let nested = agent.path().join("new/agent");
        let mut s = Settings::load(&nested, agent.path());
        s.set_global_all(&[
            ("defaultProvider", json!("p")),
            ("defaultModel", json!("m")),
        ])
        .unwrap();
        assert_eq!(
            std::fs::read_to_string(nested.join("settings.json")).unwrap(),
            "{\n  \"defaultProvider\": \"p\",\n  \"defaultModel\": \"m\"\n}"
        );

        let path = agent.path().join("settings.json");
        std::fs::write(&path, "{broken").unwrap();
        let mut s = Settings::load(agent.path(), &nested);
        s.set_global("steeringMode", json!("all")).unwrap();
        assert_eq!(s.steering_mode(), QueueMode::All, "changed in memory");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{broken");

        // A file broken after start-up is not overwritten either.
        std::fs::write(&path, "{}").unwrap();
        let mut s = Settings::load(agent.path(), &nested);
        std::fs::write(&path, "[1").unwrap();
        assert!(s.set_global("steeringMode", json!("all")).is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "[1");
    }

    #[cfg(unix)]
    #[test]
    fn writes_keep_permissions_and_go_through_links() {
        use std::os::unix::fs::PermissionsExt;
        let agent = tempfile::tempdir().unwrap();
        let real = agent.path().join("dotfiles.json");
        std::fs::write(&real, r#"{"a":1}"#).unwrap();
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::os::unix::fs::symlink(&real, agent.path().join("settings.json")).unwrap();
        let mut s = Settings::load(agent.path(), agent.path());
        s.set_global("retry.enabled", json!(false)).unwrap();
        let link = std::fs::symlink_metadata(agent.path().join("settings.json")).unwrap();
        assert!(link.file_type().is_symlink(), "the link stays a link");
        let meta = std::fs::metadata(&real).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(
            serde_json::from_str::<Value>(&std::fs::read_to_string(&real).unwrap()).unwrap(),
            json!({"a": 1, "retry": {"enabled": false}})
        );
    }

    #[cfg(unix)]
    #[test]
    fn planted_files_are_refused_unread_named_at_once_and_never_written() {
        let agent = tempfile::tempdir().unwrap();
        let cwd = tempfile::tempdir().unwrap();
        let global = agent.path().join("settings.json");
        std::os::unix::fs::symlink("/dev/zero", &global).unwrap();
        let [pi, tau] = project_files(cwd.path());
        std::fs::create_dir_all(pi.parent().unwrap()).unwrap();
        std::fs::create_dir_all(tau.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink("/dev/zero", &pi).unwrap();
        // Sparse: over the cap without costing the disk anything.
        std::fs::File::create(&tau)
            .unwrap()
            .set_len(CONFIG_CAP + 1)
            .unwrap();
        let mut s = Settings::load(agent.path(), cwd.path());
        let device = |path: &Path| {
            format!(
                "Cannot read {}: it is a device, not a regular file; its settings are ignored",
                path.display()
            )
        };
        assert_eq!(s.warnings()[..2], [device(&global), device(&pi)]);
        assert!(
            s.warnings()[2].starts_with(&format!(
                "Cannot read {}: it is larger than 1 MiB",
                tau.display()
            )),
            "{:?}",
            s.warnings()
        );
        assert_eq!(s.warnings().len(), 3);
        assert!(s.held_project_files().is_empty(), "nothing to apply later");
        // An unreadable global file is never written (in memory only, as before).
        s.set_global("a", json!(1)).unwrap();
        let err = write_key(&global, "a", json!(1)).unwrap_err();
        assert_eq!(
            err,
            format!(
                "cannot write {}: it is a device, not a regular file",
                global.display()
            )
        );
        assert!(!Path::new("/dev/zero.lock").exists());
        let err = write_key(&tau, "a", json!(1)).unwrap_err();
        assert!(err.contains("larger than 1 MiB"), "{err}");
        assert_eq!(std::fs::metadata(&tau).unwrap().len(), CONFIG_CAP + 1);
    }

    #[test]
    fn a_stale_lock_is_taken_over_and_a_live_one_waited_for() {
        let agent = tempfile::tempdir().unwrap();
        let path = agent.path().join("settings.json");
        let lock = agent.path().join("settings.json.lock");
        std::fs::create_dir(&lock).unwrap();
        let mut s = Settings::load(agent.path(), agent.path());
        let err = s.set_global("a", json!(1)).unwrap_err();
        assert!(err.contains("held by another process"), "{err}");
        assert!(!path.exists());
        let old = std::time::SystemTime::now() - Duration::from_secs(60);
        std::fs::File::open(&lock)
            .unwrap()
            .set_modified(old)
            .unwrap();
        s.set_global("a", json!(1)).unwrap();
        assert!(path.exists());
        assert!(!lock.exists());
    }

    /// Writes `doc` as the settings file at `path`, nested by the dots of its keys.
    fn write_nested(path: &Path, doc: &[(String, Value)]) {
        let mut map = Map::new();
        for (key, value) in doc {
            set_path(&mut map, key, value.clone());
        }
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, serde_json::to_string(&Value::Object(map)).unwrap()).unwrap();
    }

    fn arbitrary_value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        prop_oneof![
            any::<bool>().prop_map(Value::from),
            any::<u32>().prop_map(Value::from),
            "[a-z ;|$()]{0,12}".prop_map(Value::from),
            proptest::collection::vec("[a-z./]{1,8}", 0..3).prop_map(Value::from),
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        /// For every key tau reads, whatever the project's files say: untrusted, tau sees
        /// exactly the user's settings (the key answers as the user set it, or not at all);
        /// trusted, the project's `.tau` value wins over its `.pi` one and over the user's.
        #[test]
        fn no_key_of_an_untrusted_project_applies(
            picks in proptest::collection::vec(
                (0..KEYS.len(), arbitrary_value(), arbitrary_value(), arbitrary_value()),
                1..8,
            ),
        ) {
            let agent = tempfile::tempdir().unwrap();
            let cwd = tempfile::tempdir().unwrap();
            let mut user = Vec::new();
            let mut pi = Vec::new();
            let mut tau = Vec::new();
            for (index, u, p, t) in &picks {
                let name = KEYS[*index].name.to_string();
                user.push((name.clone(), u.clone()));
                pi.push((name.clone(), p.clone()));
                tau.push((name, t.clone()));
            }
            // Half the keys only in the project, so "not at all" is checked too.
            let user: Vec<_> = user.into_iter().step_by(2).collect();
            write_nested(&agent.path().join("settings.json"), &user);
            write_nested(&cwd.path().join(".pi/settings.json"), &pi);
            write_nested(&cwd.path().join(".tau/settings.json"), &tau);

            let alone = Settings::load(agent.path(), tempfile::tempdir().unwrap().path());
            let untrusted = Settings::load(agent.path(), cwd.path());
            for key in KEYS {
                proptest::prop_assert_eq!(untrusted.lookup(key.name), alone.lookup(key.name), "{}", key.name);
            }
            proptest::prop_assert_eq!(untrusted.held_project_files().len(), 2);
            proptest::prop_assert_eq!(untrusted.default_project_trust(), alone.default_project_trust());

            let trusted = Settings::load_for(agent.path(), cwd.path(), true);
            for (name, value) in &tau {
                // A later pick of the same key (or of its parent object) may have replaced it.
                if tau.iter().rev().find(|(n, _)| n == name).map(|(_, v)| v) == Some(value)
                    && !tau.iter().any(|(n, _)| name.starts_with(&format!("{n}.")))
                {
                    proptest::prop_assert_eq!(trusted.lookup(name), Some(value), "{}", name);
                }
            }
            // The project never decides its own trust, even trusted.
            proptest::prop_assert_eq!(trusted.default_project_trust(), alone.default_project_trust());
        }
    }

    #[test]
    fn every_key_says_what_it_can_do_and_the_dangerous_ones_are_named() {
        let reach = |name: &str| KEYS.iter().find(|k| k.name == name).map(|k| k.reach);
        assert_eq!(reach("shellCommandPrefix"), Some(Reach::RunsCode));
        assert_eq!(reach("shellPath"), Some(Reach::RunsCode));
        assert_eq!(reach("packages"), Some(Reach::RunsCode));
        assert_eq!(reach("extensions"), Some(Reach::RunsCode));
        assert_eq!(reach("sessionDir"), Some(Reach::MovesData));
        assert_eq!(reach("defaultProjectTrust"), Some(Reach::GrantsTrust));
        let mut names: Vec<_> = KEYS.iter().map(|k| k.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), KEYS.len(), "each key once");
    }
}
