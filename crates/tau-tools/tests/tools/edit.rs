//! The `edit` tool against real files: both call shapes, several edits, CRLF, BOM and
//! undecodable bytes kept outside the edited spans, fuzzy location, pi's diff and every error.
use std::path::Path;
use std::sync::Arc;

use serde_json::{Map, Value, json};
use tau_agent::AgentTool;
use tau_protocol::{AgentToolResult, UserContentBlock};
use tau_tools::ToolEnv;
use tau_tools::edit::{EditTool, prepare_arguments};
use tokio_util::sync::CancellationToken;

fn tool_in(dir: &Path) -> EditTool {
    EditTool::new(Arc::new(ToolEnv::new(dir, dir.join("agent"))))
}

fn args(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

async fn edit(tool: &EditTool, value: Value) -> Result<AgentToolResult, String> {
    tool.run(args(value), &CancellationToken::new()).await
}

fn text_of(result: &AgentToolResult) -> &str {
    match &result.content[0] {
        UserContentBlock::Text(t) => &t.text,
        other => panic!("first block is not text: {other:?}"),
    }
}

/// Writes `content` to `f.txt` in a fresh directory, runs one edit call, and returns the
/// outcome and the file's bytes afterwards.
async fn edit_file(content: &[u8], call: Value) -> (Result<AgentToolResult, String>, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f.txt");
    std::fs::write(&file, content).unwrap();
    let mut call = args(call);
    call.insert("path".into(), json!("f.txt"));
    let outcome = edit(&tool_in(dir.path()), Value::Object(call)).await;
    let after = std::fs::read(&file).unwrap();
    (outcome, after)
}

fn one(old_text: &str, new_text: &str) -> Value {
    json!({"edits": [{"oldText": old_text, "newText": new_text}]})
}

#[test]
fn the_schema_has_pis_shape() {
    let dir = tempfile::tempdir().unwrap();
    let tool = tool_in(dir.path());
    assert_eq!(tool.name(), "edit");
    let schema = tool.parameters();
    let keys: Vec<&String> = schema.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        ["type", "required", "properties", "additionalProperties"]
    );
    assert_eq!(schema["required"], json!(["path", "edits"]));
    assert_eq!(schema["additionalProperties"], false);
    assert_eq!(
        schema["properties"]["path"],
        json!({"type": "string", "description": "The file to change, relative to the working directory or absolute"})
    );
    let edits = &schema["properties"]["edits"];
    let keys: Vec<&String> = edits.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["type", "items", "description"]);
    assert_eq!(edits["items"]["required"], json!(["oldText", "newText"]));
    assert_eq!(edits["items"]["additionalProperties"], false);
}

#[tokio::test]
async fn replaces_one_block_and_reports_the_diff() {
    let (outcome, after) = edit_file(b"one\ntwo\nthree\n", one("two", "2")).await;
    let result = outcome.unwrap();
    assert_eq!(
        text_of(&result),
        "Successfully replaced 1 block(s) in f.txt."
    );
    assert_eq!(after, b"one\n2\nthree\n");
    let details = result.details.unwrap();
    assert_eq!(details["diff"], " 1 one\n-2 two\n+2 2\n 3 three");
    assert_eq!(details["firstChangedLine"], 2);
    assert_eq!(
        details["patch"],
        "--- f.txt\n+++ f.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n"
    );
}

#[tokio::test]
async fn pis_verified_diff_example() {
    let rows: String = (1..=30).map(|i| format!("row {i}\n")).collect();
    let call = json!({"edits": [
        {"oldText": "row 20\n", "newText": "ROW20\nextra\n"},
        {"oldText": "row 5\n", "newText": "ROW5\n"},
    ]});
    let (outcome, after) = edit_file(rows.as_bytes(), call).await;
    let result = outcome.unwrap();
    assert_eq!(
        text_of(&result),
        "Successfully replaced 2 block(s) in f.txt."
    );
    let after = String::from_utf8(after).unwrap();
    assert!(
        after.contains("row 4\nROW5\nrow 6\n") && after.contains("row 19\nROW20\nextra\nrow 21\n")
    );
    let expected = [
        "  1 row 1",
        "  2 row 2",
        "  3 row 3",
        "  4 row 4",
        "- 5 row 5",
        "+ 5 ROW5",
        "  6 row 6",
        "  7 row 7",
        "  8 row 8",
        "  9 row 9",
        "    ...",
        " 16 row 16",
        " 17 row 17",
        " 18 row 18",
        " 19 row 19",
        "-20 row 20",
        "+20 ROW20",
        "+21 extra",
        " 21 row 21",
        " 22 row 22",
        " 23 row 23",
        " 24 row 24",
        "    ...",
    ]
    .join("\n");
    let details = result.details.unwrap();
    assert_eq!(details["diff"], expected);
    assert_eq!(details["firstChangedLine"], 5);
}

#[tokio::test]
async fn legacy_and_stringified_shapes() {
    let (outcome, after) = edit_file(
        b"alpha beta",
        json!({"oldText": "beta", "newText": "gamma"}),
    )
    .await;
    assert_eq!(
        text_of(&outcome.unwrap()),
        "Successfully replaced 1 block(s) in f.txt."
    );
    assert_eq!(after, b"alpha gamma");

    let call = json!({"edits": "[{\"oldText\":\"alpha\",\"newText\":\"A\"}]"});
    let (outcome, after) = edit_file(b"alpha beta", call).await;
    assert!(outcome.is_ok());
    assert_eq!(after, b"A beta");

    // What the loop sees after preparation validates against the schema's shape.
    let prepared = prepare_arguments(args(
        json!({"path": "p", "edits": [{"oldText": "a", "newText": "b"}], "oldText": "c", "newText": "d"}),
    ));
    assert_eq!(
        Value::Object(prepared),
        json!({"path": "p", "edits": [{"oldText": "a", "newText": "b"}, {"oldText": "c", "newText": "d"}]})
    );
}

#[tokio::test]
async fn crlf_stays_crlf_and_mixed_endings_survive() {
    let (outcome, after) = edit_file(
        b"line1\r\nline2\r\nline3\r\n",
        one("line1\nline2", "first\nsecond\nextra"),
    )
    .await;
    assert!(outcome.is_ok());
    assert_eq!(after, b"first\r\nsecond\r\nextra\r\nline3\r\n");

    // pi would rewrite every ending as CRLF; only the span changes here.
    let (outcome, after) = edit_file(b"a\r\nb\nc\r\nd\n", one("c", "C\nC2")).await;
    assert!(outcome.is_ok());
    assert_eq!(after, b"a\r\nb\nC\r\nC2\r\nd\n");

    // A lone CR outside the span is left alone too.
    let (outcome, after) = edit_file(b"x\ry\nz\n", one("z", "Z")).await;
    assert!(outcome.is_ok());
    assert_eq!(after, b"x\ry\nZ\n");
}

#[tokio::test]
async fn bom_and_undecodable_bytes_are_kept() {
    let (outcome, after) =
        edit_file(b"\xEF\xBB\xBFhello\r\nworld\r\n", one("world", "there")).await;
    assert!(outcome.is_ok());
    assert_eq!(after, b"\xEF\xBB\xBFhello\r\nthere\r\n");

    let (outcome, after) = edit_file(b"\xff\xfeabc\x80 tail", one("abc", "xyz")).await;
    assert!(outcome.is_ok());
    assert_eq!(after, b"\xff\xfexyz\x80 tail");
}

#[tokio::test]
async fn fuzzy_matching_locates_but_changes_only_the_span() {
    let original =
        "const a = \u{201C}hi\u{201D};   \nconst b = \u{2018}x\u{2019} \u{2014} y;\t\nlast  \n";
    let (outcome, after) = edit_file(
        original.as_bytes(),
        one("const a = \"hi\";", "const a = \"bye\";"),
    )
    .await;
    let result = outcome.unwrap();
    assert_eq!(
        text_of(&result),
        "Successfully replaced 1 block(s) in f.txt."
    );
    assert_eq!(
        String::from_utf8(after).unwrap(),
        "const a = \"bye\";   \nconst b = \u{2018}x\u{2019} \u{2014} y;\t\nlast  \n"
    );
    assert_eq!(result.details.unwrap()["firstChangedLine"], 1);

    // One fuzzy edit switches the whole call to fuzzy space; the exact one still lands.
    let call = json!({"edits": [
        {"oldText": "last", "newText": "LAST"},
        {"oldText": "b = 'x' - y;", "newText": "b = 1;"},
    ]});
    let (outcome, after) = edit_file(original.as_bytes(), call).await;
    assert!(outcome.is_ok(), "{outcome:?}");
    assert_eq!(
        String::from_utf8(after).unwrap(),
        "const a = \u{201C}hi\u{201D};   \nconst b = 1;\t\nLAST  \n"
    );
}

#[tokio::test]
async fn not_found_texts() {
    let original = b"alpha\nbeta\n";
    let (outcome, after) = edit_file(original, one("gamma", "x")).await;
    assert_eq!(
        outcome.unwrap_err(),
        "Could not find the exact text in f.txt. The old text must match exactly including all whitespace and newlines."
    );
    assert_eq!(after, original, "the file is untouched");

    let call = json!({"edits": [
        {"oldText": "alpha", "newText": "a"},
        {"oldText": "gamma", "newText": "g"},
    ]});
    let (outcome, after) = edit_file(original, call).await;
    assert_eq!(
        outcome.unwrap_err(),
        "Could not find edits[1] in f.txt. The oldText must match exactly including all whitespace and newlines."
    );
    assert_eq!(after, original);
}

#[tokio::test]
async fn uniqueness_texts() {
    let (outcome, _) = edit_file(b"x = 1\nx = 1\n", one("x = 1", "y")).await;
    assert_eq!(
        outcome.unwrap_err(),
        "Found 2 occurrences of the text in f.txt. The text must be unique. Please provide more context to make it unique."
    );
    let call = json!({"edits": [
        {"oldText": "k", "newText": "K"},
        {"oldText": "z", "newText": "Z"},
    ]});
    let (outcome, _) = edit_file(b"k k k z", call).await;
    assert_eq!(
        outcome.unwrap_err(),
        "Found 3 occurrences of edits[0] in f.txt. Each oldText must be unique. Please provide more context to make it unique."
    );
    // Counted in fuzzy space, as pi counts: the curly copy makes the exact one ambiguous.
    let (outcome, _) = edit_file("it's\nit\u{2019}s\n".as_bytes(), one("it's", "it is")).await;
    assert_eq!(
        outcome.unwrap_err(),
        "Found 2 occurrences of the text in f.txt. The text must be unique. Please provide more context to make it unique."
    );
}

#[tokio::test]
async fn overlap_empty_and_no_change_texts() {
    let call = json!({"edits": [
        {"oldText": "cdef", "newText": "1"},
        {"oldText": "abcd", "newText": "2"},
    ]});
    let (outcome, _) = edit_file(b"abcdefgh", call).await;
    assert_eq!(
        outcome.unwrap_err(),
        "edits[1] and edits[0] overlap in f.txt. Merge them into one edit or target disjoint regions."
    );

    let (outcome, _) = edit_file(b"abc", one("", "x")).await;
    assert_eq!(outcome.unwrap_err(), "oldText must not be empty in f.txt.");
    let call = json!({"edits": [
        {"oldText": "a", "newText": "x"},
        {"oldText": "", "newText": "y"},
    ]});
    let (outcome, _) = edit_file(b"abc", call).await;
    assert_eq!(
        outcome.unwrap_err(),
        "edits[1].oldText must not be empty in f.txt."
    );

    let (outcome, _) = edit_file(b"abc", one("b", "b")).await;
    assert_eq!(
        outcome.unwrap_err(),
        "No changes made to f.txt. The replacement produced identical content. This might indicate an issue with special characters or the text not existing as expected."
    );
    let call = json!({"edits": [
        {"oldText": "a", "newText": "a"},
        {"oldText": "c", "newText": "c"},
    ]});
    let (outcome, _) = edit_file(b"abc", call).await;
    assert_eq!(
        outcome.unwrap_err(),
        "No changes made to f.txt. The replacements produced identical content."
    );
}

#[tokio::test]
async fn input_and_access_errors() {
    let dir = tempfile::tempdir().unwrap();
    let tool = tool_in(dir.path());
    for call in [
        json!({"path": "f.txt"}),
        json!({"path": "f.txt", "edits": []}),
        json!({"path": "f.txt", "edits": "not json"}),
    ] {
        assert_eq!(
            edit(&tool, call).await.unwrap_err(),
            "Edit tool input is invalid. edits must contain at least one replacement."
        );
    }
    let err = edit(&tool, json!({"path": "f.txt", "edits": [{"oldText": "a"}]}))
        .await
        .unwrap_err();
    assert!(
        err.contains("  - edits.0.newText: must have required property 'newText'"),
        "{err}"
    );
    assert_eq!(
        edit(
            &tool,
            json!({"path": "missing.txt", "edits": [{"oldText": "a", "newText": "b"}]})
        )
        .await
        .unwrap_err(),
        "Could not edit file: missing.txt. Error code: ENOENT."
    );

    let cancel = CancellationToken::new();
    cancel.cancel();
    std::fs::write(dir.path().join("f.txt"), "a").unwrap();
    let err = tool
        .run(
            args(json!({"path": "f.txt", "edits": [{"oldText": "a", "newText": "b"}]})),
            &cancel,
        )
        .await
        .unwrap_err();
    assert_eq!(err, "Operation aborted");
    assert_eq!(std::fs::read(dir.path().join("f.txt")).unwrap(), b"a");
}

#[cfg(unix)]
#[tokio::test]
async fn read_only_files_and_modes() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let tool = tool_in(dir.path());
    let script = dir.path().join("run.sh");
    std::fs::write(&script, "echo one\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o751)).unwrap();
    edit(
        &tool,
        json!({"path": "run.sh", "edits": [{"oldText": "one", "newText": "two"}]}),
    )
    .await
    .unwrap();
    assert_eq!(std::fs::read_to_string(&script).unwrap(), "echo two\n");
    let mode = std::fs::metadata(&script).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o751, "the mode survives the rename");

    // Root may write anything, so the permission error is only observable for others.
    if !rustix::process::geteuid().is_root() {
        let locked = dir.path().join("ro.txt");
        std::fs::write(&locked, "a").unwrap();
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o444)).unwrap();
        assert_eq!(
            edit(
                &tool,
                json!({"path": "ro.txt", "edits": [{"oldText": "a", "newText": "b"}]}),
            )
            .await
            .unwrap_err(),
            "Could not edit file: ro.txt. Error code: EACCES."
        );
    }
}

#[tokio::test]
async fn parallel_edits_of_one_file_all_land() {
    let dir = tempfile::tempdir().unwrap();
    let content: String = (0..8).map(|i| format!("value {i}\n")).collect();
    std::fs::write(dir.path().join("f.txt"), &content).unwrap();
    let tool = Arc::new(tool_in(dir.path()));
    let mut tasks = Vec::new();
    for i in 0..8 {
        let tool = Arc::clone(&tool);
        tasks.push(tokio::spawn(async move {
            let old_text = format!("value {i}\n");
            let new_text = format!("VALUE {i}\n");
            edit(
                &tool,
                json!({"path": "f.txt", "edits": [{"oldText": old_text, "newText": new_text}]}),
            )
            .await
            .unwrap();
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let expected: String = (0..8).map(|i| format!("VALUE {i}\n")).collect();
    assert_eq!(
        std::fs::read_to_string(dir.path().join("f.txt")).unwrap(),
        expected,
        "edits of one file run one after another, none lost"
    );
}
