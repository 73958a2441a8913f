//! The names MCP tools get in tau: `<server>_<tool>`, sanitised to `^[a-zA-Z0-9_-]{1,64}$`
//! (what every provider accepts), made unique with a numeric suffix.

use std::collections::HashSet;

/// The longest tool name every provider accepts.
pub const MAX_TOOL_NAME_LEN: usize = 64;

/// Replaces every character outside `[a-zA-Z0-9_-]` with `_` and cuts the result to 64
/// characters; the empty string becomes `_`.
pub fn sanitize(raw: &str) -> String {
    let mut out: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(MAX_TOOL_NAME_LEN)
        .collect();
    if out.is_empty() {
        out.push('_');
    }
    out
}

/// The name before collisions are resolved: `sanitize("<server>_<tool>")`.
pub fn base_tool_name(server: &str, tool: &str) -> String {
    sanitize(&format!("{server}_{tool}"))
}

/// Hands out unique names. Names already taken (built-in tools, extension tools) are given
/// at construction; a later name equal to a taken one gets `_2`, `_3`, … (the base cut so
/// the whole stays within 64 characters).
#[derive(Debug, Clone, Default)]
pub struct NameAllocator {
    taken: HashSet<String>,
}

impl NameAllocator {
    pub fn new<I, S>(reserved: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            taken: reserved.into_iter().map(Into::into).collect(),
        }
    }

    /// The name for `tool` of `server`, unique among all names handed out so far.
    pub fn allocate(&mut self, server: &str, tool: &str) -> String {
        let base = base_tool_name(server, tool);
        if self.taken.insert(base.clone()) {
            return base;
        }
        let mut counter: u64 = 2;
        loop {
            let suffix = format!("_{counter}");
            // `base` is ASCII after sanitising, so cutting at a byte index is safe.
            let keep = base.len().min(MAX_TOOL_NAME_LEN - suffix.len());
            let candidate = format!("{}{suffix}", &base[..keep]);
            if self.taken.insert(candidate.clone()) {
                return candidate;
            }
            counter += 1;
        }
    }
}

/// Whether `name` matches `^[a-zA-Z0-9_-]{1,64}$`.
pub fn is_valid_tool_name(name: &str) -> bool {
    (1..=MAX_TOOL_NAME_LEN).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}
