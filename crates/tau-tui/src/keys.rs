//! pi's key ids (`ctrl+shift+p`, `alt+x`, `f5`), the names extensions bind shortcuts with: a
//! pressed key as an id, one spelling per key, and which ids the editor keeps for itself.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// The one spelling of a key id: modifiers in the order ctrl, shift, alt, then the key, all
/// lower case (`Shift+Ctrl+P` → `ctrl+shift+p`).
pub fn canonical(id: &str) -> String {
    let lower = id.trim().to_ascii_lowercase();
    let mut parts: Vec<&str> = lower.split('+').collect();
    let key = parts.pop().unwrap_or_default();
    let key = match key {
        "esc" => "escape",
        "return" => "enter",
        "space" => " ",
        other => other,
    };
    let mut id = String::new();
    for modifier in ["ctrl", "shift", "alt"] {
        if parts.contains(&modifier) {
            id.push_str(modifier);
            id.push('+');
        }
    }
    id.push_str(key);
    id
}

/// The canonical id of a pressed key; `None` for keys that have none.
pub fn of_event(key: &KeyEvent) -> Option<String> {
    let mut shift = key.modifiers.contains(KeyModifiers::SHIFT);
    let name = match key.code {
        KeyCode::Char(' ') => " ".to_string(),
        KeyCode::Char(c) => {
            // A shifted letter arrives upper case, with or without the flag.
            shift |= c.is_uppercase();
            c.to_lowercase().collect()
        }
        KeyCode::F(n) => format!("f{n}"),
        KeyCode::Enter => "enter".into(),
        KeyCode::Esc => "escape".into(),
        KeyCode::Tab => "tab".into(),
        KeyCode::BackTab => {
            shift = true;
            "tab".into()
        }
        KeyCode::Backspace => "backspace".into(),
        KeyCode::Delete => "delete".into(),
        KeyCode::Insert => "insert".into(),
        KeyCode::Home => "home".into(),
        KeyCode::End => "end".into(),
        KeyCode::PageUp => "pageup".into(),
        KeyCode::PageDown => "pagedown".into(),
        KeyCode::Up => "up".into(),
        KeyCode::Down => "down".into(),
        KeyCode::Left => "left".into(),
        KeyCode::Right => "right".into(),
        _ => return None,
    };
    let mut id = String::new();
    if key.modifiers.contains(KeyModifiers::CONTROL) {
        id.push_str("ctrl+");
    }
    if shift {
        id.push_str("shift+");
    }
    if key.modifiers.contains(KeyModifiers::ALT) {
        id.push_str("alt+");
    }
    id.push_str(&name);
    Some(id)
}

/// The keys the editor and the session keep (see `HOTKEYS`), in canonical spelling.
const RESERVED: &[&str] = &[
    "ctrl+c",
    "ctrl+d",
    "ctrl+o",
    "ctrl+p",
    "ctrl+j",
    "ctrl+w",
    "ctrl+u",
    "ctrl+a",
    "ctrl+e",
    "ctrl+g",
    "ctrl+l",
    "ctrl+t",
    "ctrl+v",
    "ctrl+z",
    "alt+up",
    "escape",
    "enter",
    "shift+enter",
    "alt+enter",
    "tab",
    "shift+tab",
];

/// Why an extension may not bind `id` (canonical), or `None` when it may: the editor's own
/// keys, and keys that type or move (no ctrl or alt, not a function key).
pub fn refusal(id: &str) -> Option<&'static str> {
    if RESERVED.contains(&id) {
        return Some("tau's own key");
    }
    let (modifiers, key) = id.rsplit_once('+').unwrap_or(("", id));
    let function_key = key.len() > 1 && key.starts_with('f') && key[1..].parse::<u8>().is_ok();
    if !modifiers.contains("ctrl") && !modifiers.contains("alt") && !function_key {
        return Some("a key the editor types or moves with");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pressed_key_and_a_registered_id_meet_in_one_spelling() {
        let pressed = KeyEvent::new(
            KeyCode::Char('P'),
            KeyModifiers::CONTROL | KeyModifiers::SHIFT,
        );
        assert_eq!(of_event(&pressed).as_deref(), Some("ctrl+shift+p"));
        assert_eq!(canonical("Shift+Ctrl+P"), "ctrl+shift+p");
        let alt = KeyEvent::new(
            KeyCode::Char('p'),
            KeyModifiers::CONTROL | KeyModifiers::ALT,
        );
        assert_eq!(of_event(&alt), Some(canonical("alt+ctrl+p")));
        assert_eq!(
            of_event(&KeyEvent::new(KeyCode::F(5), KeyModifiers::NONE)).as_deref(),
            Some("f5")
        );
    }

    #[test]
    fn the_editors_keys_are_refused() {
        assert!(refusal(&canonical("ctrl+c")).is_some());
        assert!(refusal(&canonical("shift+tab")).is_some());
        assert!(refusal("x").is_some());
        assert!(refusal("shift+x").is_some());
        assert_eq!(refusal(&canonical("ctrl+alt+p")), None);
        assert_eq!(refusal("f5"), None);
    }
}
