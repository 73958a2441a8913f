//! Every JSON example of pi's RPC reference (document 004) is a record the schema allows:
//! commands and inbound frames as `StdinRecord`, the rest as `StdoutRecord`.

use serde_json::Value;
use tau_protocol::rpc::RpcCommand;

fn validator(root: &str) -> jsonschema::Validator {
    let mut schema = tau_protocol::schema::protocol_schema();
    schema["$ref"] = Value::String(format!("#/$defs/{root}"));
    if let Some(object) = schema.as_object_mut() {
        object.remove("anyOf");
    }
    match jsonschema::validator_for(&schema) {
        Ok(v) => v,
        Err(err) => panic!("the schema does not compile: {err}"),
    }
}

#[test]
fn document_004_examples_validate() {
    let stdin = validator("StdinRecord");
    let stdout = validator("StdoutRecord");
    let examples = include_str!("../fixtures/doc004-examples.jsonl");
    let inbound = [
        "extension_ui_response",
        "host_tool_result",
        "host_tool_update",
    ];
    let mut failures = Vec::new();
    let mut checked = 0;
    for line in examples.lines() {
        let record: Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(err) => panic!("fixture line is not JSON ({err}): {line}"),
        };
        let kind = record["type"].as_str().unwrap_or_default();
        let is_stdin = RpcCommand::NAMES.contains(&kind) || inbound.contains(&kind);
        let validator = if is_stdin { &stdin } else { &stdout };
        let problems: Vec<String> = validator
            .iter_errors(&record)
            .map(|e| format!("{}: {e}", e.instance_path()))
            .collect();
        if !problems.is_empty() {
            failures.push(format!("{line}\n  {}", problems.join("\n  ")));
        }
        checked += 1;
    }
    assert!(checked >= 90, "only {checked} examples");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
