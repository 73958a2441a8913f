//! Todo phases set by the host (`set_todos`) and reported in `get_state.todoPhases`.
//! Every field the host sent is kept, `details` and unknown fields included (decision 15).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A task's state. Anything else is rejected (decision 8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    Pending,
    InProgress,
    Completed,
    Abandoned,
}

/// One task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TodoItem {
    pub id: String,
    pub content: String,
    pub status: TodoStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A named group of tasks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TodoPhase {
    pub id: String,
    pub name: String,
    pub tasks: Vec<TodoItem>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}
