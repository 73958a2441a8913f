//! Tools the RPC host executes itself (xcsh's `set_host_tools`): validation, and which of
//! them are active. Calling them is the agent loop's business.

use serde_json::Value;
use tau_protocol::rpc::OutboundRecord;
pub(crate) use tau_protocol::{HostToolCall, HostToolCancel, HostToolDefinition, HostToolOutput};

/// A validated host tool.
#[derive(Debug, Clone, PartialEq)]
pub struct RegisteredHostTool {
    /// Trimmed name.
    pub name: String,
    /// Trimmed label, defaulting to the name.
    pub label: String,
    pub description: String,
    pub parameters: Value,
    /// Whether the model is offered the tool.
    pub active: bool,
}

/// Why a `set_host_tools` request was refused. The texts are xcsh's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostToolError {
    #[error("Host tool at index {0} must provide a non-empty name")]
    EmptyName(usize),
    #[error("Host tool \"{0}\" must provide a non-empty description")]
    EmptyDescription(String),
    #[error("Host tool \"{0}\" must provide a JSON Schema object")]
    NotASchemaObject(String),
    #[error("RPC host tool names must be unique")]
    Duplicate,
    #[error("RPC host tool \"{0}\" conflicts with an existing tool")]
    Conflict(String),
}

/// The current set of host tools.
#[derive(Debug, Clone, Default)]
pub struct HostToolRegistry {
    tools: Vec<RegisteredHostTool>,
}

impl HostToolRegistry {
    pub fn tools(&self) -> &[RegisteredHostTool] {
        &self.tools
    }

    /// Replaces the whole set, or changes nothing if any definition is invalid.
    ///
    /// Activity follows xcsh: a name seen for the first time is active unless `hidden`; a name
    /// already registered keeps its state. Names compare exactly (xcsh lower-cases on one side
    /// only, which leaves mixed-case tools forever inactive; tau does not copy that).
    pub fn replace(
        &mut self,
        definitions: Vec<HostToolDefinition>,
        reserved_names: &[&str],
    ) -> Result<Vec<String>, HostToolError> {
        let mut next = Vec::with_capacity(definitions.len());
        for (index, def) in definitions.into_iter().enumerate() {
            let name = def.name.trim().to_string();
            if name.is_empty() {
                return Err(HostToolError::EmptyName(index));
            }
            let description = def.description.trim();
            if description.is_empty() {
                return Err(HostToolError::EmptyDescription(name));
            }
            if !def.parameters.is_object() {
                return Err(HostToolError::NotASchemaObject(name));
            }
            let label = def
                .label
                .as_deref()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .unwrap_or(&name)
                .to_string();
            let previous = self.tools.iter().find(|t| t.name == name);
            let active = match previous {
                Some(prev) => prev.active,
                None => def.hidden != Some(true),
            };
            next.push(RegisteredHostTool {
                label,
                description: description.to_string(),
                parameters: def.parameters,
                active,
                name,
            });
        }
        for (i, tool) in next.iter().enumerate() {
            if next[..i].iter().any(|t| t.name == tool.name) {
                return Err(HostToolError::Duplicate);
            }
            if reserved_names.contains(&tool.name.as_str()) {
                return Err(HostToolError::Conflict(tool.name.clone()));
            }
        }
        let names = next.iter().map(|t| t.name.clone()).collect();
        self.tools = next;
        Ok(names)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn def(name: &str, hidden: Option<bool>) -> HostToolDefinition {
        HostToolDefinition {
            name: name.into(),
            label: None,
            description: "does things".into(),
            parameters: json!({"type": "object"}),
            hidden,
        }
    }

    #[test]
    fn hidden_only_matters_on_first_registration() {
        let mut reg = HostToolRegistry::default();
        reg.replace(vec![def("a", Some(true)), def("b", None)], &[])
            .unwrap();
        assert!(!reg.tools()[0].active);
        assert!(reg.tools()[1].active);
        reg.replace(vec![def("a", None), def("b", Some(true))], &[])
            .unwrap();
        assert!(!reg.tools()[0].active, "first seen hidden stays inactive");
        assert!(reg.tools()[1].active, "first seen visible stays active");
    }

    #[test]
    fn validation_errors_use_xcsh_texts_and_change_nothing() {
        let mut reg = HostToolRegistry::default();
        reg.replace(vec![def("keep", None)], &[]).unwrap();
        let err = reg
            .replace(vec![def("ok", None), def("  ", None)], &[])
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "Host tool at index 1 must provide a non-empty name"
        );
        let mut bad = def("x", None);
        bad.parameters = json!([1]);
        assert_eq!(
            reg.replace(vec![bad], &[]).unwrap_err().to_string(),
            "Host tool \"x\" must provide a JSON Schema object"
        );
        assert_eq!(
            reg.replace(vec![def("d", None), def(" d ", None)], &[])
                .unwrap_err(),
            HostToolError::Duplicate
        );
        assert_eq!(
            reg.replace(vec![def("bash", None)], &["bash"])
                .unwrap_err()
                .to_string(),
            "RPC host tool \"bash\" conflicts with an existing tool"
        );
        assert_eq!(reg.tools().len(), 1);
        assert_eq!(reg.tools()[0].name, "keep");
    }
}

/// Routes host-tool replies (stdin frames) to the calls waiting for them.
#[derive(Debug, Default)]
pub struct HostToolBridge {
    pending: std::sync::Mutex<std::collections::HashMap<String, PendingCall>>,
    /// The client has gone (stdin closed): no call can be answered any more. Read and set
    /// under the `pending` lock, so a call never slips in after the map was emptied.
    disconnected: std::sync::atomic::AtomicBool,
}

#[derive(Debug)]
struct PendingCall {
    result: tokio::sync::oneshot::Sender<(HostToolOutput, bool)>,
    updates: tokio::sync::mpsc::UnboundedSender<HostToolOutput>,
}

impl HostToolBridge {
    fn calls(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, PendingCall>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A `host_tool_result`: settles the call; unknown or settled ids are ignored (xcsh).
    pub fn resolve(&self, id: &str, output: HostToolOutput, is_error: bool) {
        if let Some(call) = self.calls().remove(id) {
            let _ = call.result.send((output, is_error));
        }
    }

    /// A `host_tool_update`: progress for a pending call; unknown ids are ignored.
    /// stdin closed: every pending call fails with xcsh's disconnect text (their senders are
    /// dropped), and so does every later one, before any frame is written.
    pub fn disconnect(&self) {
        let mut calls = self.calls();
        self.disconnected
            .store(true, std::sync::atomic::Ordering::Release);
        calls.clear();
    }

    pub fn update(&self, id: &str, output: HostToolOutput) {
        if let Some(call) = self.calls().get(id) {
            let _ = call.updates.send(output);
        }
    }
}

/// A 16-character lowercase hex id, like xcsh's server-side ids.
/// xcsh's text for a host-tool call the client can no longer answer (xcsh.md §2.2).
const DISCONNECTED: &str = "RPC client disconnected before host tool execution completed";

fn new_frame_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..16].to_string()
}

/// A host tool as the agent loop sees it: each call becomes a `host_tool_call` frame and
/// waits for the host's `host_tool_result`.
pub struct HostTool {
    tool: RegisteredHostTool,
    bridge: std::sync::Arc<HostToolBridge>,
    events: crate::EventSink,
}

impl HostTool {
    pub fn new(
        tool: RegisteredHostTool,
        bridge: std::sync::Arc<HostToolBridge>,
        events: crate::EventSink,
    ) -> Self {
        Self {
            tool,
            bridge,
            events,
        }
    }

    async fn call(
        &self,
        call_id: &str,
        arguments: serde_json::Map<String, Value>,
        context: tau_agent::ToolContext,
    ) -> Result<tau_protocol::AgentToolResult, String> {
        let aborted = || format!("Host tool \"{}\" was aborted", self.tool.name);
        if context.cancel.is_cancelled() {
            return Err(aborted());
        }
        let id = new_frame_id();
        let (result_tx, mut result_rx) = tokio::sync::oneshot::channel();
        let (updates_tx, mut updates_rx) = tokio::sync::mpsc::unbounded_channel();
        {
            let mut calls = self.bridge.calls();
            if self
                .bridge
                .disconnected
                .load(std::sync::atomic::Ordering::Acquire)
            {
                return Err(DISCONNECTED.to_string());
            }
            calls.insert(
                id.clone(),
                PendingCall {
                    result: result_tx,
                    updates: updates_tx,
                },
            );
        }
        let frame = HostToolCall {
            id: id.clone(),
            tool_call_id: call_id.to_string(),
            tool_name: self.tool.name.clone(),
            arguments: Value::Object(arguments),
        };
        self.events
            .emit_record(OutboundRecord::HostToolCall(frame))
            .await;
        loop {
            tokio::select! {
                            biased;
                            () = context.cancel.cancelled() => {
                                self.bridge.calls().remove(&id);
                                let cancel = HostToolCancel { id: new_frame_id(), target_id: id };
                                self.events.emit_record(OutboundRecord::HostToolCancel(cancel)).await;
                                return Err(aborted());
                            }
                            Some(update) = updates_rx.recv() => {
                                context.update(tau_protocol::AgentToolResult {
            extra: Default::default(),
                                    content: update.content,
                                    details: update.details,
                                    terminate: None,
                                });
                            }
                            result = &mut result_rx => {
                                return match result {
                                    Ok((output, false)) => Ok(tau_protocol::AgentToolResult {
            extra: Default::default(),
                                        content: output.content,
                                        details: output.details,
                                        terminate: None,
                                    }),
                                    Ok((output, true)) => {
                                        let text = tau_protocol::content::text_of(&output.content, "\n")
                                            .trim()
                                            .to_string();
                                        Err(if text.is_empty() { "Host tool execution failed".to_string() } else { text })
                                    }
                                    Err(_) => Err(DISCONNECTED.to_string()),
                                };
                            }
                        }
        }
    }
}

impl tau_agent::AgentTool for HostTool {
    fn name(&self) -> &str {
        &self.tool.name
    }

    fn description(&self) -> &str {
        &self.tool.description
    }

    fn parameters(&self) -> &Value {
        &self.tool.parameters
    }

    fn execute<'a>(
        &'a self,
        call_id: &'a str,
        arguments: serde_json::Map<String, Value>,
        context: tau_agent::ToolContext,
    ) -> futures_util::future::BoxFuture<'a, Result<tau_protocol::AgentToolResult, String>> {
        Box::pin(self.call(call_id, arguments, context))
    }
}
