//! Dialogs the core itself opens (decision T129): an MCP server's form
//! (`elicitation/create`) asked field by field through the same `extension_ui_request`
//! records extensions use, so every front-end that answers an extension's dialog answers
//! these too (RPC clients with `extension_ui_response`, the terminal with its dialogs).

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use tau_protocol::rpc::{ExtensionUiRequest, ExtensionUiResponse, OutboundRecord, UiMethod};
use tokio::sync::oneshot;

use crate::EventSink;

/// The core's open dialogs.
#[derive(Default)]
pub struct Dialogs {
    pending: Mutex<HashMap<String, oneshot::Sender<ExtensionUiResponse>>>,
    next_id: AtomicU64,
    /// Input ended: nobody answers any more (T77).
    closed: AtomicBool,
}

impl std::fmt::Debug for Dialogs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dialogs").finish_non_exhaustive()
    }
}

/// A dialog's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DialogAnswer {
    /// A `select`'s or an `input`'s value.
    Value(String),
    Confirmed(bool),
    Cancelled,
}

impl Dialogs {
    /// Opens `method` (a select, confirm, input or editor) and waits for its answer; cancelled
    /// at once when input has ended.
    pub async fn ask(&self, events: &EventSink, method: UiMethod) -> DialogAnswer {
        if self.closed.load(Ordering::Acquire) {
            return DialogAnswer::Cancelled;
        }
        let id = format!(
            "tau-dialog-{}",
            self.next_id.fetch_add(1, Ordering::Relaxed) + 1
        );
        let (tx, rx) = oneshot::channel();
        self.lock().insert(id.clone(), tx);
        events
            .emit_record(OutboundRecord::ExtensionUiRequest(ExtensionUiRequest {
                id: id.clone(),
                method,
            }))
            .await;
        // A sender dropped by `close` is a cancellation.
        let answer = rx.await;
        self.lock().remove(&id);
        match answer {
            Ok(response)
                if response.cancelled == Some(true) || response.timed_out == Some(true) =>
            {
                DialogAnswer::Cancelled
            }
            Ok(ExtensionUiResponse {
                confirmed: Some(confirmed),
                ..
            }) => DialogAnswer::Confirmed(confirmed),
            Ok(ExtensionUiResponse {
                value: Some(value), ..
            }) => DialogAnswer::Value(value),
            _ => DialogAnswer::Cancelled,
        }
    }

    /// A front-end's answer; false when no core dialog has its id (it may be an
    /// extension's).
    pub fn answer(&self, response: &ExtensionUiResponse) -> bool {
        let Some(tx) = self.lock().remove(&response.id) else {
            return false;
        };
        let _ = tx.send(response.clone());
        true
    }

    /// Input ended: open dialogs are cancelled, later ones cancelled at once.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.lock().clear();
    }

    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<String, oneshot::Sender<ExtensionUiResponse>>> {
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
