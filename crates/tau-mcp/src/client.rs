//! What a server asks of tau and tells it on its own: the client side of a connection
//! (rmcp's `ClientHandler`): progress, list changes, and the requests a server may send.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rmcp::ClientHandler;
use rmcp::handler::client::progress::ProgressDispatcher;
use rmcp::model::{ClientConfig, ProgressNotificationParam};
use rmcp::service::{NotificationContext, RoleClient};
use tokio::sync::Notify;

/// Receives what the server sends on its own.
#[derive(Clone)]
pub(crate) struct Handler {
    pub(crate) progress: ProgressDispatcher,
    pub(crate) tools_stale: Arc<AtomicBool>,
    pub(crate) prompts_stale: Arc<AtomicBool>,
    /// Wakes the manager's relisting task; a permit is kept when nobody waits yet.
    pub(crate) tools_changed: Arc<Notify>,
    pub(crate) info: ClientConfig,
}

impl ClientHandler for Handler {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.handle_notification(params).await;
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tools_stale.store(true, Ordering::SeqCst);
        self.tools_changed.notify_one();
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.prompts_stale.store(true, Ordering::SeqCst);
        self.tools_changed.notify_one();
    }

    fn get_info(&self) -> ClientConfig {
        self.info.clone()
    }
}
