//! Removing the bash spill files at exit. A test binary of its own: the removal is
//! process-wide and final, so it would break the spills of tests running beside it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Value, json};
use tau_protocol::UserContentBlock;
use tau_tools::ToolEnv;
use tau_tools::bash::{BashTool, remove_spill_files};
use tokio_util::sync::CancellationToken;

async fn spill(env: &Arc<ToolEnv>) -> Option<PathBuf> {
    let Value::Object(arguments) = json!({"command": "seq 1 3000"}) else {
        unreachable!()
    };
    let result = BashTool::new(Arc::clone(env))
        .execute_with(arguments, &CancellationToken::new(), |_| {})
        .await
        .unwrap();
    let [UserContentBlock::Text(text)] = result.content.as_slice() else {
        panic!("one text block expected");
    };
    assert!(text.text.contains("[Showing lines 1001-3000 of 3000"));
    result.details.unwrap()["fullOutputPath"]
        .as_str()
        .map(PathBuf::from)
}

#[tokio::test]
async fn spill_files_stay_until_removed_then_no_more_are_made() {
    let dir = tempfile::tempdir().unwrap();
    let env = Arc::new(ToolEnv::new(dir.path(), dir.path().join("agent")));
    let first = spill(&env).await.expect("a spill file");
    let second = spill(&env).await.expect("another spill file");
    assert!(
        first.is_file() && second.is_file(),
        "readable during the run"
    );

    remove_spill_files();
    assert!(!first.exists(), "{} removed", first.display());
    assert!(!second.exists(), "{} removed", second.display());

    // After the removal (the process is exiting) output is still shown, just not saved.
    assert_eq!(spill(&env).await, None);
}
