//! The file tools through the editor (`fs/read_text_file`, `fs/write_text_file`) when the
//! client offers them: `read` and `edit` see its buffers, unsaved changes included, and
//! `edit` and `write` land in the editor, which saves them. A read the client cannot answer
//! (a file outside its project, say) falls back to the disk; a write it refuses is the tool's
//! error, since writing the disk behind the editor's back would undo its choice.

use std::path::Path;

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{ReadTextFileRequest, WriteTextFileRequest};
use tau_tools::{FileAccess, FileFuture};

/// One session's way to the client's files.
#[derive(Clone)]
pub struct ClientFiles {
    pub cx: ConnectionTo<Client>,
    pub session: String,
    /// The client offered `fs/read_text_file`.
    pub read: bool,
    /// The client offered `fs/write_text_file`.
    pub write: bool,
}

impl std::fmt::Debug for ClientFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientFiles")
            .field("session", &self.session)
            .field("read", &self.read)
            .field("write", &self.write)
            .finish_non_exhaustive()
    }
}

impl FileAccess for ClientFiles {
    fn read_text<'a>(&'a self, path: &'a Path) -> FileFuture<'a, Option<String>> {
        Box::pin(async move {
            if !self.read {
                return Ok(None);
            }
            let request = ReadTextFileRequest::new(self.session.clone(), path);
            match self.cx.send_request(request).block_task().await {
                Ok(response) => Ok(Some(response.content)),
                Err(err) => {
                    tracing::debug!(
                        "fs/read_text_file of {} failed ({err}); reading the disk",
                        path.display()
                    );
                    Ok(None)
                }
            }
        })
    }

    fn write_text<'a>(&'a self, path: &'a Path, content: &'a str) -> FileFuture<'a, bool> {
        Box::pin(async move {
            if !self.write {
                return Ok(false);
            }
            let request = WriteTextFileRequest::new(self.session.clone(), path, content);
            self.cx
                .send_request(request)
                .block_task()
                .await
                .map(|_| true)
                .map_err(|err| {
                    format!(
                        "The editor did not write {}: {}",
                        path.display(),
                        err.message
                    )
                })
        })
    }
}
