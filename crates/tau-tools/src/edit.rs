//! The `edit` tool (tools-resources §1.3, decision 16): exact-text replacements in one file,
//! several per call, located exactly or, failing that, by pi's fuzzy normalisation. Only the
//! located spans change; every other byte of the file (line endings, a BOM, trailing
//! whitespace, bytes that are not UTF-8) stays as it was. Also the display diff and unified
//! patch pi reports in `details`.

use std::ops::Range;
use std::sync::LazyLock;
use std::time::Duration;

use serde_json::{Map, Value, json};
use similar::{Algorithm, DiffTag, TextDiff};
use tau_protocol::AgentToolResult;
use tokio::io::AsyncReadExt as _;
use tokio_util::sync::CancellationToken;
use unicode_normalization::char::canonical_combining_class;
use unicode_normalization::{IsNormalized, UnicodeNormalization as _, is_nfkc_quick};

use crate::call::{abort_if_cancelled, args, text_block, until_cancelled, validation_error};
use crate::os_error::{os_error, os_error_code};
use crate::tool::builtin_tool;
use crate::write::{lock_file, replace_contents};

const DESCRIPTION: &str = "Changes one file by replacing exact pieces of text. Each entry of \
edits gives an oldText that must occur exactly once in the file as it was before this call and \
must not overlap any other entry's oldText. Changes that sit close together belong in a single \
entry; keep each oldText short instead of stretching it over unchanged text to join distant \
changes.";

const INVALID_INPUT: &str =
    "Edit tool input is invalid. edits must contain at least one replacement.";

const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// Lines of context around changes in the diff and the patch.
const DIFF_CONTEXT: usize = 4;

static PARAMETERS: LazyLock<Value> = LazyLock::new(|| {
    json!({
        "type": "object",
        "required": ["path", "edits"],
        "properties": {
            "path": {
                "type": "string",
                "description": "The file to change, relative to the working directory or absolute"
            },
            "edits": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["oldText", "newText"],
                    "properties": {
                        "oldText": {
                            "type": "string",
                            "description": "The text to replace, exactly as the original file has it. It must occur only once in that file and must not overlap the oldText of another entry."
                        },
                        "newText": {
                            "type": "string",
                            "description": "The text that takes the place of oldText."
                        }
                    },
                    "additionalProperties": false
                },
                "description": "The replacements to make. All of them are located in the original file, not one after another, so they must not overlap or nest; when two changes touch the same or neighbouring lines, make them one entry."
            }
        },
        "additionalProperties": false
    })
});

builtin_tool!(
    /// Edits files for the model.
    EditTool,
    "edit",
    arguments: owned,
    prepare_arguments: prepare_arguments
);

impl EditTool {
    /// Runs one call; `execute` delegates here. `Err` carries the error text.
    /// The arguments go through [`prepare_arguments`] first, so both call shapes work here
    /// whether or not the loop already prepared them.
    pub async fn run(
        &self,
        arguments: Map<String, Value>,
        cancel: &CancellationToken,
    ) -> Result<AgentToolResult, String> {
        abort_if_cancelled(cancel)?;
        let arguments = prepare_arguments(arguments);
        let path = args::string("edit", &arguments, "path")?;
        let edits = parse_edits(&arguments)?;
        let absolute = self.env.resolve(&path);

        let _lock = until_cancelled(cancel, lock_file(&absolute)).await?;
        // The client's text of the file when it serves it (an editor's unsaved buffer).
        let served = match &self.env.files {
            Some(files) => until_cancelled(cancel, files.read_text(&absolute)).await??,
            None => None,
        };
        let original = match served {
            Some(text) => text.into_bytes(),
            None => until_cancelled(cancel, read_for_edit(&absolute, &path)).await??,
        };

        let count = edits.len();
        let display_path = path.clone();
        let computing =
            tokio::task::spawn_blocking(move || apply_edits(&original, &edits, &display_path));
        let applied = until_cancelled(cancel, computing)
            .await?
            .map_err(|e| format!("Edit failed: {e}"))??;

        // Last moment to back out: after the rename the file has changed.
        abort_if_cancelled(cancel)?;
        let written = match (&self.env.files, std::str::from_utf8(&applied.bytes)) {
            (Some(files), Ok(text)) => files.write_text(&absolute, text).await?,
            _ => false,
        };
        if !written {
            replace_contents(&absolute, applied.bytes).await?;
        }
        Ok(AgentToolResult {
            extra: Default::default(),
            content: vec![text_block(format!(
                "Successfully replaced {count} block(s) in {path}."
            ))],
            details: Some(json!({
                "diff": applied.diff,
                "patch": applied.patch,
                "firstChangedLine": applied.first_changed_line,
            })),
            terminate: None,
        })
    }
}

/// pi's `prepareArguments` for edit, to run before schema validation: an `edits` array sent
/// as a JSON string is parsed, and the pre-0.73 shape `{path, oldText, newText}` becomes one
/// more entry of `edits`.
pub fn prepare_arguments(mut arguments: Map<String, Value>) -> Map<String, Value> {
    if let Some(Value::String(text)) = arguments.get("edits")
        && let Ok(Value::Array(parsed)) = serde_json::from_str::<Value>(text)
    {
        arguments.insert("edits".into(), Value::Array(parsed));
    }
    let legacy = matches!(
        (arguments.get("oldText"), arguments.get("newText")),
        (Some(Value::String(_)), Some(Value::String(_)))
    );
    if !legacy {
        return arguments;
    }
    let old_text = arguments.shift_remove("oldText").unwrap_or_default();
    let new_text = arguments.shift_remove("newText").unwrap_or_default();
    let entry = json!({ "oldText": old_text, "newText": new_text });
    match arguments.get_mut("edits") {
        Some(Value::Array(edits)) => edits.push(entry),
        _ => {
            arguments.insert("edits".into(), Value::Array(vec![entry]));
        }
    }
    arguments
}

/// One replacement as the model sent it.
#[derive(Debug, Clone)]
struct Edit {
    old_text: String,
    new_text: String,
}

fn parse_edits(arguments: &Map<String, Value>) -> Result<Vec<Edit>, String> {
    let Some(Value::Array(entries)) = arguments.get("edits") else {
        return Err(INVALID_INPUT.into());
    };
    if entries.is_empty() {
        return Err(INVALID_INPUT.into());
    }
    let mut problems = Vec::new();
    let mut edits = Vec::with_capacity(entries.len());
    for (i, entry) in entries.iter().enumerate() {
        let Value::Object(fields) = entry else {
            problems.push(format!("edits.{i}: must be object"));
            continue;
        };
        let mut field = |key: &str| match fields.get(key) {
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => {
                problems.push(format!("edits.{i}.{key}: must be string"));
                None
            }
            None => {
                problems.push(format!(
                    "edits.{i}.{key}: must have required property '{key}'"
                ));
                None
            }
        };
        if let (Some(old_text), Some(new_text)) = (field("oldText"), field("newText")) {
            edits.push(Edit { old_text, new_text });
        }
    }
    if problems.is_empty() {
        Ok(edits)
    } else {
        Err(validation_error("edit", &problems, arguments))
    }
}

/// Opens the file for reading and writing (pi checks `R_OK | W_OK` first) and reads it.
async fn read_for_edit(absolute: &std::path::Path, path: &str) -> Result<Vec<u8>, String> {
    let opened = tokio::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(absolute)
        .await;
    let mut file = match opened {
        Ok(file) => file,
        // pi's access check passes for a directory and its read then fails.
        Err(e) if os_error_code(&e) == Some("EISDIR") => return Err(os_error(&e, "read", None)),
        Err(e) => {
            return Err(match os_error_code(&e) {
                Some(code) => format!("Could not edit file: {path}. Error code: {code}."),
                None => format!("Could not edit file: {path}. {e}."),
            });
        }
    };
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .await
        .map_err(|e| os_error(&e, "read", None))?;
    Ok(bytes)
}

/// The outcome of applying a call's edits.
#[derive(Debug)]
struct Applied {
    /// The whole new file.
    bytes: Vec<u8>,
    diff: String,
    patch: String,
    first_changed_line: Option<usize>,
}

/// A match of one edit in the text it was located in.
#[derive(Debug, Clone)]
struct Located {
    index: usize,
    start: usize,
    end: usize,
}

/// Locates every edit in the original file as pi does (same errors, same order of checks),
/// then splices the replacements into the original bytes.
fn apply_edits(original: &[u8], edits: &[Edit], path: &str) -> Result<Applied, String> {
    let (bom, body) = match original.strip_prefix(UTF8_BOM) {
        Some(rest) => (UTF8_BOM, rest),
        None => (&b""[..], original),
    };
    let crlf = first_break_is_crlf(body);
    let lf = decode_lf(body);

    let edits: Vec<Edit> = edits
        .iter()
        .map(|e| Edit {
            old_text: normalize_to_lf(&e.old_text),
            new_text: normalize_to_lf(&e.new_text),
        })
        .collect();
    let several = edits.len() > 1;
    for (i, edit) in edits.iter().enumerate() {
        if edit.old_text.is_empty() {
            return Err(if several {
                format!("edits[{i}].oldText must not be empty in {path}.")
            } else {
                format!("oldText must not be empty in {path}.")
            });
        }
    }

    // Uniqueness is judged in fuzzy space even for exact matches (pi does), so the fuzzy view
    // is always needed.
    let fuzzy = fuzzy_view(&lf.text);
    let fuzzy_old: Vec<String> = edits.iter().map(|e| fuzzy_view(&e.old_text).text).collect();
    let use_fuzzy = edits.iter().zip(&fuzzy_old).any(|(edit, fuzzy_old)| {
        !lf.text.contains(&edit.old_text) && fuzzy.text.contains(fuzzy_old.as_str())
    });
    let base = if use_fuzzy { &fuzzy.text } else { &lf.text };

    let mut located = Vec::with_capacity(edits.len());
    for (i, (edit, fuzzy_old)) in edits.iter().zip(&fuzzy_old).enumerate() {
        let found = match base.find(&edit.old_text) {
            Some(at) => Some((at, edit.old_text.len())),
            None if use_fuzzy => base
                .find(fuzzy_old.as_str())
                .map(|at| (at, fuzzy_old.len())),
            None => None,
        };
        let Some((start, len)) = found else {
            return Err(if several {
                format!(
                    "Could not find edits[{i}] in {path}. The oldText must match exactly including all whitespace and newlines."
                )
            } else {
                format!(
                    "Could not find the exact text in {path}. The old text must match exactly including all whitespace and newlines."
                )
            });
        };
        let occurrences = count_occurrences(&fuzzy.text, fuzzy_old);
        if occurrences > 1 {
            return Err(if several {
                format!(
                    "Found {occurrences} occurrences of edits[{i}] in {path}. Each oldText must be unique. Please provide more context to make it unique."
                )
            } else {
                format!(
                    "Found {occurrences} occurrences of the text in {path}. The text must be unique. Please provide more context to make it unique."
                )
            });
        }
        located.push(Located {
            index: i,
            start,
            end: start + len,
        });
    }
    located.sort_by_key(|m| m.start);
    for pair in located.windows(2) {
        if pair[0].end > pair[1].start {
            return Err(format!(
                "edits[{}] and edits[{}] overlap in {path}. Merge them into one edit or target disjoint regions.",
                pair[0].index, pair[1].index
            ));
        }
    }

    let splices = if use_fuzzy {
        splices(&located, &edits, &fuzzy, Some(&lf))
    } else {
        splices(&located, &edits, &lf, None)
    };
    let mut new_body = Vec::with_capacity(body.len());
    let mut copied = 0;
    for splice in &splices {
        new_body.extend_from_slice(&body[copied..splice.src.start]);
        if crlf {
            new_body.extend_from_slice(splice.text.replace('\n', "\r\n").as_bytes());
        } else {
            new_body.extend_from_slice(splice.text.as_bytes());
        }
        copied = splice.src.end;
    }
    new_body.extend_from_slice(&body[copied..]);

    let new_lf = decode_lf(&new_body).text;
    if new_lf == lf.text {
        return Err(if several {
            format!("No changes made to {path}. The replacements produced identical content.")
        } else {
            format!(
                "No changes made to {path}. The replacement produced identical content. This might indicate an issue with special characters or the text not existing as expected."
            )
        });
    }

    let parts = diff_parts(&lf.text, &new_lf);
    let (diff, first_changed_line) = display_diff(&parts, &lf.text, &new_lf);
    let patch = unified_patch(path, &parts);
    let mut bytes = Vec::with_capacity(bom.len() + new_body.len());
    bytes.extend_from_slice(bom);
    bytes.extend_from_slice(&new_body);
    Ok(Applied {
        bytes,
        diff,
        patch,
        first_changed_line,
    })
}

/// pi's `detectLineEnding`: CRLF when the first line break is one.
fn first_break_is_crlf(body: &[u8]) -> bool {
    match body.iter().position(|&b| b == b'\n') {
        Some(i) => i > 0 && body[i - 1] == b'\r',
        None => false,
    }
}

/// pi's `normalizeToLF`.
fn normalize_to_lf(text: &str) -> String {
    text.replace("\r\n", "\n").replace('\r', "\n")
}

/// Occurrences as `haystack.split(needle).length - 1` counts them in JavaScript, including
/// its answer for an empty needle (one per UTF-16 unit, minus one).
fn count_occurrences(haystack: &str, needle: &str) -> i64 {
    if needle.is_empty() {
        let units = i64::try_from(haystack.encode_utf16().count()).unwrap_or(i64::MAX);
        return units - 1;
    }
    i64::try_from(haystack.matches(needle).count()).unwrap_or(i64::MAX)
}

/// A stretch of a derived text and the stretch of its source it came from.
#[derive(Debug, Clone)]
struct Piece {
    out: Range<usize>,
    src: Range<usize>,
    /// The derived bytes equal the source bytes, so positions inside map one to one. Other
    /// pieces are atomic: a position inside one has no exact counterpart in the source.
    linear: bool,
}

/// A text derived from a source (decoded, normalised) with the correspondence between the
/// two, so a span found in the derived text can be cut out of the source.
#[derive(Debug, Default)]
struct Mapped {
    text: String,
    pieces: Vec<Piece>,
    src_len: usize,
}

/// A replacement of source bytes.
#[derive(Debug)]
struct Splice {
    src: Range<usize>,
    /// LF-terminated text to put there.
    text: String,
}

impl Mapped {
    fn new(src_len: usize) -> Self {
        Self {
            src_len,
            ..Self::default()
        }
    }

    fn push(&mut self, out: &str, src: Range<usize>, linear: bool) {
        let start = self.text.len();
        self.text.push_str(out);
        let end = self.text.len();
        if linear
            && let Some(last) = self.pieces.last_mut()
            && last.linear
            && last.out.end == start
            && last.src.end == src.start
        {
            last.out.end = end;
            last.src.end = src.end;
            return;
        }
        self.pieces.push(Piece {
            out: start..end,
            src,
            linear,
        });
    }

    /// Drops `text[at..]`; the source it came from stays covered, by pieces that now derive
    /// nothing (deletions).
    fn cut(&mut self, at: usize) {
        self.text.truncate(at);
        let first = self.pieces.partition_point(|p| p.out.end <= at);
        let mut split_off = None;
        for piece in &mut self.pieces[first..] {
            if piece.out.start < at {
                if piece.linear {
                    let kept_src = piece.src.start + (at - piece.out.start);
                    split_off = Some(Piece {
                        out: at..at,
                        src: kept_src..piece.src.end,
                        linear: false,
                    });
                    piece.src.end = kept_src;
                }
                piece.out.end = at;
            } else {
                piece.out = at..at;
                piece.linear = false;
            }
        }
        if let Some(piece) = split_off {
            self.pieces.insert(first + 1, piece);
        }
    }

    /// The source position where a span starting at `p` starts, taking the latest one when
    /// deletions sit at `p` (so they stay outside the span). When `p` falls inside an atomic
    /// piece the span widens to the piece's start; the second value says to where.
    fn map_start(&self, p: usize) -> (usize, usize) {
        let i = self.pieces.partition_point(|piece| piece.out.end <= p);
        match self.pieces.get(i) {
            None => (self.src_len, p),
            Some(piece) if piece.out.start >= p => (piece.src.start, p),
            Some(piece) if piece.linear => (piece.src.start + (p - piece.out.start), p),
            Some(piece) => (piece.src.start, piece.out.start),
        }
    }

    /// The source position where a span ending at `p` ends, taking the earliest one when
    /// deletions sit at `p`; widens to the end of an atomic piece like [`Self::map_start`].
    fn map_end(&self, p: usize) -> (usize, usize) {
        let i = self.pieces.partition_point(|piece| piece.out.start < p);
        let Some(piece) = i.checked_sub(1).and_then(|i| self.pieces.get(i)) else {
            return (0, p);
        };
        if piece.out.end <= p {
            (piece.src.end, p)
        } else if piece.linear {
            (piece.src.start + (p - piece.out.start), p)
        } else {
            (piece.src.end, piece.out.end)
        }
    }
}

/// The file as pi's edit sees it: UTF-8 decoded with replacement characters (as Node's
/// `toString("utf-8")`), `\r\n` and lone `\r` turned into `\n`.
fn decode_lf(body: &[u8]) -> Mapped {
    let mut mapped = Mapped::new(body.len());
    let mut at = 0;
    for chunk in body.utf8_chunks() {
        let mut rest = chunk.valid();
        while let Some(cr) = rest.find('\r') {
            if cr > 0 {
                mapped.push(&rest[..cr], at..at + cr, true);
            }
            let width = if rest[cr + 1..].starts_with('\n') {
                2
            } else {
                1
            };
            mapped.push("\n", at + cr..at + cr + width, false);
            at += cr + width;
            rest = &rest[cr + width..];
        }
        if !rest.is_empty() {
            mapped.push(rest, at..at + rest.len(), true);
            at += rest.len();
        }
        let invalid = chunk.invalid();
        if !invalid.is_empty() {
            mapped.push("\u{FFFD}", at..at + invalid.len(), false);
            at += invalid.len();
        }
    }
    mapped
}

/// pi's `normalizeForFuzzyMatch` (NFKC, trailing whitespace stripped per line, typographic
/// quotes, dashes and spaces made ASCII), keeping track of where each part came from.
///
/// NFKC is applied per segment, cut before every character that starts a normalisation
/// boundary (a starter that nothing before it can combine with), which gives the same text as
/// normalising the whole.
fn fuzzy_view(text: &str) -> Mapped {
    let mut mapped = Mapped::new(text.len());
    let mut line_start = 0;
    let mut segment_start = 0;
    let mut after_newline = false;
    let emit = |mapped: &mut Mapped, range: Range<usize>, line_start: &mut usize| {
        let segment = &text[range.clone()];
        if segment == "\n" {
            trim_line_end(mapped, *line_start);
            mapped.push("\n", range, true);
            *line_start = mapped.text.len();
        } else if segment.is_ascii() {
            mapped.push(segment, range, true);
        } else {
            let out: String = segment.nfkc().map(fold_typography).collect();
            let linear = out == segment;
            mapped.push(&out, range, linear);
        }
    };
    for (i, c) in text.char_indices() {
        if i > 0 && (after_newline || c == '\n' || starts_boundary(c)) {
            emit(&mut mapped, segment_start..i, &mut line_start);
            segment_start = i;
        }
        after_newline = c == '\n';
    }
    if segment_start < text.len() {
        emit(&mut mapped, segment_start..text.len(), &mut line_start);
    }
    trim_line_end(&mut mapped, line_start);
    mapped
}

fn trim_line_end(mapped: &mut Mapped, line_start: usize) {
    let kept = mapped.text[line_start..]
        .trim_end_matches(is_js_whitespace)
        .len();
    if line_start + kept < mapped.text.len() {
        mapped.cut(line_start + kept);
    }
}

/// A character NFKC never combines with what precedes it (canonical combining class 0 and
/// quick-check "yes"), so normalisation may restart there.
fn starts_boundary(c: char) -> bool {
    c.is_ascii()
        || (canonical_combining_class(c) == 0
            && is_nfkc_quick(std::iter::once(c)) == IsNormalized::Yes)
}

/// The typographic characters pi folds to ASCII after NFKC.
fn fold_typography(c: char) -> char {
    match c {
        '\u{2018}'..='\u{201B}' => '\'',
        '\u{201C}'..='\u{201F}' => '"',
        '\u{2010}'..='\u{2015}' | '\u{2212}' => '-',
        '\u{00A0}' | '\u{2002}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => ' ',
        other => other,
    }
}

/// What JavaScript's `trimEnd` removes: its WhiteSpace and LineTerminator characters.
fn is_js_whitespace(c: char) -> bool {
    matches!(
        c,
        '\t' | '\n' | '\u{B}' | '\u{C}' | '\r' | ' ' | '\u{A0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200A}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202F}'
                | '\u{205F}'
                | '\u{3000}'
                | '\u{FEFF}'
    )
}

/// Turns matches located in `view` into replacements of the file body's bytes. `view` is
/// either the decoded file itself (`lf` is `None`; its sources are the body's bytes) or the
/// fuzzy view of it (`lf` is the decoded file it was made from). Matches that widen into the
/// same atomic piece are merged into one replacement.
fn splices(located: &[Located], edits: &[Edit], view: &Mapped, lf: Option<&Mapped>) -> Vec<Splice> {
    struct Group<'m> {
        out: Range<usize>,
        src: Range<usize>,
        members: Vec<&'m Located>,
    }
    let mut groups: Vec<Group> = Vec::new();
    for m in located {
        let (src_start, out_start) = view.map_start(m.start);
        let (src_end, out_end) = view.map_end(m.end);
        // An empty match at a deletion inserts after it.
        let (src_end, out_end) = (src_end.max(src_start), out_end.max(m.end));
        match groups.last_mut() {
            // Both matches touch one atomic piece: replace it once, with both edits.
            Some(group) if out_start < group.out.end => {
                group.out.end = group.out.end.max(out_end);
                group.src.end = group.src.end.max(src_end);
                group.members.push(m);
            }
            _ => groups.push(Group {
                out: out_start..out_end,
                src: src_start..src_end,
                members: vec![m],
            }),
        }
    }
    let splices = groups.into_iter().map(|group| {
        // Matches are disjoint and sorted, and lie inside the group's stretch.
        let mut text = String::new();
        let mut at = group.out.start;
        for m in group.members {
            text.push_str(&view.text[at..m.start]);
            text.push_str(&edits[m.index].new_text);
            at = m.end;
        }
        text.push_str(&view.text[at..group.out.end]);
        Splice {
            src: group.src,
            text,
        }
    });
    let Some(lf) = lf else {
        return splices.collect();
    };
    splices
        .map(|splice| {
            // Fuzzy-view sources are character boundaries of the decoded file, which map
            // onto its bytes exactly; widening is handled all the same.
            let (raw_start, lf_start) = lf.map_start(splice.src.start);
            let (raw_end, lf_end) = lf.map_end(splice.src.end);
            let text = [
                &lf.text[lf_start..splice.src.start],
                splice.text.as_str(),
                &lf.text[splice.src.end..lf_end.max(splice.src.end)],
            ]
            .concat();
            Splice {
                src: raw_start..raw_end.max(raw_start),
                text,
            }
        })
        .collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PartKind {
    Equal,
    Removed,
    Added,
}

/// A run of lines as jsdiff's `diffLines` reports it; each line keeps its `\n`.
#[derive(Debug)]
struct Part<'a> {
    kind: PartKind,
    lines: Vec<&'a str>,
}

/// Line diff in jsdiff's shape: within a change, removed lines come before added ones.
fn diff_parts<'a>(old: &'a str, new: &'a str) -> Vec<Part<'a>> {
    // Huge files with scattered changes could make Myers slow; past the deadline it settles
    // for a correct but less minimal diff.
    let diff = TextDiff::configure()
        .algorithm(Algorithm::Myers)
        .timeout(Duration::from_secs(5))
        .diff_lines(old, new);
    let (old_lines, new_lines) = (diff.old_slices(), diff.new_slices());
    let mut parts: Vec<Part<'a>> = Vec::new();
    let mut removed: Vec<&'a str> = Vec::new();
    let mut added: Vec<&'a str> = Vec::new();
    let flush =
        |parts: &mut Vec<Part<'a>>, removed: &mut Vec<&'a str>, added: &mut Vec<&'a str>| {
            if !removed.is_empty() {
                parts.push(Part {
                    kind: PartKind::Removed,
                    lines: std::mem::take(removed),
                });
            }
            if !added.is_empty() {
                parts.push(Part {
                    kind: PartKind::Added,
                    lines: std::mem::take(added),
                });
            }
        };
    for op in diff.ops() {
        let (tag, old_range, new_range) = op.as_tag_tuple();
        match tag {
            DiffTag::Equal => {
                flush(&mut parts, &mut removed, &mut added);
                parts.push(Part {
                    kind: PartKind::Equal,
                    lines: old_lines[old_range].to_vec(),
                });
            }
            DiffTag::Delete => removed.extend_from_slice(&old_lines[old_range]),
            DiffTag::Insert => added.extend_from_slice(&new_lines[new_range]),
            DiffTag::Replace => {
                removed.extend_from_slice(&old_lines[old_range]);
                added.extend_from_slice(&new_lines[new_range]);
            }
        }
    }
    flush(&mut parts, &mut removed, &mut added);
    parts
}

/// pi's `generateDiffString`: numbered `+`/`-` lines, four lines of context, ` ...` for
/// what is skipped. Also the new-file line number of the first change.
fn display_diff(parts: &[Part], old: &str, new: &str) -> (String, Option<usize>) {
    struct Lines {
        output: Vec<String>,
        width: usize,
        old_n: usize,
        new_n: usize,
    }
    impl Lines {
        fn push(&mut self, sign: char, n: usize, line: &str) {
            let line = line.strip_suffix('\n').unwrap_or(line);
            self.output
                .push(format!("{sign}{n:>width$} {line}", width = self.width));
        }
        fn context(&mut self, lines: &[&str]) {
            for line in lines {
                self.push(' ', self.old_n, line);
                self.old_n += 1;
                self.new_n += 1;
            }
        }
        fn skip(&mut self, count: usize) {
            self.output.push(format!(" {} ...", " ".repeat(self.width)));
            self.old_n += count;
            self.new_n += count;
        }
    }

    let most_lines = old.split('\n').count().max(new.split('\n').count());
    let mut out = Lines {
        output: Vec::new(),
        width: most_lines.to_string().len(),
        old_n: 1,
        new_n: 1,
    };
    let mut last_was_change = false;
    let mut first_changed = None;
    for (i, part) in parts.iter().enumerate() {
        let lines = &part.lines;
        match part.kind {
            PartKind::Added | PartKind::Removed => {
                first_changed.get_or_insert(out.new_n);
                for line in lines {
                    if part.kind == PartKind::Added {
                        out.push('+', out.new_n, line);
                        out.new_n += 1;
                    } else {
                        out.push('-', out.old_n, line);
                        out.old_n += 1;
                    }
                }
                last_was_change = true;
                continue;
            }
            PartKind::Equal => {}
        }
        let next_is_change = parts.get(i + 1).is_some_and(|p| p.kind != PartKind::Equal);
        match (last_was_change, next_is_change) {
            (true, true) if lines.len() <= DIFF_CONTEXT * 2 => out.context(lines),
            (true, true) => {
                out.context(&lines[..DIFF_CONTEXT]);
                out.skip(lines.len() - 2 * DIFF_CONTEXT);
                out.context(&lines[lines.len() - DIFF_CONTEXT..]);
            }
            (true, false) => {
                let shown = lines.len().min(DIFF_CONTEXT);
                out.context(&lines[..shown]);
                if lines.len() > shown {
                    out.skip(lines.len() - shown);
                }
            }
            (false, true) => {
                let skipped = lines.len().saturating_sub(DIFF_CONTEXT);
                if skipped > 0 {
                    out.skip(skipped);
                }
                out.context(&lines[skipped..]);
            }
            (false, false) => {
                out.old_n += lines.len();
                out.new_n += lines.len();
            }
        }
        last_was_change = false;
    }
    (out.output.join("\n"), first_changed)
}

/// jsdiff's `createTwoFilesPatch(path, path, old, new)` with four lines of context and only
/// the `---`/`+++` headers, as pi puts it in `details.patch`.
fn unified_patch(path: &str, parts: &[Part]) -> String {
    struct Hunk {
        old_start: usize,
        old_lines: usize,
        new_start: usize,
        new_lines: usize,
        lines: Vec<String>,
    }
    let mut hunks: Vec<Hunk> = Vec::new();
    let (mut old_start, mut new_start) = (0usize, 0usize);
    let mut current: Vec<String> = Vec::new();
    let (mut old_line, mut new_line) = (1usize, 1usize);
    // jsdiff appends an empty equal part so the last hunk gets closed.
    let total = parts.len() + 1;
    for i in 0..total {
        let (kind, lines): (PartKind, &[&str]) = match parts.get(i) {
            Some(part) => (part.kind, &part.lines),
            None => (PartKind::Equal, &[]),
        };
        if kind != PartKind::Equal {
            if old_start == 0 {
                old_start = old_line;
                new_start = new_line;
                if let Some(previous) = i.checked_sub(1).and_then(|p| parts.get(p)) {
                    let from = previous.lines.len().saturating_sub(DIFF_CONTEXT);
                    current = previous.lines[from..]
                        .iter()
                        .map(|l| format!(" {l}"))
                        .collect();
                    old_start -= current.len();
                    new_start -= current.len();
                }
            }
            let sign = if kind == PartKind::Added { '+' } else { '-' };
            current.extend(lines.iter().map(|l| format!("{sign}{l}")));
            if kind == PartKind::Added {
                new_line += lines.len();
            } else {
                old_line += lines.len();
            }
            continue;
        }
        if old_start != 0 {
            if lines.len() <= DIFF_CONTEXT * 2 && i + 2 < total {
                current.extend(lines.iter().map(|l| format!(" {l}")));
            } else {
                let shown = lines.len().min(DIFF_CONTEXT);
                current.extend(lines[..shown].iter().map(|l| format!(" {l}")));
                hunks.push(Hunk {
                    old_start,
                    old_lines: old_line - old_start + shown,
                    new_start,
                    new_lines: new_line - new_start + shown,
                    lines: std::mem::take(&mut current),
                });
                old_start = 0;
                new_start = 0;
            }
        }
        old_line += lines.len();
        new_line += lines.len();
    }

    let mut out = vec![format!("--- {path}"), format!("+++ {path}")];
    for hunk in hunks {
        // Unified diff quirk: an empty range names the line before it.
        let old_start = hunk.old_start - usize::from(hunk.old_lines == 0);
        let new_start = hunk.new_start - usize::from(hunk.new_lines == 0);
        out.push(format!(
            "@@ -{old_start},{} +{new_start},{} @@",
            hunk.old_lines, hunk.new_lines
        ));
        for line in hunk.lines {
            match line.strip_suffix('\n') {
                Some(line) => out.push(line.to_string()),
                None => {
                    out.push(line);
                    out.push("\\ No newline at end of file".into());
                }
            }
        }
    }
    let mut patch = out.join("\n");
    patch.push('\n');
    patch
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edit(old_text: &str, new_text: &str) -> Edit {
        Edit {
            old_text: old_text.into(),
            new_text: new_text.into(),
        }
    }

    fn apply(original: &str, edits: &[Edit]) -> Result<String, String> {
        apply_edits(original.as_bytes(), edits, "f.txt")
            .map(|a| String::from_utf8(a.bytes).expect("utf-8"))
    }

    #[test]
    fn fuzzy_view_matches_whole_text_normalisation() {
        let samples = [
            "plain ascii  \nline two\t\n",
            "e\u{301}t\u{e9} \u{201C}quoted\u{201D} \u{2014} x\u{a0}\u{a0}\n\u{fb01}n\u{2003}\n",
            "\u{1100}\u{1161}\u{11a8} \u{ff21}\u{2460}  \u{3000}",
            "\n\u{301}start with mark\u{2212}1 \u{2018}a\u{2019}  ",
            "",
            "\u{2028}\u{feff} \n\u{1680}",
        ];
        for sample in samples {
            let whole: String = sample.nfkc().collect();
            let expected: String = whole
                .split('\n')
                .map(|line| line.trim_end_matches(is_js_whitespace))
                .collect::<Vec<_>>()
                .join("\n")
                .chars()
                .map(fold_typography)
                .collect();
            let view = fuzzy_view(sample);
            assert_eq!(view.text, expected, "{sample:?}");
            // The pieces cover both texts without gaps.
            let mut out = 0;
            let mut src = 0;
            for piece in &view.pieces {
                assert_eq!((piece.out.start, piece.src.start), (out, src), "{sample:?}");
                out = piece.out.end;
                src = piece.src.end;
            }
            assert_eq!((out, src), (view.text.len(), sample.len()), "{sample:?}");
        }
    }

    #[test]
    fn decoding_maps_crlf_and_bad_bytes() {
        let body = b"a\r\nb\rc\xff\xfed\n";
        let view = decode_lf(body);
        assert_eq!(view.text, "a\nb\nc\u{FFFD}\u{FFFD}d\n");
        assert_eq!(view.text, normalize_to_lf(&String::from_utf8_lossy(body)));
        assert_eq!(view.map_end(2), (3, 2), "after the CRLF");
        assert_eq!(view.map_start(1), (1, 1), "before the CRLF");
    }

    #[test]
    fn trailing_whitespace_stays_outside_spans() {
        let out = apply("keep   \nnext\n", &[edit("keep\nnext", "x")]);
        // The match needs fuzzy space (the spaces); they are inside the span and go.
        assert_eq!(out.as_deref(), Ok("x\n"));
        let out = apply("“a”   \nb\n", &[edit("\"a\"", "c")]);
        assert_eq!(out.as_deref(), Ok("c   \nb\n"));
    }

    #[test]
    fn matches_inside_a_normalised_piece_widen() {
        // U+FB01 (ﬁ) is "fi" under NFKC; replacing just the "i" rewrites the ligature.
        let out = apply("\u{fb01}x \u{201C}q\u{201D}\n", &[edit("ix \"q", "I")]);
        assert_eq!(out.as_deref(), Ok("fI\u{201D}\n"));
    }

    #[test]
    fn error_texts() {
        let two = [edit("a", "b"), edit("zzz", "y")];
        assert_eq!(
            apply("a\n", &two).err().as_deref(),
            Some(
                "Could not find edits[1] in f.txt. The oldText must match exactly including all whitespace and newlines."
            )
        );
        assert_eq!(
            apply("a\n", &[edit("", "b")]).err().as_deref(),
            Some("oldText must not be empty in f.txt.")
        );
        assert_eq!(
            apply("a \u{2019}\n", &[edit("a '", "b")]).as_deref(),
            Ok("b\n")
        );
    }

    #[test]
    fn patch_in_jsdiff_shape() {
        let old = "a\nb\nc";
        let new = "a\nB\nc";
        let parts = diff_parts(old, new);
        assert_eq!(
            unified_patch("p", &parts),
            "--- p\n+++ p\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n\\ No newline at end of file\n"
        );
        let parts = diff_parts("", "x\n");
        assert_eq!(
            unified_patch("p", &parts),
            "--- p\n+++ p\n@@ -0,0 +1,1 @@\n+x\n"
        );
    }

    #[test]
    fn legacy_arguments_are_prepared() {
        let raw = json!({"path": "p", "oldText": "a", "newText": "b"});
        let Value::Object(raw) = raw else {
            unreachable!()
        };
        let prepared = prepare_arguments(raw);
        assert_eq!(
            Value::Object(prepared),
            json!({"path": "p", "edits": [{"oldText": "a", "newText": "b"}]})
        );
        let raw = json!({"path": "p", "edits": "[{\"oldText\":\"x\",\"newText\":\"y\"}]"});
        let Value::Object(raw) = raw else {
            unreachable!()
        };
        assert_eq!(
            prepare_arguments(raw).get("edits"),
            Some(&json!([{"oldText": "x", "newText": "y"}]))
        );
    }
}
