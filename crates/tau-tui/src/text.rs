//! Text taken from the protocol's records for display: a message's content as plain text,
//! and anything shown on one line. Shared by the conversation, `/tree` and `/resume`.

use serde::Deserialize;
use serde_json::Value;
use tau_protocol::{AssistantContent, UserContent, UserContentBlock};

/// The text of a message's content (a string, or the text blocks one per line).
pub fn content_text(content: &UserContent) -> String {
    content.text("\n")
}

/// [`content_text`] of a content in a session entry (`/tree`, `/resume`). Entries are
/// free-form JSON; content that is not the protocol's shows as no text rather than hiding the
/// entry.
pub fn entry_content_text(content: &Value) -> String {
    UserContent::deserialize(content)
        .map(|content| content_text(&content))
        .unwrap_or_default()
}

/// The text blocks of an answer, one per line (thinking and tool calls left out).
pub fn assistant_text(content: &[AssistantContent]) -> String {
    content
        .iter()
        .filter_map(|block| match block {
            AssistantContent::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// What the screen shows of a content: its text, and a line naming each image (the terminal
/// cannot draw it).
pub fn shown_content(blocks: &[UserContentBlock]) -> String {
    let mut text = tau_protocol::content::text_of(blocks, "\n");
    for block in blocks {
        let UserContentBlock::Image(image) = block else {
            continue;
        };
        // Base64: four characters carry three bytes.
        let bytes = image.data.len() / 4 * 3;
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&format!(
            "[image {}, {} KB]",
            image.mime_type,
            bytes.div_ceil(1024)
        ));
    }
    text
}

/// [`shown_content`] of a user's message, whose content may be a plain string.
pub fn shown_user_content(content: &UserContent) -> String {
    match content {
        UserContent::Text(text) => text.clone(),
        UserContent::Blocks(blocks) => shown_content(blocks),
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
