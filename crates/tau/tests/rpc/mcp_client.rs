//! MCP's client features through the binary (issue 43, decision T129), against the real
//! `server-everything` from npm, which registers its roots, sampling and elicitation tools
//! only when the client declares them: roots are the working folder, a server's form is
//! asked as dialogs the client answers, sampling asks with a permission request and the
//! mock model answers, resources are offered to the model and attached with
//! `@server:uri`, and a server's warnings reach the user.

use std::time::Duration;

use serde_json::{Value, json};
use tau_mock_llm::{MockServer, Reply};
use tau_test_kit::Tau;

use crate::mcp::{start, status, stop, text_of};
use crate::mcp_registry::{everything_entry, filesystem_entry, installed};

/// Runs one prompt to its end, answering what the server asks of the client with
/// `answer`; the `tool_execution_end` records and every record seen.
fn run_answering(
    t: &mut Tau,
    message: &str,
    mut answer: impl FnMut(&mut Tau, &Value),
) -> (Vec<Value>, Vec<Value>) {
    t.send(&json!({"id": "p", "type": "prompt", "message": message}));
    let mut seen = Vec::new();
    loop {
        let record = t
            .next_record(Duration::from_secs(60))
            .and_then(|record| record.json)
            .expect("a record before agent_settled");
        let kind = record["type"].as_str().unwrap_or_default().to_string();
        if kind == "extension_ui_request" || kind == "permission_request" {
            answer(t, &record);
        }
        seen.push(record);
        if kind == "agent_settled" {
            break;
        }
    }
    let ends = seen
        .iter()
        .filter(|r| r["type"] == "tool_execution_end")
        .cloned()
        .collect();
    (ends, seen)
}

fn dialogs(seen: &[Value]) -> Vec<String> {
    seen.iter()
        .filter(|r| r["type"] == "extension_ui_request" && r["method"] != "notify")
        .map(|r| {
            format!(
                "{} {}",
                r["method"].as_str().unwrap_or(""),
                r["title"].as_str().unwrap_or("")
            )
        })
        .collect()
}

#[test]
fn roots_are_the_working_folder() {
    let Some(modules) = installed() else {
        return;
    };
    let mock = MockServer::start_background().unwrap();
    mock.push(Reply::new().tool_call("r1", "everything_get-roots-list", json!({})));
    mock.push(Reply::text("done"));
    let mut t = start(
        &mock,
        json!({"everything": everything_entry(&modules)}),
        &[],
        |b| b,
    );
    status(&mut t, "everything", "ready");
    let (ends, _) = run_answering(&mut t, "go", |_, _| {});
    let text = text_of(&ends[0]);
    let cwd = std::fs::canonicalize(t.cwd()).unwrap();
    assert!(
        text.contains(&format!("file://{}", cwd.display())),
        "{text}"
    );
    stop(t);
}

#[test]
fn a_servers_form_is_asked_as_dialogs_and_the_answers_go_back() {
    let Some(modules) = installed() else {
        return;
    };
    let mock = MockServer::start_background().unwrap();
    mock.push(Reply::new().tool_call("e1", "everything_trigger-elicitation-request", json!({})));
    mock.push(Reply::text("thanks"));
    mock.push(Reply::new().tool_call("e2", "everything_trigger-elicitation-request", json!({})));
    mock.push(Reply::text("ok"));
    let mut t = start(
        &mock,
        json!({"everything": everything_entry(&modules)}),
        &[],
        |b| b,
    );
    status(&mut t, "everything", "ready");
    let (ends, seen) = run_answering(&mut t, "fill it in", |t, request| {
        let id = request["id"].clone();
        let title = request["title"].as_str().unwrap_or_default();
        let reply = match request["method"].as_str() {
            Some("confirm") => {
                json!({"type": "extension_ui_response", "id": id, "confirmed": true})
            }
            Some("select") => json!({"type": "extension_ui_response", "id": id,
                "value": request["options"][1]}),
            Some("input")
                if title.contains("Your full, legal name")
                    || title.contains(": String (required)") =>
            {
                json!({"type": "extension_ui_response", "id": id, "value": "Ada Lovelace"})
            }
            Some("input") if title.contains("Integer") => {
                json!({"type": "extension_ui_response", "id": id, "value": "7"})
            }
            Some("input") => json!({"type": "extension_ui_response", "id": id, "value": ""}),
            _ => return,
        };
        t.send(&reply);
    });
    let asked = dialogs(&seen);
    assert!(
        asked[0].starts_with("confirm MCP server \"everything\" asks"),
        "{asked:?}"
    );
    assert!(asked.len() > 5, "one dialog per field: {asked:?}");
    let text = text_of(&ends[0]);
    assert!(text.contains("Name: Ada Lovelace"), "{text}");
    assert!(text.contains("Agreed to terms: true"), "{text}");
    assert!(text.contains("Favorite Integer: 7"), "{text}");
    // A default the user left empty is sent as the server gave it.
    assert!(text.contains("Favorite Number: 3.14"), "{text}");
    assert!(text.contains("\"action\": \"accept\""), "{text}");

    // Saying no to the form declines it.
    let (ends, _) = run_answering(&mut t, "again", |t, request| {
        if request["method"] == "confirm" {
            t.send(
                &json!({"type": "extension_ui_response", "id": request["id"], "confirmed": false}),
            );
        }
    });
    assert!(
        text_of(&ends[0]).contains("declined"),
        "{}",
        text_of(&ends[0])
    );
    stop(t);
}

#[test]
fn sampling_is_off_over_rpc_unless_the_host_turns_it_on() {
    let Some(modules) = installed() else {
        return;
    };
    let mock = MockServer::start_background().unwrap();
    let mut t = start(
        &mock,
        json!({"everything": everything_entry(&modules)}),
        &[],
        |b| b,
    );
    let ready = status(&mut t, "everything", "ready");
    let tools = ready["tools"].as_array().unwrap();
    assert!(
        !tools.contains(&json!("trigger-sampling-request")),
        "{ready}"
    );
    // Declared or not, roots and forms are.
    assert!(tools.contains(&json!("get-roots-list")), "{ready}");
    assert!(
        tools.contains(&json!("trigger-elicitation-request")),
        "{ready}"
    );
    stop(t);
}

#[test]
fn sampling_asks_the_user_and_the_model_answers_the_server() {
    let Some(modules) = installed() else {
        return;
    };
    let mock = MockServer::start_background().unwrap();
    let call = json!({"prompt": "what is two and two", "maxTokens": 50});
    mock.push(Reply::new().tool_call("s1", "everything_trigger-sampling-request", call.clone()));
    mock.push(Reply::text("four, says the model"));
    mock.push(Reply::text("done"));
    mock.push(Reply::new().tool_call("s2", "everything_trigger-sampling-request", call));
    mock.push(Reply::text("refused, then"));
    let mut t = start(
        &mock,
        json!({"everything": everything_entry(&modules)}),
        &["--mcp-sampling", "ask"],
        |b| b,
    );
    status(&mut t, "everything", "ready");
    let mut asked = Vec::new();
    let (ends, _) = run_answering(&mut t, "sample", |t, request| {
        if request["type"] == "permission_request" {
            asked.push(request.clone());
            t.send(
                &json!({"type": "permission_response", "id": request["id"], "outcome": "allow"}),
            );
        }
    });
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(asked[0]["toolName"], "mcp_sampling", "{}", asked[0]);
    assert!(
        asked[0]["title"]
            .as_str()
            .unwrap()
            .contains("what is two and two"),
        "{}",
        asked[0]
    );
    let text = text_of(&ends[0]);
    assert!(text.contains("four, says the model"), "{text}");
    // The model was asked the server's question, without the session's tools.
    let requests = mock.requests();
    let sampled = &requests[1].body;
    assert!(
        sampled.to_string().contains("what is two and two"),
        "{sampled}"
    );
    assert!(
        sampled
            .get("tools")
            .is_none_or(|tools| tools.as_array().is_some_and(Vec::is_empty)),
        "{sampled}"
    );

    // Refused: the server hears the refusal, the model is not asked.
    let before = mock.requests().len();
    let (ends, _) = run_answering(&mut t, "again", |t, request| {
        if request["type"] == "permission_request" {
            t.send(
                &json!({"type": "permission_response", "id": request["id"], "outcome": "reject"}),
            );
        }
    });
    assert!(text_of(&ends[0]).contains("rejected"), "{}", ends[0]);
    // Only the run's own two calls: no sampling call.
    assert_eq!(mock.requests().len(), before + 2);
    stop(t);
}

#[test]
fn resources_are_offered_to_the_model_and_attached_by_mention() {
    let Some(modules) = installed() else {
        return;
    };
    let mock = MockServer::start_background().unwrap();
    mock.push(Reply::new().tool_call("l1", "list_mcp_resources", json!({})));
    mock.push(Reply::new().tool_call(
        "r1",
        "read_mcp_resource",
        json!({"server": "everything", "uri": "demo://resource/dynamic/text/1"}),
    ));
    mock.push(Reply::text("read"));
    mock.push(Reply::text("attached"));
    let mut t = start(
        &mock,
        json!({"everything": everything_entry(&modules)}),
        &[],
        |b| b,
    );
    status(&mut t, "everything", "ready");
    let tools = crate::mcp::tool_names(&mut t);
    assert!(
        tools.contains(&"list_mcp_resources".to_string()),
        "{tools:?}"
    );
    assert!(
        tools.contains(&"read_mcp_resource".to_string()),
        "{tools:?}"
    );
    let (ends, _) = run_answering(&mut t, "look around", |_, _| {});
    let listing = text_of(&ends[0]);
    assert!(
        listing.contains("everything resource demo://resource/static/document/"),
        "{listing}"
    );
    assert!(
        listing.contains("everything template demo://resource/dynamic/text/{resourceId}"),
        "{listing}"
    );
    assert!(
        text_of(&ends[1]).starts_with("Resource 1: This is a plaintext resource"),
        "{}",
        ends[1]
    );

    // A mention attaches the resource to the prompt; an unknown one fails the prompt.
    let answer = t.request(json!({"type": "prompt",
        "message": "summarise @everything:demo://resource/dynamic/text/2 please"}));
    assert_eq!(answer["success"], true, "{answer}");
    t.records_until("agent_settled", Duration::from_secs(60));
    let last = mock.requests().last().unwrap().body.to_string();
    assert!(
        last.contains(
            "<resource server=\\\"everything\\\" uri=\\\"demo://resource/dynamic/text/2\\\">"
        ),
        "{last}"
    );
    assert!(
        last.contains("Resource 2: This is a plaintext resource"),
        "{last}"
    );
    let refused = t.request(json!({"type": "prompt",
        "message": "read @everything:demo://nowhere/at/all"}));
    assert_eq!(refused["success"], false, "{refused}");
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("cannot attach @everything:demo://nowhere/at/all"),
        "{refused}"
    );
    stop(t);
}

#[test]
fn a_servers_warnings_reach_the_user() {
    let Some(modules) = installed() else {
        return;
    };
    let mock = MockServer::start_background().unwrap();
    mock.push(Reply::new().tool_call("g1", "everything_toggle-simulated-logging", json!({})));
    mock.push(Reply::text("logging"));
    let mut t = start(
        &mock,
        json!({"everything": everything_entry(&modules)}),
        &[],
        // Only warnings and worse are sent: each line the server sends is one for the user.
        |b| {
            b.agent_file(
                "settings.json",
                json!({"mcp": {"logLevel": "warning"}}).to_string(),
            )
        },
    );
    status(&mut t, "everything", "ready");
    run_answering(&mut t, "log", |_, _| {});
    // The server sends a random level every 5 s; lines under warning stay on its side.
    let notice = t.wait_for("a server warning", Duration::from_secs(60), |r| {
        r.json.as_ref().is_some_and(|j| {
            j["type"] == "extension_ui_request"
                && j["method"] == "notify"
                && j["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("MCP server \"everything\": "))
        })
    });
    let notice = notice.json.unwrap();
    let message = notice["message"].as_str().unwrap();
    assert!(
        ["Warning", "Error", "Critical", "Alert", "Emergency"]
            .iter()
            .any(|level| message.contains(level)),
        "{notice}"
    );
    assert!(
        !message.contains("Debug") && !message.contains("Info"),
        "{notice}"
    );
    stop(t);
}

#[test]
fn the_filesystem_server_works_in_the_folder_offered_as_its_root() {
    let Some(modules) = installed() else {
        return;
    };
    let elsewhere = tempfile::tempdir().unwrap();
    let mock = MockServer::start_background().unwrap();
    let mut t = start(
        &mock,
        json!({"fs": filesystem_entry(&modules, elsewhere.path())}),
        &[],
        |b| b.cwd_file("notes.txt", "kept in the project"),
    );
    status(&mut t, "fs", "ready");
    let note = std::fs::canonicalize(t.cwd()).unwrap().join("notes.txt");
    // The server asks for the roots after its start; a call may come before it has them.
    let mut text = String::new();
    for _ in 0..20 {
        mock.push(Reply::new().tool_call(
            "f1",
            "fs_read_text_file",
            json!({"path": note.display().to_string()}),
        ));
        mock.push(Reply::text("read"));
        let (ends, _) = run_answering(&mut t, "read it", |_, _| {});
        text = text_of(&ends[0]);
        if text.contains("kept in the project") {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(text, "kept in the project");
    stop(t);
}

#[test]
fn arguments_and_template_placeholders_are_completed_by_the_server() {
    let Some(modules) = installed() else {
        return;
    };
    let mock = MockServer::start_background().unwrap();
    let mut t = start(
        &mock,
        json!({"everything": everything_entry(&modules)}),
        &[],
        |b| b,
    );
    status(&mut t, "everything", "ready");
    let complete = |t: &mut Tau, text: &str| {
        let answer = t.request(json!({"type": "complete_mcp_argument", "text": text}));
        assert_eq!(answer["success"], true, "{answer}");
        answer["data"].clone()
    };
    let first = complete(&mut t, "/mcp:everything:completable-prompt Eng");
    assert_eq!(first["argument"], "department", "{first}");
    assert_eq!(first["values"], json!(["Engineering"]), "{first}");
    // The words before the one typed are the server's context.
    let second = complete(&mut t, "/mcp:everything:completable-prompt Sales ");
    assert_eq!(second["argument"], "name", "{second}");
    assert_eq!(
        second["values"],
        json!(["David", "Eve", "Frank"]),
        "{second}"
    );
    let resources = t.request(json!({"type": "get_mcp_resources"}));
    let templates: Vec<&str> = resources["data"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["template"] == true)
        .filter_map(|r| r["uri"].as_str())
        .collect();
    assert!(
        templates.contains(&"demo://resource/dynamic/text/{resourceId}"),
        "{resources}"
    );
    // server-everything's completer accepts what is a resource id and nothing else.
    let placeholder = complete(&mut t, "read @everything:demo://resource/dynamic/text/7");
    assert_eq!(placeholder["argument"], "resourceId", "{placeholder}");
    assert_eq!(
        placeholder["values"],
        json!(["@everything:demo://resource/dynamic/text/7"]),
        "{placeholder}"
    );
    let refused = complete(&mut t, "read @everything:demo://resource/dynamic/text/x");
    assert_eq!(refused["values"], json!([]), "{refused}");
    // A line that names no prompt or template has nothing to complete.
    let nothing = complete(&mut t, "just words");
    assert_eq!(nothing["values"], json!([]), "{nothing}");
    stop(t);
}

#[test]
fn an_attached_resource_is_subscribed_to_and_its_updates_are_announced() {
    let Some(modules) = installed() else {
        return;
    };
    let mock = MockServer::start_background().unwrap();
    mock.push(Reply::new().tool_call("u1", "everything_toggle-subscriber-updates", json!({})));
    mock.push(Reply::text("watching"));
    let mut t = start(
        &mock,
        json!({"everything": everything_entry(&modules)}),
        &[],
        |b| b,
    );
    status(&mut t, "everything", "ready");
    run_answering(
        &mut t,
        "watch @everything:demo://resource/dynamic/text/3",
        |_, _| {},
    );
    // The server sends its updates every 5 s.
    let notice = t.wait_for("a resource update", Duration::from_secs(30), |r| {
        r.json.as_ref().is_some_and(|j| {
            j["type"] == "extension_ui_request"
                && j["method"] == "notify"
                && j["message"].as_str().is_some_and(|m| {
                    m.contains("updated @everything:demo://resource/dynamic/text/3")
                })
        })
    });
    assert_eq!(notice.json.unwrap()["notifyType"], "info");
    stop(t);
}

#[test]
fn a_switched_session_in_another_folder_moves_the_root() {
    let Some(modules) = installed() else {
        return;
    };
    let elsewhere = tempfile::tempdir().unwrap();
    let other = std::fs::canonicalize(elsewhere.path()).unwrap();
    let file = other.join("other.jsonl");
    std::fs::write(
        &file,
        json!({"type": "session", "version": 3, "id": "other-session",
               "timestamp": "2025-01-01T00:00:00.000Z", "cwd": other})
        .to_string()
            + "\n",
    )
    .unwrap();
    let mock = MockServer::start_background().unwrap();
    let mut t = start(
        &mock,
        json!({"everything": everything_entry(&modules)}),
        &[],
        |b| b,
    );
    status(&mut t, "everything", "ready");
    let switched = t.request(json!({"type": "switch_session", "sessionPath": file}));
    assert_eq!(switched["success"], true, "{switched}");
    // The server asks for the roots again when told they changed; it may take a moment.
    let wanted = format!("file://{}", other.display());
    let mut text = String::new();
    for _ in 0..20 {
        mock.push(Reply::new().tool_call("r1", "everything_get-roots-list", json!({})));
        mock.push(Reply::text("done"));
        let (ends, _) = run_answering(&mut t, "roots?", |_, _| {});
        text = text_of(&ends[0]);
        if text.contains(&wanted) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(text.contains(&wanted), "{text}");
    stop(t);
}

/// tau in ACP mode for an editor with `capabilities`, with a session whose servers are the
/// editor's (`server-everything`); the session id.
fn acp_session(
    mock: &tau_mock_llm::BackgroundMock,
    modules: &std::path::Path,
    capabilities: Value,
) -> (crate::acp::Acp, String) {
    let mut acp = crate::acp::Acp::spawn(
        crate::acp::acp_tau()
            .agent_file("models.json", crate::mock_models(mock))
            .arg("--permission-mode")
            .arg("allowAll"),
    );
    acp.initialize_with(capabilities);
    let script = modules.join("server-everything/dist/index.js");
    let cwd = acp.cwd();
    let response = acp.request(
        "session/new",
        json!({"cwd": cwd, "mcpServers": [{"name": "everything", "command": "node",
            "args": [script.display().to_string(), "stdio"], "env": []}]}),
    );
    let session = response["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("{response}"))
        .to_string();
    (acp, session)
}

/// The text of the completed tool call among `seen`.
fn completed_call(seen: &[Value]) -> String {
    crate::acp::updates(seen)
        .iter()
        .find(|u| crate::acp::kind_of(u) == "tool_call_update" && u["status"] == "completed")
        .map(|u| u["content"].to_string())
        .unwrap_or_else(|| panic!("no completed call: {seen:?}"))
}

#[test]
fn acp_an_editor_that_draws_forms_gets_the_servers_form() {
    let Some(modules) = installed() else {
        return;
    };
    let mock = MockServer::start_background().unwrap();
    mock.push(Reply::new().tool_call("e1", "everything_trigger-elicitation-request", json!({})));
    mock.push(Reply::text("thanks"));
    let (mut acp, session) = acp_session(&mock, &modules, json!({"elicitation": {"form": {}}}));
    let id = crate::acp::prompt(&mut acp, &session, "fill it in");
    let asked = acp.wait_notification(|v| v["method"] == "elicitation/create");
    assert_eq!(asked["params"]["mode"], "form", "{asked}");
    assert_eq!(asked["params"]["sessionId"], session.as_str(), "{asked}");
    assert!(
        asked["params"]["requestedSchema"]["properties"]["name"].is_object(),
        "{asked}"
    );
    acp.send(&json!({"jsonrpc": "2.0", "id": asked["id"],
        "result": {"action": "accept", "content": {"name": "Ada Lovelace", "check": true}}}));
    let seen = acp.until_response(id);
    let done = completed_call(&seen);
    assert!(done.contains("Name: Ada Lovelace"), "{done}");
    assert!(done.contains("Agreed to terms: true"), "{done}");
    assert!(acp.close().success());
}

#[test]
fn acp_sampling_is_a_permission_request_and_an_editor_without_forms_gets_none() {
    let Some(modules) = installed() else {
        return;
    };
    let mock = MockServer::start_background().unwrap();
    mock.push(Reply::new().tool_call(
        "s1",
        "everything_trigger-sampling-request",
        json!({"prompt": "name a colour", "maxTokens": 20}),
    ));
    mock.push(Reply::text("teal, says the model"));
    mock.push(Reply::text("done"));
    let (mut acp, session) = acp_session(&mock, &modules, json!({}));
    let id = crate::acp::prompt(&mut acp, &session, "sample");
    let asked = acp.wait_notification(|v| v["method"] == "session/request_permission");
    assert!(
        asked["params"]["toolCall"]
            .to_string()
            .contains("name a colour"),
        "{asked}"
    );
    acp.send(&json!({"jsonrpc": "2.0", "id": asked["id"],
        "result": {"outcome": {"outcome": "selected", "optionId": "allow"}}}));
    let seen = acp.until_response(id);
    let done = completed_call(&seen);
    assert!(done.contains("teal, says the model"), "{done}");
    // No forms offered to this editor: the server did not register its form tool.
    let offered = mock.requests()[0].body.to_string();
    assert!(
        !offered.contains("trigger-elicitation-request"),
        "{offered}"
    );
    assert!(offered.contains("trigger-sampling-request"), "{offered}");
    assert!(acp.close().success());
}
