//! The Node host's start-up snapshot (issue 44): with `TAU_NODE_HOST_SNAPSHOT=1` and a blob
//! whose record matches, tau starts the host from it and a TypeScript extension loads and answers
//! as without; a blob that is truncated, or damaged behind a record that still matches, never
//! keeps extensions from loading. Needs the host's packages and the blob `npm ci` writes in
//! `extensions/node-host` (scripts/test.sh runs it); the damaged blobs are in copies of the host.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::{ready_tau, tau};

/// An extension whose command `report` describes how the host started, read through
/// `get_commands`, and that builds a TypeBox schema (TypeBox is in the snapshot).
const REPORT: &str = r#"import { Type } from "typebox";
export default function (pi: any) {
	const schema = Type.Object({ n: Type.Number() });
	const started = (globalThis as any)[Symbol.for("tau.node-host.started")];
	pi.registerCommand("report", { description: `${started} ${Object.keys(schema.properties)}`, handler: async () => {} });
}
"#;

fn installed_host() -> PathBuf {
    let dir = format!("{}/../../extensions/node-host", env!("CARGO_MANIFEST_DIR"));
    let dir = std::fs::canonicalize(&dir).unwrap_or_else(|e| panic!("{dir}: {e}"));
    assert!(
        dir.join("node_modules").is_dir(),
        "the Node host's packages are not installed: run `npm ci` in extensions/node-host (scripts/test.sh does)"
    );
    dir
}

/// What the `report` command says, after `get_state` was answered, for tau started with
/// `env`; the extension is loaded with `-e`.
fn report(env: &[(&str, String)]) -> String {
    let mut builder = tau()
        .arg("--no-session")
        .arg("-e")
        .arg("report.ts")
        .cwd_file("report.ts", REPORT);
    for (key, value) in env {
        builder = builder.env(*key, value.clone());
    }
    let mut t = ready_tau(builder);
    let state = t.request(json!({"type": "get_state"}));
    assert_eq!(state["success"], true, "{state}\nstderr:\n{}", t.stderr());
    let commands = t.request(json!({"type": "get_commands"}));
    commands["data"]["commands"]
        .as_array()
        .and_then(|list| list.iter().find(|c| c["name"] == "report"))
        .and_then(|c| c["description"].as_str())
        .map(str::to_string)
        .unwrap_or_else(|| panic!("no report command: {commands}\nstderr:\n{}", t.stderr()))
}

fn run(command: &mut Command) {
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"));
    assert!(
        out.status.success(),
        "{command:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A copy of the installed host in `dir` (times kept; the packages as hard links, which resolve
/// to the copy itself) with a snapshot of its own.
fn host_copy(dir: &Path) -> PathBuf {
    let installed = installed_host();
    let copy = dir.join("node-host");
    std::fs::create_dir(&copy).unwrap_or_else(|e| panic!("{}: {e}", copy.display()));
    for entry in ["host.cjs", "host.mjs", "package.json", "lib", "scripts"] {
        run(Command::new("cp")
            .arg("-a")
            .arg(installed.join(entry))
            .arg(&copy));
    }
    run(Command::new("cp")
        .arg("-al")
        .arg(installed.join("node_modules"))
        .arg(&copy));
    run(Command::new("node")
        .arg(copy.join("scripts/build-snapshot.mjs"))
        .env_remove("NODE_OPTIONS"));
    assert!(
        copy.join("lib/host.snapshot.json").is_file(),
        "the copy has its snapshot"
    );
    copy
}

fn snapshot_on(host: Option<&Path>) -> Vec<(&'static str, String)> {
    let mut env = vec![("TAU_NODE_HOST_SNAPSHOT", "1".to_string())];
    if let Some(host) = host {
        env.push(("TAU_NODE_HOST", host.join("host.cjs").display().to_string()));
    }
    env
}

#[test]
fn the_installed_host_starts_from_its_snapshot_and_loads_a_typescript_extension() {
    let record = installed_host().join("lib/host.snapshot.json");
    let text = std::fs::read_to_string(&record).unwrap_or_else(|e| {
        panic!(
            "{}: {e}: the install builds the snapshot (run `npm ci` in extensions/node-host)",
            record.display()
        )
    });
    let record: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert!(record["blobSize"].as_u64().unwrap_or(0) > 0, "{record}");
    // The structural guard of the start-up figure: the host really ran from the blob.
    assert_eq!(report(&snapshot_on(None)), "snapshot n");
    // Off unless asked for (snapshot.rs says why): the install-time bundle.
    assert_eq!(report(&[]), "bundle n");
}

#[test]
fn a_truncated_or_damaged_snapshot_falls_back_to_the_start_without_it() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let host = host_copy(dir.path());
    assert_eq!(report(&snapshot_on(Some(&host))), "snapshot n");

    let blob = host.join("lib/host.snapshot.blob");
    let whole = std::fs::read(&blob).unwrap_or_else(|e| panic!("{e}"));
    let modified = std::fs::metadata(&blob)
        .and_then(|m| m.modified())
        .unwrap_or_else(|e| panic!("{e}"));
    // Truncated: the record no longer matches, so tau does not pass it to Node.
    std::fs::write(&blob, &whole[..whole.len() / 2]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(report(&snapshot_on(Some(&host))), "bundle n");

    // Damaged with its size and time kept, so the record still matches: Node crashes on it
    // before the host answers, and tau starts the host again without it.
    let mut damaged = whole.clone();
    for byte in damaged.iter_mut().skip(16).take(64) {
        *byte ^= 0x5a;
    }
    std::fs::write(&blob, &damaged).unwrap_or_else(|e| panic!("{e}"));
    std::fs::File::options()
        .write(true)
        .open(&blob)
        .and_then(|f| f.set_modified(modified))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(report(&snapshot_on(Some(&host))), "bundle n");
}
