//! How the user wants the session to behave, as opposed to what it holds: the settings read
//! from disk, the queue and interrupt modes, the automatic compaction and retry switches and
//! the reply language. Plain state: a change the client makes is saved to the global settings
//! file here (pi's setters), and [`Preferences::set`] reports the queue modes when they changed,
//! because the run task reads those from the conversation and the session must copy them there.

use std::path::Path;

use serde_json::{Value, json};
use tau_ai::provider::{IdleCap, StreamOptions, ThinkingBudgets};
use tau_protocol::{InterruptMode, QueueMode};

use crate::Settings;
use crate::compaction::CompactionSettings;
use crate::retry::RetrySettings;

/// One change a client asks for (`set_steering_mode`, `set_auto_retry`, `set_locale`, …).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Preference {
    /// Saved as `steeringMode`, as pi does.
    SteeringMode(QueueMode),
    /// Saved as `followUpMode`, as pi does.
    FollowUpMode(QueueMode),
    /// Saved as `interruptMode`, as xcsh does.
    InterruptMode(InterruptMode),
    /// Saved as `compaction.enabled`, as pi does.
    AutoCompaction(bool),
    /// Saved as `retry.enabled`, as pi does.
    AutoRetry(bool),
    /// xcsh's `set_locale` (and a prompt's `locale`): never refused and never saved; an empty
    /// locale removes the request for a reply language.
    Locale(String),
}

/// The modes the run task reads from the conversation while it streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueModes {
    pub steering: QueueMode,
    pub follow_up: QueueMode,
    pub interrupt: InterruptMode,
}

/// The settings and the switches a client can flip.
#[derive(Debug)]
pub struct Preferences {
    settings: Settings,
    modes: QueueModes,
    auto_compaction: bool,
    auto_retry: bool,
    locale: Option<String>,
}

impl Preferences {
    /// Starts from what the settings say.
    pub fn new(settings: Settings) -> Self {
        Self {
            modes: QueueModes {
                steering: settings.steering_mode(),
                follow_up: settings.follow_up_mode(),
                interrupt: settings.interrupt_mode(),
            },
            auto_compaction: settings.compaction_enabled(),
            auto_retry: settings.retry_enabled(),
            locale: None,
            settings,
        }
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }
    pub fn queue_modes(&self) -> QueueModes {
        self.modes
    }
    pub fn steering_mode(&self) -> QueueMode {
        self.modes.steering
    }
    pub fn follow_up_mode(&self) -> QueueMode {
        self.modes.follow_up
    }
    pub fn interrupt_mode(&self) -> InterruptMode {
        self.modes.interrupt
    }
    pub fn auto_compaction_enabled(&self) -> bool {
        self.auto_compaction
    }
    pub fn auto_retry_enabled(&self) -> bool {
        self.auto_retry
    }
    /// The language the system prompt asks replies in, normalised (`de-DE`).
    pub fn locale(&self) -> Option<&str> {
        self.locale.as_deref()
    }

    /// Applies a client's change and saves it; the queue modes when they are what changed.
    pub fn set(&mut self, preference: Preference) -> Option<QueueModes> {
        let (key, value) = match preference {
            Preference::SteeringMode(mode) => {
                self.modes.steering = mode;
                ("steeringMode", json!(mode))
            }
            Preference::FollowUpMode(mode) => {
                self.modes.follow_up = mode;
                ("followUpMode", json!(mode))
            }
            Preference::InterruptMode(mode) => {
                self.modes.interrupt = mode;
                ("interruptMode", json!(mode))
            }
            Preference::AutoCompaction(enabled) => {
                self.auto_compaction = enabled;
                self.save(&[("compaction.enabled", json!(enabled))]);
                return None;
            }
            Preference::AutoRetry(enabled) => {
                self.auto_retry = enabled;
                self.save(&[("retry.enabled", json!(enabled))]);
                return None;
            }
            Preference::Locale(locale) => {
                self.locale = crate::system_prompt::normalize_locale(&locale);
                return None;
            }
        };
        self.save(&[(key, value)]);
        Some(self.modes)
    }

    /// Writes changed settings to the global settings file (pi's setters). A file that cannot
    /// be written does not fail the command: the change holds for this process.
    pub fn save(&mut self, changes: &[(&str, Value)]) {
        if let Err(err) = self.settings.set_global_all(changes) {
            tracing::warn!("settings not saved: {err}");
        }
    }

    /// `ctx.reload()`: the settings read again, and the queue modes they set (pi's reload
    /// leaves the interrupt mode and the automatic switches as the client set them).
    pub fn reload(&mut self, agent_dir: &Path, cwd: &Path, project_trusted: bool) -> QueueModes {
        self.settings = Settings::load_for(agent_dir, cwd, project_trusted);
        for warning in self.settings.warnings() {
            tracing::warn!("{warning}");
        }
        self.modes.steering = self.settings.steering_mode();
        self.modes.follow_up = self.settings.follow_up_mode();
        self.modes
    }

    /// Automatic retry for a run that starts now: the settings, unless the client turned it off.
    pub fn retry_settings(&self) -> RetrySettings {
        let mut retry = RetrySettings::from_settings(&self.settings);
        retry.enabled &= self.auto_retry;
        retry
    }

    /// Compaction as a run that starts now does it: the settings, unless the client turned
    /// automatic compaction off.
    pub fn compaction_settings(&self) -> CompactionSettings {
        let mut settings = CompactionSettings::from_settings(&self.settings);
        settings.enabled &= self.auto_compaction;
        settings
    }

    /// The request options settings decide: thinking budgets, the idle and request timeouts,
    /// provider-level retries; `idle_cap` is the session's, tightened when stdin closes.
    pub fn provider_options(&self, idle_cap: IdleCap) -> StreamOptions {
        let settings = &self.settings;
        StreamOptions {
            thinking_budgets: ThinkingBudgets {
                minimal: settings.thinking_budget("minimal"),
                low: settings.thinking_budget("low"),
                medium: settings.thinking_budget("medium"),
                high: settings.thinking_budget("high"),
            },
            idle_timeout: settings.http_idle_timeout(),
            request_timeout: settings.provider_timeout(),
            max_retries: settings.provider_max_retries(),
            max_retry_delay: settings.provider_max_retry_delay(),
            idle_cap,
            ..StreamOptions::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Preferences over a global settings file in a temp agent dir.
    fn preferences(global: &Value) -> (tempfile::TempDir, Preferences) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("settings.json"), global.to_string()).unwrap();
        let cwd = dir.path().join("project");
        std::fs::create_dir(&cwd).unwrap();
        let settings = Settings::load_for(dir.path(), &cwd, false);
        (dir, Preferences::new(settings))
    }

    fn saved(dir: &tempfile::TempDir) -> Value {
        let text = std::fs::read_to_string(dir.path().join("settings.json")).unwrap();
        serde_json::from_str(&text).unwrap()
    }

    #[test]
    fn starts_from_the_settings() {
        let (_dir, p) = preferences(&json!({"steeringMode": "all", "interruptMode": "immediate",
            "compaction": {"enabled": false}}));
        assert_eq!(p.steering_mode(), QueueMode::All);
        assert_eq!(p.follow_up_mode(), QueueMode::OneAtATime);
        assert_eq!(p.interrupt_mode(), InterruptMode::Immediate);
        assert!(!p.auto_compaction_enabled() && p.auto_retry_enabled());
        assert!(!p.compaction_settings().enabled && p.retry_settings().enabled);
    }

    #[test]
    fn a_change_is_saved_and_the_queue_modes_are_reported_only_when_they_changed() {
        let (dir, mut p) = preferences(&json!({}));
        let modes = p.set(Preference::FollowUpMode(QueueMode::All)).unwrap();
        assert_eq!(modes.follow_up, QueueMode::All);
        assert_eq!(saved(&dir)["followUpMode"], "all");
        assert_eq!(p.set(Preference::AutoRetry(false)), None);
        assert!(!p.retry_settings().enabled);
        assert_eq!(saved(&dir)["retry"]["enabled"], false);
        let modes = p
            .set(Preference::InterruptMode(InterruptMode::Immediate))
            .unwrap();
        assert_eq!(modes.interrupt, InterruptMode::Immediate);
        assert_eq!(saved(&dir)["interruptMode"], "immediate");
    }

    #[test]
    fn the_locale_is_normalised_and_never_saved() {
        let (dir, mut p) = preferences(&json!({}));
        assert_eq!(p.set(Preference::Locale("de_DE.UTF-8".into())), None);
        assert_eq!(p.locale(), Some("de-DE"));
        assert_eq!(saved(&dir), json!({}));
        p.set(Preference::Locale(String::new()));
        assert_eq!(p.locale(), None);
    }

    #[test]
    fn reload_takes_the_queue_modes_from_disk_and_keeps_the_switches() {
        let (dir, mut p) = preferences(&json!({}));
        p.set(Preference::InterruptMode(InterruptMode::Immediate));
        p.set(Preference::AutoCompaction(false));
        std::fs::write(
            dir.path().join("settings.json"),
            json!({"steeringMode": "all", "interruptMode": "wait",
                "compaction": {"enabled": true}})
            .to_string(),
        )
        .unwrap();
        let modes = p.reload(dir.path(), &dir.path().join("project"), false);
        assert_eq!(modes.steering, QueueMode::All);
        assert_eq!(
            modes.interrupt,
            InterruptMode::Immediate,
            "kept as the client set it"
        );
        assert!(!p.auto_compaction_enabled());
        assert_eq!(p.settings().steering_mode(), QueueMode::All);
    }
}
