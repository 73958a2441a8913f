//! The manager against the test server (`tau-mcp-test-server`) over stdio and Streamable
//! HTTP: listing, every kind of result, deadlines, cancellation, restarts, list changes and
//! shutdown without leftover processes.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use tau_agent::{AgentTool, ToolContext};
use tau_mcp::{
    HttpConfig, HttpTransport, McpManager, McpOptions, McpServer, McpTool, ServerConfig,
    ServerState, StdioConfig,
};
use tau_protocol::{AgentToolResult, UserContentBlock};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

const SERVER_BIN: &str = env!("CARGO_BIN_EXE_tau-mcp-test-server");

fn stdio(name: &str) -> McpServer {
    stdio_command(name, SERVER_BIN, &[])
}

fn stdio_command(name: &str, command: &str, args: &[&str]) -> McpServer {
    McpServer::new(
        name,
        ServerConfig::Stdio(StdioConfig {
            command: command.into(),
            args: args.iter().map(|arg| arg.to_string()).collect(),
            env: BTreeMap::new(),
            cwd: None,
            inherit_env: Default::default(),
        }),
    )
}

fn http(name: &str, url: &str) -> McpServer {
    McpServer::new(
        name,
        ServerConfig::Http(HttpConfig {
            url: url.into(),
            headers: BTreeMap::from([("X-Test".to_string(), "1".to_string())]),
            transport: HttpTransport::StreamableHttp,
            oauth_client_id: None,
        }),
    )
}

fn options(request_timeout: Duration) -> McpOptions {
    McpOptions {
        request_timeout,
        startup_timeout: Duration::from_secs(20),
        ..McpOptions::default()
    }
}

/// The test server in HTTP mode, killed when dropped.
struct HttpServer {
    _child: tokio::process::Child,
    url: String,
}

async fn http_server() -> HttpServer {
    let mut child = match tokio::process::Command::new(SERVER_BIN)
        .args(["--http", "0"])
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
    {
        Ok(child) => child,
        Err(error) => panic!("could not start the test server: {error}"),
    };
    let Some(stdout) = child.stdout.take() else {
        panic!("no stdout")
    };
    let mut lines = BufReader::new(stdout).lines();
    let url = match tokio::time::timeout(Duration::from_secs(20), lines.next_line()).await {
        Ok(Ok(Some(url))) => url,
        other => panic!("the test server printed no URL: {other:?}"),
    };
    HttpServer { _child: child, url }
}

async fn started(servers: Vec<McpServer>, options: McpOptions) -> McpManager {
    let manager = McpManager::start(servers, options);
    assert!(
        manager.wait_settled(Duration::from_secs(30)).await,
        "servers did not settle"
    );
    manager
}

async fn tool(manager: &McpManager, name: &str) -> Arc<McpTool> {
    let tools = manager.tools(Vec::<String>::new()).await;
    match tools.iter().find(|tool| tool.name() == name) {
        Some(tool) => tool.clone(),
        None => panic!(
            "no tool {name}; have {:?}",
            tools.iter().map(|t| t.name()).collect::<Vec<_>>()
        ),
    }
}

struct Outcome {
    result: Result<AgentToolResult, String>,
    updates: Vec<AgentToolResult>,
}

async fn call_with(tool: &McpTool, arguments: Value, cancel: CancellationToken) -> Outcome {
    let (sender, mut receiver) = mpsc::unbounded_channel();
    let arguments = match arguments {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    let result = tool
        .execute("call-1", arguments, ToolContext::new(cancel, sender))
        .await;
    let mut updates = Vec::new();
    while let Ok(update) = receiver.try_recv() {
        updates.push(update);
    }
    Outcome { result, updates }
}

async fn call(tool: &McpTool, arguments: Value) -> Outcome {
    call_with(tool, arguments, CancellationToken::new()).await
}

fn texts(result: &AgentToolResult) -> Vec<String> {
    result
        .content
        .iter()
        .filter_map(|block| match block {
            UserContentBlock::Text(text) => Some(text.text.clone()),
            UserContentBlock::Image(_) => None,
        })
        .collect()
}

fn ok(outcome: Outcome) -> AgentToolResult {
    match outcome.result {
        Ok(result) => result,
        Err(error) => panic!("call failed: {error}"),
    }
}

fn pid_alive(pid: u32) -> bool {
    // A zombie has exited; only its parent's bookkeeping is left.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

async fn wait_gone(pid: u32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if !pid_alive(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

async fn cancellations(manager: &McpManager, server: &str) -> (u64, Vec<String>) {
    let result = match manager.call_tool(server, "stats", Map::new()).await {
        Ok(result) => result,
        Err(error) => panic!("stats failed: {error}"),
    };
    let stats = result.structured_content.unwrap_or(Value::Null);
    let reasons = stats["reasons"]
        .as_array()
        .map(|reasons| {
            reasons
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    (stats["cancelled"].as_u64().unwrap_or(0), reasons)
}

/// Everything a model-facing caller sees, on one transport.
async fn exercise_every_tool(manager: &McpManager) {
    let status = &manager.statuses()[0];
    assert_eq!(status.state, ServerState::Ready);
    // Eleven tools in pages of three: pagination was followed.
    assert_eq!(status.tools.len(), 11, "{:?}", status.tools);

    let tools = manager.tools(["test_echo"]).await;
    let names: Vec<&str> = tools.iter().map(|tool| tool.name()).collect();
    assert!(
        names.contains(&"test_echo_2"),
        "reserved names are skipped: {names:?}"
    );
    assert!(names.contains(&"test_dotted_name"), "{names:?}");

    let echo = tool(manager, "test_echo").await;
    assert_eq!(echo.description(), "Echoes its text");
    assert_eq!(echo.parameters()["properties"]["text"]["type"], "string");
    assert_eq!(
        texts(&ok(call(&echo, json!({"text": "hello"})).await)),
        ["hello"]
    );

    let add = ok(call(&*tool(manager, "test_add").await, json!({"a": 2, "b": 3})).await);
    assert_eq!(
        add.details,
        Some(json!({"structuredContent": {"sum": 5.0}}))
    );
    assert_eq!(texts(&add), [r#"{"sum":5.0}"#]);

    let fail = call(&*tool(manager, "test_fail").await, json!({})).await;
    assert_eq!(fail.result.err().as_deref(), Some("this tool always fails"));

    let image = ok(call(&*tool(manager, "test_image").await, json!({})).await);
    assert!(
        matches!(&image.content[1], UserContentBlock::Image(image) if image.mime_type == "image/png" && !image.data.is_empty())
    );

    let resource = ok(call(&*tool(manager, "test_resource").await, json!({})).await);
    assert_eq!(texts(&resource), ["resource text"]);

    let bare = tool(manager, "test_bare").await;
    assert_eq!(bare.parameters()["type"], "object");
    assert_eq!(texts(&ok(call(&bare, json!({})).await)), ["bare"]);

    let dotted = tool(manager, "test_dotted_name").await;
    assert_eq!(dotted.remote_name(), "dotted.name");
    assert_eq!(texts(&ok(call(&dotted, json!({})).await)), ["dotted.name"]);

    let slow = call(&*tool(manager, "test_slow").await, json!({"ms": 300})).await;
    assert!(!slow.updates.is_empty(), "no progress updates");
    assert_eq!(
        slow.updates
            .last()
            .and_then(|u| u.details.clone())
            .map(|d| d["total"].clone()),
        Some(json!(10.0))
    );
    assert_eq!(texts(&ok(slow)), ["slept 300 ms"]);
}

async fn cancels_on_abort(manager: &McpManager) {
    let slow = tool(manager, "test_slow").await;
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        trigger.cancel();
    });
    let started = Instant::now();
    let outcome = call_with(&slow, json!({"ms": 10_000}), cancel).await;
    assert_eq!(outcome.result.err().as_deref(), Some("Operation aborted"));
    assert!(started.elapsed() < Duration::from_secs(3));
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (count, reasons) = cancellations(manager, "test").await;
        if count >= 1 {
            assert!(
                reasons.contains(&"aborted by the user".to_string()),
                "{reasons:?}"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the server got no notifications/cancelled"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn grows(manager: &McpManager) {
    assert!(
        manager
            .tools(Vec::<String>::new())
            .await
            .iter()
            .all(|tool| tool.name() != "test_extra_1")
    );
    ok(call(&*tool(manager, "test_grow").await, json!({})).await);
    // The notification travels on its own; the next listing after it sees the new tool.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let tools = manager.tools(Vec::<String>::new()).await;
        if let Some(extra) = tools.iter().find(|tool| tool.name() == "test_extra_1") {
            assert_eq!(texts(&ok(call(extra, json!({})).await)), ["extra_1"]);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "tools/list_changed was not applied"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn stdio_every_tool() {
    let manager = started(vec![stdio("test")], options(Duration::from_secs(20))).await;
    exercise_every_tool(&manager).await;
    manager.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn http_every_tool() {
    let server = http_server().await;
    let manager = started(
        vec![http("test", &server.url)],
        options(Duration::from_secs(20)),
    )
    .await;
    assert_eq!(manager.statuses()[0].transport, "http");
    exercise_every_tool(&manager).await;
    manager.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn stdio_cancellation() {
    let manager = started(vec![stdio("test")], options(Duration::from_secs(20))).await;
    cancels_on_abort(&manager).await;
    manager.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn http_cancellation() {
    let server = http_server().await;
    let manager = started(
        vec![http("test", &server.url)],
        options(Duration::from_secs(20)),
    )
    .await;
    cancels_on_abort(&manager).await;
    manager.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn stdio_list_changed() {
    let manager = started(vec![stdio("test")], options(Duration::from_secs(20))).await;
    grows(&manager).await;
    manager.shutdown().await;
}

/// The synchronous snapshot follows `tools/list_changed` by itself (nobody calls `tools()`),
/// and the relisting is announced as a status change carrying the new tool.
#[tokio::test(flavor = "multi_thread")]
async fn the_snapshot_follows_list_changes_on_its_own() {
    let manager = started(vec![stdio("test")], options(Duration::from_secs(20))).await;
    let names = |manager: &McpManager| -> Vec<String> {
        manager
            .current_tools(Vec::<String>::new())
            .iter()
            .map(|tool| tool.name().to_string())
            .collect()
    };
    assert!(names(&manager).contains(&"test_echo".to_string()));
    assert!(!names(&manager).contains(&"test_extra_1".to_string()));
    let mut events = manager.subscribe();
    let grow = match manager
        .current_tools(Vec::<String>::new())
        .into_iter()
        .find(|tool| tool.name() == "test_grow")
    {
        Some(tool) => tool,
        None => panic!("no test_grow"),
    };
    ok(call(&grow, json!({})).await);
    let announced = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match events.recv().await {
                Ok(status) if status.tools.iter().any(|tool| tool == "extra_1") => return status,
                Ok(_) => {}
                Err(error) => panic!("no status: {error}"),
            }
        }
    })
    .await;
    let status = match announced {
        Ok(status) => status,
        Err(_) => panic!("no status change announced the new tool"),
    };
    assert_eq!(status.state, ServerState::Ready);
    assert!(names(&manager).contains(&"test_extra_1".to_string()));
    assert!(!manager.any_starting());
    manager.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn http_list_changed() {
    let server = http_server().await;
    let manager = started(
        vec![http("test", &server.url)],
        options(Duration::from_secs(20)),
    )
    .await;
    grows(&manager).await;
    manager.shutdown().await;
}

async fn deadline_cancels(manager: &McpManager) {
    let slow = tool(manager, "test_slow").await;
    let started = Instant::now();
    let outcome = call(&slow, json!({"ms": 10_000})).await;
    let error = outcome.result.err().unwrap_or_default();
    assert!(error.contains("timed out after 500 ms"), "{error}");
    assert!(started.elapsed() < Duration::from_secs(3));
    // The server was told to stop; it is still usable.
    let deadline = Instant::now() + Duration::from_secs(5);
    while cancellations(manager, "test").await.0 == 0 {
        assert!(
            Instant::now() < deadline,
            "no notifications/cancelled after the deadline"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn stdio_deadline() {
    let manager = started(vec![stdio("test")], options(Duration::from_millis(500))).await;
    deadline_cancels(&manager).await;
    manager.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn http_deadline() {
    let server = http_server().await;
    let manager = started(
        vec![http("test", &server.url)],
        options(Duration::from_millis(500)),
    )
    .await;
    deadline_cancels(&manager).await;
    manager.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crashed_server_is_restarted_at_most_three_times() {
    let manager = started(vec![stdio("test")], options(Duration::from_secs(20))).await;
    let crash = tool(&manager, "test_crash").await;
    let echo = tool(&manager, "test_echo").await;
    for restart in 1..=3u32 {
        let Some(pid) = manager.statuses()[0].pid else {
            panic!("no pid")
        };
        let crashed = call(&crash, json!({})).await;
        let error = crashed.result.err().unwrap_or_default();
        assert!(error.contains("closed the connection"), "{error}");
        assert!(wait_gone(pid).await, "crashed server {pid} still there");
        // The death is reported without a call.
        let deadline = Instant::now() + Duration::from_secs(5);
        while !matches!(manager.statuses()[0].state, ServerState::Failed { .. }) {
            assert!(
                Instant::now() < deadline,
                "death not reported: {:?}",
                manager.statuses()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // The next call starts it again.
        assert_eq!(
            texts(&ok(call(&echo, json!({"text": "again"})).await)),
            ["again"]
        );
        let status = &manager.statuses()[0];
        assert_eq!(status.restarts, restart);
        assert_ne!(status.pid, Some(pid));
    }
    let crashed = call(&crash, json!({})).await;
    assert!(crashed.result.is_err());
    let refused = call(&echo, json!({"text": "once more"})).await;
    let error = refused.result.err().unwrap_or_default();
    assert!(
        error.contains("not restarted again after 3 restarts"),
        "{error}"
    );

    // An explicit restart starts counting again.
    assert_eq!(manager.restart("test").await, Ok(()));
    assert_eq!(
        texts(&ok(call(&echo, json!({"text": "back"})).await)),
        ["back"]
    );
    assert_eq!(manager.statuses()[0].restarts, 0);
    manager.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn shutdown_leaves_no_process() {
    let manager = started(
        vec![stdio("one"), stdio("two")],
        options(Duration::from_secs(20)),
    )
    .await;
    let pids: Vec<u32> = manager
        .statuses()
        .iter()
        .filter_map(|status| status.pid)
        .collect();
    assert_eq!(pids.len(), 2);
    assert!(pids.iter().all(|pid| pid_alive(*pid)));
    manager.shutdown().await;
    // Gone when shutdown returns, not some time later.
    for pid in &pids {
        assert!(!pid_alive(*pid), "{pid} survived shutdown");
    }
    assert!(
        manager
            .statuses()
            .iter()
            .all(|status| status.state == ServerState::Stopped)
    );
    let refused = manager.call_tool("one", "echo", Map::new()).await;
    assert!(refused.is_err_and(|error| error.contains("shut down")));
}

#[tokio::test(flavor = "multi_thread")]
async fn dropping_the_manager_kills_its_processes() {
    // `sh` stays as the parent, as `npx` does: the server proper is a grandchild.
    let script = format!("'{SERVER_BIN}'; true");
    let manager = started(
        vec![stdio_command("test", "sh", &["-c", &script])],
        options(Duration::from_secs(20)),
    )
    .await;
    let tools = manager.tools(Vec::<String>::new()).await;
    let Some(pid) = manager.statuses()[0].pid else {
        panic!("no pid")
    };
    let stats = match manager.call_tool("test", "stats", Map::new()).await {
        Ok(result) => result.structured_content.unwrap_or(Value::Null),
        Err(error) => panic!("stats failed: {error}"),
    };
    let Some(grandchild) = stats["pid"]
        .as_u64()
        .and_then(|pid| u32::try_from(pid).ok())
    else {
        panic!("no pid in {stats}")
    };
    assert_ne!(grandchild, pid);
    drop(tools);
    drop(manager);
    assert!(wait_gone(pid).await, "{pid} survived the manager");
    assert!(
        wait_gone(grandchild).await,
        "grandchild {grandchild} survived the manager"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_waits_for_a_server_still_starting() {
    let script = format!("sleep 1; exec '{SERVER_BIN}'");
    let manager = McpManager::start(
        vec![stdio_command("test", "sh", &["-c", &script])],
        options(Duration::from_secs(20)),
    );
    assert_eq!(manager.statuses()[0].state, ServerState::Starting);
    let mut arguments = Map::new();
    arguments.insert("text".into(), json!("waited"));
    let result = manager.call_tool("test", "echo", arguments.clone()).await;
    assert_eq!(result.map(|r| r.content.len()), Ok(1));
    manager.shutdown().await;

    // With a deadline shorter than the start, the call gives up.
    let manager = McpManager::start(
        vec![stdio_command("test", "sh", &["-c", &script])],
        options(Duration::from_millis(200)),
    );
    let error = manager
        .call_tool("test", "echo", arguments)
        .await
        .err()
        .unwrap_or_default();
    assert!(error.contains("still starting"), "{error}");
    manager.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn failures_to_start_are_reported_per_server() {
    let manager = started(
        vec![
            stdio_command("missing", "/nonexistent/tau-mcp-server", &[]),
            stdio_command("quits", "sh", &["-c", "echo 'no config here' >&2; exit 1"]),
            http("refused", "http://127.0.0.1:9/mcp"),
            stdio("fine"),
        ],
        options(Duration::from_secs(5)),
    )
    .await;
    let statuses = manager.statuses();
    let message = |index: usize| match &statuses[index].state {
        ServerState::Failed { message } => message.clone(),
        other => panic!("{} is {other:?}", statuses[index].name),
    };
    assert!(message(0).contains("could not start"), "{}", message(0));
    assert!(message(1).contains("no config here"), "{}", message(1));
    assert!(
        message(2).contains("initialization failed"),
        "{}",
        message(2)
    );
    assert_eq!(statuses[3].state, ServerState::Ready);
    // Only the server that started has tools.
    let tools = manager.tools(Vec::<String>::new()).await;
    assert!(tools.iter().all(|tool| tool.server_name() == "fine"));
    manager.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dropped_call_is_cancelled_at_the_server() {
    let manager = started(vec![stdio("test")], options(Duration::from_secs(20))).await;
    let slow = tool(&manager, "test_slow").await;
    let dropped = tokio::time::timeout(
        Duration::from_millis(200),
        call(&slow, json!({"ms": 10_000})),
    )
    .await;
    assert!(dropped.is_err());
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (_, reasons) = cancellations(&manager, "test").await;
        if reasons.contains(&"request abandoned".to_string()) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no notifications/cancelled for a dropped call: {reasons:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    manager.shutdown().await;
}
