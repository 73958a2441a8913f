//! Every example JSON of pi's RPC reference (document 004, `{...}` placeholders filled with
//! concrete values) goes through tau's wire types and back without losing anything, and
//! records whose exact bytes pi was observed to write come back byte for byte.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tau_protocol::rpc::*;
use tau_rpc::parse::{Inbound, parse_line};

const EXAMPLES: &str = include_str!("../fixtures/doc004_examples.jsonl");
const OBSERVED: &str = include_str!("../fixtures/pi_observed_lines.jsonl");

/// Keys tau adds to a record when it re-serialises one that lacked them (pi always writes
/// them, or they are tau's additive fields).
const ADDED_KEYS: &[&str] = &[
    "totalTokens",
    "willRetry",
    "interruptMode",
    "queuedMessageCount",
    "todoPhases",
    "autoRetryEnabled",
];

/// Checks that `output` carries everything `input` has: same keys (an input `null` may be
/// absent), equal scalars (numbers compared by value: `3.0` and `3` are the same number),
/// same array lengths. Extra keys in `output` must be in [`ADDED_KEYS`].
fn covers(input: &Value, output: &Value, path: &str) -> Result<(), String> {
    match (input, output) {
        (Value::Object(a), Value::Object(b)) => {
            for (key, value) in a {
                let here = format!("{path}.{key}");
                match b.get(key) {
                    Some(other) => covers(value, other, &here)?,
                    None if value.is_null() => {}
                    None => return Err(format!("{here} lost")),
                }
            }
            for key in b.keys() {
                if !a.contains_key(key) && !ADDED_KEYS.contains(&key.as_str()) {
                    return Err(format!("{path}.{key} added"));
                }
            }
            Ok(())
        }
        (Value::Array(a), Value::Array(b)) => {
            if a.len() != b.len() {
                return Err(format!("{path}: {} items became {}", a.len(), b.len()));
            }
            a.iter()
                .zip(b)
                .enumerate()
                .try_for_each(|(i, (x, y))| covers(x, y, &format!("{path}[{i}]")))
        }
        (Value::Number(a), Value::Number(b)) if a.as_f64() == b.as_f64() => Ok(()),
        (a, b) if a == b => Ok(()),
        (a, b) => Err(format!("{path}: {a} became {b}")),
    }
}

fn through<T: DeserializeOwned + Serialize>(value: &Value) -> Value {
    let typed: T = serde_json::from_value(value.clone())
        .unwrap_or_else(|e| panic!("cannot decode {value}: {e}"));
    let once = serde_json::to_value(&typed).unwrap();
    // Stable: a second trip changes nothing.
    let again: T = serde_json::from_value(once.clone()).unwrap();
    assert_eq!(
        serde_json::to_value(&again).unwrap(),
        once,
        "unstable round trip of {value}"
    );
    once
}

fn response_data(command: &str, data: &Value) -> Value {
    match command {
        "get_state" => through::<RpcSessionState>(data),
        "get_messages" => through::<MessagesData>(data),
        "set_model" => through::<Model>(data),
        "cycle_model" => through::<Option<CycleModelData>>(data),
        "get_available_models" => through::<ModelsData>(data),
        "cycle_thinking_level" => through::<Option<ThinkingLevelData>>(data),
        "compact" => through::<CompactionResult>(data),
        "bash" => through::<BashResult>(data),
        "get_session_stats" => through::<SessionStats>(data),
        "export_html" => through::<PathData>(data),
        "new_session" | "switch_session" | "clone" => through::<CancelledData>(data),
        "fork" | "branch" => through::<ForkData>(data),
        "get_fork_messages" | "get_branch_messages" => through::<ForkMessagesData>(data),
        "get_last_assistant_text" => through::<LastAssistantTextData>(data),
        "get_commands" => through::<CommandsData>(data),
        other => panic!("no payload type for {other}"),
    }
}

fn round_trip(kind: &str, json: &Value) -> Value {
    match kind {
        "command" => {
            let line = serde_json::to_vec(json).unwrap();
            let Inbound::Command { id, command } = parse_line(&line) else {
                panic!("not a command: {json}");
            };
            let mut out = serde_json::to_value(&command).unwrap();
            if let Some(id) = id {
                out["id"] = id;
            }
            out
        }
        "response" => {
            let mut response: Response = serde_json::from_value(json.clone()).unwrap();
            if let Some(data) = response.data.take() {
                response.data = Some(response_data(&response.command, &data));
            }
            serde_json::to_value(&response).unwrap()
        }
        "event" => through::<SessionEvent>(json),
        "ui_request" => through::<ExtensionUiRequest>(json),
        "ui_response" => through::<ExtensionUiResponse>(json),
        "model" => through::<Model>(json),
        "message" => through::<AgentMessage>(json),
        other => panic!("unknown example kind {other}"),
    }
}

#[test]
fn every_document_004_example_round_trips_without_loss() {
    let mut count = 0;
    for line in EXAMPLES.lines() {
        let example: Value = serde_json::from_str(line).unwrap();
        let kind = example["kind"].as_str().unwrap();
        let json = &example["json"];
        let out = round_trip(kind, json);
        if let Err(err) = covers(json, &out, "") {
            panic!("{kind} example lost data: {err}\n in:  {json}\n out: {out}");
        }
        count += 1;
    }
    assert_eq!(
        count, 111,
        "the fixture holds every example of document 004"
    );
}

#[test]
fn commands_cover_every_example_type() {
    let mut seen = std::collections::BTreeSet::new();
    for line in EXAMPLES.lines() {
        let example: Value = serde_json::from_str(line).unwrap();
        if example["kind"] == "command" {
            seen.insert(example["json"]["type"].as_str().unwrap().to_string());
        }
    }
    for name in &seen {
        assert!(RpcCommand::NAMES.contains(&name.as_str()), "{name}");
    }
    assert_eq!(seen.len(), 29, "document 004 shows 29 distinct commands");
}

#[test]
fn records_pi_was_seen_writing_come_back_byte_for_byte() {
    for line in OBSERVED.lines() {
        let value: Value = serde_json::from_str(line).unwrap();
        let record = OutboundRecord::from_value(value).unwrap();
        let record = match record {
            OutboundRecord::Response(mut r) if r.command == "get_state" => {
                let typed: RpcSessionState =
                    serde_json::from_value(r.data.take().unwrap()).unwrap();
                r.data = Some(serde_json::to_value(typed).unwrap());
                OutboundRecord::Response(r)
            }
            other => other,
        };
        assert_eq!(serde_json::to_string(&record).unwrap(), line);
    }
}

#[test]
fn lossless_check_can_fail() {
    let input: Value = serde_json::json!({"a": 1, "b": [1, 2], "c": null});
    assert!(covers(&input, &serde_json::json!({"a": 1.0, "b": [1, 2]}), "").is_ok());
    assert!(covers(&input, &serde_json::json!({"a": 2, "b": [1, 2]}), "").is_err());
    assert!(covers(&input, &serde_json::json!({"b": [1, 2]}), "").is_err());
    assert!(covers(&input, &serde_json::json!({"a": 1, "b": [1]}), "").is_err());
    assert!(
        covers(
            &input,
            &serde_json::json!({"a": 1, "b": [1, 2], "zz": 0}),
            ""
        )
        .is_err()
    );
}
