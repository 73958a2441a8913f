//! Opening a session file without waiting for its entries to be parsed: the file is read,
//! locked and its header checked at once, the active branch's messages are cut out of the
//! file's text as JSON (for `get_messages`), and the typed parse runs on another thread.
//!
//! Why: parsing every message of a long session is most of the cost of switching to it, and a
//! host that switches usually asks for the messages first. Those can be answered from the
//! file's bytes, which the parse would only turn back into the same JSON.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;

use serde_json::{Map, Value};
use tau_ai::skim::{Cursor, Skim};

use super::entry::{CURRENT_VERSION, SessionHeader};
use super::{SessionStore, StoreError, open_locked};

/// A session file being opened; [`DeferredOpen::finish`] gives the store.
#[derive(Debug)]
pub struct DeferredOpen {
    header: SessionHeader,
    messages_json: Option<String>,
    parsing: Parsing,
}

#[derive(Debug)]
enum Parsing {
    Thread(JoinHandle<Result<SessionStore, StoreError>>),
    /// Files that need a migration are opened the ordinary way.
    Done(Box<Result<SessionStore, StoreError>>),
}

impl DeferredOpen {
    pub fn header(&self) -> &SessionHeader {
        &self.header
    }

    /// The active branch's context as a JSON array, taken from the file, when the branch holds
    /// only plain messages (no compaction, branch summary or extension message to turn into
    /// one) whose roles tau knows; `None` otherwise.
    pub fn messages_json(&self) -> Option<&str> {
        self.messages_json.as_deref()
    }

    /// Waits for the parse.
    pub fn finish(self) -> Result<SessionStore, StoreError> {
        match self.parsing {
            Parsing::Done(result) => *result,
            Parsing::Thread(handle) => handle.join().unwrap_or_else(|_| {
                Err(StoreError::Io {
                    path: PathBuf::new(),
                    source: std::io::Error::other("the session parser thread failed"),
                })
            }),
        }
    }
}

impl SessionStore {
    /// Like [`SessionStore::open`], with the typed parse left to another thread.
    pub fn open_deferred(path: &Path) -> Result<DeferredOpen, StoreError> {
        let (file, bytes) = open_locked(path)?;
        let first_line_end = memchr::memchr(b'\n', &bytes).unwrap_or(bytes.len());
        let header = serde_json::from_slice::<Map<String, Value>>(&bytes[..first_line_end])
            .ok()
            .and_then(SessionHeader::from_map);
        let Some(header) = header.filter(|h| h.version >= CURRENT_VERSION) else {
            // Leading blank lines, an old version or no header at all: the ordinary open
            // handles (or reports) them.
            let store = Self::from_bytes(file, path, bytes)?;
            return Ok(DeferredOpen {
                header: store.header().clone(),
                messages_json: None,
                parsing: Parsing::Done(Box::new(Ok(store))),
            });
        };
        let messages_json = std::str::from_utf8(&bytes[first_line_end..])
            .ok()
            .and_then(branch_messages_json);
        let owned_path = path.to_path_buf();
        let parsing = std::thread::Builder::new()
            .name("tau-session-load".into())
            .spawn(move || Self::from_bytes(file, &owned_path, bytes))
            .map_err(|source| StoreError::Io {
                path: path.to_path_buf(),
                source,
            })?;
        Ok(DeferredOpen {
            header,
            messages_json,
            parsing: Parsing::Thread(parsing),
        })
    }
}

/// What the skim keeps of one entry line.
struct Skimmed<'a> {
    kind: &'a str,
    parent: Option<&'a str>,
    /// The `message` value's text and whether its role is one tau's context holds as is.
    message: Option<(&'a str, bool)>,
}

const PLAIN_ROLES: [&str; 5] = ["user", "assistant", "toolResult", "bashExecution", "custom"];

fn skim_line(line: &str) -> Skim<(&str, Skimmed<'_>)> {
    let mut id = None;
    let mut skimmed = Skimmed {
        kind: "",
        parent: None,
        message: None,
    };
    Cursor::document(line, |c| {
        c.object(|c, key| {
            match key {
                "type" => skimmed.kind = borrowed(c)?,
                "id" => id = Some(borrowed(c)?),
                "parentId" => {
                    skimmed.parent = if c.null() { None } else { Some(borrowed(c)?) };
                }
                "message" => {
                    let start = c.position();
                    let mut plain = false;
                    c.object(|c, key| {
                        if key == "role" {
                            plain = c.string()?.is_some_and(|r| PLAIN_ROLES.contains(&&*r));
                            Ok(())
                        } else {
                            c.skip()
                        }
                    })?;
                    let end = c.position();
                    let text = line.get(start..end).unwrap_or_default().trim_end();
                    skimmed.message = Some((text, plain));
                }
                _ => c.skip()?,
            }
            Ok(())
        })
    })?;
    let id = id.ok_or(tau_ai::skim::Unreadable)?;
    Ok((id, skimmed))
}

/// A string without escapes, borrowed (ids and entry types never need any).
fn borrowed<'a>(c: &mut Cursor<'a>) -> Skim<&'a str> {
    match c.string()? {
        Some(std::borrow::Cow::Borrowed(s)) => Ok(s),
        _ => Err(tau_ai::skim::Unreadable),
    }
}

/// Skims every entry line, in file order; a large text is cut at line ends into one run per
/// core, skimmed in parallel (the skim is most of what the switch waits for).
fn skim_runs(text: &str) -> Option<Vec<Vec<(&str, Skimmed<'_>)>>> {
    let threads = if text.len() < (1 << 20) {
        1
    } else {
        super::parsing_threads()
    };
    let mut cuts = vec![0];
    for i in 1..threads {
        let from = (text.len() * i / threads).max(cuts.last().copied().unwrap_or(0));
        let cut = text
            .get(from..)
            .and_then(|rest| rest.find('\n'))
            .map_or(text.len(), |at| from + at + 1);
        cuts.push(cut);
    }
    cuts.push(text.len());
    if threads == 1 {
        return Some(vec![skim_run(text)]);
    }
    std::thread::scope(|scope| {
        let workers: Vec<_> = cuts
            .windows(2)
            .map(|w| {
                let run = text.get(w[0]..w[1]).unwrap_or_default();
                scope.spawn(move || skim_run(run))
            })
            .collect();
        // A failed worker means no answer from the file's bytes: the parse answers instead.
        workers.into_iter().map(|w| w.join().ok()).collect()
    })
}

fn skim_run(run: &str) -> Vec<(&str, Skimmed<'_>)> {
    run.split('\n')
        .filter(|line| !line.trim().is_empty())
        // A line the skim cannot read (a torn tail) is skipped, as the parse skips it.
        .filter_map(|line| skim_line(line).ok())
        .filter(|(_, skimmed)| skimmed.kind != "session")
        .collect()
}

/// The JSON array of the branch ending at the last entry, when it is plain messages.
fn branch_messages_json(text: &str) -> Option<String> {
    let runs = skim_runs(text)?;
    let mut entries: HashMap<&str, Skimmed<'_>> =
        HashMap::with_capacity(runs.iter().map(Vec::len).sum());
    let mut leaf = None;
    for (id, skimmed) in runs.into_iter().flatten() {
        leaf = Some(id);
        entries.insert(id, skimmed);
    }
    let mut branch = Vec::new();
    let mut at = leaf;
    let mut steps = 0usize;
    while let Some(id) = at {
        steps += 1;
        if steps > entries.len() {
            return None; // a parent cycle
        }
        let entry = entries.get(id)?;
        match (entry.kind, entry.message) {
            ("message", Some((json, true))) => branch.push(json),
            ("message", _) | ("compaction", _) | ("branch_summary", _) | ("custom_message", _) => {
                return None;
            }
            _ => {}
        }
        at = entry.parent;
    }
    let mut out = String::with_capacity(text.len());
    out.push('[');
    for (i, json) in branch.iter().rev().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(json);
    }
    out.push(']');
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::branch_messages_json;

    fn message(id: &str, parent: &str, role: &str, text: &str) -> String {
        format!(
            r#"{{"type":"message","id":"{id}","parentId":{parent},"timestamp":"t","message":{{"role":"{role}","content":"{text}","timestamp":1}}}}"#
        )
    }

    #[test]
    fn the_branch_of_the_last_entry_is_cut_out_in_order() {
        let text = [
            message("a", "null", "user", "one"),
            message("b", "\"a\"", "assistant", "two"),
            message("c", "\"a\"", "assistant", "side"),
            r#"{"type":"model_change","id":"d","parentId":"c","timestamp":"t","provider":"p","modelId":"m"}"#.into(),
            message("e", "\"d\"", "user", "three"),
            r#"{"type":"message","id":"torn","parentId":"e","#.into(),
        ]
        .join("\n");
        let json = branch_messages_json(&text).unwrap_or_default();
        let messages: serde_json::Value = serde_json::from_str(&json).unwrap_or_default();
        let texts: Vec<&str> = messages
            .as_array()
            .map(|a| a.iter().filter_map(|m| m["content"].as_str()).collect())
            .unwrap_or_default();
        assert_eq!(texts, ["one", "side", "three"]);
    }

    #[test]
    fn summaries_and_unknown_roles_need_the_parse() {
        let compacted = [
            message("a", "null", "user", "one"),
            r#"{"type":"compaction","id":"b","parentId":"a","timestamp":"t","summary":"s","firstKeptEntryId":"a","tokensBefore":1}"#.into(),
        ]
        .join("\n");
        assert_eq!(branch_messages_json(&compacted), None);
        assert_eq!(
            branch_messages_json(&message("a", "null", "hookMessage", "x")),
            None
        );
        let cycle = [
            message("a", "\"b\"", "user", "x"),
            message("b", "\"a\"", "user", "y"),
        ]
        .join("\n");
        assert_eq!(branch_messages_json(&cycle), None);
    }

    #[test]
    fn a_large_file_is_skimmed_in_parallel_runs_in_order() {
        let filler = "x".repeat(500);
        let lines: Vec<String> = (0..3000)
            .map(|i| {
                let parent = if i == 0 {
                    "null".to_string()
                } else {
                    format!("\"{:08x}\"", i - 1)
                };
                message(
                    &format!("{i:08x}"),
                    &parent,
                    "user",
                    &format!("{i} {filler}"),
                )
            })
            .collect();
        let text = lines.join("\n");
        assert!(text.len() > 1 << 20, "takes the parallel path");
        let json = branch_messages_json(&text).unwrap_or_default();
        let messages: serde_json::Value = serde_json::from_str(&json).unwrap_or_default();
        let texts: Vec<&str> = messages
            .as_array()
            .map(|a| a.iter().filter_map(|m| m["content"].as_str()).collect())
            .unwrap_or_default();
        assert_eq!(texts.len(), 3000);
        assert!(texts[0].starts_with("0 ") && texts[2999].starts_with("2999 "));
        assert!(texts.windows(2).all(|w| {
            let n = |t: &str| t.split(' ').next().and_then(|n| n.parse::<u32>().ok());
            n(w[0]).zip(n(w[1])).is_some_and(|(a, b)| b == a + 1)
        }));
    }
}
