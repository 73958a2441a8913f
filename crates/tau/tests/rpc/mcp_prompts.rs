//! MCP prompts as slash commands (decision T95) and secrets kept out of everything tau
//! writes (decision T96), through the binary against tau-mcp's test server.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use tau_mock_llm::{MockServer, Reply};

use crate::mcp::{http_server, http_server_with, server_entry, start, status, test_server};
use crate::{ready_tau, tau};

/// The commands `get_commands` lists whose `source` is `mcp`.
fn mcp_commands(t: &mut tau_test_kit::Tau) -> Vec<Value> {
    let listed = t.request(json!({"type": "get_commands"}));
    assert_eq!(listed["success"], true, "{listed}");
    listed["data"]["commands"]
        .as_array()
        .expect("commands")
        .iter()
        .filter(|command| command["source"] == "mcp")
        .cloned()
        .collect()
}

/// The text of the last user message of a request to the model.
fn last_user_message(body: &Value) -> String {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .rev()
        .find(|message| message["role"] == "user")
        .map(|message| message["content"].to_string())
        .unwrap_or_default()
}

#[test]
fn a_servers_prompts_are_commands_and_expand_into_the_user_message() {
    let mock = MockServer::start_background().unwrap();
    let mut t = start(&mock, json!({"test": server_entry()}), &[], |b| b);
    status(&mut t, "test", "ready");
    let commands = mcp_commands(&mut t);
    let names: Vec<&str> = commands
        .iter()
        .filter_map(|command| command["name"].as_str())
        .collect();
    assert_eq!(
        names,
        ["mcp:test:greet", "mcp:test:picture"],
        "{commands:?}"
    );
    assert_eq!(
        commands[0]["description"],
        "Greets someone (arguments: <name> [style])"
    );

    // Words fill the arguments in order; the last takes the rest.
    mock.push(Reply::text("hello Ada"));
    t.send(&json!({"id": "g", "type": "prompt", "message": "/mcp:test:greet Ada \"very warmly\" today"}));
    let response = t.response("g");
    assert_eq!(response["success"], true, "{response}");
    t.records_until("agent_settled", Duration::from_secs(30));
    let body = &mock.requests()[0].body;
    let user = last_user_message(body);
    assert!(
        user.contains("Greet Ada very warmly today.") && user.contains("I will greet them."),
        "{user}"
    );
    assert!(!user.contains("/mcp:test:greet"), "{user}");

    // A prompt's image joins the message.
    mock.push(Reply::text("a pixel"));
    t.send(&json!({"id": "p", "type": "prompt", "message": "/mcp:test:picture"}));
    assert_eq!(t.response("p")["success"], true);
    t.records_until("agent_settled", Duration::from_secs(30));
    let user = last_user_message(&mock.requests()[1].body);
    assert!(
        user.contains("Describe this pixel.") && user.contains("data:image/png;base64,iVBOR"),
        "{user}"
    );

    // A required argument missing: the prompt is refused, nothing runs.
    let refused = t.request(json!({"type": "prompt", "message": "/mcp:test:greet"}));
    assert_eq!(refused["success"], false, "{refused}");
    assert_eq!(
        refused["error"],
        "/mcp:test:greet needs the argument \"name\" (usage: /mcp:test:greet <name> [style])"
    );
    assert_eq!(mock.requests().len(), 2);
    // A name that is no prompt of a server goes to the model as typed.
    mock.push(Reply::text("ok"));
    t.send(&json!({"id": "u", "type": "prompt", "message": "/mcp:test:nothing here"}));
    assert_eq!(t.response("u")["success"], true);
    t.records_until("agent_settled", Duration::from_secs(30));
    assert!(last_user_message(&mock.requests()[2].body).contains("/mcp:test:nothing here"));
    crate::mcp::stop(t);
}

const SECRET: &str = "s3cr3t-TAU-value-4242";
const LITERAL: &str = "literal-header-token-9876";

/// Every `.jsonl` file under `dir`.
fn session_files(dir: &Path, found: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            session_files(&path, found);
        } else if path.extension().is_some_and(|ext| ext == "jsonl") {
            found.push(path);
        }
    }
}

#[test]
fn env_values_and_headers_never_reach_stdout_stderr_or_the_session_file() {
    // Also with every log line tau has (the servers' stderr lines are logged at debug).
    for log in ["warn", "debug"] {
        secrets_scenario(log);
    }
}

fn secrets_scenario(log: &str) {
    let good = http_server();
    let rejecting = http_server_with(&["--reject"]);
    let server = test_server().display().to_string();
    let servers = json!({
        // Prints its token on stderr and exits: the failure carries the stderr tail.
        "envfail": {"command": "sh", "args": ["-c", "echo \"token=$MY_TOKEN\" >&2; exit 1"],
                    "env": {"MY_TOKEN": "${MCP_SECRET}"}},
        // A command line holding the secret, which cannot start.
        "argfail": {"command": "/nonexistent/${MCP_SECRET}/server"},
        // Starts, says its token on stderr, then dies in a call.
        "okenv": {"command": "sh",
                  "args": ["-c", format!("echo \"starting with $MY_TOKEN\" >&2; exec '{server}'")],
                  "env": {"MY_TOKEN": "${MCP_SECRET}"}},
        // Answers 401 with the headers it got, secret included.
        "reject": {"url": rejecting.url, "headers": {"Authorization": "Bearer ${MCP_SECRET}",
                                                     "X-Literal": LITERAL}},
        "web": {"url": good.url, "headers": {"X-Token": "${MCP_SECRET}", "X-Literal": LITERAL}},
    });
    let mock = MockServer::start_background().unwrap();
    mock.push(Reply::new().tool_call("c1", "okenv_fail", json!({})));
    mock.push(Reply::new().tool_call("c2", "okenv_crash", json!({})));
    mock.push(Reply::new().tool_call("c3", "okenv_echo", json!({"text": "after restart"})));
    mock.push(Reply::new().tool_call("c4", "web_add", json!({"a": 1, "b": 2})));
    mock.push(Reply::new().tool_call("c5", "web_echo", json!({"text": "over http"})));
    mock.push(Reply::text("done"));
    let mut t = ready_tau(
        tau()
            .agent_file("models.json", crate::mock_models(&mock))
            .cwd_file("servers.json", json!({"mcpServers": servers}).to_string())
            .env("MCP_SECRET", SECRET)
            .env("TAU_LOG", log)
            .arg("--mcp-config")
            .arg("servers.json"),
    );
    let envfail = status(&mut t, "envfail", "failed");
    let argfail = status(&mut t, "argfail", "failed");
    let reject = status(&mut t, "reject", "failed");
    status(&mut t, "okenv", "ready");
    status(&mut t, "web", "ready");
    // The messages still say what happened, with the secret hidden.
    let message = |state: &Value| state["message"].as_str().unwrap_or_default().to_string();
    assert!(message(&envfail).contains("token=[redacted]"), "{envfail}");
    assert!(
        message(&argfail).contains("/nonexistent/[redacted]/server"),
        "{argfail}"
    );
    assert!(
        message(&reject).contains("401") && message(&reject).contains("authorization: [redacted]"),
        "{reject}"
    );

    t.send(&json!({"id": "p", "type": "prompt", "message": "go"}));
    let records = t.records_until("agent_settled", Duration::from_secs(60));
    let ends: Vec<&Value> = records
        .iter()
        .filter(|r| r["type"] == "tool_execution_end")
        .collect();
    assert_eq!(ends.len(), 5, "{ends:?}");
    assert_eq!(ends[0]["isError"], true);
    assert_eq!(ends[1]["isError"], true);
    let crashed = crate::mcp::text_of(ends[1]);
    assert!(!crashed.is_empty(), "{}", ends[1]);
    assert_eq!(ends[2]["isError"], false, "{}", ends[2]);
    assert_eq!(ends[3]["isError"], false, "{}", ends[3]);
    assert_eq!(ends[4]["isError"], false, "{}", ends[4]);
    // The dead server's last words (its stderr) are in its failed state, redacted.
    let is_died = |r: &Value| {
        r["type"] == "mcp_server_status" && r["server"] == "okenv" && r["state"] == "failed"
    };
    // Already read, or still to come on a loaded machine.
    let seen = t
        .history()
        .iter()
        .filter_map(|r| r.json.clone())
        .find(|r| is_died(r));
    let died = match seen {
        Some(died) => died,
        None => t
            .wait_for(
                "okenv's failed state",
                std::time::Duration::from_secs(20),
                |r| r.json.as_ref().is_some_and(is_died),
            )
            .json
            .expect("a JSON record"),
    };
    assert!(
        message(&died).contains("starting with [redacted]"),
        "{died}"
    );
    let listed = t.request(json!({"type": "get_mcp_servers"}));
    assert_eq!(listed["success"], true);
    let restarted = t.request(json!({"type": "restart_mcp_server", "server": "envfail"}));
    assert_eq!(restarted["success"], true);
    status(&mut t, "envfail", "failed");
    t.request(json!({"type": "get_messages"}));
    t.request(json!({"type": "get_state"}));
    t.close_stdin();
    assert!(t.wait_exit(Duration::from_secs(30)).success());

    let stdout: String = t
        .history()
        .iter()
        .map(|record| String::from_utf8_lossy(&record.raw).into_owned())
        .collect::<Vec<_>>()
        .join("\n");
    let stderr = t.stderr();
    let mut files = Vec::new();
    session_files(t.agent_dir(), &mut files);
    assert!(
        !files.is_empty(),
        "no session file under {}",
        t.agent_dir().display()
    );
    let sessions: String = files
        .iter()
        .map(|file| std::fs::read_to_string(file).unwrap_or_default())
        .collect();
    assert!(
        sessions.contains("after restart"),
        "the session file holds the run"
    );
    for secret in [SECRET, LITERAL] {
        assert!(!stdout.contains(secret), "{secret} on stdout:\n{stdout}");
        assert!(!stderr.contains(secret), "{secret} on stderr:\n{stderr}");
        assert!(!sessions.contains(secret), "{secret} in the session file");
    }
    // The failures were reported on stderr too, redacted.
    assert!(
        stderr.contains("envfail") && stderr.contains("[redacted]"),
        "{stderr}"
    );
}
