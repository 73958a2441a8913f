//! Checks a tool call's arguments against the tool's JSON Schema before it runs. Values are
//! first converted where the schema asks for another primitive type (`"5"` for a number,
//! `"true"` for a boolean, `5` for a string), as pi's TypeBox conversion does, because models
//! often quote numbers. A failure becomes the tool's error result in pi's format.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use jsonschema::Validator;
use serde_json::{Map, Value};

/// Compiled validators by tool name, each with the schema it was compiled from. Compiling a
/// schema cost about as much as the rest of tau's work for a tool call (measured for MCP tools:
/// ~0.07 of ~0.4 ms), and a tool's schema seldom changes; a changed one is compiled again.
static VALIDATORS: LazyLock<Mutex<HashMap<String, Compiled>>> = LazyLock::new(Mutex::default);

/// A validator with the schema it was compiled from.
type Compiled = (Value, Arc<Validator>);

/// The validator of `tool`'s `schema`, compiled once while the schema stays the same.
fn validator_for(tool: &str, schema: &Value) -> Result<Arc<Validator>, String> {
    let mut cache = VALIDATORS.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((compiled_from, validator)) = cache.get(tool)
        && compiled_from == schema
    {
        return Ok(Arc::clone(validator));
    }
    let validator = Arc::new(jsonschema::validator_for(schema).map_err(|e| e.to_string())?);
    cache.insert(tool.to_string(), (schema.clone(), Arc::clone(&validator)));
    Ok(validator)
}

/// Converts primitive values to the types `schema` names, recursively through `properties`
/// and `items`.
pub fn coerce(value: &mut Value, schema: &Value) {
    let types: Vec<&str> = match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    match value {
        Value::Object(map) => {
            if let Some(Value::Object(properties)) = schema.get("properties") {
                for (key, child) in map.iter_mut() {
                    if let Some(child_schema) = properties.get(key) {
                        coerce(child, child_schema);
                    }
                }
            }
            return;
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for item in items {
                    coerce(item, item_schema);
                }
            }
            return;
        }
        _ => {}
    }
    if types.is_empty() || types.iter().any(|t| matches_type(value, t)) {
        return;
    }
    for t in types {
        if let Some(converted) = convert(value, t) {
            *value = converted;
            return;
        }
    }
}

fn matches_type(value: &Value, t: &str) -> bool {
    match t {
        "string" => value.is_string(),
        "number" => value.is_number(),
        "integer" => value.is_i64() || value.is_u64(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        "object" => value.is_object(),
        "array" => value.is_array(),
        _ => true,
    }
}

fn convert(value: &Value, t: &str) -> Option<Value> {
    match (t, value) {
        ("number", Value::String(s)) => {
            let n: f64 = s.trim().parse().ok()?;
            serde_json::Number::from_f64(n).map(|n| {
                // Integral numbers stay integers, so `"5"` becomes `5`, not `5.0`.
                if n.as_f64()
                    .is_some_and(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
                {
                    Value::from(n.as_f64().unwrap_or_default() as i64)
                } else {
                    Value::Number(n)
                }
            })
        }
        ("integer", Value::String(s)) => s.trim().parse::<i64>().ok().map(Value::from),
        ("integer", Value::Number(n)) => n
            .as_f64()
            .filter(|f| f.fract() == 0.0)
            .map(|f| Value::from(f as i64)),
        ("boolean", Value::String(s)) => match s.trim() {
            "true" => Some(Value::Bool(true)),
            "false" => Some(Value::Bool(false)),
            _ => None,
        },
        ("boolean", Value::Number(n)) => match n.as_f64() {
            Some(1.0) => Some(Value::Bool(true)),
            Some(0.0) => Some(Value::Bool(false)),
            _ => None,
        },
        ("string", Value::Number(n)) => Some(Value::String(n.to_string())),
        ("string", Value::Bool(b)) => Some(Value::String(b.to_string())),
        _ => None,
    }
}

/// Validates (after conversion) and returns the arguments to run with, or pi's error text:
/// `Validation failed for tool "<name>":` with one `  - <path>: <problem>` line per error,
/// then the arguments as received.
pub fn validate_arguments(
    tool: &str,
    schema: &Value,
    arguments: &Map<String, Value>,
) -> Result<Map<String, Value>, String> {
    let validator = match validator_for(tool, schema) {
        Ok(validator) => validator,
        // A schema that does not compile cannot check anything; the tool gets the arguments.
        Err(err) => {
            tracing::warn!("tool {tool} has an invalid schema: {err}");
            return Ok(arguments.clone());
        }
    };
    let mut value = Value::Object(arguments.clone());
    coerce(&mut value, schema);
    let problems: Vec<String> = validator
        .iter_errors(&value)
        .map(|error| {
            let pointer = error.instance_path().to_string();
            let path = pointer.trim_start_matches('/').replace('/', ".");
            let path = if path.is_empty() {
                "root".to_string()
            } else {
                path
            };
            format!("  - {path}: {error}")
        })
        .collect();
    if problems.is_empty() {
        return match value {
            Value::Object(map) => Ok(map),
            _ => Ok(arguments.clone()),
        };
    }
    let received =
        serde_json::to_string_pretty(&Value::Object(arguments.clone())).unwrap_or_default();
    Err(format!(
        "Validation failed for tool \"{tool}\":\n{}\n\nReceived arguments:\n{received}",
        problems.join("\n")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "required": ["path"], "properties": {
            "path": {"type": "string"},
            "offset": {"type": "number"},
            "all": {"type": "boolean"},
            "edits": {"type": "array", "items": {"type": "object", "properties": {"n": {"type": "integer"}}}}
        }})
    }

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn a_tools_changed_schema_is_the_one_checked() {
        // The same tool name, first needing `path`, then `query`: the cached validator of the
        // first schema must not answer for the second.
        let tool = "cache-test-tool";
        let first = json!({"type": "object", "required": ["path"]});
        let second = json!({"type": "object", "required": ["query"]});
        assert!(validate_arguments(tool, &first, &args(json!({"path": "a"}))).is_ok());
        assert!(validate_arguments(tool, &first, &args(json!({"path": "a"}))).is_ok());
        let refused = validate_arguments(tool, &second, &args(json!({"path": "a"})));
        assert!(refused.is_err_and(|e| e.contains("query")));
        assert!(validate_arguments(tool, &second, &args(json!({"query": "q"}))).is_ok());
        assert!(validate_arguments(tool, &first, &args(json!({"query": "q"}))).is_err());
    }

    #[test]
    fn quoted_primitives_are_converted() {
        let out = validate_arguments(
            "read",
            &schema(),
            &args(json!({"path": 5, "offset": "10", "all": "true", "edits": [{"n": "3"}]})),
        )
        .unwrap();
        assert_eq!(
            Value::Object(out),
            json!({"path": "5", "offset": 10, "all": true, "edits": [{"n": 3}]})
        );
    }

    #[test]
    fn failures_name_the_path_and_show_the_arguments() {
        let err =
            validate_arguments("read", &schema(), &args(json!({"offset": "ten"}))).unwrap_err();
        assert!(
            err.starts_with("Validation failed for tool \"read\":\n  - "),
            "{err}"
        );
        assert!(err.contains("offset"), "{err}");
        assert!(err.contains("path"), "{err}");
        assert!(
            err.ends_with("Received arguments:\n{\n  \"offset\": \"ten\"\n}"),
            "{err}"
        );
    }
}
