//! The prompt editor: a multi-line text buffer with a cursor, and the history of what was sent
//! (kept per project by the caller). Positions are byte offsets on char boundaries.

/// The text being written and where the cursor is.
#[derive(Debug, Default, Clone)]
pub struct Editor {
    text: String,
    cursor: usize,
    /// Sent messages, oldest first, and where Up/Down has got to (`None`: the draft).
    history: Vec<String>,
    browsing: Option<usize>,
    draft: String,
}

impl Editor {
    pub fn with_history(history: Vec<String>) -> Self {
        Self {
            history,
            ..Self::default()
        }
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    pub fn cursor(&self) -> usize {
        self.cursor
    }

    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    pub fn set_text(&mut self, text: &str) {
        self.text = text.to_string();
        self.cursor = self.text.len();
        self.browsing = None;
    }

    pub fn clear(&mut self) {
        self.set_text("");
    }

    /// Takes the text out (to send it) and records it in the history.
    pub fn take(&mut self) -> String {
        let text = std::mem::take(&mut self.text);
        self.cursor = 0;
        self.browsing = None;
        if !text.trim().is_empty() && self.history.last() != Some(&text) {
            self.history.push(text.clone());
        }
        text
    }

    pub fn history(&self) -> &[String] {
        &self.history
    }

    pub fn insert(&mut self, text: &str) {
        self.text.insert_str(self.cursor, text);
        self.cursor += text.len();
    }

    pub fn insert_char(&mut self, ch: char) {
        self.text.insert(self.cursor, ch);
        self.cursor += ch.len_utf8();
    }

    pub fn backspace(&mut self) {
        if let Some(prev) = self.text[..self.cursor].chars().next_back() {
            self.cursor -= prev.len_utf8();
            self.text.remove(self.cursor);
        }
    }

    pub fn delete(&mut self) {
        if self.cursor < self.text.len() {
            self.text.remove(self.cursor);
        }
    }

    pub fn left(&mut self) {
        if let Some(prev) = self.text[..self.cursor].chars().next_back() {
            self.cursor -= prev.len_utf8();
        }
    }

    pub fn right(&mut self) {
        if let Some(next) = self.text[self.cursor..].chars().next() {
            self.cursor += next.len_utf8();
        }
    }

    pub fn home(&mut self) {
        self.cursor = self.text[..self.cursor].rfind('\n').map_or(0, |i| i + 1);
    }

    pub fn end(&mut self) {
        self.cursor = self.text[self.cursor..]
            .find('\n')
            .map_or(self.text.len(), |i| self.cursor + i);
    }

    /// Deletes the word before the cursor (Ctrl+W).
    pub fn delete_word(&mut self) {
        let before = &self.text[..self.cursor];
        let trimmed = before.trim_end_matches(' ');
        let start = trimmed.rfind([' ', '\n']).map_or(0, |i| i + 1);
        self.text.replace_range(start..self.cursor, "");
        self.cursor = start;
    }

    /// Up: the line above, or from the first line the previous history entry.
    pub fn up(&mut self) {
        if self.text[..self.cursor].contains('\n') {
            self.move_vertically(-1);
            return;
        }
        let next = match self.browsing {
            None if !self.history.is_empty() => {
                self.draft = self.text.clone();
                self.history.len() - 1
            }
            Some(i) if i > 0 => i - 1,
            _ => return,
        };
        self.browsing = Some(next);
        self.text = self.history[next].clone();
        self.cursor = self.text.len();
    }

    /// Down: the line below, or the next history entry, then the draft.
    pub fn down(&mut self) {
        if self.text[self.cursor..].contains('\n') {
            self.move_vertically(1);
            return;
        }
        match self.browsing {
            Some(i) if i + 1 < self.history.len() => {
                self.browsing = Some(i + 1);
                self.text = self.history[i + 1].clone();
            }
            Some(_) => {
                self.browsing = None;
                self.text = std::mem::take(&mut self.draft);
            }
            None => return,
        }
        self.cursor = self.text.len();
    }

    fn move_vertically(&mut self, delta: i32) {
        let line_start = self.text[..self.cursor].rfind('\n').map_or(0, |i| i + 1);
        let column = self.text[line_start..self.cursor].chars().count();
        let target_start = if delta < 0 {
            let prev_end = line_start.saturating_sub(1);
            self.text[..prev_end].rfind('\n').map_or(0, |i| i + 1)
        } else {
            match self.text[self.cursor..].find('\n') {
                Some(i) => self.cursor + i + 1,
                None => return,
            }
        };
        let line_end = self.text[target_start..]
            .find('\n')
            .map_or(self.text.len(), |i| target_start + i);
        let mut cursor = target_start;
        for ch in self.text[target_start..line_end].chars().take(column) {
            cursor += ch.len_utf8();
        }
        self.cursor = cursor;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typing_and_deleting_multibyte_text() {
        let mut e = Editor::default();
        for ch in "héllo".chars() {
            e.insert_char(ch);
        }
        e.left();
        e.backspace();
        assert_eq!(e.text(), "hélo");
        e.home();
        e.delete();
        assert_eq!(e.text(), "élo");
    }

    #[test]
    fn history_walks_back_and_returns_to_the_draft() {
        let mut e = Editor::with_history(vec!["first".into(), "second".into()]);
        e.insert("draft");
        e.up();
        assert_eq!(e.text(), "second");
        e.up();
        assert_eq!(e.text(), "first");
        e.down();
        e.down();
        assert_eq!(e.text(), "draft");
    }

    #[test]
    fn up_moves_between_lines_before_history() {
        let mut e = Editor::with_history(vec!["old".into()]);
        e.insert("ab\ncd");
        e.up();
        assert_eq!(e.cursor(), 2);
        assert_eq!(e.text(), "ab\ncd");
        e.up();
        assert_eq!(e.text(), "old");
    }

    #[test]
    fn take_records_history_once() {
        let mut e = Editor::default();
        e.insert("same");
        assert_eq!(e.take(), "same");
        e.insert("same");
        e.take();
        assert_eq!(e.history(), ["same"]);
        assert!(e.is_empty());
    }
}
