//! The `todo_write` tool (xcsh §4.5): the model keeps the session's phased todo list with a
//! batch of operations. Its parameters, the ids it hands out (`phase-N`, `task-N`, numbered
//! after the highest ones already in the list), the one-task-in-progress rule it applies
//! after every batch, its result text and its `details` (`{phases, storage}`) are xcsh's, so
//! a session file written by either agent restores the same list. The list itself belongs to
//! the session ([`TodoList`]); the tool only reads it and hands back the new one.

use std::sync::{Arc, LazyLock};

use serde::Deserialize;
use serde_json::{Map, Value, json};
use tau_agent::{AgentTool, ToolContext};
use tau_protocol::{AgentToolResult, TodoItem, TodoPhase, TodoStatus};

use crate::call::text_block;

/// The tool's name.
pub const NAME: &str = "todo_write";

/// Where the tool reads and writes the session's todo list.
pub trait TodoList: Send + Sync {
    /// The list as it is now.
    fn phases(&self) -> Vec<TodoPhase>;
    /// Replaces the list with the outcome of a call.
    fn replace(&self, phases: Vec<TodoPhase>);
    /// Whether the session is kept in a file (the result's `storage`: `session` or `memory`).
    fn persisted(&self) -> bool;
}

const DESCRIPTION: &str = "Keep a todo list, grouped in phases, for work that takes several \
steps, so the user can follow your progress. Send `ops`, a list of operations applied in \
order: `replace` drops the current list and builds a new one from `phases` (each a name and \
its tasks); `add_phase` appends one phase; `add_task` appends a task to the phase whose id you \
give (such as phase-2); `update` changes a task's status, text, notes or details by its id \
(such as task-3); `remove_task` deletes a task. The tool assigns the ids and lists them in its \
answer. A status is pending, in_progress, completed or abandoned. One task is in progress at \
a time: after your operations, any further in_progress task goes back to pending, and when \
none is in progress the first pending one becomes the current task.";

const SNIPPET: &str = "Plan and track multi-step work as a phased todo list the user can see";

const GUIDELINES: [&str; 2] = [
    "For work with several steps, write the plan with todo_write before you start.",
    "Mark each task completed with todo_write as soon as it is done, one at a time rather than in batches.",
];

static PARAMETERS: LazyLock<Value> = LazyLock::new(|| {
    let status = json!({
        "type": "string",
        "enum": ["pending", "in_progress", "completed", "abandoned"],
        "description": "Where the task stands"
    });
    let task = json!({
        "type": "object",
        "properties": {
            "content": {"type": "string", "description": "What the task is, in a few words"},
            "status": status,
            "notes": {"type": "string", "description": "Anything worth remembering about the task"},
            "details": {"type": "string", "description": "How to do it: files, steps, specifics (shown while the task is in progress)"}
        },
        "required": ["content"]
    });
    let phase = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "The phase's name"},
            "tasks": {"type": "array", "items": task}
        },
        "required": ["name"]
    });
    let op = |name: &str| json!({"type": "string", "const": name});
    json!({
        "type": "object",
        "properties": {
            "ops": {
                "type": "array",
                "description": "The operations, applied in order",
                "items": {"anyOf": [
                    {
                        "type": "object",
                        "properties": {
                            "op": op("replace"),
                            "phases": {"type": "array", "items": phase}
                        },
                        "required": ["op", "phases"]
                    },
                    {
                        "type": "object",
                        "properties": {
                            "op": op("add_phase"),
                            "name": {"type": "string", "description": "The new phase's name"},
                            "tasks": {"type": "array", "items": task}
                        },
                        "required": ["op", "name"]
                    },
                    {
                        "type": "object",
                        "properties": {
                            "op": op("add_task"),
                            "phase": {"type": "string", "description": "The id of the phase to add to, such as phase-1"},
                            "content": {"type": "string", "description": "What the task is, in a few words"},
                            "notes": {"type": "string", "description": "Anything worth remembering about the task"},
                            "details": {"type": "string", "description": "How to do it: files, steps, specifics"}
                        },
                        "required": ["op", "phase", "content"]
                    },
                    {
                        "type": "object",
                        "properties": {
                            "op": op("update"),
                            "id": {"type": "string", "description": "The task's id, such as task-3"},
                            "status": status,
                            "content": {"type": "string", "description": "The task's new text"},
                            "notes": {"type": "string", "description": "New notes"},
                            "details": {"type": "string", "description": "New details"}
                        },
                        "required": ["op", "id"]
                    },
                    {
                        "type": "object",
                        "properties": {
                            "op": op("remove_task"),
                            "id": {"type": "string", "description": "The task's id, such as task-3"}
                        },
                        "required": ["op", "id"]
                    }
                ]}
            }
        },
        "required": ["ops"]
    })
});

#[derive(Debug, Deserialize)]
struct Arguments {
    ops: Vec<Op>,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
enum Op {
    Replace {
        phases: Vec<InputPhase>,
    },
    AddPhase {
        name: String,
        #[serde(default)]
        tasks: Vec<InputTask>,
    },
    AddTask {
        phase: String,
        content: String,
        notes: Option<String>,
        details: Option<String>,
    },
    Update {
        id: String,
        status: Option<TodoStatus>,
        content: Option<String>,
        notes: Option<String>,
        details: Option<String>,
    },
    RemoveTask {
        id: String,
    },
}

#[derive(Debug, Deserialize)]
struct InputPhase {
    name: String,
    #[serde(default)]
    tasks: Vec<InputTask>,
}

#[derive(Debug, Deserialize)]
struct InputTask {
    content: String,
    status: Option<TodoStatus>,
    notes: Option<String>,
    details: Option<String>,
}

/// The list being edited and the next free ids.
struct Draft {
    phases: Vec<TodoPhase>,
    next_task: u64,
    next_phase: u64,
}

impl Draft {
    fn empty() -> Self {
        Self {
            phases: Vec::new(),
            next_task: 1,
            next_phase: 1,
        }
    }

    /// Numbering goes on after the highest `phase-N` / `task-N` already there, so a list the
    /// host seeded with such ids is extended, not clashed with.
    fn from_phases(phases: Vec<TodoPhase>) -> Self {
        let highest = |id: &str, prefix: &str| {
            id.strip_prefix(prefix)
                .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or(0)
        };
        let next_phase = phases
            .iter()
            .map(|p| highest(&p.id, "phase-"))
            .max()
            .unwrap_or(0)
            .saturating_add(1);
        let next_task = phases
            .iter()
            .flat_map(|p| &p.tasks)
            .map(|t| highest(&t.id, "task-"))
            .max()
            .unwrap_or(0)
            .saturating_add(1);
        Self {
            phases,
            next_task,
            next_phase,
        }
    }

    fn task(&mut self, input: InputTask) -> TodoItem {
        let id = format!("task-{}", self.next_task);
        self.next_task = self.next_task.saturating_add(1);
        TodoItem {
            id,
            content: input.content,
            status: input.status.unwrap_or(TodoStatus::Pending),
            notes: input.notes,
            details: input.details.map(Value::String),
            extra: Map::new(),
        }
    }

    fn add_phase(&mut self, name: String, tasks: Vec<InputTask>) {
        let id = format!("phase-{}", self.next_phase);
        self.next_phase = self.next_phase.saturating_add(1);
        let tasks = tasks.into_iter().map(|t| self.task(t)).collect();
        self.phases.push(TodoPhase {
            id,
            name,
            tasks,
            extra: Map::new(),
        });
    }

    fn find_task(&mut self, id: &str) -> Option<&mut TodoItem> {
        self.phases
            .iter_mut()
            .flat_map(|p| p.tasks.iter_mut())
            .find(|t| t.id == id)
    }

    fn task_count(&self) -> usize {
        self.phases.iter().map(|p| p.tasks.len()).sum()
    }

    /// Applies one operation; a problem is reported in the result, and the other operations
    /// still apply.
    fn apply(&mut self, op: Op, errors: &mut Vec<String>) {
        match op {
            Op::Replace { phases } => {
                *self = Self::empty();
                for phase in phases {
                    self.add_phase(phase.name, phase.tasks);
                }
            }
            Op::AddPhase { name, tasks } => self.add_phase(name, tasks),
            Op::AddTask {
                phase,
                content,
                notes,
                details,
            } => {
                let Some(index) = self.phases.iter().position(|p| p.id == phase) else {
                    errors.push(format!("Phase \"{phase}\" not found"));
                    return;
                };
                let task = self.task(InputTask {
                    content,
                    status: None,
                    notes,
                    details,
                });
                self.phases[index].tasks.push(task);
            }
            Op::Update {
                id,
                status,
                content,
                notes,
                details,
            } => {
                let empty = self.task_count() == 0;
                let Some(task) = self.find_task(&id) else {
                    let hint = if empty {
                        " (todo list is empty — was it replaced or not yet created?)"
                    } else {
                        ""
                    };
                    errors.push(format!("Task \"{id}\" not found{hint}"));
                    return;
                };
                if let Some(status) = status {
                    task.status = status;
                }
                if let Some(content) = content {
                    task.content = content;
                }
                if notes.is_some() {
                    task.notes = notes;
                }
                if let Some(details) = details {
                    task.details = Some(Value::String(details));
                }
            }
            Op::RemoveTask { id } => {
                let empty = self.task_count() == 0;
                let removed = self.phases.iter_mut().any(|phase| {
                    let at = phase.tasks.iter().position(|t| t.id == id);
                    at.map(|i| phase.tasks.remove(i)).is_some()
                });
                if !removed {
                    let hint = if empty { " (todo list is empty)" } else { "" };
                    errors.push(format!("Task \"{id}\" not found{hint}"));
                }
            }
        }
    }
}

/// At most one task in progress (the first one keeps it); when none is, the first pending
/// task is started.
pub fn normalize_in_progress(phases: &mut [TodoPhase]) {
    let mut seen = false;
    for task in phases.iter_mut().flat_map(|p| p.tasks.iter_mut()) {
        if task.status == TodoStatus::InProgress {
            if seen {
                task.status = TodoStatus::Pending;
            }
            seen = true;
        }
    }
    if !seen
        && let Some(first) = phases
            .iter_mut()
            .flat_map(|p| p.tasks.iter_mut())
            .find(|t| t.status == TodoStatus::Pending)
    {
        first.status = TodoStatus::InProgress;
    }
}

/// Applies `ops` to `phases` and normalises the result; returns the new list and the problems
/// met on the way.
fn apply_ops(phases: Vec<TodoPhase>, ops: Vec<Op>) -> (Vec<TodoPhase>, Vec<String>) {
    let mut draft = Draft::from_phases(phases);
    let mut errors = Vec::new();
    for op in ops {
        draft.apply(op, &mut errors);
    }
    normalize_in_progress(&mut draft.phases);
    (draft.phases, errors)
}

/// Whether a task still has to be done (what reminders are about).
pub fn is_open(status: TodoStatus) -> bool {
    matches!(status, TodoStatus::Pending | TodoStatus::InProgress)
}

fn is_done(status: TodoStatus) -> bool {
    matches!(status, TodoStatus::Completed | TodoStatus::Abandoned)
}

fn status_name(status: TodoStatus) -> &'static str {
    match status {
        TodoStatus::Pending => "pending",
        TodoStatus::InProgress => "in_progress",
        TodoStatus::Completed => "completed",
        TodoStatus::Abandoned => "abandoned",
    }
}

/// The result text the model reads (xcsh's layout: the open tasks, the current phase's
/// progress, then every phase with a mark per task).
fn summary(phases: &[TodoPhase], errors: &[String]) -> String {
    let error_line = (!errors.is_empty()).then(|| format!("Errors: {}", errors.join("; ")));
    if phases.iter().all(|p| p.tasks.is_empty()) {
        return error_line.unwrap_or_else(|| "Todo list cleared.".into());
    }
    let mut lines: Vec<String> = error_line.into_iter().collect();
    let open: Vec<(&TodoItem, &str)> = phases
        .iter()
        .flat_map(|p| p.tasks.iter().map(move |t| (t, p.name.as_str())))
        .filter(|(t, _)| is_open(t.status))
        .collect();
    if open.is_empty() {
        lines.push("Remaining items: none.".into());
    } else {
        lines.push(format!("Remaining items ({}):", open.len()));
        for (task, phase) in &open {
            lines.push(format!(
                "  - {} {} [{}] ({phase})",
                task.id,
                task.content,
                status_name(task.status)
            ));
            if task.status == TodoStatus::InProgress
                && let Some(Value::String(details)) = &task.details
                && !details.is_empty()
            {
                lines.extend(details.split('\n').map(|line| format!("      {line}")));
            }
        }
    }
    let current = phases
        .iter()
        .position(|p| p.tasks.iter().any(|t| is_open(t.status)))
        .unwrap_or(phases.len() - 1);
    let phase = &phases[current];
    let done = phase.tasks.iter().filter(|t| is_done(t.status)).count();
    lines.push(format!(
        "Phase {}/{} \"{}\" — {done}/{} tasks complete",
        current + 1,
        phases.len(),
        phase.name,
        phase.tasks.len()
    ));
    for phase in phases {
        lines.push(format!("  {}:", phase.name));
        for task in &phase.tasks {
            let mark = match task.status {
                TodoStatus::Completed => "✓",
                TodoStatus::InProgress => "→",
                TodoStatus::Abandoned => "✗",
                TodoStatus::Pending => "○",
            };
            lines.push(format!("    {mark} {} {}", task.id, task.content));
        }
    }
    lines.join("\n")
}

/// The `todo_write` tool over a session's list.
pub struct TodoWriteTool {
    list: Arc<dyn TodoList>,
}

impl TodoWriteTool {
    pub fn new(list: Arc<dyn TodoList>) -> Self {
        Self { list }
    }

    /// Runs one call; `execute` delegates here. `Err` carries the error text.
    pub fn run(&self, arguments: Map<String, Value>) -> Result<AgentToolResult, String> {
        let Arguments { ops } = serde_json::from_value(Value::Object(arguments))
            .map_err(|err| format!("Invalid todo_write arguments: {err}"))?;
        let (phases, errors) = apply_ops(self.list.phases(), ops);
        self.list.replace(phases.clone());
        let storage = if self.list.persisted() {
            "session"
        } else {
            "memory"
        };
        Ok(AgentToolResult {
            extra: Default::default(),
            content: vec![text_block(summary(&phases, &errors))],
            details: Some(json!({"phases": phases, "storage": storage})),
            terminate: None,
        })
    }
}

impl AgentTool for TodoWriteTool {
    fn name(&self) -> &str {
        NAME
    }

    fn description(&self) -> &str {
        DESCRIPTION
    }

    fn parameters(&self) -> &Value {
        &PARAMETERS
    }

    fn prompt_snippet(&self) -> Option<String> {
        Some(SNIPPET.into())
    }

    fn prompt_guidelines(&self) -> Vec<String> {
        GUIDELINES.iter().map(|g| (*g).to_string()).collect()
    }

    /// xcsh runs it alone ("exclusive"): two calls in one batch must not read the same list
    /// and overwrite each other's changes.
    fn sequential(&self) -> bool {
        true
    }

    fn execute<'a>(
        &'a self,
        _call_id: &'a str,
        arguments: Map<String, Value>,
        _context: ToolContext,
    ) -> futures_util::future::BoxFuture<'a, Result<AgentToolResult, String>> {
        Box::pin(async move { self.run(arguments) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[derive(Default)]
    struct Memory(Mutex<Vec<TodoPhase>>);

    impl TodoList for Memory {
        fn phases(&self) -> Vec<TodoPhase> {
            self.0.lock().map(|p| p.clone()).unwrap_or_default()
        }
        fn replace(&self, phases: Vec<TodoPhase>) {
            if let Ok(mut p) = self.0.lock() {
                *p = phases;
            }
        }
        fn persisted(&self) -> bool {
            false
        }
    }

    fn call(tool: &TodoWriteTool, ops: Value) -> (String, Value) {
        let Value::Object(args) = json!({ "ops": ops }) else {
            unreachable!()
        };
        let result = tool.run(args).unwrap_or_else(|e| panic!("{e}"));
        let text = match &result.content[0] {
            tau_protocol::UserContentBlock::Text(t) => t.text.clone(),
            other => panic!("{other:?}"),
        };
        (text, result.details.unwrap_or_default())
    }

    #[test]
    fn builds_numbers_normalises_and_summarises_as_xcsh() {
        let list = Arc::new(Memory::default());
        let tool = TodoWriteTool::new(list.clone());
        let (text, details) = call(
            &tool,
            json!([{"op": "replace", "phases": [
                {"name": "Look", "tasks": [{"content": "Read code", "details": "src/a.rs\nsrc/b.rs"}, {"content": "Map tools", "status": "in_progress"}]},
                {"name": "Build"}
            ]}]),
        );
        assert_eq!(details["storage"], "memory");
        let phases = &details["phases"];
        assert_eq!(phases[0]["id"], "phase-1");
        assert_eq!(phases[1]["id"], "phase-2");
        assert_eq!(phases[0]["tasks"][0]["id"], "task-1");
        assert_eq!(phases[0]["tasks"][0]["status"], "pending", "not promoted");
        assert_eq!(phases[0]["tasks"][1]["status"], "in_progress");
        assert_eq!(
            text,
            "Remaining items (2):\n  - task-1 Read code [pending] (Look)\n  - task-2 Map tools [in_progress] (Look)\nPhase 1/2 \"Look\" — 0/2 tasks complete\n  Look:\n    ○ task-1 Read code\n    → task-2 Map tools\n  Build:"
        );

        let (text, details) = call(
            &tool,
            json!([
                {"op": "update", "id": "task-2", "status": "completed"},
                {"op": "add_task", "phase": "phase-2", "content": "Write it"},
                {"op": "add_task", "phase": "phase-9", "content": "Lost"},
                {"op": "remove_task", "id": "task-7"}
            ]),
        );
        let phases = &details["phases"];
        assert_eq!(phases[0]["tasks"][0]["status"], "in_progress", "promoted");
        assert_eq!(phases[1]["tasks"][0]["id"], "task-3");
        assert!(
            text.starts_with(
                "Errors: Phase \"phase-9\" not found; Task \"task-7\" not found\nRemaining items (2):\n  - task-1 Read code [in_progress] (Look)\n      src/a.rs\n      src/b.rs\n"
            ),
            "{text}"
        );
        assert!(text.contains("\n    ✓ task-2 Map tools\n"), "{text}");

        let (text, _) = call(&tool, json!([{"op": "replace", "phases": []}]));
        assert_eq!(text, "Todo list cleared.");
        let (text, _) = call(&tool, json!([{"op": "update", "id": "task-1"}]));
        assert_eq!(
            text,
            "Errors: Task \"task-1\" not found (todo list is empty — was it replaced or not yet created?)"
        );
    }

    #[test]
    fn numbering_continues_after_a_seeded_list() {
        let seeded: Vec<TodoPhase> = serde_json::from_value(json!([{
            "id": "phase-4", "name": "Seeded", "tasks": [
                {"id": "task-9", "content": "a", "status": "in_progress"},
                {"id": "task-2", "content": "b", "status": "in_progress", "owner": "host"}
            ]
        }]))
        .unwrap_or_default();
        let list = Arc::new(Memory(Mutex::new(seeded)));
        let tool = TodoWriteTool::new(list.clone());
        let (_, details) = call(
            &tool,
            json!([{"op": "add_phase", "name": "More", "tasks": [{"content": "c"}]}]),
        );
        let phases = &details["phases"];
        assert_eq!(phases[1]["id"], "phase-5");
        assert_eq!(phases[1]["tasks"][0]["id"], "task-10");
        assert_eq!(
            phases[0]["tasks"][1]["status"], "pending",
            "one in progress"
        );
        assert_eq!(phases[0]["tasks"][1]["owner"], "host", "fields kept");
        assert_eq!(list.phases().len(), 2);
    }
}
