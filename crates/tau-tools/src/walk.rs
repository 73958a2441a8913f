//! Machinery shared by `grep`, `find` and `ls`: argument coercion, running filesystem work
//! off the async runtime with prompt abort, pi's closing notices, and the parallel directory
//! walk whose rules (decision 17) are: hidden files included, `.gitignore` honoured inside and
//! outside git repositories, `.git` never entered, results sorted by path so every run prints
//! the same.

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use ignore::overrides::Override;
use ignore::{DirEntry, ParallelVisitor, ParallelVisitorBuilder, WalkBuilder, WalkState};
use serde_json::{Map, Value, json};
use tau_protocol::{AgentToolResult, TruncatedBy, Truncation};
use tokio_util::sync::CancellationToken;

use crate::ToolEnv;
use crate::call::{ABORTED, text_block, validation_error};
use crate::truncate::{DEFAULT_MAX_BYTES, format_size};

/// JavaScript's `Number.MAX_SAFE_INTEGER`: pi passes it as the line limit when only the byte
/// cap applies, and it shows up in `details.truncation.maxLines`.
pub(crate) const MAX_SAFE_INTEGER: usize = 9_007_199_254_740_991;

/// The tools' output, line by line, truncated as pi's `truncateHead(text, {maxLines:
/// MAX_SAFE_INTEGER})` truncates the joined lines (the tools' own limits bound the lines, so
/// only the byte cap applies). Lines past the cap are only counted: a search with 100,000
/// matches never holds more than 50KB of output text.
pub(crate) struct HeadOutput {
    content: String,
    /// Pieces of the joined text between `\n`s.
    pieces: usize,
    total_bytes: usize,
    output_lines: usize,
    /// Whether the last piece is empty, that is, the joined text ends with `\n`.
    last_empty: bool,
    /// A line did not fit; nothing more is kept.
    full: bool,
}

impl HeadOutput {
    pub(crate) fn new() -> Self {
        Self {
            content: String::new(),
            pieces: 0,
            total_bytes: 0,
            output_lines: 0,
            last_empty: false,
            full: false,
        }
    }

    /// Adds one line (a line holding `\n`, as a file name may, counts as several, as pi
    /// splits the joined text).
    pub(crate) fn push_line(&mut self, line: &str) {
        for piece in line.split('\n') {
            let cost = piece.len() + usize::from(self.pieces > 0);
            self.total_bytes += cost;
            if !self.full {
                if self.content.len() + cost <= DEFAULT_MAX_BYTES {
                    if self.pieces > 0 {
                        self.content.push('\n');
                    }
                    self.content.push_str(piece);
                    self.output_lines += 1;
                } else {
                    self.full = true;
                }
            }
            self.pieces += 1;
            self.last_empty = piece.is_empty();
        }
    }

    /// Whether lines are only counted from now on.
    pub(crate) fn is_full(&self) -> bool {
        self.full
    }

    /// Counts a line of `len` bytes without its text; only for lines without `\n`, once the
    /// output [is full](Self::is_full).
    pub(crate) fn count_line(&mut self, len: usize) {
        self.total_bytes += len + usize::from(self.pieces > 0);
        self.pieces += 1;
        self.last_empty = len == 0;
    }

    pub(crate) fn finish(self) -> Truncation {
        // Lines as `truncate_head` counts them: none in empty text, and no empty line after a
        // final `\n`.
        let lines = if self.total_bytes == 0 && self.pieces <= 1 {
            0
        } else {
            self.pieces - usize::from(self.pieces >= 2 && self.last_empty)
        };
        let output_bytes = self.content.len();
        Truncation {
            content: self.content,
            truncated: self.full,
            truncated_by: self.full.then_some(TruncatedBy::Bytes),
            total_lines: lines,
            total_bytes: self.total_bytes,
            output_lines: if self.full { self.output_lines } else { lines },
            output_bytes,
            last_line_partial: false,
            first_line_exceeds_limit: self.full && self.output_lines == 0,
            max_lines: MAX_SAFE_INTEGER,
            max_bytes: DEFAULT_MAX_BYTES,
        }
    }
}

/// A successful result with one text block.
pub(crate) fn text_result(text: String, details: Map<String, Value>) -> AgentToolResult {
    AgentToolResult {
        extra: Default::default(),
        content: vec![text_block(text)],
        // pi leaves `details` undefined rather than sending an empty object.
        details: (!details.is_empty()).then_some(Value::Object(details)),
        terminate: None,
    }
}

/// One of the notices pi appends after a listing, with the `details` entry that goes with it.
pub(crate) struct Notice {
    pub(crate) text: String,
    pub(crate) key: &'static str,
    pub(crate) value: Value,
}

impl Notice {
    /// The tool's own result limit cut the list: `<limit> <what> limit reached. Use
    /// limit=<2 × limit> for more<advice>`, with the limit in `details.<key>`.
    pub(crate) fn limit_reached(limit: usize, what: &str, advice: &str, key: &'static str) -> Self {
        Self {
            text: format!(
                "{limit} {what} limit reached. Use limit={} for more{advice}",
                limit.saturating_mul(2)
            ),
            key,
            value: json!(limit),
        }
    }
}

/// A listing's result: the lines cut at the byte cap, then pi's notices in pi's order (the
/// tool's result limit, the byte cap, then `last`), each with its `details` entry.
pub(crate) fn listing_result(
    output: HeadOutput,
    limit: Option<Notice>,
    last: Option<Notice>,
) -> AgentToolResult {
    let truncation = output.finish();
    let mut text = truncation.content.clone();
    let byte_cap = truncation.truncated.then(|| Notice {
        text: format!("{} limit reached", format_size(DEFAULT_MAX_BYTES)),
        key: "truncation",
        value: json!(truncation),
    });
    let mut notices = Vec::new();
    let mut details = Map::new();
    for notice in [limit, byte_cap, last].into_iter().flatten() {
        notices.push(notice.text);
        details.insert(notice.key.into(), notice.value);
    }
    // `\n\n[a. b]`, as pi appends them.
    if !notices.is_empty() {
        text.push_str("\n\n[");
        text.push_str(&notices.join(". "));
        text.push(']');
    }
    text_result(text, details)
}

/// What `path` names, or pi's `Path not found` when nothing is there.
pub(crate) fn existing(path: &Path) -> Result<fs::Metadata, String> {
    fs::metadata(path).map_err(|_| format!("Path not found: {}", path.display()))
}

/// Fails with pi's texts unless `path` is a directory.
pub(crate) fn existing_dir(path: &Path) -> Result<(), String> {
    if existing(path)?.is_dir() {
        Ok(())
    } else {
        Err(format!("Not a directory: {}", path.display()))
    }
}

/// Reads the call's arguments with the coercions pi's validator applies first (TypeBox
/// `Value.Convert`: numeric strings become numbers, `"true"` becomes `true`, …). The agent
/// loop validates against the schema too; this keeps the tools safe when called directly.
pub(crate) struct Args<'a> {
    tool: &'static str,
    map: &'a Map<String, Value>,
}

impl<'a> Args<'a> {
    pub(crate) fn new(tool: &'static str, map: &'a Map<String, Value>) -> Self {
        Self { tool, map }
    }

    fn get(&self, name: &str) -> Option<&'a Value> {
        self.map.get(name).filter(|v| !v.is_null())
    }

    fn invalid(&self, name: &str, message: &str) -> String {
        validation_error(self.tool, &[format!("{name}: {message}")], self.map)
    }

    /// The `path` argument resolved against the working directory and normalised; the
    /// working directory itself when left out or empty.
    pub(crate) fn path(&self, env: &ToolEnv) -> Result<PathBuf, String> {
        let path = self.string("path")?.unwrap_or_default();
        let path = if path.is_empty() { "." } else { &path };
        Ok(tau_base::paths::normalize(&env.resolve(path)))
    }

    pub(crate) fn required_string(&self, name: &str) -> Result<String, String> {
        self.string(name)?
            .ok_or_else(|| self.invalid(name, &format!("must have required properties {name}")))
    }

    pub(crate) fn string(&self, name: &str) -> Result<Option<String>, String> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(Value::Number(n)) => Ok(Some(n.to_string())),
            Some(Value::Bool(b)) => Ok(Some(b.to_string())),
            Some(_) => Err(self.invalid(name, "must be string")),
        }
    }

    pub(crate) fn number(&self, name: &str) -> Result<Option<f64>, String> {
        let parsed = match self.get(name) {
            None => return Ok(None),
            Some(Value::Number(n)) => n.as_f64(),
            Some(Value::String(s)) => s.trim().parse::<f64>().ok().filter(|f| f.is_finite()),
            Some(Value::Bool(b)) => Some(f64::from(u8::from(*b))),
            Some(_) => None,
        };
        parsed
            .map(Some)
            .ok_or_else(|| self.invalid(name, "must be number"))
    }

    pub(crate) fn boolean(&self, name: &str) -> Result<Option<bool>, String> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(Value::String(s)) if s == "true" => Ok(Some(true)),
            Some(Value::String(s)) if s == "false" => Ok(Some(false)),
            Some(Value::Number(n)) if n.as_f64() == Some(1.0) => Ok(Some(true)),
            Some(Value::Number(n)) if n.as_f64() == Some(0.0) => Ok(Some(false)),
            Some(_) => Err(self.invalid(name, "must be boolean")),
        }
    }

    /// A result limit: whole numbers, at least 1 (a fractional limit rounds up, as pi's
    /// `count >= limit` test does).
    pub(crate) fn limit(&self, name: &str, default: usize) -> Result<usize, String> {
        Ok(match self.number(name)? {
            None => default,
            // `as` saturates, so huge values become usize::MAX.
            Some(n) => (n.ceil() as usize).max(1),
        })
    }
}

/// Runs `work` on the blocking pool. Abort answers at once with `Operation aborted`; the work
/// sees `stop` turn true and winds down on its own.
pub(crate) async fn run_blocking<T, F>(cancel: &CancellationToken, work: F) -> Result<T, String>
where
    T: Send + 'static,
    F: FnOnce(&AtomicBool) -> Result<T, String> + Send + 'static,
{
    if cancel.is_cancelled() {
        return Err(ABORTED.to_string());
    }
    // An atomic flag rather than the token itself: the walk checks it for every entry, and
    // `CancellationToken::is_cancelled` takes a lock.
    let stop = Arc::new(AtomicBool::new(false));
    // Set on every exit path, including the future being dropped, so no walk outlives us.
    let _guard = StopOnDrop(stop.clone());
    let task = {
        let stop = stop.clone();
        tokio::task::spawn_blocking(move || work(&stop))
    };
    tokio::select! {
        biased;
        () = cancel.cancelled() => Err(ABORTED.to_string()),
        joined = task => match joined {
            Ok(result) if cancel.is_cancelled() => result.and(Err(ABORTED.to_string())),
            Ok(result) => result,
            Err(err) => Err(format!("Search task failed: {err}")),
        },
    }
}

struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// A walker over `root` with the search tools' rules. `custom_ignore` is the tool-specific
/// ignore file the original tool honours (`.rgignore`, `.fdignore`).
pub(crate) fn walker(
    root: &Path,
    cwd: &Path,
    custom_ignore: &str,
    overrides: Option<Override>,
) -> WalkBuilder {
    let mut builder = WalkBuilder::new(root);
    builder
        .hidden(false)
        .parents(true)
        .ignore(true)
        .git_ignore(true)
        .git_global(true)
        .git_exclude(true)
        .require_git(false)
        .follow_links(false)
        .current_dir(cwd)
        .add_custom_ignore_filename(custom_ignore)
        .filter_entry(|entry| entry.file_name() != OsStr::new(".git"));
    if let Some(overrides) = overrides {
        builder.overrides(overrides);
    }
    builder
}

/// Walks in parallel and keeps what the visitors return for the entries below the root. Each
/// walker thread gets its own visitor from `make_visitor`, so it may keep per-thread state (a
/// searcher and its buffer). Order is arbitrary; callers sort. Unreadable entries are skipped,
/// as rg and fd skip them.
pub(crate) fn walk_parallel<T, M, V>(
    builder: &WalkBuilder,
    stop: &AtomicBool,
    make_visitor: &M,
) -> Vec<T>
where
    T: Send,
    M: Fn() -> V + Sync,
    V: FnMut(&DirEntry) -> Option<T> + Send,
{
    let results = Mutex::new(Vec::new());
    let mut collector = Collector {
        results: &results,
        stop,
        make_visitor,
    };
    builder.build_parallel().visit(&mut collector);
    results
        .into_inner()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

struct Collector<'a, T, M> {
    results: &'a Mutex<Vec<T>>,
    stop: &'a AtomicBool,
    make_visitor: &'a M,
}

impl<'s, T, M, V> ParallelVisitorBuilder<'s> for Collector<'s, T, M>
where
    T: Send,
    M: Fn() -> V + Sync,
    V: FnMut(&DirEntry) -> Option<T> + Send + 's,
{
    fn build(&mut self) -> Box<dyn ParallelVisitor + 's> {
        Box::new(Visitor {
            local: Vec::new(),
            results: self.results,
            stop: self.stop,
            visit: (self.make_visitor)(),
        })
    }
}

/// One walker thread's visitor: it collects locally and merges once, when dropped, so the
/// threads never contend on the shared list.
struct Visitor<'a, T: Send, V> {
    local: Vec<T>,
    results: &'a Mutex<Vec<T>>,
    stop: &'a AtomicBool,
    visit: V,
}

impl<T, V> ParallelVisitor for Visitor<'_, T, V>
where
    T: Send,
    V: FnMut(&DirEntry) -> Option<T> + Send,
{
    fn visit(&mut self, entry: Result<DirEntry, ignore::Error>) -> WalkState {
        if self.stop.load(Ordering::Relaxed) {
            return WalkState::Quit;
        }
        if let Ok(entry) = entry
            && entry.depth() > 0
            && let Some(item) = (self.visit)(&entry)
        {
            self.local.push(item);
        }
        WalkState::Continue
    }
}

impl<T: Send, V> Drop for Visitor<'_, T, V> {
    fn drop(&mut self) {
        let mut results = self
            .results
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        results.append(&mut self.local);
    }
}

/// A relative path as a key whose plain byte order is the order of a sorted tree walk
/// (`a/b` before `a.txt`): the separator becomes the lowest byte. Comparing such keys is a
/// `memcmp`, far cheaper than `Path`'s component-wise comparison on a large tree, and the keys
/// are built by the walker threads in parallel.
pub(crate) fn sort_key(relative: &Path) -> Vec<u8> {
    #[cfg(unix)]
    let bytes = {
        use std::os::unix::ffi::OsStrExt;
        relative.as_os_str().as_bytes().to_vec()
    };
    #[cfg(not(unix))]
    let bytes = relative
        .to_string_lossy()
        .replace(std::path::MAIN_SEPARATOR, "/")
        .into_bytes();
    let mut key = bytes;
    for byte in &mut key {
        if *byte == b'/' {
            *byte = 0;
        }
    }
    key
}

/// The path a [`sort_key`] was made from, with `/` separators, for display.
pub(crate) fn display_key(key: &[u8]) -> String {
    let bytes: Vec<u8> = key
        .iter()
        .map(|&byte| if byte == 0 { b'/' } else { byte })
        .collect();
    match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(err) => String::from_utf8_lossy(err.as_bytes()).into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_output_truncates_like_truncate_head() {
        use crate::truncate::truncate_head;
        let long = "x".repeat(DEFAULT_MAX_BYTES + 1);
        let filler = "y".repeat(DEFAULT_MAX_BYTES - 10);
        let cases: Vec<Vec<&str>> = vec![
            vec!["a"],
            vec!["a", "", "b"],
            vec![""],
            vec![&long],
            vec![&long, "a"],
            vec!["a", &long, "b"],
            vec![&filler, "123456789"],
            vec![&filler, "1234567890"],
            vec![&filler, "12345678", "1"],
            vec!["line\nwith break", "z"],
            vec!["ends with a break", ""],
            vec!["ends with a break\n"],
            vec![],
        ];
        for lines in cases {
            let mut head = HeadOutput::new();
            for line in &lines {
                head.push_line(line);
            }
            let expected = truncate_head(&lines.join("\n"), MAX_SAFE_INTEGER, DEFAULT_MAX_BYTES);
            assert_eq!(
                head.finish(),
                expected,
                "{:?}",
                lines.iter().map(|l| l.len()).collect::<Vec<_>>()
            );
        }
    }

    #[test]
    fn keys_sort_like_a_tree_walk() {
        let mut paths: Vec<&Path> = ["a.txt", "a/b", "a", "a-b", "a/b/c", "B", "a/a", "a\u{1}"]
            .into_iter()
            .map(Path::new)
            .collect();
        let mut expected = paths.clone();
        expected.sort();
        paths.sort_by_key(|path| sort_key(path));
        assert_eq!(paths, expected);
        assert_eq!(
            paths[..7],
            ["B", "a", "a/a", "a/b", "a/b/c", "a\u{1}", "a-b"].map(Path::new)
        );
        assert_eq!(display_key(&sort_key(Path::new("a/b/c"))), "a/b/c");
    }

    #[test]
    fn coerces_like_typebox() {
        let map: Map<String, Value> = serde_json::from_str(
            r#"{"p":5,"n":"7","b":"true","bad":"abc","f":2.5,"z":0,"nul":null}"#,
        )
        .unwrap_or_default();
        let args = Args::new("grep", &map);
        assert_eq!(args.string("p"), Ok(Some("5".into())));
        assert_eq!(args.number("n"), Ok(Some(7.0)));
        assert_eq!(args.boolean("b"), Ok(Some(true)));
        assert_eq!(args.limit("f", 100), Ok(3));
        assert_eq!(args.limit("z", 100), Ok(1));
        assert_eq!(args.limit("nul", 100), Ok(100));
        let err = args.number("bad").err().unwrap_or_default();
        assert!(
            err.starts_with("Validation failed for tool \"grep\":\n  - bad: must be number\n\n"),
            "{err}"
        );
        let err = args.required_string("pattern").err().unwrap_or_default();
        assert!(err.contains("  - pattern: must have required properties pattern"));
    }
}
