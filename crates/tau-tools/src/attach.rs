//! `@file` arguments of the one-shot modes (pi's `processFileArguments`): a text file is
//! inlined in the prompt inside `<file name="…">` tags, an image is attached (resized to the
//! inline limits unless turned off) with an empty tag naming it, and an empty file is skipped.

use std::path::{Path, PathBuf};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use tau_protocol::ImageContent;

use crate::image_resize::{ResizeLimits, dimension_note, resize_image};
use crate::read::sniff_image_mime;

/// The prompt text and images the `@file` arguments make.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Attachments {
    pub text: String,
    pub images: Vec<ImageContent>,
}

/// Why an `@file` argument cannot be used; the texts are pi's.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    #[error("File not found: {}", .0.display())]
    NotFound(PathBuf),
    #[error("Could not read file {}: {reason}", path.display())]
    Unreadable { path: PathBuf, reason: String },
}

/// Reads each `@path` (the `@` already removed or not) relative to `cwd`, in order.
pub fn attach_files(
    paths: &[String],
    cwd: &Path,
    home: Option<&Path>,
    auto_resize: bool,
) -> Result<Attachments, AttachError> {
    let mut out = Attachments::default();
    for given in paths {
        let path = crate::paths::resolve_to_cwd(given, cwd, home);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                return Err(AttachError::NotFound(path));
            }
            Err(err) => {
                return Err(AttachError::Unreadable {
                    path,
                    reason: err.to_string(),
                });
            }
        };
        if bytes.is_empty() {
            continue;
        }
        let name = path.display();
        match sniff_image_mime(&bytes) {
            Some(mime) if auto_resize => {
                match resize_image(&bytes, mime, ResizeLimits::default()) {
                    Ok(image) => {
                        let note = dimension_note(&image).unwrap_or_default();
                        out.text
                            .push_str(&format!("<file name=\"{name}\">{note}</file>\n"));
                        out.images.push(ImageContent {
                            data: image.data,
                            mime_type: image.mime_type,
                        });
                    }
                    Err(omitted) => out.text.push_str(&format!(
                        "<file name=\"{name}\">{}</file>\n",
                        omitted.note()
                    )),
                }
            }
            Some(mime) => {
                out.text
                    .push_str(&format!("<file name=\"{name}\"></file>\n"));
                out.images.push(ImageContent {
                    data: STANDARD.encode(&bytes),
                    mime_type: mime.to_string(),
                });
            }
            None => {
                let text = String::from_utf8(bytes).map_err(|e| AttachError::Unreadable {
                    path: path.clone(),
                    reason: e.to_string(),
                })?;
                out.text
                    .push_str(&format!("<file name=\"{name}\">\n{text}\n</file>\n"));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_inlined_images_attached_and_empty_files_skipped() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let write = |name: &str, bytes: &[u8]| {
            std::fs::write(dir.path().join(name), bytes).unwrap_or_else(|e| panic!("{e}"))
        };
        write("notes.txt", b"hello");
        write("empty.txt", b"");
        // A 1x1 PNG.
        let png = STANDARD
            .decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")
            .unwrap_or_else(|e| panic!("{e}"));
        write("dot.png", &png);
        let paths = ["notes.txt", "empty.txt", "@dot.png"].map(String::from);
        let out = attach_files(&paths, dir.path(), None, true).unwrap_or_else(|e| panic!("{e}"));
        let base = dir.path().display();
        assert_eq!(
            out.text,
            format!(
                "<file name=\"{base}/notes.txt\">\nhello\n</file>\n<file name=\"{base}/dot.png\"></file>\n"
            )
        );
        assert_eq!(out.images.len(), 1);
        assert_eq!(out.images[0].mime_type, "image/png");
        let missing = attach_files(&["nope.md".into()], dir.path(), None, true);
        assert_eq!(
            missing.err().map(|e| e.to_string()),
            Some(format!("File not found: {base}/nope.md"))
        );
    }

    #[test]
    fn an_image_over_the_pixel_cap_is_named_in_the_prompt_and_not_attached() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        use tau_test_kit::png_bomb;
        let path = dir.path().join("bomb.png");
        let png = png_bomb::png(11_500, 11_500, &png_bomb::zero_idat(11_500, 11_500));
        std::fs::write(&path, png).unwrap_or_else(|e| panic!("{e}"));
        let out = attach_files(&["@bomb.png".into()], dir.path(), None, true)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(out.images.is_empty());
        assert_eq!(
            out.text,
            format!(
                "<file name=\"{}\">[Image omitted: 11500x11500 pixels is more than the 50 megapixels an image may have to be decoded.]</file>\n",
                path.display()
            )
        );
    }
}
