//! The session as extensions mirror it (docs/extensions.md §5): the session's own keys (model,
//! thinking level, tools), refreshed by the session when it handles a command, and the live
//! ones (idle, queues, session file, entries) read from the conversation when a frame leaves.

use std::sync::{Arc, Mutex};

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::conversation::Conversation;

/// The state source the extensions read.
#[derive(Debug)]
pub(crate) struct ExtensionState {
    pub conversation: Arc<Conversation>,
    /// Keys only the session knows; replaced whole by [`AgentSession::refresh_extension_state`].
    pub session_keys: Mutex<Map<String, Value>>,
    /// `allModels` as JSON text, sent once per process.
    pub catalog: Option<Box<RawValue>>,
    /// `projectTrusted` (`ctx.isProjectTrusted()`), decided before the session starts.
    pub project_trusted: bool,
    /// `contextUsage` for a number of messages and a context window: estimating walks the
    /// whole context, so it is redone only when either changes.
    pub context_usage: Mutex<Option<(usize, u64, Value)>>,
}

impl ExtensionState {
    fn context_usage(&self, window: u64) -> Value {
        if window == 0 {
            return Value::Null;
        }
        let count = self.conversation.lock().messages.len();
        if let Ok(cached) = self.context_usage.lock()
            && let Some((n, w, value)) = cached.as_ref()
            && *n == count
            && *w == window
        {
            return value.clone();
        }
        let known = {
            let store = self.conversation.store();
            crate::tokens::usage_known_since_compaction(&store.branch_path())
        };
        let tokens = known
            .then(|| crate::tokens::estimate_context_tokens(&self.conversation.lock().messages));
        let value = serde_json::json!({"tokens": tokens, "contextWindow": window,
            "percent": tokens.map(|t| t as f64 / window as f64 * 100.0)});
        if let Ok(mut cached) = self.context_usage.lock() {
            *cached = Some((count, window, value.clone()));
        }
        value
    }
}

impl tau_extensions::StateSource for ExtensionState {
    fn fields(&self) -> Map<String, Value> {
        let mut fields = self
            .session_keys
            .lock()
            .map(|k| k.clone())
            .unwrap_or_default();
        {
            let state = self.conversation.lock();
            fields.insert("isIdle".into(), Value::Bool(!state.run_active));
            let pending = !state.steering.is_empty()
                || !state.follow_up.is_empty()
                || !state.delivering.is_empty();
            fields.insert("hasPendingMessages".into(), Value::Bool(pending));
        }
        let window = fields
            .get("contextWindow")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        fields.remove("contextWindow");
        fields.insert("contextUsage".into(), self.context_usage(window));
        let store = self.conversation.store();
        fields.insert("sessionId".into(), store.session_id().into());
        if let Some(file) = store.file_path() {
            fields.insert("sessionFile".into(), file.display().to_string().into());
        }
        fields.insert(
            "sessionName".into(),
            store.session_name().map_or(Value::Null, Into::into),
        );
        if let Ok(header) = serde_json::to_value(store.header()) {
            fields.insert("header".into(), header);
        }
        fields
    }

    fn constant_fields(&self) -> Map<String, Value> {
        let mut fields = Map::new();
        fields.insert("projectTrusted".into(), Value::Bool(self.project_trusted));
        fields
    }

    fn catalog(&self) -> Option<&RawValue> {
        self.catalog.as_deref()
    }

    fn entries_since(&self, from: usize, session_id: &str) -> Option<tau_extensions::EntriesSince> {
        let store = self.conversation.store();
        let entries = store.entries();
        if store.session_id() != session_id || entries.len() < from {
            return None;
        }
        let appended = entries[from..]
            .iter()
            .filter_map(|e| serde_json::to_value(e).ok())
            .collect();
        Some(tau_extensions::EntriesSince {
            appended,
            total: entries.len(),
            leaf_id: store.leaf_id().map(str::to_string),
        })
    }
}
