//! The `read` tool against real files: paging and every notice, the too-long first line,
//! errors, images (pass-through, resized, omitted notes) and content sniffing.
use std::io::Cursor;
use std::path::Path;
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use image::{DynamicImage, ImageFormat, Rgb, RgbImage};
use serde_json::{Map, Value, json};
use tau_agent::AgentTool;
use tau_protocol::{AgentToolResult, UserContentBlock};
use tau_tools::ToolEnv;
use tau_tools::read::ReadTool;
use tokio_util::sync::CancellationToken;

fn tool_in(dir: &Path) -> ReadTool {
    ReadTool::new(Arc::new(ToolEnv::new(dir, dir.join("agent"))))
}

fn args(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

async fn read(tool: &ReadTool, value: Value) -> Result<AgentToolResult, String> {
    tool.run(args(value), &CancellationToken::new()).await
}

fn text_of(result: &AgentToolResult) -> &str {
    match &result.content[0] {
        UserContentBlock::Text(t) => &t.text,
        other => panic!("first block is not text: {other:?}"),
    }
}

fn numbered_lines(n: usize) -> String {
    (1..=n)
        .map(|i| format!("line {i}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn encoded(image: &DynamicImage, format: ImageFormat) -> Vec<u8> {
    let mut out = Cursor::new(Vec::new());
    image.write_to(&mut out, format).unwrap();
    out.into_inner()
}

#[test]
fn the_schema_is_pis() {
    let dir = tempfile::tempdir().unwrap();
    let tool = tool_in(dir.path());
    assert_eq!(tool.name(), "read");
    assert_eq!(
        serde_json::to_string(tool.parameters()).unwrap(),
        r#"{"type":"object","required":["path"],"properties":{"path":{"type":"string","description":"The file to read, relative to the working directory or absolute"},"offset":{"type":"number","description":"First line to return, counting from 1"},"limit":{"type":"number","description":"How many lines to return at most"}}}"#
    );
    let description = tool.description();
    assert!(description.contains("2000 lines") && description.contains("50KB"));
}

#[tokio::test]
async fn long_files_are_cut_at_2000_lines() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("big.txt"), numbered_lines(2500)).unwrap();
    let tool = tool_in(dir.path());

    let result = read(&tool, json!({"path": "big.txt"})).await.unwrap();
    let text = text_of(&result);
    assert!(text.starts_with("line 1\nline 2\n"));
    assert!(
        text.ends_with("line 2000\n\n[Showing lines 1-2000 of 2500. Use offset=2001 to continue.]")
    );
    let truncation = &result.details.as_ref().unwrap()["truncation"];
    assert_eq!(truncation["truncatedBy"], "lines");
    assert_eq!(truncation["outputLines"], 2000);
    assert_eq!(truncation["totalLines"], 2500);

    let result = read(&tool, json!({"path": "big.txt", "offset": 2001}))
        .await
        .unwrap();
    let text = text_of(&result);
    assert!(text.starts_with("line 2001\n") && text.ends_with("line 2500"));
    assert_eq!(result.details, None);
}

#[tokio::test]
async fn a_user_limit_says_how_much_is_left() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("big.txt"), numbered_lines(2500)).unwrap();
    let tool = tool_in(dir.path());

    let result = read(&tool, json!({"path": "big.txt", "offset": 10, "limit": 3}))
        .await
        .unwrap();
    assert_eq!(
        text_of(&result),
        "line 10\nline 11\nline 12\n\n[2488 more lines in file. Use offset=13 to continue.]"
    );
    assert_eq!(result.details, None);

    // Numbers may arrive as strings; a limit reaching the end has no notice.
    let result = read(
        &tool,
        json!({"path": "big.txt", "offset": "2499", "limit": 10}),
    )
    .await
    .unwrap();
    assert_eq!(text_of(&result), "line 2499\nline 2500");
}

#[tokio::test]
async fn byte_limit_notice() {
    let dir = tempfile::tempdir().unwrap();
    let line = "x".repeat(100);
    std::fs::write(
        dir.path().join("wide.txt"),
        vec![line.as_str(); 1000].join("\n"),
    )
    .unwrap();
    let result = read(&tool_in(dir.path()), json!({"path": "wide.txt"}))
        .await
        .unwrap();
    // 100 bytes for the first line and 101 for each further one: 506 lines fit in 51200.
    assert!(text_of(&result).ends_with(
        "\n\n[Showing lines 1-506 of 1000 (50.0KB limit). Use offset=507 to continue.]"
    ));
    assert_eq!(
        result.details.unwrap()["truncation"]["truncatedBy"],
        "bytes"
    );
}

#[tokio::test]
async fn a_first_line_over_the_limit_points_to_sed() {
    let dir = tempfile::tempdir().unwrap();
    let content = format!("{}\nshort", "x".repeat(60_000));
    std::fs::write(dir.path().join("huge.txt"), content).unwrap();
    let tool = tool_in(dir.path());

    let result = read(&tool, json!({"path": "./huge.txt"})).await.unwrap();
    assert_eq!(
        text_of(&result),
        "[Line 1 is 58.6KB, exceeds 50.0KB limit. Use bash: sed -n '1p' ./huge.txt | head -c 51200]"
    );
    let truncation = &result.details.unwrap()["truncation"];
    assert_eq!(truncation["firstLineExceedsLimit"], true);
    assert_eq!(truncation["content"], "");

    let result = read(&tool, json!({"path": "huge.txt", "offset": 2}))
        .await
        .unwrap();
    assert_eq!(text_of(&result), "short");
}

#[tokio::test]
async fn offsets_past_the_end_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("three.txt"), "a\nb\nc").unwrap();
    std::fs::write(dir.path().join("nl.txt"), "a\nb\n").unwrap();
    let tool = tool_in(dir.path());
    assert_eq!(
        read(&tool, json!({"path": "three.txt", "offset": 4}))
            .await
            .unwrap_err(),
        "Offset 4 is beyond end of file (3 lines total)"
    );
    // A trailing newline counts as one more, empty, line.
    let result = read(&tool, json!({"path": "nl.txt", "offset": 3}))
        .await
        .unwrap();
    assert_eq!(text_of(&result), "");
    assert_eq!(
        read(&tool, json!({"path": "nl.txt", "offset": 4}))
            .await
            .unwrap_err(),
        "Offset 4 is beyond end of file (3 lines total)"
    );
    // Offset 0 means the start, as in pi.
    let result = read(&tool, json!({"path": "three.txt", "offset": 0}))
        .await
        .unwrap();
    assert_eq!(text_of(&result), "a\nb\nc");
}

#[tokio::test]
async fn missing_files_and_directories_give_node_errors() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let tool = tool_in(dir.path());
    let missing = dir.path().join("missing.txt");
    assert_eq!(
        read(&tool, json!({"path": "missing.txt"}))
            .await
            .unwrap_err(),
        format!(
            "ENOENT: no such file or directory, access '{}'",
            missing.display()
        )
    );
    assert_eq!(
        read(&tool, json!({"path": "sub"})).await.unwrap_err(),
        "EISDIR: illegal operation on a directory, read"
    );
}

#[tokio::test]
async fn bad_arguments_and_abort() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "a").unwrap();
    let tool = tool_in(dir.path());
    let err = read(&tool, json!({})).await.unwrap_err();
    assert!(
        err.starts_with(
            "Validation failed for tool \"read\":\n  - path: must have required property 'path'\n\nReceived arguments:\n"
        ),
        "{err}"
    );
    let err = read(&tool, json!({"path": "a.txt", "limit": true}))
        .await
        .unwrap_err();
    assert!(err.contains("  - limit: must be number"), "{err}");

    let cancel = CancellationToken::new();
    cancel.cancel();
    assert_eq!(
        tool.run(args(json!({"path": "a.txt"})), &cancel)
            .await
            .unwrap_err(),
        "Operation aborted"
    );
}

#[tokio::test]
async fn paths_resolve_like_pis() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("it\u{2019}s.txt"), "curly").unwrap();
    std::fs::write(dir.path().join("Shot 9.41.00\u{202F}AM.txt"), "screenshot").unwrap();
    std::fs::write(dir.path().join("plain.txt"), "plain").unwrap();
    let tool = tool_in(dir.path());
    let result = read(&tool, json!({"path": "it's.txt"})).await.unwrap();
    assert_eq!(text_of(&result), "curly");
    let result = read(&tool, json!({"path": "Shot 9.41.00 AM.txt"}))
        .await
        .unwrap();
    assert_eq!(text_of(&result), "screenshot");
    let absolute = dir.path().join("plain.txt");
    let result = read(&tool, json!({"path": format!("@{}", absolute.display())}))
        .await
        .unwrap();
    assert_eq!(text_of(&result), "plain");
}

#[tokio::test]
async fn small_png_and_jpeg_pass_through() {
    let dir = tempfile::tempdir().unwrap();
    let picture = DynamicImage::ImageRgb8(RgbImage::from_fn(40, 20, |x, y| {
        Rgb([(x * 6) as u8, (y * 12) as u8, 128])
    }));
    let png = encoded(&picture, ImageFormat::Png);
    let jpeg = encoded(&picture, ImageFormat::Jpeg);
    // Names do not matter: detection is by content.
    std::fs::write(dir.path().join("picture.dat"), &png).unwrap();
    std::fs::write(dir.path().join("photo.jpg"), &jpeg).unwrap();
    let tool = tool_in(dir.path());

    for (name, bytes, mime) in [
        ("picture.dat", &png, "image/png"),
        ("photo.jpg", &jpeg, "image/jpeg"),
    ] {
        let result = read(&tool, json!({"path": name})).await.unwrap();
        assert_eq!(text_of(&result), format!("Read image file [{mime}]"));
        assert_eq!(result.content.len(), 2);
        match &result.content[1] {
            UserContentBlock::Image(image) => {
                assert_eq!(image.mime_type, mime);
                assert_eq!(image.data, STANDARD.encode(bytes));
            }
            other => panic!("not an image: {other:?}"),
        }
        assert_eq!(result.details, None);
    }
}

#[tokio::test]
async fn wide_png_is_resized_with_a_dimension_note() {
    let dir = tempfile::tempdir().unwrap();
    let wide = DynamicImage::ImageRgb8(RgbImage::from_fn(3000, 100, |x, _| {
        Rgb([(x % 256) as u8, 0, 0])
    }));
    std::fs::write(
        dir.path().join("wide.png"),
        encoded(&wide, ImageFormat::Png),
    )
    .unwrap();
    let result = read(&tool_in(dir.path()), json!({"path": "wide.png"}))
        .await
        .unwrap();
    assert_eq!(
        text_of(&result),
        "Read image file [image/png]\n[Image: original 3000x100, displayed at 2000x67. Multiply coordinates by 1.50 to map to original image.]"
    );
    let UserContentBlock::Image(image) = &result.content[1] else {
        panic!("no image block");
    };
    assert_eq!(image.mime_type, "image/png");
    let decoded = image::load_from_memory(&STANDARD.decode(&image.data).unwrap()).unwrap();
    assert_eq!((decoded.width(), decoded.height()), (2000, 67));
}

#[tokio::test]
async fn image_settings_change_the_result() {
    let dir = tempfile::tempdir().unwrap();
    let wide = DynamicImage::ImageRgb8(RgbImage::from_pixel(3000, 100, Rgb([1, 2, 3])));
    let bytes = encoded(&wide, ImageFormat::Png);
    std::fs::write(dir.path().join("wide.png"), &bytes).unwrap();

    let mut env = ToolEnv::new(dir.path(), dir.path().join("agent"));
    env.model_accepts_images = false;
    env.auto_resize_images = false;
    let tool = ReadTool::new(Arc::new(env));
    let result = read(&tool, json!({"path": "wide.png"})).await.unwrap();
    assert_eq!(
        text_of(&result),
        "Read image file [image/png]\n[Current model does not support images. The image will be omitted from this request.]"
    );
    // Not resized, and still attached (the provider layer drops it).
    let UserContentBlock::Image(image) = &result.content[1] else {
        panic!("no image block");
    };
    assert_eq!(image.data, STANDARD.encode(&bytes));
}

#[tokio::test]
async fn an_undecodable_image_is_omitted() {
    let dir = tempfile::tempdir().unwrap();
    // A GIF signature with nothing behind it.
    std::fs::write(dir.path().join("broken.gif"), b"GIF89a\x01\x00garbage").unwrap();
    let result = read(&tool_in(dir.path()), json!({"path": "broken.gif"}))
        .await
        .unwrap();
    assert_eq!(
        text_of(&result),
        "Read image file [image/gif]\n[Image omitted: could not be resized below the inline image size limit.]"
    );
    assert_eq!(result.content.len(), 1);
}

#[tokio::test]
async fn text_named_png_and_binary_files_are_text() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("fake.png"), "not an image\n").unwrap();
    let binary: &[u8] = b"\x00\x9f\x92\x96\nok\xff";
    std::fs::write(dir.path().join("blob.bin"), binary).unwrap();
    let tool = tool_in(dir.path());

    let result = read(&tool, json!({"path": "fake.png"})).await.unwrap();
    assert_eq!(text_of(&result), "not an image\n");
    assert_eq!(result.content.len(), 1);

    let result = read(&tool, json!({"path": "blob.bin"})).await.unwrap();
    assert_eq!(text_of(&result), String::from_utf8_lossy(binary));
    assert_eq!(text_of(&result), "\0\u{FFFD}\u{FFFD}\u{FFFD}\nok\u{FFFD}");
}
