//! Records that are not commands: the response envelope, the `ready` handshake, and the
//! extension-UI and host-tool sub-protocols in both directions.

use crate::{HostToolCall, HostToolCancel, HostToolOutput, SessionEvent};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

/// `{"type":"ready","version":…}`: the first line on stdout (decision 5).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename = "ready")]
#[schemars(rename = "Ready", extend("x-tag" = {"type": "ready"}))]
pub struct Ready {
    /// Optional when read: xcsh's test doubles send `ready` without a version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// The fixed `"response"` tag. A response starts with `id`, so the tag cannot be a
/// struct-level serde tag (that would put `type` first).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum ResponseType {
    #[default]
    Response,
}

/// The answer to one command: `{"id"?,"type":"response","command","success","data"?|"error"?}`.
///
/// `D` is the payload type: [`Value`] when reading, the command's own type when writing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(bound(deserialize = "D: Deserialize<'de>"))]
pub struct Response<D = Value> {
    /// The request's `id`, echoed as sent; absent when the request had none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<Value>,
    // `type` on the wire; a Rust keyword, hence the field name.
    #[serde(rename = "type")]
    pub kind: ResponseType,
    /// The request's `type`, or `parse` when the line was not a JSON object.
    pub command: String,
    pub success: bool,
    /// `None` is absent; `Some(null)` is an explicit `null` (e.g. `cycle_model`).
    #[serde(
        default,
        deserialize_with = "present_or_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub data: Option<D>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl<D: Serialize> Response<D> {
    /// A success, with or without data.
    pub fn success(id: Option<Value>, command: impl Into<String>, data: Option<D>) -> Self {
        Self {
            id,
            kind: ResponseType::Response,
            command: command.into(),
            success: true,
            data,
            error: None,
        }
    }

    /// A failure carrying the message the client sees.
    pub fn failure(
        id: Option<Value>,
        command: impl Into<String>,
        error: impl Into<String>,
    ) -> Self {
        Self {
            id,
            kind: ResponseType::Response,
            command: command.into(),
            success: false,
            data: None,
            error: Some(error.into()),
        }
    }

    /// The record as one JSON line (without the newline).
    pub fn to_line(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_else(|err| {
            // Only a payload with a non-string map key could fail; none of tau's do.
            let fallback: Response<Value> =
                Response::failure(self.id.clone(), self.command.clone(), err.to_string());
            serde_json::to_vec(&fallback).unwrap_or_default()
        })
    }
}

/// Keeps an explicit `null` as `Some(null)`; only an absent key is `None`.
fn present_or_null<'de, De, D>(d: De) -> Result<Option<D>, De::Error>
where
    De: Deserializer<'de>,
    D: Deserialize<'de>,
{
    D::deserialize(d).map(Some)
}

/// What an extension asks the host's UI to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(
    tag = "method",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum UiMethod {
    Select {
        title: String,
        options: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timeout: Option<u64>,
    },
    Confirm {
        title: String,
        message: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timeout: Option<u64>,
    },
    Input {
        title: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        placeholder: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timeout: Option<u64>,
    },
    Editor {
        title: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        prefill: Option<String>,
        /// xcsh.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        prompt_style: Option<bool>,
    },
    Notify {
        message: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        notify_type: Option<String>,
    },
    SetStatus {
        status_key: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status_text: Option<String>,
    },
    SetWidget {
        widget_key: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        widget_lines: Option<Vec<String>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        widget_placement: Option<String>,
    },
    SetTitle {
        title: String,
    },
    // pi names this method in snake_case, unlike the others.
    #[serde(rename = "set_editor_text")]
    SetEditorText {
        text: String,
    },
    /// xcsh: withdraw an open dialog.
    Cancel {
        target_id: String,
    },
}

/// `{"type":"extension_ui_request","id":…,"method":…,…}` (stdout).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename = "extension_ui_request")]
#[schemars(rename = "ExtensionUiRequest", extend("x-tag" = {"type": "extension_ui_request"}))]
pub struct ExtensionUiRequest {
    pub id: String,
    #[serde(flatten)]
    pub method: UiMethod,
}

/// `{"type":"extension_ui_response","id":…}` (stdin); never answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(
    tag = "type",
    rename = "extension_ui_response",
    rename_all = "camelCase"
)]
#[schemars(rename = "ExtensionUiResponse", extend("x-tag" = {"type": "extension_ui_response"}))]
pub struct ExtensionUiResponse {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirmed: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancelled: Option<bool>,
    /// xcsh: the dialog timed out on the host's side.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timed_out: Option<bool>,
}

/// `{"type":"permission_response","id":…,"outcome":…}` (stdin): the user's word on a
/// `permission_request` (decision T123); never answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename = "permission_response", rename_all = "camelCase")]
#[schemars(rename = "PermissionResponse", extend("x-tag" = {"type": "permission_response"}))]
pub struct PermissionResponse {
    pub id: String,
    pub outcome: crate::PermissionOutcome,
    /// With `allowAlways`: also keep the rule in the user's settings.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub remember: bool,
}

/// `{"type":"host_tool_result",…}` (stdin): a host tool finished.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename = "host_tool_result", rename_all = "camelCase")]
#[schemars(rename = "HostToolResult", extend("x-tag" = {"type": "host_tool_result"}))]
pub struct HostToolResult {
    pub id: String,
    pub result: HostToolOutput,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
}

/// `{"type":"host_tool_update",…}` (stdin): progress of a host tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename = "host_tool_update", rename_all = "camelCase")]
#[schemars(rename = "HostToolUpdate", extend("x-tag" = {"type": "host_tool_update"}))]
pub struct HostToolUpdate {
    pub id: String,
    pub partial_result: HostToolOutput,
}

/// Any record tau writes to stdout. Each variant writes its own `type`.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum OutboundRecord {
    Ready(Ready),
    Response(Response),
    ExtensionUiRequest(ExtensionUiRequest),
    HostToolCall(HostToolCall),
    HostToolCancel(HostToolCancel),
    Event(Box<SessionEvent>),
}

impl OutboundRecord {
    /// Reads a record by its `type` (hosts and tests use this; tau only writes).
    pub fn from_value(value: Value) -> Result<Self, serde_json::Error> {
        let kind = value
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        Ok(match kind {
            "ready" => Self::Ready(serde_json::from_value(value)?),
            "response" => Self::Response(serde_json::from_value(value)?),
            "extension_ui_request" => Self::ExtensionUiRequest(serde_json::from_value(value)?),
            "host_tool_call" => Self::HostToolCall(serde_json::from_value(value)?),
            "host_tool_cancel" => Self::HostToolCancel(serde_json::from_value(value)?),
            _ => Self::Event(Box::new(serde_json::from_value(value)?)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn response_puts_id_before_type() {
        let r: Response = Response::success(Some(json!("req-1")), "prompt", None);
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"id":"req-1","type":"response","command":"prompt","success":true}"#
        );
    }

    #[test]
    fn explicit_null_data_survives() {
        let r: Response = serde_json::from_str(
            r#"{"type":"response","command":"cycle_model","success":true,"data":null}"#,
        )
        .unwrap();
        assert_eq!(r.data, Some(Value::Null));
        assert!(
            serde_json::to_string(&r)
                .unwrap()
                .ends_with(r#""data":null}"#)
        );
    }

    #[test]
    fn ui_request_order_is_type_id_method_fields() {
        let req = ExtensionUiRequest {
            id: "uuid-2".into(),
            method: UiMethod::Confirm {
                title: "Clear session?".into(),
                message: "All messages will be lost.".into(),
                timeout: Some(5000),
            },
        };
        assert_eq!(
            serde_json::to_string(&req).unwrap(),
            r#"{"type":"extension_ui_request","id":"uuid-2","method":"confirm","title":"Clear session?","message":"All messages will be lost.","timeout":5000}"#
        );
    }

    #[test]
    fn tagged_frames_write_their_type_first() {
        let cancel = HostToolCancel {
            id: "a".into(),
            target_id: "b".into(),
        };
        assert_eq!(
            serde_json::to_value(&cancel).unwrap(),
            json!({"type": "host_tool_cancel", "id": "a", "targetId": "b"})
        );
        let line = serde_json::to_string(&cancel).unwrap();
        assert!(line.starts_with(r#"{"type":"host_tool_cancel""#), "{line}");
    }
}
