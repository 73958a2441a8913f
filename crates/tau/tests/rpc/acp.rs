//! Black-box tests of `tau --mode acp`: the binary spawned with the Agent Client Protocol on
//! its pipes, spoken as JSON-RPC lines by the small client below, against tau-mock-llm.
//! (tau-test-kit's reader checks records against the RPC schema, so ACP has its own.)

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ExitStatus};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tau_mock_llm::{BackgroundMock, MockServer, Reply};
use tau_test_kit::{Dirs, TauBuilder};

use crate::{mock_models, tau};

/// A builder for `tau --mode acp` (more arguments may follow).
pub(crate) fn acp_tau() -> TauBuilder {
    tau().raw_args(["--mode", "acp"])
}

pub(crate) const WAIT: Duration = Duration::from_secs(20);

/// A running `tau --mode acp` and what it has written.
pub(crate) struct Acp {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Value>,
    /// Read while waiting for something else, in order.
    unread: VecDeque<Value>,
    next_id: u64,
    pub(crate) dirs: Dirs,
    /// Answers tau's `fs/*` and `terminal/*` requests as they arrive (method, params -> result
    /// or error).
    pub(crate) editor: Option<Editor>,
}

pub(crate) type Editor = Box<dyn FnMut(&str, &Value) -> Result<Value, Value>>;

impl Acp {
    pub(crate) fn spawn(builder: TauBuilder) -> Self {
        let (mut child, dirs) = builder.spawn_raw();
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("tau wrote a line that is not JSON ({e}): {line}"));
                if tx.send(value).is_err() {
                    break;
                }
            }
        });
        // Drained so tau never blocks on a full stderr pipe.
        if let Some(mut stderr) = child.stderr.take() {
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut stderr, &mut std::io::sink());
            });
        }
        Self {
            child,
            stdin,
            lines,
            unread: VecDeque::new(),
            next_id: 0,
            dirs,
            editor: None,
        }
    }

    pub(crate) fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line.as_bytes()).expect("write to tau");
        stdin.write_all(b"\n").expect("write to tau");
        stdin.flush().expect("flush");
    }

    pub(crate) fn send(&mut self, value: &Value) {
        self.send_raw(&value.to_string());
    }

    /// Sends a request and returns its id.
    pub(crate) fn start(&mut self, method: &str, params: Value) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    pub(crate) fn notify(&mut self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    pub(crate) fn next(&mut self, timeout: Duration) -> Option<Value> {
        if let Some(value) = self.unread.pop_front() {
            return Some(value);
        }
        let value = self.lines.recv_timeout(timeout).ok()?;
        let method = value["method"].as_str().unwrap_or_default().to_string();
        if (method.starts_with("fs/") || method.starts_with("terminal/"))
            && let Some(editor) = self.editor.as_mut()
        {
            let answer = match editor(&method, &value["params"]) {
                Ok(result) => json!({"jsonrpc": "2.0", "id": value["id"], "result": result}),
                Err(error) => json!({"jsonrpc": "2.0", "id": value["id"], "error": error}),
            };
            self.send(&answer);
        }
        Some(value)
    }

    /// Everything up to and including the response to `id` (notifications before it, in
    /// order, then the response last).
    pub(crate) fn until_response(&mut self, id: u64) -> Vec<Value> {
        let deadline = Instant::now() + WAIT;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let value = self
                .next(left)
                .unwrap_or_else(|| panic!("no response to {id}; saw {seen:#?}"));
            let done = value.get("id") == Some(&json!(id)) && value.get("method").is_none();
            seen.push(value);
            if done {
                return seen;
            }
        }
    }

    /// The response to `id` (what came before it is dropped).
    pub(crate) fn response(&mut self, id: u64) -> Value {
        self.until_response(id).pop().expect("a response")
    }

    pub(crate) fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.start(method, params);
        self.response(id)
    }

    /// The first notification of `method` whose params satisfy `pick`; others are kept.
    pub(crate) fn wait_notification(&mut self, pick: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + WAIT;
        let mut skipped = VecDeque::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Some(value) = self.next(left) else {
                panic!("the notification did not come; saw {skipped:#?}");
            };
            if pick(&value) {
                skipped.extend(self.unread.drain(..));
                self.unread = skipped;
                return value;
            }
            skipped.push_back(value);
        }
    }

    pub(crate) fn initialize(&mut self) -> Value {
        self.initialize_with(json!({}))
    }

    pub(crate) fn initialize_with(&mut self, capabilities: Value) -> Value {
        let response = self.request(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": capabilities}),
        );
        assert!(response.get("result").is_some(), "{response}");
        response["result"].clone()
    }

    pub(crate) fn cwd(&self) -> String {
        self.dirs.cwd().display().to_string()
    }

    /// `session/new` in tau's working directory; the session id.
    pub(crate) fn new_session(&mut self) -> String {
        let cwd = self.cwd();
        let response = self.request("session/new", json!({"cwd": cwd, "mcpServers": []}));
        response["result"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session id: {response}"))
            .to_string()
    }

    pub(crate) fn close(mut self) -> ExitStatus {
        self.stdin = None;
        self.wait_exit()
    }

    pub(crate) fn wait_exit(&mut self) -> ExitStatus {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            assert!(Instant::now() < deadline, "tau did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub(crate) fn alive(&mut self) -> bool {
        self.child.try_wait().expect("wait").is_none()
    }
}

impl Drop for Acp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A mock and an ACP tau whose one model (`mock/mock-1`) it serves.
pub(crate) fn setup() -> (BackgroundMock, Acp) {
    setup_with(|b| b)
}

pub(crate) fn setup_with(extra: impl FnOnce(TauBuilder) -> TauBuilder) -> (BackgroundMock, Acp) {
    let mock = MockServer::start_background().expect("mock");
    let builder = extra(acp_tau().agent_file("models.json", mock_models(&mock)));
    let mut acp = Acp::spawn(builder);
    acp.initialize();
    (mock, acp)
}

/// The `session/update` payloads among `values`, with their `sessionUpdate` kind.
pub(crate) fn updates(values: &[Value]) -> Vec<&Value> {
    values
        .iter()
        .filter(|v| v["method"] == "session/update")
        .map(|v| &v["params"]["update"])
        .collect()
}

pub(crate) fn kind_of(update: &Value) -> &str {
    update["sessionUpdate"].as_str().unwrap_or_default()
}

/// The text of every chunk of `kind`, joined.
pub(crate) fn chunks(values: &[Value], kind: &str) -> String {
    updates(values)
        .into_iter()
        .filter(|u| kind_of(u) == kind)
        .map(|u| u["content"]["text"].as_str().unwrap_or_default())
        .collect()
}

/// What the client shows of the call `id` by the time it runs: its `tool_call` (announced as
/// the model starts writing it) with the `tool_call_update`s before it goes `in_progress`
/// laid over it, field by field, as a client keeps a call.
pub(crate) fn shown_before_running(all: &[&Value], id: &str) -> Value {
    let mut shown = serde_json::Map::new();
    for update in all.iter().filter(|u| u["toolCallId"] == id) {
        if kind_of(update) == "tool_call_update" && update["status"] == "in_progress" {
            break;
        }
        if let Some(fields) = update.as_object() {
            shown.extend(fields.clone());
        }
    }
    assert!(!shown.is_empty(), "no tool_call {id}");
    Value::Object(shown)
}

pub(crate) fn prompt(acp: &mut Acp, session: &str, text: &str) -> u64 {
    acp.start(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
    )
}

#[test]
fn acp_initialize_advertises_capabilities_and_tau_s_ways_to_a_key() {
    let mock = MockServer::start_background().expect("mock");
    let mut acp = Acp::spawn(acp_tau().agent_file("models.json", mock_models(&mock)));
    let result = acp.initialize();
    assert_eq!(result["protocolVersion"], 1);
    let caps = &result["agentCapabilities"];
    assert_eq!(caps["loadSession"], true);
    assert_eq!(caps["promptCapabilities"]["image"], true);
    assert_eq!(caps["promptCapabilities"]["embeddedContext"], true);
    assert_eq!(caps["mcpCapabilities"]["http"], true);
    assert!(caps["sessionCapabilities"]["list"].is_object(), "{caps}");
    let ids: Vec<&str> = result["authMethods"]
        .as_array()
        .expect("authMethods")
        .iter()
        .map(|m| m["id"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(ids, ["env", "auth-json"]);
    assert_eq!(result["agentInfo"]["name"], "tau");
    assert_eq!(result["agentInfo"]["version"], env!("CARGO_PKG_VERSION"));
    assert!(acp.close().success());
}

#[test]
fn acp_without_a_model_asks_for_a_key_with_a_clear_error() {
    let mut acp = Acp::spawn(acp_tau());
    acp.initialize();
    let cwd = acp.cwd();
    let response = acp.request("session/new", json!({"cwd": cwd, "mcpServers": []}));
    assert_eq!(response["error"]["code"], -32000, "{response}");
    let message = response["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("ANTHROPIC_API_KEY"), "{message}");
    assert!(message.contains("auth.json"), "{message}");
    let auth = acp.request("authenticate", json!({"methodId": "env"}));
    assert_eq!(auth["error"]["code"], -32000, "{auth}");
}

#[test]
fn acp_prompt_streams_thought_and_message_chunks_then_ends_the_turn() {
    let (mock, mut acp) = setup();
    let cwd = acp.cwd();
    let id = acp.start("session/new", json!({"cwd": cwd, "mcpServers": []}));
    let response = acp.response(id);
    let session = response["result"]["sessionId"]
        .as_str()
        .expect("id")
        .to_string();
    let model = &response["result"]["configOptions"][0];
    assert_eq!(model["id"], "model");
    assert_eq!(model["currentValue"], "mock/mock-1");
    // The commands follow the answer.
    let commands = acp.wait_notification(|v| {
        v["params"]["update"]["sessionUpdate"] == "available_commands_update"
    });
    assert_eq!(commands["params"]["sessionId"], session.as_str());

    mock.push(
        Reply::new()
            .thinking("let me think")
            .text_chunks(["Hel", "lo", " there"])
            .usage(1200, 30, 0, 0),
    );
    let id = prompt(&mut acp, &session, "hi");
    let seen = acp.until_response(id);
    let response = seen.last().expect("response");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(chunks(&seen, "agent_message_chunk"), "Hello there");
    assert_eq!(chunks(&seen, "agent_thought_chunk"), "let me think");
    let texts: Vec<&str> = updates(&seen)
        .into_iter()
        .filter(|u| kind_of(u) == "agent_message_chunk")
        .map(|u| u["content"]["text"].as_str().unwrap_or_default())
        .collect();
    assert!(
        texts.len() >= 3,
        "streamed as deltas, not at once: {texts:?}"
    );
    for value in &seen[..seen.len() - 1] {
        assert_eq!(value["params"]["sessionId"], session.as_str(), "{value}");
    }
    let usage = updates(&seen)
        .into_iter()
        .find(|u| kind_of(u) == "usage_update")
        .expect("usage");
    assert_eq!(usage["used"], 1230);
    assert_eq!(usage["size"], 100_000);
    // The model got the prompt's text.
    let body = mock.requests()[0].body.to_string();
    assert!(body.contains("\"hi\""), "{body}");
}

#[test]
fn acp_edit_is_a_tool_call_with_a_diff_and_bash_output_comes_as_content() {
    // What the editor is shown of tools, without permission requests (asked about below).
    let (mock, mut acp) = setup_with(|b| {
        b.cwd_file("notes.txt", "one\nold line\n")
            .arg("--permission-mode")
            .arg("allowAll")
    });
    let session = acp.new_session();
    mock.push(Reply::new().tool_call(
        "call_1",
        "edit",
        json!({"path": "notes.txt", "edits": [{"oldText": "old line", "newText": "new line"}]}),
    ));
    mock.push(Reply::new().tool_call(
        "call_2",
        "bash",
        json!({"command": "echo from-bash; sleep 0.5; echo later"}),
    ));
    mock.push(Reply::text("done"));
    let id = prompt(&mut acp, &session, "change it");
    let seen = acp.until_response(id);
    assert_eq!(
        seen.last().expect("response")["result"]["stopReason"],
        "end_turn"
    );
    let all = updates(&seen);
    let path = format!("{}/notes.txt", acp.cwd());

    let edit = shown_before_running(&all, "call_1");
    assert_eq!(edit["kind"], "edit");
    assert_eq!(edit["title"], "Edit notes.txt");
    assert_eq!(edit["locations"][0]["path"], path.as_str());
    assert_eq!(edit["rawInput"]["path"], "notes.txt");
    assert_eq!(
        edit["content"],
        json!([{"type": "diff", "path": path, "oldText": "old line", "newText": "new line"}])
    );
    let done = all
        .iter()
        .find(|u| {
            kind_of(u) == "tool_call_update"
                && u["toolCallId"] == "call_1"
                && u["status"] == "completed"
        })
        .expect("the edit completes");
    assert_eq!(done["locations"][0]["line"], 2, "{done}");
    assert!(done["rawOutput"].is_object(), "{done}");
    let on_disk = std::fs::read_to_string(acp.dirs.cwd().join("notes.txt")).expect("file");
    assert_eq!(on_disk, "one\nnew line\n");

    let bash = shown_before_running(&all, "call_2");
    assert_eq!(bash["kind"], "execute");
    assert_eq!(bash["title"], "`echo from-bash; sleep 0.5; echo later`");
    // The output as it comes: the first line before the command ends.
    let partial = all
        .iter()
        .find(|u| {
            kind_of(u) == "tool_call_update"
                && u["toolCallId"] == "call_2"
                && u.get("status").is_none()
                && u["content"].to_string().contains("from-bash")
        })
        .expect("a partial output update");
    assert!(
        !partial["content"].to_string().contains("later"),
        "{partial}"
    );
    let finished = all
        .iter()
        .find(|u| {
            kind_of(u) == "tool_call_update"
                && u["toolCallId"] == "call_2"
                && u["status"] == "completed"
        })
        .expect("bash completes");
    let output = finished["content"].to_string();
    assert!(
        output.contains("from-bash") && output.contains("later"),
        "{finished}"
    );
    assert_eq!(chunks(&seen, "agent_message_chunk"), "done");
}

#[test]
fn acp_prompt_content_blocks_reach_the_model() {
    let (mock, mut acp) = setup_with(|b| b.cwd_file("linked.txt", "linked-contents-xyz"));
    let session = acp.new_session();
    let link = format!("file://{}/linked.txt", acp.cwd());
    // A 1x1 PNG.
    let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
    mock.push(Reply::text("seen"));
    let id = acp.start(
        "session/prompt",
        json!({"sessionId": session, "prompt": [
            {"type": "text", "text": "compare these"},
            {"type": "resource_link", "name": "linked.txt", "uri": link},
            {"type": "resource", "resource": {"uri": "file:///virtual/buffer.rs",
                                              "text": "embedded-abc", "mimeType": "text/x-rust"}},
            {"type": "image", "data": png, "mimeType": "image/png"},
        ]}),
    );
    let seen = acp.until_response(id);
    assert_eq!(
        seen.last().expect("response")["result"]["stopReason"],
        "end_turn"
    );
    let body = mock.requests()[0].body.to_string();
    assert!(body.contains("compare these"), "{body}");
    assert!(body.contains("linked-contents-xyz"), "{body}");
    assert!(body.contains("linked.txt"), "{body}");
    assert!(
        body.contains("<file name=\\\"/virtual/buffer.rs\\\">\\nembedded-abc"),
        "{body}"
    );
    assert!(body.contains("data:image/png;base64,"), "{body}");
}

#[test]
fn acp_the_todo_list_is_the_plan() {
    let (mock, mut acp) = setup();
    let session = acp.new_session();
    mock.push(Reply::new().tool_call(
        "call_1",
        "todo_write",
        json!({"ops": [{"op": "replace", "phases": [
            {"name": "Explore", "tasks": [{"content": "Read the code", "status": "completed"},
                                          {"content": "Drop this", "status": "abandoned"}]},
            {"name": "Build", "tasks": [{"content": "Write it", "status": "in_progress"},
                                        {"content": "Test it"}]}
        ]}]}),
    ));
    // The open tasks done, so no todo reminder starts another run.
    mock.push(Reply::new().tool_call(
        "call_2",
        "todo_write",
        json!({"ops": [{"op": "update", "id": "task-3", "status": "completed"},
                       {"op": "update", "id": "task-4", "status": "completed"}]}),
    ));
    mock.push(Reply::text("planned"));
    let id = prompt(&mut acp, &session, "plan");
    let seen = acp.until_response(id);
    assert_eq!(
        seen.last().expect("response")["result"]["stopReason"],
        "end_turn"
    );
    let plans: Vec<&Value> = updates(&seen)
        .into_iter()
        .filter(|u| kind_of(u) == "plan")
        .collect();
    assert_eq!(plans.len(), 2, "{seen:#?}");
    let plan = plans[0];
    let entries: Vec<(String, String)> = plan["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| {
            (
                e["content"].as_str().unwrap_or_default().to_string(),
                e["status"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert_eq!(
        entries,
        [
            ("Read the code".to_string(), "completed".to_string()),
            ("Write it".to_string(), "in_progress".to_string()),
            ("Test it".to_string(), "pending".to_string()),
        ]
    );
    let done: Vec<&Value> = plans[1]["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| &e["status"])
        .collect();
    assert_eq!(done, ["completed", "completed", "completed"]);
    let call = updates(&seen)
        .into_iter()
        .find(|u| kind_of(u) == "tool_call")
        .expect("the call");
    assert_eq!(call["kind"], "think");
}

#[test]
fn acp_cancel_during_a_streamed_reply_ends_the_turn_as_cancelled() {
    let (mock, mut acp) = setup();
    let session = acp.new_session();
    let long: Vec<String> = (0..200).map(|i| format!("w{i} ")).collect();
    mock.push(Reply::new().text_chunks(long).chunk_delay_ms(50));
    let id = prompt(&mut acp, &session, "talk");
    acp.wait_notification(|v| v["params"]["update"]["sessionUpdate"] == "agent_message_chunk");
    // One turn at a time per session.
    let busy = acp.request(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "me too"}]}),
    );
    assert_eq!(busy["error"]["code"], -32600, "{busy}");
    let sent = Instant::now();
    acp.notify("session/cancel", json!({"sessionId": session}));
    let seen = acp.until_response(id);
    let elapsed = sent.elapsed();
    assert_eq!(
        seen.last().expect("response")["result"]["stopReason"],
        "cancelled"
    );
    // The goal is 100 ms (about 2 ms here, in a debug build); the bound leaves room
    // for a loaded test machine.
    assert!(
        elapsed < Duration::from_millis(500),
        "cancel took {elapsed:?}"
    );
    // The streamed reply stopped well before its end.
    assert!(!chunks(&seen, "agent_message_chunk").contains("w199"));
    // The session goes on.
    mock.push(Reply::text("again"));
    let id = prompt(&mut acp, &session, "next");
    let seen = acp.until_response(id);
    assert_eq!(
        seen.last().expect("response")["result"]["stopReason"],
        "end_turn"
    );
    assert_eq!(chunks(&seen, "agent_message_chunk"), "again");
}

#[test]
fn acp_sigterm_during_a_turn_ends_tau_with_143() {
    let (mock, mut acp) = setup();
    let session = acp.new_session();
    let long: Vec<String> = (0..200).map(|i| format!("w{i} ")).collect();
    mock.push(Reply::new().text_chunks(long).chunk_delay_ms(50));
    prompt(&mut acp, &session, "talk");
    acp.wait_notification(|v| v["params"]["update"]["sessionUpdate"] == "agent_message_chunk");
    let pid =
        rustix::process::Pid::from_raw(i32::try_from(acp.child.id()).expect("pid")).expect("a pid");
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("signal");
    let started = Instant::now();
    let status = acp.wait_exit();
    assert_eq!(status.code(), Some(143), "{status:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn acp_load_replays_a_stored_session_then_goes_on_live() {
    let (mock, mut acp) = setup();
    let session = acp.new_session();
    mock.push(
        Reply::new()
            .text_chunks(["noted"])
            .tool_call("call_1", "ls", json!({"path": "."})),
    );
    mock.push(Reply::text("listed"));
    let id = prompt(&mut acp, &session, "remember the word plum");
    acp.until_response(id);
    let dirs = acp.dirs.clone();
    assert!(acp.close().success());

    let mut acp = Acp::spawn(
        acp_tau()
            .dirs(dirs)
            .agent_file("models.json", mock_models(&mock)),
    );
    acp.initialize();
    let cwd = acp.cwd();
    let listed = acp.request("session/list", json!({"cwd": cwd}));
    let ids: Vec<&str> = listed["result"]["sessions"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(ids, [session.as_str()]);

    let id = acp.start(
        "session/load",
        json!({"sessionId": session, "cwd": cwd, "mcpServers": []}),
    );
    let seen = acp.until_response(id);
    assert!(
        seen.last().expect("response")["result"].is_object(),
        "{seen:#?}"
    );
    assert_eq!(
        chunks(&seen, "user_message_chunk"),
        "remember the word plum"
    );
    assert_eq!(chunks(&seen, "agent_message_chunk"), "notedlisted");
    let kinds: Vec<&str> = updates(&seen).into_iter().map(kind_of).collect();
    let call = kinds
        .iter()
        .position(|k| *k == "tool_call")
        .expect("the ls call");
    let result = kinds
        .iter()
        .position(|k| *k == "tool_call_update")
        .expect("its result");
    assert!(call < result, "{kinds:?}");

    mock.push(Reply::text("plum"));
    let id = prompt(&mut acp, &session, "which word?");
    let seen = acp.until_response(id);
    assert_eq!(chunks(&seen, "agent_message_chunk"), "plum");
    // The model saw the loaded history.
    let body = mock.requests().last().expect("a request").body.to_string();
    assert!(body.contains("remember the word plum"), "{body}");
}

#[test]
fn acp_model_and_thinking_level_are_session_config_options() {
    let mock = MockServer::start_background().expect("mock");
    let models = json!({"providers": {"mock": {
        "baseUrl": format!("{}/v1", mock.url()), "api": "openai-completions", "apiKey": "k",
        "models": [{"id": "mock-1", "reasoning": true, "contextWindow": 100000, "maxTokens": 4096},
                   {"id": "mock-2", "contextWindow": 100000, "maxTokens": 4096}],
    }}});
    let mut acp = Acp::spawn(acp_tau().agent_file("models.json", models.to_string()));
    acp.initialize();
    let session = acp.new_session();
    let set = acp.request(
        "session/set_config_option",
        json!({"sessionId": session, "configId": "thinking", "value": "high"}),
    );
    let options = &set["result"]["configOptions"];
    assert_eq!(options[1]["id"], "thinking", "{set}");
    assert_eq!(options[1]["currentValue"], "high", "{set}");
    // The change is announced too, as one tau makes itself would be.
    let update =
        acp.wait_notification(|v| v["params"]["update"]["sessionUpdate"] == "config_option_update");
    assert_eq!(
        update["params"]["update"]["configOptions"][1]["currentValue"],
        "high"
    );
    let set = acp.request(
        "session/set_config_option",
        json!({"sessionId": session, "configId": "model", "value": "mock/mock-2"}),
    );
    assert_eq!(
        set["result"]["configOptions"][0]["currentValue"], "mock/mock-2",
        "{set}"
    );
    let bad = acp.request(
        "session/set_config_option",
        json!({"sessionId": session, "configId": "model", "value": "mock/none"}),
    );
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    // The next turn uses the chosen model.
    mock.push(Reply::text("ok"));
    let id = prompt(&mut acp, &session, "hi");
    acp.until_response(id);
    assert_eq!(mock.requests()[0].body["model"], "mock-2");
}

#[test]
fn acp_malformed_and_out_of_order_messages_get_errors_and_tau_keeps_running() {
    let mock = MockServer::start_background().expect("mock");
    let mut acp = Acp::spawn(acp_tau().agent_file("models.json", mock_models(&mock)));
    // Before `initialize`.
    let cwd = acp.cwd();
    let early = acp.request("session/new", json!({"cwd": cwd, "mcpServers": []}));
    assert_eq!(early["error"]["code"], -32600, "{early}");
    acp.initialize();
    // Not JSON.
    acp.send_raw("{not json");
    let parse = acp.next(WAIT).expect("an answer");
    assert_eq!(parse["error"]["code"], -32700, "{parse}");
    assert_eq!(parse["id"], Value::Null);
    // An unknown method, bad params, an unknown session.
    let unknown = acp.request("session/fly", json!({}));
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");
    let bad = acp.request("session/prompt", json!({"sessionId": 7}));
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    let missing = acp.request(
        "session/prompt",
        json!({"sessionId": "nope", "prompt": [{"type": "text", "text": "x"}]}),
    );
    assert_eq!(missing["error"]["code"], -32602, "{missing}");
    let unknown_load = acp.request(
        "session/load",
        json!({"sessionId": "no-such-session", "cwd": cwd, "mcpServers": []}),
    );
    assert_eq!(unknown_load["error"]["code"], -32602, "{unknown_load}");
    let relative = acp.request("session/new", json!({"cwd": "some/dir", "mcpServers": []}));
    assert_eq!(relative["error"]["code"], -32602, "{relative}");
    // A cancel for nothing is ignored.
    acp.notify("session/cancel", json!({"sessionId": "nope"}));
    assert!(acp.alive());
    // Still serving.
    let session = acp.new_session();
    mock.push(Reply::text("fine"));
    let id = prompt(&mut acp, &session, "still there?");
    let seen = acp.until_response(id);
    assert_eq!(chunks(&seen, "agent_message_chunk"), "fine");
    assert!(acp.close().success());
}

#[test]
fn acp_requests_written_just_before_the_input_ends_are_still_answered() {
    let mock = MockServer::start_background().expect("mock");
    let mut acp = Acp::spawn(acp_tau().agent_file("models.json", mock_models(&mock)));
    acp.initialize();
    // Written and closed at once, as `printf … | tau --mode acp` does: tau reads the end of
    // its input right behind them.
    let cwd = acp.cwd();
    let new = acp.start("session/new", json!({"cwd": cwd, "mcpServers": []}));
    let list = acp.start("session/list", json!({}));
    acp.stdin = None;
    assert!(acp.wait_exit().success());
    let opened = acp.response(new);
    assert!(opened["result"]["sessionId"].is_string(), "{opened}");
    let listed = acp.response(list);
    assert!(listed["result"]["sessions"].is_array(), "{listed}");
}

fn guard_path() -> String {
    format!(
        "{}/tests/fixtures/extensions/guard.py",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// Waits for tau's `session/request_permission`; returns it (the updates before it are
/// kept for later reads).
fn permission_request(acp: &mut Acp) -> Value {
    acp.wait_notification(|v| v["method"] == "session/request_permission")
}

/// A permission request's options as (`optionId`, `field`) pairs.
fn options<'a>(request: &'a Value, field: &str) -> Vec<(&'a str, &'a str)> {
    request["params"]["options"]
        .as_array()
        .expect("options")
        .iter()
        .map(|o| {
            (
                o["optionId"].as_str().unwrap_or_default(),
                o[field].as_str().unwrap_or_default(),
            )
        })
        .collect()
}

fn answer(acp: &mut Acp, request: &Value, outcome: Value) {
    let id = request["id"].clone();
    acp.send(&json!({"jsonrpc": "2.0", "id": id, "result": {"outcome": outcome}}));
}

#[test]
fn acp_extension_confirm_dialogs_are_permission_requests() {
    let (mock, mut acp) = setup_with(|b| b.arg("-e").arg(guard_path()));
    let session = acp.new_session();
    let names = announced_commands(&mut acp, &session);
    assert_eq!(names[..2], ["greet", "state"], "{names:?}");

    // guard.py's `input` handler asks before a prompt "ask" goes on: the question reaches
    // the client while tau's loop waits on that handler.
    mock.push(Reply::text("sent"));
    let id = prompt(&mut acp, &session, "ask");
    let request = permission_request(&mut acp);
    let params = &request["params"];
    assert_eq!(params["sessionId"], session.as_str());
    assert_eq!(params["toolCall"]["title"], "Send?");
    assert_eq!(
        options(&request, "kind"),
        [("yes", "allow_once"), ("no", "reject_once")]
    );
    answer(
        &mut acp,
        &request,
        json!({"outcome": "selected", "optionId": "yes"}),
    );
    let seen = acp.until_response(id);
    assert_eq!(
        seen.last().expect("response")["result"]["stopReason"],
        "end_turn"
    );
    // Confirmed: the handler rewrote the prompt.
    let body = mock.requests()[0].body.to_string();
    assert!(body.contains("asked and confirmed"), "{body}");
    let dialog_done = updates(&seen).into_iter().any(|u| {
        kind_of(u) == "tool_call_update"
            && u["toolCallId"] == params["toolCall"]["toolCallId"]
            && u["status"] == "completed"
    });
    assert!(dialog_done, "{seen:#?}");

    // Declined: the handler takes the prompt, nothing runs.
    let id = prompt(&mut acp, &session, "ask");
    let request = permission_request(&mut acp);
    answer(
        &mut acp,
        &request,
        json!({"outcome": "selected", "optionId": "no"}),
    );
    let seen = acp.until_response(id);
    assert_eq!(
        seen.last().expect("response")["result"]["stopReason"],
        "end_turn"
    );
    assert_eq!(mock.requests().len(), 1);

    // An extension command's dialog, through the command.
    let id = prompt(&mut acp, &session, "/greet world");
    let request = permission_request(&mut acp);
    assert_eq!(request["params"]["toolCall"]["title"], "Greet?");
    answer(
        &mut acp,
        &request,
        json!({"outcome": "selected", "optionId": "yes"}),
    );
    let seen = acp.until_response(id);
    assert_eq!(
        seen.last().expect("response")["result"]["stopReason"],
        "end_turn"
    );
    assert!(acp.close().success());
}

#[test]
fn acp_cancel_withdraws_an_open_permission_request() {
    let (mock, mut acp) = setup_with(|b| b.arg("-e").arg(guard_path()));
    let session = acp.new_session();
    let id = prompt(&mut acp, &session, "ask");
    let request = permission_request(&mut acp);
    // The turn ends without the request being answered: the cancel alone ends it.
    acp.notify("session/cancel", json!({"sessionId": session}));
    let seen = acp.until_response(id);
    assert_eq!(
        seen.last().expect("response")["result"]["stopReason"],
        "cancelled"
    );
    // tau withdrew its request.
    let withdrawn = seen
        .iter()
        .any(|v| v["method"] == "$/cancel_request" && v["params"]["requestId"] == request["id"]);
    assert!(withdrawn, "{seen:#?}");
    assert!(mock.requests().is_empty());
    // A late answer is ignored; the session goes on.
    answer(&mut acp, &request, json!({"outcome": "cancelled"}));
    mock.push(Reply::text("later"));
    let id = prompt(&mut acp, &session, "hello");
    let seen = acp.until_response(id);
    assert_eq!(chunks(&seen, "agent_message_chunk"), "later");
}

#[test]
fn acp_the_client_s_mcp_servers_serve_the_session() {
    let (mock, mut acp) = setup_with(|b| b.arg("--permission-mode").arg("allowAll"));
    let cwd = acp.cwd();
    let server = crate::mcp::test_server().display().to_string();
    let response = acp.request(
        "session/new",
        json!({"cwd": cwd, "mcpServers": [
            {"name": "test", "command": server, "args": [], "env": []}
        ]}),
    );
    let session = response["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("{response}"))
        .to_string();
    mock.push(Reply::new().tool_call("c1", "test_echo", json!({"text": "hello from mcp"})));
    mock.push(Reply::text("done"));
    let id = prompt(&mut acp, &session, "use the server");
    let seen = acp.until_response(id);
    assert_eq!(
        seen.last().expect("response")["result"]["stopReason"],
        "end_turn"
    );
    // The server's tool was offered to the model and ran.
    let offered = mock.requests()[0].body.to_string();
    assert!(offered.contains("test_echo"), "{offered}");
    let all = updates(&seen);
    let call = all
        .iter()
        .find(|u| kind_of(u) == "tool_call" && u["toolCallId"] == "c1")
        .expect("the call");
    assert_eq!(call["title"], "test_echo");
    // `other` is the protocol's default kind, which the SDK leaves out.
    assert!(call.get("kind").is_none_or(|k| k == "other"), "{call}");
    let done = all
        .iter()
        .find(|u| kind_of(u) == "tool_call_update" && u["status"] == "completed")
        .expect("it completes");
    assert!(
        done["content"].to_string().contains("hello from mcp"),
        "{done}"
    );
    assert!(acp.close().success());
}

#[test]
fn acp_file_tools_go_through_the_editor_when_it_offers_fs() {
    let mock = MockServer::start_background().expect("mock");
    let mut acp = Acp::spawn(
        acp_tau()
            .arg("--permission-mode")
            .arg("allowAll")
            .agent_file("models.json", mock_models(&mock))
            .cwd_file("buf.txt", "disk text\n")
            .cwd_file("outside.txt", "from the disk\n"),
    );
    let cwd = acp.cwd();
    // The editor's buffers: `buf.txt` with unsaved changes; it refuses `outside.txt`.
    let buffers = std::rc::Rc::new(std::cell::RefCell::new(std::collections::HashMap::from([
        (
            format!("{cwd}/buf.txt"),
            "unsaved buffer text\n".to_string(),
        ),
    ])));
    let writes = std::rc::Rc::new(std::cell::RefCell::new(Vec::<(String, String)>::new()));
    let (b, w) = (buffers.clone(), writes.clone());
    acp.editor = Some(Box::new(move |method, params| {
        let path = params["path"].as_str().unwrap_or_default().to_string();
        match method {
            "fs/read_text_file" => match b.borrow().get(&path) {
                Some(text) => Ok(json!({"content": text})),
                None => Err(json!({"code": -32002, "message": "not in the project"})),
            },
            "fs/write_text_file" => {
                let content = params["content"].as_str().unwrap_or_default().to_string();
                b.borrow_mut().insert(path.clone(), content.clone());
                w.borrow_mut().push((path, content));
                Ok(json!({}))
            }
            _ => Err(json!({"code": -32601, "message": "no"})),
        }
    }));
    acp.initialize_with(json!({"fs": {"readTextFile": true, "writeTextFile": true}}));
    let session = acp.new_session();
    mock.push(
        Reply::new()
            .tool_call("r1", "read", json!({"path": "buf.txt"}))
            .tool_call("r2", "read", json!({"path": "outside.txt"})),
    );
    mock.push(Reply::new().tool_call(
        "e1",
        "edit",
        json!({"path": "buf.txt", "edits": [{"oldText": "unsaved", "newText": "edited"}]}),
    ));
    mock.push(Reply::new().tool_call(
        "w1",
        "write",
        json!({"path": "new.txt", "content": "fresh"}),
    ));
    mock.push(Reply::text("done"));
    let id = prompt(&mut acp, &session, "work on the buffers");
    let seen = acp.until_response(id);
    assert_eq!(
        seen.last().expect("response")["result"]["stopReason"],
        "end_turn"
    );
    let result_of = |call: &str| {
        updates(&seen)
            .into_iter()
            .find(|u| {
                kind_of(u) == "tool_call_update"
                    && u["toolCallId"] == call
                    && u.get("status").is_some_and(|s| s == "completed")
            })
            .unwrap_or_else(|| panic!("{call} completes: {seen:#?}"))
            .clone()
    };
    // `read` saw the editor's unsaved text, and the disk where the editor said no.
    assert!(
        result_of("r1")["content"]
            .to_string()
            .contains("unsaved buffer text")
    );
    assert!(
        result_of("r2")["content"]
            .to_string()
            .contains("from the disk")
    );
    // `edit` and `write` went to the editor, not to the disk.
    assert_eq!(
        *writes.borrow(),
        [
            (format!("{cwd}/buf.txt"), "edited buffer text\n".to_string()),
            (format!("{cwd}/new.txt"), "fresh".to_string()),
        ]
    );
    let disk = std::fs::read_to_string(acp.dirs.cwd().join("buf.txt")).expect("buf.txt");
    assert_eq!(disk, "disk text\n");
    assert!(!acp.dirs.cwd().join("new.txt").exists());
    let requests: Vec<&str> = seen
        .iter()
        .filter_map(|v| v["method"].as_str())
        .filter(|m| m.starts_with("fs/"))
        .collect();
    assert_eq!(
        requests,
        [
            "fs/read_text_file",
            "fs/read_text_file",
            "fs/read_text_file",
            "fs/write_text_file",
            "fs/write_text_file"
        ]
    );
}

#[test]
fn acp_select_dialogs_offer_their_choices_and_input_dialogs_are_cancelled() {
    let fixture = format!(
        "{}/tests/fixtures/extensions/acp-dialogs.py",
        env!("CARGO_MANIFEST_DIR")
    );
    let (_mock, mut acp) = setup_with(|b| b.arg("-e").arg(fixture));
    let session = acp.new_session();
    let id = prompt(&mut acp, &session, "/pick");
    let request = permission_request(&mut acp);
    assert_eq!(request["params"]["toolCall"]["title"], "Pick a colour");
    assert_eq!(
        options(&request, "name"),
        [("0", "red"), ("1", "green"), ("2", "blue")]
    );
    answer(
        &mut acp,
        &request,
        json!({"outcome": "selected", "optionId": "1"}),
    );
    let seen = acp.until_response(id);
    assert_eq!(
        seen.last().expect("response")["result"]["stopReason"],
        "end_turn"
    );
    // The extension got "green" and named the session after it (before it answered): the
    // client's title.
    let title = |seen: &[Value]| {
        updates(seen)
            .into_iter()
            .find(|u| kind_of(u) == "session_info_update")
            .map(|u| u["title"].clone())
    };
    assert_eq!(title(&seen), Some(json!("pick: green")), "{seen:#?}");

    // ACP has no request for free text: the dialog is answered cancelled at once.
    let id = prompt(&mut acp, &session, "/name");
    let seen = acp.until_response(id);
    assert_eq!(
        seen.last().expect("response")["result"]["stopReason"],
        "end_turn"
    );
    assert!(
        !seen
            .iter()
            .any(|v| v["method"] == "session/request_permission"),
        "{seen:#?}"
    );
    assert_eq!(title(&seen), Some(json!("name: cancelled")), "{seen:#?}");
}

#[test]
fn acp_mode_takes_no_messages_on_the_command_line() {
    let (status, stdout, stderr, _dirs) = acp_tau().arg("hello").run(b"");
    assert_eq!(status.code(), Some(1));
    assert!(stdout.is_empty());
    assert!(
        stderr.contains("messages are not taken on the command line in ACP mode"),
        "{stderr}"
    );
}

/// The names `available_commands_update` lists for `session`.
fn announced_commands(acp: &mut Acp, session: &str) -> Vec<String> {
    let update = acp.wait_notification(|v| {
        v["params"]["sessionId"] == session
            && v["params"]["update"]["sessionUpdate"] == "available_commands_update"
    });
    update["params"]["update"]["availableCommands"]
        .as_array()
        .expect("commands")
        .iter()
        .map(|c| c["name"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// Runs `/greet` in `session`: its confirm dialog is a permission request on that session.
fn greet(acp: &mut Acp, session: &str) {
    let id = prompt(acp, session, "/greet you");
    let request = permission_request(acp);
    assert_eq!(request["params"]["sessionId"], session, "{request}");
    assert_eq!(request["params"]["toolCall"]["title"], "Greet?");
    answer(
        acp,
        &request,
        json!({"outcome": "selected", "optionId": "yes"}),
    );
    let seen = acp.until_response(id);
    assert_eq!(
        seen.last().expect("response")["result"]["stopReason"],
        "end_turn",
        "{seen:#?}"
    );
}

/// guard.py's `input` hook asks before "ask" goes on, on the session it came in; confirmed,
/// the prompt is rewritten and guard's `before_agent_start` marks the system prompt.
fn ask(acp: &mut Acp, mock: &BackgroundMock, session: &str) {
    mock.push(Reply::text("sent"));
    let before = mock.requests().len();
    let id = prompt(acp, session, "ask");
    let request = permission_request(acp);
    assert_eq!(request["params"]["sessionId"], session, "{request}");
    answer(
        acp,
        &request,
        json!({"outcome": "selected", "optionId": "yes"}),
    );
    let seen = acp.until_response(id);
    assert_eq!(chunks(&seen, "agent_message_chunk"), "sent", "{seen:#?}");
    let requests = mock.requests();
    assert_eq!(requests.len(), before + 1);
    let body = requests[before].body.to_string();
    assert!(body.contains("asked and confirmed"), "{body}");
    assert!(body.contains("GUARD ACTIVE"), "{body}");
}

#[test]
fn acp_extensions_serve_every_session_of_the_process() {
    let (mock, mut acp) = setup_with(|b| b.arg("-e").arg(guard_path()));
    let mut sessions = Vec::new();
    for _ in 0..2 {
        let session = acp.new_session();
        let names = announced_commands(&mut acp, &session);
        assert!(names.iter().any(|n| n == "greet"), "{session}: {names:?}");
        sessions.push(session);
    }
    let (first, second) = (sessions[0].clone(), sessions[1].clone());
    assert_ne!(first, second);
    // Hooks, dialogs and commands in the second session, then again in the first.
    ask(&mut acp, &mock, &second);
    greet(&mut acp, &second);
    ask(&mut acp, &mock, &first);
    greet(&mut acp, &first);
    let dirs = acp.dirs.clone();
    assert!(acp.close().success());

    // A session loaded after another one is open gets them too.
    let mut acp = Acp::spawn(
        acp_tau()
            .dirs(dirs)
            .agent_file("models.json", mock_models(&mock))
            .arg("-e")
            .arg(guard_path()),
    );
    acp.initialize();
    let fresh = acp.new_session();
    let cwd = acp.cwd();
    let loaded = acp.request(
        "session/load",
        json!({"sessionId": second, "cwd": cwd, "mcpServers": []}),
    );
    assert!(loaded["result"].is_object(), "{loaded}");
    let names = announced_commands(&mut acp, &second);
    assert!(names.iter().any(|n| n == "greet"), "{names:?}");
    ask(&mut acp, &mock, &second);
    greet(&mut acp, &second);
    greet(&mut acp, &fresh);
    assert!(acp.close().success());
}

#[test]
fn acp_mode_refuses_the_session_flags_the_client_decides() {
    for flags in [
        vec!["--continue"],
        vec!["--session", "abc"],
        vec!["--session-id", "abc"],
        vec!["--fork", "abc"],
    ] {
        let builder = flags.iter().fold(acp_tau(), |b, flag| b.arg(*flag));
        let (status, stdout, stderr, _dirs) = builder.run(b"");
        assert_eq!(status.code(), Some(1), "{flags:?}: {stderr}");
        assert!(stdout.is_empty());
        assert!(
            stderr.contains("not taken in ACP mode") && stderr.contains("session/load"),
            "{flags:?}: {stderr}"
        );
    }
}

#[test]
fn acp_an_extension_command_runs_the_message_it_sends_and_waits_for_it() {
    let wait_run = format!(
        "{}/tests/fixtures/extensions/wait-run.ts",
        env!("CARGO_MANIFEST_DIR")
    );
    let (mock, mut acp) = setup_with(|b| b.arg("-e").arg(&wait_run));
    let session = acp.new_session();
    mock.push(Reply::text("answered for the command"));
    // The handler sends a user message, waits until its run is under way, then for its end:
    // the core carries the message into the session while the handler still runs.
    let id = prompt(&mut acp, &session, "/run-and-wait tell me more");
    let seen = acp.until_response(id);
    assert_eq!(
        seen.last().expect("response")["result"]["stopReason"],
        "end_turn",
        "{seen:#?}"
    );
    assert_eq!(
        chunks(&seen, "agent_message_chunk"),
        "answered for the command"
    );
    let requests = mock.requests();
    assert_eq!(requests.len(), 1);
    assert!(
        requests[0].body.to_string().contains("tell me more"),
        "{}",
        requests[0].body
    );
    // The session goes on as before.
    mock.push(Reply::text("later"));
    let id = prompt(&mut acp, &session, "hello");
    let seen = acp.until_response(id);
    assert_eq!(chunks(&seen, "agent_message_chunk"), "later");
    assert!(acp.close().success());
}

#[test]
fn acp_tools_ask_by_default_and_the_modes_are_the_core_s() {
    let (mock, mut acp) = setup();
    let cwd = acp.cwd();
    let response = acp.request("session/new", json!({"cwd": cwd, "mcpServers": []}));
    let result = &response["result"];
    assert_eq!(result["modes"]["currentModeId"], "ask", "{response}");
    let ids: Vec<&str> = result["modes"]["availableModes"]
        .as_array()
        .map(|modes| modes.iter().filter_map(|m| m["id"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(ids, ["ask", "acceptEdits", "plan", "allowAll"]);
    let session = result["sessionId"].as_str().expect("id").to_string();

    // A command asks first; allowed once, it runs.
    mock.push(Reply::new().tool_call("c1", "bash", json!({"command": "echo hi > hi.txt"})));
    mock.push(Reply::text("done"));
    let id = prompt(&mut acp, &session, "go");
    let request = permission_request(&mut acp);
    let params = &request["params"];
    assert_eq!(params["toolCall"]["toolCallId"], "c1");
    assert_eq!(params["toolCall"]["kind"], "execute");
    assert_eq!(params["toolCall"]["title"], "Run echo hi > hi.txt");
    let options: Vec<(&str, &str)> = params["options"]
        .as_array()
        .map(|o| {
            o.iter()
                .map(|o| {
                    (
                        o["optionId"].as_str().unwrap_or(""),
                        o["kind"].as_str().unwrap_or(""),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        options,
        [
            ("allow", "allow_once"),
            ("always", "allow_always"),
            ("remember", "allow_always"),
            ("reject", "reject_once")
        ]
    );
    assert!(!acp.dirs.cwd().join("hi.txt").exists());
    answer(
        &mut acp,
        &request,
        json!({"outcome": "selected", "optionId": "allow"}),
    );
    let seen = acp.until_response(id);
    assert_eq!(
        seen.last().expect("response")["result"]["stopReason"],
        "end_turn"
    );
    assert!(acp.dirs.cwd().join("hi.txt").exists());

    // Plan mode, chosen by the editor: said back, and an edit is refused without asking.
    let id = acp.start(
        "session/set_mode",
        json!({"sessionId": session, "modeId": "plan"}),
    );
    let seen = acp.until_response(id);
    assert!(
        seen.last().expect("response").get("result").is_some(),
        "{seen:#?}"
    );
    let update = seen
        .iter()
        .find(|v| {
            v["method"] == "session/update"
                && v["params"]["update"]["sessionUpdate"] == "current_mode_update"
        })
        .expect("the mode is said back");
    assert_eq!(update["params"]["update"]["currentModeId"], "plan");
    mock.push(Reply::new().tool_call(
        "c2",
        "write",
        json!({"path": "hi.txt", "content": "changed"}),
    ));
    mock.push(Reply::text("planned"));
    let id = prompt(&mut acp, &session, "plan");
    let seen = acp.until_response(id);
    assert!(
        !seen
            .iter()
            .any(|v| v["method"] == "session/request_permission"),
        "{seen:#?}"
    );
    assert_eq!(
        std::fs::read_to_string(acp.dirs.cwd().join("hi.txt")).expect("file"),
        "hi\n"
    );
    let bad = acp.request(
        "session/set_mode",
        json!({"sessionId": session, "modeId": "sometimes"}),
    );
    assert!(bad.get("error").is_some(), "{bad}");

    // Asked again, then cancelled: the request is withdrawn.
    acp.request(
        "session/set_mode",
        json!({"sessionId": session, "modeId": "ask"}),
    );
    mock.push(Reply::new().tool_call("c3", "bash", json!({"command": "touch late.txt"})));
    let id = prompt(&mut acp, &session, "again");
    let request = permission_request(&mut acp);
    acp.notify("session/cancel", json!({"sessionId": session}));
    let seen = acp.until_response(id);
    assert_eq!(
        seen.last().expect("response")["result"]["stopReason"],
        "cancelled"
    );
    // The withdrawal and the answer may come in either order.
    let withdrawn =
        |v: &Value| v["method"] == "$/cancel_request" && v["params"]["requestId"] == request["id"];
    if !seen.iter().any(withdrawn) {
        acp.wait_notification(withdrawn);
    }
    assert!(!acp.dirs.cwd().join("late.txt").exists());
    assert!(acp.close().success());
}
