//! Reading a session file: the header, then each line on its own (malformed ones are skipped,
//! a torn last line after a crash is normal), and the migrations of files older than
//! version 3.

use super::entry::{CURRENT_VERSION, SessionEntry, SessionHeader};
use super::{StoreError, new_entry_id};
use serde::Deserialize;
use serde_json::{Map, Value};
use std::collections::HashSet;
use std::fs::File;
use std::io::BufRead;
use std::path::Path;

/// What a session file holds.
#[derive(Debug)]
pub(crate) struct Loaded {
    pub header: SessionHeader,
    pub entries: Vec<SessionEntry>,
    /// The file was older than version 3: these are the migrated lines (header first) that
    /// must replace its contents.
    pub rewrite: Option<Vec<String>>,
}

/// Reads a whole session from `bytes` (the file's contents); `path` only names the file in
/// errors and warnings. The entry lines are parsed where they lie: a copy of them would be as
/// large as the file, on top of the entries.
pub(crate) fn read_session(bytes: &[u8], path: &Path) -> Result<Loaded, StoreError> {
    let (header, rest) = split_header(bytes, path)?;
    if header.version < CURRENT_VERSION {
        return read_and_migrate(rest, header, path);
    }
    Ok(Loaded {
        header,
        entries: parse_entries(rest, path),
        rewrite: None,
    })
}

/// The header (the first line that is not blank) and the bytes after it.
pub(crate) fn split_header<'a>(
    bytes: &'a [u8],
    path: &Path,
) -> Result<(SessionHeader, &'a [u8]), StoreError> {
    let mut rest = bytes;
    loop {
        if rest.is_empty() {
            return Err(StoreError::NotASessionFile(path.to_path_buf()));
        }
        let end = memchr::memchr(b'\n', rest).map_or(rest.len(), |at| at + 1);
        let (line, after) = rest.split_at(end);
        rest = after;
        if is_blank(line) {
            continue;
        }
        let header = serde_json::from_slice::<Map<String, Value>>(line)
            .ok()
            .and_then(SessionHeader::from_map)
            .ok_or_else(|| StoreError::NotASessionFile(path.to_path_buf()))?;
        return Ok((header, rest));
    }
}

/// Below this size one thread parses; above, the lines are shared out between threads.
const PARALLEL_FROM_BYTES: usize = 1 << 20;

/// Parses the entry lines of `text` (everything after the header), in file order. Parsing
/// the messages dominates opening a long session, and lines are independent, so a large
/// file's lines are split into contiguous runs parsed on all cores.
fn parse_entries(text: &[u8], path: &Path) -> Vec<SessionEntry> {
    let threads = if text.len() < PARALLEL_FROM_BYTES {
        1
    } else {
        super::parsing_threads()
    };
    if threads == 1 {
        return parse_run(text, path, 0);
    }
    // Cut at line ends near equal byte offsets.
    let mut cuts = vec![0];
    for i in 1..threads {
        let target = text.len() * i / threads;
        let from = (*cuts.last().unwrap_or(&0)).max(target);
        let cut = memchr::memchr(b'\n', text.get(from..).unwrap_or_default())
            .map_or(text.len(), |at| from + at + 1);
        cuts.push(cut);
    }
    cuts.push(text.len());
    // The first run's vector is made large enough for every entry, so the others are moved
    // into it without it growing: growing it would copy it while all the runs' vectors are
    // alive, tens of megabytes for a long session.
    let lines = memchr::memchr_iter(b'\n', text).count() + 1;
    std::thread::scope(|scope| {
        let workers: Vec<_> = cuts
            .windows(2)
            .enumerate()
            .map(|(i, w)| {
                let run = text.get(w[0]..w[1]).unwrap_or_default();
                let room = if i == 0 { lines } else { 0 };
                scope.spawn(move || parse_run(run, path, room))
            })
            .collect();
        join_runs(workers, path)
    })
}

/// Parses one run of lines; the vector has room for `room` entries at least.
pub(crate) fn parse_run(text: &[u8], path: &Path, room: usize) -> Vec<SessionEntry> {
    let lines = memchr::memchr_iter(b'\n', text).count() + 1;
    let mut entries = Vec::with_capacity(lines.max(room));
    parse_lines(text, path, &mut entries);
    entries
}

fn parse_lines(text: &[u8], path: &Path, entries: &mut Vec<SessionEntry>) {
    for line in text.split(|&b| b == b'\n') {
        if is_blank(line) {
            continue;
        }
        match parse_entry_line(line) {
            Some(entry) => entries.push(entry),
            None => tracing::warn!(
                path = %path.display(),
                "skipping malformed session line"
            ),
        }
    }
}

/// How much of the file a streamed parse reads at a time.
const STREAM_CHUNK: usize = 4 << 20;

/// Parses the entry lines of `file` between the byte offsets of `cuts` (line starts, the
/// last one the file's end), reading it piece by piece, one run per pair of cuts on its own
/// thread. Why not from the file's bytes in memory: for a long session the parsed entries
/// are as large as the file, and holding both at once doubles the peak; the file is in the
/// page cache (it was just read), so reading it again costs a copy, not disk time.
pub(crate) fn parse_file(
    file: &File,
    cuts: &[u64],
    path: &Path,
    lines: usize,
) -> Vec<SessionEntry> {
    std::thread::scope(|scope| {
        let workers: Vec<_> = cuts
            .windows(2)
            .enumerate()
            .map(|(i, w)| {
                // Room for every entry in the first run's vector, as in `parse_entries`.
                let room = if i == 0 {
                    lines
                } else {
                    lines / (cuts.len() - 1)
                };
                let (from, to) = (w[0], w[1]);
                scope.spawn(move || parse_file_run(file, from, to, path, room, STREAM_CHUNK))
            })
            .collect();
        join_runs(workers, path)
    })
}

/// One run of [`parse_file`], reading `chunk` bytes at a time.
pub(crate) fn parse_file_run(
    file: &File,
    from: u64,
    to: u64,
    path: &Path,
    room: usize,
    chunk: usize,
) -> Vec<SessionEntry> {
    use std::os::unix::fs::FileExt;
    let mut entries = Vec::with_capacity(room);
    let mut buffer: Vec<u8> = Vec::with_capacity(chunk);
    let mut at = from;
    while at < to {
        let want = usize::try_from(to - at).unwrap_or(usize::MAX).min(chunk);
        let kept = buffer.len();
        buffer.resize(kept + want, 0);
        let read = match file.read_at(&mut buffer[kept..], at) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => 0,
            Err(e) => {
                tracing::error!(path = %path.display(), "cannot read the session file: {e}");
                break;
            }
        };
        buffer.truncate(kept + read);
        at += read as u64;
        // Whole lines are parsed; a line cut by the read waits for the next one.
        if let Some(end) = memchr::memrchr(b'\n', &buffer) {
            parse_lines(&buffer[..end], path, &mut entries);
            buffer.drain(..=end);
        }
    }
    parse_lines(&buffer, path, &mut entries);
    entries
}

fn is_blank(line: &[u8]) -> bool {
    line.iter().all(u8::is_ascii_whitespace)
}

/// Typed when tau understands the entry; otherwise kept whole as long as it has the
/// fields that place it in the tree.
fn parse_entry_line(line: &[u8]) -> Option<SessionEntry> {
    match serde_json::from_slice::<SessionEntry>(line) {
        Ok(entry) => Some(entry),
        Err(_) => serde_json::from_slice::<Map<String, Value>>(line)
            .ok()
            .and_then(opaque_entry),
    }
}

fn entry_from_value(value: Value) -> Option<SessionEntry> {
    match SessionEntry::deserialize(&value) {
        Ok(entry) => Some(entry),
        Err(_) => match value {
            Value::Object(map) => opaque_entry(map),
            _ => None,
        },
    }
}

/// An entry kept verbatim: tau does not know its type or could not read its fields.
fn opaque_entry(map: Map<String, Value>) -> Option<SessionEntry> {
    let entry_type = map.get("type")?.as_str()?;
    let id = map.get("id")?.as_str()?.to_owned();
    if entry_type == "session" {
        return None;
    }
    tracing::debug!(
        entry_type,
        id,
        "keeping session entry tau does not understand"
    );
    let parent_id = map
        .get("parentId")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let timestamp = map
        .get("timestamp")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    Some(SessionEntry {
        id,
        parent_id,
        timestamp,
        kind: super::entry::EntryKind::Unknown(map),
        extra: Map::new(),
    })
}

/// Old files are small and rare: they go through JSON trees so that every field survives.
fn read_and_migrate<R: BufRead>(
    reader: R,
    mut header: SessionHeader,
    path: &Path,
) -> Result<Loaded, StoreError> {
    let mut values = Vec::new();
    for (n, line) in reader.split(b'\n').enumerate() {
        let line = line.map_err(|source| StoreError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        if is_blank(&line) {
            continue;
        }
        match serde_json::from_slice::<Value>(&line) {
            Ok(Value::Object(map)) => values.push(map),
            _ => tracing::warn!(
                path = %path.display(),
                line = n + 2,
                "skipping malformed session line"
            ),
        }
    }
    let from = header.version;
    if from < 2 {
        migrate_v1_to_v2(&mut values);
    }
    migrate_v2_to_v3(&mut values);
    header.version = CURRENT_VERSION;
    tracing::info!(path = %path.display(), from, "migrating session file to version 3");

    let mut lines = Vec::with_capacity(values.len() + 1);
    lines.push(serde_json::to_string(&header).map_err(StoreError::Encode)?);
    let mut entries = Vec::with_capacity(values.len());
    for map in values {
        lines.push(serde_json::to_string(&map).map_err(StoreError::Encode)?);
        if let Some(entry) = entry_from_value(Value::Object(map)) {
            entries.push(entry);
        }
    }
    Ok(Loaded {
        header,
        entries,
        rewrite: Some(lines),
    })
}

/// Version 1 had no tree: each entry becomes the child of the one before it, and compaction
/// pointed at the first kept entry by its line index (the header being index 0).
fn migrate_v1_to_v2(values: &mut [Map<String, Value>]) {
    let mut taken = HashSet::new();
    let mut ids = Vec::with_capacity(values.len());
    let mut previous: Option<String> = None;
    for map in values.iter_mut() {
        let id = new_entry_id(|candidate| taken.contains(candidate));
        taken.insert(id.clone());
        // Tree links go right after `type`, where tau writes them.
        let mut linked = Map::with_capacity(map.len() + 2);
        let mut old = std::mem::take(map);
        if let Some(t) = old.shift_remove("type") {
            linked.insert("type".into(), t);
        }
        old.shift_remove("id");
        old.shift_remove("parentId");
        linked.insert("id".into(), Value::String(id.clone()));
        linked.insert(
            "parentId".into(),
            previous.clone().map_or(Value::Null, Value::String),
        );
        linked.extend(old);
        *map = linked;
        previous = Some(id.clone());
        ids.push(id);
    }
    for map in values.iter_mut() {
        if map.get("type").and_then(Value::as_str) != Some("compaction") {
            continue;
        }
        let Some(index) = map.shift_remove("firstKeptEntryIndex") else {
            continue;
        };
        // Index 0 is the header, which has no id.
        let target = index
            .as_u64()
            .and_then(|i| usize::try_from(i).ok())
            .and_then(|i| i.checked_sub(1))
            .and_then(|i| ids.get(i));
        if let Some(target) = target {
            map.insert("firstKeptEntryId".into(), Value::String(target.clone()));
        }
    }
}

/// Version 3 renamed the extension message role `hookMessage` to `custom`.
fn migrate_v2_to_v3(values: &mut [Map<String, Value>]) {
    for map in values.iter_mut() {
        if map.get("type").and_then(Value::as_str) != Some("message") {
            continue;
        }
        if let Some(Value::Object(message)) = map.get_mut("message")
            && message.get("role").and_then(Value::as_str) == Some("hookMessage")
        {
            message.insert("role".into(), Value::String("custom".into()));
        }
    }
}

/// The most of a session file's first line read for its header: a real header is a few
/// hundred bytes, so a large file that is not a session costs nothing.
const HEADER_CAP: u64 = 64 * 1024;

/// Reads only the header line of a session file, for discovery. Only a regular file is
/// opened (a FIFO named `x.jsonl` in a session folder must not hang `--continue`), and only
/// its first [`HEADER_CAP`] bytes read.
pub(crate) fn read_header(path: &Path) -> Option<SessionHeader> {
    let line = match tau_base::bounded::first_line(path, HEADER_CAP) {
        Ok(line) => line,
        Err(e @ tau_base::bounded::BoundedReadError::NotRegular { .. }) => {
            tracing::warn!("skipping session file {}: {e}", path.display());
            return None;
        }
        Err(_) => return None,
    };
    serde_json::from_slice::<Map<String, Value>>(&line)
        .ok()
        .and_then(SessionHeader::from_map)
}

/// The parser threads' runs of entries, in file order. A parser panic is a bug; losing that
/// run of lines beats losing the session.
fn join_runs(
    workers: Vec<std::thread::ScopedJoinHandle<'_, Vec<SessionEntry>>>,
    path: &Path,
) -> Vec<SessionEntry> {
    let mut entries = Vec::new();
    for worker in workers {
        match worker.join() {
            Ok(part) if entries.is_empty() => entries = part,
            Ok(mut part) => entries.append(&mut part),
            Err(_) => tracing::error!(path = %path.display(), "a session parser thread failed"),
        }
    }
    entries
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_is_read_from_a_regular_file_only_and_within_its_cap() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("planted.jsonl");
        rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, rustix::fs::Mode::RUSR).unwrap();
        // Nobody writes to it: an ordinary open would never return.
        assert!(read_header(&fifo).is_none());
        let linked = dir.path().join("zero.jsonl");
        std::os::unix::fs::symlink("/dev/zero", &linked).unwrap();
        assert!(read_header(&linked).is_none());
        let real = dir.path().join("real.jsonl");
        std::fs::write(
            &real,
            "{\"type\":\"session\",\"version\":3,\"id\":\"s1\",\"cwd\":\"/x\"}\n{\"type\":\"x\"}\n",
        )
        .unwrap();
        assert_eq!(read_header(&real).map(|h| h.id).as_deref(), Some("s1"));
        let padded = format!(
            "{{\"type\":\"session\",\"id\":\"s2\",\"pad\":\"{}\"}}\n",
            "x".repeat(usize::try_from(HEADER_CAP).unwrap())
        );
        std::fs::write(&real, padded).unwrap();
        assert!(
            read_header(&real).is_none(),
            "a header past the cap is no header"
        );
    }
}
