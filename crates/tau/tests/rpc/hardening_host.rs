//! Security hardening (issue 28): a user's directory extension runs its own files, the Node
//! host's transpile cache is private, bash overflow logs are private and removed.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use tau_mock_llm::{MockServer, Reply};

use crate::{ready_tau, tau};

/// A Python extension (docs/extensions.md §7) registering the command `name`; it answers
/// every other request with "nothing to say" and leaves `marker` (a file name) in its working
/// directory when it starts, if given.
pub(crate) fn python_extension(name: &str, marker: Option<&str>) -> String {
    let mark = marker.map_or_else(String::new, |m| format!("open({m:?}, 'w').close()\n"));
    format!(
        r#"import json, sys
{mark}def send(frame):
    sys.stdout.write(json.dumps(frame) + "\n")
    sys.stdout.flush()
for line in sys.stdin:
    frame = json.loads(line)
    kind = frame.get("type")
    if kind in ("initialize", "reinitialize"):
        paths = frame.get("extensions", [])
        send({{"type": "response", "id": frame["id"], "result": {{"extensions": [
            {{"path": p, "manifest": {{"commands": [{{"name": {name:?}}}], "events": []}}}}
            for p in paths]}}}})
    elif kind == "shutdown":
        break
    elif "id" in frame and kind not in ("response", "cancel", "ui_response"):
        send({{"type": "response", "id": frame["id"], "result": None}})
"#
    )
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

#[test]
fn a_user_directory_extension_runs_its_own_main_py_not_the_projects() {
    // The documented example, next to a repository that ships a `main.py` of its own.
    let builder = tau()
        .arg("--no-session")
        .agent_file(
            "extensions/py/tau-extension.json",
            r#"{"command": ["python3", "main.py"]}"#,
        )
        .agent_file("extensions/py/main.py", python_extension("mine", None))
        .cwd_file("main.py", python_extension("hostile", Some("pwned")));
    let mut t = ready_tau(builder);
    let commands = t.request(json!({"type": "get_commands"}));
    let from_extensions: Vec<&Value> = commands["data"]["commands"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["source"] == "extension")
        .collect();
    assert_eq!(from_extensions.len(), 1, "{commands}");
    assert_eq!(from_extensions[0]["name"], "mine");
    let extension_dir = std::fs::canonicalize(t.agent_dir().join("extensions/py")).unwrap();
    assert_eq!(
        from_extensions[0]["sourceInfo"]["path"],
        json!(extension_dir.display().to_string())
    );
    assert!(
        !t.cwd().join("pwned").exists(),
        "the project's main.py ran as the user's extension"
    );
}

#[test]
fn the_node_hosts_transpile_cache_is_private_and_not_in_tmpdir() {
    let fixture = format!(
        "{}/tests/fixtures/extensions/tree.ts",
        env!("CARGO_MANIFEST_DIR")
    );
    let tmp = tempfile::tempdir().unwrap();
    let mut t = ready_tau(
        tau()
            .env("TMPDIR", tmp.path().display().to_string())
            .arg("--no-session")
            .arg("-e")
            .arg(fixture),
    );
    assert_eq!(t.request(json!({"type": "get_state"}))["success"], true);
    let leftovers: Vec<String> = std::fs::read_dir(tmp.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("jiti"))
        .collect();
    assert!(leftovers.is_empty(), "jiti wrote to TMPDIR: {leftovers:?}");
    let cache = t.agent_dir().join("cache/jiti");
    assert_eq!(mode(&t.agent_dir().join("cache")), 0o700);
    assert_eq!(mode(&cache), 0o700);
    let files: Vec<_> = std::fs::read_dir(&cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(
        files
            .iter()
            .any(|f| f.file_name().unwrap().to_string_lossy().contains("tree")),
        "the extension was cached: {files:?}"
    );
    for file in &files {
        assert_eq!(mode(file) & 0o077, 0, "{} is private", file.display());
    }
}

#[test]
fn the_bash_commands_overflow_log_is_private_and_removed_at_exit() {
    let tmp = tempfile::tempdir().unwrap();
    let mut t = ready_tau(tau().env("TMPDIR", tmp.path().display().to_string()));
    // 3000 lines: over the 2000-line limit, so the whole output goes to a file.
    let response = t.request(json!({"type": "bash", "command": "seq 1 3000"}));
    assert_eq!(response["data"]["truncated"], true, "{response}");
    let path = Path::new(response["data"]["fullOutputPath"].as_str().unwrap()).to_path_buf();
    assert_eq!(path.parent(), Some(tmp.path()));
    assert_eq!(mode(&path), 0o600);
    assert_eq!(
        std::fs::read_to_string(&path).unwrap().lines().count(),
        3000
    );
    t.close_stdin();
    assert!(t.wait_exit(Duration::from_secs(10)).success());
    assert!(!path.exists(), "{} left behind", path.display());
}

#[test]
fn the_bash_tools_overflow_log_is_private_and_removed_at_exit() {
    let mock = MockServer::start_background().unwrap();
    mock.push(Reply::new().tool_call("call_1", "bash", json!({"command": "seq 1 3000"})));
    mock.push(Reply::text("done"));
    let tmp = tempfile::tempdir().unwrap();
    let mut t = ready_tau(
        tau()
            .env("TMPDIR", tmp.path().display().to_string())
            .agent_file("models.json", crate::mock_models(&mock))
            .arg("--no-session"),
    );
    t.send(&json!({"id": "p", "type": "prompt", "message": "count"}));
    let end: Value = loop {
        let record = t
            .next_record(Duration::from_secs(15))
            .expect("a tool_execution_end within 15 s");
        let json = record.json.expect("JSON");
        if json["type"] == "tool_execution_end" {
            break json;
        }
    };
    let path =
        Path::new(end["result"]["details"]["fullOutputPath"].as_str().unwrap()).to_path_buf();
    assert_eq!(path.parent(), Some(tmp.path()));
    assert_eq!(mode(&path), 0o600);
    t.event("agent_end");
    t.close_stdin();
    assert!(t.wait_exit(Duration::from_secs(10)).success());
    assert!(!path.exists(), "{} left behind", path.display());
}
