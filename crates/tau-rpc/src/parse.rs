//! Turns one stdin record into something to act on. Every way a line can be wrong ends in an
//! error response (decision 6): not JSON or not an object gives `command:"parse"` without an
//! `id`; anything else echoes the request's `id` and names its `type`.

use serde_json::Value;

use tau_protocol::rpc::{
    CommandError, ExtensionUiResponse, HostToolResult, HostToolUpdate, PermissionResponse,
    Response, RpcCommand,
};

/// Prefix of every error about a line that is not a usable command object.
pub const PARSE_ERROR_PREFIX: &str = "Failed to parse command: ";

/// One decoded stdin record.
#[derive(Debug)]
pub enum Inbound {
    Command {
        id: Option<Value>,
        command: RpcCommand,
    },
    UiResponse(ExtensionUiResponse),
    HostToolResult(HostToolResult),
    HostToolUpdate(HostToolUpdate),
    PermissionResponse(PermissionResponse),
    /// Answered with this error response and otherwise ignored.
    Rejected(Response),
    /// Dropped silently: pi never answers `extension_ui_response`, even a malformed one.
    Ignored,
}

/// Decodes one record (the line without its terminator).
pub fn parse_line(line: &[u8]) -> Inbound {
    let value: Value = match serde_json::from_slice(line) {
        Ok(value) => value,
        Err(err) => return parse_error(None, err.to_string()),
    };
    let mut object = match value {
        Value::Object(object) => object,
        other => {
            let what = match other {
                Value::Null => "null",
                Value::Bool(_) => "a boolean",
                Value::Number(_) => "a number",
                Value::String(_) => "a string",
                Value::Array(_) => "an array",
                Value::Object(_) => "an object",
            };
            return parse_error(None, format!("expected a JSON object, got {what}"));
        }
    };
    let id = object.remove("id").filter(|id| !id.is_null());
    let kind = match object.get("type") {
        Some(Value::String(kind)) => kind.clone(),
        Some(_) => return parse_error(id, "\"type\" must be a string".to_string()),
        None => return parse_error(id, "missing \"type\"".to_string()),
    };
    // The inbound frames carry their own `id`, which must stay in the object.
    if let Some(id) = &id {
        object.insert("id".to_string(), id.clone());
    }
    let value = Value::Object(object);
    match kind.as_str() {
        "extension_ui_response" => match serde_json::from_value(value) {
            Ok(response) => Inbound::UiResponse(response),
            Err(err) => {
                tracing::debug!("ignoring malformed extension_ui_response: {err}");
                Inbound::Ignored
            }
        },
        "host_tool_result" => match serde_path_to_error::deserialize(value) {
            Ok(result) => Inbound::HostToolResult(result),
            Err(err) => frame_error(id, "host_tool_result", err),
        },
        "host_tool_update" => match serde_path_to_error::deserialize(value) {
            Ok(update) => Inbound::HostToolUpdate(update),
            Err(err) => frame_error(id, "host_tool_update", err),
        },
        // tau's own frame: unlike pi's dialog answers, a malformed one is told so.
        "permission_response" => match serde_path_to_error::deserialize(value) {
            Ok(response) => Inbound::PermissionResponse(response),
            Err(err) => frame_error(id, "permission_response", err),
        },
        _ => match RpcCommand::decode(&kind, value) {
            Ok(command) => Inbound::Command { id, command },
            Err(err @ (CommandError::Unknown(_) | CommandError::InvalidField { .. })) => {
                Inbound::Rejected(Response::failure(id, kind, err.to_string()))
            }
        },
    }
}

fn parse_error(id: Option<Value>, detail: String) -> Inbound {
    Inbound::Rejected(Response::failure(
        id,
        "parse",
        format!("{PARSE_ERROR_PREFIX}{detail}"),
    ))
}

fn frame_error(
    id: Option<Value>,
    kind: &str,
    err: serde_path_to_error::Error<serde_json::Error>,
) -> Inbound {
    let path = err.path().to_string();
    let inner = err.into_inner();
    let detail = if path == "." {
        inner.to_string()
    } else {
        format!("{path}: {inner}")
    };
    Inbound::Rejected(Response::failure(
        id,
        kind,
        format!("Invalid {kind} frame: {detail}"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rejected(line: &str) -> Response {
        match parse_line(line.as_bytes()) {
            Inbound::Rejected(r) => r,
            other => panic!("expected rejection for {line:?}, got {other:?}"),
        }
    }

    #[test]
    fn non_objects_are_parse_errors_without_id() {
        for line in ["", "not json", "null", "[1]", "42", "\"x\"", "{\"type\":"] {
            let r = rejected(line);
            assert_eq!(r.command, "parse", "{line}");
            assert_eq!(r.id, None);
            assert!(
                r.error
                    .as_deref()
                    .unwrap_or("")
                    .starts_with(PARSE_ERROR_PREFIX)
            );
        }
    }

    #[test]
    fn invalid_utf8_is_a_parse_error() {
        match parse_line(b"{\"type\":\"get_state\",\"x\":\"\xff\"}") {
            Inbound::Rejected(r) => assert_eq!(r.command, "parse"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn unknown_and_untyped_objects_echo_the_id() {
        let r = rejected(r#"{"type":"bogus","id":"x"}"#);
        assert_eq!(r.id, Some(json!("x")));
        assert_eq!(r.command, "bogus");
        assert_eq!(r.error.as_deref(), Some("Unknown command: bogus"));

        let r = rejected(r#"{"id":7}"#);
        assert_eq!(r.id, Some(json!(7)));
        assert_eq!(r.command, "parse");
    }

    #[test]
    fn frames_keep_their_id() {
        match parse_line(br#"{"type":"extension_ui_response","id":"u1","value":"Allow"}"#) {
            Inbound::UiResponse(r) => {
                assert_eq!(r.id, "u1");
                assert_eq!(r.value.as_deref(), Some("Allow"));
            }
            other => panic!("{other:?}"),
        }
        let r = rejected(r#"{"type":"host_tool_result","id":"h1","result":{"content":"nope"}}"#);
        assert_eq!(r.id, Some(json!("h1")));
        assert!(
            r.error
                .unwrap()
                .starts_with("Invalid host_tool_result frame: result.content")
        );
    }

    #[test]
    fn commands_decode_with_id() {
        match parse_line(br#"{"id":"r","type":"set_session_name","name":"n"}"#) {
            Inbound::Command { id, command } => {
                assert_eq!(id, Some(json!("r")));
                assert_eq!(command.name(), "set_session_name");
            }
            other => panic!("{other:?}"),
        }
    }
}
