//! A tool an extension registered, as the agent loop sees it: calls go out as `execute_tool`
//! frames, progress comes back as `tool_execution_update`, an abort sends `cancel`.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde_json::{Map, Value};
use tau_agent::{AgentTool, ToolContext};
use tau_protocol::AgentToolResult;
use tau_protocol::extension::ToolRegistration;
use tokio::sync::mpsc;

use crate::Extensions;

/// An extension's tool.
#[derive(Clone)]
pub struct ExtensionTool {
    extensions: Arc<Extensions>,
    /// The owning extension's path.
    pub extension: String,
    pub registration: ToolRegistration,
}

impl std::fmt::Debug for ExtensionTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExtensionTool")
            .field("extension", &self.extension)
            .field("name", &self.registration.name)
            .finish()
    }
}

impl ExtensionTool {
    pub(crate) fn new(
        extensions: Arc<Extensions>,
        extension: String,
        registration: ToolRegistration,
    ) -> Self {
        Self {
            extensions,
            extension,
            registration,
        }
    }
}

/// The result shapes of ext §5.3: `{"result": {…}}` is the object the tool returned, kept
/// key for key (its own `isError` included, which is no failure: nothing was thrown, as pi
/// sees it); otherwise a thrown error arrives as `isError`, which the agent loop reports from
/// an `Err`.
fn to_result(mut value: Value) -> Result<AgentToolResult, String> {
    if let Some(Value::Object(returned)) = value.get_mut("result").map(Value::take) {
        let mut returned = returned;
        let content = returned
            .remove("content")
            .unwrap_or(Value::Array(Vec::new()));
        let details = returned.remove("details");
        let terminate = returned.remove("terminate");
        let shaped =
            serde_json::json!({"content": content, "details": details, "terminate": terminate});
        let mut result: AgentToolResult = serde_json::from_value(shaped)
            .map_err(|err| format!("The extension's tool result is malformed: {err}"))?;
        result.extra = returned;
        return Ok(result);
    }
    let is_error = value.get("isError").and_then(Value::as_bool) == Some(true);
    let result: AgentToolResult = serde_json::from_value(value)
        .map_err(|err| format!("The extension's tool result is malformed: {err}"))?;
    if is_error {
        return Err(tau_protocol::content::text_of(&result.content, "\n"));
    }
    Ok(result)
}

impl AgentTool for ExtensionTool {
    fn name(&self) -> &str {
        &self.registration.name
    }

    fn description(&self) -> &str {
        &self.registration.description
    }

    fn parameters(&self) -> &Value {
        &self.registration.parameters
    }

    fn prompt_snippet(&self) -> Option<String> {
        // pi collapses the snippet to one line.
        let snippet = self.registration.prompt_snippet.as_deref()?;
        let line = snippet.split_whitespace().collect::<Vec<_>>().join(" ");
        (!line.is_empty()).then_some(line)
    }

    fn prepare_arguments_async(
        &self,
        arguments: &Map<String, Value>,
    ) -> Option<BoxFuture<'_, Result<Map<String, Value>, String>>> {
        if !self.registration.prepare_arguments {
            return None;
        }
        let arguments = Value::Object(arguments.clone());
        Some(Box::pin(async move {
            match self
                .extensions
                .prepare_arguments(&self.extension, &self.registration.name, arguments)
                .await
            {
                Ok(Value::Object(prepared)) => Ok(prepared),
                Ok(_) => Err(format!(
                    "prepareArguments of \"{}\" did not return an object",
                    self.registration.name
                )),
                Err(err) => Err(err.to_string()),
            }
        }))
    }

    fn sequential(&self) -> bool {
        self.registration.execution_mode.as_deref() == Some("sequential")
    }

    fn prompt_guidelines(&self) -> Vec<String> {
        self.registration
            .prompt_guidelines
            .clone()
            .unwrap_or_default()
    }

    fn execute<'a>(
        &'a self,
        call_id: &'a str,
        arguments: Map<String, Value>,
        context: ToolContext,
    ) -> BoxFuture<'a, Result<AgentToolResult, String>> {
        Box::pin(async move {
            let (updates, mut progress) = mpsc::unbounded_channel::<Value>();
            let call = self.extensions.execute_tool(
                &self.extension,
                &self.registration,
                call_id,
                Value::Object(arguments),
                &context.cancel,
                updates,
            );
            tokio::pin!(call);
            let outcome = loop {
                tokio::select! {
                    biased;
                    Some(partial) = progress.recv() => {
                        if let Ok(partial) = serde_json::from_value::<AgentToolResult>(partial) {
                            context.update(partial);
                        }
                    }
                    outcome = &mut call => break outcome,
                }
            };
            match outcome {
                Ok(value) => to_result(value),
                Err(err) => Err(err.to_string()),
            }
        })
    }
}
