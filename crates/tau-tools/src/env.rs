//! What every tool needs to know about where it runs.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;

use crate::paths::resolve_to_cwd;

/// A future the file hooks return.
pub type FileFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, String>> + Send + 'a>>;

/// Text files read and written through a client instead of the disk (an editor's buffers in
/// ACP mode), for `read`, `edit` and `write`. A read answering `None`, or a write answering
/// `false`, leaves the file to the disk as without the hook; an error is the tool's error.
pub trait FileAccess: Send + Sync + std::fmt::Debug {
    fn read_text<'a>(&'a self, path: &'a Path) -> FileFuture<'a, Option<String>>;
    fn write_text<'a>(&'a self, path: &'a Path, content: &'a str) -> FileFuture<'a, bool>;
}

/// The session-level facts tools depend on.
#[derive(Debug, Clone)]
pub struct ToolEnv {
    /// The session's working directory; relative paths resolve against it.
    pub cwd: PathBuf,
    /// `~` expands to this.
    pub home: Option<PathBuf>,
    /// `<agent dir>/bin` is put in front of `PATH` for shell commands.
    pub agent_dir: PathBuf,
    /// Settings `shellPath`.
    pub shell_path: Option<String>,
    /// Settings `shellCommandPrefix`.
    pub shell_command_prefix: Option<String>,
    /// Settings `images.autoResize` (default true).
    pub auto_resize_images: bool,
    /// Whether the current model accepts images (the read tool adds a notice if not).
    pub model_accepts_images: bool,
    /// Where text files are read and written instead of the disk, if anywhere.
    pub files: Option<Arc<dyn FileAccess>>,
    /// Who runs `bash`'s commands instead of tau (an editor's terminal), if anyone.
    pub commands: Option<Arc<dyn crate::CommandRunner>>,
}

impl ToolEnv {
    /// An environment for `cwd` with pi's defaults.
    pub fn new(cwd: impl Into<PathBuf>, agent_dir: impl Into<PathBuf>) -> Self {
        Self {
            cwd: cwd.into(),
            home: std::env::var_os("HOME").map(PathBuf::from),
            agent_dir: agent_dir.into(),
            shell_path: None,
            shell_command_prefix: None,
            auto_resize_images: true,
            model_accepts_images: true,
            files: None,
            commands: None,
        }
    }

    /// Where a tool's path argument points: pi's `resolveToCwd` against this environment.
    pub(crate) fn resolve(&self, path: &str) -> PathBuf {
        resolve_to_cwd(path, &self.cwd, self.home.as_deref())
    }
}
