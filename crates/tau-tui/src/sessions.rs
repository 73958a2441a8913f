//! The sessions `/resume` offers: the session files of this folder, newest first, each named
//! by its session name or first message, read from the file's beginning only.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use serde_json::Value;

/// One session to offer.
pub struct Summary {
    pub path: String,
    pub label: String,
}

/// How far into a file a label is looked for: sessions can be large, the list must be quick.
const SCAN_LINES: usize = 200;

/// The most bytes read for a label, whatever the lines: one line of a session can be
/// arbitrarily long (a pasted image), and a planted file endless.
const SCAN_BYTES: u64 = 8 << 20;

/// The sessions in `dir`, newest first, as the store lists them.
pub fn list(dir: &Path) -> Vec<Summary> {
    tau_store::list_sessions(&[dir.to_path_buf()], None)
        .into_iter()
        .map(|file| {
            let name = label_of(&file.path).unwrap_or_else(|| "(no messages)".to_string());
            let when = modified_label(file.modified);
            Summary {
                path: file.path.to_string_lossy().into_owned(),
                label: format!("{when}  {name}"),
            }
        })
        .collect()
}

fn label_of(path: &Path) -> Option<String> {
    let file = tau_base::bounded::open_regular(path).ok()?;
    let mut first_message = None;
    let mut name = None;
    for line in BufReader::new(file.take(SCAN_BYTES))
        .lines()
        .take(SCAN_LINES)
        .map_while(Result::ok)
    {
        let Ok(entry) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        match entry["type"].as_str() {
            Some("session_info") => name = entry["name"].as_str().map(str::to_string),
            Some("message") if first_message.is_none() && entry["message"]["role"] == "user" => {
                first_message = Some(crate::text::entry_content_text(
                    &entry["message"]["content"],
                ));
            }
            _ => {}
        }
    }
    Some(crate::text::one_line(&name.or(first_message)?, 80))
}

/// When a file was last written, in UTC: `YYYY-MM-DD HH:MM`.
fn modified_label(time: std::time::SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(time)
        .format("%Y-%m-%d %H:%M")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_civil() {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_764_288_000);
        assert_eq!(modified_label(t), "2025-11-28 00:00");
    }

    #[test]
    fn sessions_are_named_by_name_or_first_message() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let a = dir.path().join("a.jsonl");
        std::fs::write(&a, "{\"type\":\"session\",\"id\":\"1\"}\n{\"type\":\"message\",\"message\":{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"fix the  bug\"}]}}\n").unwrap_or_else(|e| panic!("{e}"));
        let listed = list(dir.path());
        assert_eq!(listed.len(), 1);
        assert!(
            listed[0].label.ends_with("fix the bug"),
            "{}",
            listed[0].label
        );
    }
}
