//! Whether the Node host may start from its V8 start-up snapshot
//! (`extensions/node-host/lib/host.snapshot.blob`, written at install by
//! `scripts/build-snapshot.mjs`). A blob works only with the very Node binary that wrote it, run
//! with the same V8 flags: any other Node refuses it or crashes on it. So the blob is used only
//! while the record written beside it (`lib/host.snapshot.json`) still describes the host, the
//! Node binary about to run and the blob itself, checked with a few `stat` calls rather than by
//! asking Node, which would cost a second start. The host then checks its own sources against
//! the snapshot (`host.cjs`), and a host that dies before its first answer is started again
//! without the blob (runner.rs).
//!
//! Opt-in (`TAU_NODE_HOST_SNAPSHOT=1`): on Node 20 the start from the blob measured no faster
//! than the install-time bundle with V8's code cache (bench/extension-load.sh), since reading and
//! deserialising the bigger heap costs about what evaluating the host and jiti does.

use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use serde_json::Value;

/// Where the record sits, relative to the host's entry (`host.cjs`).
const RECORD: &str = "lib/host.snapshot.json";

/// The blob to pass to `node` as `--snapshot-blob`, when the snapshot is asked for and its
/// record matches `host` run by `node` (already resolved on PATH).
pub(crate) fn usable_blob(host: &Path, node: &Path) -> Option<PathBuf> {
    if std::env::var_os("TAU_NODE_HOST_SNAPSHOT").is_none_or(|v| v != "1") {
        return None;
    }
    // V8 flags in NODE_OPTIONS make Node refuse the blob (it was built without any).
    if std::env::var_os("NODE_OPTIONS").is_some_and(|v| !v.is_empty()) {
        return None;
    }
    matching_blob(host, node)
}

/// The blob, when the record beside `host` describes `host`, `node` and the blob as they are.
pub(crate) fn matching_blob(host: &Path, node: &Path) -> Option<PathBuf> {
    let dir = host.parent()?;
    let text =
        tau_base::bounded::read_to_string(&dir.join(RECORD), tau_base::bounded::CONFIG_CAP).ok()?;
    let record: Value = serde_json::from_str(&text).ok()?;
    let field = |name: &str| record.get(name).and_then(Value::as_str);
    // Node runs the host by its real path; the record has the real paths of both.
    if Path::new(field("host")?) != std::fs::canonicalize(host).ok()? {
        return None;
    }
    let node = std::fs::canonicalize(node).ok()?;
    if Path::new(field("node")?) != node
        || !stamp_matches(&node, &record, "nodeSize", "nodeMtimeNs")
    {
        return None;
    }
    // A bare file name: the record cannot point Node at a file elsewhere.
    let name = field("blob")?;
    if name.is_empty() || name.contains('/') || name == ".." {
        return None;
    }
    let blob = dir.join("lib").join(name);
    stamp_matches(&blob, &record, "blobSize", "blobMtimeNs").then_some(blob)
}

/// Whether `path` has the size and the modification time (nanoseconds since the epoch, as a
/// decimal string: JSON numbers cannot hold them exactly) the record gives.
fn stamp_matches(path: &Path, record: &Value, size: &str, mtime: &str) -> bool {
    let Ok(meta) = std::fs::metadata(path) else {
        return false;
    };
    let Some(nanos) = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_nanos().to_string())
    else {
        return false;
    };
    meta.is_file()
        && record.get(size).and_then(Value::as_u64) == Some(meta.len())
        && record.get(mtime).and_then(Value::as_str) == Some(nanos.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamp(path: &Path) -> (u64, String) {
        let meta = std::fs::metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let nanos = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map(|d| d.as_nanos().to_string())
            .unwrap_or_default();
        (meta.len(), nanos)
    }

    /// A host folder with an entry, a blob and a "node" binary, and a record describing them.
    fn layout() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let root = std::fs::canonicalize(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        let host = root.join("host.cjs");
        let node = root.join("node");
        std::fs::create_dir(root.join("lib")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(&host, "// host").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(&node, "not really node").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(root.join("lib/host.snapshot.blob"), "blob")
            .unwrap_or_else(|e| panic!("{e}"));
        write_record(&root, &host, &node, "host.snapshot.blob");
        (dir, host, node)
    }

    fn write_record(root: &Path, host: &Path, node: &Path, blob: &str) {
        let (blob_size, blob_mtime) = stamp(&root.join("lib/host.snapshot.blob"));
        let (node_size, node_mtime) = stamp(node);
        let record = serde_json::json!({
            "host": host, "blob": blob, "blobSize": blob_size, "blobMtimeNs": blob_mtime,
            "node": node, "nodeSize": node_size, "nodeMtimeNs": node_mtime, "nodeVersion": "v0",
        });
        std::fs::write(root.join(RECORD), record.to_string()).unwrap_or_else(|e| panic!("{e}"));
    }

    #[test]
    fn a_record_that_describes_everything_names_the_blob() {
        let (_dir, host, node) = layout();
        let blob = matching_blob(&host, &node);
        assert_eq!(
            blob,
            host.parent().map(|d| d.join("lib/host.snapshot.blob"))
        );
    }

    #[test]
    fn another_node_binary_or_a_changed_blob_is_not_used() {
        let (dir, host, node) = layout();
        let other = dir.path().join("other-node");
        std::fs::copy(&node, &other).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(matching_blob(&host, &other), None, "another binary");
        std::fs::write(&node, "a newer node, longer").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(matching_blob(&host, &node), None, "the binary replaced");
        let (_dir, host, node) = layout();
        let blob = host.with_file_name("lib/host.snapshot.blob");
        std::fs::write(&blob, "bl").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(matching_blob(&host, &node), None, "a truncated blob");
    }

    #[test]
    fn a_record_for_another_folder_or_pointing_elsewhere_is_not_used() {
        let (_dir, host, node) = layout();
        let moved = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let moved_host = moved.path().join("host.cjs");
        std::fs::create_dir(moved.path().join("lib")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(&moved_host, "// host").unwrap_or_else(|e| panic!("{e}"));
        for file in ["lib/host.snapshot.blob", RECORD] {
            let from = host.with_file_name(file);
            std::fs::copy(&from, moved.path().join(file)).unwrap_or_else(|e| panic!("{e}"));
        }
        assert_eq!(matching_blob(&moved_host, &node), None, "copied elsewhere");
        let root = host.parent().map(Path::to_path_buf).unwrap_or_default();
        write_record(&root, &host, &node, "../host.cjs");
        assert_eq!(matching_blob(&host, &node), None, "a path, not a name");
        std::fs::write(root.join(RECORD), "{not json").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(matching_blob(&host, &node), None, "an unreadable record");
    }
}
