//! The keyboard and pastes: a key goes to the open dialog, else to an extension that bound
//! it, else to the slash-command list when it is open, else to the editor and the session's
//! own keys (see `HOTKEYS`). What only the terminal can do (run an editor, suspend, read the
//! clipboard, run `gh`) is asked of it as a [`Request`].

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use base64::Engine as _;
use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use tau_protocol::ImageContent;
use tau_protocol::rpc::{NoFields, RpcCommand, RunShortcutCommand};

use super::responses::Pending;
use super::{App, Dialog, DialogBody, Purpose};
use crate::transcript::{BlockKind, NoticeKind};

/// What the App asks of the terminal layer, which carries it out between two frames and
/// reports back ([`App::edited`], [`App::attach_image`], [`App::tell`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Ctrl+G: this text edited in `$VISUAL` or `$EDITOR`, the screen left meanwhile.
    Edit(String),
    /// Ctrl+Z: the screen left and the process stopped until the shell continues it.
    Suspend,
    /// Ctrl+V: an image from the clipboard (`wl-paste` or `xclip`).
    PasteImage,
    /// `/share`: this exported session put in a secret gist (`gh gist create`).
    Share(PathBuf),
}

/// The largest image attached from a file or the clipboard.
pub const IMAGE_CAP: u64 = 20 << 20;

/// The image types a prompt carries, by file extension.
fn image_type(extension: &str) -> Option<&'static str> {
    match extension.to_ascii_lowercase().as_str() {
        "png" => Some("image/png"),
        "jpg" | "jpeg" => Some("image/jpeg"),
        "gif" => Some("image/gif"),
        "webp" => Some("image/webp"),
        _ => None,
    }
}

/// The image file a paste names, with its type: one line, perhaps quoted or with escaped
/// spaces (as terminals paste a file dropped on them), that is an existing image file.
fn pasted_image(text: &str, cwd: &Path) -> Option<(PathBuf, &'static str)> {
    let text = text.trim();
    if text.is_empty() || text.contains('\n') {
        return None;
    }
    let unquoted = ['\'', '"']
        .iter()
        .find_map(|q| text.strip_prefix(*q).and_then(|t| t.strip_suffix(*q)))
        .unwrap_or(text);
    let named = unquoted.strip_prefix("file://").unwrap_or(unquoted);
    let named = named.replace("\\ ", " ");
    let kind = image_type(Path::new(&named).extension()?.to_str()?)?;
    let path = match named.strip_prefix("~/") {
        Some(rest) => PathBuf::from(std::env::var_os("HOME")?).join(rest),
        None => cwd.join(&named),
    };
    path.is_file().then_some((path, kind))
}

impl App {
    pub fn on_paste(&mut self, text: &str) {
        self.dirty = true;
        let text = text.replace("\r\n", "\n").replace('\r', "\n");
        match &mut self.dialog {
            // A key is pasted more often than typed: it goes where typed keys go, unseen.
            Some(Dialog {
                body: DialogBody::Input { editor, .. },
                purpose: Purpose::LoginKey { key, .. },
                ..
            }) => {
                let pasted = text.trim();
                key.push(pasted);
                editor.insert(&"•".repeat(pasted.chars().count()));
            }
            Some(Dialog {
                body: DialogBody::Input { editor, .. },
                ..
            }) => editor.insert(&text),
            Some(_) => {}
            None => {
                if let Some((path, kind)) = pasted_image(&text, &self.cwd) {
                    match tau_base::bounded::read(&path, IMAGE_CAP) {
                        Ok(bytes) => {
                            self.attach_image(kind, &bytes);
                            return;
                        }
                        Err(e) => self.notice(
                            format!("{} not attached: {e}", path.display()),
                            NoticeKind::Warning,
                        ),
                    }
                }
                self.paste_into_editor(text)
            }
        }
    }

    pub fn on_key(&mut self, key: KeyEvent) {
        if key.kind == KeyEventKind::Release {
            return;
        }
        self.dirty = true;
        if self.dialog.is_some() {
            self.on_dialog_key(key);
            return;
        }
        if let Some(id) = crate::keys::of_event(&key)
            && let Some((_, registered, _)) = self.shortcuts.iter().find(|s| s.0 == id)
        {
            let command = RpcCommand::RunShortcut(RunShortcutCommand {
                key: registered.clone(),
            });
            self.send(command, Pending::Quiet);
            return;
        }
        if self.on_palette_key(&key) {
            return;
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let alt = key.modifiers.contains(KeyModifiers::ALT);
        let shift = key.modifiers.contains(KeyModifiers::SHIFT);
        match key.code {
            KeyCode::Char('c') if ctrl => {
                if !self.editor.is_empty() {
                    self.editor.clear();
                } else if self
                    .last_ctrl_c
                    .is_some_and(|t| t.elapsed() < Duration::from_millis(1500))
                {
                    self.quit = true;
                } else {
                    self.last_ctrl_c = Some(Instant::now());
                    self.notice("Press Ctrl+C again to quit", NoticeKind::Info);
                }
            }
            KeyCode::Char('d') if ctrl && self.editor.is_empty() => self.quit = true,
            KeyCode::Char('o') if ctrl => {
                self.view.expanded = !self.view.expanded;
            }
            KeyCode::Char('p') if ctrl => {
                self.send(RpcCommand::CycleModel(NoFields {}), Pending::CycledModel)
            }
            KeyCode::Char('l') if ctrl => {
                self.builtin("model");
            }
            KeyCode::Char('t') if ctrl => self.toggle_thinking(),
            KeyCode::Char('g') if ctrl => {
                let text = self.editor.text().to_string();
                // The editor gets the text whole: a paste marker means nothing outside tau.
                let text = self.expand_pastes(text);
                self.editor.set_text(&text);
                self.request = Some(Request::Edit(text));
            }
            KeyCode::Char('v') if ctrl => self.request = Some(Request::PasteImage),
            KeyCode::Char('z') if ctrl => self.request = Some(Request::Suspend),
            KeyCode::BackTab => {
                self.send(RpcCommand::CycleThinkingLevel(NoFields {}), Pending::Quiet)
            }
            KeyCode::Char('j') if ctrl => self.editor.insert_char('\n'),
            KeyCode::Char('w') if ctrl => self.editor.delete_word(),
            KeyCode::Char('u') if ctrl => {
                self.editor.home();
                let start = self.editor.cursor();
                let text = self.editor.text().to_string();
                let end = text[start..].find('\n').map_or(text.len(), |i| start + i);
                let mut updated = text.clone();
                updated.replace_range(start..end, "");
                self.editor.set_text(&updated);
            }
            KeyCode::Char('a') if ctrl => self.editor.home(),
            KeyCode::Char('e') if ctrl => self.editor.end(),
            KeyCode::Enter if shift => self.editor.insert_char('\n'),
            KeyCode::Enter if alt => self.submit(true),
            KeyCode::Enter => self.submit(false),
            // `abort` ends a compaction as well as a reply.
            KeyCode::Esc if self.streaming || self.compacting => {
                self.send(RpcCommand::Abort(NoFields {}), Pending::Quiet)
            }
            KeyCode::Esc => self.dirty = false,
            KeyCode::Tab => self.complete(),
            KeyCode::Backspace => self.editor.backspace(),
            KeyCode::Delete => self.editor.delete(),
            KeyCode::Left => self.editor.left(),
            KeyCode::Right => self.editor.right(),
            KeyCode::Home => self.editor.home(),
            KeyCode::End => self.editor.end(),
            KeyCode::Up if alt => self.dequeue(),
            KeyCode::Up => self.editor.up(),
            KeyCode::Down => self.editor.down(),
            KeyCode::Char(ch) if !ctrl => self.editor.insert_char(ch),
            _ => self.dirty = false,
        }
    }

    /// Ctrl+T: thinking shown or hidden, in the answers so far and those to come.
    fn toggle_thinking(&mut self) {
        self.view.hide_thinking = !self.view.hide_thinking;
        for block in &mut self.transcript.blocks {
            if matches!(block.kind, BlockKind::Assistant { .. }) {
                block.touch();
            }
        }
        let state = if self.view.hide_thinking {
            "hidden"
        } else {
            "shown"
        };
        self.notice(format!("Thinking {state} (Ctrl+T)"), NoticeKind::Info);
    }

    /// An image for the next message: a marker in the editor where the cursor is, the image
    /// sent with the message as long as its marker is still in it.
    pub fn attach_image(&mut self, mime_type: &str, bytes: &[u8]) {
        let marker = format!("[image #{}]", self.images.len() + 1);
        self.images.push((
            marker.clone(),
            ImageContent {
                data: base64::engine::general_purpose::STANDARD.encode(bytes),
                mime_type: mime_type.to_string(),
            },
        ));
        self.editor.insert(&marker);
        self.dirty = true;
    }

    /// The images whose markers `message` holds; the others are dropped with them.
    pub(super) fn take_images(&mut self, message: &str) -> Option<Vec<ImageContent>> {
        let images: Vec<ImageContent> = std::mem::take(&mut self.images)
            .into_iter()
            .filter(|(marker, _)| message.contains(marker.as_str()))
            .map(|(_, image)| image)
            .collect();
        (!images.is_empty()).then_some(images)
    }

    /// Ctrl+G's result: the text the external editor saved (its last line break dropped).
    pub fn edited(&mut self, text: &str) {
        let text = text.strip_suffix('\n').unwrap_or(text);
        self.editor.set_text(text);
        self.dirty = true;
    }

    /// What the terminal layer has to say about a request it carried out.
    pub fn tell(&mut self, text: impl Into<String>, kind: NoticeKind) {
        self.notice(text, kind);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pasted_image_path_is_found_quoted_escaped_or_as_a_url() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("my shot.PNG"), b"png").unwrap();
        std::fs::write(dir.path().join("notes.txt"), b"text").unwrap();
        let found = |text: &str| pasted_image(text, dir.path());
        let expected = Some((dir.path().join("my shot.PNG"), "image/png"));
        assert_eq!(found("my\\ shot.PNG"), expected);
        assert_eq!(found("'my shot.PNG'\n"), expected);
        let url = format!("file://{}", dir.path().join("my shot.PNG").display());
        assert_eq!(found(&url), expected);
        assert_eq!(found("notes.txt"), None, "not an image");
        assert_eq!(found("missing.png"), None, "no such file");
        assert_eq!(found("my shot.PNG\nmore"), None, "two lines are text");
    }
}
