//! Compaction (rpc.md §8, §3.13, issue 7): the `compact` command, automatic compaction at the
//! threshold and after a context overflow (with the failed request sent again), and the
//! compacted context actually reaching the model.

use std::time::Duration;

use serde_json::{Value, json};
use tau_mock_llm::{BackgroundMock, Fault, MockServer, Reply};
use tau_test_kit::Tau;

use crate::{ready_tau, tau};

fn setup(context_window: u64, settings: Value) -> (BackgroundMock, Tau) {
    let mock = MockServer::start_background().unwrap();
    let models = json!({"providers": {"mock": {
        "baseUrl": format!("{}/v1", mock.url()), "api": "openai-completions", "apiKey": "k",
        "models": [{"id": "mock-1", "contextWindow": context_window, "maxTokens": 4096}],
    }}});
    let t = ready_tau(
        tau()
            .agent_file("models.json", models.to_string())
            .agent_file("settings.json", settings.to_string()),
    );
    (mock, t)
}

/// Records (message_update left out) until `agent_settled`.
fn until_settled(t: &mut Tau) -> Vec<Value> {
    let mut out = Vec::new();
    loop {
        let json = t
            .next_record(Duration::from_secs(15))
            .and_then(|r| r.json)
            .expect("a record");
        let done = json["type"] == "agent_settled";
        if json["type"] != "message_update" {
            out.push(json);
        }
        if done {
            return out;
        }
    }
}

fn exchange(mock: &BackgroundMock, t: &mut Tau, question: &str, answer: &str) -> Vec<Value> {
    mock.push(Reply::text(answer).usage(0, 0, 0, 0));
    t.send(&json!({"type": "prompt", "message": question}));
    until_settled(t)
}

/// Three long exchanges: enough history that compacting keeps only part of it.
fn three_exchanges(mock: &BackgroundMock, t: &mut Tau) {
    for n in ["first", "second", "third"] {
        exchange(
            mock,
            t,
            &long(&format!("{n}-question")),
            &long(&format!("{n}-answer")),
        );
    }
}

fn long(word: &str) -> String {
    format!("{} ", word).repeat(100)
}

fn system_of(request: &Value) -> String {
    request["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn compact_summarises_the_old_part_and_the_model_then_sees_the_summary() {
    let (mock, mut t) = setup(100_000, json!({"compaction": {"keepRecentTokens": 150}}));
    three_exchanges(&mock, &mut t);

    // The cut falls inside the last turn: one request for the history, one for the turn's start.
    mock.push(Reply::text("## Goal\nSUMMARY-TEXT"));
    mock.push(Reply::text("PREFIX-TEXT"));
    let response = t.request(json!({"type": "compact", "customInstructions": "mind the tests"}));
    assert_eq!(response["success"], true, "{response}");
    let data = &response["data"];
    assert!(
        data["summary"]
            .as_str()
            .unwrap()
            .starts_with("## Goal\nSUMMARY-TEXT"),
        "{data}"
    );
    assert!(
        data["firstKeptEntryId"]
            .as_str()
            .is_some_and(|id| id.len() == 8)
    );
    assert!(data["tokensBefore"].as_u64().unwrap() > 0);
    assert!(
        data["estimatedTokensAfter"].as_u64().unwrap() < data["tokensBefore"].as_u64().unwrap()
    );
    assert_eq!(
        data["details"],
        json!({"readFiles": [], "modifiedFiles": []})
    );
    let history = t.history();
    let events: Vec<&Value> = history
        .iter()
        .filter_map(|r| r.json.as_ref())
        .filter(|j| {
            j["type"]
                .as_str()
                .is_some_and(|k| k.starts_with("compaction_"))
        })
        .collect();
    assert_eq!(events.len(), 2);
    assert_eq!(
        events[0],
        &json!({"type": "compaction_start", "reason": "manual"})
    );
    assert_eq!(events[1]["result"], *data);
    assert_eq!(events[1]["willRetry"], false);

    // The summary request: no tools, our instructions, the old part of the conversation.
    let summary_request = mock.requests()[3].body.clone();
    assert!(summary_request.get("tools").is_none());
    let prompt = summary_request["messages"].to_string();
    assert!(prompt.contains("first-question") && prompt.contains("mind the tests"));
    assert!(!system_of(&summary_request).contains("expert coding assistant"));

    // Compacting again right away has nothing to do.
    let again = t.request(json!({"type": "compact"}));
    assert_eq!(again["success"], false);
    assert_eq!(again["error"], "Already compacted");

    // The next prompt sends the summary instead of the compacted messages.
    exchange(&mock, &mut t, "after compaction", "ok");
    let next = mock.requests()[5].body["messages"].to_string();
    assert!(next.contains("SUMMARY-TEXT"), "{next}");
    assert!(!next.contains("first-question"), "{next}");
    let messages = t.request(json!({"type": "get_messages"}))["data"]["messages"].clone();
    assert_eq!(messages[0]["role"], "compactionSummary");
    let file = t.request(json!({"type": "get_state"}))["data"]["sessionFile"]
        .as_str()
        .unwrap()
        .to_string();
    let text = std::fs::read_to_string(file).unwrap();
    assert_eq!(text.matches("\"type\":\"compaction\"").count(), 1);
}

#[test]
fn compact_on_a_small_session_fails_with_its_events() {
    let (mock, mut t) = setup(100_000, json!({}));
    exchange(&mock, &mut t, "hi", "hello");
    let response = t.request(json!({"type": "compact"}));
    assert_eq!(response["success"], false);
    assert_eq!(response["error"], "Nothing to compact (session too small)");
    let end = t
        .history()
        .iter()
        .filter_map(|r| r.json.clone())
        .find(|j| j["type"] == "compaction_end")
        .unwrap();
    assert_eq!(
        end["errorMessage"],
        "Compaction failed: Nothing to compact (session too small)"
    );
    assert_eq!(end["aborted"], false);
}

#[test]
fn passing_the_threshold_compacts_after_the_run() {
    let (mock, mut t) = setup(
        2000,
        json!({"compaction": {"reserveTokens": 500, "keepRecentTokens": 150}}),
    );
    exchange(&mock, &mut t, &long("one"), &long("uno"));
    mock.push(Reply::text(long("dos")).usage(1600, 20, 0, 0));
    mock.push(Reply::text("THRESHOLD-SUMMARY"));
    t.send(&json!({"type": "prompt", "message": long("two")}));
    let records = until_settled(&mut t);
    let kinds: Vec<&str> = records
        .iter()
        .map(|r| r["type"].as_str().unwrap())
        .collect();
    let at = kinds
        .iter()
        .position(|k| *k == "compaction_start")
        .expect("compaction_start");
    assert_eq!(
        &kinds[at - 1..],
        [
            "agent_end",
            "compaction_start",
            "auto_compaction_start",
            "compaction_end",
            "auto_compaction_end",
            "agent_settled"
        ]
    );
    assert_eq!(records[at]["reason"], "threshold");
    let end = &records[at + 2];
    assert_eq!(end["willRetry"], false);
    assert!(
        end["result"]["summary"]
            .as_str()
            .unwrap()
            .contains("THRESHOLD-SUMMARY")
    );
    // The summary request used the current model with a bounded budget.
    assert_eq!(mock.requests()[2].body["max_completion_tokens"], 400);
}

#[test]
fn an_overflow_is_compacted_and_the_request_sent_again_once() {
    let (mock, mut t) = setup(100_000, json!({"compaction": {"keepRecentTokens": 150}}));
    exchange(&mock, &mut t, &long("alpha"), &long("beta"));
    exchange(&mock, &mut t, &long("gamma"), &long("delta"));
    mock.push(Reply::fault(Fault::ContextOverflow));
    // The summary request itself overflows first; less input then fits.
    mock.push(Reply::fault(Fault::ContextOverflow));
    mock.push(Reply::text("OVERFLOW-SUMMARY"));
    // The cut falls inside the second turn: its start is summarised on its own.
    mock.push(Reply::text("PREFIX"));
    mock.push(Reply::text("answered after compaction"));
    t.send(&json!({"type": "prompt", "message": "the straw"}));
    let records = until_settled(&mut t);
    let kinds: Vec<&str> = records
        .iter()
        .map(|r| r["type"].as_str().unwrap())
        .collect();
    let at = kinds
        .iter()
        .position(|k| *k == "compaction_start")
        .expect("compaction_start");
    assert_eq!(records[at]["reason"], "overflow");
    assert_eq!(kinds[at - 1], "agent_end");
    assert_eq!(records[at - 1]["willRetry"], false);
    let end = records
        .iter()
        .find(|r| r["type"] == "compaction_end")
        .unwrap();
    assert_eq!(end["willRetry"], true, "{end}");
    assert_eq!(kinds[at + 4], "agent_start");
    let last = records
        .iter()
        .rev()
        .find(|r| r["type"] == "message_end" && r["message"]["role"] == "assistant")
        .unwrap();
    assert_eq!(
        last["message"]["content"][0]["text"],
        "answered after compaction",
        "{kinds:?}\n{last}\nrequests: {}",
        mock.requests().len()
    );
    let requests = mock.requests();
    assert_eq!(requests.len(), 7);
    // The shrunk summary request is shorter than the one that overflowed.
    assert!(requests[4].body.to_string().len() < requests[3].body.to_string().len());
    let resent = requests[6].body["messages"].to_string();
    assert!(
        resent.contains("OVERFLOW-SUMMARY") && resent.contains("the straw"),
        "{resent}"
    );
}

#[test]
fn compact_during_a_run_closes_the_run_first() {
    let (mock, mut t) = setup(100_000, json!({"compaction": {"keepRecentTokens": 150}}));
    exchange(&mock, &mut t, &long("first"), &long("answer"));
    exchange(&mock, &mut t, &long("second"), &long("reply"));
    mock.push(
        Reply::new()
            .with_text(long("slow"))
            .chunk_size(4)
            .chunk_delay_ms(30),
    );
    mock.push(Reply::text("RUN-SUMMARY"));
    mock.push(Reply::text("PREFIX"));
    t.send(&json!({"type": "prompt", "message": "third"}));
    t.event("message_update");
    let response = t.request(json!({"type": "compact"}));
    assert_eq!(response["success"], true, "{response}");
    let kinds: Vec<String> = t
        .history()
        .iter()
        .filter_map(|r| r.json.clone())
        .filter(|j| j["type"] != "message_update")
        .map(|j| {
            let kind = j["type"].as_str().unwrap_or_default().to_string();
            if kind == "message_end" {
                format!(
                    "message_end:{}",
                    j["message"]["stopReason"].as_str().unwrap_or("-")
                )
            } else {
                kind
            }
        })
        .collect();
    let from = kinds.iter().rposition(|k| k == "agent_start").unwrap();
    let tail: Vec<&str> = kinds[from..].iter().map(String::as_str).collect();
    let end = tail.iter().position(|k| *k == "agent_settled").unwrap();
    assert_eq!(
        tail[end - 3..end + 2],
        [
            "message_end:aborted",
            "turn_end",
            "agent_end",
            "agent_settled",
            "compaction_start"
        ],
        "{tail:?}"
    );
}

#[test]
fn set_auto_compaction_false_leaves_a_full_context_alone() {
    let (mock, mut t) = setup(
        2000,
        json!({"compaction": {"reserveTokens": 500, "keepRecentTokens": 150}}),
    );
    let r = t.request(json!({"type": "set_auto_compaction", "enabled": false}));
    assert_eq!(r["success"], true);
    exchange(&mock, &mut t, &long("one"), &long("uno"));
    mock.push(Reply::text(long("dos")).usage(1600, 20, 0, 0));
    t.send(&json!({"type": "prompt", "message": long("two")}));
    let records = until_settled(&mut t);
    assert!(
        !records
            .iter()
            .any(|r| r["type"].as_str().is_some_and(|k| k.contains("compaction"))),
        "{records:#?}"
    );
    assert_eq!(mock.requests().len(), 2, "no summary request");
    assert_eq!(
        t.request(json!({"type": "get_state"}))["data"]["autoCompactionEnabled"],
        false
    );
}

#[test]
fn get_state_reports_a_compaction_in_progress() {
    let (mock, mut t) = setup(
        2000,
        json!({"compaction": {"reserveTokens": 500, "keepRecentTokens": 150}}),
    );
    exchange(&mock, &mut t, &long("one"), &long("uno"));
    mock.push(Reply::text(long("dos")).usage(1600, 20, 0, 0));
    mock.push(Reply::text("SLOW-SUMMARY").delay_ms(500));
    t.send(&json!({"type": "prompt", "message": long("two")}));
    t.event("compaction_start");
    let during = t.request(json!({"type": "get_state"}))["data"]["isCompacting"].clone();
    assert_eq!(during, true);
    t.event("agent_settled");
    let after = t.request(json!({"type": "get_state"}))["data"]["isCompacting"].clone();
    assert_eq!(after, false);
}

/// Where the first record matching `pred` is in the history (panics when absent).
fn position_of(t: &Tau, what: &str, pred: impl Fn(&Value) -> bool) -> usize {
    t.history()
        .iter()
        .position(|r| r.json.as_ref().is_some_and(&pred))
        .unwrap_or_else(|| panic!("no {what} in the history"))
}

fn response_to(id: &'static str) -> impl Fn(&Value) -> bool {
    move |j: &Value| j["type"] == "response" && j["id"] == id
}

/// Issue 16: `compact` used to hold the input loop until the summary came back, so neither
/// `get_state` nor `abort` was answered and the compaction could not be stopped.
#[test]
fn compact_leaves_the_input_loop_free_and_abort_cancels_it() {
    let (mock, mut t) = setup(100_000, json!({"compaction": {"keepRecentTokens": 150}}));
    exchange(&mock, &mut t, &long("first"), &long("answer"));
    exchange(&mock, &mut t, &long("second"), &long("reply"));
    // A summary that would take a minute.
    mock.push(Reply::text("TOO-LATE").delay_ms(60_000));
    t.send(&json!({"id": "c", "type": "compact"}));
    t.event("compaction_start");
    std::thread::sleep(Duration::from_millis(300));
    t.send(&json!({"id": "s", "type": "get_state"}));
    t.send(&json!({"id": "a", "type": "abort"}));
    let state = t.response("s");
    assert_eq!(state["data"]["isCompacting"], true, "{state}");
    // Far below the summary's minute: the abort ended the compaction.
    let compacted = t.response_within("c", Duration::from_secs(15));
    assert_eq!(compacted["success"], false, "{compacted}");
    assert_eq!(compacted["error"], "Compaction cancelled");
    assert_eq!(t.response("a")["success"], true);
    let end = t
        .history()
        .iter()
        .filter_map(|r| r.json.clone())
        .find(|j| j["type"] == "compaction_end")
        .expect("compaction_end");
    assert_eq!(end["reason"], "manual");
    assert_eq!(end["aborted"], true, "{end}");
    assert!(end.get("errorMessage").is_none(), "{end}");
    assert_eq!(end["result"], Value::Null);
    // get_state was answered while compacting; the abort's answer waits for the end.
    let answered = position_of(&t, "get_state response", response_to("s"));
    let ended = position_of(&t, "compaction_end", |j| j["type"] == "compaction_end");
    let compact_answered = position_of(&t, "compact response", response_to("c"));
    let abort_answered = position_of(&t, "abort response", response_to("a"));
    assert!(
        answered < ended && ended < compact_answered && compact_answered < abort_answered,
        "{answered} {ended} {compact_answered} {abort_answered}"
    );
    let state = t.request(json!({"type": "get_state"}));
    assert_eq!(state["data"]["isCompacting"], false);
    assert_eq!(state["data"]["isStreaming"], false);
    let entries = t.request(json!({"type": "get_entries"}));
    assert!(
        !entries["data"]["entries"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["type"] == "compaction"),
        "nothing was written"
    );
    // Nothing was lost: compacting again works.
    mock.push(Reply::text("## Goal\nSECOND-TRY"));
    mock.push(Reply::text("PREFIX"));
    let again = t.request(json!({"type": "compact"}));
    assert_eq!(again["success"], true, "{again}");
}

/// A prompt sent during `compact` is neither refused nor run on the old context: it is
/// answered when the compaction has ended and its run sees the summary (T76).
#[test]
fn a_prompt_during_compact_runs_after_it_on_the_compacted_context() {
    let (mock, mut t) = setup(100_000, json!({"compaction": {"keepRecentTokens": 150}}));
    three_exchanges(&mock, &mut t);
    mock.push(Reply::text("## Goal\nSLOW-SUMMARY").delay_ms(500));
    mock.push(Reply::text("PREFIX-TEXT"));
    mock.push(Reply::text("answered after the compaction"));
    t.send(&json!({"id": "c", "type": "compact"}));
    t.event("compaction_start");
    t.send(&json!({"id": "p", "type": "prompt", "message": "next question"}));
    let compacted = t.response("c");
    assert_eq!(compacted["success"], true, "{compacted}");
    let prompted = t.response("p");
    assert_eq!(prompted["success"], true, "{prompted}");
    until_settled(&mut t);
    let ended = position_of(&t, "compaction_end", |j| j["type"] == "compaction_end");
    let compact_answered = position_of(&t, "compact response", response_to("c"));
    let prompt_answered = position_of(&t, "prompt response", response_to("p"));
    let started = t
        .history()
        .iter()
        .rposition(|r| r.json.as_ref().is_some_and(|j| j["type"] == "agent_start"))
        .unwrap();
    assert!(
        ended < compact_answered && compact_answered < prompt_answered && prompt_answered < started,
        "{ended} {compact_answered} {prompt_answered} {started}"
    );
    let requests = mock.requests();
    let last = requests.last().unwrap().body["messages"].to_string();
    assert!(last.contains("SLOW-SUMMARY"), "{last}");
    assert!(last.contains("next question"), "{last}");
    assert!(!last.contains("first-question"), "{last}");
    let messages = t.request(json!({"type": "get_messages"}))["data"]["messages"].clone();
    assert_eq!(messages[0]["role"], "compactionSummary");
    let last_text = t.request(json!({"type": "get_last_assistant_text"}));
    assert_eq!(last_text["data"]["text"], "answered after the compaction");
}

/// A follow-up queued during `compact` is delivered by a run that starts right after it.
#[test]
fn a_follow_up_queued_during_compact_is_delivered_after_it() {
    let (mock, mut t) = setup(100_000, json!({"compaction": {"keepRecentTokens": 150}}));
    three_exchanges(&mock, &mut t);
    mock.push(Reply::text("## Goal\nSUMMARY").delay_ms(500));
    mock.push(Reply::text("PREFIX-TEXT"));
    mock.push(Reply::text("the follow-up's answer"));
    t.send(&json!({"id": "c", "type": "compact"}));
    t.event("compaction_start");
    let queued = t.request(json!({"type": "prompt", "message": "queued meanwhile",
        "streamingBehavior": "followUp"}));
    assert_eq!(queued["data"]["disposition"], "queued", "{queued}");
    assert_eq!(t.response("c")["success"], true);
    let records = until_settled(&mut t);
    assert!(records.iter().any(|r| r["type"] == "agent_start"));
    let last = mock.requests().last().unwrap().body["messages"].to_string();
    assert!(
        last.contains("queued meanwhile") && last.contains("SUMMARY"),
        "{last}"
    );
    assert_eq!(
        t.request(json!({"type": "get_last_assistant_text"}))["data"]["text"],
        "the follow-up's answer"
    );
}
