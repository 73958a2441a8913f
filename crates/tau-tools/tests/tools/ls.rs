//! The `ls` tool against real directories: pi's listing (case-insensitive locale order,
//! dotfiles, `/` on directories, no ignore rules), notices and errors.
use std::fs;
use std::path::Path;

use crate::common::tool;
use serde_json::{Map, Value, json};
use tau_agent::AgentTool;
use tau_tools::ls::LsTool;
use tokio_util::sync::CancellationToken;

async fn ls(cwd: &Path, arguments: Value) -> (String, Option<Value>) {
    crate::common::success::<LsTool>(cwd, arguments).await
}

async fn ls_error(cwd: &Path, arguments: Value) -> String {
    crate::common::failure::<LsTool>(cwd, arguments).await
}

fn touch(dir: &Path, names: &[&str]) {
    for name in names {
        fs::write(dir.join(name), "").unwrap();
    }
}

#[tokio::test]
async fn lists_sorted_case_insensitively_with_dotfiles_and_directory_slashes() {
    let dir = tempfile::tempdir().unwrap();
    touch(
        dir.path(),
        &[
            "b.txt",
            "A.txt",
            "_build.log",
            "Cargo.toml",
            ".env",
            "a1",
            "a_b",
        ],
    );
    fs::create_dir(dir.path().join("src")).unwrap();
    fs::create_dir(dir.path().join("Docs")).unwrap();
    fs::create_dir(dir.path().join(".git")).unwrap();
    fs::write(dir.path().join(".gitignore"), "*.txt\n").unwrap();
    let (text, details) = ls(dir.path(), json!({})).await;
    // Node's `localeCompare` puts punctuation before digits before letters: `_` and `.` lead.
    assert_eq!(
        text,
        "_build.log\n.env\n.git/\n.gitignore\na_b\nA.txt\na1\nb.txt\nCargo.toml\nDocs/\nsrc/"
    );
    assert_eq!(details, None);
    assert_eq!(ls(dir.path(), json!({"path": "."})).await.0, text);
}

#[tokio::test]
async fn names_equal_but_for_case_have_a_fixed_order() {
    let dir = tempfile::tempdir().unwrap();
    touch(dir.path(), &["readme", "README", "ReadMe"]);
    assert_eq!(ls(dir.path(), json!({})).await.0, "README\nReadMe\nreadme");
}

#[tokio::test]
async fn links_are_followed_and_dangling_ones_left_out() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join("real")).unwrap();
    touch(dir.path(), &["file"]);
    std::os::unix::fs::symlink(dir.path().join("real"), dir.path().join("link")).unwrap();
    std::os::unix::fs::symlink(dir.path().join("gone"), dir.path().join("dangling")).unwrap();
    assert_eq!(ls(dir.path(), json!({})).await.0, "file\nlink/\nreal/");
}

#[tokio::test]
async fn empty_directory() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join("empty")).unwrap();
    let (text, details) = ls(dir.path(), json!({"path": "empty"})).await;
    assert_eq!(text, "(empty directory)");
    assert_eq!(details, None);
}

#[tokio::test]
async fn entry_limit_is_reported_only_when_entries_remain() {
    let dir = tempfile::tempdir().unwrap();
    touch(dir.path(), &["a", "b", "c", "d"]);
    let (text, details) = ls(dir.path(), json!({"limit": 2})).await;
    assert_eq!(
        text,
        "a\nb\n\n[2 entries limit reached. Use limit=4 for more]"
    );
    assert_eq!(details, Some(json!({"entryLimitReached": 2})));
    let (text, details) = ls(dir.path(), json!({"limit": 4})).await;
    assert_eq!(text, "a\nb\nc\nd");
    assert_eq!(details, None);
}

#[tokio::test]
async fn default_limit_is_500() {
    let dir = tempfile::tempdir().unwrap();
    for n in 0..501 {
        fs::write(dir.path().join(format!("f{n:03}")), "").unwrap();
    }
    let (text, details) = ls(dir.path(), json!({})).await;
    let (list, notice) = text.split_once("\n\n").unwrap();
    assert_eq!(list.lines().count(), 500);
    assert_eq!(
        notice,
        "[500 entries limit reached. Use limit=1000 for more]"
    );
    assert_eq!(details, Some(json!({"entryLimitReached": 500})));
}

#[tokio::test]
async fn output_is_capped_at_50kb() {
    let dir = tempfile::tempdir().unwrap();
    let long = "x".repeat(200);
    for n in 0..300 {
        fs::write(dir.path().join(format!("{long}{n:03}")), "").unwrap();
    }
    let (text, details) = ls(dir.path(), json!({})).await;
    let (list, notice) = text.split_once("\n\n").unwrap();
    assert_eq!(notice, "[50.0KB limit reached]");
    assert_eq!(list.lines().count(), 250);
    let truncation = &details.unwrap()["truncation"];
    assert_eq!(truncation["totalLines"], json!(300));
    assert_eq!(truncation["outputLines"], json!(250));
    assert_eq!(truncation["truncatedBy"], json!("bytes"));
}

#[tokio::test]
async fn path_errors() {
    let dir = tempfile::tempdir().unwrap();
    touch(dir.path(), &["file.txt"]);
    let error = ls_error(dir.path(), json!({"path": "missing"})).await;
    assert_eq!(
        error,
        format!("Path not found: {}", dir.path().join("missing").display())
    );
    let error = ls_error(dir.path(), json!({"path": "./file.txt"})).await;
    assert_eq!(
        error,
        format!("Not a directory: {}", dir.path().join("file.txt").display())
    );
}

#[tokio::test]
async fn abort_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let cancel = CancellationToken::new();
    cancel.cancel();
    let error = tool::<LsTool>(dir.path())
        .run(&Map::new(), &cancel)
        .await
        .unwrap_err();
    assert_eq!(error, "Operation aborted");
}

#[tokio::test]
async fn schema_and_name() {
    let dir = tempfile::tempdir().unwrap();
    let ls: LsTool = tool(dir.path());
    assert_eq!(ls.name(), "ls");
    assert_eq!(
        serde_json::to_string(ls.parameters()).unwrap(),
        r#"{"type":"object","properties":{"path":{"type":"string","description":"The directory to list (the working directory if left out)"},"limit":{"type":"number","description":"Stop after this many entries (500 if left out)"}}}"#
    );
}
