//! What every tool needs to know about where it runs.

use std::path::PathBuf;

use crate::paths::resolve_to_cwd;

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
        }
    }

    /// Where a tool's path argument points: pi's `resolveToCwd` against this environment.
    pub(crate) fn resolve(&self, path: &str) -> PathBuf {
        resolve_to_cwd(path, &self.cwd, self.home.as_deref())
    }
}
