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

/// The sessions in `dir`, newest first.
pub fn list(dir: &Path) -> Vec<Summary> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<(std::time::SystemTime, Summary)> = Vec::new();
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) != Some("jsonl") {
            continue;
        }
        // A FIFO or a device named `x.jsonl` is no session to offer: reading it for a label,
        // or opening it once picked, would wait for ever.
        if tau_base::bounded::check_regular(&path).is_err() {
            continue;
        }
        let modified = entry
            .metadata()
            .and_then(|m| m.modified())
            .unwrap_or(std::time::SystemTime::UNIX_EPOCH);
        let name = label_of(&path).unwrap_or_else(|| "(no messages)".to_string());
        let when = modified_label(modified);
        found.push((
            modified,
            Summary {
                path: path.to_string_lossy().into_owned(),
                label: format!("{when}  {name}"),
            },
        ));
    }
    found.sort_by_key(|(modified, _)| std::cmp::Reverse(*modified));
    found.into_iter().map(|(_, s)| s).collect()
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
                first_message = Some(crate::app::content_text(&entry["message"]["content"]));
            }
            _ => {}
        }
    }
    let label = name.or(first_message)?;
    let flat: String = label.split_whitespace().collect::<Vec<_>>().join(" ");
    Some(if flat.chars().count() > 80 {
        flat.chars().take(79).collect::<String>() + "…"
    } else {
        flat
    })
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
