//! The `find` tool against real directory trees: fd's glob rules as pi runs fd, pi's output
//! and notices, and tau's sorted, `.gitignore`-honouring, `.git`-free walk (decision 17).
use std::path::Path;

use crate::common::{assert_aborts, tool, write};
use serde_json::{Value, json};
use tau_agent::AgentTool;
use tau_tools::find::FindTool;
use tempfile::TempDir;

async fn find(cwd: &Path, arguments: Value) -> (String, Option<Value>) {
    crate::common::success::<FindTool>(cwd, arguments).await
}

async fn find_text(cwd: &Path, arguments: Value) -> String {
    find(cwd, arguments).await.0
}

async fn find_error(cwd: &Path, arguments: Value) -> String {
    crate::common::failure::<FindTool>(cwd, arguments).await
}

fn project() -> TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "src/main.rs", "");
    write(root, "src/util/mod.rs", "");
    write(root, "src/util/parse.spec.ts", "");
    write(root, "src.rs", "");
    write(root, "tests/it.rs", "");
    write(root, "package.json", "");
    write(root, "config/app.json", "");
    write(root, ".hidden/secret.rs", "");
    dir
}

#[tokio::test]
async fn names_match_anywhere_and_paths_are_sorted_and_relative() {
    let dir = project();
    let text = find_text(dir.path(), json!({"pattern": "*.rs"})).await;
    assert_eq!(
        text,
        ".hidden/secret.rs\nsrc/main.rs\nsrc/util/mod.rs\nsrc.rs\ntests/it.rs"
    );
    let text = find_text(dir.path(), json!({"pattern": "*.rs", "path": "src"})).await;
    assert_eq!(text, "main.rs\nutil/mod.rs");
}

#[tokio::test]
async fn directories_match_too_and_end_in_a_slash() {
    let dir = project();
    assert_eq!(
        find_text(dir.path(), json!({"pattern": "util"})).await,
        "src/util/"
    );
    let text = find_text(dir.path(), json!({"pattern": "*", "path": "src"})).await;
    assert_eq!(text, "main.rs\nutil/\nutil/mod.rs\nutil/parse.spec.ts");
    // An empty pattern lists everything, as fd does.
    assert_eq!(
        find_text(dir.path(), json!({"pattern": "", "path": "src"})).await,
        text
    );
}

#[tokio::test]
async fn patterns_with_a_slash_match_the_whole_path() {
    let dir = project();
    let text = find_text(dir.path(), json!({"pattern": "src/**/*.rs"})).await;
    assert_eq!(text, "src/main.rs\nsrc/util/mod.rs");
    let text = find_text(dir.path(), json!({"pattern": "**/*.json"})).await;
    assert_eq!(text, "config/app.json\npackage.json");
    let text = find_text(dir.path(), json!({"pattern": "util/*.spec.ts"})).await;
    assert_eq!(text, "src/util/parse.spec.ts");
    // `*` stops at a separator.
    assert_eq!(
        find_text(dir.path(), json!({"pattern": "src/*.rs"})).await,
        "src/main.rs"
    );
    // An absolute pattern is taken as it is.
    let absolute = format!("{}/tests/*.rs", dir.path().display());
    assert_eq!(
        find_text(dir.path(), json!({"pattern": absolute})).await,
        "tests/it.rs"
    );
}

#[tokio::test]
async fn smart_case() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "lower.rs", "");
    write(dir.path(), "UPPER.RS", "");
    let text = find_text(dir.path(), json!({"pattern": "*.rs"})).await;
    assert_eq!(text, "UPPER.RS\nlower.rs");
    assert_eq!(
        find_text(dir.path(), json!({"pattern": "*.RS"})).await,
        "UPPER.RS"
    );
}

#[tokio::test]
async fn nothing_found() {
    let dir = project();
    let (text, details) = find(dir.path(), json!({"pattern": "*.zig"})).await;
    assert_eq!(text, "No files found matching pattern");
    assert_eq!(details, None);
}

#[tokio::test]
async fn result_limit_keeps_the_first_paths_in_order() {
    let dir = project();
    let (text, details) = find(dir.path(), json!({"pattern": "*.rs", "limit": 2})).await;
    assert_eq!(
        text,
        ".hidden/secret.rs\nsrc/main.rs\n\n\
         [2 results limit reached. Use limit=4 for more, or refine pattern]"
    );
    assert_eq!(details, Some(json!({"resultLimitReached": 2})));
    // Reaching the limit exactly also reports it, as in pi.
    let (_, details) = find(dir.path(), json!({"pattern": "*.rs", "limit": 5})).await;
    assert_eq!(details, Some(json!({"resultLimitReached": 5})));
    let (_, details) = find(dir.path(), json!({"pattern": "*.rs", "limit": 6})).await;
    assert_eq!(details, None);
}

#[tokio::test]
async fn default_limit_is_1000() {
    let dir = tempfile::tempdir().unwrap();
    for n in 0..1005 {
        write(dir.path(), &format!("f{n:04}.txt"), "");
    }
    let (text, details) = find(dir.path(), json!({"pattern": "*.txt"})).await;
    let (list, notice) = text.split_once("\n\n").unwrap();
    assert_eq!(list.lines().count(), 1000);
    assert!(list.ends_with("f0999.txt"));
    assert_eq!(
        notice,
        "[1000 results limit reached. Use limit=2000 for more, or refine pattern]"
    );
    assert_eq!(details, Some(json!({"resultLimitReached": 1000})));
}

#[tokio::test]
async fn output_is_capped_at_50kb() {
    let dir = tempfile::tempdir().unwrap();
    let long = "n".repeat(200);
    for n in 0..400 {
        write(dir.path(), &format!("{long}{n:03}"), "");
    }
    let (text, details) = find(dir.path(), json!({"pattern": "*"})).await;
    let (list, notice) = text.split_once("\n\n").unwrap();
    assert_eq!(notice, "[50.0KB limit reached]");
    assert_eq!(list.lines().count(), 51_200 / 204);
    let truncation = &details.unwrap()["truncation"];
    assert_eq!(truncation["totalLines"], json!(400));
    assert_eq!(truncation["totalBytes"], json!(400 * 204 - 1));
    assert_eq!(truncation["outputBytes"], json!(list.len()));
}

#[tokio::test]
async fn gitignore_is_honoured_inside_a_git_repository() {
    let dir = project();
    write(dir.path(), ".git/HEAD", "ref: refs/heads/main\n");
    write(dir.path(), ".gitignore", "src/util/\n*.json\n");
    let text = find_text(dir.path(), json!({"pattern": "*"})).await;
    assert_eq!(
        text,
        ".gitignore\n.hidden/\n.hidden/secret.rs\nconfig/\nsrc/\nsrc/main.rs\nsrc.rs\ntests/\ntests/it.rs"
    );
}

#[tokio::test]
async fn gitignore_is_honoured_outside_a_git_repository_too() {
    let dir = project();
    write(dir.path(), ".gitignore", "*.json\n");
    write(dir.path(), "src/.gitignore", "util\n");
    write(dir.path(), ".fdignore", "tests/\n");
    let text = find_text(dir.path(), json!({"pattern": "*.{rs,json,ts}"})).await;
    assert_eq!(text, ".hidden/secret.rs\nsrc/main.rs\nsrc.rs");
}

#[tokio::test]
async fn git_directories_are_never_listed() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), ".git/config", "");
    write(dir.path(), "vendor/lib/.git/config", "");
    write(dir.path(), "vendor/lib/a.txt", "");
    let text = find_text(dir.path(), json!({"pattern": "*"})).await;
    assert_eq!(text, "vendor/\nvendor/lib/\nvendor/lib/a.txt");
    assert_eq!(
        find_text(dir.path(), json!({"pattern": "config"})).await,
        "No files found matching pattern"
    );
}

#[tokio::test]
async fn path_errors_and_invalid_globs() {
    let dir = project();
    let error = find_error(dir.path(), json!({"pattern": "*", "path": "missing"})).await;
    assert_eq!(
        error,
        format!("Path not found: {}", dir.path().join("missing").display())
    );
    let error = find_error(dir.path(), json!({"pattern": "*", "path": "src.rs"})).await;
    assert_eq!(
        error,
        format!("Not a directory: {}", dir.path().join("src.rs").display())
    );
    let error = find_error(dir.path(), json!({"pattern": "[abc"})).await;
    assert_eq!(
        error,
        "error parsing glob '[abc': unclosed character class; missing ']'"
    );
}

#[tokio::test]
async fn output_is_identical_across_runs() {
    let dir = tempfile::tempdir().unwrap();
    let mut expected = Vec::new();
    for a in 0..10 {
        expected.push(format!("d{a}/"));
        for b in 0..30 {
            write(dir.path(), &format!("d{a}/f{b:02}"), "");
            expected.push(format!("d{a}/f{b:02}"));
        }
    }
    let first = find_text(dir.path(), json!({"pattern": "*"})).await;
    assert_eq!(first, expected.join("\n"));
    for _ in 0..5 {
        assert_eq!(find_text(dir.path(), json!({"pattern": "*"})).await, first);
    }
}

#[tokio::test]
async fn abort_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    for n in 0..1500 {
        write(dir.path(), &format!("d{}/e{}/f{n}", n % 30, n % 7), "");
    }
    assert_aborts(&tool::<FindTool>(dir.path()), json!({"pattern": "*"})).await;
}

#[tokio::test]
async fn schema_and_name() {
    let dir = tempfile::tempdir().unwrap();
    let find: FindTool = tool(dir.path());
    assert_eq!(find.name(), "find");
    assert_eq!(
        serde_json::to_string(find.parameters()).unwrap(),
        r#"{"type":"object","required":["pattern"],"properties":{"pattern":{"type":"string","description":"Which files to list, as a glob such as '*.rs', '**/*.toml' or 'src/**/mod.rs'"},"path":{"type":"string","description":"Where to look (the working directory if left out)"},"limit":{"type":"number","description":"Stop after this many paths (1000 if left out)"}}}"#
    );
}
