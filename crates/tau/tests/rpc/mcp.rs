//! MCP servers through the binary (issue 23, decision T90): the servers of `--mcp-config`,
//! the user's settings and a trusted project, their tools in `get_state` and in the model's
//! calls, `mcp_server_status` after `ready`, failures that stay clean, precedence, trust,
//! `--tools`, Streamable HTTP, and no process left behind. The servers are tau-mcp's test
//! server (`tau-mcp-test-server`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tau_mock_llm::{BackgroundMock, MockServer, Reply};
use tau_test_kit::{Dirs, Tau, TauBuilder};

use crate::{ready_tau, tau};

/// tau-mcp's test server, next to the tau binary. `cargo test --workspace` builds it; a
/// `cargo test -p tau` does not (it is tau-mcp's binary), so it is built here once then.
pub(crate) fn test_server() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let dir = Path::new(env!("CARGO_BIN_EXE_tau"))
                .parent()
                .expect("the binary's folder");
            let bin = dir.join("tau-mcp-test-server");
            if !bin.exists() {
                let mut build = Command::new(env!("CARGO"));
                build.args(["build", "-p", "tau-mcp", "--bin", "tau-mcp-test-server"]);
                if dir.ends_with("release") {
                    build.arg("--release");
                }
                let status = build.status().expect("run cargo build");
                assert!(
                    status.success(),
                    "cargo build of tau-mcp-test-server failed"
                );
            }
            assert!(bin.exists(), "no test server at {}", bin.display());
            bin
        })
        .clone()
}

pub(crate) fn server_entry() -> Value {
    json!({"command": test_server().display().to_string()})
}

/// A stdio entry that runs `script` in `sh` before it becomes the test server.
pub(crate) fn wrapped_entry(script: &str) -> Value {
    json!({"command": "sh", "args": ["-c", format!("{script}; exec '{}'", test_server().display())]})
}

/// A tau on the mock's model, with `servers` in an `--mcp-config` file and `args` after it.
pub(crate) fn start(
    mock: &BackgroundMock,
    servers: Value,
    args: &[&str],
    extra: impl FnOnce(TauBuilder) -> TauBuilder,
) -> Tau {
    let mut builder = extra(tau())
        .agent_file("models.json", crate::mock_models(mock))
        .cwd_file("servers.json", json!({"mcpServers": servers}).to_string())
        .arg("--no-session")
        .arg("--mcp-config")
        .arg("servers.json");
    for arg in args {
        builder = builder.arg(*arg);
    }
    ready_tau(builder)
}

/// Waits for `server` to reach `state`; the event.
pub(crate) fn status(t: &mut Tau, server: &str, state: &str) -> Value {
    let record = t.wait_for(&format!("{server} {state}"), Duration::from_secs(30), |r| {
        r.json.as_ref().is_some_and(|j| {
            j["type"] == "mcp_server_status" && j["server"] == server && j["state"] == state
        })
    });
    record.json.expect("JSON")
}

pub(crate) fn tool_names(t: &mut Tau) -> Vec<String> {
    let state = t.request(json!({"type": "get_state"}));
    state["data"]["dumpTools"]
        .as_array()
        .expect("dumpTools")
        .iter()
        .map(|tool| tool["name"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// Runs one prompt to its end; the `tool_execution_end` records, in order.
pub(crate) fn run(t: &mut Tau) -> Vec<Value> {
    t.send(&json!({"id": "p", "type": "prompt", "message": "go"}));
    t.records_until("agent_settled", Duration::from_secs(60))
        .into_iter()
        .filter(|r| r["type"] == "tool_execution_end")
        .collect()
}

pub(crate) fn text_of(result: &Value) -> String {
    result["result"]["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|block| block["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The tool names the model was offered in each request.
pub(crate) fn offered(mock: &BackgroundMock) -> Vec<Vec<String>> {
    mock.requests()
        .iter()
        .map(|request| {
            request.body["tools"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|tool| tool["function"]["name"].as_str().map(str::to_string))
                .collect()
        })
        .collect()
}

pub(crate) fn stop(mut t: Tau) -> String {
    t.close_stdin();
    assert!(t.wait_exit(Duration::from_secs(30)).success());
    t.stderr()
}

#[test]
fn a_servers_tools_are_listed_and_called_and_the_first_call_waits_for_them() {
    let mock = MockServer::start_background().unwrap();
    mock.push(Reply::new().tool_call("c1", "test_echo", json!({"text": "hello from mcp"})));
    mock.push(Reply::text("done"));
    let mut t = start(&mock, json!({"test": server_entry()}), &[], |b| b);
    // Prompted at once: the first model call waits for the server still starting.
    let ends = run(&mut t);
    assert_eq!(ends.len(), 1, "{ends:?}");
    assert_eq!(ends[0]["toolName"], "test_echo");
    assert_eq!(ends[0]["isError"], false, "{}", ends[0]);
    assert_eq!(text_of(&ends[0]), "hello from mcp");
    let offered = offered(&mock);
    assert!(
        offered[0].contains(&"test_echo".to_string()),
        "the first request already offers the server's tools: {offered:?}"
    );
    // The tool result goes back to the model.
    let second = mock.requests()[1].body.to_string();
    assert!(second.contains("hello from mcp"), "{second}");

    let names = tool_names(&mut t);
    for name in [
        "read",
        "test_echo",
        "test_add",
        "test_dotted_name",
        "test_grow",
    ] {
        assert!(names.contains(&name.to_string()), "{name} in {names:?}");
    }
    // After `ready`, each server's state: starting, then ready with its tools.
    let history: Vec<Value> = t.history().iter().filter_map(|r| r.json.clone()).collect();
    assert_eq!(history[0]["type"], "ready");
    let states: Vec<&Value> = history
        .iter()
        .filter(|r| r["type"] == "mcp_server_status")
        .collect();
    assert_eq!(states[0]["state"], "starting", "{states:?}");
    assert_eq!(states[0]["server"], "test");
    assert_eq!(states[0]["transport"], "stdio");
    let ready = states
        .iter()
        .find(|s| s["state"] == "ready")
        .expect("a ready state");
    assert!(
        ready["tools"]
            .as_array()
            .unwrap()
            .contains(&json!("dotted.name"))
    );
    assert_eq!(ready["restarts"], 0);
    assert!(ready.get("message").is_none());
    stop(t);
}

#[test]
fn a_server_that_fails_is_reported_and_a_dead_ones_tools_fail_cleanly() {
    let mock = MockServer::start_background().unwrap();
    mock.push(Reply::new().tool_call("c1", "test_crash", json!({})));
    mock.push(Reply::new().tool_call("c2", "test_echo", json!({"text": "again"})));
    mock.push(Reply::new().tool_call("c3", "fine_echo", json!({"text": "still here"})));
    mock.push(Reply::text("done"));
    let servers = json!({
        "broken": {"command": "/nonexistent/tau-mcp-server"},
        "test": server_entry(),
        "fine": server_entry(),
    });
    let mut t = start(&mock, servers, &[], |b| {
        b.agent_file(
            "settings.json",
            json!({"mcp": {"maxRestarts": 0}}).to_string(),
        )
    });
    let failed = status(&mut t, "broken", "failed");
    assert!(
        failed["message"]
            .as_str()
            .unwrap()
            .contains("/nonexistent/tau-mcp-server"),
        "{failed}"
    );
    status(&mut t, "test", "ready");
    status(&mut t, "fine", "ready");

    let ends = run(&mut t);
    assert_eq!(ends.len(), 3, "{ends:?}");
    assert_eq!(ends[0]["toolName"], "test_crash");
    assert_eq!(ends[0]["isError"], true);
    // No restarts allowed: the dead server's tool fails with the reason, the run goes on.
    assert_eq!(ends[1]["toolName"], "test_echo");
    assert_eq!(ends[1]["isError"], true);
    assert!(text_of(&ends[1]).contains("not available"), "{}", ends[1]);
    assert_eq!(ends[2]["toolName"], "fine_echo");
    assert_eq!(ends[2]["isError"], false);
    assert_eq!(text_of(&ends[2]), "still here");
    // The death was announced during the run.
    let died = t
        .history()
        .iter()
        .filter_map(|r| r.json.clone())
        .find(|r| {
            r["type"] == "mcp_server_status" && r["server"] == "test" && r["state"] == "failed"
        })
        .expect("a failed state for the dead server");
    assert!(died["message"].is_string(), "{died}");
    let stderr = stop(t);
    assert!(
        stderr.contains("/nonexistent/tau-mcp-server") && stderr.contains("broken"),
        "{stderr}"
    );
}

#[test]
fn the_command_lines_server_replaces_the_users_of_the_same_name() {
    let mock = MockServer::start_background().unwrap();
    let user = json!({"mcpServers": {"test": {"command": "/nonexistent/from-settings"}}});
    let mut t = start(&mock, json!({"test": server_entry()}), &[], |b| {
        b.agent_file("settings.json", user.to_string())
    });
    status(&mut t, "test", "ready");
    assert!(tool_names(&mut t).contains(&"test_echo".to_string()));
    let stderr = stop(t);
    assert!(!stderr.contains("from-settings"), "{stderr}");
    // And the user's entry alone is what starts without the flag.
    let mut t = ready_tau(
        tau()
            .agent_file("models.json", crate::mock_models(&mock))
            .agent_file("settings.json", user.to_string())
            .arg("--no-session"),
    );
    let failed = status(&mut t, "test", "failed");
    assert!(
        failed["message"]
            .as_str()
            .unwrap()
            .contains("from-settings")
    );
    stop(t);
}

#[test]
fn a_projects_servers_start_only_when_trusted() {
    let mock = MockServer::start_background().unwrap();
    let dirs = Dirs::new();
    let markers = [
        dirs.cwd().join("mcp-json-ran"),
        dirs.cwd().join("settings-ran"),
    ];
    let project = json!({"mcpServers": {
        "proj": wrapped_entry(&format!("touch '{}'", markers[0].display())),
    }});
    let settings = json!({"mcpServers": {
        "projset": wrapped_entry(&format!("touch '{}'", markers[1].display())),
    }});
    let builder = |approve: bool| {
        let mut builder = tau()
            .dirs(dirs.clone())
            .agent_file("models.json", crate::mock_models(&mock))
            .cwd_file(".mcp.json", project.to_string())
            .cwd_file(".pi/settings.json", settings.to_string())
            .arg("--no-session");
        if approve {
            builder = builder.arg("--approve");
        }
        builder
    };

    let mut t = ready_tau(builder(false));
    let names = tool_names(&mut t);
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        !names.iter().any(|name| name.starts_with("proj")),
        "{names:?}"
    );
    t.close_stdin();
    t.wait_exit(Duration::from_secs(20));
    assert!(
        !t.history()
            .iter()
            .any(|r| r.kind() == Some("mcp_server_status")),
        "untrusted: no server"
    );
    for marker in &markers {
        assert!(!marker.exists(), "{} ran untrusted", marker.display());
    }
    let stderr = t.stderr();
    assert!(stderr.contains(".mcp.json"), "{stderr}");

    let mut t = ready_tau(builder(true));
    status(&mut t, "proj", "ready");
    status(&mut t, "projset", "ready");
    let names = tool_names(&mut t);
    assert!(
        names.contains(&"proj_echo".to_string()) && names.contains(&"projset_echo".to_string()),
        "{names:?}"
    );
    stop(t);
    for marker in &markers {
        assert!(marker.exists(), "{} did not run trusted", marker.display());
    }
}

fn alive(pid: &str) -> bool {
    Path::new("/proc").join(pid.trim()).exists()
}

/// Waits (a little) until `file` holds a pid.
fn pid_in(file: &Path) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(text) = std::fs::read_to_string(file)
            && !text.trim().is_empty()
        {
            return text.trim().to_string();
        }
        assert!(Instant::now() < deadline, "no pid in {}", file.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn no_server_process_outlives_tau() {
    // The end of input, and SIGTERM.
    for by_signal in [false, true] {
        let mock = MockServer::start_background().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let server_pid = dir.path().join("server.pid");
        // A grandchild as `npx` leaves one: it must go with the server.
        let child_pid = dir.path().join("child.pid");
        let script = format!(
            "sleep 600 >/dev/null 2>&1 & echo $! > '{}'; echo $$ > '{}'",
            child_pid.display(),
            server_pid.display()
        );
        let mut t = start(&mock, json!({"test": wrapped_entry(&script)}), &[], |b| b);
        status(&mut t, "test", "ready");
        let (server, child) = (pid_in(&server_pid), pid_in(&child_pid));
        assert!(alive(&server) && alive(&child));
        if by_signal {
            t.signal(rustix::process::Signal::TERM);
            t.wait_exit(Duration::from_secs(30));
        } else {
            t.close_stdin();
            assert!(t.wait_exit(Duration::from_secs(30)).success());
        }
        // tau waits for its servers before it exits: nothing is left to reap.
        assert!(
            !alive(&server),
            "the server outlived tau (signal: {by_signal})"
        );
        let deadline = Instant::now() + Duration::from_secs(2);
        while alive(&child) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            !alive(&child),
            "the server's child outlived tau (signal: {by_signal})"
        );
        t.drain(Duration::from_secs(10));
        let states: Vec<Value> = t
            .history()
            .iter()
            .filter_map(|r| r.json.clone())
            .filter(|r| r["type"] == "mcp_server_status")
            .collect();
        if !by_signal {
            assert_eq!(
                states.last().map(|s| s["state"].clone()),
                Some(json!("stopped"))
            );
        }
    }
}

#[test]
fn a_tool_list_change_is_announced_and_applies_at_the_next_model_call() {
    let mock = MockServer::start_background().unwrap();
    mock.push(Reply::new().tool_call("c1", "test_grow", json!({})));
    mock.push(Reply::text("grown"));
    let mut t = start(&mock, json!({"test": server_entry()}), &[], |b| b);
    run(&mut t);
    // The server announces the change after its answer; tau lists it again at once and
    // says so.
    let grown = |t: &Tau| {
        t.history().iter().filter_map(|r| r.json.clone()).any(|r| {
            r["type"] == "mcp_server_status"
                && r["tools"]
                    .as_array()
                    .is_some_and(|tools| tools.contains(&json!("extra_1")))
        })
    };
    if !grown(&t) {
        t.wait_for("the grown tool list", Duration::from_secs(10), |r| {
            r.json.as_ref().is_some_and(|j| {
                j["type"] == "mcp_server_status"
                    && j["tools"]
                        .as_array()
                        .is_some_and(|tools| tools.contains(&json!("extra_1")))
            })
        });
    }
    assert!(tool_names(&mut t).contains(&"test_extra_1".to_string()));
    mock.push(Reply::new().tool_call("c2", "test_extra_1", json!({})));
    mock.push(Reply::text("done"));
    let ends = run(&mut t);
    let offered = offered(&mock);
    assert!(!offered[0].contains(&"test_extra_1".to_string()));
    assert!(
        offered[2].contains(&"test_extra_1".to_string()),
        "{offered:?}"
    );
    assert_eq!(ends[0]["toolName"], "test_extra_1");
    assert_eq!(text_of(&ends[0]), "extra_1", "{}", ends[0]);
    stop(t);
}

#[test]
fn tools_flag_can_name_an_mcp_tool() {
    let mock = MockServer::start_background().unwrap();
    mock.push(Reply::text("done"));
    let mut t = start(
        &mock,
        json!({"test": server_entry()}),
        &["--tools", "test_add,read"],
        |b| b,
    );
    run(&mut t);
    assert_eq!(offered(&mock)[0], ["read", "test_add"]);
    assert_eq!(tool_names(&mut t), ["read", "test_add"]);
    stop(t);
}

/// The test server over Streamable HTTP, killed when dropped.
pub(crate) struct HttpServer {
    child: std::process::Child,
    pub(crate) url: String,
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn http_server() -> HttpServer {
    http_server_with(&[])
}

/// The HTTP test server with more arguments (`--reject`).
pub(crate) fn http_server_with(extra: &[&str]) -> HttpServer {
    use std::io::BufRead;
    let mut child = Command::new(test_server())
        .args(["--http", "0"])
        .args(extra)
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the HTTP test server");
    let stdout = child.stdout.take().expect("stdout");
    let mut url = String::new();
    std::io::BufReader::new(stdout)
        .read_line(&mut url)
        .expect("the URL line");
    HttpServer {
        child,
        url: url.trim().to_string(),
    }
}

#[test]
fn a_streamable_http_server_from_settings() {
    let server = http_server();
    let mock = MockServer::start_background().unwrap();
    mock.push(Reply::new().tool_call("c1", "web_add", json!({"a": 2, "b": 40})));
    mock.push(Reply::text("done"));
    let settings = json!({"mcpServers": {"web": {
        "url": server.url, "headers": {"X-Token": "${MCP_TOKEN}"},
    }}});
    let mut t = ready_tau(
        tau()
            .agent_file("models.json", crate::mock_models(&mock))
            .agent_file("settings.json", settings.to_string())
            .env("MCP_TOKEN", "t0k3n")
            .arg("--no-session"),
    );
    let ready = status(&mut t, "web", "ready");
    assert_eq!(ready["transport"], "http");
    let ends = run(&mut t);
    assert_eq!(ends.len(), 1, "{ends:?}");
    assert_eq!(ends[0]["isError"], false, "{}", ends[0]);
    assert_eq!(
        ends[0]["result"]["details"]["structuredContent"]["sum"],
        42.0
    );
    stop(t);
}

#[test]
fn the_servers_are_listed_and_one_is_restarted_on_request() {
    let mock = MockServer::start_background().unwrap();
    let mut t = start(&mock, json!({"test": server_entry()}), &[], |b| b);
    status(&mut t, "test", "ready");
    let listed = t.request(json!({"type": "get_mcp_servers"}));
    assert_eq!(listed["success"], true, "{listed}");
    let servers = listed["data"]["servers"].as_array().expect("a list");
    assert_eq!(servers.len(), 1, "{listed}");
    assert_eq!(servers[0]["server"], "test");
    assert_eq!(servers[0]["transport"], "stdio");
    assert_eq!(servers[0]["state"], "ready");
    assert!(
        servers[0]["tools"]
            .as_array()
            .is_some_and(|tools| tools.contains(&json!("echo"))),
        "{listed}"
    );
    let restarted = t.request(json!({"type": "restart_mcp_server", "server": "test"}));
    assert_eq!(restarted["success"], true, "{restarted}");
    status(&mut t, "test", "starting");
    status(&mut t, "test", "ready");
    let unknown = t.request(json!({"type": "restart_mcp_server", "server": "nope"}));
    assert_eq!(unknown["success"], false, "{unknown}");
    assert_eq!(unknown["error"], "no MCP server is named \"nope\"");
    stop(t);
}
