//! Automatic retry (rpc.md §9, issue 7): retryable provider failures are retried with
//! back-off and the events of Appendix A; `abort_retry` ends the wait at once; context
//! overflow is never retried.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tau_mock_llm::{BackgroundMock, Fault, MockServer, Reply};
use tau_test_kit::Tau;

use crate::{ready_tau, tau};

fn setup(base_delay_ms: u64) -> (BackgroundMock, Tau) {
    let mock = MockServer::start_background().unwrap();
    let models = json!({"providers": {"mock": {
        "baseUrl": format!("{}/v1", mock.url()), "api": "openai-completions", "apiKey": "k",
        "models": [{"id": "mock-1", "contextWindow": 100000, "maxTokens": 4096}],
    }}});
    let settings = json!({"retry": {"baseDelayMs": base_delay_ms}});
    let t = ready_tau(
        tau()
            .agent_file("models.json", models.to_string())
            .agent_file("settings.json", settings.to_string())
            .arg("--no-session"),
    );
    (mock, t)
}

/// Record types (message_update left out) until `agent_settled`.
fn until_settled(t: &mut Tau) -> Vec<Value> {
    let mut out = Vec::new();
    loop {
        let record = t.next_record(Duration::from_secs(15)).expect("a record");
        let json = record.json.expect("JSON");
        let done = json["type"] == "agent_settled";
        if json["type"] != "message_update" {
            out.push(json);
        }
        if done {
            return out;
        }
    }
}

fn kinds(records: &[Value]) -> Vec<String> {
    records
        .iter()
        .map(|r| match r["type"].as_str().unwrap() {
            "agent_end" => format!(
                "agent_end{}",
                if r["willRetry"] == true { "+retry" } else { "" }
            ),
            "message_end" => format!(
                "message_end:{}",
                r["message"]["role"].as_str().unwrap_or("")
            ),
            other => other.to_string(),
        })
        .filter(|k| !k.starts_with("message_start"))
        .collect()
}

#[test]
fn failures_are_retried_until_a_reply_arrives() {
    for fault in [
        Fault::RateLimited { retry_after: None },
        Fault::ServerError,
        Fault::Overloaded,
        Fault::DropAfter { events: 2 },
    ] {
        let (mock, mut t) = setup(10);
        mock.push(Reply::fault(fault.clone()));
        mock.push(Reply::text("recovered"));
        t.send(&json!({"id": "p", "type": "prompt", "message": "hi"}));
        let records = until_settled(&mut t);
        assert_eq!(
            kinds(&records),
            [
                "response",
                "agent_start",
                "turn_start",
                "message_end:user",
                "message_end:assistant",
                "turn_end",
                "agent_end+retry",
                "auto_retry_start",
                "agent_start",
                "turn_start",
                "message_end:assistant",
                "auto_retry_end",
                "turn_end",
                "agent_end",
                "agent_settled",
            ],
            "{fault:?}: {records:#?}"
        );
        let start = records
            .iter()
            .find(|r| r["type"] == "auto_retry_start")
            .unwrap();
        assert_eq!(start["attempt"], 1);
        assert_eq!(start["maxAttempts"], 3);
        assert_eq!(start["delayMs"], 10);
        assert!(
            start["errorMessage"]
                .as_str()
                .is_some_and(|e| !e.is_empty())
        );
        let end = records
            .iter()
            .find(|r| r["type"] == "auto_retry_end")
            .unwrap();
        assert_eq!(
            end,
            &json!({"type": "auto_retry_end", "success": true, "attempt": 1})
        );
        // The failed reply left the context: the model sees user, then the good reply.
        let messages = t.request(json!({"type": "get_messages"}))["data"]["messages"].clone();
        assert_eq!(messages.as_array().map(Vec::len), Some(2), "{messages}");
        assert_eq!(messages[1]["content"][0]["text"], "recovered");
        assert_eq!(mock.requests().len(), 2);
    }
}

#[test]
fn retries_run_out_after_max_attempts_with_doubling_delays() {
    let (mock, mut t) = setup(10);
    for _ in 0..4 {
        mock.push(Reply::fault(Fault::Overloaded));
    }
    t.send(&json!({"id": "p", "type": "prompt", "message": "hi"}));
    let records = until_settled(&mut t);
    let delays: Vec<&Value> = records
        .iter()
        .filter(|r| r["type"] == "auto_retry_start")
        .map(|r| &r["delayMs"])
        .collect();
    assert_eq!(delays, [&json!(10), &json!(20), &json!(40)]);
    let ends: Vec<bool> = records
        .iter()
        .filter(|r| r["type"] == "agent_end")
        .map(|r| r["willRetry"] == true)
        .collect();
    assert_eq!(ends, [true, true, true, false]);
    let end = records
        .iter()
        .find(|r| r["type"] == "auto_retry_end")
        .unwrap();
    assert_eq!(end["success"], false);
    assert_eq!(end["attempt"], 3);
    assert!(end["finalError"].as_str().is_some_and(|e| !e.is_empty()));
    assert_eq!(mock.requests().len(), 4);
}

#[test]
fn abort_retry_ends_the_back_off_at_once() {
    let (mock, mut t) = setup(60_000);
    mock.push(Reply::fault(Fault::ServerError));
    t.send(&json!({"id": "p", "type": "prompt", "message": "hi"}));
    t.event("auto_retry_start");
    let started = Instant::now();
    assert_eq!(t.request(json!({"type": "abort_retry"}))["success"], true);
    let end = t.event("auto_retry_end");
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(
        end,
        json!({"type": "auto_retry_end", "success": false, "attempt": 1, "finalError": "Retry cancelled"})
    );
    t.event("agent_settled");
    assert_eq!(mock.requests().len(), 1, "no further attempt");
}

#[test]
fn overflow_and_disabled_retry_are_not_retried() {
    let (mock, mut t) = setup(10);
    mock.push(Reply::fault(Fault::ContextOverflow));
    t.send(&json!({"id": "p", "type": "prompt", "message": "hi"}));
    let records = until_settled(&mut t);
    assert!(
        !kinds(&records).iter().any(|k| k.starts_with("auto_retry")),
        "{records:#?}"
    );

    assert_eq!(
        t.request(json!({"type": "set_auto_retry", "enabled": false}))["success"],
        true
    );
    mock.push(Reply::fault(Fault::ServerError));
    t.send(&json!({"id": "p2", "type": "prompt", "message": "again"}));
    let records = until_settled(&mut t);
    assert!(
        kinds(&records).contains(&"agent_end".to_string()),
        "{records:#?}"
    );
    assert!(
        !kinds(&records).iter().any(|k| k.starts_with("auto_retry")),
        "{records:#?}"
    );
    assert_eq!(mock.requests().len(), 2);
}

#[test]
fn a_retry_after_header_sets_the_delay() {
    let (mock, mut t) = setup(10);
    mock.push(Reply::fault(Fault::RateLimited {
        retry_after: Some(1),
    }));
    mock.push(Reply::text("after waiting"));
    t.send(&json!({"id": "p", "type": "prompt", "message": "hi"}));
    let records = until_settled(&mut t);
    let start = records
        .iter()
        .find(|r| r["type"] == "auto_retry_start")
        .unwrap();
    assert_eq!(start["delayMs"], 1000, "{start}");
    assert!(
        records
            .iter()
            .any(|r| r["type"] == "auto_retry_end" && r["success"] == true)
    );
}
