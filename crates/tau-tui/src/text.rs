//! Text taken from the protocol's records for display: a message's content as plain text,
//! and anything shown on one line. Shared by the conversation, `/tree` and `/resume`.

use serde_json::Value;

/// The text blocks of a message's content (a string, or blocks).
pub fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// `text` with its whitespace runs as single spaces, cut to `max` characters.
pub fn one_line(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() > max {
        flat.chars().take(max - 1).collect::<String>() + "…"
    } else {
        flat
    }
}
