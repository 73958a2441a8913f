//! `tau --mode acp` as editors and ACP command-line clients use it across processes and
//! requests (issue 41, decision T122): a session made and never prompted is found by the next
//! process, `bash` runs in the client's terminal when it offers one, `session/list` gives
//! titles, `session/resume`, `session/close` and `session/fork`, tool calls announced while
//! the model writes them, and retries told to the editor.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tau_mock_llm::{BackgroundMock, Fault, MockServer, Reply};
use tau_test_kit::Dirs;

use crate::acp::{Acp, acp_tau, chunks, kind_of, prompt, setup_with, updates};
use crate::mock_models;

/// A `models.json` whose one model thinks, so thinking levels other than `off` apply.
fn reasoning_models(mock: &BackgroundMock) -> String {
    json!({"providers": {"mock": {
        "baseUrl": format!("{}/v1", mock.url()), "api": "openai-completions", "apiKey": "k",
        "models": [{"id": "mock-1", "reasoning": true, "contextWindow": 100000, "maxTokens": 4096}],
    }}})
    .to_string()
}

fn spawn_in(dirs: &Dirs, models: String) -> Acp {
    let mut acp = Acp::spawn(
        acp_tau()
            .dirs(dirs.clone())
            .agent_file("models.json", models),
    );
    acp.initialize();
    acp
}

/// The folder tau keeps `cwd`'s sessions in.
fn session_dir(dirs: &Dirs) -> PathBuf {
    let cwd = dirs.cwd().display().to_string();
    let encoded = format!("--{}--", cwd.trim_start_matches('/').replace('/', "-"));
    dirs.agent_dir().join("sessions").join(encoded)
}

fn listed(acp: &mut Acp) -> Vec<Value> {
    let cwd = acp.cwd();
    let response = acp.request("session/list", json!({"cwd": cwd}));
    response["result"]["sessions"]
        .as_array()
        .unwrap_or_else(|| panic!("{response}"))
        .clone()
}

fn option<'a>(options: &'a Value, id: &str) -> &'a Value {
    options
        .as_array()
        .and_then(|all| all.iter().find(|o| o["id"] == id))
        .unwrap_or_else(|| panic!("no option {id}: {options}"))
}

#[test]
fn acp_a_session_made_in_one_process_is_loaded_configured_and_prompted_in_others() {
    let mock = MockServer::start_background().expect("mock");
    let dirs = Dirs::new();

    // `sessions new`: the session is handed out and the process ends before any prompt.
    let mut first = spawn_in(&dirs, reasoning_models(&mock));
    let session = first.new_session();
    assert!(first.close().success());
    let record = session_dir(&dirs).join(format!("pending/{session}.json"));
    assert!(
        record.is_file(),
        "no pending record at {}",
        record.display()
    );
    let stored: Vec<_> = std::fs::read_dir(session_dir(&dirs))
        .expect("the session folder")
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
        .collect();
    assert!(stored.is_empty(), "no session file before the first reply");

    // `set thinking low` in a process of its own: listed, loaded, configured.
    let mut second = spawn_in(&dirs, reasoning_models(&mock));
    let ids: Vec<Value> = listed(&mut second)
        .iter()
        .map(|s| s["sessionId"].clone())
        .collect();
    assert_eq!(ids, [json!(session)]);
    let cwd = second.cwd();
    let loaded = second.request(
        "session/load",
        json!({"sessionId": session, "cwd": cwd, "mcpServers": []}),
    );
    assert!(loaded["result"].is_object(), "{loaded}");
    let set = second.request(
        "session/set_config_option",
        json!({"sessionId": session, "configId": "thinking", "value": "low"}),
    );
    assert_eq!(
        option(&set["result"]["configOptions"], "thinking")["currentValue"],
        "low",
        "{set}"
    );
    assert!(second.close().success());
    let kept: Value =
        serde_json::from_str(&std::fs::read_to_string(&record).expect("the record")).expect("JSON");
    assert_eq!(kept["thinkingLevel"], "low", "{kept}");
    assert_eq!(kept["model"], json!({"provider": "mock", "id": "mock-1"}));

    // `prompt` in a third: the recorded choice holds, and the reply writes the file.
    let mut third = spawn_in(&dirs, reasoning_models(&mock));
    let cwd = third.cwd();
    let loaded = third.request(
        "session/load",
        json!({"sessionId": session, "cwd": cwd, "mcpServers": []}),
    );
    assert_eq!(
        option(&loaded["result"]["configOptions"], "thinking")["currentValue"],
        "low",
        "{loaded}"
    );
    mock.push(Reply::text("hello from the third process"));
    let id = prompt(&mut third, &session, "say hello");
    let seen = third.until_response(id);
    assert_eq!(
        seen.last().expect("response")["result"]["stopReason"],
        "end_turn"
    );
    assert_eq!(
        chunks(&seen, "agent_message_chunk"),
        "hello from the third process"
    );
    assert!(!record.exists(), "the record goes once the file exists");
    let files: Vec<PathBuf> = std::fs::read_dir(session_dir(&dirs))
        .expect("the session folder")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let name = files[0]
        .file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned();
    assert!(name.ends_with(&format!("_{session}.jsonl")), "{name}");
    let text = std::fs::read_to_string(&files[0]).expect("the session file");
    assert!(
        text.contains(r#""type":"thinking_level_change","#)
            && text.contains(r#""thinkingLevel":"low""#),
        "{text}"
    );
    // Listed once, by its file now, titled by its first message.
    let sessions = listed(&mut third);
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    assert_eq!(sessions[0]["title"], "say hello");
}

#[test]
fn acp_an_unknown_id_is_still_unknown() {
    let (_mock, mut acp) = setup_with(|b| b);
    let cwd = acp.cwd();
    for id in ["no-such-session", "../../etc/passwd"] {
        let response = acp.request(
            "session/load",
            json!({"sessionId": id, "cwd": cwd, "mcpServers": []}),
        );
        assert_eq!(response["error"]["code"], -32602, "{response}");
    }
}

/// Answers the client's `terminal/*` requests as an editor would, noting each.
fn terminal_editor(seen: Arc<Mutex<Vec<(String, Value)>>>) -> crate::acp::Editor {
    Box::new(move |method, params| {
        seen.lock()
            .expect("lock")
            .push((method.to_string(), params.clone()));
        match method {
            "terminal/create" => Ok(json!({"terminalId": "term-1"})),
            "terminal/wait_for_exit" => Ok(json!({"exitCode": 0})),
            "terminal/output" => Ok(json!({
                "output": "\u{1b}[32mhi from the editor\u{1b}[0m\r\n",
                "truncated": false,
            })),
            "terminal/release" | "terminal/kill" => Ok(json!({})),
            other => Err(json!({"code": -32601, "message": format!("no {other}")})),
        }
    })
}

#[test]
fn acp_bash_runs_in_the_client_s_terminal_when_it_offers_one() {
    let mock = MockServer::start_background().expect("mock");
    let mut acp = Acp::spawn(
        acp_tau()
            .agent_file("models.json", mock_models(&mock))
            .arg("--permission-mode")
            .arg("allowAll"),
    );
    acp.initialize_with(json!({"terminal": true}));
    let requests = Arc::new(Mutex::new(Vec::new()));
    acp.editor = Some(terminal_editor(Arc::clone(&requests)));
    let session = acp.new_session();
    mock.push(Reply::new().tool_call("b1", "bash", json!({"command": "echo hi"})));
    mock.push(Reply::text("done"));
    let id = prompt(&mut acp, &session, "run it");
    let seen = acp.until_response(id);
    assert_eq!(
        seen.last().expect("response")["result"]["stopReason"],
        "end_turn",
        "{seen:#?}"
    );

    let requests = requests.lock().expect("lock").clone();
    let methods: Vec<&str> = requests.iter().map(|(m, _)| m.as_str()).collect();
    assert_eq!(
        methods,
        [
            "terminal/create",
            "terminal/wait_for_exit",
            "terminal/output",
            "terminal/release"
        ]
    );
    let create = &requests[0].1;
    assert_eq!(create["sessionId"], session.as_str());
    assert_eq!(create["args"], json!(["-c", "echo hi"]));
    assert_eq!(create["cwd"], acp.cwd().as_str());
    assert_eq!(create["outputByteLimit"], 1 << 20);
    assert!(
        create["env"]
            .as_array()
            .is_some_and(|env| env.contains(&json!({"name": "TAU_CODING_AGENT", "value": "true"}))),
        "{create}"
    );
    for (method, params) in &requests[1..] {
        assert_eq!(params["terminalId"], "term-1", "{method}");
    }

    let all = updates(&seen);
    let embedded = all
        .iter()
        .find(|u| {
            kind_of(u) == "tool_call_update"
                && u["toolCallId"] == "b1"
                && u["content"] == json!([{"type": "terminal", "terminalId": "term-1"}])
        })
        .unwrap_or_else(|| panic!("the call embeds the terminal: {all:#?}"));
    assert_eq!(embedded["toolCallId"], "b1");
    let done = all
        .iter()
        .find(|u| u["toolCallId"] == "b1" && u["status"] == "completed")
        .expect("the call completes");
    assert!(done.get("content").is_none(), "the terminal stays: {done}");
    // The model reads the command's output as tau's own bash would give it.
    let body = mock.requests()[1].body.to_string();
    assert!(body.contains(r#"hi from the editor\n"#), "{body}");
    assert!(!body.contains("\\u001b"), "{body}");
}

#[test]
fn acp_without_the_terminal_capability_bash_runs_in_tau() {
    let mock = MockServer::start_background().expect("mock");
    let mut acp = Acp::spawn(
        acp_tau()
            .agent_file("models.json", mock_models(&mock))
            .arg("--permission-mode")
            .arg("allowAll"),
    );
    acp.initialize();
    let requests = Arc::new(Mutex::new(Vec::new()));
    acp.editor = Some(terminal_editor(Arc::clone(&requests)));
    let session = acp.new_session();
    mock.push(Reply::new().tool_call("b1", "bash", json!({"command": "echo from-tau"})));
    mock.push(Reply::text("done"));
    let id = prompt(&mut acp, &session, "run it");
    acp.until_response(id);
    assert!(requests.lock().expect("lock").is_empty());
    let body = mock.requests()[1].body.to_string();
    assert!(body.contains("from-tau"), "{body}");
}

#[test]
fn acp_resume_close_and_fork_sessions() {
    let mock = MockServer::start_background().expect("mock");
    let mut acp = Acp::spawn(acp_tau().agent_file("models.json", mock_models(&mock)));
    let caps = acp.initialize();
    let session_caps = &caps["agentCapabilities"]["sessionCapabilities"];
    for cap in ["list", "resume", "close", "fork"] {
        assert!(session_caps[cap].is_object(), "{cap}: {session_caps}");
    }
    let session = acp.new_session();
    mock.push(Reply::text("noted"));
    let id = prompt(&mut acp, &session, "remember plum");
    acp.until_response(id);
    let cwd = acp.cwd();

    // A fork of the open session: a new id, the same history.
    let forked = acp.request(
        "session/fork",
        json!({"sessionId": session, "cwd": cwd, "mcpServers": []}),
    );
    let fork = forked["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("{forked}"))
        .to_string();
    assert_ne!(fork, session);
    mock.push(Reply::text("plum, in the fork"));
    let id = prompt(&mut acp, &fork, "which word?");
    let seen = acp.until_response(id);
    assert_eq!(chunks(&seen, "agent_message_chunk"), "plum, in the fork");
    let body = mock.requests().last().expect("a request").body.to_string();
    assert!(body.contains("remember plum"), "{body}");

    // Closed: gone from this connection until it is opened again.
    let closed = acp.request("session/close", json!({"sessionId": session}));
    assert!(closed["result"].is_object(), "{closed}");
    let refused = acp.request(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]}),
    );
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let again = acp.request("session/close", json!({"sessionId": session}));
    assert!(again["error"].is_object(), "{again}");

    // Resumed: open again, without its history replayed.
    let id = acp.start(
        "session/resume",
        json!({"sessionId": session, "cwd": cwd, "mcpServers": []}),
    );
    let seen = acp.until_response(id);
    assert!(
        seen.last().expect("response")["result"].is_object(),
        "{seen:#?}"
    );
    assert_eq!(chunks(&seen, "user_message_chunk"), "");
    assert_eq!(chunks(&seen, "agent_message_chunk"), "");
    mock.push(Reply::text("still plum"));
    let id = prompt(&mut acp, &session, "and now?");
    let seen = acp.until_response(id);
    assert_eq!(chunks(&seen, "agent_message_chunk"), "still plum");
    // The original did not get the fork's turn.
    let body = mock.requests().last().expect("a request").body.to_string();
    assert!(
        body.contains("remember plum") && !body.contains("which word?"),
        "{body}"
    );

    // Both are listed, titled by their first message.
    let sessions = listed(&mut acp);
    let mut titles: Vec<(String, String)> = sessions
        .iter()
        .map(|s| {
            (
                s["sessionId"].as_str().unwrap_or_default().to_string(),
                s["title"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    titles.sort();
    let mut expected = vec![
        (session.clone(), "remember plum".to_string()),
        (fork.clone(), "remember plum".to_string()),
    ];
    expected.sort();
    assert_eq!(titles, expected);
}

#[test]
fn acp_a_tool_call_is_announced_while_the_model_writes_it() {
    let mock = MockServer::start_background().expect("mock");
    let mut acp = Acp::spawn(
        acp_tau()
            .agent_file("models.json", mock_models(&mock))
            .cwd_file("notes.txt", "some notes\n")
            .arg("--permission-mode")
            .arg("allowAll"),
    );
    acp.initialize();
    let session = acp.new_session();
    // The arguments come in 4-character pieces, 25 ms apart: about half a second of writing.
    mock.push(
        Reply::new()
            .tool_call(
                "r1",
                "read",
                json!({"path": "notes.txt", "offset": 1, "limit": 10}),
            )
            .chunk_size(4)
            .chunk_delay_ms(25),
    );
    mock.push(Reply::text("read it"));
    let id = prompt(&mut acp, &session, "read the notes");
    let seen = acp.until_response(id);
    let calls: Vec<&Value> = updates(&seen)
        .into_iter()
        .filter(|u| u["toolCallId"] == "r1")
        .collect();
    assert_eq!(kind_of(calls[0]), "tool_call", "{calls:#?}");
    assert_eq!(
        calls[0]["rawInput"],
        json!({}),
        "announced before any argument"
    );
    assert_eq!(calls[0]["kind"], "read");
    let running = calls
        .iter()
        .position(|u| u["status"] == "in_progress")
        .expect("it runs");
    let streamed: Vec<&&Value> = calls[1..running]
        .iter()
        .filter(|u| u.get("rawInput").is_some())
        .collect();
    let deltas = json!({"path": "notes.txt", "offset": 1, "limit": 10})
        .to_string()
        .len()
        .div_ceil(4);
    assert!(
        streamed.len() >= 2 && streamed.len() < deltas,
        "some partial arguments, fewer than the {deltas} deltas: {streamed:#?}"
    );
    assert!(
        streamed[0]["rawInput"] != streamed[streamed.len() - 1]["rawInput"],
        "{streamed:#?}"
    );
    let last = streamed.last().expect("the full arguments");
    assert_eq!(
        last["rawInput"],
        json!({"path": "notes.txt", "offset": 1, "limit": 10})
    );
    assert_eq!(last["title"], "Read notes.txt");
    assert!(
        calls[running..].iter().any(|u| u["status"] == "completed"),
        "{calls:#?}"
    );
}

#[test]
fn acp_a_retry_is_told_to_the_editor() {
    let mock = MockServer::start_background().expect("mock");
    let mut acp = Acp::spawn(
        acp_tau()
            .agent_file("models.json", mock_models(&mock))
            .agent_file(
                "settings.json",
                json!({"retry": {"baseDelayMs": 10}}).to_string(),
            ),
    );
    acp.initialize();
    let session = acp.new_session();
    mock.push(Reply::fault(Fault::RateLimited { retry_after: None }));
    mock.push(Reply::text("recovered"));
    let id = prompt(&mut acp, &session, "hi");
    let seen = acp.until_response(id);
    assert_eq!(
        seen.last().expect("response")["result"]["stopReason"],
        "end_turn",
        "{seen:#?}"
    );
    let thoughts = chunks(&seen, "agent_thought_chunk");
    assert!(
        thoughts.contains("[tau] Retrying in 10 ms (attempt 1/3): "),
        "{thoughts}"
    );
    assert_eq!(chunks(&seen, "agent_message_chunk"), "recovered");
}
