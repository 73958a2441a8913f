//! The slash-command list: `/` typed at the start of the editor lists every command the session
//! knows (the built-in ones, then skills, prompt templates, extension commands and MCP prompts
//! from `get_commands`), narrowed as the name is typed; Up/Down choose, Tab completes, Enter
//! completes and runs, Esc closes. And the rule for what a `/` at the start means: a command,
//! text (a path such as `/usr/bin`), or a name that is no command, which is refused rather
//! than sent to the model.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::App;
use super::commands::COMMANDS;
use super::responses::Pending;

/// One command of the list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaletteItem {
    /// With its `/`.
    pub name: String,
    pub description: String,
}

/// Where the list is: its choice belongs to one editor text, so typing starts again from the
/// best match.
#[derive(Debug, Default, Clone)]
pub struct Palette {
    text: String,
    selected: usize,
    /// The text Esc closed the list on: it opens again once the text changes.
    dismissed: Option<String>,
}

/// Names the built-in handling knows besides the listed ones.
const ALIASES: &[&str] = &["exit"];

/// The command name being typed, when the editor holds only `/name` so far: no space yet, and
/// no second `/` (a path is text).
fn typed_name(text: &str) -> Option<&str> {
    let name = text.strip_prefix('/')?;
    (!name.contains(char::is_whitespace) && !name.contains('/')).then_some(name)
}

/// Whether `name` has the shape of a command name rather than of other text that starts
/// with `/` (a path, a regular expression, a comment).
fn command_shaped(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ':' | '.'))
}

/// The commands of `all` whose names fit `typed`: those starting with it, then those containing
/// it, then those whose letters it names in order (`/spm` finds `/scoped-models`); case is
/// ignored, the list order kept within each group.
pub fn filter(all: &[PaletteItem], typed: &str) -> Vec<PaletteItem> {
    let typed = typed.to_lowercase();
    let name_of = |item: &PaletteItem| item.name[1..].to_lowercase();
    let mut groups: [Vec<PaletteItem>; 3] = Default::default();
    for item in all {
        let name = name_of(item);
        let group = if name.starts_with(&typed) {
            0
        } else if name.contains(&typed) {
            1
        } else if in_order(&typed, &name) {
            2
        } else {
            continue;
        };
        groups[group].push(item.clone());
    }
    groups.into_iter().flatten().collect()
}

/// Whether the characters of `needle` appear in `hay` in order.
fn in_order(needle: &str, hay: &str) -> bool {
    let mut hay = hay.chars();
    needle.chars().all(|c| hay.any(|h| h == c))
}

/// The edit distance between two names (insertions, deletions and substitutions).
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous + usize::from(ca != *cb);
            previous = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(previous + 1);
        }
    }
    row[b.len()]
}

impl App {
    /// Every command the list can show: the built-in ones, then the session's (one the
    /// built-in handling takes first is not listed twice).
    fn all_commands(&self) -> Vec<PaletteItem> {
        let builtin = COMMANDS.iter().map(|(name, what)| PaletteItem {
            name: (*name).to_string(),
            description: (*what).to_string(),
        });
        let session = self
            .session_commands
            .iter()
            .filter(|(name, _)| !COMMANDS.iter().any(|(b, _)| b == name))
            .map(|(name, what)| PaletteItem {
                name: name.clone(),
                description: what.clone(),
            });
        builtin.chain(session).collect()
    }

    /// What the list shows now, best first; empty when it is closed (no `/name` being typed,
    /// a dialog open, Esc pressed, nothing fits).
    pub fn palette_items(&self) -> Vec<PaletteItem> {
        let text = self.editor.text();
        if self.dialog.is_some() || self.palette.dismissed.as_deref() == Some(text) {
            return Vec::new();
        }
        match typed_name(text) {
            Some(typed) => filter(&self.all_commands(), typed),
            None => Vec::new(),
        }
    }

    /// The row chosen in [`App::palette_items`]: the one moved to for this text, else the
    /// command named exactly, else the first.
    pub fn palette_selected(&self, items: &[PaletteItem]) -> usize {
        let text = self.editor.text();
        if self.palette.text == text && self.palette.selected < items.len() {
            return self.palette.selected;
        }
        items.iter().position(|i| i.name == text).unwrap_or(0)
    }

    /// A key while the list is open; false when it is not the list's (typing goes on in the
    /// editor, and Enter then sends what the list completed).
    pub(super) fn on_palette_key(&mut self, key: &KeyEvent) -> bool {
        let items = self.palette_items();
        if items.is_empty()
            || key
                .modifiers
                .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT | KeyModifiers::SHIFT)
        {
            return false;
        }
        let selected = self.palette_selected(&items);
        let count = items.len();
        let text = self.editor.text().to_string();
        match key.code {
            KeyCode::Up | KeyCode::Down => {
                let next = if key.code == KeyCode::Up {
                    selected.checked_sub(1).unwrap_or(count - 1)
                } else {
                    (selected + 1) % count
                };
                self.palette = Palette {
                    text,
                    selected: next,
                    dismissed: None,
                };
                true
            }
            KeyCode::Tab => {
                self.editor.set_text(&format!("{} ", items[selected].name));
                true
            }
            KeyCode::Enter => {
                self.editor.set_text(&items[selected].name);
                false
            }
            KeyCode::Esc => {
                self.palette.dismissed = Some(text);
                true
            }
            _ => false,
        }
    }

    /// Why `text` is not sent, when it starts with a `/name` that no command has: a typo would
    /// otherwise go to the model as a message. `None` for a command, for text that only starts
    /// with `/` (`/ alone`, `/usr/bin`, an existing path such as `/tmp`), and before the
    /// session's commands are known (a command-line prompt sent at once).
    pub(super) fn unknown_command(&self, text: &str) -> Option<String> {
        let rest = text.strip_prefix('/')?;
        let name = rest.split(char::is_whitespace).next().unwrap_or_default();
        if !command_shaped(name) {
            return None;
        }
        let slash = format!("/{name}");
        let known = COMMANDS.iter().any(|(c, _)| *c == slash)
            || ALIASES.contains(&name)
            || self.session_commands.iter().any(|(c, _)| *c == slash);
        let loading = self.session_commands.is_empty()
            && self
                .pending
                .values()
                .any(|p| matches!(p, Pending::Commands));
        if known || loading || std::path::Path::new(&slash).exists() {
            return None;
        }
        let mut near: Vec<(usize, String)> = self
            .all_commands()
            .into_iter()
            .filter_map(|item| {
                let other = item.name[1..].to_lowercase();
                let lower = name.to_lowercase();
                let d = distance(&lower, &other);
                let close = d <= (lower.chars().count() / 3).max(2)
                    || other.starts_with(&lower)
                    || (lower.len() > 2 && other.contains(&lower));
                close.then_some((d, item.name))
            })
            .collect();
        near.sort();
        let mut said = format!("Unknown command {slash}.");
        if !near.is_empty() {
            let names: Vec<String> = near.into_iter().take(3).map(|(_, n)| n).collect();
            said.push_str(&format!(" Did you mean {}?", names.join(", ")));
        }
        said.push_str(
            " Type / to list the commands; start the message with a space to send it as text.",
        );
        Some(said)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(name: &str) -> PaletteItem {
        PaletteItem {
            name: name.into(),
            description: String::new(),
        }
    }

    #[test]
    fn names_are_matched_by_start_then_inside_then_in_order() {
        let all = [
            item("/model"),
            item("/scoped-models"),
            item("/settings"),
            item("/skill:commit"),
        ];
        let names =
            |typed| -> Vec<String> { filter(&all, typed).into_iter().map(|i| i.name).collect() };
        assert_eq!(names("mod"), ["/model", "/scoped-models"]);
        assert_eq!(names("S"), ["/scoped-models", "/settings", "/skill:commit"]);
        assert_eq!(names("el"), ["/model", "/scoped-models"]);
        assert_eq!(names("spm"), ["/scoped-models"]);
        assert!(names("zz").is_empty());
    }

    #[test]
    fn the_distance_counts_each_edit() {
        assert_eq!(distance("modle", "model"), 2);
        assert_eq!(distance("mode", "model"), 1);
        assert_eq!(distance("", "new"), 3);
        assert_eq!(distance("quit", "quit"), 0);
    }

    #[test]
    fn only_a_name_being_typed_opens_the_list() {
        assert_eq!(typed_name("/"), Some(""));
        assert_eq!(typed_name("/mo"), Some("mo"));
        assert_eq!(typed_name("/model x"), None);
        assert_eq!(typed_name("/usr/"), None);
        assert_eq!(typed_name("model"), None);
        assert!(command_shaped("skill:commit"));
        assert!(!command_shaped("*comment*"));
        assert!(!command_shaped(""));
    }
}
