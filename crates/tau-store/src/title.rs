//! A session's title for listings (ACP's `session/list`): its name, else its first user
//! message on one line, cut to [`TITLE_CHARS`]. Read from the start of the file and no further
//! than the first user message, so listing many long sessions stays quick; a name given after
//! that message is not seen here (decision T122).

use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use serde::Deserialize;

/// The longest title, in characters (the last one an ellipsis when cut).
pub const TITLE_CHARS: usize = 80;

/// The most bytes read for a title, whatever the lines: a first message may hold a pasted
/// image, and a planted file may be endless.
const SCAN_BYTES: u64 = 8 << 20;

/// What a line says, as far as a title needs it; everything else in it is skipped unread.
#[derive(Deserialize)]
struct Line {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    message: Option<Message>,
}

#[derive(Deserialize)]
struct Message {
    role: String,
    #[serde(default)]
    content: Option<Content>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Blocks(Vec<Block>),
}

#[derive(Deserialize)]
struct Block {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    text: Option<String>,
}

/// The title of the session file at `path`: the name of the last `session_info` before the
/// first user message (an empty one clears it), else that message's text; `None` for a file
/// with neither (or one that cannot be read).
pub fn session_title(path: &Path) -> Option<String> {
    let file = tau_base::bounded::open_regular(path).ok()?;
    let mut reader = BufReader::new(file.take(SCAN_BYTES));
    let mut name: Option<String> = None;
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let Ok(entry) = serde_json::from_slice::<Line>(&line) else {
            continue;
        };
        match entry.kind.as_str() {
            "session_info" => name = entry.name.filter(|n| !n.trim().is_empty()),
            "message" => {
                let Some(message) = entry.message.filter(|m| m.role == "user") else {
                    continue;
                };
                let text = match message.content {
                    Some(Content::Text(text)) => text,
                    Some(Content::Blocks(blocks)) => blocks
                        .into_iter()
                        .filter(|b| b.kind == "text")
                        .filter_map(|b| b.text)
                        .collect::<Vec<_>>()
                        .join(" "),
                    None => String::new(),
                };
                return one_line(name.as_deref().unwrap_or(&text));
            }
            _ => {}
        }
    }
    name.as_deref().and_then(one_line)
}

/// `text` with its whitespace runs as single spaces, trimmed, cut to [`TITLE_CHARS`]; `None`
/// when nothing is left.
pub fn one_line(text: &str) -> Option<String> {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.is_empty() {
        return None;
    }
    if flat.chars().count() <= TITLE_CHARS {
        return Some(flat);
    }
    let mut cut: String = flat.chars().take(TITLE_CHARS - 1).collect();
    cut.truncate(cut.trim_end().len());
    cut.push('…');
    Some(cut)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn file(lines: &[serde_json::Value]) -> tempfile::NamedTempFile {
        let mut text = String::new();
        for line in lines {
            text.push_str(&line.to_string());
            text.push('\n');
        }
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), text).unwrap();
        file
    }

    fn header() -> serde_json::Value {
        json!({"type": "session", "version": 3, "id": "s", "cwd": "/w", "timestamp": "2026-01-01T00:00:00.000Z"})
    }

    fn user(content: serde_json::Value) -> serde_json::Value {
        json!({"type": "message", "id": "a", "parentId": null, "timestamp": "t",
               "message": {"role": "user", "content": content, "timestamp": 1}})
    }

    #[test]
    fn the_first_user_message_on_one_line() {
        let f = file(&[
            header(),
            json!({"type": "model_change", "provider": "p", "modelId": "m"}),
            user(json!([{"type": "text", "text": "  fix the\n\n parser  "},
                        {"type": "image", "data": "AAAA", "mimeType": "image/png"},
                        {"type": "text", "text": "please"}])),
            user(json!("second")),
        ]);
        assert_eq!(
            session_title(f.path()).as_deref(),
            Some("fix the parser please")
        );
        let f = file(&[header(), user(json!("plain string"))]);
        assert_eq!(session_title(f.path()).as_deref(), Some("plain string"));
    }

    #[test]
    fn a_name_given_before_the_first_message_wins_and_an_empty_one_clears_it() {
        let f = file(&[
            header(),
            json!({"type": "session_info", "name": "old"}),
            json!({"type": "session_info", "name": "release notes"}),
            user(json!("write them")),
        ]);
        assert_eq!(session_title(f.path()).as_deref(), Some("release notes"));
        let f = file(&[
            header(),
            json!({"type": "session_info", "name": "old"}),
            json!({"type": "session_info"}),
            user(json!("write them")),
        ]);
        assert_eq!(session_title(f.path()).as_deref(), Some("write them"));
        let f = file(&[
            header(),
            json!({"type": "session_info", "name": "named only"}),
        ]);
        assert_eq!(session_title(f.path()).as_deref(), Some("named only"));
    }

    #[test]
    fn reading_stops_at_the_first_user_message() {
        let f = file(&[
            header(),
            user(json!("first")),
            json!({"type": "session_info", "name": "later name"}),
        ]);
        assert_eq!(session_title(f.path()).as_deref(), Some("first"));
    }

    #[test]
    fn no_message_and_no_name_is_no_title() {
        let f = file(&[header()]);
        assert_eq!(session_title(f.path()), None);
        assert_eq!(session_title(Path::new("/no/such/file.jsonl")), None);
    }

    #[test]
    fn long_titles_are_cut_with_an_ellipsis() {
        let long = "word ".repeat(40);
        let title = one_line(&long).unwrap();
        assert!(title.chars().count() <= TITLE_CHARS, "{title}");
        assert!(title.ends_with("word…"), "{title}");
        assert!(!title.contains("  "));
        assert_eq!(one_line(" \n\t "), None);
        let exact = "x".repeat(TITLE_CHARS);
        assert_eq!(one_line(&exact), Some(exact.clone()));
    }
}
