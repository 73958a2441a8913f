//! The keyboard and pastes: a key goes to the open dialog, else to an extension that bound
//! it, else to the editor and the session's own keys (see `HOTKEYS`).

use std::time::{Duration, Instant};

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use tau_protocol::rpc::{NoFields, RpcCommand, RunShortcutCommand};

use super::responses::Pending;
use super::{App, Dialog, DialogBody};
use crate::transcript::NoticeKind;

impl App {
    pub fn on_paste(&mut self, text: &str) {
        self.dirty = true;
        let text = text.replace("\r\n", "\n").replace('\r', "\n");
        match &mut self.dialog {
            Some(Dialog {
                body: DialogBody::Input { editor, .. },
                ..
            }) => editor.insert(&text),
            Some(_) => {}
            None => self.paste_into_editor(text),
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
            KeyCode::Up => self.editor.up(),
            KeyCode::Down => self.editor.down(),
            KeyCode::PageUp => self.scroll += 10,
            KeyCode::PageDown => self.scroll = self.scroll.saturating_sub(10),
            KeyCode::Char(ch) if !ctrl => self.editor.insert_char(ch),
            _ => self.dirty = false,
        }
    }
}
