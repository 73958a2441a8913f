//! Best-effort parsing of a tool call's arguments while their JSON text is still streaming in:
//! the text is completed (open strings and containers closed, a dangling key or comma
//! dropped) and parsed; anything that still fails gives an empty object, as pi does.

use serde_json::{Map, Value};

/// Parses complete or truncated JSON object text into an object.
pub fn parse_arguments(text: &str) -> Map<String, Value> {
    if text.trim().is_empty() {
        return Map::new();
    }
    if let Ok(Value::Object(map)) = serde_json::from_str(text) {
        return map;
    }
    match serde_json::from_str(&complete(text)) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    }
}

/// Closes what is open at the end of `text`.
fn complete(text: &str) -> String {
    let mut closers = Vec::new();
    let mut in_string = false;
    let mut escaped = false;
    for c in text.chars() {
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' => closers.push('}'),
            '[' => closers.push(']'),
            '}' | ']' => {
                closers.pop();
            }
            _ => {}
        }
    }
    let mut out = text.to_string();
    if in_string {
        if escaped {
            out.pop();
        }
        // A `\u` escape cut short would make the string invalid; drop it.
        if let Some(pos) = out.rfind("\\u")
            && out.len() - pos < 6
        {
            out.truncate(pos);
        }
        out.push('"');
    }
    loop {
        let trimmed = out.trim_end();
        let cut = if trimmed.ends_with(',') || trimmed.ends_with(':') {
            Some(trimmed.len() - 1)
        } else {
            None
        };
        match cut {
            Some(len) => out.truncate(len),
            None => break,
        }
    }
    // A key without a value (`{"a":1,"b"`) is dropped.
    let trimmed = out.trim_end();
    if trimmed.ends_with('"')
        && let Some(last_open) = closers.last()
        && *last_open == '}'
        && key_without_value(trimmed)
    {
        let start = string_start(trimmed);
        out.truncate(start);
        let t = out.trim_end();
        let len = t.strip_suffix(',').map_or(t.len(), str::len);
        out.truncate(len);
    }
    while let Some(c) = closers.pop() {
        out.push(c);
    }
    out
}

/// Byte offset where the string literal ending `text` starts.
fn string_start(text: &str) -> usize {
    let bytes = text.as_bytes();
    let mut i = bytes.len().saturating_sub(1);
    while i > 0 {
        i -= 1;
        if bytes[i] == b'"' {
            let backslashes = bytes[..i].iter().rev().take_while(|&&b| b == b'\\').count();
            if backslashes % 2 == 0 {
                return i;
            }
        }
    }
    0
}

/// True when the string literal ending `text` sits in key position (after `{` or `,`).
fn key_without_value(text: &str) -> bool {
    let before = text[..string_start(text)].trim_end();
    before.ends_with('{') || before.ends_with(',')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(text: &str) -> Value {
        Value::Object(parse_arguments(text))
    }

    #[test]
    fn complete_json_parses() {
        assert_eq!(
            parse(r#"{"command":"ls -la"}"#),
            json!({"command": "ls -la"})
        );
    }

    #[test]
    fn truncated_json_is_completed() {
        assert_eq!(parse(r#"{"command":"ls -l"#), json!({"command": "ls -l"}));
        assert_eq!(parse(r#"{"a":[1,2"#), json!({"a": [1, 2]}));
        assert_eq!(parse(r#"{"a":1,"#), json!({"a": 1}));
        assert_eq!(parse(r#"{"a":1,"b":"#), json!({"a": 1}));
        assert_eq!(parse(r#"{"a":1,"b""#), json!({"a": 1}));
        assert_eq!(parse(r#"{"p":"x\"y\"#), json!({"p": "x\"y"}));
        assert_eq!(parse(r#"{"p":"\u00"#), json!({"p": ""}));
        assert_eq!(parse(r#"{"#), json!({}));
    }

    #[test]
    fn garbage_gives_an_empty_object() {
        assert_eq!(parse("not json"), json!({}));
        assert_eq!(parse("[1,2]"), json!({}));
        assert_eq!(parse(""), json!({}));
    }
}
