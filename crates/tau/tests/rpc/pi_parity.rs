//! What a pi 0.79 client sees differently from pi, checked point by point (issue 12): a
//! prompt written the moment `agent_end` is read, `queue_update` placement, Anthropic's
//! `cacheWrite1h`, `clone` before any entry, `contextUsage` after a compaction, and the
//! `abort_retry` response order.

use std::time::Duration;

use serde_json::{Value, json};
use tau_mock_llm::{BackgroundMock, Fault, MockServer, Reply};
use tau_test_kit::{Tau, TauBuilder};

use crate::{ready_tau, tau};

fn start(
    api: &str,
    context_window: u64,
    settings: Value,
    extra: impl FnOnce(TauBuilder) -> TauBuilder,
) -> (BackgroundMock, Tau) {
    let mock = MockServer::start_background().unwrap();
    let base = match api {
        "anthropic-messages" => mock.url(),
        _ => format!("{}/v1", mock.url()),
    };
    let models = json!({"providers": {"mock": {
        "baseUrl": base, "api": api, "apiKey": "k",
        "models": [{"id": "mock-1", "contextWindow": context_window, "maxTokens": 4096}],
    }}});
    let builder = extra(
        tau()
            .agent_file("models.json", models.to_string())
            .agent_file("settings.json", settings.to_string()),
    );
    (mock, ready_tau(builder))
}

/// The next record that is not a `message_update`.
fn next(t: &mut Tau) -> Value {
    loop {
        let Some(json) = t.next_record(Duration::from_secs(15)).and_then(|r| r.json) else {
            let last: Vec<String> = t
                .history()
                .iter()
                .rev()
                .take(40)
                .filter_map(|r| r.json.as_ref().map(label))
                .collect();
            panic!(
                "no record within 15 s; the last ones, newest first: {last:?}\nstderr:\n{}",
                t.stderr()
            );
        };
        if json["type"] != "message_update" {
            return json;
        }
    }
}

/// A short name for a record: its type, the role of a message, the id of a response.
fn label(record: &Value) -> String {
    let kind = record["type"].as_str().unwrap_or("?");
    match kind {
        "message_start" | "message_end" => {
            format!(
                "{kind}:{}",
                record["message"]["role"].as_str().unwrap_or("?")
            )
        }
        "response" => format!(
            "response:{}:{}",
            record["id"].as_str().unwrap_or("-"),
            if record["success"] == true {
                "ok"
            } else {
                "failed"
            }
        ),
        other => other.to_string(),
    }
}

/// Labels of the records read until the one with label `last` (inclusive).
fn labels_until(t: &mut Tau, last: &str) -> Vec<String> {
    let mut out = Vec::new();
    loop {
        let record = next(t);
        let l = label(&record);
        let done = l == last;
        out.push(l);
        if done {
            return out;
        }
    }
}

fn position(labels: &[String], wanted: &str) -> usize {
    labels
        .iter()
        .position(|l| l == wanted)
        .unwrap_or_else(|| panic!("no {wanted} in {labels:?}"))
}

#[test]
fn a_prompt_written_the_moment_agent_end_is_read_is_never_refused() {
    // 300 prompts in all, as three sessions of 100 side by side: the same number of chances
    // for the race, without each request carrying a 300-run history.
    let sessions: Vec<_> = (0..3)
        .map(|_| std::thread::spawn(prompts_at_agent_end))
        .collect();
    for session in sessions {
        if let Err(panic) = session.join() {
            std::panic::resume_unwind(panic);
        }
    }
}

fn prompts_at_agent_end() {
    let (mock, mut t) = start(
        "openai-completions",
        100_000,
        json!({"retry": {"baseDelayMs": 1}}),
        |b| b,
    );
    const RUNS: usize = 100;
    // Every fifth run fails once first, so its first agent_end is followed by a retry: the
    // next prompt then arrives during post-run work, not only after it.
    for run in 0..RUNS {
        if run % 5 == 4 {
            mock.push(Reply::fault(Fault::ServerError));
        }
        mock.push(Reply::text(format!("answer {run}")));
    }
    t.send(&json!({"id": "p0", "type": "prompt", "message": "hello 0"}));
    let mut seen = Vec::new();
    for run in 0..RUNS {
        // Read up to this run's first agent_end, then prompt at once, as pi 0.79 clients do.
        loop {
            let record = next(&mut t);
            let l = label(&record);
            seen.push(l.clone());
            if l == "agent_end" {
                break;
            }
        }
        if run + 1 < RUNS {
            let id = format!("p{}", run + 1);
            t.send(&json!({"id": id, "type": "prompt", "message": format!("hello {}", run + 1)}));
        }
        if run % 5 == 4 {
            // The retry's own agent_end belongs to this run too.
            loop {
                let l = label(&next(&mut t));
                seen.push(l.clone());
                if l == "agent_end" {
                    break;
                }
            }
        }
    }
    seen.extend(labels_until(&mut t, "agent_settled"));
    let refused: Vec<&String> = seen.iter().filter(|l| l.ends_with(":failed")).collect();
    assert!(refused.is_empty(), "refused prompts: {refused:?}");
    assert_eq!(
        seen.iter().filter(|l| *l == "agent_settled").count(),
        RUNS,
        "{seen:?}"
    );
    // Each prompt is answered after the previous run settled, before its own run starts.
    for run in 1..RUNS {
        let response = position(&seen, &format!("response:p{run}:ok"));
        let settled = seen[..response]
            .iter()
            .filter(|l| *l == "agent_settled")
            .count();
        assert_eq!(settled, run, "run {run}: {seen:?}");
        assert_eq!(seen[response + 1], "agent_start", "run {run}");
    }
    assert_eq!(mock.requests().len(), RUNS + RUNS / 5);
}

#[test]
fn a_prompt_during_threshold_compaction_waits_for_it_then_runs() {
    let (mock, mut t) = start(
        "openai-completions",
        2000,
        json!({"compaction": {"reserveTokens": 500, "keepRecentTokens": 150}}),
        |b| b,
    );
    mock.push(Reply::text("uno ".repeat(100)).usage(0, 0, 0, 0));
    mock.push(Reply::text("dos ".repeat(100)).usage(1600, 20, 0, 0));
    mock.push(Reply::text("SUMMARY").delay_ms(300));
    // Slow enough that the run is still going when `s` is handled, however busy the machine.
    mock.push(Reply::text("after the compaction").delay_ms(500));
    t.send(&json!({"id": "p1", "type": "prompt", "message": "one ".repeat(100)}));
    labels_until(&mut t, "agent_settled");
    t.send(&json!({"id": "p2", "type": "prompt", "message": "two ".repeat(100)}));
    let mut seen = labels_until(&mut t, "agent_end");
    // The threshold compaction follows this agent_end; prompt right away.
    t.send(&json!({"id": "p3", "type": "prompt", "message": "three"}));
    t.send(&json!({"id": "s", "type": "get_state"}));
    seen.extend(labels_until(&mut t, "agent_settled"));
    seen.extend(labels_until(&mut t, "agent_settled"));
    let compaction_end = position(&seen, "compaction_end");
    let response = position(&seen, "response:p3:ok");
    let first_settled = position(&seen, "agent_settled");
    assert!(
        compaction_end < first_settled && first_settled < response,
        "{seen:?}"
    );
    let next_event = seen[response + 1..]
        .iter()
        .find(|l| !l.starts_with("response:"))
        .unwrap();
    assert_eq!(next_event, "agent_start", "{seen:?}");
    // A command sent after the held prompt is answered after it, seeing its run.
    let answered = t
        .history()
        .iter()
        .filter_map(|r| r.json.clone())
        .find(|j| j["id"] == "s");
    let state = answered.unwrap_or_else(|| t.response("s"));
    assert_eq!(state["data"]["isStreaming"], true);
    assert!(position(&seen, "response:s:ok") > response, "{seen:?}");
    let last = mock.requests().last().unwrap().body["messages"].to_string();
    assert!(last.contains("SUMMARY") && last.contains("three"), "{last}");
}

#[test]
fn a_prompt_during_a_retry_back_off_runs_after_the_retry() {
    let (mock, mut t) = start(
        "openai-completions",
        100_000,
        json!({"retry": {"baseDelayMs": 200}}),
        |b| b.arg("--no-session"),
    );
    mock.push(Reply::fault(Fault::ServerError));
    mock.push(Reply::text("retried"));
    mock.push(Reply::text("second prompt's answer"));
    t.send(&json!({"id": "p1", "type": "prompt", "message": "hi"}));
    let mut seen = labels_until(&mut t, "agent_end");
    t.send(&json!({"id": "p2", "type": "prompt", "message": "next"}));
    seen.extend(labels_until(&mut t, "agent_settled"));
    seen.extend(labels_until(&mut t, "agent_settled"));
    let retry_end = position(&seen, "auto_retry_end");
    let response = position(&seen, "response:p2:ok");
    assert!(retry_end < response, "{seen:?}");
    assert_eq!(seen[response - 1], "agent_settled", "{seen:?}");
    assert_eq!(seen[response + 1], "agent_start", "{seen:?}");
    assert_eq!(mock.requests().len(), 3);
}

#[test]
fn is_streaming_stays_true_through_the_post_run_work_until_agent_settled() {
    // Decision T28: pi 0.79 reports false during a retry's back-off (rpc.md §16.11); tau keeps
    // the run's flag until the task is done, so a client steers the retry instead of racing it.
    let (mock, mut t) = start(
        "openai-completions",
        100_000,
        json!({"retry": {"baseDelayMs": 400}}),
        |b| b.arg("--no-session"),
    );
    mock.push(Reply::fault(Fault::ServerError));
    mock.push(Reply::text("retried"));
    t.send(&json!({"id": "p1", "type": "prompt", "message": "hi"}));
    let end = t.event("agent_end");
    assert_eq!(end["willRetry"], true, "{end}");
    let during = t.request(json!({"type": "get_state"}));
    assert_eq!(during["data"]["isStreaming"], true, "{during}");
    t.event("agent_settled");
    let after = t.request(json!({"type": "get_state"}));
    assert_eq!(after["data"]["isStreaming"], false, "{after}");
}

#[test]
fn abort_while_a_prompt_is_held_ends_the_post_run_work_and_that_prompt() {
    let (mock, mut t) = start(
        "openai-completions",
        2000,
        json!({"compaction": {"reserveTokens": 500, "keepRecentTokens": 150}}),
        |b| b,
    );
    mock.push(Reply::text("uno ".repeat(100)).usage(0, 0, 0, 0));
    mock.push(Reply::text("dos ".repeat(100)).usage(1600, 20, 0, 0));
    // A summary that would take far longer than the test.
    mock.push(Reply::text("SUMMARY").delay_ms(30_000));
    mock.push(Reply::text("never streamed").delay_ms(30_000));
    t.send(&json!({"id": "p1", "type": "prompt", "message": "one ".repeat(100)}));
    labels_until(&mut t, "agent_settled");
    t.send(&json!({"id": "p2", "type": "prompt", "message": "two ".repeat(100)}));
    labels_until(&mut t, "agent_end");
    t.send(&json!({"id": "p3", "type": "prompt", "message": "three"}));
    t.send(&json!({"id": "s", "type": "get_state"}));
    let mut seen = labels_until(&mut t, "compaction_start");
    t.send(&json!({"id": "a", "type": "abort"}));
    seen.extend(labels_until(&mut t, "response:a:ok"));
    seen.extend(labels_until(&mut t, "response:s:ok"));
    let held = position(&seen, "response:p3:ok");
    assert!(position(&seen, "compaction_end") < held, "{seen:?}");
    // The held prompt started, and the abort ended it before answering.
    let after: Vec<&str> = seen[held..].iter().map(String::as_str).collect();
    assert_eq!(after[1], "agent_start", "{seen:?}");
    assert!(after.contains(&"agent_end"), "{seen:?}");
    assert!(
        position(&seen, "response:a:ok")
            > held + after.iter().position(|l| *l == "agent_end").unwrap(),
        "{seen:?}"
    );
    let state = t
        .history()
        .iter()
        .filter_map(|r| r.json.clone())
        .find(|j| j["id"] == "s")
        .unwrap();
    assert_eq!(state["data"]["isStreaming"], false, "{state}");
}

#[test]
fn a_delivered_queue_message_is_reported_after_turn_start() {
    let (mock, mut t) = start("openai-completions", 100_000, json!({}), |b| {
        b.arg("--no-session")
    });
    mock.push(
        Reply::new()
            .with_text("abcdef")
            .chunk_size(1)
            .chunk_delay_ms(40),
    );
    mock.push(Reply::text("after the steering"));
    mock.push(Reply::text("after the follow-ups"));
    t.send(&json!({"type": "set_follow_up_mode", "mode": "all"}));
    t.send(&json!({"id": "p", "type": "prompt", "message": "slow"}));
    t.event("message_update");
    t.send(&json!({"type": "steer", "message": "S1"}));
    t.send(&json!({"type": "follow_up", "message": "F1"}));
    t.send(&json!({"type": "follow_up", "message": "F2"}));
    let records: Vec<Value> = {
        let mut out = Vec::new();
        loop {
            let r = next(&mut t);
            let done = r["type"] == "agent_settled";
            if r["type"] != "response" {
                out.push(r);
            }
            if done {
                break out;
            }
        }
    };
    let labels: Vec<String> = records.iter().map(label).collect();
    // Each delivered message: turn_start (for the first of a turn), then queue_update
    // without it, then its message_start.
    let steer = records
        .iter()
        .position(|r| r["type"] == "message_start" && r["message"]["content"][0]["text"] == "S1")
        .unwrap();
    assert_eq!(
        labels[steer - 2..steer],
        ["turn_start", "queue_update"],
        "{labels:?}"
    );
    assert_eq!(records[steer - 1]["steering"], json!([]));
    assert_eq!(records[steer - 1]["followUp"], json!(["F1", "F2"]));
    let f1 = records
        .iter()
        .position(|r| r["type"] == "message_start" && r["message"]["content"][0]["text"] == "F1")
        .unwrap();
    assert_eq!(
        labels[f1 - 2..f1],
        ["turn_start", "queue_update"],
        "{labels:?}"
    );
    assert_eq!(records[f1 - 1]["followUp"], json!(["F2"]));
    // "all" delivers F2 in the same turn, reported right before it.
    assert_eq!(
        labels[f1 + 1..f1 + 4],
        ["message_end:user", "queue_update", "message_start:user"],
        "{labels:?}"
    );
    assert_eq!(records[f1 + 2]["followUp"], json!([]));
    // No queue_update anywhere else but the three enqueues and three deliveries.
    assert_eq!(labels.iter().filter(|l| *l == "queue_update").count(), 6);
}

#[test]
fn anthropic_usage_carries_cache_write_1h_everywhere() {
    let (mock, mut t) = start("anthropic-messages", 100_000, json!({}), |b| {
        b.arg("--no-session")
    });
    mock.push(Reply::text("cached").usage(7, 3, 11, 30).cache_write_1h(20));
    mock.push(Reply::text("plain").usage(7, 3, 0, 0));
    for (id, expected) in [("p1", 20), ("p2", 0)] {
        t.send(&json!({"id": id, "type": "prompt", "message": "hi"}));
        let start = t.wait_for("assistant message_start", Duration::from_secs(15), |r| {
            r.json.as_ref().is_some_and(|j| {
                j["type"] == "message_start" && j["message"]["role"] == "assistant"
            })
        });
        let start = start.json.unwrap();
        // Like pi, the start already carries message_start's usage.
        assert_eq!(start["message"]["usage"]["input"], 7, "{start}");
        assert_eq!(start["message"]["usage"]["cacheWrite1h"], expected);
        let end = t.wait_for("assistant message_end", Duration::from_secs(15), |r| {
            r.json
                .as_ref()
                .is_some_and(|j| j["type"] == "message_end" && j["message"]["role"] == "assistant")
        });
        // pi writes the key after `cost`.
        let raw = String::from_utf8(end.raw.clone()).unwrap();
        let usage = &raw[raw.find("\"usage\"").unwrap()..];
        assert!(
            usage.find("\"cacheWrite1h\"").unwrap() > usage.find("\"cost\"").unwrap(),
            "{raw}"
        );
        let end = end.json.unwrap();
        assert_eq!(end["message"]["usage"]["cacheWrite1h"], expected, "{end}");
        t.event("agent_settled");
    }
    let messages = t.request(json!({"type": "get_messages"}))["data"]["messages"].clone();
    let ones: Vec<&Value> = messages
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "assistant")
        .map(|m| &m["usage"]["cacheWrite1h"])
        .collect();
    assert_eq!(ones, [&json!(20), &json!(0)]);
}

#[test]
fn other_apis_write_no_cache_write_1h() {
    let (mock, mut t) = start("openai-completions", 100_000, json!({}), |b| {
        b.arg("--no-session")
    });
    mock.push(Reply::text("plain"));
    t.send(&json!({"type": "prompt", "message": "hi"}));
    let end = t.wait_for("assistant message_end", Duration::from_secs(15), |r| {
        r.json
            .as_ref()
            .is_some_and(|j| j["type"] == "message_end" && j["message"]["role"] == "assistant")
    });
    let usage = &end.json.unwrap()["message"]["usage"];
    assert!(usage.get("cacheWrite1h").is_none(), "{usage}");
    assert_eq!(usage["input"], 10);
}

#[test]
fn clone_needs_an_entry_to_clone() {
    for args in [&[][..], &["--no-session"][..]] {
        let (mock, mut t) = start("openai-completions", 100_000, json!({}), |mut b| {
            for a in args {
                b = b.arg(*a);
            }
            b
        });
        let refused = t.request(json!({"type": "clone"}));
        assert_eq!(refused["success"], false, "{args:?}: {refused}");
        assert_eq!(refused["command"], "clone");
        assert_eq!(
            refused["error"],
            "Cannot clone session: no current entry selected"
        );
        mock.push(Reply::text("hello"));
        t.send(&json!({"type": "prompt", "message": "hi"}));
        t.event("agent_settled");
        let before = t.request(json!({"type": "get_state"}))["data"]["sessionId"].clone();
        let cloned = t.request(json!({"type": "clone"}));
        assert_eq!(cloned["data"], json!({"cancelled": false}), "{args:?}");
        let after = t.request(json!({"type": "get_state"}))["data"].clone();
        assert_ne!(after["sessionId"], before);
        assert_eq!(after["messageCount"], 2);
    }
}

#[test]
fn context_usage_is_unknown_after_a_compaction_until_the_next_reply() {
    let (mock, mut t) = start(
        "openai-completions",
        100_000,
        json!({"compaction": {"keepRecentTokens": 10}}),
        |b| b,
    );
    for (q, a) in [("hello there", "first answer"), ("second", "second answer")] {
        mock.push(Reply::text(format!("{a} {}", "padding ".repeat(20))).usage(300, 11, 0, 0));
        t.send(&json!({"type": "prompt", "message": q}));
        t.event("agent_settled");
    }
    let usage = |t: &mut Tau| {
        t.request(json!({"type": "get_session_stats"}))["data"]["contextUsage"].clone()
    };
    assert_eq!(usage(&mut t)["tokens"], 311);
    mock.push(Reply::text("SUMMARY"));
    mock.push(Reply::text("TURN PREFIX"));
    let compacted = t.request(json!({"type": "compact"}));
    assert_eq!(compacted["success"], true, "{compacted}");
    // The kept reply to "second" still sits in the context, but counted the old one.
    let messages = t.request(json!({"type": "get_messages"}))["data"]["messages"].clone();
    assert!(messages.to_string().contains("second answer"));
    assert_eq!(
        usage(&mut t),
        json!({"tokens": null, "contextWindow": 100000, "percent": null})
    );
    mock.push(Reply::text("third answer").usage(120, 5, 0, 0));
    t.send(&json!({"type": "prompt", "message": "third"}));
    t.event("agent_settled");
    let known = usage(&mut t);
    assert_eq!(known["tokens"], 125, "{known}");
    assert_eq!(known["percent"], 0.125);
}

#[test]
fn abort_retry_is_answered_before_auto_retry_end() {
    let (mock, mut t) = start(
        "openai-completions",
        100_000,
        json!({"retry": {"baseDelayMs": 60_000}}),
        |b| b.arg("--no-session"),
    );
    mock.push(Reply::fault(Fault::ServerError));
    t.send(&json!({"id": "p", "type": "prompt", "message": "hi"}));
    t.event("auto_retry_start");
    t.send(&json!({"id": "r", "type": "abort_retry"}));
    let seen = labels_until(&mut t, "agent_settled");
    let response = position(&seen, "response:r:ok");
    let end = position(&seen, "auto_retry_end");
    assert!(response < end, "{seen:?}");
}

/// A request the server refuses (HTTP 400) never started a reply: as pi's providers send no
/// `start` then, the assistant's `message_start` already carries the error, on every API.
#[test]
fn a_refused_request_starts_its_message_with_the_error() {
    for api in [
        "anthropic-messages",
        "openai-completions",
        "openai-responses",
        "google-generative-ai",
    ] {
        let (mock, mut t) = start(api, 100_000, json!({"retry": {"enabled": false}}), |b| {
            b.arg("--no-session")
        });
        mock.push(Reply::fault(Fault::Http {
            status: 400,
            body: None,
            retry_after: None,
        }));
        t.send(&json!({"id": "p", "type": "prompt", "message": "hi"}));
        let mut starts = Vec::new();
        loop {
            let record = next(&mut t);
            if record["type"] == "message_start" && record["message"]["role"] == "assistant" {
                starts.push(record["message"].clone());
            }
            if record["type"] == "agent_end" {
                break;
            }
        }
        assert_eq!(starts.len(), 1, "{api}");
        assert_eq!(starts[0]["stopReason"], "error", "{api}: {}", starts[0]);
        assert!(
            starts[0]["errorMessage"]
                .as_str()
                .is_some_and(|e| !e.is_empty()),
            "{api}: {}",
            starts[0]
        );
    }
}
