//! The `read` tool (tools-resources §1.1): text files with offset/limit paging and pi's
//! truncation notices, images (recognised by their magic bytes) as attachments, resized to
//! fit inline limits.

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value, json};
use tau_protocol::{AgentToolResult, ImageContent, TruncatedBy, UserContentBlock};
use tokio::io::AsyncReadExt as _;
use tokio_util::sync::CancellationToken;
use unicode_normalization::UnicodeNormalization as _;

use crate::ToolEnv;
use crate::call::{abort_if_cancelled, args, js_number, text_block, until_cancelled};
use crate::image_resize::{Omitted, ResizeLimits, dimension_note, resize_image};
use crate::os_error::os_error;
use crate::tool::builtin_tool;
use crate::truncate::{DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, format_size, truncate_head};

const NON_VISION_NOTE: &str =
    "[Current model does not support images. The image will be omitted from this request.]";

/// How many leading bytes pi sniffs for an image signature.
const SNIFF_BYTES: usize = 4100;

static DESCRIPTION: LazyLock<String> = LazyLock::new(|| {
    format!(
        "Returns the contents of a file. Text files come back as text, images (jpg, png, \
         gif, webp) as image attachments. Text stops after {DEFAULT_MAX_LINES} lines or \
         {}KB, whichever comes first; page through longer files with offset and limit, and \
         when you need all of a file keep reading from the offset the notice suggests until \
         you reach its end.",
        DEFAULT_MAX_BYTES / 1024
    )
});

static PARAMETERS: LazyLock<Value> = LazyLock::new(|| {
    json!({
        "type": "object",
        "required": ["path"],
        "properties": {
            "path": {
                "type": "string",
                "description": "The file to read, relative to the working directory or absolute"
            },
            "offset": {
                "type": "number",
                "description": "First line to return, counting from 1"
            },
            "limit": {
                "type": "number",
                "description": "How many lines to return at most"
            }
        }
    })
});

builtin_tool!(
    /// Reads files for the model.
    ReadTool,
    "read",
    arguments: owned
);

impl ReadTool {
    /// Runs one call; `execute` delegates here. `Err` carries the error text.
    pub async fn run(
        &self,
        arguments: Map<String, Value>,
        cancel: &CancellationToken,
    ) -> Result<AgentToolResult, String> {
        abort_if_cancelled(cancel)?;
        let path = args::string("read", &arguments, "path")?;
        let offset = args::optional_number("read", &arguments, "offset")?;
        let limit = args::optional_number("read", &arguments, "limit")?;

        let absolute = until_cancelled(cancel, resolve_read_path(&path, &self.env)).await?;
        // A text file the client serves (its buffer, saved or not); images from the disk.
        if let Some(files) = &self.env.files
            && !has_image_extension(&absolute)
            && let Some(text) = until_cancelled(cancel, files.read_text(&absolute)).await??
        {
            return text_result(text.as_bytes(), &path, offset, limit);
        }
        let bytes = until_cancelled(cancel, read_file(&absolute)).await??;

        match sniff_image_mime(&bytes[..bytes.len().min(SNIFF_BYTES)]) {
            Some(mime) => self.image_result(bytes, mime, cancel).await,
            None => text_result(&bytes, &path, offset, limit),
        }
    }

    async fn image_result(
        &self,
        bytes: Vec<u8>,
        mime: &'static str,
        cancel: &CancellationToken,
    ) -> Result<AgentToolResult, String> {
        let non_vision = (!self.env.model_accepts_images).then_some(NON_VISION_NOTE);
        let with_note = |mut text: String| {
            if let Some(note) = non_vision {
                text.push('\n');
                text.push_str(note);
            }
            text
        };
        if !self.env.auto_resize_images {
            let text = with_note(format!("Read image file [{mime}]"));
            return Ok(result(vec![
                text_block(text),
                image_block(STANDARD.encode(&bytes), mime.to_string()),
            ]));
        }
        let resizing = tokio::task::spawn_blocking(move || {
            resize_image(&bytes, mime, ResizeLimits::default())
        });
        // A panicking decoder is treated like one that failed: the image is omitted.
        let resized = until_cancelled(cancel, resizing)
            .await?
            .unwrap_or(Err(Omitted::CannotResize));
        Ok(match resized {
            Err(omitted) => result(vec![text_block(with_note(format!(
                "Read image file [{mime}]\n{}",
                omitted.note()
            )))]),
            Ok(image) => {
                let mut text = format!("Read image file [{}]", image.mime_type);
                if let Some(note) = dimension_note(&image) {
                    text.push('\n');
                    text.push_str(&note);
                }
                result(vec![
                    text_block(with_note(text)),
                    image_block(image.data, image.mime_type),
                ])
            }
        })
    }
}

/// Whether the name says image, so a client's text read is not asked for it.
fn has_image_extension(path: &Path) -> bool {
    path.extension().and_then(|e| e.to_str()).is_some_and(|e| {
        ["png", "jpg", "jpeg", "gif", "webp"]
            .iter()
            .any(|image| e.eq_ignore_ascii_case(image))
    })
}

/// Opens and reads the whole file. pi checks access first, so a failure to open is reported
/// as its `access` error; a directory opens fine and fails on `read`, as in Node.
async fn read_file(path: &Path) -> Result<Vec<u8>, String> {
    let mut file = tokio::fs::File::open(path)
        .await
        .map_err(|e| os_error(&e, "access", Some(path)))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .await
        .map_err(|e| os_error(&e, "read", None))?;
    Ok(bytes)
}

fn text_result(
    bytes: &[u8],
    path: &str,
    offset: Option<f64>,
    limit: Option<f64>,
) -> Result<AgentToolResult, String> {
    let text = String::from_utf8_lossy(bytes);
    let lines = LineIndex::new(&text);
    let total = lines.count();

    // pi: `offset ? max(0, offset - 1) : 0`; fractions are cut as JavaScript's slice cuts them.
    let start = match offset.map(f64::trunc) {
        Some(o) if o >= 1.0 => to_usize(o - 1.0),
        _ => 0,
    };
    if start >= total {
        let shown = offset.map_or_else(|| "undefined".to_string(), js_number);
        return Err(format!(
            "Offset {shown} is beyond end of file ({total} lines total)"
        ));
    }
    // A negative limit selects nothing, like a limit of 0.
    let user_limited = limit.map(|l| to_usize(l.trunc().max(0.0)));
    let end = match user_limited {
        Some(l) => start.saturating_add(l).min(total),
        None => total,
    };
    let selected = lines.slice(&text, start, end);
    let truncation = truncate_head(selected, DEFAULT_MAX_LINES, DEFAULT_MAX_BYTES);
    let first_shown = start + 1;

    let (output, details) = if truncation.first_line_exceeds_limit {
        let line_size = format_size(lines.line(&text, start).len());
        let output = format!(
            "[Line {first_shown} is {line_size}, exceeds {} limit. Use bash: sed -n '{first_shown}p' {path} | head -c {DEFAULT_MAX_BYTES}]",
            format_size(DEFAULT_MAX_BYTES)
        );
        (output, Some(json!({ "truncation": truncation })))
    } else if truncation.truncated {
        let last_shown = first_shown + truncation.output_lines - 1;
        let next = last_shown + 1;
        let notice = if truncation.truncated_by == Some(TruncatedBy::Lines) {
            format!(
                "[Showing lines {first_shown}-{last_shown} of {total}. Use offset={next} to continue.]"
            )
        } else {
            format!(
                "[Showing lines {first_shown}-{last_shown} of {total} ({} limit). Use offset={next} to continue.]",
                format_size(DEFAULT_MAX_BYTES)
            )
        };
        let output = format!("{}\n\n{notice}", truncation.content);
        (output, Some(json!({ "truncation": truncation })))
    } else if let Some(taken) = user_limited.map(|_| end - start)
        && start + taken < total
    {
        let remaining = total - (start + taken);
        let next = start + taken + 1;
        let output = format!(
            "{}\n\n[{remaining} more lines in file. Use offset={next} to continue.]",
            truncation.content
        );
        (output, None)
    } else {
        (truncation.content, None)
    };
    Ok(AgentToolResult {
        extra: Default::default(),
        content: vec![text_block(output)],
        details,
        terminate: None,
    })
}

/// Where each line of a text starts, so a window of lines is a slice, not a copy of all lines.
struct LineIndex {
    /// Byte positions of every `\n`.
    newlines: Vec<usize>,
}

impl LineIndex {
    fn new(text: &str) -> Self {
        let newlines = text
            .bytes()
            .enumerate()
            .filter_map(|(i, b)| (b == b'\n').then_some(i))
            .collect();
        Self { newlines }
    }

    /// Lines as `split('\n')` counts them: a trailing newline makes one more, empty, line.
    fn count(&self) -> usize {
        self.newlines.len() + 1
    }

    fn start(&self, line: usize) -> usize {
        if line == 0 {
            0
        } else {
            self.newlines[line - 1] + 1
        }
    }

    fn end(&self, text: &str, line: usize) -> usize {
        self.newlines.get(line).copied().unwrap_or(text.len())
    }

    fn line<'t>(&self, text: &'t str, line: usize) -> &'t str {
        &text[self.start(line)..self.end(text, line)]
    }

    /// Lines `from..to` joined by `\n`.
    fn slice<'t>(&self, text: &'t str, from: usize, to: usize) -> &'t str {
        if to <= from {
            return "";
        }
        &text[self.start(from)..self.end(text, to - 1)]
    }
}

fn to_usize(x: f64) -> usize {
    if x <= 0.0 {
        0
    } else if x >= usize::MAX as f64 {
        usize::MAX
    } else {
        // Non-negative, integral (callers truncate) and in range.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let n = x as usize;
        n
    }
}

/// The image types providers accept, recognised by signature as pi 0.79 does (`utils/mime`):
/// JPEG (not JPEG-LS), PNG with a proper IHDR that is not animated, GIF and WebP.
pub(crate) fn sniff_image_mime(head: &[u8]) -> Option<&'static str> {
    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n";
    if head.starts_with(&[0xff, 0xd8, 0xff]) {
        return (head.get(3) != Some(&0xf7)).then_some("image/jpeg");
    }
    if head.starts_with(PNG) {
        let proper = head.len() >= 16 && read_u32_be(head, 8) == 13 && &head[12..16] == b"IHDR";
        return (proper && !is_animated_png(head)).then_some("image/png");
    }
    if head.starts_with(b"GIF") {
        return Some("image/gif");
    }
    if head.starts_with(b"RIFF") && head.get(8..12) == Some(b"WEBP") {
        return Some("image/webp");
    }
    None
}

fn read_u32_be(bytes: &[u8], at: usize) -> u32 {
    let mut word = [0u8; 4];
    for (i, b) in word.iter_mut().enumerate() {
        *b = bytes.get(at + i).copied().unwrap_or(0);
    }
    u32::from_be_bytes(word)
}

/// An `acTL` chunk before the first `IDAT` marks an APNG.
fn is_animated_png(head: &[u8]) -> bool {
    let mut offset = 8usize;
    while offset + 8 <= head.len() {
        let kind = &head[offset + 4..offset + 8];
        if kind == b"acTL" {
            return true;
        }
        if kind == b"IDAT" {
            return false;
        }
        let length = usize::try_from(read_u32_be(head, offset)).unwrap_or(usize::MAX);
        let next = offset.saturating_add(12).saturating_add(length);
        if next <= offset || next > head.len() {
            return false;
        }
        offset = next;
    }
    false
}

/// pi's `resolveReadPath`: the plain resolution, or the first existing variant of it that
/// macOS tends to produce in file names (screenshots' narrow no-break space before AM/PM,
/// decomposed accents, curly apostrophes).
pub(crate) async fn resolve_read_path(path: &str, env: &ToolEnv) -> PathBuf {
    let resolved = env.resolve(path);
    if exists(&resolved).await {
        return resolved;
    }
    let Some(plain) = resolved.to_str() else {
        return resolved;
    };
    let nfd: String = plain.nfd().collect();
    let candidates = [
        am_pm_variant(plain),
        nfd.clone(),
        plain.replace('\'', "\u{2019}"),
        nfd.replace('\'', "\u{2019}"),
    ];
    for candidate in candidates {
        if candidate != plain && exists(Path::new(&candidate)).await {
            return PathBuf::from(candidate);
        }
    }
    resolved
}

async fn exists(path: &Path) -> bool {
    tokio::fs::metadata(path).await.is_ok()
}

/// ` AM.` / ` PM.` (any case) with the space turned into U+202F, as macOS names screenshots.
fn am_pm_variant(path: &str) -> String {
    let mut out = String::with_capacity(path.len() + 8);
    let mut rest = path;
    while let Some(i) = rest.find(' ') {
        out.push_str(&rest[..i]);
        let after = &rest.as_bytes()[i + 1..];
        let marker = after.len() >= 3
            && matches!(after[0], b'A' | b'a' | b'P' | b'p')
            && matches!(after[1], b'M' | b'm')
            && after[2] == b'.';
        out.push(if marker { '\u{202F}' } else { ' ' });
        rest = &rest[i + 1..];
    }
    out.push_str(rest);
    out
}

fn image_block(data: String, mime_type: String) -> UserContentBlock {
    UserContentBlock::Image(ImageContent { data, mime_type })
}

fn result(content: Vec<UserContentBlock>) -> AgentToolResult {
    AgentToolResult {
        extra: Default::default(),
        content,
        details: None,
        terminate: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniffing_follows_pi() {
        assert_eq!(
            sniff_image_mime(b"\xff\xd8\xff\xe0rest"),
            Some("image/jpeg")
        );
        assert_eq!(sniff_image_mime(b"\xff\xd8\xff\xf7rest"), None);
        assert_eq!(sniff_image_mime(b"GIF89a"), Some("image/gif"));
        assert_eq!(
            sniff_image_mime(b"RIFF\0\0\0\0WEBPVP8 "),
            Some("image/webp")
        );
        assert_eq!(sniff_image_mime(b"RIFF\0\0\0\0WAVE"), None);
        assert_eq!(sniff_image_mime(b"\x89PNG\r\n\x1a\n"), None, "no IHDR");
        let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
        png.extend_from_slice(&[0; 13 + 4]);
        assert_eq!(sniff_image_mime(&png), Some("image/png"));
        let mut apng = png.clone();
        apng.extend_from_slice(b"\0\0\0\x08acTL");
        assert_eq!(sniff_image_mime(&apng), None);
        assert_eq!(sniff_image_mime(b""), None);
    }

    #[test]
    fn screenshot_names() {
        assert_eq!(
            am_pm_variant("/s/Shot 10.00.00 AM.png"),
            "/s/Shot 10.00.00\u{202F}AM.png"
        );
        assert_eq!(
            am_pm_variant("a pm. b Am. c AMx"),
            "a\u{202F}pm. b\u{202F}Am. c AMx"
        );
        assert_eq!(am_pm_variant("trailing "), "trailing ");
    }

    #[test]
    fn line_index_slices() {
        let text = "a\nbb\n\nc";
        let lines = LineIndex::new(text);
        assert_eq!(lines.count(), 4);
        assert_eq!(lines.slice(text, 0, 4), text);
        assert_eq!(lines.slice(text, 1, 3), "bb\n");
        assert_eq!(lines.slice(text, 2, 2), "");
        assert_eq!(lines.line(text, 3), "c");
    }
}
