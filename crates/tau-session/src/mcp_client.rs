//! What the session does for its MCP servers (decision T129): the working folder as the
//! one root, sampling through the session's model once the user allows it (through the
//! permission request every front-end answers), a server's form asked field by field
//! through the core's dialogs, a server's warnings shown to the user, resource updates
//! announced.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use futures_util::future::BoxFuture;
use serde_json::{Map, Value, json};
use tau_mcp::{
    ClientHost, ElicitationAnswer, ElicitationRequest, FieldKind, FormField, RootFolder,
    SamplingReply, SamplingRequest, ServerLog,
};
use tau_protocol::rpc::{ExtensionUiRequest, OutboundRecord, UiMethod};
use tau_protocol::{
    AssistantContent, AssistantMessage, ImageContent, Message, StopReason, TextContent, ToolCall,
    Usage, UserContent, UserContentBlock, UserMessage,
};
use tau_resources::settings::Settings;
use tokio_util::sync::CancellationToken;

use crate::WeakEventSink;
use crate::compactor::Summarizer;
use crate::dialogs::{DialogAnswer, Dialogs};
use crate::permissions::Permissions;

/// The pseudo tool name a sampling request is asked about under (and an `allow` rule
/// names to let every server sample without asking).
pub const SAMPLING_TOOL: &str = "mcp_sampling";

/// Whether servers may have the session's model answer them (`mcp.sampling`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SamplingPolicy {
    /// Not declared: servers do not offer what needs it.
    Off,
    /// Each request is asked about (an `allow` rule for `mcp_sampling` answers for the user).
    Ask,
    /// Answered without asking.
    Allow,
}

/// What the front-end lets servers ask of the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct McpClientFeatures {
    pub sampling: SamplingPolicy,
    /// Whether `elicitation/create` is declared (someone can answer a form).
    pub elicitation: bool,
}

impl McpClientFeatures {
    /// Nothing asked of anyone: what a front-end that cannot ask gets.
    pub const NONE: Self = Self {
        sampling: SamplingPolicy::Off,
        elicitation: false,
    };

    /// The settings' `mcp.sampling` (`off`, `ask`, `allow`) and `mcp.elicitation` (false
    /// turns forms off) over the front-end's defaults.
    pub fn from_settings(settings: &Settings, defaults: Self) -> Self {
        let sampling = match settings.get::<String>("mcp.sampling").as_deref() {
            Some("off") => SamplingPolicy::Off,
            Some("ask") => SamplingPolicy::Ask,
            Some("allow") => SamplingPolicy::Allow,
            _ => defaults.sampling,
        };
        let elicitation =
            defaults.elicitation && settings.get::<bool>("mcp.elicitation") != Some(false);
        Self {
            sampling,
            elicitation,
        }
    }
}

/// A front-end that draws a server's form itself (ACP's `elicitation/create`), in place of
/// the core's dialogs.
pub trait FormFrontEnd: Send + Sync {
    fn ask<'a>(
        &'a self,
        server: &'a str,
        request: &'a ElicitationRequest,
    ) -> BoxFuture<'a, ElicitationAnswer>;
}

/// The session's side of what its MCP servers ask of the client: the core's dialogs (which
/// front-ends answer), and once servers start, the host that serves their requests.
#[derive(Debug, Default)]
pub struct McpClientSide {
    dialogs: Arc<Dialogs>,
    host: Option<Arc<SessionMcpHost>>,
}

impl McpClientSide {
    /// The dialogs the core opens itself; a front-end hands them the answers
    /// (`extension_ui_response`) before the extensions get theirs.
    pub fn dialogs(&self) -> &Arc<Dialogs> {
        &self.dialogs
    }

    /// Has `forms` (a front-end that draws forms, ACP's `elicitation/create`) ask the servers'
    /// forms in place of the core's dialogs.
    pub fn set_forms(&self, forms: Arc<dyn FormFrontEnd>) {
        if let Some(host) = &self.host {
            host.set_forms(forms);
        }
    }

    /// The host the servers are started with.
    pub(crate) fn start(
        &mut self,
        features: McpClientFeatures,
        cwd: &Path,
        events: WeakEventSink,
        permissions: Arc<Permissions>,
        sampler: Option<Summarizer>,
    ) -> Arc<dyn ClientHost> {
        let host = Arc::new(SessionMcpHost::new(
            features,
            cwd,
            events,
            permissions,
            Arc::clone(&self.dialogs),
        ));
        host.set_sampler(sampler);
        self.host = Some(Arc::clone(&host));
        host
    }

    /// Whether servers were started.
    pub(crate) fn started(&self) -> bool {
        self.host.is_some()
    }

    /// The model sampling uses from now on.
    pub(crate) fn set_sampler(&self, sampler: Option<Summarizer>) {
        if let Some(host) = &self.host {
            host.set_sampler(sampler);
        }
    }

    /// The working folder moved to `cwd` (a switched-to session works in its own): the
    /// servers are told their root changed.
    pub(crate) async fn roots_moved(&self, cwd: &Path, mcp: Option<&crate::mcp::McpServers>) {
        if let Some(host) = &self.host
            && host.set_cwd(cwd)
            && let Some(mcp) = mcp
        {
            mcp.manager().roots_changed().await;
        }
    }
}

/// The session's side of its servers' requests.
pub(crate) struct SessionMcpHost {
    features: McpClientFeatures,
    cwd: Mutex<PathBuf>,
    /// Weak: the servers' tasks must not keep the output open at the end.
    events: WeakEventSink,
    permissions: Arc<Permissions>,
    dialogs: Arc<Dialogs>,
    /// What a model call needs, as of the last prompt or model change.
    sampler: Mutex<Option<Summarizer>>,
    /// Draws forms in place of the dialogs, when the front-end can.
    forms: Mutex<Option<Arc<dyn FormFrontEnd>>>,
    next_request: AtomicU64,
}

impl std::fmt::Debug for SessionMcpHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionMcpHost")
            .field("features", &self.features)
            .finish_non_exhaustive()
    }
}

impl SessionMcpHost {
    pub(crate) fn new(
        features: McpClientFeatures,
        cwd: &Path,
        events: WeakEventSink,
        permissions: Arc<Permissions>,
        dialogs: Arc<Dialogs>,
    ) -> Self {
        Self {
            features,
            cwd: Mutex::new(cwd.to_path_buf()),
            events,
            permissions,
            dialogs,
            sampler: Mutex::new(None),
            forms: Mutex::new(None),
            next_request: AtomicU64::new(0),
        }
    }

    /// Has `forms` draw the servers' forms from now on.
    pub(crate) fn set_forms(&self, forms: Arc<dyn FormFrontEnd>) {
        *self.forms.lock().unwrap_or_else(PoisonError::into_inner) = Some(forms);
    }

    /// The working folder moved; whether it changed.
    pub(crate) fn set_cwd(&self, cwd: &Path) -> bool {
        let mut current = self.cwd.lock().unwrap_or_else(PoisonError::into_inner);
        let changed = *current != cwd;
        *current = cwd.to_path_buf();
        changed
    }

    /// The model sampling uses from now on.
    pub(crate) fn set_sampler(&self, sampler: Option<Summarizer>) {
        *self.sampler.lock().unwrap_or_else(PoisonError::into_inner) = sampler;
    }

    fn notify(&self, message: String, kind: &str) {
        let Some(events) = self.events.upgrade() else {
            return;
        };
        let record = OutboundRecord::ExtensionUiRequest(ExtensionUiRequest {
            id: format!(
                "tau-notice-{}",
                self.next_request.fetch_add(1, Ordering::Relaxed)
            ),
            method: UiMethod::Notify {
                message,
                notify_type: Some(kind.to_string()),
            },
        });
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { events.emit_record(record).await });
        }
    }

    /// Asks the user whether `server` may sample, unless a rule answers.
    async fn allowed(&self, server: &str, request: &SamplingRequest) -> Result<(), String> {
        if self.features.sampling == SamplingPolicy::Allow {
            return Ok(());
        }
        let Some(events) = self.events.upgrade() else {
            return Err("tau is shutting down".to_string());
        };
        let last = request
            .messages
            .iter()
            .rev()
            .find(|turn| !turn.assistant)
            .map(|turn| turn.text.as_str())
            .unwrap_or_default();
        let excerpt: String = last.chars().take(200).collect();
        let mut args = Map::new();
        args.insert("server".into(), json!(server));
        args.insert("prompt".into(), json!(last));
        args.insert("maxTokens".into(), json!(request.max_tokens));
        if let Some(system) = &request.system_prompt {
            args.insert("systemPrompt".into(), json!(system));
        }
        let call = ToolCall {
            id: format!(
                "mcp-sampling-{}",
                self.next_request.fetch_add(1, Ordering::Relaxed)
            ),
            name: SAMPLING_TOOL.to_string(),
            arguments: args.clone(),
            thought_signature: None,
        };
        let title = format!("MCP server \"{server}\" asks the model: {excerpt}");
        self.permissions
            .ask(&call, &args, title, &events, &CancellationToken::new())
            .await
            .map_err(|reason| format!("User rejected sampling request: {reason}"))
    }

    /// One form field asked; `None` when the user cancelled.
    async fn ask_field(&self, server: &str, field: &FormField) -> Option<Option<Value>> {
        let events = self.events.upgrade()?;
        let label = field.title.clone().unwrap_or_else(|| field.name.clone());
        let mut title = format!("{server}: {label}");
        if field.required {
            title.push_str(" (required)");
        }
        if let Some(description) = &field.description {
            title.push_str(&format!(" - {description}"));
        }
        let default_text = field.default.as_ref().map(|value| match value {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        });
        // A wrong number is asked again, a few times, rather than sent.
        for _ in 0..3 {
            let method = match &field.kind {
                FieldKind::Boolean => UiMethod::Confirm {
                    title: title.clone(),
                    message: field.description.clone().unwrap_or_else(|| label.clone()),
                    timeout: None,
                },
                FieldKind::Choice { labels, .. } => UiMethod::Select {
                    title: title.clone(),
                    options: labels.clone(),
                    timeout: None,
                },
                FieldKind::Text | FieldKind::Number { .. } => UiMethod::Input {
                    title: title.clone(),
                    placeholder: default_text.clone(),
                    timeout: None,
                },
            };
            let answer = self.dialogs.ask(&events, method).await;
            let value = match (&field.kind, answer) {
                (_, DialogAnswer::Cancelled) => return None,
                (FieldKind::Boolean, DialogAnswer::Confirmed(yes)) => Some(json!(yes)),
                (
                    FieldKind::Choice {
                        values,
                        labels,
                        multiple,
                    },
                    DialogAnswer::Value(label),
                ) => labels
                    .iter()
                    .position(|l| *l == label)
                    .and_then(|i| values.get(i))
                    .map(|value| {
                        if *multiple {
                            json!([value])
                        } else {
                            json!(value)
                        }
                    }),
                (_, DialogAnswer::Value(text)) if text.trim().is_empty() => field.default.clone(),
                (FieldKind::Number { integer: true }, DialogAnswer::Value(text)) => {
                    match text.trim().parse::<i64>() {
                        Ok(number) => Some(json!(number)),
                        Err(_) => continue,
                    }
                }
                (FieldKind::Number { integer: false }, DialogAnswer::Value(text)) => {
                    match text.trim().parse::<f64>() {
                        Ok(number) => Some(json!(number)),
                        Err(_) => continue,
                    }
                }
                (_, DialogAnswer::Value(text)) => Some(json!(text)),
                (_, DialogAnswer::Confirmed(_)) => None,
            };
            if value.is_none() && field.required {
                continue;
            }
            return Some(value);
        }
        None
    }
}

impl ClientHost for SessionMcpHost {
    fn roots(&self) -> Vec<RootFolder> {
        let cwd = self
            .cwd
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let name = cwd
            .file_name()
            .map(|name| name.to_string_lossy().into_owned());
        vec![RootFolder {
            uri: file_uri(&cwd),
            name,
        }]
    }

    fn offers_sampling(&self) -> bool {
        self.features.sampling != SamplingPolicy::Off
    }

    fn offers_elicitation(&self) -> bool {
        self.features.elicitation
    }

    fn sample<'a>(
        &'a self,
        server: &'a str,
        request: SamplingRequest,
    ) -> BoxFuture<'a, Result<SamplingReply, String>> {
        Box::pin(async move {
            self.allowed(server, &request).await?;
            let sampler = self
                .sampler
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone()
                .ok_or_else(|| "no model is available to answer".to_string())?;
            let now = tau_ai::now_ms();
            let messages = request
                .messages
                .iter()
                .map(|turn| sampling_message(turn, &sampler, now))
                .collect();
            let context = tau_ai::provider::Context {
                system_prompt: request.system_prompt.clone(),
                messages,
                tools: Vec::new(),
            };
            let max_tokens = match sampler.model.max_tokens {
                0 => u64::from(request.max_tokens),
                most => u64::from(request.max_tokens).min(most),
            };
            let options = tau_ai::provider::StreamOptions {
                max_tokens: Some(max_tokens),
                include_partial: false,
                temperature: request.temperature.map(f64::from),
                ..sampler.options.clone()
            };
            let text =
                crate::compactor::complete(&sampler.client, &sampler.model, &context, options)
                    .await?;
            Ok(SamplingReply {
                model: format!("{}/{}", sampler.model.provider, sampler.model.id),
                text,
                stop_reason: Some("endTurn".to_string()),
            })
        })
    }

    fn elicit<'a>(
        &'a self,
        server: &'a str,
        request: ElicitationRequest,
    ) -> BoxFuture<'a, ElicitationAnswer> {
        Box::pin(async move {
            let forms = self
                .forms
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            if let Some(forms) = forms {
                return forms.ask(server, &request).await;
            }
            let Some(events) = self.events.upgrade() else {
                return ElicitationAnswer::Cancel;
            };
            let opening = UiMethod::Confirm {
                title: format!("MCP server \"{server}\" asks for information"),
                message: request.message.clone(),
                timeout: None,
            };
            match self.dialogs.ask(&events, opening).await {
                DialogAnswer::Confirmed(true) => {}
                DialogAnswer::Confirmed(false) => return ElicitationAnswer::Decline,
                _ => return ElicitationAnswer::Cancel,
            }
            let mut content = Map::new();
            for field in &request.fields {
                match self.ask_field(server, field).await {
                    None => return ElicitationAnswer::Cancel,
                    Some(Some(value)) => {
                        content.insert(field.name.clone(), value);
                    }
                    Some(None) => {}
                }
            }
            ElicitationAnswer::Accept(content)
        })
    }

    fn log(&self, server: &str, entry: ServerLog) {
        if entry.for_the_user() {
            let kind = if entry.level == "warning" {
                "warning"
            } else {
                "error"
            };
            self.notify(format!("MCP server \"{server}\": {}", entry.text()), kind);
        }
    }

    fn resource_updated(&self, server: &str, uri: &str) {
        tracing::info!(%server, %uri, "MCP resource updated");
        self.notify(
            format!("MCP server \"{server}\" updated @{server}:{uri}"),
            "info",
        );
    }
}

/// A `file://` URI of an absolute path (characters outside the unreserved set and `/`
/// percent-encoded).
fn file_uri(path: &Path) -> String {
    let mut uri = String::from("file://");
    for byte in path.to_string_lossy().bytes() {
        if byte.is_ascii_alphanumeric() || b"/-_.~".contains(&byte) {
            uri.push(char::from(byte));
        } else {
            uri.push_str(&format!("%{byte:02X}"));
        }
    }
    uri
}

fn sampling_message(turn: &tau_mcp::SamplingTurn, sampler: &Summarizer, now: i64) -> Message {
    let text = TextContent {
        text: turn.text.clone(),
        text_signature: None,
    };
    if turn.assistant {
        return Message::Assistant(AssistantMessage {
            content: vec![AssistantContent::Text(text)],
            api: sampler.model.api.clone(),
            provider: sampler.model.provider.clone(),
            model: sampler.model.id.clone(),
            usage: Usage::default(),
            stop_reason: StopReason::Stop,
            timestamp: now,
            response_id: None,
            response_model: None,
            diagnostics: None,
            error_message: None,
            retry_after_ms: None,
        });
    }
    let mut blocks = vec![UserContentBlock::Text(text)];
    blocks.extend(turn.images.iter().map(|(mime, data)| {
        UserContentBlock::Image(ImageContent {
            data: data.clone(),
            mime_type: mime.clone(),
        })
    }));
    Message::User(UserMessage {
        content: UserContent::Blocks(blocks),
        timestamp: now,
        attachments: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_becomes_a_file_uri_with_odd_characters_encoded() {
        assert_eq!(
            file_uri(Path::new("/home/me/my project")),
            "file:///home/me/my%20project"
        );
    }
}
