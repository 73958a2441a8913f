//! What a `session/prompt`'s content blocks become: the text and images of one tau prompt.
//! Text is taken as written; images are attached; a link to a local file and an embedded
//! resource are inlined as tau inlines an `@file` argument (`<file name="…">…</file>`), so
//! the model sees an editor's mention of a file as it sees one from the command line.

use std::path::{Path, PathBuf};

use agent_client_protocol::v1::schema::{ContentBlock, EmbeddedResourceResource};
use tau_protocol::ImageContent;

/// The prompt a content list makes.
#[derive(Debug, Default, PartialEq)]
pub struct Prompt {
    pub text: String,
    pub images: Vec<ImageContent>,
}

/// Joins `blocks` in order. A file a link names that cannot be read is mentioned by name
/// with the reason, rather than failing the whole prompt.
pub fn from_blocks(blocks: &[ContentBlock], cwd: &Path, auto_resize: bool) -> Prompt {
    let mut prompt = Prompt::default();
    let home = std::env::var_os("HOME").map(PathBuf::from);
    for block in blocks {
        match block {
            ContentBlock::Text(text) => push_text(&mut prompt.text, &text.text),
            ContentBlock::Image(image) => prompt.images.push(ImageContent {
                data: image.data.clone(),
                mime_type: image.mime_type.clone(),
            }),
            ContentBlock::ResourceLink(link) => match file_path(&link.uri) {
                Some(path) => {
                    let given = path.to_string_lossy().into_owned();
                    match tau_tools::attach::attach_files(
                        &[given],
                        cwd,
                        home.as_deref(),
                        auto_resize,
                    ) {
                        Ok(attached) => {
                            push_text(&mut prompt.text, attached.text.trim_end());
                            prompt.images.extend(attached.images);
                        }
                        Err(err) => push_text(&mut prompt.text, &format!("[{}: {err}]", link.uri)),
                    }
                }
                None => push_text(&mut prompt.text, &format!("[{}]({})", link.name, link.uri)),
            },
            ContentBlock::Resource(embedded) => match &embedded.resource {
                EmbeddedResourceResource::TextResourceContents(resource) => {
                    let name = file_path(&resource.uri)
                        .map_or_else(|| resource.uri.clone(), |p| p.display().to_string());
                    push_text(
                        &mut prompt.text,
                        &format!("<file name=\"{name}\">\n{}\n</file>", resource.text),
                    );
                }
                EmbeddedResourceResource::BlobResourceContents(blob) => {
                    match blob.mime_type.as_deref() {
                        Some(mime) if mime.starts_with("image/") => {
                            prompt.images.push(ImageContent {
                                data: blob.blob.clone(),
                                mime_type: mime.to_string(),
                            });
                        }
                        _ => push_text(
                            &mut prompt.text,
                            &format!("<file name=\"{}\">(binary content)</file>", blob.uri),
                        ),
                    }
                }
                // A later protocol's resource kind: named, so the model knows it was there.
                #[allow(unreachable_patterns)]
                _ => push_text(&mut prompt.text, "[an attached resource tau cannot read]"),
            },
            // Audio is not offered in the capabilities; a client that sends it anyway gets
            // a note in its place.
            #[allow(unreachable_patterns)]
            _ => push_text(&mut prompt.text, "[content tau cannot read]"),
        }
    }
    prompt
}

fn push_text(out: &mut String, text: &str) {
    if text.is_empty() {
        return;
    }
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(text);
}

/// The local path of a `file://` URI (percent escapes decoded), or of a plain path.
fn file_path(uri: &str) -> Option<PathBuf> {
    if let Some(rest) = uri.strip_prefix("file://") {
        // `file://host/path` names another machine: only the local form is read.
        let path = rest.strip_prefix("localhost").unwrap_or(rest);
        return path
            .starts_with('/')
            .then(|| PathBuf::from(percent_decode(path)));
    }
    (uri.starts_with('/') && !uri.contains("://")).then(|| PathBuf::from(uri))
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(hex) = text.get(i + 1..i + 3)
            && let Ok(byte) = u8::from_str_radix(hex, 16)
        {
            out.push(byte);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_client_protocol::v1::schema::{
        EmbeddedResource, ImageContent as AcpImage, ResourceLink, TextResourceContents,
    };

    #[test]
    fn text_links_resources_and_images_make_one_prompt() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let file = dir.path().join("a b.txt");
        std::fs::write(&file, "inside").unwrap_or_else(|e| panic!("{e}"));
        let uri = format!("file://{}", file.display()).replace(' ', "%20");
        let blocks = vec![
            ContentBlock::from("look at"),
            ContentBlock::ResourceLink(ResourceLink::new("a b.txt", uri)),
            ContentBlock::Resource(EmbeddedResource::new(
                EmbeddedResourceResource::TextResourceContents(TextResourceContents::new(
                    "fn main() {}",
                    "file:///src/main.rs",
                )),
            )),
            ContentBlock::Image(AcpImage::new("AAAA", "image/png")),
        ];
        let prompt = from_blocks(&blocks, dir.path(), false);
        assert_eq!(
            prompt.text,
            format!(
                "look at\n<file name=\"{}\">\ninside\n</file>\n<file name=\"/src/main.rs\">\nfn main() {{}}\n</file>",
                file.display()
            )
        );
        assert_eq!(prompt.images.len(), 1);
        assert_eq!(prompt.images[0].mime_type, "image/png");
    }

    #[test]
    fn a_link_to_a_missing_file_or_a_web_page_is_mentioned() {
        let blocks = vec![
            ContentBlock::ResourceLink(ResourceLink::new("gone", "file:///no/such/file")),
            ContentBlock::ResourceLink(ResourceLink::new("docs", "https://example.com/x")),
        ];
        let prompt = from_blocks(&blocks, Path::new("/"), false);
        assert!(
            prompt
                .text
                .starts_with("[file:///no/such/file: File not found"),
            "{}",
            prompt.text
        );
        assert!(
            prompt.text.ends_with("[docs](https://example.com/x)"),
            "{}",
            prompt.text
        );
    }
}
