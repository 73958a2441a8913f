//! Property test of framing + decoding + dispatch: arbitrary input never panics the server,
//! and every complete line gets exactly one response, except the inbound frames that pi never
//! answers (`extension_ui_response`, well-formed `host_tool_*`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};

use proptest::prelude::*;
use serde_json::{Value, json};
use tau_resources::settings::Settings;
use tau_rpc::RpcServer;
use tau_rpc::framing::LineReader;
use tau_session::{AgentSession, EventSink, Outbound, SessionConfig};
use tokio::sync::mpsc;

/// A generated line and how many responses it must produce.
#[derive(Debug, Clone)]
struct Line {
    bytes: Vec<u8>,
    responses: usize,
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        ".{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-zA-Z]{0,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn templates() -> Vec<Value> {
    vec![
        json!({"type": "get_state"}),
        json!({"type": "prompt", "message": "hi", "images": [{"type": "image", "data": "AA==", "mimeType": "image/png"}]}),
        json!({"type": "set_steering_mode", "mode": "all"}),
        json!({"type": "set_interrupt_mode", "mode": "wait"}),
        json!({"type": "set_session_name", "name": "n\u{2028}"}),
        json!({"type": "set_todos", "phases": [{"id": "p", "name": "P", "tasks": [{"id": "t", "content": "c", "status": "pending"}]}]}),
        json!({"type": "set_host_tools", "tools": [{"name": "x", "description": "d", "parameters": {}}]}),
        json!({"type": "fork", "entryId": "abc"}),
        json!({"type": "bash", "command": "ls"}),
        json!({"type": "no_such_command"}),
    ]
}

fn arb_line() -> impl Strategy<Value = Line> {
    let raw = prop::collection::vec(any::<u8>().prop_filter("no LF", |b| *b != b'\n'), 0..64)
        .prop_map(|bytes| Line {
            bytes,
            responses: 1,
        });
    let any_json = arb_json().prop_map(|v| {
        let responses = usize::from(v.get("type") != Some(&json!("extension_ui_response")));
        Line {
            bytes: serde_json::to_vec(&v).unwrap(),
            responses,
        }
    });
    let command = (
        0..templates().len(),
        prop::option::of(".{0,6}"),
        prop::option::of(("[a-z]{1,8}", arb_json())),
    )
        .prop_map(|(i, id, mutation)| {
            let mut v = templates()[i].clone();
            if let Some(id) = id {
                v["id"] = Value::String(id);
            }
            // The shell command itself is never replaced: a property test must not run
            // arbitrary text through bash.
            if let Some((key, value)) = mutation
                && key != "type"
                && key != "command"
            {
                v[key] = value;
            }
            Line {
                bytes: serde_json::to_vec(&v).unwrap(),
                responses: 1,
            }
        });
    let frames = prop_oneof![
        Just(Line { bytes: br#"{"type":"extension_ui_response","id":"u","confirmed":true}"#.to_vec(), responses: 0 }),
        Just(Line { bytes: br#"{"type":"extension_ui_response"}"#.to_vec(), responses: 0 }),
        Just(Line { bytes: br#"{"type":"host_tool_result","id":"h","result":{"content":[]}}"#.to_vec(), responses: 0 }),
        Just(Line { bytes: br#"{"type":"host_tool_update","id":"h","partialResult":{"content":[{"type":"text","text":"t"}]}}"#.to_vec(), responses: 0 }),
        Just(Line { bytes: br#"{"type":"host_tool_result","id":"h","result":{}}"#.to_vec(), responses: 1 }),
    ];
    prop_oneof![3 => raw, 2 => any_json, 4 => command, 1 => frames]
}

/// Feeds `input` through the real framing and server; returns the records written.
fn run(input: &[u8]) -> Vec<Vec<u8>> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let (tx, mut rx) = mpsc::channel(16);
        let written = Arc::new(Mutex::new(Vec::new()));
        let collector = {
            let written = Arc::clone(&written);
            tokio::spawn(async move {
                while let Some(record) = rx.recv().await {
                    let line = match record {
                        Outbound::Line(line) => line,
                        Outbound::Event(event) => serde_json::to_vec(&event).unwrap(),
                        Outbound::Record(record) => serde_json::to_vec(&record).unwrap(),
                        Outbound::Spliced { head, array, tail } => {
                            [head, array.to_vec(), tail].concat()
                        }
                        Outbound::Drain => continue,
                    };
                    written.lock().unwrap().push(line);
                }
            })
        };
        let sink = EventSink::new(tx);
        let config = SessionConfig {
            agent_dir: dir.path().to_path_buf(),
            cwd: dir.path().to_path_buf(),
            no_session: true,
            no_context_files: true,
            ..SessionConfig::default()
        };
        let registry = tau_ai::registry::Registry::new(dir.path(), |_| None);
        let startup = tau_session::StartupModel {
            model: None,
            thinking_level: tau_protocol::ThinkingLevel::Off,
            scope: Vec::new(),
            warnings: Vec::new(),
        };
        let store = tau_store::SessionStore::in_memory(dir.path());
        let session = AgentSession::new(
            config,
            Settings::default(),
            registry,
            startup,
            store,
            sink.clone(),
        );
        let mut server = RpcServer::new(session, sink, "0.0.0");
        for line in LineReader::new(input) {
            server.handle_line(&line.unwrap()).await;
        }
        drop(server);
        collector.await.unwrap();
        std::mem::take(&mut *written.lock().unwrap())
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn one_response_per_complete_line(lines in prop::collection::vec(arb_line(), 0..24), terminate_last in any::<bool>()) {
        let mut input = Vec::new();
        for (i, line) in lines.iter().enumerate() {
            input.extend_from_slice(&line.bytes);
            if i + 1 < lines.len() || terminate_last {
                input.push(b'\n');
            }
        }
        // An empty unterminated tail is no record at all.
        let counted: usize = lines
            .iter()
            .enumerate()
            .filter(|(i, l)| !(i + 1 == lines.len() && !terminate_last && l.bytes.is_empty()))
            .map(|(_, l)| l.responses)
            .sum();
        let written = run(&input);
        let mut responses = 0;
        for record in &written {
            prop_assert!(!record.contains(&b'\n'), "a record never spans lines");
            let value: Value = serde_json::from_slice(record).expect("every record is JSON");
            if value["type"] == "response" {
                responses += 1;
                prop_assert!(value["command"].is_string());
                prop_assert!(value["success"].is_boolean());
            }
        }
        prop_assert_eq!(responses, counted);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let lines = LineReader::new(&bytes[..]).count();
        let responses = run(&bytes)
            .iter()
            .filter(|r| serde_json::from_slice::<Value>(r).is_ok_and(|v| v["type"] == "response"))
            .count();
        prop_assert_eq!(responses, lines);
    }
}
