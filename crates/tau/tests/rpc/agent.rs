//! Prompting through the binary against tau-mock-llm: the event order of a run, thinking,
//! steering and follow-ups during streaming, the busy error, abort, provider errors, tool
//! calls to unknown tools, and U+2028 inside a prompt.

use std::time::Duration;

use serde_json::{Value, json};
use tau_mock_llm::{BackgroundMock, Fault, MockServer, Reply};
use tau_test_kit::Tau;

use crate::{ready_tau, tau};

/// A mock and a tau whose only model streams from it (openai-completions).
fn setup() -> (BackgroundMock, Tau) {
    setup_with("openai-completions")
}

fn setup_with(api: &str) -> (BackgroundMock, Tau) {
    setup_args(api, &[])
}

fn setup_args(api: &str, args: &[&str]) -> (BackgroundMock, Tau) {
    setup_full(api, args, |b| b)
}

fn setup_full(
    api: &str,
    args: &[&str],
    extra: impl FnOnce(tau_test_kit::TauBuilder) -> tau_test_kit::TauBuilder,
) -> (BackgroundMock, Tau) {
    let mock = MockServer::start_background().unwrap();
    let base = match api {
        "anthropic-messages" => mock.url(),
        "google-generative-ai" => format!("{}/v1beta", mock.url()),
        _ => format!("{}/v1", mock.url()),
    };
    let models = json!({"providers": {"mock": {
        "baseUrl": base, "api": api, "apiKey": "mock-key",
        "models": [{"id": "mock-1", "reasoning": true, "contextWindow": 100000, "maxTokens": 4096}],
    }}});
    let mut builder = extra(tau())
        .agent_file("models.json", models.to_string())
        .arg("--no-session");
    for arg in args {
        builder = builder.arg(*arg);
    }
    (mock, ready_tau(builder))
}

fn kinds_until_settled(t: &mut Tau) -> Vec<Value> {
    let mut out = Vec::new();
    loop {
        let record = t
            .next_record(Duration::from_secs(15))
            .expect("the run ends with agent_settled");
        let json = record.json.expect("JSON records");
        let done = json["type"] == "agent_settled";
        out.push(json);
        if done {
            return out;
        }
    }
}

fn types(records: &[Value]) -> Vec<String> {
    records
        .iter()
        .map(|r| {
            let kind = r["type"].as_str().unwrap_or_default();
            match kind {
                "message_update" => format!(
                    "update:{}",
                    r["assistantMessageEvent"]["type"].as_str().unwrap_or("?")
                ),
                "message_start" | "message_end" => {
                    format!("{kind}:{}", r["message"]["role"].as_str().unwrap_or("?"))
                }
                "response" => format!("response:{}", r["command"].as_str().unwrap_or("?")),
                other => other.to_string(),
            }
        })
        .collect()
}

#[test]
fn a_text_reply_streams_in_pi_order() {
    let (mock, mut t) = setup();
    mock.push(
        Reply::new()
            .with_text("Hello world")
            .chunk_size(5)
            .usage(12, 3, 0, 0),
    );
    t.send(&json!({"id": "p", "type": "prompt", "message": "Say hi"}));
    let records = kinds_until_settled(&mut t);
    assert_eq!(
        types(&records),
        [
            "response:prompt",
            "agent_start",
            "turn_start",
            "message_start:user",
            "message_end:user",
            "message_start:assistant",
            "update:text_start",
            "update:text_delta",
            "update:text_delta",
            "update:text_delta",
            "update:text_end",
            "message_end:assistant",
            "turn_end",
            "agent_end",
            "agent_settled",
        ]
    );
    assert_eq!(records[0]["data"], json!({"disposition": "started"}));
    let end = &records[11]["message"];
    assert_eq!(
        end["content"],
        json!([{"type": "text", "text": "Hello world"}])
    );
    assert_eq!(end["stopReason"], "stop");
    assert_eq!(end["usage"]["input"], 12);
    assert_eq!(end["provider"], "mock");
    assert_eq!(records[13]["willRetry"], false);
    assert_eq!(records[13]["messages"].as_array().unwrap().len(), 2);
    // message_update carries the delta, and the snapshot twice (document 004's shape).
    let update = &records[7];
    let keys: Vec<&str> = update
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["type", "assistantMessageEvent", "message"]);
    assert_eq!(update["assistantMessageEvent"]["delta"], "Hello");
    assert_eq!(
        update["assistantMessageEvent"]["partial"],
        update["message"]
    );
    assert_eq!(update["message"]["content"][0]["text"], "Hello");

    let messages = t.request(json!({"type": "get_messages"}))["data"]["messages"].clone();
    assert_eq!(messages.as_array().unwrap().len(), 2);
    assert_eq!(messages[0]["content"][0]["text"], "Say hi");
    let last = t.request(json!({"type": "get_last_assistant_text"}));
    assert_eq!(last["data"], json!({"text": "Hello world"}));
    let state = t.request(json!({"type": "get_state"}))["data"].clone();
    assert_eq!(state["isStreaming"], false);
    assert_eq!(state["messageCount"], 2);
    // What the provider received: the system prompt, then the user message.
    let body = &mock.requests()[0].body;
    assert_eq!(body["model"], "mock-1");
    assert!(
        body["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("Current working directory")
    );
    assert_eq!(body["messages"][1]["content"][0]["text"], "Say hi");
}

#[test]
fn thinking_streams_on_every_api() {
    for api in [
        "anthropic-messages",
        "openai-completions",
        "openai-responses",
        "google-generative-ai",
    ] {
        let (mock, mut t) = setup_with(api);
        mock.push(
            Reply::new()
                .thinking_signed("Pondering.", "sig")
                .with_text("Done."),
        );
        t.send(&json!({"id": "p", "type": "prompt", "message": "think"}));
        let records = kinds_until_settled(&mut t);
        let kinds = types(&records);
        assert!(
            kinds.contains(&"update:thinking_start".to_string()),
            "{api}: {kinds:?}"
        );
        let end = records
            .iter()
            .find(|r| r["type"] == "message_end" && r["message"]["role"] == "assistant")
            .unwrap();
        assert_eq!(end["message"]["content"][0]["type"], "thinking", "{api}");
        assert_eq!(
            end["message"]["content"][0]["thinking"], "Pondering.",
            "{api}"
        );
        assert_eq!(end["message"]["content"][1]["text"], "Done.", "{api}");
    }
}

#[test]
fn busy_prompt_steering_and_follow_up() {
    let (mock, mut t) = setup();
    mock.push(
        Reply::new()
            .with_text("abcdefghij")
            .chunk_size(1)
            .chunk_delay_ms(40),
    );
    mock.push(Reply::text("after steer"));
    mock.push(Reply::text("after follow-up"));
    t.send(&json!({"id": "p", "type": "prompt", "message": "slow"}));
    t.event("message_start");
    // The reply is streaming, so the run's first steering poll is behind us.
    t.event("message_update");
    let busy = t.request(json!({"type": "prompt", "message": "no behavior"}));
    assert_eq!(
        busy["error"],
        "Agent is already processing. Specify streamingBehavior ('steer' or 'followUp') to queue the message."
    );
    t.send(&json!({"id": "s", "type": "steer", "message": "S1"}));
    t.send(&json!({"id": "f", "type": "prompt", "message": "F1", "streamingBehavior": "followUp"}));
    let records = kinds_until_settled(&mut t);
    let kinds = types(&records);
    let users: Vec<&str> = records
        .iter()
        .filter(|r| r["type"] == "message_start" && r["message"]["role"] == "user")
        .map(|r| r["message"]["content"][0]["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        users,
        ["S1", "F1"],
        "steering first, then the follow-up: {kinds:?}"
    );
    assert_eq!(
        kinds.iter().filter(|k| *k == "agent_start").count(),
        1,
        "one run: {kinds:?}"
    );
    assert_eq!(kinds.iter().filter(|k| *k == "turn_end").count(), 3);
    let updates: Vec<&Value> = records
        .iter()
        .filter(|r| r["type"] == "queue_update")
        .collect();
    assert!(updates.len() >= 3, "{kinds:?}");
    assert_eq!(updates.last().unwrap()["followUp"], json!([]));
    let responses: Vec<&Value> = records
        .iter()
        .filter(|r| r["type"] == "response" && (r["id"] == "s" || r["id"] == "f"))
        .collect();
    assert_eq!(responses.len(), 2);
    assert!(
        responses
            .iter()
            .all(|r| r["data"]["disposition"] == "queued")
    );
    // The steering message reached the model after the first reply.
    let second = &mock.requests()[1].body["messages"];
    let texts = second.to_string();
    assert!(texts.contains("abcdefghij") && texts.contains("S1"));
}

#[test]
fn abort_mid_stream_ends_the_run_properly() {
    let (mock, mut t) = setup();
    mock.push(
        Reply::new()
            .with_text("x".repeat(400))
            .chunk_size(1)
            .chunk_delay_ms(20),
    );
    t.send(&json!({"id": "p", "type": "prompt", "message": "long"}));
    t.wait_for("a text delta", Duration::from_secs(15), |r| {
        r.json
            .as_ref()
            .is_some_and(|j| j["assistantMessageEvent"]["type"] == "text_delta")
    });
    let started = std::time::Instant::now();
    t.send(&json!({"id": "a", "type": "abort"}));
    let records = kinds_until_settled(&mut t);
    let abort = t.response("a");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(abort["success"], true);
    let end = records
        .iter()
        .find(|r| r["type"] == "message_end" && r["message"]["role"] == "assistant")
        .expect("the aborted message ends");
    assert_eq!(end["message"]["stopReason"], "aborted");
    assert_eq!(end["message"]["errorMessage"], "Request was aborted");
    let kinds = types(&records);
    let tail: Vec<&str> = kinds.iter().map(String::as_str).rev().take(3).collect();
    assert_eq!(tail, ["agent_settled", "agent_end", "turn_end"]);
    let settled = records.last().unwrap();
    assert_eq!(settled["aborted"], true);
    assert_eq!(
        t.request(json!({"type": "get_state"}))["data"]["isStreaming"],
        false
    );
}

#[test]
fn a_provider_error_ends_the_run_and_tau_stays_ready() {
    let (mock, mut t) = setup();
    // Without automatic retry (tests/rpc/retry.rs covers it) the error ends the prompt.
    t.request(json!({"type": "set_auto_retry", "enabled": false}));
    mock.push(Reply::fault(Fault::ServerError));
    mock.push(Reply::text("recovered"));
    t.send(&json!({"id": "p", "type": "prompt", "message": "fail please"}));
    let records = kinds_until_settled(&mut t);
    let end = records
        .iter()
        .find(|r| r["type"] == "message_end" && r["message"]["role"] == "assistant")
        .unwrap();
    assert_eq!(end["message"]["stopReason"], "error");
    assert!(
        end["message"]["errorMessage"]
            .as_str()
            .unwrap()
            .starts_with("500 ")
    );
    assert!(types(&records).contains(&"agent_end".to_string()));
    t.send(&json!({"id": "p2", "type": "prompt", "message": "again"}));
    let records = kinds_until_settled(&mut t);
    let end = records
        .iter()
        .find(|r| r["type"] == "message_end" && r["message"]["role"] == "assistant")
        .unwrap();
    assert_eq!(end["message"]["content"][0]["text"], "recovered");
}

#[test]
fn unknown_tools_get_an_error_result_and_the_loop_continues() {
    let (mock, mut t) = setup();
    mock.push(
        Reply::new()
            .tool_call("call_1", "frobnicate", json!({"x": 1}))
            .tool_call("call_2", "other", json!({})),
    );
    mock.push(Reply::text("I could not use those tools."));
    t.send(&json!({"id": "p", "type": "prompt", "message": "use tools"}));
    let records = kinds_until_settled(&mut t);
    let kinds = types(&records);
    let starts: Vec<&Value> = records
        .iter()
        .filter(|r| r["type"] == "tool_execution_start")
        .collect();
    assert_eq!(starts.len(), 2);
    assert_eq!(starts[0]["toolCallId"], "call_1");
    assert_eq!(starts[0]["args"], json!({"x": 1}));
    let ends: Vec<&Value> = records
        .iter()
        .filter(|r| r["type"] == "tool_execution_end")
        .collect();
    assert_eq!(ends[0]["isError"], true);
    assert_eq!(
        ends[0]["result"]["content"][0]["text"],
        "Tool frobnicate not found"
    );
    let results: Vec<&Value> = records
        .iter()
        .filter(|r| r["type"] == "message_end" && r["message"]["role"] == "toolResult")
        .collect();
    assert_eq!(results.len(), 2, "{kinds:?}");
    assert_eq!(results[0]["message"]["toolCallId"], "call_1", "call order");
    assert_eq!(results[1]["message"]["toolCallId"], "call_2");
    let turn_end = records.iter().find(|r| r["type"] == "turn_end").unwrap();
    assert_eq!(turn_end["toolResults"].as_array().unwrap().len(), 2);
    assert_eq!(turn_end["toolResults"][0]["role"], "toolResult");
    assert_eq!(kinds.iter().filter(|k| *k == "turn_start").count(), 2);
    let agent_end = records.iter().find(|r| r["type"] == "agent_end").unwrap();
    assert_eq!(agent_end["messages"].as_array().unwrap().len(), 5);
    // The second request carried the tool results back to the model.
    let second = mock.requests()[1].body["messages"].to_string();
    assert!(second.contains("Tool frobnicate not found"));
}

#[test]
fn line_separators_survive_a_round_trip() {
    let (mock, mut t) = setup();
    mock.push(Reply::text("out\u{2028}put\u{2029}"));
    t.send_raw("{\"id\":\"p\",\"type\":\"prompt\",\"message\":\"in\u{2028}put\"}\n".as_bytes());
    let records = kinds_until_settled(&mut t);
    let user = records
        .iter()
        .find(|r| r["type"] == "message_end" && r["message"]["role"] == "user")
        .unwrap();
    assert_eq!(user["message"]["content"][0]["text"], "in\u{2028}put");
    let assistant = records
        .iter()
        .find(|r| r["type"] == "message_end" && r["message"]["role"] == "assistant")
        .unwrap();
    assert_eq!(
        assistant["message"]["content"][0]["text"],
        "out\u{2028}put\u{2029}"
    );
    let raw_line = t
        .history()
        .iter()
        .find(|r| {
            r.json
                .as_ref()
                .is_some_and(|j| j["type"] == "message_end" && j["message"]["role"] == "assistant")
        })
        .unwrap()
        .raw
        .clone();
    assert!(
        String::from_utf8(raw_line)
            .unwrap()
            .contains("out\u{2028}put"),
        "written raw"
    );
    assert!(
        mock.requests()[0]
            .body
            .to_string()
            .contains("in\u{2028}put")
    );
}

#[test]
fn closing_stdin_lets_the_run_finish() {
    let (mock, mut t) = setup();
    mock.push(
        Reply::new()
            .with_text("finishing after EOF")
            .chunk_size(4)
            .chunk_delay_ms(10),
    );
    t.send(&json!({"id": "p", "type": "prompt", "message": "go"}));
    t.close_stdin();
    let records = kinds_until_settled(&mut t);
    assert!(types(&records).contains(&"agent_end".to_string()));
    assert!(t.wait_exit(Duration::from_secs(15)).success());
}

#[test]
fn lean_message_updates_when_asked() {
    let (mock, mut t) = setup_args("openai-completions", &["--message-updates", "lean"]);
    mock.push(
        Reply::new()
            .with_text("Hi")
            .tool_call("call_1", "bash", json!({"command": "ls"})),
    );
    mock.push(Reply::text("done"));
    t.send(&json!({"id": "p", "type": "prompt", "message": "go"}));
    let records = kinds_until_settled(&mut t);
    let updates: Vec<&Value> = records
        .iter()
        .filter(|r| r["type"] == "message_update")
        .collect();
    assert!(!updates.is_empty());
    for update in &updates {
        let keys: Vec<&str> = update
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys, ["type", "usage", "assistantMessageEvent"], "{update}");
        assert!(update["assistantMessageEvent"].get("partial").is_none());
    }
    let start = updates
        .iter()
        .find(|u| u["assistantMessageEvent"]["type"] == "toolcall_start")
        .unwrap();
    assert_eq!(start["assistantMessageEvent"]["id"], "call_1");
    assert_eq!(start["assistantMessageEvent"]["toolName"], "bash");
}

#[test]
fn full_updates_follow_document_004() {
    let (mock, mut t) = setup();
    mock.push(Reply::new().tool_call("call_1", "bash", json!({"command": "ls"})));
    mock.push(Reply::text("done"));
    t.send(&json!({"id": "p", "type": "prompt", "message": "go"}));
    let records = kinds_until_settled(&mut t);
    let start = records
        .iter()
        .find(|r| {
            r["type"] == "message_update" && r["assistantMessageEvent"]["type"] == "toolcall_start"
        })
        .unwrap();
    let event_keys: Vec<&str> = start["assistantMessageEvent"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(event_keys, ["type", "contentIndex", "partial"]);
    let end = records
        .iter()
        .find(|r| {
            r["type"] == "message_update" && r["assistantMessageEvent"]["type"] == "toolcall_end"
        })
        .unwrap();
    assert_eq!(
        end["assistantMessageEvent"]["toolCall"]["arguments"],
        json!({"command": "ls"})
    );
    assert_eq!(
        end["message"]["content"][0]["arguments"],
        json!({"command": "ls"})
    );
    assert_eq!(end["message"], end["assistantMessageEvent"]["partial"]);
}

fn echo_tool() -> Value {
    json!({"type": "set_host_tools", "tools": [{
        "name": "echo_host", "description": "Echo a value from the host",
        "parameters": {"type": "object", "properties": {"message": {"type": "string"}, "times": {"type": "integer"}},
                       "required": ["message"], "additionalProperties": false}
    }]})
}

#[test]
fn host_tool_round_trip() {
    let (mock, mut t) = setup();
    assert_eq!(
        t.request(echo_tool())["data"],
        json!({"toolNames": ["echo_host"]})
    );
    mock.push(Reply::new().tool_call(
        "call_1",
        "echo_host",
        json!({"message": "hello", "times": "2"}),
    ));
    mock.push(Reply::text("The host said hello."));
    t.send(&json!({"id": "p", "type": "prompt", "message": "use the host tool"}));
    let call = t.event("host_tool_call");
    assert_eq!(call["toolCallId"], "call_1");
    assert_eq!(call["toolName"], "echo_host");
    assert_eq!(
        call["arguments"],
        json!({"message": "hello", "times": 2}),
        "coerced before the host sees it"
    );
    let id = call["id"].as_str().unwrap().to_string();
    assert_eq!(id.len(), 16);
    t.send(&json!({"type": "host_tool_update", "id": id, "partialResult": {"content": [{"type": "text", "text": "working"}]}}));
    t.send(&json!({"type": "host_tool_result", "id": id, "result": {"content": [{"type": "text", "text": "hello hello"}], "details": {"n": 2}}}));
    let records = kinds_until_settled(&mut t);
    let update = records
        .iter()
        .find(|r| r["type"] == "tool_execution_update")
        .unwrap();
    assert_eq!(update["partialResult"]["content"][0]["text"], "working");
    let end = records
        .iter()
        .find(|r| r["type"] == "tool_execution_end")
        .unwrap();
    assert_eq!(end["isError"], false);
    assert_eq!(
        end["result"],
        json!({"content": [{"type": "text", "text": "hello hello"}], "details": {"n": 2}})
    );
    assert!(
        mock.requests()[0].body.to_string().contains("echo_host"),
        "the tool is offered"
    );
    assert!(
        mock.requests()[1].body.to_string().contains("hello hello"),
        "the result reaches the model"
    );
}

#[test]
fn host_tool_errors_validation_and_abort() {
    let (mock, mut t) = setup();
    t.request(echo_tool());
    // An error result: texts joined, images and details dropped.
    mock.push(Reply::new().tool_call("c1", "echo_host", json!({"message": "x"})));
    mock.push(Reply::text("ok"));
    t.send(&json!({"id": "p", "type": "prompt", "message": "go"}));
    let id = t.event("host_tool_call")["id"]
        .as_str()
        .unwrap()
        .to_string();
    t.send(&json!({"type": "host_tool_result", "id": id, "isError": true,
                   "result": {"content": [{"type": "text", "text": " broke "}, {"type": "text", "text": "badly"}], "details": {"x": 1}}}));
    let records = kinds_until_settled(&mut t);
    let end = records
        .iter()
        .find(|r| r["type"] == "tool_execution_end")
        .unwrap();
    assert_eq!(end["isError"], true);
    assert_eq!(end["result"]["content"][0]["text"], "broke \nbadly");
    assert_eq!(end["result"]["details"], json!({}));

    // Invalid arguments never reach the host.
    mock.push(Reply::new().tool_call("c2", "echo_host", json!({"wrong": true})));
    mock.push(Reply::text("ok"));
    t.send(&json!({"id": "p2", "type": "prompt", "message": "go"}));
    let records = kinds_until_settled(&mut t);
    assert!(!records.iter().any(|r| r["type"] == "host_tool_call"));
    let end = records
        .iter()
        .find(|r| r["type"] == "tool_execution_end")
        .unwrap();
    let text = end["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("Validation failed for tool \"echo_host\":"),
        "{text}"
    );
    assert!(text.contains("Received arguments:"), "{text}");

    // Abort while the host works: a cancel frame names the call.
    mock.push(Reply::new().tool_call("c3", "echo_host", json!({"message": "slow"})));
    t.send(&json!({"id": "p3", "type": "prompt", "message": "go"}));
    let id = t.event("host_tool_call")["id"]
        .as_str()
        .unwrap()
        .to_string();
    t.send(&json!({"id": "a", "type": "abort"}));
    let cancel = t.event("host_tool_cancel");
    assert_eq!(cancel["targetId"], id);
    assert_ne!(cancel["id"], id);
    let records = kinds_until_settled(&mut t);
    let end = records
        .iter()
        .find(|r| r["type"] == "tool_execution_end")
        .unwrap();
    assert_eq!(
        end["result"]["content"][0]["text"],
        "Host tool \"echo_host\" was aborted"
    );
    assert_eq!(t.response("a")["success"], true);
    // A late result for the cancelled call is ignored.
    t.send(&json!({"type": "host_tool_result", "id": id, "result": {"content": []}}));
    assert_eq!(
        t.request(json!({"type": "get_state"}))["data"]["isStreaming"],
        false
    );
}

fn system_prompt_sent(mock: &BackgroundMock) -> String {
    mock.requests()[0].body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn the_system_prompt_carries_tools_context_files_and_appends() {
    let (mock, mut t) = setup_full(
        "openai-completions",
        &["--append-system-prompt", "APPENDED RULE"],
        |b| {
            b.agent_file("AGENTS.md", "GLOBAL RULES")
                .cwd_file("AGENTS.md", "PROJECT RULES")
                .cwd_file("CLAUDE.md", "NOT LOADED")
        },
    );
    t.request(echo_tool());
    mock.push(Reply::text("ok"));
    t.send(&json!({"id": "p", "type": "prompt", "message": "hi"}));
    kinds_until_settled(&mut t);
    let prompt = system_prompt_sent(&mock);
    assert!(
        prompt.starts_with("You are an expert coding assistant working inside tau"),
        "{prompt}"
    );
    assert!(
        prompt.contains("- echo_host: Echo a value from the host"),
        "{prompt}"
    );
    assert!(prompt.contains("APPENDED RULE"));
    let global = prompt.find("GLOBAL RULES").unwrap();
    let project = prompt.find("PROJECT RULES").unwrap();
    assert!(global < project, "agent dir first, then the project");
    assert!(
        !prompt.contains("NOT LOADED"),
        "AGENTS.md wins over CLAUDE.md"
    );
    assert!(prompt.contains("\nCurrent working directory: "));

    let (mock, mut t) = setup_full(
        "openai-completions",
        &["--system-prompt", "CUSTOM PROMPT", "-nc"],
        |b| b.cwd_file("AGENTS.md", "PROJECT RULES"),
    );
    mock.push(Reply::text("ok"));
    t.send(&json!({"id": "p", "type": "prompt", "message": "hi"}));
    kinds_until_settled(&mut t);
    let prompt = system_prompt_sent(&mock);
    assert!(
        prompt.starts_with("CUSTOM PROMPT\nCurrent date: "),
        "{prompt}"
    );
    assert!(!prompt.contains("PROJECT RULES"), "--no-context-files");
}

#[test]
fn set_locale_and_prompt_locale_shape_the_next_system_prompt() {
    let (mock, mut t) = setup();
    let response = t.request(json!({"type": "set_locale", "locale": "de_DE.UTF-8"}));
    assert_eq!(response["success"], true);
    assert!(response.get("data").is_none(), "{response}");
    mock.push(Reply::text("ok"));
    t.send(&json!({"id": "p", "type": "prompt", "message": "hi"}));
    kinds_until_settled(&mut t);
    let first = mock.requests()[0].body["messages"][0]["content"].to_string();
    assert!(first.contains("German (de-DE)"), "{first}");

    mock.push(Reply::text("ok"));
    t.send(&json!({"id": "p2", "type": "prompt", "message": "salut", "locale": "fr"}));
    kinds_until_settled(&mut t);
    let second = mock.requests()[1].body["messages"][0]["content"].to_string();
    assert!(
        second.contains("French (fr)") && !second.contains("German"),
        "{second}"
    );

    assert_eq!(
        t.request(json!({"type": "set_locale", "locale": ""}))["success"],
        true
    );
    mock.push(Reply::text("ok"));
    t.send(&json!({"id": "p3", "type": "prompt", "message": "hi"}));
    kinds_until_settled(&mut t);
    let third = mock.requests()[2].body["messages"][0]["content"].to_string();
    assert!(!third.contains("The user's language"), "{third}");
}

fn three_host_calls(mode: &str) -> (Vec<Value>, BackgroundMock) {
    let (mock, mut t) = setup();
    t.request(json!({"type": "set_interrupt_mode", "mode": mode}));
    t.request(echo_tool());
    mock.push(
        Reply::new()
            .tool_call("c1", "echo_host", json!({"message": "one"}))
            .tool_call("c2", "echo_host", json!({"message": "two"}))
            .tool_call("c3", "echo_host", json!({"message": "three"})),
    );
    mock.push(Reply::text("steered"));
    t.send(&json!({"id": "p", "type": "prompt", "message": "go"}));
    let calls: Vec<Value> = (0..3).map(|_| t.event("host_tool_call")).collect();
    t.send(&json!({"id": "s", "type": "steer", "message": "S1"}));
    t.event("queue_update");
    let answer = |t: &mut Tau, call: &Value| {
        t.send(&json!({"type": "host_tool_result", "id": call["id"],
            "result": {"content": [{"type": "text", "text": format!("done {}", call["arguments"]["message"])}]}}));
    };
    answer(&mut t, &calls[0]);
    if mode == "wait" {
        answer(&mut t, &calls[1]);
        answer(&mut t, &calls[2]);
    }
    let records = kinds_until_settled(&mut t);
    (records, mock)
}

#[test]
fn immediate_interrupt_mode_skips_the_rest_of_the_batch() {
    let (records, _mock) = three_host_calls("immediate");
    let cancels: Vec<&Value> = records
        .iter()
        .filter(|r| r["type"] == "host_tool_cancel")
        .collect();
    assert_eq!(cancels.len(), 2, "the two pending host calls are withdrawn");
    let results: Vec<&Value> = records
        .iter()
        .filter(|r| r["type"] == "message_end" && r["message"]["role"] == "toolResult")
        .collect();
    let texts: Vec<&str> = results
        .iter()
        .map(|r| r["message"]["content"][0]["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        texts,
        [
            "done \"one\"",
            "Skipped due to queued user message.",
            "Skipped due to queued user message."
        ]
    );
    assert_eq!(results[1]["message"]["isError"], true);
    let steer = records
        .iter()
        .position(|r| r["type"] == "message_start" && r["message"]["content"][0]["text"] == "S1")
        .expect("the steering message is delivered");
    let last_result = records
        .iter()
        .rposition(|r| r["type"] == "message_end" && r["message"]["role"] == "toolResult")
        .unwrap();
    assert!(steer > last_result);
}

#[test]
fn wait_interrupt_mode_lets_the_batch_finish() {
    let (records, _mock) = three_host_calls("wait");
    assert!(!records.iter().any(|r| r["type"] == "host_tool_cancel"));
    let texts: Vec<&str> = records
        .iter()
        .filter(|r| r["type"] == "message_end" && r["message"]["role"] == "toolResult")
        .map(|r| r["message"]["content"][0]["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["done \"one\"", "done \"two\"", "done \"three\""]);
    assert!(
        records
            .iter()
            .any(|r| r["type"] == "message_start" && r["message"]["content"][0]["text"] == "S1")
    );
}

#[test]
fn abort_keeps_the_queue_and_a_new_run_delivers_it() {
    let (mock, mut t) = setup();
    mock.push(
        Reply::new()
            .with_text("x".repeat(200))
            .chunk_size(1)
            .chunk_delay_ms(20),
    );
    mock.push(Reply::text("handled the follow-up"));
    t.send(&json!({"id": "p", "type": "prompt", "message": "long"}));
    // Abort once the mock is streaming (its first reply is then used up).
    t.wait_for("a text delta", Duration::from_secs(15), |r| {
        r.json
            .as_ref()
            .is_some_and(|j| j["assistantMessageEvent"]["type"] == "text_delta")
    });
    t.send(&json!({"id": "f", "type": "follow_up", "message": "F1"}));
    t.response("f");
    t.send(&json!({"id": "a", "type": "abort"}));
    let first = kinds_until_settled(&mut t);
    assert!(types(&first).contains(&"agent_end".to_string()));
    // pi's order: the aborted run ends, abort answers, then a new run starts with F1.
    let second = kinds_until_settled(&mut t);
    let kinds = types(&second);
    let abort_at = kinds
        .iter()
        .position(|k| k == "response:abort")
        .expect("abort answered");
    let start_at = kinds
        .iter()
        .position(|k| k == "agent_start")
        .expect("a new run");
    assert!(abort_at < start_at, "{kinds:?}");
    let user = second
        .iter()
        .find(|r| r["type"] == "message_start" && r["message"]["role"] == "user")
        .unwrap();
    assert_eq!(user["message"]["content"][0]["text"], "F1");
    let end = second
        .iter()
        .find(|r| r["type"] == "message_end" && r["message"]["role"] == "assistant")
        .unwrap();
    assert_eq!(
        end["message"]["content"][0]["text"],
        "handled the follow-up"
    );
}

#[test]
fn abort_before_the_first_token_and_abort_and_prompt() {
    let (mock, mut t) = setup();
    mock.push(Reply::text("never seen").delay_ms(5000));
    mock.push(Reply::text("the new answer"));
    t.send(&json!({"id": "p", "type": "prompt", "message": "slow start"}));
    t.event("agent_start");
    std::thread::sleep(Duration::from_millis(100));
    let started = std::time::Instant::now();
    t.send(&json!({"id": "ap", "type": "abort_and_prompt", "message": "instead"}));
    let aborted = kinds_until_settled(&mut t);
    let end = aborted
        .iter()
        .find(|r| r["type"] == "message_end" && r["message"]["role"] == "assistant")
        .unwrap();
    assert_eq!(end["message"]["stopReason"], "aborted");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "abort does not wait for the first byte"
    );
    let next = kinds_until_settled(&mut t);
    let kinds = types(&next);
    assert_eq!(kinds[0], "response:abort_and_prompt", "{kinds:?}");
    assert_eq!(next[0]["data"]["disposition"], "started");
    let end = next
        .iter()
        .find(|r| r["type"] == "message_end" && r["message"]["role"] == "assistant")
        .unwrap();
    assert_eq!(end["message"]["content"][0]["text"], "the new answer");
}

#[test]
fn steering_mode_all_delivers_every_queued_message_at_once() {
    let (mock, mut t) = setup();
    t.request(json!({"type": "set_steering_mode", "mode": "all"}));
    mock.push(
        Reply::new()
            .with_text("abcdef")
            .chunk_size(1)
            .chunk_delay_ms(40),
    );
    mock.push(Reply::text("both seen"));
    t.send(&json!({"id": "p", "type": "prompt", "message": "go"}));
    // The reply is streaming (not merely the prompt recorded): steering sent now waits for
    // the turn's end, where "all" delivers both at once. Before the first model call it
    // would join the first turn instead.
    t.event("message_update");
    t.request(json!({"type": "steer", "message": "S1"}));
    t.request(json!({"type": "steer", "message": "S2"}));
    let records = kinds_until_settled(&mut t);
    let kinds = types(&records);
    assert_eq!(
        kinds.iter().filter(|k| *k == "turn_start").count(),
        2,
        "the first turn and one more: {kinds:?}"
    );
    let users: Vec<&str> = records
        .iter()
        .filter(|r| r["type"] == "message_start" && r["message"]["role"] == "user")
        .map(|r| r["message"]["content"][0]["text"].as_str().unwrap())
        .collect();
    assert_eq!(users, ["go", "S1", "S2"]);
    assert_eq!(mock.requests().len(), 2);
}

fn tool_end<'a>(records: &'a [Value], id: &str) -> &'a Value {
    records
        .iter()
        .find(|r| r["type"] == "tool_execution_end" && r["toolCallId"] == id)
        .unwrap_or_else(|| panic!("no end for {id}: {:?}", types(records)))
}

fn result_text(end: &Value) -> String {
    end["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn every_built_in_tool_round_trips_through_the_binary() {
    let (mock, mut t) = setup_args(
        "openai-completions",
        &["--tools", "read,bash,edit,write,grep,find,ls"],
    );
    let steps = [
        (
            "w",
            "write",
            json!({"path": "notes.txt", "content": "hello\nworld\n"}),
        ),
        ("r", "read", json!({"path": "notes.txt"})),
        (
            "e",
            "edit",
            json!({"path": "notes.txt", "edits": [{"oldText": "world", "newText": "tau"}]}),
        ),
        ("b", "bash", json!({"command": "cat notes.txt"})),
        ("g", "grep", json!({"pattern": "tau"})),
        ("f", "find", json!({"pattern": "*.txt"})),
        ("l", "ls", json!({})),
    ];
    for (id, name, args) in &steps {
        mock.push(Reply::new().tool_call(*id, *name, args.clone()));
    }
    mock.push(Reply::text("all done"));
    t.send(&json!({"id": "p", "type": "prompt", "message": "exercise the tools"}));
    let records = kinds_until_settled(&mut t);
    for (id, name, _) in &steps {
        let end = tool_end(&records, id);
        assert_eq!(end["toolName"], *name);
        assert_eq!(end["isError"], false, "{name}: {end}");
    }
    assert_eq!(result_text(tool_end(&records, "r")), "hello\nworld\n");
    assert!(result_text(tool_end(&records, "e")).contains("notes.txt"));
    assert!(tool_end(&records, "e")["result"]["details"]["diff"].is_string());
    assert_eq!(result_text(tool_end(&records, "b")), "hello\ntau\n");
    assert!(
        result_text(tool_end(&records, "g")).contains("notes.txt:2: tau"),
        "{}",
        result_text(tool_end(&records, "g"))
    );
    assert!(result_text(tool_end(&records, "f")).contains("notes.txt"));
    assert!(result_text(tool_end(&records, "l")).contains("notes.txt"));
    assert_eq!(
        std::fs::read_to_string(t.cwd().join("notes.txt")).unwrap(),
        "hello\ntau\n"
    );
    // The bash tool streamed progress.
    assert!(
        records
            .iter()
            .any(|r| r["type"] == "tool_execution_update" && r["toolCallId"] == "b")
    );
    // Every tool was offered to the model with its schema.
    let offered: Vec<String> = mock.requests()[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        offered,
        ["read", "bash", "edit", "write", "grep", "find", "ls"]
    );
}

#[test]
fn parallel_tool_calls_report_results_in_call_order() {
    let (mock, mut t) = setup();
    mock.push(
        Reply::new()
            .tool_call("slow", "bash", json!({"command": "sleep 0.3; echo slow"}))
            .tool_call("fast", "bash", json!({"command": "echo fast"})),
    );
    mock.push(Reply::text("ok"));
    t.send(&json!({"id": "p", "type": "prompt", "message": "two at once"}));
    let records = kinds_until_settled(&mut t);
    let ends: Vec<&str> = records
        .iter()
        .filter(|r| r["type"] == "tool_execution_end")
        .map(|r| r["toolCallId"].as_str().unwrap())
        .collect();
    assert_eq!(ends, ["fast", "slow"], "ends in completion order");
    let results: Vec<&str> = records
        .iter()
        .filter(|r| r["type"] == "message_end" && r["message"]["role"] == "toolResult")
        .map(|r| r["message"]["toolCallId"].as_str().unwrap())
        .collect();
    assert_eq!(results, ["slow", "fast"], "results in call order");
}

#[test]
fn abort_during_a_long_bash_kills_it_quickly() {
    let (mock, mut t) = setup();
    // A duration unique to this test process: `pgrep` below must not see another run's.
    let command = format!("sleep 30.{}; echo never", std::process::id());
    mock.push(Reply::new().tool_call("b", "bash", json!({"command": command})));
    t.send(&json!({"id": "p", "type": "prompt", "message": "wait"}));
    t.event("tool_execution_start");
    std::thread::sleep(Duration::from_millis(200));
    let started = std::time::Instant::now();
    t.send(&json!({"id": "a", "type": "abort"}));
    let records = kinds_until_settled(&mut t);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let end = tool_end(&records, "b");
    assert_eq!(end["isError"], true);
    assert!(
        result_text(end).ends_with("Command aborted"),
        "{}",
        result_text(end)
    );
    let last = records
        .iter()
        .rev()
        .find(|r| r["type"] == "message_end" && r["message"]["role"] == "assistant")
        .unwrap();
    assert_eq!(last["message"]["stopReason"], "aborted");
    // No `sleep 30` is left behind.
    let ps = std::process::Command::new("pgrep")
        .args(["-f", &command])
        .output()
        .unwrap();
    assert!(
        ps.stdout.is_empty(),
        "orphan: {}",
        String::from_utf8_lossy(&ps.stdout)
    );
}

#[test]
fn line_separators_inside_a_tool_output_stay_raw() {
    let (mock, mut t) = setup();
    mock.push(Reply::new().tool_call(
        "b",
        "bash",
        json!({"command": "printf 'a\\342\\200\\250b\\342\\200\\251c'"}),
    ));
    mock.push(Reply::text("ok"));
    t.send(&json!({"id": "p", "type": "prompt", "message": "separators"}));
    let records = kinds_until_settled(&mut t);
    assert_eq!(result_text(tool_end(&records, "b")), "a\u{2028}b\u{2029}c");
    let raw = t
        .history()
        .iter()
        .find(|r| {
            r.json
                .as_ref()
                .is_some_and(|j| j["type"] == "tool_execution_end")
        })
        .unwrap()
        .raw
        .clone();
    let raw = String::from_utf8(raw).unwrap();
    assert!(
        raw.contains("a\u{2028}b\u{2029}c") && !raw.contains("\\u2028"),
        "{raw}"
    );
    assert!(mock.requests()[1].body.to_string().contains("a\u{2028}b"));
}

#[test]
fn follow_up_mode_all_delivers_every_follow_up_in_one_turn() {
    let (mock, mut t) = setup();
    t.request(json!({"type": "set_follow_up_mode", "mode": "all"}));
    mock.push(
        Reply::new()
            .with_text("abcdef")
            .chunk_size(1)
            .chunk_delay_ms(40),
    );
    mock.push(Reply::text("both follow-ups"));
    t.send(&json!({"id": "p", "type": "prompt", "message": "go"}));
    t.event("message_start");
    t.request(json!({"type": "follow_up", "message": "F1"}));
    t.request(json!({"type": "follow_up", "message": "F2"}));
    let records = kinds_until_settled(&mut t);
    let kinds = types(&records);
    assert_eq!(
        kinds.iter().filter(|k| *k == "turn_end").count(),
        2,
        "{kinds:?}"
    );
    assert_eq!(mock.requests().len(), 2);
    let second = mock.requests()[1].body["messages"].to_string();
    assert!(second.contains("F1") && second.contains("F2"));
}

#[test]
fn sigterm_during_a_long_bash_leaves_no_process_behind() {
    let (mock, mut t) = setup();
    // A duration unique to this test process: `pgrep` below must not see another run's.
    let command = format!("sleep 31.{}; echo never", std::process::id());
    mock.push(Reply::new().tool_call("b", "bash", json!({"command": command})));
    t.send(&json!({"id": "p", "type": "prompt", "message": "wait"}));
    t.event("tool_execution_start");
    std::thread::sleep(Duration::from_millis(200));
    t.signal(rustix::process::Signal::TERM);
    let status = t.wait_exit(Duration::from_secs(10));
    assert_eq!(status.code(), Some(143), "{}", t.stderr());
    let ps = std::process::Command::new("pgrep")
        .args(["-f", &command])
        .output()
        .unwrap();
    assert!(
        ps.stdout.is_empty(),
        "orphan: {}",
        String::from_utf8_lossy(&ps.stdout)
    );
}
