//! What the tests of the search tools (`grep`, `find`, `ls`) share: the tool in a working
//! directory, calls with JSON arguments, and files written into a tree.

use std::fs;
use std::path::Path;
use std::sync::Arc;

use serde_json::{Map, Value};
use tau_protocol::{AgentToolResult, UserContentBlock};
use tau_tools::ToolEnv;
use tau_tools::find::FindTool;
use tau_tools::grep::GrepTool;
use tau_tools::ls::LsTool;
use tokio_util::sync::CancellationToken;

/// The search tools' constructor and `run`, which each tool has as its own inherent
/// functions, as one trait so the helpers below serve all three.
pub trait SearchTool: Sized {
    fn in_dir(cwd: &Path) -> Self;

    fn call(
        &self,
        arguments: &Map<String, Value>,
        cancel: &CancellationToken,
    ) -> impl Future<Output = Result<AgentToolResult, String>>;
}

macro_rules! search_tools {
    ($($tool:ident),*) => {$(
        impl SearchTool for $tool {
            fn in_dir(cwd: &Path) -> Self {
                $tool::new(Arc::new(ToolEnv::new(cwd, cwd.join(".agent-dir"))))
            }

            fn call(
                &self,
                arguments: &Map<String, Value>,
                cancel: &CancellationToken,
            ) -> impl Future<Output = Result<AgentToolResult, String>> {
                self.run(arguments, cancel)
            }
        }
    )*};
}

search_tools!(FindTool, GrepTool, LsTool);

/// The tool with `cwd` as its working directory.
pub fn tool<T: SearchTool>(cwd: &Path) -> T {
    T::in_dir(cwd)
}

pub fn args(value: Value) -> Map<String, Value> {
    value.as_object().unwrap().clone()
}

/// Writes `content` to `relative` below `root`, creating the directories on the way.
pub fn write(root: &Path, relative: &str, content: impl AsRef<[u8]>) {
    let path = root.join(relative);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, content).unwrap();
}

/// The text and details of a successful call.
pub async fn success<T: SearchTool>(cwd: &Path, arguments: Value) -> (String, Option<Value>) {
    let result = tool::<T>(cwd)
        .call(&args(arguments), &CancellationToken::new())
        .await
        .unwrap();
    let [UserContentBlock::Text(text)] = result.content.as_slice() else {
        panic!("expected one text block: {:?}", result.content);
    };
    (text.text.clone(), result.details)
}

/// The error text of a failed call.
pub async fn failure<T: SearchTool>(cwd: &Path, arguments: Value) -> String {
    tool::<T>(cwd)
        .call(&args(arguments), &CancellationToken::new())
        .await
        .unwrap_err()
}

/// A call cancelled before it starts and one cancelled while it runs both report the abort.
/// The tree must be large enough that the walk cannot finish before the cancellation lands.
pub async fn assert_aborts<T: SearchTool>(tool: &T, arguments: Value) {
    let arguments = args(arguments);
    let cancel = CancellationToken::new();
    cancel.cancel();
    assert_eq!(
        tool.call(&arguments, &cancel).await.unwrap_err(),
        "Operation aborted"
    );
    let cancel = CancellationToken::new();
    let (result, ()) = tokio::join!(tool.call(&arguments, &cancel), async { cancel.cancel() });
    assert_eq!(result.unwrap_err(), "Operation aborted");
}
