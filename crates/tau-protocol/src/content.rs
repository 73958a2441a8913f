//! Reading the text out of content: what providers send for a tool result, what compaction
//! summarises, what fork listings and error texts show. One rule, written once: text blocks
//! in order, images left out, joined by the caller's separator. And the images, for the
//! callers that keep them apart from the text.

use crate::{ImageContent, UserContent, UserContentBlock};

/// The text blocks' texts, in order.
pub fn texts(blocks: &[UserContentBlock]) -> impl Iterator<Item = &str> {
    blocks.iter().filter_map(|block| match block {
        UserContentBlock::Text(t) => Some(t.text.as_str()),
        UserContentBlock::Image(_) => None,
    })
}

/// The text blocks joined by `separator` (`""` as pi joins a user message, `"\n"` as it
/// joins a tool result).
pub fn text_of(blocks: &[UserContentBlock], separator: &str) -> String {
    texts(blocks).collect::<Vec<_>>().join(separator)
}

/// True when some block is an image.
pub fn has_images(blocks: &[UserContentBlock]) -> bool {
    blocks
        .iter()
        .any(|block| matches!(block, UserContentBlock::Image(_)))
}

impl UserContent {
    /// A plain string as it is, else the text blocks joined by `separator`.
    pub fn text(&self, separator: &str) -> String {
        match self {
            UserContent::Text(text) => text.clone(),
            UserContent::Blocks(blocks) => text_of(blocks, separator),
        }
    }

    /// The image blocks, in order.
    pub fn images(&self) -> Vec<ImageContent> {
        match self {
            UserContent::Text(_) => Vec::new(),
            UserContent::Blocks(blocks) => blocks
                .iter()
                .filter_map(|block| match block {
                    UserContentBlock::Image(image) => Some(image.clone()),
                    UserContentBlock::Text(_) => None,
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ImageContent, TextContent};

    #[test]
    fn images_are_left_out_and_the_separator_is_the_callers() {
        let text = |t: &str| {
            UserContentBlock::Text(TextContent {
                text: t.into(),
                text_signature: None,
            })
        };
        let blocks = vec![
            text("a"),
            UserContentBlock::Image(ImageContent {
                data: String::new(),
                mime_type: "image/png".into(),
            }),
            text("b"),
        ];
        assert_eq!(text_of(&blocks, "\n"), "a\nb");
        assert_eq!(UserContent::Blocks(blocks.clone()).images().len(), 1);
        assert_eq!(UserContent::Blocks(blocks.clone()).text(""), "ab");
        assert_eq!(UserContent::Text("plain".into()).text("\n"), "plain");
        assert!(has_images(&blocks));
        assert!(!has_images(&blocks[..1]));
    }
}
