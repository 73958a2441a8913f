//! The `ls` tool (tools-resources §1.7): one directory's entries, dotfiles and `.git`
//! included, no ignore rules. pi sorts with JavaScript's `toLowerCase` + `localeCompare`
//! (ICU collation); `collation_key` reproduces that order for ASCII names and approximates it
//! beyond, and breaks ties by the bytes of the name so the order never depends on `readdir`.

use std::fs;
use std::path::PathBuf;
use std::sync::LazyLock;
use std::sync::atomic::{self, AtomicBool};

use serde_json::{Map, Value, json};
use tau_protocol::AgentToolResult;
use unicode_normalization::UnicodeNormalization;

use crate::ToolEnv;
use crate::call::ABORTED;
use crate::tool::builtin_tool;
use crate::walk::{Args, HeadOutput, Notice, existing_dir, listing_result, text_result};

const DEFAULT_LIMIT: usize = 500;

const DESCRIPTION: &str = "List what one directory contains, hidden entries included, sorted by \
name without regard to case. Directories end in '/'. At most 500 entries (change with limit) \
or 50KB are returned.";

static PARAMETERS: LazyLock<Value> = LazyLock::new(|| {
    json!({
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "The directory to list (the working directory if left out)"},
            "limit": {"type": "number", "description": "Stop after this many entries (500 if left out)"}
        }
    })
});

builtin_tool!(
    /// The `ls` tool.
    LsTool,
    "ls",
    request: Request
);

struct Request {
    dir: PathBuf,
    limit: usize,
}

impl Request {
    fn parse(env: &ToolEnv, arguments: &Map<String, Value>) -> Result<Self, String> {
        let args = Args::new("ls", arguments);
        Ok(Self {
            dir: args.path(env)?,
            limit: args.limit("limit", DEFAULT_LIMIT)?,
        })
    }

    fn execute(self, stop: &AtomicBool) -> Result<AgentToolResult, String> {
        list(self.dir, self.limit, stop)
    }
}

fn list(dir: PathBuf, limit: usize, stop: &AtomicBool) -> Result<AgentToolResult, String> {
    existing_dir(&dir)?;
    let read_error =
        |err: std::io::Error| format!("Cannot read directory: {}", node_message(&err, &dir));
    let mut names = Vec::new();
    for entry in fs::read_dir(&dir).map_err(read_error)? {
        names.push(entry.map_err(read_error)?.file_name());
    }
    let mut keyed: Vec<(CollationKey, String, std::ffi::OsString)> = names
        .into_iter()
        .map(|raw| {
            let name = raw.to_string_lossy().into_owned();
            (collation_key(&name), name, raw)
        })
        .collect();
    keyed.sort_by(|a, b| {
        a.0.cmp(&b.0)
            .then_with(|| a.1.cmp(&b.1))
            .then_with(|| a.2.cmp(&b.2))
    });

    let mut entries = Vec::new();
    let mut limit_reached = false;
    for (_, name, raw) in &keyed {
        if stop.load(atomic::Ordering::Relaxed) {
            return Err(ABORTED.to_string());
        }
        if entries.len() >= limit {
            limit_reached = true;
            break;
        }
        // Following links like `stat`; entries that cannot be inspected (dangling links) are
        // left out, as pi leaves them out.
        let Ok(metadata) = fs::metadata(dir.join(raw)) else {
            continue;
        };
        entries.push(if metadata.is_dir() {
            format!("{name}/")
        } else {
            name.clone()
        });
    }
    if entries.is_empty() {
        return Ok(text_result("(empty directory)".to_string(), Map::new()));
    }

    let mut output = HeadOutput::new();
    for entry in &entries {
        output.push_line(entry);
    }
    let limit =
        limit_reached.then(|| Notice::limit_reached(limit, "entries", "", "entryLimitReached"));
    Ok(listing_result(output, limit, None))
}

/// libuv's wording of common errors, as Node's messages show them:
/// `EACCES: permission denied, scandir '/x'`.
fn node_message(err: &std::io::Error, dir: &std::path::Path) -> String {
    let described = match err.raw_os_error() {
        Some(13) => Some(("EACCES", "permission denied")),
        Some(1) => Some(("EPERM", "operation not permitted")),
        Some(2) => Some(("ENOENT", "no such file or directory")),
        Some(20) => Some(("ENOTDIR", "not a directory")),
        Some(5) => Some(("EIO", "i/o error")),
        Some(24) => Some(("EMFILE", "too many open files")),
        Some(40) => Some(("ELOOP", "too many symbolic links encountered")),
        _ => None,
    };
    match described {
        Some((code, text)) => format!("{code}: {text}, scandir '{}'", dir.display()),
        None => err.to_string(),
    }
}

/// Sort key approximating ICU's root collation (what `localeCompare` uses) of the lower-cased
/// name: first the base characters (punctuation, then digits, then letters; accents and case
/// set aside), then the accents.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct CollationKey {
    primary: Vec<u32>,
    secondary: Vec<u32>,
}

/// ICU's root order of the printable ASCII characters once upper case is folded away.
const ASCII_ORDER: &str = " _-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$0123456789abcdefghijklmnopqrstuvwxyz";

fn primary_weight(c: char) -> u32 {
    match c {
        // Tab, line feed, vertical tab, form feed, carriage return: before the space.
        '\t'..='\r' => 1 + (c as u32 - 9),
        _ if c.is_ascii() => ASCII_ORDER
            .find(c)
            .map_or(0, |position| 16 + position as u32),
        // Everything else after the ASCII letters, by code point.
        _ => 0x1_0000 + c as u32,
    }
}

fn is_combining(c: char) -> bool {
    matches!(c as u32, 0x0300..=0x036F | 0x1AB0..=0x1AFF | 0x1DC0..=0x1DFF | 0x20D0..=0x20FF | 0xFE20..=0xFE2F)
}

/// See [`CollationKey`].
fn collation_key(name: &str) -> CollationKey {
    let mut primary = Vec::with_capacity(name.len());
    let mut secondary = Vec::new();
    for c in name.to_lowercase().nfd() {
        if is_combining(c) {
            secondary.push(c as u32);
            continue;
        }
        // ICU expands these ligatures to two letters at the first level.
        let expanded: &[char] = match c {
            'ß' => &['s', 's'],
            'æ' => &['a', 'e'],
            'œ' => &['o', 'e'],
            _ => &[],
        };
        if expanded.is_empty() {
            primary.push(primary_weight(c));
        } else {
            primary.extend(expanded.iter().map(|&e| primary_weight(e)));
            secondary.push(c as u32);
        }
        // Marks the end of a base character so accents compare position by position.
        secondary.push(0);
    }
    CollationKey { primary, secondary }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compare_names(a: &str, b: &str) -> std::cmp::Ordering {
        collation_key(a)
            .cmp(&collation_key(b))
            .then_with(|| a.cmp(b))
    }

    fn sorted(names: &[&str]) -> Vec<String> {
        let mut names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        names.sort_by(|a, b| compare_names(a, b));
        names
    }

    #[test]
    fn matches_node_locale_compare() {
        // Node 20 (ICU, en-US): `[...].map(s => s.toLowerCase()).sort((a, b) => a.localeCompare(b))`.
        assert_eq!(
            sorted(&[
                "a_b", "a1", "a-b", "ab", "a.b", "é", "e", "f", "ß", "z", "_x", "x~", "1", "ä",
                "a", "á", "b"
            ]),
            [
                "_x", "1", "a", "á", "ä", "a_b", "a-b", "a.b", "a1", "ab", "b", "e", "é", "f", "ß",
                "x~", "z"
            ]
        );
        assert_eq!(sorted(&["ab", "a b", "a\tb"]), ["a\tb", "a b", "ab"]);
        assert_eq!(
            sorted(&["readme", "README", "Readme"]),
            ["README", "Readme", "readme"]
        );
    }
}
