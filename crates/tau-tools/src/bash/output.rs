//! Collecting a command's output with bounded memory (tools-resources §1.2, "output
//! accumulation"): streaming UTF-8 decoding, true line and byte totals, a rolling tail for
//! display, and the full output spilled to `<tmpdir>/pi-bash-<16 hex>.log` once it outgrows the
//! display limits (owner-only, and removed by [`remove_spill_files`] when the binary exits).

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use tau_protocol::{TruncatedBy, Truncation};

use crate::truncate::{DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, truncate_tail};

use super::sanitize::Sanitizer;

/// The tail is cut back to this many bytes once it grows past twice as much, so trimming
/// (a copy of the kept part) happens once per this many appended bytes, not per chunk.
const ROLLING_BYTES: usize = 2 * DEFAULT_MAX_BYTES;

/// The output so far, as the tool and the RPC `bash` command present it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputSnapshot {
    /// `truncate_tail` of [`Self::tail`] with `total_lines`/`total_bytes` (and therefore
    /// `truncated`/`truncated_by`) describing the whole output, not just the tail.
    pub truncation: Truncation,
    /// The retained end of the output (100–200 KB at most). When older output was dropped it
    /// starts at a line start, unless one line is longer than the whole tail. Callers with their
    /// own truncation rules (the RPC command) cut from this.
    pub tail: String,
    /// The temp file holding the complete output, once one was needed.
    pub full_output_path: Option<PathBuf>,
    /// Bytes after the last `\n` of the whole output (the "line is …" size of the notice).
    pub last_line_bytes: usize,
    /// Bytes read from the pipe, before decoding and sanitising.
    pub raw_bytes: usize,
}

/// UTF-8 decoding across chunk boundaries: invalid bytes become U+FFFD the way a
/// `TextDecoder` does it (one per maximal invalid subpart), an incomplete character at the end
/// of a chunk waits for the next one.
#[derive(Debug, Default)]
pub(crate) struct Utf8Stream {
    pending: Vec<u8>,
}

impl Utf8Stream {
    pub(crate) fn decode(&mut self, bytes: &[u8], out: &mut String) {
        let joined;
        let mut input = if self.pending.is_empty() {
            bytes
        } else {
            self.pending.extend_from_slice(bytes);
            joined = std::mem::take(&mut self.pending);
            joined.as_slice()
        };
        loop {
            match std::str::from_utf8(input) {
                Ok(text) => {
                    out.push_str(text);
                    return;
                }
                Err(error) => {
                    let (valid, rest) = input.split_at(error.valid_up_to());
                    if let Ok(valid) = std::str::from_utf8(valid) {
                        out.push_str(valid);
                    }
                    match error.error_len() {
                        Some(len) => {
                            out.push('\u{FFFD}');
                            input = &rest[len..];
                        }
                        None => {
                            self.pending.extend_from_slice(rest);
                            return;
                        }
                    }
                }
            }
        }
    }

    /// An incomplete character left at the end of the stream becomes U+FFFD.
    pub(crate) fn finish(&mut self, out: &mut String) {
        if !self.pending.is_empty() {
            out.push_str(&String::from_utf8_lossy(&self.pending));
            self.pending.clear();
        }
    }
}

/// The full-output temp file. Before it is needed the output is buffered here (at most the
/// threshold plus one chunk), so the file always holds everything from the first byte.
#[derive(Debug, Default)]
struct TempFile {
    buffered: Vec<u8>,
    path: Option<PathBuf>,
    writer: Option<BufWriter<File>>,
    /// Creating or writing failed: stop buffering so memory stays bounded; the run goes on.
    failed: bool,
}

impl TempFile {
    fn is_open(&self) -> bool {
        self.path.is_some() || self.failed
    }

    fn open(&mut self) {
        if self.is_open() {
            return;
        }
        // Eight random bytes, like pi's name: a v4 UUID's bytes 6 and 8 carry fixed version and
        // variant bits, so those are skipped.
        let id = uuid::Uuid::new_v4();
        let bytes = id.as_bytes();
        let hex: String = bytes[..6]
            .iter()
            .chain(&bytes[10..12])
            .map(|b| format!("{b:02x}"))
            .collect();
        let path = std::env::temp_dir().join(format!("pi-bash-{hex}.log"));
        match create_spill_file(&path) {
            Ok(file) => {
                let mut writer = BufWriter::with_capacity(64 * 1024, file);
                let buffered = std::mem::take(&mut self.buffered);
                self.path = Some(path);
                match writer.write_all(&buffered) {
                    Ok(()) => self.writer = Some(writer),
                    Err(error) => {
                        tracing::warn!(%error, "cannot write the bash output file");
                        self.failed = true;
                    }
                }
            }
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "cannot create the bash output file");
                self.buffered = Vec::new();
                self.failed = true;
            }
        }
    }

    fn write(&mut self, bytes: &[u8]) {
        if let Some(writer) = &mut self.writer {
            if let Err(error) = writer.write_all(bytes) {
                tracing::warn!(%error, "cannot write the bash output file");
                self.writer = None;
                self.failed = true;
            }
        } else if !self.is_open() {
            self.buffered.extend_from_slice(bytes);
        }
    }

    fn close(&mut self) {
        if let Some(mut writer) = self.writer.take()
            && let Err(error) = writer.flush()
        {
            tracing::warn!(%error, "cannot write the bash output file");
        }
    }
}

/// The spill files of this process, removed by [`remove_spill_files`]; `None` once that ran.
static SPILL_FILES: Mutex<Option<Vec<PathBuf>>> = Mutex::new(Some(Vec::new()));

fn spill_files() -> std::sync::MutexGuard<'static, Option<Vec<PathBuf>>> {
    // Each holder does one push or one take, so the list is whole even after a panic.
    SPILL_FILES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Creates a new spill file readable by its owner only (the output may hold secrets) and
/// registers it for removal. `create_new` refuses a name that exists, so a file or link planted
/// in the shared temp directory is never written through.
fn create_spill_file(path: &Path) -> std::io::Result<File> {
    // Held across the creation, so a file is either registered or never made once removal ran.
    let mut files = spill_files();
    let Some(files) = files.as_mut() else {
        // The process is exiting: a file made now would outlive it.
        return Err(std::io::Error::other("the process is exiting"));
    };
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let file = options.open(path)?;
    files.push(path.to_path_buf());
    Ok(file)
}

/// Removes every spill file this process made, for the binary to call as it exits: they hold
/// complete command output, which must not pile up in the shared temp directory (pi leaves them
/// forever). Their paths were given to the client and the model, so they stay until then.
pub fn remove_spill_files() {
    let files = spill_files().take().unwrap_or_default();
    for path in files {
        let _ = std::fs::remove_file(path);
    }
}

/// Everything `run_shell` learns from the pipe.
#[derive(Debug)]
pub(crate) struct OutputAccumulator {
    decoder: Utf8Stream,
    sanitizer: Option<Sanitizer>,
    tail: String,
    tail_starts_at_line: bool,
    raw_bytes: usize,
    total_bytes: usize,
    newlines: usize,
    last_line_bytes: usize,
    file: TempFile,
    decoded: String,
    cleaned: String,
}

impl OutputAccumulator {
    pub(crate) fn new(sanitize: bool) -> Self {
        Self {
            decoder: Utf8Stream::default(),
            sanitizer: sanitize.then(Sanitizer::default),
            tail: String::new(),
            tail_starts_at_line: true,
            raw_bytes: 0,
            total_bytes: 0,
            newlines: 0,
            last_line_bytes: 0,
            file: TempFile::default(),
            decoded: String::new(),
            cleaned: String::new(),
        }
    }

    pub(crate) fn append(&mut self, raw: &[u8]) {
        self.raw_bytes += raw.len();
        let mut decoded = std::mem::take(&mut self.decoded);
        decoded.clear();
        self.decoder.decode(raw, &mut decoded);
        if let Some(sanitizer) = &mut self.sanitizer {
            let mut cleaned = std::mem::take(&mut self.cleaned);
            cleaned.clear();
            sanitizer.push(&decoded, &mut cleaned);
            self.append_text(&cleaned);
            // Sanitised output is what the RPC command reports, so the file holds that too.
            self.store(cleaned.as_bytes());
            self.cleaned = cleaned;
        } else {
            self.append_text(&decoded);
            // The tool's file keeps the bytes exactly as the command wrote them.
            self.store(raw);
        }
        self.decoded = decoded;
    }

    /// Flushes the decoder (and sanitiser) at the end of the stream.
    pub(crate) fn finish(&mut self) {
        let mut text = String::new();
        self.decoder.finish(&mut text);
        if let Some(sanitizer) = &mut self.sanitizer {
            let mut cleaned = String::new();
            sanitizer.push(&text, &mut cleaned);
            sanitizer.finish(&mut cleaned);
            self.append_text(&cleaned);
            self.store(cleaned.as_bytes());
        } else {
            // The undecodable bytes themselves already went to the file in `append`.
            self.append_text(&text);
        }
        if self.needs_file() {
            self.file.open();
        }
    }

    pub(crate) fn close_file(&mut self) {
        self.file.close();
    }

    /// pi 0.79's count: complete lines plus an unterminated last one, so a trailing
    /// newline adds no line and empty output has none.
    fn total_lines(&self) -> usize {
        self.newlines + usize::from(self.last_line_bytes > 0)
    }

    fn needs_file(&self) -> bool {
        self.raw_bytes > DEFAULT_MAX_BYTES
            || self.total_bytes > DEFAULT_MAX_BYTES
            || self.total_lines() > DEFAULT_MAX_LINES
    }

    fn store(&mut self, bytes: &[u8]) {
        if !self.file.is_open() && self.needs_file() {
            self.file.open();
        }
        self.file.write(bytes);
    }

    fn append_text(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        self.total_bytes += text.len();
        self.tail.push_str(text);
        if self.tail.len() > 2 * ROLLING_BYTES {
            let mut start = self.tail.len() - ROLLING_BYTES;
            while !self.tail.is_char_boundary(start) {
                start += 1;
            }
            self.tail_starts_at_line = self.tail.as_bytes()[start - 1] == b'\n';
            self.tail.drain(..start);
        }
        let newlines = text.bytes().filter(|&b| b == b'\n').count();
        if newlines == 0 {
            self.last_line_bytes += text.len();
        } else {
            self.newlines += newlines;
            self.last_line_bytes = text.len() - text.rfind('\n').map_or(0, |i| i + 1);
        }
    }

    /// The tail without a leading partial line (when older output was dropped mid-line).
    fn tail_text(&self) -> &str {
        if self.tail_starts_at_line {
            return &self.tail;
        }
        match self.tail.find('\n') {
            Some(i) => &self.tail[i + 1..],
            None => &self.tail,
        }
    }

    pub(crate) fn snapshot(&mut self) -> OutputSnapshot {
        let tail = self.tail_text().to_string();
        let cut = truncate_tail(&tail, DEFAULT_MAX_LINES, DEFAULT_MAX_BYTES);
        let total_lines = self.total_lines();
        let truncated = total_lines > DEFAULT_MAX_LINES || self.total_bytes > DEFAULT_MAX_BYTES;
        let truncated_by = if truncated {
            // The tail may be within the limits although the whole output is not.
            cut.truncated_by
                .or(Some(if self.total_bytes > DEFAULT_MAX_BYTES {
                    TruncatedBy::Bytes
                } else {
                    TruncatedBy::Lines
                }))
        } else {
            None
        };
        if truncated {
            self.file.open();
        }
        OutputSnapshot {
            truncation: Truncation {
                truncated,
                truncated_by,
                total_lines,
                total_bytes: self.total_bytes,
                max_lines: DEFAULT_MAX_LINES,
                max_bytes: DEFAULT_MAX_BYTES,
                ..cut
            },
            tail,
            full_output_path: self.file.path.clone(),
            last_line_bytes: self.last_line_bytes,
            raw_bytes: self.raw_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decoding_survives_split_characters_and_bad_bytes() {
        let mut stream = Utf8Stream::default();
        let mut out = String::new();
        let bytes = "é😀".as_bytes();
        for b in bytes {
            stream.decode(std::slice::from_ref(b), &mut out);
        }
        stream.decode(b"\xff\xfeok\xf0\x9f", &mut out);
        stream.finish(&mut out);
        assert_eq!(out, "é😀\u{FFFD}\u{FFFD}ok\u{FFFD}");
    }

    #[test]
    fn totals_count_an_unterminated_last_line() {
        let mut acc = OutputAccumulator::new(false);
        acc.append(b"a\nbb\nccc");
        acc.finish();
        let snap = acc.snapshot();
        assert_eq!(snap.truncation.total_lines, 3);
        assert_eq!(snap.truncation.total_bytes, 8);
        assert_eq!(snap.last_line_bytes, 3);
        assert!(!snap.truncation.truncated);
        assert_eq!(snap.full_output_path, None);
    }

    #[test]
    fn the_tail_stays_bounded_and_starts_at_a_line() {
        let mut acc = OutputAccumulator::new(false);
        let line = format!("{}\n", "y".repeat(999));
        for _ in 0..2000 {
            acc.append(line.as_bytes());
        }
        assert!(acc.tail.len() <= 2 * ROLLING_BYTES);
        let snap = acc.snapshot();
        assert!(snap.tail.starts_with('y') && snap.tail.len().is_multiple_of(1000));
        assert_eq!(
            snap.truncation.total_lines, 2000,
            "a trailing newline adds no line (pi 0.79)"
        );
        assert_eq!(snap.truncation.total_bytes, 2_000_000);
        assert_eq!(snap.truncation.truncated_by, Some(TruncatedBy::Bytes));
        let path = snap.full_output_path.clone();
        acc.close_file();
        if let Some(path) = path {
            let len = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
            let _ = std::fs::remove_file(&path);
            assert_eq!(len, 2_000_000);
        } else {
            panic!("no temp file");
        }
    }
}
