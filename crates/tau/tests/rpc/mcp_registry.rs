//! Real MCP servers from npm, pinned in `fixtures/mcp-servers` (package.json and its lockfile;
//! `npm ci` there installs them before the tests, as `scripts/test.sh` does for the Node
//! extension host): `@modelcontextprotocol/server-everything` and `server-filesystem`. The
//! mock model calls each kind of tool (text, image, error, embedded resource, structured
//! content, progress) and each result must reach the model's next request; the servers'
//! prompts are commands. Without the installed packages each test says so and passes.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};
use tau_mock_llm::{MockServer, Reply};

use crate::mcp::{start, status, stop, text_of};

const INSTALL: &str = "npm ci --no-audit --no-fund --loglevel=error";

/// `fixtures/mcp-servers/node_modules`, or `None` (with a message) when not installed.
pub(crate) fn installed() -> Option<PathBuf> {
    let modules = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/mcp-servers/node_modules/@modelcontextprotocol");
    if modules.join("server-everything/dist/index.js").is_file()
        && modules.join("server-filesystem/dist/index.js").is_file()
    {
        Some(modules)
    } else {
        eprintln!(
            "skipped: the pinned MCP servers are not installed; run `{INSTALL}` in \
             crates/tau/tests/fixtures/mcp-servers"
        );
        None
    }
}

/// server-everything over stdio, run by node.
pub(crate) fn everything_entry(modules: &std::path::Path) -> Value {
    let script = modules.join("server-everything/dist/index.js");
    json!({"command": "node", "args": [script.display().to_string(), "stdio"]})
}

fn with_roots_off(mut entry: Value) -> Value {
    entry["roots"] = json!(false);
    entry
}

pub(crate) fn filesystem_entry(modules: &std::path::Path, root: &std::path::Path) -> Value {
    let script = modules.join("server-filesystem/dist/index.js");
    json!({"command": "node", "args": [script.display().to_string(), root.display().to_string()]})
}

/// The `role: "tool"` message answering `call` in a request body, as sent.
fn tool_message(body: &Value, call: &str) -> String {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|message| message["role"] == "tool" && message["tool_call_id"] == call)
        .map(Value::to_string)
        .unwrap_or_default()
}

/// The start of server-everything's tiny PNG (`get-tiny-image`).
const TINY_PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAABQAAAAUCAYAAACNiR0NAAAKsGlDQ1BJQ0MgUHJvZmlsZQAA";

#[test]
fn server_everything_each_kind_of_result_reaches_the_next_request() {
    let Some(modules) = installed() else {
        return;
    };
    let mock = MockServer::start_background().unwrap();
    let calls = [
        (
            "c1",
            "everything_echo",
            json!({"message": "hello everything"}),
        ),
        ("c2", "everything_get-tiny-image", json!({})),
        (
            "c3",
            // Valid for the schema, refused by the server: an `isError` result.
            "everything_get-resource-reference",
            json!({"resourceType": "Text", "resourceId": 0}),
        ),
        (
            "c4",
            "everything_get-resource-reference",
            json!({"resourceType": "Text", "resourceId": 2}),
        ),
        (
            "c5",
            "everything_trigger-long-running-operation",
            json!({"duration": 0.3, "steps": 3}),
        ),
        (
            "c6",
            "everything_get-structured-content",
            json!({"location": "Chicago"}),
        ),
    ];
    for (id, tool, arguments) in &calls {
        mock.push(Reply::new().tool_call(*id, *tool, arguments.clone()));
    }
    mock.push(Reply::text("done"));
    let mut t = start(
        &mock,
        json!({"everything": everything_entry(&modules)}),
        &[],
        |b| b,
    );
    let ready = status(&mut t, "everything", "ready");
    assert!(
        ready["tools"]
            .as_array()
            .unwrap()
            .contains(&json!("get-tiny-image")),
        "{ready}"
    );
    t.send(&json!({"id": "p", "type": "prompt", "message": "go"}));
    let records = t.records_until("agent_settled", Duration::from_secs(60));
    let ends: Vec<&Value> = records
        .iter()
        .filter(|r| r["type"] == "tool_execution_end")
        .collect();
    let names: Vec<&str> = ends.iter().filter_map(|e| e["toolName"].as_str()).collect();
    assert_eq!(
        names,
        calls.iter().map(|(_, tool, _)| *tool).collect::<Vec<_>>()
    );
    let errors: Vec<bool> = ends.iter().map(|e| e["isError"] == true).collect();
    assert_eq!(
        errors,
        [false, false, true, false, false, false],
        "{ends:?}"
    );
    assert_eq!(text_of(ends[0]), "Echo: hello everything");
    // The image is an image block of the result.
    assert!(
        ends[1]["result"]["content"]
            .as_array()
            .unwrap()
            .iter()
            .any(|block| block["type"] == "image" && block["mimeType"] == "image/png"),
        "{}",
        ends[1]
    );
    // Progress came as updates while the long operation ran.
    let updates: Vec<&Value> = records
        .iter()
        .filter(|r| r["type"] == "tool_execution_update" && r["toolCallId"] == "c5")
        .collect();
    assert!(updates.len() >= 2, "{updates:?}");
    assert_eq!(updates[0]["partialResult"]["details"]["total"], 3.0);
    assert_eq!(
        ends[5]["result"]["details"]["structuredContent"]["conditions"], "Light rain / drizzle",
        "{}",
        ends[5]
    );

    // Each result is in the request that follows its call.
    let requests = mock.requests();
    assert_eq!(requests.len(), calls.len() + 1);
    let echoed = tool_message(&requests[1].body, "c1");
    assert!(echoed.contains("Echo: hello everything"), "{echoed}");
    assert!(
        requests[2].body.to_string().contains(TINY_PNG),
        "the image reaches the model"
    );
    let failed = tool_message(&requests[3].body, "c3");
    assert!(failed.contains("Invalid resourceId: 0"), "{failed}");
    // The embedded resource's text, between the server's two text blocks.
    let resource = tool_message(&requests[4].body, "c4");
    assert!(
        resource.contains("Returning resource reference for Resource 2")
            && resource.contains("Resource 2: This is a plaintext resource created at"),
        "{resource}"
    );
    let long = tool_message(&requests[5].body, "c5");
    assert!(long.contains("Long running operation completed"), "{long}");
    let structured = tool_message(&requests[6].body, "c6");
    assert!(structured.contains("Light rain / drizzle"), "{structured}");
    stop(t);
}

#[test]
fn server_everythings_prompts_are_commands() {
    let Some(modules) = installed() else {
        return;
    };
    let mock = MockServer::start_background().unwrap();
    mock.push(Reply::text("sunny"));
    let mut t = start(
        &mock,
        json!({"everything": everything_entry(&modules)}),
        &[],
        |b| b,
    );
    status(&mut t, "everything", "ready");
    let names = crate::command_names(&mut t);
    for name in ["mcp:everything:simple-prompt", "mcp:everything:args-prompt"] {
        assert!(names.contains(&name.to_string()), "{name} in {names:?}");
    }
    t.send(&json!({"id": "a", "type": "prompt", "message": "/mcp:everything:args-prompt Paris France"}));
    assert_eq!(t.response("a")["success"], true);
    t.records_until("agent_settled", Duration::from_secs(30));
    let body = mock.requests()[0].body.to_string();
    assert!(body.contains("What's weather in Paris, France?"), "{body}");
    stop(t);
}

#[test]
fn server_filesystem_reads_lists_and_refuses_outside_its_root() {
    let Some(modules) = installed() else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let root_path = std::fs::canonicalize(root.path()).unwrap();
    std::fs::write(root_path.join("note.txt"), "the note's text").unwrap();
    let note = root_path.join("note.txt").display().to_string();
    let mock = MockServer::start_background().unwrap();
    mock.push(Reply::new().tool_call("r1", "fs_read_text_file", json!({"path": note})));
    mock.push(Reply::new().tool_call(
        "r2",
        "fs_list_directory",
        json!({"path": root_path.display().to_string()}),
    ));
    mock.push(Reply::new().tool_call("r3", "fs_read_text_file", json!({"path": "/etc/hostname"})));
    mock.push(Reply::text("done"));
    let mut t = start(
        &mock,
        // Its own folder, not the working folder offered as a root (which it would take
        // in place of the folders it was given).
        json!({"fs": with_roots_off(filesystem_entry(&modules, &root_path))}),
        &[],
        |b| b,
    );
    status(&mut t, "fs", "ready");
    t.send(&json!({"id": "p", "type": "prompt", "message": "go"}));
    let records = t.records_until("agent_settled", Duration::from_secs(60));
    let ends: Vec<&Value> = records
        .iter()
        .filter(|r| r["type"] == "tool_execution_end")
        .collect();
    assert_eq!(ends.len(), 3, "{ends:?}");
    assert_eq!(ends[0]["isError"], false, "{}", ends[0]);
    assert_eq!(ends[1]["isError"], false, "{}", ends[1]);
    assert_eq!(ends[2]["isError"], true, "{}", ends[2]);
    let requests = mock.requests();
    assert!(tool_message(&requests[1].body, "r1").contains("the note's text"));
    assert!(tool_message(&requests[2].body, "r2").contains("[FILE] note.txt"));
    let refused = tool_message(&requests[3].body, "r3");
    assert!(refused.contains("Access denied"), "{refused}");
    stop(t);
}
