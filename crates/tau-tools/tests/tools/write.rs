//! The `write` tool against real directories: parents created, overwrites that keep the
//! file's mode and links, no temporary files left behind, errors and abort.
use std::path::Path;
use std::sync::Arc;

use serde_json::{Map, Value, json};
use tau_agent::AgentTool;
use tau_protocol::{AgentToolResult, UserContentBlock};
use tau_tools::ToolEnv;
use tau_tools::write::WriteTool;
use tokio_util::sync::CancellationToken;

fn tool_in(dir: &Path) -> WriteTool {
    WriteTool::new(Arc::new(ToolEnv::new(dir, dir.join("agent"))))
}

fn args(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

async fn write(tool: &WriteTool, value: Value) -> Result<AgentToolResult, String> {
    tool.run(args(value), &CancellationToken::new()).await
}

fn text_of(result: &AgentToolResult) -> &str {
    match &result.content[0] {
        UserContentBlock::Text(t) => &t.text,
        other => panic!("first block is not text: {other:?}"),
    }
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn the_schema_is_pis() {
    let dir = tempfile::tempdir().unwrap();
    let tool = tool_in(dir.path());
    assert_eq!(tool.name(), "write");
    assert_eq!(
        serde_json::to_string(tool.parameters()).unwrap(),
        r#"{"type":"object","required":["path","content"],"properties":{"path":{"type":"string","description":"The file to create or replace, relative to the working directory or absolute"},"content":{"type":"string","description":"The complete new content of the file"}}}"#
    );
}

#[tokio::test]
async fn creates_parent_directories() {
    let dir = tempfile::tempdir().unwrap();
    let tool = tool_in(dir.path());
    let result = write(&tool, json!({"path": "a/b/c.txt", "content": "hello\n"}))
        .await
        .unwrap();
    assert_eq!(text_of(&result), "Successfully wrote 6 bytes to a/b/c.txt");
    assert_eq!(result.details, None);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a/b/c.txt")).unwrap(),
        "hello\n"
    );
    assert_eq!(names_in(&dir.path().join("a/b")), ["c.txt"]);
}

#[tokio::test]
async fn overwrites_in_place_of_the_old_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f.txt");
    std::fs::write(&file, "old contents that are longer").unwrap();
    let tool = tool_in(dir.path());
    // The count is of UTF-8 bytes (pi counts UTF-16 units and would say 5).
    let result = write(&tool, json!({"path": "f.txt", "content": "héllo"}))
        .await
        .unwrap();
    assert_eq!(text_of(&result), "Successfully wrote 6 bytes to f.txt");
    assert_eq!(std::fs::read(&file).unwrap(), "héllo".as_bytes());
    assert_eq!(names_in(dir.path()), ["f.txt"], "no temporary file left");
}

#[cfg(unix)]
#[tokio::test]
async fn keeps_mode_and_writes_through_symlinks() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("real.sh");
    std::fs::write(&target, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o750)).unwrap();
    std::os::unix::fs::symlink("real.sh", dir.path().join("link.sh")).unwrap();
    let tool = tool_in(dir.path());

    write(&tool, json!({"path": "link.sh", "content": "echo hi\n"}))
        .await
        .unwrap();
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "echo hi\n");
    let link = std::fs::symlink_metadata(dir.path().join("link.sh")).unwrap();
    assert!(link.file_type().is_symlink(), "the link stays a link");
    let mode = std::fs::metadata(&target).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o750);
    assert_eq!(names_in(dir.path()), ["link.sh", "real.sh"]);
}

#[tokio::test]
async fn errors_are_node_errors() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    std::fs::write(dir.path().join("file"), "x").unwrap();
    let tool = tool_in(dir.path());

    assert_eq!(
        write(&tool, json!({"path": "sub", "content": "x"}))
            .await
            .unwrap_err(),
        format!(
            "EISDIR: illegal operation on a directory, open '{}'",
            dir.path().join("sub").display()
        )
    );
    let err = write(&tool, json!({"path": "file/inner/x.txt", "content": "x"}))
        .await
        .unwrap_err();
    assert!(
        err.starts_with("ENOTDIR: not a directory, mkdir '"),
        "{err}"
    );
    let err = write(&tool, json!({"path": "x.txt"})).await.unwrap_err();
    assert!(
        err.contains("  - content: must have required property 'content'"),
        "{err}"
    );
}

#[tokio::test]
async fn abort_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let tool = tool_in(dir.path());
    let cancel = CancellationToken::new();
    cancel.cancel();
    let err = tool
        .run(args(json!({"path": "new.txt", "content": "x"})), &cancel)
        .await
        .unwrap_err();
    assert_eq!(err, "Operation aborted");
    assert!(names_in(dir.path()).is_empty());
}

#[tokio::test]
async fn concurrent_writes_to_one_file_never_tear() {
    let dir = tempfile::tempdir().unwrap();
    let tool = Arc::new(tool_in(dir.path()));
    let contents: Vec<String> = (0..16).map(|i| format!("{i}").repeat(10_000 + i)).collect();
    let mut tasks = Vec::new();
    for content in &contents {
        let tool = Arc::clone(&tool);
        let content = content.clone();
        tasks.push(tokio::spawn(async move {
            write(&tool, json!({"path": "same.txt", "content": content}))
                .await
                .unwrap();
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let last = std::fs::read_to_string(dir.path().join("same.txt")).unwrap();
    assert!(contents.contains(&last), "a whole write, not a mixture");
    assert_eq!(names_in(dir.path()), ["same.txt"]);
}
