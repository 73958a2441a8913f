//! Servers' resources (decision T129): each server's resources and templates as last listed
//! (listed at start beside the tools, again after `resources/list_changed`), reading one
//! (`resources/read`, mapped to tau's text and image blocks), subscribing to one's updates
//! (kept across restarts), and the other requests a front-end makes of a server on the
//! user's behalf: argument completion and the roots' change.

use std::sync::{Arc, PoisonError};

use rmcp::model::{ReadResourceResult, Resource, ResourceTemplate};
use serde_json::Value;
use tau_protocol::{ImageContent, UserContentBlock};
use tokio_util::sync::CancellationToken;

use crate::connection::{CallError, Connection};
use crate::content::text;
use crate::manager::{McpError, McpManager, Server};

/// What an argument completed belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompletionTarget {
    /// A prompt, by the server's own name.
    Prompt(String),
    /// A resource template, by its URI template.
    ResourceTemplate(String),
}

/// A server's resources and templates as last listed.
#[derive(Debug, Clone, Default)]
pub(crate) struct Listed {
    resources: Vec<Resource>,
    templates: Vec<ResourceTemplate>,
}

/// A resource or a template, as offered to the model and to people.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceEntry {
    pub server: String,
    /// The URI, or the URI template (RFC 6570) of a template.
    pub uri: String,
    pub name: String,
    pub description: Option<String>,
    pub mime_type: Option<String>,
    pub template: bool,
}

impl ResourceEntry {
    /// What `@server:uri` in a prompt names it by.
    pub fn mention(&self) -> String {
        format!("@{}:{}", self.server, self.uri)
    }
}

impl Server {
    /// The resources of a server that offers them; a failure leaves it without (its tools
    /// still work).
    pub(crate) async fn fetch_resources(&self, connection: &Connection) -> Listed {
        if !connection.has_resources() {
            return Listed::default();
        }
        match connection
            .list_resources(self.options.request_timeout)
            .await
        {
            Ok((resources, templates)) => Listed {
                resources,
                templates,
            },
            Err(error) => {
                let error = self.redactor.redact_owned(error.to_string());
                tracing::warn!(server = %self.name, "resources/list failed: {error}");
                Listed::default()
            }
        }
    }

    /// Lists the resources again when the server said they changed.
    pub(crate) async fn refresh_resources(&self) {
        let Some(connection) = self.ready_connection() else {
            return;
        };
        if connection.resources_stale() && !connection.is_closed() {
            let listed = self.fetch_resources(&connection).await;
            *self
                .resources
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = listed;
        }
    }

    /// Subscribes a new connection to what the old one was subscribed to.
    pub(crate) fn resubscribe(self: &Arc<Self>, connection: &Arc<Connection>) {
        let uris: Vec<String> = self
            .subscribed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .cloned()
            .collect();
        if uris.is_empty() || !connection.can_subscribe() {
            return;
        }
        let connection = Arc::clone(connection);
        let timeout = self.options.request_timeout;
        tokio::spawn(async move {
            for uri in uris {
                if let Err(error) = connection.subscribe(&uri, timeout).await {
                    tracing::debug!(%uri, "resources/subscribe failed again: {error}");
                }
            }
        });
    }

    fn entries(&self) -> Vec<ResourceEntry> {
        let listed = self
            .resources
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let resources = listed.resources.iter().map(|resource| ResourceEntry {
            server: self.name.clone(),
            uri: resource.uri.clone(),
            name: resource.name.clone(),
            description: resource.description.clone(),
            mime_type: resource.mime_type.clone(),
            template: false,
        });
        let templates = listed.templates.iter().map(|template| ResourceEntry {
            server: self.name.clone(),
            uri: template.uri_template.clone(),
            name: template.name.clone(),
            description: template.description.clone(),
            mime_type: template.mime_type.clone(),
            template: true,
        });
        resources.chain(templates).collect()
    }
}

impl McpManager {
    /// Every server's resources and templates as last listed, in configuration order.
    pub fn current_resources(&self) -> Vec<ResourceEntry> {
        self.servers
            .iter()
            .flat_map(|server| server.entries())
            .collect()
    }

    /// Whether any server offers resources (the resource tools are offered only then).
    pub fn has_resources(&self) -> bool {
        self.servers.iter().any(|server| {
            let listed = server
                .resources
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            !listed.resources.is_empty() || !listed.templates.is_empty()
        })
    }

    /// `resources/read` of `uri` on `server`, its contents as text and image blocks (a
    /// server starting is waited for, one down started again, as for a call).
    pub async fn read_resource(
        &self,
        server: &str,
        uri: &str,
        cancel: &CancellationToken,
    ) -> Result<Vec<UserContentBlock>, String> {
        let server = self.server_named(server)?;
        let (connection, remaining) = server.connection_for_request(cancel).await?;
        let result = connection
            .read_resource(uri, remaining, cancel)
            .await
            .map_err(|error| server.failure(error))?;
        Ok(map_contents(result))
    }

    /// `resources/subscribe` to `uri` on `server` (kept for the server's later
    /// connections); the host hears of each update. Refused when the server does not
    /// offer subscriptions.
    pub async fn subscribe_resource(&self, server: &str, uri: &str) -> Result<(), String> {
        let server = self.server_named(server)?;
        let (connection, remaining) = server
            .connection_for_request(&CancellationToken::new())
            .await?;
        if !connection.can_subscribe() {
            return Err(format!(
                "MCP server \"{}\" does not offer resource subscriptions",
                server.name
            ));
        }
        connection
            .subscribe(uri, remaining)
            .await
            .map_err(|error| server.failure(error))?;
        server
            .subscribed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(uri.to_string());
        Ok(())
    }

    /// `completion/complete` for the argument `argument` of `target` on `server`, as typed
    /// so far (`value`), the arguments given before it as `context`; nothing when the server
    /// does not complete.
    pub async fn complete_argument(
        &self,
        server: &str,
        target: &CompletionTarget,
        argument: &str,
        value: &str,
        context: std::collections::HashMap<String, String>,
    ) -> Result<Vec<String>, String> {
        let server = self.server_named(server)?;
        let (connection, remaining) = server
            .connection_for_request(&CancellationToken::new())
            .await?;
        connection
            .complete(target, argument, value, context, remaining)
            .await
            .map_err(|error| server.failure(error))
    }

    /// Tells every running server that the roots changed (the working folder moved).
    pub async fn roots_changed(&self) {
        let connections: Vec<Arc<Connection>> = self
            .servers
            .iter()
            .filter_map(|server| server.ready_connection())
            .collect();
        for connection in connections {
            connection.roots_changed().await;
        }
    }

    fn server_named(&self, name: &str) -> Result<&Arc<Server>, String> {
        self.servers
            .iter()
            .find(|server| server.name == name)
            .ok_or_else(|| McpError::UnknownServer(name.to_string()).to_string())
    }
}

impl Server {
    fn failure(&self, error: CallError) -> String {
        self.redactor
            .redact_owned(format!("MCP server \"{}\": {error}", self.name))
    }
}

/// A resource's contents as blocks: text as it is, an image as an image, other binary data
/// named with its size (the model cannot read base64 usefully).
fn map_contents(result: ReadResourceResult) -> Vec<UserContentBlock> {
    let value = serde_json::to_value(&result).unwrap_or(Value::Null);
    let Some(contents) = value["contents"].as_array() else {
        return Vec::new();
    };
    contents
        .iter()
        .map(|content| {
            let uri = content["uri"].as_str().unwrap_or_default();
            let mime = content["mimeType"].as_str();
            if let Some(body) = content["text"].as_str() {
                return text(body.to_string());
            }
            let blob = content["blob"].as_str().unwrap_or_default();
            match mime {
                Some(mime) if mime.starts_with("image/") => UserContentBlock::Image(ImageContent {
                    data: blob.to_string(),
                    mime_type: mime.to_string(),
                }),
                mime => text(format!(
                    "[resource {uri} ({}): {} bytes of base64]",
                    mime.unwrap_or("binary"),
                    blob.len()
                )),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn contents_map_to_text_images_and_named_binaries() {
        let result: ReadResourceResult = serde_json::from_value(json!({"contents": [
            {"uri": "a://1", "mimeType": "text/plain", "text": "hello"},
            {"uri": "a://2", "mimeType": "image/png", "blob": "iVBORw0K"},
            {"uri": "a://3", "mimeType": "application/zip", "blob": "UEsDBA=="}
        ]}))
        .unwrap();
        let blocks = map_contents(result);
        assert_eq!(blocks.len(), 3);
        assert!(matches!(&blocks[0], UserContentBlock::Text(t) if t.text == "hello"));
        assert!(matches!(&blocks[1], UserContentBlock::Image(i) if i.mime_type == "image/png"));
        assert!(
            matches!(&blocks[2], UserContentBlock::Text(t) if t.text == "[resource a://3 (application/zip): 8 bytes of base64]")
        );
    }
}
