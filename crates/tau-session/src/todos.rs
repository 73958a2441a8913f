//! The session's todo list (xcsh §4.5, §6.2, §6.3): what `set_todos` and the `todo_write`
//! tool replace and `get_state.todoPhases` reports, the auto-clear timers of finished tasks
//! (`tasks.todoClearDelay`, `todo_auto_clear`), the reminders after a run that stopped with
//! open tasks (`todo_reminder`), and where the list is found again in a session file.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;
use tau_protocol::SessionEvent;

use serde::Deserialize;
use tau_protocol::{
    AgentMessage, CustomMessage, TodoPhase, TodoReminderItem, TodoStatus, UserContent,
};
use tau_tools::todo_write::{self, TodoList, is_open};

use crate::store::{EntryKind, SessionEntry};
use crate::{EventSink, Settings};

/// The `custom` entry `set_todos` writes, `data: {"phases": […]}` (decision 15).
pub(crate) const TODOS_ENTRY: &str = "todo-phases";

/// The `customType` of the hidden message a reminder adds to the context.
pub(crate) const REMINDER_MESSAGE: &str = "todo-reminder";

/// xcsh's `todo.reminders.max`, which its RPC mode forces to the default.
pub(crate) const MAX_REMINDERS: u32 = 3;

/// `tasks.todoClearDelay` (seconds, default 60): `None` (a negative value) never clears.
pub(crate) fn clear_delay(settings: &Settings) -> Option<Duration> {
    let seconds = settings.get::<f64>("tasks.todoClearDelay").unwrap_or(60.0);
    if seconds < 0.0 {
        return None;
    }
    Duration::try_from_secs_f64(seconds).ok()
}

/// A reminder due after a run: the event and the hidden message that asks the model to go on.
pub(crate) struct Reminder {
    pub event: SessionEvent,
    pub message: AgentMessage,
}

/// The list, shared by the session, its runs' `todo_write` tool and the auto-clear timers.
pub(crate) struct Todos {
    me: Weak<Todos>,
    events: EventSink,
    persisted: bool,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    phases: Vec<TodoPhase>,
    clear_delay: Option<Duration>,
    /// One timer per finished task, by task id.
    timers: HashMap<String, Timer>,
    next_token: u64,
    /// Reminders sent since the last prompt.
    reminders: u32,
}

struct Timer {
    /// Tells a timer that fired from one that replaced it meanwhile.
    token: u64,
    handle: tokio::task::AbortHandle,
}

impl std::fmt::Debug for Todos {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.lock();
        f.debug_struct("Todos")
            .field("phases", &inner.phases)
            .field("clear_delay", &inner.clear_delay)
            .field("timers", &inner.timers.len())
            .field("reminders", &inner.reminders)
            .finish_non_exhaustive()
    }
}

fn is_done(status: TodoStatus) -> bool {
    matches!(status, TodoStatus::Completed | TodoStatus::Abandoned)
}

impl Todos {
    pub fn new(events: EventSink, persisted: bool, clear_delay: Option<Duration>) -> Arc<Self> {
        Arc::new_cyclic(|me| Self {
            me: me.clone(),
            events,
            persisted,
            inner: Mutex::new(Inner {
                clear_delay,
                ..Inner::default()
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Every update replaces whole values, so a panic elsewhere cannot leave the list
        // half-changed.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn phases(&self) -> Vec<TodoPhase> {
        self.lock().phases.clone()
    }

    /// Replaces the list (`set_todos`, `todo_write`) and arms the auto-clear timers of the
    /// tasks that are now finished.
    pub fn set(&self, phases: Vec<TodoPhase>) {
        let mut inner = self.lock();
        inner.phases = phases;
        self.schedule(&mut inner);
    }

    /// The list of another conversation (a new, switched-to, forked or reopened session, or
    /// another point of the tree): the old list's timers and reminder count go with it.
    pub fn reset(&self, phases: Vec<TodoPhase>) {
        let mut inner = self.lock();
        for (_, timer) in inner.timers.drain() {
            timer.handle.abort();
        }
        inner.reminders = 0;
        inner.phases = phases;
        self.schedule(&mut inner);
    }

    pub fn set_clear_delay(&self, delay: Option<Duration>) {
        self.lock().clear_delay = delay;
    }

    /// A new prompt: the reminders start counting again.
    pub fn reset_reminders(&self) {
        self.lock().reminders = 0;
    }

    /// Timers for the finished tasks that have none; tasks no longer finished lose theirs.
    fn schedule(&self, inner: &mut Inner) {
        let mut done: Vec<String> = Vec::new();
        for task in inner.phases.iter().flat_map(|p| &p.tasks) {
            if is_done(task.status) && !done.contains(&task.id) {
                done.push(task.id.clone());
            }
        }
        inner.timers.retain(|id, timer| {
            let keep = done.contains(id);
            if !keep {
                timer.handle.abort();
            }
            keep
        });
        let Some(delay) = inner.clear_delay else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        for id in done {
            if inner.timers.contains_key(&id) {
                continue;
            }
            inner.next_token += 1;
            let token = inner.next_token;
            let me = self.me.clone();
            let task_id = id.clone();
            let handle = runtime
                .spawn(async move {
                    tokio::time::sleep(delay).await;
                    if let Some(todos) = me.upgrade() {
                        todos.clear_finished(&task_id, token).await;
                    }
                })
                .abort_handle();
            inner.timers.insert(id, Timer { token, handle });
        }
    }

    /// A timer fired: the task goes if it is still finished, and an emptied phase with it.
    async fn clear_finished(&self, task_id: &str, token: u64) {
        let removed = {
            let mut inner = self.lock();
            match inner.timers.get(task_id) {
                Some(timer) if timer.token == token => {
                    inner.timers.remove(task_id);
                }
                // Cancelled or replaced while this one was waking up.
                _ => return,
            }
            let mut removed = false;
            for phase in &mut inner.phases {
                if let Some(at) = phase
                    .tasks
                    .iter()
                    .position(|t| t.id == task_id && is_done(t.status))
                {
                    phase.tasks.remove(at);
                    removed = true;
                    break;
                }
            }
            if removed {
                inner.phases.retain(|p| !p.tasks.is_empty());
            }
            removed
        };
        if removed {
            self.events.emit(SessionEvent::TodoAutoClear).await;
        }
    }

    /// The reminder due after a run whose last reply stopped with open tasks, unless
    /// [`MAX_REMINDERS`] have been sent since the last prompt. No open task resets the count.
    pub fn next_reminder(&self) -> Option<Reminder> {
        let mut inner = self.lock();
        if inner.reminders >= MAX_REMINDERS {
            return None;
        }
        let open: Vec<(&str, Vec<TodoReminderItem>)> = inner
            .phases
            .iter()
            .map(|phase| {
                let tasks = phase
                    .tasks
                    .iter()
                    .filter(|t| is_open(t.status))
                    .map(|t| TodoReminderItem {
                        id: t.id.clone(),
                        content: t.content.clone(),
                        status: t.status,
                    })
                    .collect::<Vec<_>>();
                (phase.name.as_str(), tasks)
            })
            .filter(|(_, tasks)| !tasks.is_empty())
            .collect();
        let count: usize = open.iter().map(|(_, tasks)| tasks.len()).sum();
        if count == 0 {
            inner.reminders = 0;
            return None;
        }
        let attempt = inner.reminders + 1;
        let mut text =
            format!("<system-reminder>\nYour turn ended with {count} todo item(s) still open:\n");
        for (phase, tasks) in &open {
            text.push_str(&format!("- {phase}\n"));
            for task in tasks {
                text.push_str(&format!("  - {}\n", task.content));
            }
        }
        text.push_str(&format!(
            "\nCarry on with them, or record with todo_write the ones that are finished or \
             dropped.\n(Reminder {attempt}/{MAX_REMINDERS})\n</system-reminder>"
        ));
        let todos: Vec<TodoReminderItem> = open.into_iter().flat_map(|(_, tasks)| tasks).collect();
        inner.reminders = attempt;
        Some(Reminder {
            event: SessionEvent::TodoReminder {
                todos,
                attempt,
                max_attempts: MAX_REMINDERS,
            },
            message: AgentMessage::Custom(CustomMessage {
                custom_type: REMINDER_MESSAGE.into(),
                content: UserContent::Text(text),
                display: false,
                details: Some(serde_json::json!({ "attempt": attempt })),
                timestamp: tau_ai::now_ms(),
            }),
        })
    }
}

impl TodoList for Todos {
    fn phases(&self) -> Vec<TodoPhase> {
        Todos::phases(self)
    }

    fn replace(&self, phases: Vec<TodoPhase>) {
        self.set(phases);
    }

    fn persisted(&self) -> bool {
        self.persisted
    }
}

/// The list in effect at the end of `path` (root to leaf): the newest successful `todo_write`
/// result or `set_todos` entry on it, without its finished tasks, whose grace period is over
/// (xcsh strips them the same way); empty when there is none.
pub(crate) fn latest_on_branch(path: &[&SessionEntry]) -> Vec<TodoPhase> {
    for entry in path.iter().rev() {
        let phases = match (&entry.kind, entry.message()) {
            (_, Some(AgentMessage::ToolResult(result)))
                if result.tool_name == todo_write::NAME && !result.is_error =>
            {
                result.details.as_ref().and_then(|d| d.get("phases"))
            }
            (EntryKind::Custom { custom_type, data }, _) if custom_type == TODOS_ENTRY => {
                data.as_ref().and_then(|d| d.get("phases"))
            }
            _ => None,
        };
        let Some(phases) = phases else {
            continue;
        };
        match Vec::<TodoPhase>::deserialize(phases) {
            Ok(mut phases) => {
                for phase in &mut phases {
                    phase.tasks.retain(|t| !is_done(t.status));
                }
                phases.retain(|p| !p.tasks.is_empty());
                return phases;
            }
            // A list tau cannot read (an unknown status written by another agent) is passed
            // over for the one before it.
            Err(err) => tracing::warn!("ignoring the todo list of entry {}: {err}", entry.id),
        }
    }
    Vec::new()
}
