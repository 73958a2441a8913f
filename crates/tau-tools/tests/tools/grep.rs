//! The `grep` tool against real directory trees: pi's output lines, notices and errors, and
//! tau's deterministic, `.gitignore`-honouring, `.git`-free search (decision 17).
use std::fs;
use std::path::Path;

use crate::common::{assert_aborts, tool, write};
use serde_json::{Value, json};
use tau_agent::AgentTool;
use tau_tools::grep::GrepTool;
use tempfile::TempDir;

/// The text and details of a successful call.
async fn grep(cwd: &Path, arguments: Value) -> (String, Option<Value>) {
    crate::common::success::<GrepTool>(cwd, arguments).await
}

async fn grep_text(cwd: &Path, arguments: Value) -> String {
    grep(cwd, arguments).await.0
}

async fn grep_error(cwd: &Path, arguments: Value) -> String {
    crate::common::failure::<GrepTool>(cwd, arguments).await
}

/// A small project: nested directories, a file that sorts between them, and a dotfile.
fn project() -> TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "src/main.rs", "fn main() {\n    greet();\n}\n");
    write(
        root,
        "src/lib/greet.rs",
        "pub fn greet() {\n    println!(\"hello\");\n}\n",
    );
    write(root, "src.txt", "greet the src\n");
    write(root, "README.md", "Say hello.\nThen greet.\n");
    write(root, ".config/settings", "greet = true\n");
    dir
}

#[tokio::test]
async fn prints_pi_lines_sorted_by_path_with_hidden_files() {
    let dir = project();
    let text = grep_text(dir.path(), json!({"pattern": "greet"})).await;
    assert_eq!(
        text,
        ".config/settings:1: greet = true\n\
         README.md:2: Then greet.\n\
         src/lib/greet.rs:1: pub fn greet() {\n\
         src/main.rs:2:     greet();\n\
         src.txt:1: greet the src"
    );
}

#[tokio::test]
async fn no_match_is_a_plain_success() {
    let dir = project();
    let (text, details) = grep(dir.path(), json!({"pattern": "nowhere to be found"})).await;
    assert_eq!(text, "No matches found");
    assert_eq!(details, None);
}

#[tokio::test]
async fn paths_are_relative_to_the_searched_directory() {
    let dir = project();
    let text = grep_text(dir.path(), json!({"pattern": "greet", "path": "src"})).await;
    assert_eq!(
        text,
        "lib/greet.rs:1: pub fn greet() {\nmain.rs:2:     greet();"
    );
    // `@` and `~`-free relative paths resolve against the working directory, `..` included.
    let text = grep_text(
        &dir.path().join("src/lib"),
        json!({"pattern": "main", "path": "@../"}),
    )
    .await;
    assert_eq!(text, "main.rs:1: fn main() {");
}

#[tokio::test]
async fn a_single_file_is_shown_by_its_name() {
    let dir = project();
    let text = grep_text(
        dir.path(),
        json!({"pattern": "greet", "path": "src/lib/greet.rs"}),
    )
    .await;
    assert_eq!(text, "greet.rs:1: pub fn greet() {");
}

#[tokio::test]
async fn context_lines_use_dashes_and_blocks_are_not_merged() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "f.txt",
        "one\ntwo match\nthree\nfour match\nfive\n",
    );
    let text = grep_text(dir.path(), json!({"pattern": "match", "context": 1})).await;
    // pi prints each match's block on its own, so `three` appears twice, and the empty line
    // after the final newline counts as a line of the file.
    assert_eq!(
        text,
        "f.txt-1- one\nf.txt:2: two match\nf.txt-3- three\n\
         f.txt-3- three\nf.txt:4: four match\nf.txt-5- five"
    );
    let text = grep_text(dir.path(), json!({"pattern": "five", "context": 2})).await;
    assert_eq!(
        text,
        "f.txt-3- three\nf.txt-4- four match\nf.txt:5: five\nf.txt-6- "
    );
}

#[tokio::test]
async fn carriage_returns_are_dropped() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "dos.txt", "alpha\r\nbeta\r\n");
    assert_eq!(
        grep_text(dir.path(), json!({"pattern": "beta"})).await,
        "dos.txt:2: beta"
    );
    let text = grep_text(dir.path(), json!({"pattern": "alpha", "context": 1})).await;
    assert_eq!(text, "dos.txt:1: alpha\ndos.txt-2- beta");
}

#[tokio::test]
async fn match_limit_keeps_the_first_matches_in_path_order() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["e", "d", "c", "b", "a"] {
        write(dir.path(), &format!("{name}.txt"), "needle\n");
    }
    let (text, details) = grep(dir.path(), json!({"pattern": "needle", "limit": 3})).await;
    assert_eq!(
        text,
        "a.txt:1: needle\nb.txt:1: needle\nc.txt:1: needle\n\n\
         [3 matches limit reached. Use limit=6 for more, or refine pattern]"
    );
    assert_eq!(details, Some(json!({"matchLimitReached": 3})));
    // As in pi, reaching the limit exactly also reports it.
    let (text, _) = grep(dir.path(), json!({"pattern": "needle", "limit": 5})).await;
    assert!(text.ends_with("[5 matches limit reached. Use limit=10 for more, or refine pattern]"));
    let (_, details) = grep(dir.path(), json!({"pattern": "needle", "limit": 6})).await;
    assert_eq!(details, None);
}

#[tokio::test]
async fn default_limit_is_100_and_limits_below_one_count_as_one() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "many.txt", "x\n".repeat(150));
    let (text, details) = grep(dir.path(), json!({"pattern": "x"})).await;
    assert_eq!(
        text.lines().filter(|l| l.starts_with("many.txt:")).count(),
        100
    );
    assert!(
        text.ends_with("[100 matches limit reached. Use limit=200 for more, or refine pattern]")
    );
    assert_eq!(details, Some(json!({"matchLimitReached": 100})));
    let (text, _) = grep(dir.path(), json!({"pattern": "x", "limit": 0})).await;
    assert_eq!(
        text,
        "many.txt:1: x\n\n[1 matches limit reached. Use limit=2 for more, or refine pattern]"
    );
    // Numbers sent as strings are accepted, as pi's argument coercion accepts them.
    let (text, _) = grep(dir.path(), json!({"pattern": "x", "limit": "2"})).await;
    assert!(text.starts_with("many.txt:1: x\nmany.txt:2: x\n\n[2 matches"));
}

#[tokio::test]
async fn long_lines_are_cut_at_500_characters() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "long.txt",
        format!("needle {}\nneedle short\n", "é".repeat(600)),
    );
    let (text, details) = grep(dir.path(), json!({"pattern": "needle"})).await;
    let expected_first = format!("long.txt:1: needle {}... [truncated]", "é".repeat(493));
    assert_eq!(
        text,
        format!(
            "{expected_first}\nlong.txt:2: needle short\n\n\
             [Some lines truncated to 500 chars. Use read tool to see full lines]"
        )
    );
    assert_eq!(details, Some(json!({"linesTruncated": true})));
}

#[tokio::test]
async fn output_is_capped_at_50kb_with_exact_truncation_details() {
    let dir = tempfile::tempdir().unwrap();
    let line = format!("needle {}", "z".repeat(100));
    write(dir.path(), "big.txt", format!("{line}\n").repeat(1000));
    let (text, details) = grep(dir.path(), json!({"pattern": "needle", "limit": 5000})).await;
    let full: Vec<String> = (1..=1000).map(|n| format!("big.txt:{n}: {line}")).collect();
    let full = full.join("\n");
    let (kept, notice) = text.split_once("\n\n[").unwrap();
    assert_eq!(notice, "50.0KB limit reached]");
    assert!(full.starts_with(kept) && full[kept.len()..].starts_with('\n'));
    let truncation = &details.as_ref().unwrap()["truncation"];
    assert_eq!(truncation["truncated"], json!(true));
    assert_eq!(truncation["truncatedBy"], json!("bytes"));
    assert_eq!(truncation["totalLines"], json!(1000));
    assert_eq!(truncation["totalBytes"], json!(full.len()));
    assert_eq!(truncation["outputBytes"], json!(kept.len()));
    assert_eq!(truncation["outputLines"], json!(kept.lines().count()));
    assert_eq!(truncation["maxBytes"], json!(51_200));
    assert_eq!(truncation["maxLines"], json!(9_007_199_254_740_991_u64));
    assert_eq!(truncation["content"], json!(kept));
    assert!(kept.len() <= 51_200);
}

#[tokio::test]
async fn gitignore_is_honoured_inside_a_git_repository() {
    let dir = project();
    fs::create_dir(dir.path().join(".git")).unwrap();
    write(dir.path(), ".git/HEAD", "greet from inside .git\n");
    write(dir.path(), ".gitignore", "src/lib/\n*.md\n");
    let text = grep_text(dir.path(), json!({"pattern": "greet"})).await;
    assert_eq!(
        text,
        ".config/settings:1: greet = true\nsrc/main.rs:2:     greet();\nsrc.txt:1: greet the src"
    );
}

#[tokio::test]
async fn gitignore_is_honoured_outside_a_git_repository_too() {
    let dir = project();
    write(dir.path(), ".gitignore", "src/lib/\n*.md\n");
    write(dir.path(), "src/.gitignore", "main.rs\n");
    let text = grep_text(dir.path(), json!({"pattern": "greet"})).await;
    assert_eq!(
        text,
        ".config/settings:1: greet = true\nsrc.txt:1: greet the src"
    );
    // `.ignore` and ripgrep's own `.rgignore` count as well.
    write(dir.path(), ".ignore", ".config/\n");
    write(dir.path(), ".rgignore", "src.txt\n");
    assert_eq!(
        grep_text(dir.path(), json!({"pattern": "greet"})).await,
        "No matches found"
    );
}

#[tokio::test]
async fn git_directories_are_never_searched() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), ".git/config", "needle\n");
    write(dir.path(), "sub/.git/description", "needle\n");
    write(dir.path(), "sub/file.txt", "needle\n");
    let text = grep_text(dir.path(), json!({"pattern": "needle"})).await;
    assert_eq!(text, "sub/file.txt:1: needle");
}

#[tokio::test]
async fn binary_files_are_skipped() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "blob.bin", b"needle\x00\x01\x02 needle\n");
    write(dir.path(), "text.txt", "needle\n");
    let text = grep_text(dir.path(), json!({"pattern": "needle"})).await;
    assert_eq!(text, "text.txt:1: needle");
}

#[tokio::test]
async fn glob_filters_files_relative_to_the_searched_directory() {
    let dir = project();
    let text = grep_text(dir.path(), json!({"pattern": "greet", "glob": "*.rs"})).await;
    assert_eq!(
        text,
        "src/lib/greet.rs:1: pub fn greet() {\nsrc/main.rs:2:     greet();"
    );
    let text = grep_text(
        dir.path(),
        json!({"pattern": "greet", "glob": "src/lib/**"}),
    )
    .await;
    assert_eq!(text, "src/lib/greet.rs:1: pub fn greet() {");
    let text = grep_text(
        dir.path(),
        json!({"pattern": "greet", "glob": "**/*.{md,txt}"}),
    )
    .await;
    assert_eq!(text, "README.md:2: Then greet.\nsrc.txt:1: greet the src");
    let text = grep_text(dir.path(), json!({"pattern": "greet", "glob": "!*.rs"})).await;
    assert_eq!(
        text,
        ".config/settings:1: greet = true\nREADME.md:2: Then greet.\nsrc.txt:1: greet the src"
    );
    let error = grep_error(dir.path(), json!({"pattern": "greet", "glob": "[oops"})).await;
    assert_eq!(
        error,
        "error parsing glob '[oops': unclosed character class; missing ']'"
    );
}

#[tokio::test]
async fn ignore_case() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "f.txt", "Hello\nHELLO\nhello\n");
    assert_eq!(
        grep_text(dir.path(), json!({"pattern": "HELLO"})).await,
        "f.txt:2: HELLO"
    );
    let text = grep_text(dir.path(), json!({"pattern": "HELLO", "ignoreCase": true})).await;
    assert_eq!(text, "f.txt:1: Hello\nf.txt:2: HELLO\nf.txt:3: hello");
}

#[tokio::test]
async fn literal_and_regex_patterns() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "f.txt", "abc\na.c\nf(x)\n-v flag\n");
    let text = grep_text(dir.path(), json!({"pattern": "a.c"})).await;
    assert_eq!(text, "f.txt:1: abc\nf.txt:2: a.c");
    let text = grep_text(dir.path(), json!({"pattern": "a.c", "literal": true})).await;
    assert_eq!(text, "f.txt:2: a.c");
    let text = grep_text(dir.path(), json!({"pattern": "f(x)", "literal": true})).await;
    assert_eq!(text, "f.txt:3: f(x)");
    let text = grep_text(dir.path(), json!({"pattern": "^f\\(\\w\\)$"})).await;
    assert_eq!(text, "f.txt:3: f(x)");
    // A pattern that starts with a dash is a pattern, not an option.
    assert_eq!(
        grep_text(dir.path(), json!({"pattern": "-v"})).await,
        "f.txt:4: -v flag"
    );
}

#[tokio::test]
async fn invalid_regex_reports_the_parse_error() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "f.txt", "f(x)\n");
    let error = grep_error(dir.path(), json!({"pattern": "f(x"})).await;
    assert!(error.starts_with("regex parse error:\n"), "{error}");
    assert!(error.ends_with("\nerror: unclosed group"), "{error}");
}

#[tokio::test]
async fn missing_path_and_missing_pattern() {
    let dir = tempfile::tempdir().unwrap();
    let error = grep_error(dir.path(), json!({"pattern": "x", "path": "nope/../gone"})).await;
    assert_eq!(
        error,
        format!("Path not found: {}", dir.path().join("gone").display())
    );
    let error = grep_error(dir.path(), json!({"path": "."})).await;
    assert_eq!(
        error,
        "Validation failed for tool \"grep\":\n  - pattern: must have required properties pattern\n\n\
         Received arguments:\n{\n  \"path\": \".\"\n}"
    );
}

#[tokio::test]
async fn output_is_identical_across_runs() {
    let dir = tempfile::tempdir().unwrap();
    let mut expected = Vec::new();
    for a in 0..8 {
        for b in 0..25 {
            write(
                dir.path(),
                &format!("d{a}/f{b:02}.txt"),
                format!("x\nneedle {a} {b}\n"),
            );
            expected.push(format!("d{a}/f{b:02}.txt:2: needle {a} {b}"));
        }
    }
    let arguments = json!({"pattern": "needle", "limit": 1000});
    let first = grep_text(dir.path(), arguments.clone()).await;
    assert_eq!(first, expected.join("\n"));
    for _ in 0..5 {
        assert_eq!(grep_text(dir.path(), arguments.clone()).await, first);
    }
    // The limit takes the first matches in that same order, however the work is spread.
    let (text, _) = grep(dir.path(), json!({"pattern": "needle", "limit": 30})).await;
    assert!(text.starts_with(&format!("{}\n\n[30 matches", expected[..30].join("\n"))));
}

#[tokio::test]
async fn abort_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    for n in 0..2000 {
        write(
            dir.path(),
            &format!("d{}/f{n}.txt", n % 40),
            "needle\n".repeat(20),
        );
    }
    let arguments = json!({"pattern": "needle", "limit": 1_000_000});
    assert_aborts(&tool::<GrepTool>(dir.path()), arguments).await;
}

#[tokio::test]
async fn schema_and_name() {
    let dir = tempfile::tempdir().unwrap();
    let grep: GrepTool = tool(dir.path());
    assert_eq!(grep.name(), "grep");
    assert!(grep.description().contains(".gitignore"));
    assert_eq!(
        serde_json::to_string(grep.parameters()).unwrap(),
        r#"{"type":"object","required":["pattern"],"properties":{"pattern":{"type":"string","description":"What to look for: a regular expression, or plain text with literal"},"path":{"type":"string","description":"The directory or file to search (the working directory if left out)"},"glob":{"type":"string","description":"Only search files matching this glob, such as '*.rs' or 'tests/**'"},"ignoreCase":{"type":"boolean","description":"Ignore letter case (false if left out)"},"literal":{"type":"boolean","description":"Take the pattern as plain text, not a regular expression (false if left out)"},"context":{"type":"number","description":"Lines of context to show around each match (0 if left out)"},"limit":{"type":"number","description":"Stop after this many matches (100 if left out)"}}}"#
    );
}
