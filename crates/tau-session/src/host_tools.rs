//! Tools the RPC host executes itself (xcsh's `set_host_tools`): validation, and which of
//! them are active. Calling them is the agent loop's business.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A host tool as the host describes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostToolDefinition {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    pub description: String,
    /// A JSON Schema object for the arguments.
    pub parameters: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hidden: Option<bool>,
}

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
