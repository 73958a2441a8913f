//! The JSON Schema (draft 2020-12) of the whole protocol, generated from the types of this
//! crate: what a host may write to stdin (`StdinRecord`) and what tau writes to stdout
//! (`StdoutRecord`), with each command's response `data`. `tau schema` prints it and
//! `docs/protocol.schema.json` holds a copy that a test keeps equal to it.

use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde_json::{Map, Value, json};

use crate::SessionEvent;
use crate::rpc::{
    ExtensionUiRequest, ExtensionUiResponse, HostToolResult, HostToolUpdate, PermissionResponse,
    Ready, RpcCommand,
};
use crate::{HostToolCall, HostToolCancel};

/// The schema as a JSON value (keys in a stable order).
pub fn protocol_schema() -> Value {
    let mut generator = SchemaSettings::draft2020_12().into_generator();
    let schema_of = |generator: &mut SchemaGenerator, f: fn(&mut SchemaGenerator) -> Schema| {
        f(generator).to_value()
    };
    let command = schema_of(&mut generator, subschema::<RpcCommand>);
    let stdin = vec![
        command,
        schema_of(&mut generator, subschema::<ExtensionUiResponse>),
        schema_of(&mut generator, subschema::<HostToolResult>),
        schema_of(&mut generator, subschema::<HostToolUpdate>),
        schema_of(&mut generator, subschema::<PermissionResponse>),
    ];
    let stdout = vec![
        schema_of(&mut generator, subschema::<Ready>),
        json!({"$ref": "#/$defs/Response"}),
        schema_of(&mut generator, subschema::<SessionEvent>),
        schema_of(&mut generator, subschema::<ExtensionUiRequest>),
        schema_of(&mut generator, subschema::<HostToolCall>),
        schema_of(&mut generator, subschema::<HostToolCancel>),
    ];
    // Not a stdin or stdout record: the `action` frames of the extension processes'
    // protocol (docs/extensions.md §4), which their hosts can check themselves against.
    generator.subschema_for::<crate::extension::ExtensionAction>();
    // Likewise the events tau raises in extensions, their handlers' results, and the dialogs
    // and display updates extensions ask for (docs/extensions.md §3, §5).
    {
        use crate::extension_event::*;
        generator.subschema_for::<ExtensionEvent<'static>>();
        generator.subschema_for::<crate::extension::UiRequestFrame>();
        generator.subschema_for::<ProjectTrustResult>();
        generator.subschema_for::<CancelResult>();
        generator.subschema_for::<SessionBeforeCompactResult>();
        generator.subschema_for::<SessionBeforeTreeResult>();
        generator.subschema_for::<InputResult>();
        generator.subschema_for::<BeforeAgentStartResult>();
        generator.subschema_for::<ContextResult>();
        generator.subschema_for::<BeforeProviderRequestResult>();
        generator.subschema_for::<ToolCallResult>();
        generator.subschema_for::<ToolResultPatch>();
        generator.subschema_for::<MessageEndResult>();
        generator.subschema_for::<ResourcesDiscoverResult>();
    }
    let data = RpcCommand::response_data_schemas(&mut generator);
    let mut defs: Map<String, Value> = generator.take_definitions(true);
    defs.insert("Response".into(), response_schema(data));
    defs.insert(
        "StdinRecord".into(),
        json!({
            "description": "One line a host writes to tau's stdin. Commands may carry an `id` \
                (any JSON value, echoed in the response) and keys tau ignores.",
            "anyOf": stdin,
        }),
    );
    defs.insert(
        "StdoutRecord".into(),
        json!({
            "description": "One line tau writes to stdout.",
            "anyOf": stdout,
        }),
    );
    let mut sorted: Vec<(String, Value)> = defs.into_iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let mut root = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "tau RPC protocol",
        "description": "Every JSONL record of `tau --mode rpc`, one JSON object per line. \
            Validate a stdin line against #/$defs/StdinRecord and a stdout line against \
            #/$defs/StdoutRecord.",
        "anyOf": [{"$ref": "#/$defs/StdinRecord"}, {"$ref": "#/$defs/StdoutRecord"}],
        "$defs": Value::Object(sorted.into_iter().collect()),
    });
    apply_struct_tags(&mut root);
    root
}

/// The schema as pretty JSON with a final newline, as checked in.
pub fn protocol_schema_text() -> String {
    let mut text = serde_json::to_string_pretty(&protocol_schema()).unwrap_or_default();
    text.push('\n');
    text
}

/// Commands whose successful response may come without `data` (pi 0.79's), though tau's
/// carries it.
const DATA_OPTIONAL: &[&str] = &["prompt", "steer", "follow_up", "abort_and_prompt"];

fn subschema<T: JsonSchema>(generator: &mut SchemaGenerator) -> Schema {
    generator.subschema_for::<T>()
}

/// The response envelope, then one alternative per command for success (with that command's
/// `data`, or none) and one for failure.
fn response_schema(data: Vec<(&'static str, Option<Schema>)>) -> Value {
    let mut alternatives: Vec<Value> = data
        .into_iter()
        .map(|(name, data)| {
            let mut properties = json!({
                "command": {"const": name},
                "success": {"const": true},
            });
            match data {
                // pi 0.79 answers the prompt family without data; tau adds `disposition`.
                Some(schema) if DATA_OPTIONAL.contains(&name) => {
                    properties["data"] = schema.to_value();
                    json!({"properties": properties})
                }
                Some(schema) => {
                    properties["data"] = schema.to_value();
                    json!({"properties": properties, "required": ["data"]})
                }
                None => json!({"properties": properties, "not": {"required": ["data"]}}),
            }
        })
        .collect();
    alternatives.push(json!({
        "description": "A failure: any command, `parse` for a line that is not a JSON object \
            with a string `type`.",
        "properties": {"success": {"const": false}, "error": {"type": "string"}},
        "required": ["error"],
        "not": {"required": ["data"]},
    }));
    json!({
        "description": "The one answer to a command.",
        "type": "object",
        "properties": {
            "id": {"description": "The request's `id`, echoed as sent; absent when it had none."},
            "type": {"const": "response"},
            "command": {"type": "string"},
            "success": {"type": "boolean"},
            "data": true,
            "error": {"type": "string"},
        },
        "required": ["type", "command", "success"],
        "additionalProperties": false,
        "anyOf": alternatives,
    })
}

/// Structs that serde writes with a tag of their own (`#[serde(tag = "type", rename = …)]`)
/// carry `x-tag` (schemars does not describe such a tag): it becomes a required constant
/// property, first, as serde writes it.
fn apply_struct_tags(value: &mut Value) {
    match value {
        Value::Object(object) => {
            if let Some(Value::Object(tag)) = object.remove("x-tag") {
                let properties = match object.remove("properties") {
                    Some(Value::Object(p)) => p,
                    _ => Map::new(),
                };
                let mut required = match object.remove("required") {
                    Some(Value::Array(r)) => r,
                    _ => Vec::new(),
                };
                let mut tagged = Map::new();
                for (field, constant) in tag {
                    tagged.insert(field.clone(), json!({"type": "string", "const": constant}));
                    required.insert(0, Value::String(field));
                }
                tagged.extend(properties);
                object.insert("properties".into(), Value::Object(tagged));
                object.insert("required".into(), Value::Array(required));
            }
            for child in object.values_mut() {
                apply_struct_tags(child);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(apply_struct_tags),
        _ => {}
    }
}
