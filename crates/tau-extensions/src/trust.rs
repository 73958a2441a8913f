//! Project trust (ext §1.5, docs/security.md): the decisions remembered in
//! `<agentDir>/trust.json`, the file pi keeps (so a decision made in either agent holds in the
//! other). The order of the deciding steps lives at the binary's edge; what waits for trust
//! is `tau_resources::waits_for_trust`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error("Failed to read trust store {path}: {reason}")]
    Read { path: String, reason: String },
    #[error("Invalid trust store {path}: {reason}")]
    Invalid { path: String, reason: String },
    #[error("Failed to write trust store {path}: {reason}")]
    Write { path: String, reason: String },
}

fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// `<agentDir>/trust.json`: canonical folder paths mapped to `true` (trusted) or `false`; a
/// decision covers the folders below it unless one of them has its own.
pub struct TrustStore {
    path: PathBuf,
}

impl TrustStore {
    pub fn new(agent_dir: &Path) -> Self {
        Self {
            path: agent_dir.join("trust.json"),
        }
    }

    /// The decision for `cwd` or its nearest ancestor that has one.
    pub fn get(&self, cwd: &Path) -> Result<Option<bool>, TrustError> {
        let data = self.read()?;
        Ok(canonical(cwd)
            .ancestors()
            .find_map(|dir| data.get(&dir.display().to_string()).copied().flatten()))
    }

    /// Remembers `trusted` for `cwd`, keeping every other entry; written whole through the
    /// one atomic-write helper (synced, then renamed over the old file), so a crash never
    /// leaves half a file.
    pub fn set(&self, cwd: &Path, trusted: bool) -> Result<(), TrustError> {
        let mut data = self.read()?;
        data.insert(canonical(cwd).display().to_string(), Some(trusted));
        let failed = |e: &dyn std::fmt::Display| TrustError::Write {
            path: self.path.display().to_string(),
            reason: e.to_string(),
        };
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(|e| failed(&e))?;
        let mut text = serde_json::to_string_pretty(&data).map_err(|e| failed(&e))?;
        text.push('\n');
        tau_base::atomic::write_atomically(&self.path, text.as_bytes()).map_err(|e| failed(&e))
    }

    /// `null` values are kept (pi writes them to clear an entry below a trusted parent).
    fn read(&self) -> Result<BTreeMap<String, Option<bool>>, TrustError> {
        let path = self.path.display().to_string();
        // The user's file, but a link can lead anywhere: a FIFO must not hang the start.
        let text =
            match tau_base::bounded::read_to_string(&self.path, tau_base::bounded::CONFIG_CAP) {
                Ok(text) => text,
                Err(tau_base::bounded::BoundedReadError::NotFound) => return Ok(BTreeMap::new()),
                Err(e) => {
                    return Err(TrustError::Read {
                        path,
                        reason: e.to_string(),
                    });
                }
            };
        let value: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| TrustError::Read {
                path: path.clone(),
                reason: e.to_string(),
            })?;
        let serde_json::Value::Object(map) = value else {
            return Err(TrustError::Invalid {
                path,
                reason: "expected an object".into(),
            });
        };
        map.into_iter()
            .map(|(key, value)| match value {
                serde_json::Value::Bool(b) => Ok((key, Some(b))),
                serde_json::Value::Null => Ok((key, None)),
                _ => Err(TrustError::Invalid {
                    path: path.clone(),
                    reason: format!("value for {key:?} must be true, false, or null"),
                }),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions_are_remembered_and_inherited_by_subfolders() {
        let agent = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let root = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let child = root.path().join("child");
        std::fs::create_dir_all(&child).unwrap_or_else(|e| panic!("{e}"));
        let store = TrustStore::new(agent.path());
        assert_eq!(store.get(&child).ok().flatten(), None);
        store
            .set(root.path(), true)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(store.get(&child).ok().flatten(), Some(true));
        store.set(&child, false).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(store.get(&child).ok().flatten(), Some(false));
        assert_eq!(store.get(root.path()).ok().flatten(), Some(true));
        // pi's null entries survive a write.
        std::fs::write(
            agent.path().join("trust.json"),
            r#"{"/elsewhere": null, "/x": true}"#,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        store.set(&child, true).unwrap_or_else(|e| panic!("{e}"));
        let text = std::fs::read_to_string(agent.path().join("trust.json"))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(text.contains("\"/elsewhere\": null"), "{text}");
        std::fs::write(agent.path().join("trust.json"), "[1]").unwrap_or_else(|e| panic!("{e}"));
        assert!(store.get(&child).is_err());
    }
}
