//! The `grep` tool (tools-resources §1.5): searches file contents in-process with the crates
//! ripgrep is built from, and prints pi's lines (`path:line: text`, context lines as
//! `path-line- text`) and notices. Unlike pi's rg run, files are searched in path order and
//! the first `limit` matches of that order are reported, so the output never varies between
//! runs, and `.git/` is never searched (decision 17).

use std::borrow::Cow;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{LazyLock, Mutex};

use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkMatch};
use ignore::DirEntry;
use ignore::overrides::OverrideBuilder;
use serde_json::{Map, Value, json};
use tau_protocol::AgentToolResult;

use crate::ToolEnv;
use crate::call::ABORTED;
use crate::tool::builtin_tool;
use crate::truncate::{GREP_MAX_LINE_LENGTH, truncate_line};
use crate::walk::{
    Args, HeadOutput, Notice, display_key, existing, listing_result, sort_key, text_result,
    walk_parallel, walker,
};

const DEFAULT_LIMIT: usize = 100;

const DESCRIPTION: &str = "Search inside files for a regular expression, or for plain text \
with literal=true. Each hit is printed as path:line: text, with paths relative to the searched \
directory and files taken in path order; context=N adds the N lines around every hit as \
path-line- text. Files ignored by .gitignore and binary files are skipped, and .git is never \
searched. At most 100 matches (change with limit) or 50KB are returned, and lines longer than \
500 characters are cut.";

static PARAMETERS: LazyLock<Value> = LazyLock::new(|| {
    json!({
        "type": "object",
        "required": ["pattern"],
        "properties": {
            "pattern": {"type": "string", "description": "What to look for: a regular expression, or plain text with literal"},
            "path": {"type": "string", "description": "The directory or file to search (the working directory if left out)"},
            "glob": {"type": "string", "description": "Only search files matching this glob, such as '*.rs' or 'tests/**'"},
            "ignoreCase": {"type": "boolean", "description": "Ignore letter case (false if left out)"},
            "literal": {"type": "boolean", "description": "Take the pattern as plain text, not a regular expression (false if left out)"},
            "context": {"type": "number", "description": "Lines of context to show around each match (0 if left out)"},
            "limit": {"type": "number", "description": "Stop after this many matches (100 if left out)"}
        }
    })
});

builtin_tool!(
    /// The `grep` tool.
    GrepTool,
    "grep",
    request: Request
);

struct Request {
    pattern: String,
    root: PathBuf,
    cwd: PathBuf,
    glob: Option<String>,
    ignore_case: bool,
    literal: bool,
    context: usize,
    limit: usize,
}

/// One matching line as the searcher reported it.
struct Hit {
    line: u64,
    text: Vec<u8>,
}

/// A file to search.
struct Candidate {
    /// The path below the search root as a [`sort_key`]; the output is sorted by it.
    key: Vec<u8>,
    path: PathBuf,
    /// The file's hits once it has been searched.
    hits: Option<Vec<Hit>>,
}

impl Candidate {
    /// The path as pi prints it: relative to the searched directory, or the base name when
    /// that is empty or leaves the directory (and when a single file is searched).
    fn shown(&self) -> String {
        let relative = display_key(&self.key);
        if relative.is_empty() || relative.starts_with("..") {
            basename(&self.path)
        } else {
            relative
        }
    }
}

impl Request {
    fn parse(env: &ToolEnv, arguments: &Map<String, Value>) -> Result<Self, String> {
        let args = Args::new("grep", arguments);
        let pattern = args.required_string("pattern")?;
        let root = args.path(env)?;
        let glob = args.string("glob")?.filter(|g| !g.is_empty());
        let context = args.number("context")?.unwrap_or(0.0);
        Ok(Self {
            pattern,
            root,
            cwd: env.cwd.clone(),
            glob,
            ignore_case: args.boolean("ignoreCase")?.unwrap_or(false),
            literal: args.boolean("literal")?.unwrap_or(false),
            // `as` saturates; a fractional context (meaningless to pi) is rounded up.
            context: if context > 0.0 {
                context.ceil() as usize
            } else {
                0
            },
            limit: args.limit("limit", DEFAULT_LIMIT)?,
        })
    }

    fn execute(self, stop: &AtomicBool) -> Result<AgentToolResult, String> {
        let metadata = existing(&self.root)?;
        let matcher = RegexMatcherBuilder::new()
            .case_insensitive(self.ignore_case)
            .fixed_strings(self.literal)
            .line_terminator(Some(b'\n'))
            .build(&self.pattern)
            .map_err(|err| err.to_string())?;

        let mut files = if metadata.is_dir() {
            self.walk_and_search(&matcher, stop)?
        } else {
            vec![Candidate {
                key: Vec::new(),
                path: self.root.clone(),
                hits: None,
            }]
        };
        search_in_order(&mut files, &matcher, self.limit, stop);
        if stop.load(Ordering::Relaxed) {
            return Err(ABORTED.to_string());
        }

        let mut output = HeadOutput::new();
        let mut lines_truncated = false;
        // One buffer for every line.
        let mut scratch = String::new();
        // `⟨path⟩:⟨n⟩: ⟨text⟩` for a match, `⟨path⟩-⟨n⟩- ⟨text⟩` for context.
        let mut emit = |shown: &str, separator: char, number: u64, text: &str| {
            if output.is_full() && !shown.contains('\n') {
                // Past the byte cap lines are only counted, and need not be formatted.
                let digits = number.checked_ilog10().unwrap_or(0) as usize + 1;
                output.count_line(shown.len() + digits + 3 + text.len());
            } else {
                scratch.clear();
                let _ = write!(scratch, "{shown}{separator}{number}{separator} {text}");
                output.push_line(&scratch);
            }
        };
        let mut count = 0;
        'files: for file in &files {
            // Files after the first `limit` hits may not have been searched.
            let Some(hits) = &file.hits else { break };
            if hits.is_empty() {
                continue;
            }
            let shown = file.shown();
            // pi re-reads the file for context lines, splitting on every kind of line break.
            let file_lines = (self.context > 0).then(|| read_lines(&file.path));
            for hit in hits {
                if count == self.limit {
                    break 'files;
                }
                count += 1;
                let Some(file_lines) = &file_lines else {
                    let text = String::from_utf8_lossy(&hit.text);
                    let text = text.strip_suffix('\n').unwrap_or(&text);
                    let text = if text.contains('\r') {
                        Cow::Owned(text.replace('\r', ""))
                    } else {
                        Cow::Borrowed(text)
                    };
                    emit(&shown, ':', hit.line, &shorten(&text, &mut lines_truncated));
                    continue;
                };
                let Some(file_lines) = file_lines else {
                    emit(&shown, ':', hit.line, "(unable to read file)");
                    continue;
                };
                let line = usize::try_from(hit.line).unwrap_or(usize::MAX);
                let first = line.saturating_sub(self.context).max(1);
                let last = line.saturating_add(self.context).min(file_lines.len());
                for number in first..=last {
                    let text = file_lines.get(number - 1).map_or("", String::as_str);
                    let separator = if number == line { ':' } else { '-' };
                    let text = shorten(text, &mut lines_truncated);
                    emit(&shown, separator, number as u64, &text);
                }
            }
        }
        if count == 0 {
            return Ok(text_result("No matches found".to_string(), Map::new()));
        }

        let limit = (count >= self.limit).then(|| {
            Notice::limit_reached(
                self.limit,
                "matches",
                ", or refine pattern",
                "matchLimitReached",
            )
        });
        let lines_cut = lines_truncated.then(|| Notice {
            text: format!(
                "Some lines truncated to {GREP_MAX_LINE_LENGTH} chars. Use read tool to see full lines"
            ),
            key: "linesTruncated",
            value: json!(true),
        });
        Ok(listing_result(output, limit, lines_cut))
    }

    /// Every searchable file below the root, sorted by path. While the files seen so far hold
    /// fewer than `limit` hits the walkers search them on the way, as rg would: when the
    /// pattern is rare every file has to be searched anyway, and when it is common this stops
    /// early and [`search_in_order`] searches only the files the output needs.
    fn walk_and_search(
        &self,
        matcher: &RegexMatcher,
        stop: &AtomicBool,
    ) -> Result<Vec<Candidate>, String> {
        let overrides = match &self.glob {
            None => None,
            Some(glob) => {
                let mut builder = OverrideBuilder::new(&self.root);
                builder.add(glob).map_err(|err| err.to_string())?;
                Some(builder.build().map_err(|err| err.to_string())?)
            }
        };
        let builder = walker(&self.root, &self.cwd, ".rgignore", overrides);
        let root = &self.root;
        let limit = self.limit;
        let found = &AtomicUsize::new(0);
        let mut files = walk_parallel(&builder, stop, &|| {
            let mut searcher = FileSearcher::new(matcher);
            move |entry: &DirEntry| {
                // Symbolic links are not followed, as rg does not follow them by default.
                if !entry.file_type().is_some_and(|t| t.is_file()) {
                    return None;
                }
                let key = sort_key(entry.path().strip_prefix(root).ok()?);
                let hits = (found.load(Ordering::Relaxed) < limit).then(|| {
                    let hits = searcher.search(entry.path(), limit, stop);
                    found.fetch_add(hits.len(), Ordering::Relaxed);
                    hits
                });
                Some(Candidate {
                    key,
                    path: entry.path().to_path_buf(),
                    hits,
                })
            }
        });
        files.sort_unstable_by(|a, b| a.key.cmp(&b.key));
        Ok(files)
    }
}

/// pi's `truncateLine` at 500 UTF-16 units, noting in `cut` that a line was cut.
fn shorten<'t>(text: &'t str, cut: &mut bool) -> Cow<'t, str> {
    // A line has no more UTF-16 units than bytes, so short lines need no counting.
    if text.len() <= GREP_MAX_LINE_LENGTH || text.encode_utf16().count() <= GREP_MAX_LINE_LENGTH {
        return Cow::Borrowed(text);
    }
    *cut = true;
    Cow::Owned(truncate_line(text, GREP_MAX_LINE_LENGTH))
}

fn basename(path: &Path) -> String {
    path.file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The file as pi's context formatting sees it: decoded as UTF-8 with replacement characters,
/// `\r\n` and lone `\r` turned into line breaks, split on `\n`. `None` if it cannot be read.
fn read_lines(path: &Path) -> Option<Vec<String>> {
    let bytes = fs::read(path).ok()?;
    let text = String::from_utf8_lossy(&bytes)
        .replace("\r\n", "\n")
        .replace('\r', "\n");
    Some(text.split('\n').map(str::to_string).collect())
}

/// A searcher with its buffer, and its own copy of the matcher, for one thread.
struct FileSearcher {
    searcher: Searcher,
    matcher: RegexMatcher,
}

impl FileSearcher {
    fn new(matcher: &RegexMatcher) -> Self {
        Self {
            searcher: SearcherBuilder::new()
                .line_number(true)
                // rg's rule for files found by walking: stop at the first NUL byte.
                .binary_detection(BinaryDetection::quit(b'\x00'))
                .build(),
            matcher: matcher.clone(),
        }
    }

    /// At most `limit` hits of the file; none if it cannot be read.
    fn search(&mut self, path: &Path, limit: usize, stop: &AtomicBool) -> Vec<Hit> {
        let mut sink = Collect {
            hits: Vec::new(),
            limit,
            stop,
        };
        // Unreadable files are skipped, as rg reports them on stderr and goes on.
        let _ = self.searcher.search_path(&self.matcher, path, &mut sink);
        sink.hits
    }
}

/// Searches the files not searched yet, in order, on all cores, until the searched files at
/// the front of the list hold `limit` hits. Files are handed out in order and every handed-out
/// file is finished, so the first `limit` hits in path order are always complete.
fn search_in_order(
    files: &mut [Candidate],
    matcher: &RegexMatcher,
    limit: usize,
    stop: &AtomicBool,
) {
    let pending = files.iter().filter(|file| file.hits.is_none()).count();
    if pending == 0 {
        return;
    }
    struct Dispatch {
        /// Files before this one are searched or being searched.
        next: usize,
        /// Hits in the searched files before `next`.
        found: usize,
    }
    let dispatch = Mutex::new(Dispatch { next: 0, found: 0 });
    let lock = || {
        dispatch
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    };
    let files_ref = &*files;
    let worker = || {
        let mut searcher = FileSearcher::new(matcher);
        let mut mine = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            let index = {
                let mut state = lock();
                loop {
                    if state.found >= limit {
                        break None;
                    }
                    let index = state.next;
                    let Some(file) = files_ref.get(index) else {
                        break None;
                    };
                    state.next += 1;
                    match &file.hits {
                        Some(hits) => state.found += hits.len(),
                        None => break Some(index),
                    }
                }
            };
            let Some(index) = index else { break };
            let hits = searcher.search(&files_ref[index].path, limit, stop);
            lock().found += hits.len();
            mine.push((index, hits));
        }
        mine
    };
    // At most 12 threads, as the `ignore` walker uses: more only contend for the disk.
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(12)
        .min(pending);
    let searched: Vec<(usize, Vec<Hit>)> = if threads <= 1 {
        worker()
    } else {
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads).map(|_| scope.spawn(worker)).collect();
            handles
                .into_iter()
                .flat_map(|handle| handle.join().unwrap_or_default())
                .collect()
        })
    };
    for (index, hits) in searched {
        files[index].hits = Some(hits);
    }
}

/// Keeps each matching line; no file needs more than `limit` of them.
struct Collect<'a> {
    hits: Vec<Hit>,
    limit: usize,
    stop: &'a AtomicBool,
}

impl Sink for Collect<'_> {
    type Error = std::io::Error;

    fn matched(
        &mut self,
        _searcher: &Searcher,
        found: &SinkMatch<'_>,
    ) -> Result<bool, Self::Error> {
        let first = found.line_number().unwrap_or(0);
        for (offset, line) in (0u64..).zip(found.lines()) {
            if self.hits.len() == self.limit {
                break;
            }
            self.hits.push(Hit {
                line: first + offset,
                text: line.to_vec(),
            });
        }
        Ok(self.hits.len() < self.limit && !self.stop.load(Ordering::Relaxed))
    }
}
