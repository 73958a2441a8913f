//! Opening a session file without waiting for its entries to be parsed: the file is read,
//! locked and its header checked at once, the active branch's messages are cut out of the
//! file's text as JSON (for `get_messages`), and the typed parse runs on another thread.
//!
//! Why: parsing every message of a long session is most of the cost of switching to it, and a
//! host that switches usually asks for the messages first. Those can be answered from the
//! file's bytes, which the parse would only turn back into the same JSON.

use std::collections::HashMap;
use std::fs::File;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};
use tau_base::skim::{Cursor, Skim, Unreadable};

use super::entry::{CURRENT_VERSION, SessionHeader};
use super::{SessionStore, StoreError, lock};

/// How long the typed parse waits before it starts on its own, unless a command needs the
/// store sooner. Why wait at all: a host that switches asks for the messages next, and on a
/// two-core machine a parse started at once takes the cores that writing that answer (and
/// the host reading it) need. 50 ms covers writing a 100 MB answer into a pipe.
const PARSE_DELAY: Duration = Duration::from_millis(50);

/// From this size on a file is "long": its typed parse reads the file again piece by piece
/// instead of parsing the bytes held for the raw answer, and starts only once that answer is
/// gone (written, or given up), and a switch to it frees the session it leaves before reading
/// it. Each of these keeps two copies of a long session (bytes and entries, or the old and the
/// new session) from being held at once: with 128 MB files that is the difference between
/// about 200 and over 300 MB. Below it, memory is not worth the waiting.
pub const LONG_FILE_BYTES: u64 = 32 << 20;

/// How long a long file's raw answer is kept for a `get_messages` that has not come yet
/// before the parse gives it up (a later `get_messages` then waits for the parse).
const RAW_GRACE: Duration = Duration::from_secs(1);

/// A JSON array whose elements are slices of a shared buffer (a session file's bytes):
/// written out as `[e1,e2,…]` without being copied into one string first.
#[derive(Debug, Clone)]
pub struct RawJsonArray {
    bytes: Arc<Vec<u8>>,
    elements: Arc<[Range<usize>]>,
}

impl RawJsonArray {
    /// The elements' texts, in order.
    pub fn elements(&self) -> impl ExactSizeIterator<Item = &[u8]> {
        self.elements
            .iter()
            .map(|range| self.bytes.get(range.clone()).unwrap_or_default())
    }

    /// The array's length in bytes once written.
    pub fn written_len(&self) -> usize {
        let commas = self.elements.len().saturating_sub(1);
        2 + commas
            + self
                .elements
                .iter()
                .map(ExactSizeIterator::len)
                .sum::<usize>()
    }

    /// The array as one string (tests and the rare caller that needs it whole).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.written_len());
        out.push(b'[');
        for (i, element) in self.elements().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(element);
        }
        out.push(b']');
        out
    }
}

/// A session file being opened; [`DeferredOpen::finish`] gives the store.
#[derive(Debug)]
pub struct DeferredOpen {
    header: SessionHeader,
    /// Shared with the parse thread, which empties it before parsing a long file.
    messages: Arc<Mutex<Option<RawJsonArray>>>,
    parsing: Parsing,
}

/// A session file opened and locked, its header read and its entries not yet: what a switch
/// checks before it lets go of the session it leaves.
#[derive(Debug)]
pub struct OpenedFile {
    path: PathBuf,
    header: SessionHeader,
    state: Opened,
}

#[derive(Debug)]
enum Opened {
    /// The file so far (the header line) and its length.
    Head {
        file: File,
        bytes: Vec<u8>,
        len: u64,
    },
    /// Files that need a migration, or whose first line is not the header, are opened the
    /// ordinary way at once.
    Store(Box<SessionStore>),
}

impl OpenedFile {
    pub fn header(&self) -> &SessionHeader {
        &self.header
    }

    /// Whether the file is long (see [`LONG_FILE_BYTES`]).
    pub fn is_long(&self) -> bool {
        matches!(&self.state, Opened::Head { len, .. } if *len >= LONG_FILE_BYTES)
    }

    /// Reads the rest of the file, cuts the branch's messages out of it and starts the
    /// typed parse on another thread.
    pub fn read(self) -> Result<DeferredOpen, StoreError> {
        let (file, bytes) = match self.state {
            Opened::Store(store) => {
                return Ok(DeferredOpen {
                    header: self.header,
                    messages: Arc::default(),
                    parsing: Parsing::Done(Box::new(Ok(*store))),
                });
            }
            Opened::Head {
                mut file, bytes, ..
            } => {
                use std::io::Read;
                let mut bytes = bytes;
                file.read_to_end(&mut bytes)
                    .map_err(|source| StoreError::Io {
                        path: self.path.clone(),
                        source,
                    })?;
                (file, bytes)
            }
        };
        SessionStore::deferred_from(file, &self.path, self.header, bytes)
    }
}

#[derive(Debug)]
enum Parsing {
    Thread {
        handle: JoinHandle<Result<SessionStore, StoreError>>,
        /// Things for the parse thread to drop before it parses; dropping the sender starts
        /// the parse at once.
        to_parser: mpsc::Sender<Box<dyn Send>>,
    },
    /// Files that need a migration are opened the ordinary way.
    Done(Box<Result<SessionStore, StoreError>>),
}

impl DeferredOpen {
    pub fn header(&self) -> &SessionHeader {
        &self.header
    }

    /// The active branch's context as a JSON array of slices of the file, when the branch
    /// holds only plain messages (no compaction, branch summary or extension message to turn
    /// into one) whose roles tau knows; `None` otherwise.
    pub fn messages(&self) -> Option<RawJsonArray> {
        self.messages
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// Hands `garbage` (the session being left) to the parse thread, which drops it before
    /// it parses: freeing a large session takes milliseconds the switch should not wait
    /// for, and freeing it before the parse keeps two sessions from being held at once.
    pub fn discard(&self, garbage: impl Send + 'static) {
        if let Parsing::Thread { to_parser, .. } = &self.parsing {
            // A parse thread that is gone has nothing to free it; it is dropped here then.
            let _ = to_parser.send(Box::new(garbage));
        }
    }

    /// Waits for the parse (starting it now if it has not started yet).
    pub fn finish(self) -> Result<SessionStore, StoreError> {
        // Nobody asks for the raw answer any more; a long file's parse waits for it to go.
        self.messages
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        match self.parsing {
            Parsing::Done(result) => *result,
            Parsing::Thread { handle, to_parser } => {
                drop(to_parser);
                handle.join().unwrap_or_else(|_| {
                    Err(StoreError::Io {
                        path: PathBuf::new(),
                        source: std::io::Error::other("the session parser thread failed"),
                    })
                })
            }
        }
    }
}

impl SessionStore {
    /// Like [`SessionStore::open`], with the typed parse left to another thread.
    pub fn open_deferred(path: &Path) -> Result<DeferredOpen, StoreError> {
        Self::open_header(path)?.read()
    }

    /// The first step of [`SessionStore::open_deferred`]: opens and locks the file and reads
    /// its header line only.
    pub fn open_header(path: &Path) -> Result<OpenedFile, StoreError> {
        use std::io::Read;
        let io_err = |source| StoreError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut file = crate::open_session_file(path)?;
        lock(&file, path)?;
        let len = file.metadata().map_err(io_err)?.len();
        // Up to the end of the first line, 64 KiB at a time.
        let mut bytes = Vec::new();
        let mut piece = [0u8; 64 * 1024];
        let first_line_end = loop {
            let n = match file.read(&mut piece) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(io_err(e)),
            };
            let from = bytes.len();
            bytes.extend_from_slice(&piece[..n]);
            if let Some(at) = memchr::memchr(b'\n', &bytes[from..]) {
                break from + at;
            }
            if n == 0 {
                break bytes.len();
            }
        };
        let header = serde_json::from_slice::<Map<String, Value>>(&bytes[..first_line_end])
            .ok()
            .and_then(SessionHeader::from_map);
        let header = match header.filter(|h| h.version >= CURRENT_VERSION) {
            Some(header) => header,
            None => {
                // Leading blank lines, an old version or no header at all: the ordinary open
                // handles (or reports) them.
                file.read_to_end(&mut bytes).map_err(io_err)?;
                let store = Self::from_bytes(file, path, &bytes)?;
                return Ok(OpenedFile {
                    path: path.to_path_buf(),
                    header: store.header().clone(),
                    state: Opened::Store(Box::new(store)),
                });
            }
        };
        Ok(OpenedFile {
            path: path.to_path_buf(),
            header,
            state: Opened::Head { file, bytes, len },
        })
    }

    /// The rest of [`OpenedFile::read`]: `bytes` is the whole file, its header `header`.
    fn deferred_from(
        file: File,
        path: &Path,
        header: SessionHeader,
        bytes: Vec<u8>,
    ) -> Result<DeferredOpen, StoreError> {
        let first_line_end = memchr::memchr(b'\n', &bytes).unwrap_or(bytes.len());
        let long = bytes.len() as u64 >= LONG_FILE_BYTES;
        let bytes = Arc::new(bytes);
        let messages = branch_message_spans(&bytes, first_line_end).map(|elements| RawJsonArray {
            bytes: Arc::clone(&bytes),
            elements: elements.into(),
        });
        let messages = Arc::new(Mutex::new(messages));
        let slot = Arc::clone(&messages);
        let owned_path = path.to_path_buf();
        let owned_header = header.clone();
        let (to_parser, told) = mpsc::channel::<Box<dyn Send>>();
        let handle = std::thread::Builder::new()
            .name("tau-session-load".into())
            .spawn(move || {
                let delay = if long { RAW_GRACE } else { PARSE_DELAY };
                let deadline = Instant::now() + delay;
                let mut garbage = Vec::new();
                // Until the delay is over or the sender is dropped (`finish`).
                while let Ok(g) =
                    told.recv_timeout(deadline.saturating_duration_since(Instant::now()))
                {
                    garbage.push(g);
                }
                drop(garbage);
                if !long {
                    return Self::from_bytes(file, &owned_path, &bytes);
                }
                parse_long(
                    file,
                    &owned_path,
                    owned_header,
                    bytes,
                    &slot,
                    first_line_end,
                )
            })
            .map_err(|source| StoreError::Io {
                path: path.to_path_buf(),
                source,
            })?;
        Ok(DeferredOpen {
            header,
            messages,
            parsing: Parsing::Thread { handle, to_parser },
        })
    }
}

/// The typed parse of a long file: once the raw answer is gone, its bytes are freed and the
/// file is parsed again from disk, piece by piece (see [`LONG_FILE_BYTES`]).
fn parse_long(
    file: File,
    path: &Path,
    header: SessionHeader,
    bytes: Arc<Vec<u8>>,
    slot: &Mutex<Option<RawJsonArray>>,
    first_line_end: usize,
) -> Result<SessionStore, StoreError> {
    // No new copies of the raw answer from now on.
    slot.lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .take();
    let torn_tail = bytes.last().is_some_and(|&b| b != b'\n');
    let lines = memchr::memchr_iter(b'\n', &bytes).count() + 1;
    let threads = super::parsing_threads();
    let start = (first_line_end + 1).min(bytes.len());
    let mut cuts = vec![start as u64];
    for i in 1..threads {
        let from = (start + (bytes.len() - start) * i / threads).max(start);
        let cut = bytes
            .get(from..)
            .and_then(|rest| memchr::memchr(b'\n', rest))
            .map_or(bytes.len(), |at| from + at + 1);
        cuts.push(cut as u64);
    }
    cuts.push(bytes.len() as u64);
    cuts.dedup();
    // The answer being written still holds the bytes: wait for the writer to let go, or
    // the entries would be built beside them.
    let held = Arc::downgrade(&bytes);
    drop(bytes);
    while held.strong_count() > 0 {
        std::thread::sleep(Duration::from_millis(2));
    }
    let entries = super::load::parse_file(&file, &cuts, path, lines);
    Ok(SessionStore::from_entries(
        file, path, header, entries, torn_tail,
    ))
}

/// What the skim keeps of one entry line.
struct Skimmed<'a> {
    id: &'a str,
    kind: &'a str,
    parent: Option<&'a str>,
    /// The `message` value's text and whether its role is one tau's context holds as is.
    message: Option<(&'a str, bool)>,
}

const PLAIN_ROLES: [&str; 5] = ["user", "assistant", "toolResult", "bashExecution", "custom"];

fn skim_line(line: &str) -> Skim<Skimmed<'_>> {
    let mut id = None;
    let mut skimmed = Skimmed {
        id: "",
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
                    let text = line.get(start..end).ok_or(Unreadable)?.trim_end();
                    skimmed.message = Some((text, plain));
                }
                _ => c.skip()?,
            }
            Ok(())
        })
    })?;
    skimmed.id = id.ok_or(Unreadable)?;
    Ok(skimmed)
}

/// A string without escapes, borrowed (ids and entry types never need any).
fn borrowed<'a>(c: &mut Cursor<'a>) -> Skim<&'a str> {
    match c.string()? {
        Some(std::borrow::Cow::Borrowed(s)) => Ok(s),
        _ => Err(Unreadable),
    }
}

/// Skims every entry line, in file order; a large text is cut at line ends into one run per
/// core, checked as UTF-8 and skimmed in parallel (the skim is most of what the switch
/// waits for). `None` when some run is not UTF-8 or a worker failed: the parse answers then.
fn skim_runs(text: &[u8]) -> Option<Vec<Skimmed<'_>>> {
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
            .and_then(|rest| memchr::memchr(b'\n', rest))
            .map_or(text.len(), |at| from + at + 1);
        cuts.push(cut);
    }
    cuts.push(text.len());
    let run = |w: &[usize]| {
        let run = std::str::from_utf8(text.get(w[0]..w[1]).unwrap_or_default()).ok()?;
        Some(skim_run(run))
    };
    if threads == 1 {
        return run(&cuts);
    }
    // Every run gets its own thread while this one waits: a thread that keeps working
    // after spawning shares its core with the new one until the scheduler moves one of
    // them, which measured 1.5 ms slower on two cores.
    std::thread::scope(|scope| {
        let workers: Vec<_> = cuts
            .windows(2)
            .map(|w| scope.spawn(move || run(w)))
            .collect();
        let mut all = Vec::new();
        for worker in workers {
            all.append(&mut worker.join().ok()??);
        }
        Some(all)
    })
}

fn skim_run(run: &str) -> Vec<Skimmed<'_>> {
    let mut skimmed = Vec::with_capacity(run.len() / 512);
    let mut rest = run;
    while !rest.is_empty() {
        let end = memchr::memchr(b'\n', rest.as_bytes()).unwrap_or(rest.len());
        let line = rest.get(..end).unwrap_or_default();
        rest = rest.get(end + 1..).unwrap_or_default();
        // A line the skim cannot read (a torn tail) is skipped, as the parse skips it; so
        // are blank lines.
        if let Ok(entry) = skim_line(line)
            && entry.kind != "session"
        {
            skimmed.push(entry);
        }
    }
    skimmed
}

/// The byte ranges (in `bytes`) of the messages on the branch ending at the last entry, in
/// order, when they are all plain messages; the entry lines start after `header_end`.
fn branch_message_spans(bytes: &[u8], header_end: usize) -> Option<Vec<Range<usize>>> {
    let text = bytes.get(header_end..)?;
    let entries = skim_runs(text)?;
    let base = bytes.as_ptr().addr();
    let mut spans = Vec::new();
    // Entries nearly always follow their parent directly, so the walk looks one line back
    // first and builds an id index only when a branch point makes it necessary.
    let mut index: Option<HashMap<&str, usize>> = None;
    let mut at = entries.len().checked_sub(1);
    let mut steps = 0usize;
    while let Some(i) = at {
        steps += 1;
        if steps > entries.len() {
            return None; // a parent cycle
        }
        let entry = entries.get(i)?;
        match (entry.kind, entry.message) {
            ("message", Some((json, true))) => {
                let start = json.as_ptr().addr().checked_sub(base)?;
                spans.push(start..start + json.len());
            }
            ("message", _) | ("compaction", _) | ("branch_summary", _) | ("custom_message", _) => {
                return None;
            }
            _ => {}
        }
        at = match entry.parent {
            None => None,
            Some(parent) if i > 0 && entries[i - 1].id == parent => Some(i - 1),
            Some(parent) => {
                let index = index.get_or_insert_with(|| {
                    entries.iter().enumerate().map(|(i, e)| (e.id, i)).collect()
                });
                Some(*index.get(parent)?)
            }
        };
    }
    spans.reverse();
    Some(spans)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::{RawJsonArray, branch_message_spans};

    fn branch_messages_json(text: &str) -> Option<String> {
        let elements = branch_message_spans(text.as_bytes(), 0)?;
        let array = RawJsonArray {
            bytes: Arc::new(text.as_bytes().to_vec()),
            elements: elements.into(),
        };
        assert_eq!(array.written_len(), array.to_vec().len());
        String::from_utf8(array.to_vec()).ok()
    }

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
