//! Settings from `settings.json`: the global file in the agent directory, then the project's
//! `.pi/settings.json` and `.tau/settings.json` (later files win, objects merged one level
//! deep, as pi merges). A file that does not parse, or a value of the wrong type, is reported
//! on stderr and ignored: a broken settings file must not keep the agent from starting.
//!
//! Changes made over RPC are session-local and never written back (decision 12).

use std::path::Path;

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use tau_protocol::ThinkingLevel;
use tau_protocol::{InterruptMode, QueueMode};

/// The effective settings, typed where tau uses them, with the merged document kept for
/// keys later issues read.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    merged: Map<String, Value>,
}

impl Settings {
    /// Reads the global and project settings files. Missing files are simply absent.
    pub fn load(agent_dir: &Path, cwd: &Path) -> Self {
        let mut merged = Map::new();
        for path in [
            agent_dir.join("settings.json"),
            cwd.join(".pi").join("settings.json"),
            cwd.join(".tau").join("settings.json"),
        ] {
            if let Some(layer) = read_layer(&path) {
                merge_into(&mut merged, layer);
            }
        }
        Self { merged }
    }

    /// Builds settings from an in-memory document (tests, embedding).
    pub fn from_value(value: Map<String, Value>) -> Self {
        Self { merged: value }
    }

    /// A top-level or dotted (`compaction.enabled`) key, typed; `None` if unset or mistyped.
    pub fn get<T: DeserializeOwned>(&self, key: &str) -> Option<T> {
        let mut parts = key.split('.');
        let first = parts.next()?;
        let mut value = self.merged.get(first)?;
        for part in parts {
            value = value.get(part)?;
        }
        match T::deserialize(value) {
            Ok(v) => Some(v),
            Err(err) => {
                tracing::warn!("ignoring setting {key}: {err}");
                None
            }
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
}

/// The strings of an array setting in one settings file alone (resources that are listed
/// per file, relative to that file's folder).
pub(crate) fn array_in_file(path: &Path, key: &str) -> Vec<String> {
    read_layer(path)
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

fn read_layer(path: &Path) -> Option<Map<String, Value>> {
    let text = match std::fs::read(path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return None,
        Err(err) => {
            tracing::warn!("cannot read {}: {err}", path.display());
            return None;
        }
    };
    match serde_json::from_slice::<Value>(&text) {
        Ok(Value::Object(map)) => Some(map),
        Ok(_) => {
            tracing::warn!("ignoring {}: not a JSON object", path.display());
            None
        }
        Err(err) => {
            tracing::warn!("ignoring {}: {err}", path.display());
            None
        }
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
        let s = Settings::load(agent.path(), cwd.path());
        assert_eq!(s.steering_mode(), QueueMode::All);
        assert_eq!(s.follow_up_mode(), QueueMode::All);
        assert!(!s.compaction_enabled());
        assert_eq!(s.get::<u64>("compaction.reserveTokens"), Some(7));
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
}
