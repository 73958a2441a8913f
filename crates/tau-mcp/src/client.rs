//! What a server asks of tau and tells it on its own: the client side of a connection
//! (rmcp's `ClientHandler`). Progress and list changes are kept here for the connection;
//! what needs the session (the model for `sampling/createMessage`, the user for
//! `elicitation/create`, the working folder for `roots/list`, where a server's log lines
//! and resource updates go) is asked of the [`ClientHost`] the session gives the manager
//! (decision T129).
//!
//! rmcp marks sampling, roots and logging deprecated (a 2026 draft drops them); the servers
//! people run speak 2025-06-18, where they are the client's features, so they are served.
#![allow(deprecated)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures_util::future::BoxFuture;
use rmcp::ClientHandler;
use rmcp::handler::client::progress::ProgressDispatcher;
use rmcp::model::{
    ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequestParams, ElicitResult, ElicitationAction, ErrorData, ListRootsResult,
    LoggingMessageNotificationParam, ProgressNotificationParam, ResourceUpdatedNotificationParam,
    Role, Root, SamplingMessage, SamplingMessageContentBlock,
};
use rmcp::service::{NotificationContext, RequestContext, RoleClient};
use serde_json::{Map, Value, json};
use tokio::sync::Notify;

/// What the session does for its servers. Every method has a default that does nothing or
/// refuses, so a host serves only what it can.
pub trait ClientHost: Send + Sync {
    /// The folders the servers may work in (`roots/list`).
    fn roots(&self) -> Vec<RootFolder> {
        Vec::new()
    }

    /// Whether `sampling` is declared: a server then registers what needs it.
    fn offers_sampling(&self) -> bool {
        false
    }

    /// Whether `elicitation` is declared.
    fn offers_elicitation(&self) -> bool {
        false
    }

    /// `sampling/createMessage`: the reply of the session's model, or why there is none.
    fn sample<'a>(
        &'a self,
        _server: &'a str,
        _request: SamplingRequest,
    ) -> BoxFuture<'a, Result<SamplingReply, String>> {
        Box::pin(async { Err("this client does not offer sampling".to_string()) })
    }

    /// `elicitation/create`: the user's answer to the server's form.
    fn elicit<'a>(
        &'a self,
        _server: &'a str,
        _request: ElicitationRequest,
    ) -> BoxFuture<'a, ElicitationAnswer> {
        Box::pin(async { ElicitationAnswer::Decline })
    }

    /// `notifications/message`.
    fn log(&self, _server: &str, _entry: ServerLog) {}

    /// `notifications/resources/updated` for a resource tau subscribed to.
    fn resource_updated(&self, _server: &str, _uri: &str) {}
}

/// A folder offered as a root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootFolder {
    /// A `file://` URI.
    pub uri: String,
    pub name: Option<String>,
}

/// A server's request for a model reply, in tau's terms.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplingRequest {
    pub messages: Vec<SamplingTurn>,
    pub system_prompt: Option<String>,
    pub max_tokens: u32,
    pub temperature: Option<f32>,
    pub stop_sequences: Vec<String>,
    /// The server's model names, most preferred first (hints, not orders).
    pub model_hints: Vec<String>,
}

/// One message of a sampling conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplingTurn {
    /// `user` or `assistant`.
    pub assistant: bool,
    pub text: String,
    /// Images as (MIME type, base64 data).
    pub images: Vec<(String, String)>,
}

/// The model's reply to a sampling request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SamplingReply {
    /// `provider/id` of the model that answered.
    pub model: String,
    pub text: String,
    /// `endTurn`, `maxTokens`, `stopSequence`.
    pub stop_reason: Option<String>,
}

/// A server's form: a message and the fields it wants filled.
#[derive(Debug, Clone, PartialEq)]
pub struct ElicitationRequest {
    pub message: String,
    pub fields: Vec<FormField>,
    /// The requested schema as the server sent it (for a front-end that draws forms itself).
    pub schema: Value,
}

/// One field of an elicitation form (the specification allows flat primitives only).
#[derive(Debug, Clone, PartialEq)]
pub struct FormField {
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub required: bool,
    pub kind: FieldKind,
    pub default: Option<Value>,
}

/// What a field holds.
#[derive(Debug, Clone, PartialEq)]
pub enum FieldKind {
    Text,
    Number {
        integer: bool,
    },
    Boolean,
    /// One of `values`, shown as `labels` (the same when the schema names none); a
    /// `multiple` field's answer is an array (one dialog picks one item of it).
    Choice {
        values: Vec<String>,
        labels: Vec<String>,
        multiple: bool,
    },
}

/// The user's answer to an elicitation.
#[derive(Debug, Clone, PartialEq)]
pub enum ElicitationAnswer {
    Accept(Map<String, Value>),
    Decline,
    Cancel,
}

/// A server's log line.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerLog {
    /// `debug` … `emergency`, as the specification names them.
    pub level: String,
    pub logger: Option<String>,
    pub data: Value,
}

impl ServerLog {
    /// Whether the user should see it (warning and above), not only the log.
    pub fn for_the_user(&self) -> bool {
        matches!(
            self.level.as_str(),
            "warning" | "error" | "critical" | "alert" | "emergency"
        )
    }

    /// The line as text: a string as it is, anything else as JSON.
    pub fn text(&self) -> String {
        match &self.data {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        }
    }
}

/// Receives what the server sends on its own.
#[derive(Clone)]
pub(crate) struct Handler {
    pub(crate) server: String,
    pub(crate) host: Option<Arc<dyn ClientHost>>,
    pub(crate) progress: ProgressDispatcher,
    pub(crate) tools_stale: Arc<AtomicBool>,
    pub(crate) prompts_stale: Arc<AtomicBool>,
    pub(crate) resources_stale: Arc<AtomicBool>,
    /// Wakes the manager's relisting task; a permit is kept when nobody waits yet.
    pub(crate) tools_changed: Arc<Notify>,
    pub(crate) info: ClientConfig,
}

/// The capabilities tau declares: roots (the working folder) unless the server's entry
/// turns them off, sampling and elicitation when the host serves them.
pub(crate) fn capabilities(host: Option<&Arc<dyn ClientHost>>, roots: bool) -> ClientCapabilities {
    let mut declared = json!({});
    if roots {
        declared["roots"] = json!({"listChanged": true});
    }
    if host.is_some_and(|host| host.offers_sampling()) {
        declared["sampling"] = json!({});
    }
    if host.is_some_and(|host| host.offers_elicitation()) {
        declared["elicitation"] = json!({});
    }
    serde_json::from_value(declared).unwrap_or_default()
}

impl ClientHandler for Handler {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.handle_notification(params).await;
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tools_stale.store(true, Ordering::SeqCst);
        self.tools_changed.notify_one();
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.prompts_stale.store(true, Ordering::SeqCst);
        self.tools_changed.notify_one();
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.resources_stale.store(true, Ordering::SeqCst);
        self.tools_changed.notify_one();
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        if let Some(host) = &self.host {
            host.resource_updated(&self.server, &params.uri);
        }
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let entry = ServerLog {
            level: serde_json::to_value(params.level)
                .ok()
                .and_then(|level| level.as_str().map(str::to_string))
                .unwrap_or_else(|| "info".to_string()),
            logger: params.logger,
            data: params.data,
        };
        tracing::info!(target: "tau_mcp::server_log", server = %self.server, level = %entry.level, "{}", entry.text());
        if let Some(host) = &self.host {
            host.log(&self.server, entry);
        }
    }

    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        let roots = self
            .host
            .as_ref()
            .map(|host| host.roots())
            .unwrap_or_default()
            .into_iter()
            .map(|folder| {
                let root = Root::new(folder.uri);
                match folder.name {
                    Some(name) => root.with_name(name),
                    None => root,
                }
            })
            .collect();
        Ok(ListRootsResult::new(roots))
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        let Some(host) = self.host.as_ref().filter(|host| host.offers_sampling()) else {
            return Err(ErrorData::invalid_request(
                "this client does not offer sampling",
                None,
            ));
        };
        let request = sampling_request(params);
        match host.sample(&self.server, request).await {
            Ok(reply) => {
                let message = SamplingMessage::new(
                    Role::Assistant,
                    SamplingMessageContentBlock::text(reply.text),
                );
                let result = CreateMessageResult::new(message, reply.model);
                Ok(match reply.stop_reason {
                    Some(reason) => result.with_stop_reason(reason),
                    None => result,
                })
            }
            // The specification's code for a refused sampling request is -1 ("User rejected
            // sampling request"); any other failure is the model's, reported as it came.
            Err(message) => Err(ErrorData::new(rmcp::model::ErrorCode(-1), message, None)),
        }
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let Some(host) = self.host.as_ref().filter(|host| host.offers_elicitation()) else {
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        let ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } = request
        else {
            // URL elicitation is not declared.
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        let schema = serde_json::to_value(&requested_schema).unwrap_or(Value::Null);
        let request = ElicitationRequest {
            message,
            fields: form_fields(&schema),
            schema,
        };
        Ok(match host.elicit(&self.server, request).await {
            ElicitationAnswer::Accept(content) => {
                ElicitResult::new(ElicitationAction::Accept).with_content(Value::Object(content))
            }
            ElicitationAnswer::Decline => ElicitResult::new(ElicitationAction::Decline),
            ElicitationAnswer::Cancel => ElicitResult::new(ElicitationAction::Cancel),
        })
    }

    fn get_info(&self) -> ClientConfig {
        self.info.clone()
    }
}

/// The request in tau's terms, read from its JSON: rmcp's content types are many and
/// non-exhaustive, and tau sends text and images only.
fn sampling_request(params: CreateMessageRequestParams) -> SamplingRequest {
    let value = serde_json::to_value(&params).unwrap_or(Value::Null);
    let messages = value["messages"]
        .as_array()
        .map(|messages| messages.iter().map(sampling_turn).collect())
        .unwrap_or_default();
    let model_hints = value["modelPreferences"]["hints"]
        .as_array()
        .map(|hints| {
            hints
                .iter()
                .filter_map(|hint| hint["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    SamplingRequest {
        messages,
        system_prompt: params.system_prompt,
        max_tokens: params.max_tokens,
        temperature: params.temperature,
        stop_sequences: params.stop_sequences.unwrap_or_default(),
        model_hints,
    }
}

fn sampling_turn(message: &Value) -> SamplingTurn {
    let blocks: Vec<&Value> = match &message["content"] {
        Value::Array(blocks) => blocks.iter().collect(),
        block => vec![block],
    };
    let mut text = Vec::new();
    let mut images = Vec::new();
    for block in blocks {
        match block["type"].as_str() {
            Some("text") => text.push(block["text"].as_str().unwrap_or_default().to_string()),
            Some("image") => images.push((
                block["mimeType"]
                    .as_str()
                    .unwrap_or("image/png")
                    .to_string(),
                block["data"].as_str().unwrap_or_default().to_string(),
            )),
            Some(other) => text.push(format!("[{other} content left out]")),
            None => {}
        }
    }
    SamplingTurn {
        assistant: message["role"] == "assistant",
        text: text.join("\n"),
        images,
    }
}

/// The fields of a requested schema (`{"type":"object","properties":{…},"required":[…]}`),
/// in the order the server wrote them.
pub(crate) fn form_fields(schema: &Value) -> Vec<FormField> {
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(properties) = schema["properties"].as_object() else {
        return Vec::new();
    };
    properties
        .iter()
        .map(|(name, property)| {
            let text = |key: &str| property[key].as_str().map(str::to_string);
            // A multiple choice lists its options on `items`.
            let multiple = property["type"] == "array";
            let options = if multiple {
                &property["items"]
            } else {
                property
            };
            let kind = if let Some(values) = options["enum"].as_array() {
                let values: Vec<String> = values.iter().map(value_text).collect();
                let labels = options["enumNames"]
                    .as_array()
                    .map(|names| names.iter().map(value_text).collect())
                    .filter(|labels: &Vec<String>| labels.len() == values.len())
                    .unwrap_or_else(|| values.clone());
                FieldKind::Choice {
                    values,
                    labels,
                    multiple,
                }
            } else if let Some(options) = options["oneOf"]
                .as_array()
                .or_else(|| options["anyOf"].as_array())
            {
                FieldKind::Choice {
                    multiple,
                    values: options.iter().map(|o| value_text(&o["const"])).collect(),
                    labels: options
                        .iter()
                        .map(|o| {
                            o["title"]
                                .as_str()
                                .map_or_else(|| value_text(&o["const"]), str::to_string)
                        })
                        .collect(),
                }
            } else {
                match property["type"].as_str() {
                    Some("boolean") => FieldKind::Boolean,
                    Some("integer") => FieldKind::Number { integer: true },
                    Some("number") => FieldKind::Number { integer: false },
                    _ => FieldKind::Text,
                }
            };
            FormField {
                name: name.clone(),
                title: text("title"),
                description: text("description"),
                required: required.contains(&name.as_str()),
                kind,
                default: property.get("default").cloned(),
            }
        })
        .collect()
}

fn value_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_form_schema_becomes_fields_in_order_with_their_kinds() {
        let schema = json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "title": "Your name"},
                "age": {"type": "integer", "minimum": 0},
                "ok": {"type": "boolean", "default": true},
                "pet": {"type": "string", "enum": ["cat", "dog"], "enumNames": ["Cat", "Dog"]},
                "size": {"type": "string", "oneOf": [{"const": "s", "title": "Small"}, {"const": "l"}]}
            },
            "required": ["name", "pet"]
        });
        let fields = form_fields(&schema);
        let names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["name", "age", "ok", "pet", "size"]);
        assert_eq!(fields[0].title.as_deref(), Some("Your name"));
        assert!(fields[0].required && !fields[1].required && fields[3].required);
        assert_eq!(fields[1].kind, FieldKind::Number { integer: true });
        assert_eq!(fields[2].kind, FieldKind::Boolean);
        assert_eq!(fields[2].default, Some(json!(true)));
        assert_eq!(
            fields[3].kind,
            FieldKind::Choice {
                values: vec!["cat".into(), "dog".into()],
                labels: vec!["Cat".into(), "Dog".into()],
                multiple: false
            }
        );
        assert_eq!(
            fields[4].kind,
            FieldKind::Choice {
                values: vec!["s".into(), "l".into()],
                labels: vec!["Small".into(), "l".into()],
                multiple: false
            }
        );
        let many = form_fields(&json!({"properties": {"fish": {"type": "array",
            "items": {"anyOf": [{"const": "f1", "title": "Tuna"}]}}}}));
        assert_eq!(
            many[0].kind,
            FieldKind::Choice {
                values: vec!["f1".into()],
                labels: vec!["Tuna".into()],
                multiple: true
            }
        );
    }

    #[test]
    fn a_schema_without_properties_has_no_fields() {
        assert!(form_fields(&json!({"type": "object"})).is_empty());
        assert!(form_fields(&Value::Null).is_empty());
    }

    #[test]
    fn sampling_messages_keep_text_and_images_and_name_the_rest() {
        let params: CreateMessageRequestParams = serde_json::from_value(json!({
            "messages": [
                {"role": "user", "content": {"type": "text", "text": "hello"}},
                {"role": "assistant", "content": [{"type": "text", "text": "hi"},
                    {"type": "image", "data": "AAAA", "mimeType": "image/png"}]},
                {"role": "user", "content": {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}}
            ],
            "maxTokens": 100,
            "systemPrompt": "be brief",
            "modelPreferences": {"hints": [{"name": "claude"}]}
        }))
        .unwrap();
        let request = sampling_request(params);
        assert_eq!(request.max_tokens, 100);
        assert_eq!(request.system_prompt.as_deref(), Some("be brief"));
        assert_eq!(request.model_hints, ["claude"]);
        assert_eq!(request.messages[0].text, "hello");
        assert!(!request.messages[0].assistant);
        assert!(request.messages[1].assistant);
        assert_eq!(
            request.messages[1].images,
            [("image/png".to_string(), "AAAA".to_string())]
        );
        assert_eq!(request.messages[2].text, "[audio content left out]");
    }

    #[test]
    fn warnings_and_worse_reach_the_user() {
        let log = |level: &str| ServerLog {
            level: level.into(),
            logger: None,
            data: json!({"a": 1}),
        };
        assert!(log("warning").for_the_user() && log("emergency").for_the_user());
        assert!(!log("info").for_the_user() && !log("notice").for_the_user());
        assert_eq!(log("info").text(), "{\"a\":1}");
    }
}
