//! Security hardening (issue 38, item 3): tau reads the files of a project and of the agent
//! folder only when they are regular files, and only up to a cap. Each case plants what a
//! hostile repository (or a stray link) can put at such a path: a link to `/dev/zero` (an
//! endless read), a FIFO (an open that waits for a writer for ever), a sparse file larger than
//! the cap. tau must start and answer promptly, and say on stderr which file it refused and
//! why.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tau_test_kit::{Dirs, Tau, TauBuilder};

use crate::tau;

/// Far above what any case needs (each takes well under a second): only a hang reaches it.
const PROMPT: Duration = Duration::from_secs(20);

fn parent_of(path: &Path) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
}

fn link_to_dev_zero(path: &Path) {
    parent_of(path);
    symlink("/dev/zero", path).unwrap();
}

/// A FIFO nobody writes to: opening it for reading the ordinary way never returns.
fn fifo(path: &Path) {
    parent_of(path);
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("run mkfifo");
    assert!(status.success(), "mkfifo {}", path.display());
}

/// A file of `len` zero bytes that costs no disk.
fn sparse(path: &Path, len: u64) {
    parent_of(path);
    std::fs::File::create(path).unwrap().set_len(len).unwrap();
}

/// The working directory as tau sees it (`getcwd` gives the real path).
fn cwd(dirs: &Dirs) -> PathBuf {
    std::fs::canonicalize(dirs.cwd()).unwrap()
}

/// A `tau --mode rpc --no-session` in `dirs` that reaches `ready` and answers `get_state`,
/// both within [`PROMPT`].
fn answering_tau(dirs: &Dirs, builder: TauBuilder) -> Tau {
    let started = Instant::now();
    let mut t = builder.dirs(dirs.clone()).arg("--no-session").spawn();
    t.wait_for("ready", PROMPT, |r| r.kind() == Some("ready"));
    t.send(&json!({"id": "state", "type": "get_state"}));
    let state = t.response_within("state", PROMPT);
    assert_eq!(state["success"], true, "{state}");
    assert!(
        started.elapsed() < PROMPT,
        "took {:?}\nstderr:\n{}",
        started.elapsed(),
        t.stderr()
    );
    t
}

/// tau's peak resident memory so far, in MiB (Linux's `VmHWM`).
fn peak_mib(t: &Tau) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", t.pid())).unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .unwrap_or_else(|| panic!("{status}"));
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    kib / 1024
}

/// Far above what tau needs to start (tens of MiB), far below what reading `/dev/zero` or a
/// huge file whole costs.
const PEAK_MIB: u64 = 400;

/// tau's stderr once it holds every one of `wanted` (it is read by another thread, so it may
/// lag behind the records); panics, showing it, if it does not within a few seconds.
fn stderr_with(t: &Tau, wanted: &[String]) -> String {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let stderr = t.stderr();
        if wanted.iter().all(|w| stderr.contains(w.as_str())) {
            return stderr;
        }
        if Instant::now() >= deadline {
            let missing: Vec<&String> = wanted.iter().filter(|w| !stderr.contains(*w)).collect();
            panic!("stderr lacks {missing:#?}\nstderr:\n{stderr}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs `builder` (a command that ends by itself) to its end within [`PROMPT`]: its status,
/// stdout and stderr. A hang is killed and fails the test.
fn run_within(builder: TauBuilder) -> (ExitStatus, String, String) {
    let (mut child, _dirs) = builder.spawn_raw();
    drop(child.stdin.take());
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let deadline = Instant::now() + PROMPT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "did not end within {PROMPT:?}; stderr:\n{}",
                err.join().unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (status, out.join().unwrap(), err.join().unwrap())
}

fn refused_settings(path: &Path, why: &str) -> String {
    format!(
        "Cannot read {}: {why}; its settings are ignored",
        path.display()
    )
}

const DEVICE: &str = "it is a device, not a regular file";
const FIFO: &str = "it is a FIFO, not a regular file";

#[test]
fn project_settings_linked_to_dev_zero_are_refused_by_rpc_and_by_tau_list() {
    let dirs = Dirs::new();
    let file = cwd(&dirs).join(".pi/settings.json");
    link_to_dev_zero(&file);
    let warning = refused_settings(&file, DEVICE);

    let t = answering_tau(&dirs, tau());
    stderr_with(&t, std::slice::from_ref(&warning));
    assert!(peak_mib(&t) < PEAK_MIB, "peak {} MiB", peak_mib(&t));

    let (status, out, err) = run_within(tau().dirs(dirs.clone()).raw_args(["list"]));
    assert!(status.success(), "{err}");
    assert_eq!(out, "No packages installed.\n");
    assert!(err.contains(&warning), "{err}");
}

#[test]
fn project_settings_that_are_fifos_do_not_hang_tau() {
    let dirs = Dirs::new();
    let pi = cwd(&dirs).join(".pi/settings.json");
    let tau_file = cwd(&dirs).join(".tau/settings.json");
    fifo(&pi);
    fifo(&tau_file);
    let t = answering_tau(&dirs, tau());
    stderr_with(
        &t,
        &[
            refused_settings(&pi, FIFO),
            refused_settings(&tau_file, FIFO),
        ],
    );
    // Trusting the project does not make them readable.
    let t = answering_tau(&dirs, tau().arg("--approve"));
    stderr_with(&t, &[refused_settings(&pi, FIFO)]);
}

#[test]
fn agent_folder_files_that_are_fifos_or_devices_are_refused_and_named() {
    let dirs = Dirs::new();
    let agent = dirs.agent_dir().to_path_buf();
    fifo(&agent.join("settings.json"));
    link_to_dev_zero(&agent.join("models.json"));
    fifo(&agent.join("auth.json"));
    fifo(&agent.join("trust.json"));
    // Something that waits for trust, so that trust.json is consulted.
    let project = cwd(&dirs).join(".pi/settings.json");
    parent_of(&project);
    std::fs::write(&project, "{}").unwrap();

    let t = answering_tau(&dirs, tau());
    stderr_with(
        &t,
        &[
            refused_settings(&agent.join("settings.json"), FIFO),
            format!(
                "Failed to load models.json: {DEVICE}\n\nFile: {}",
                agent.join("models.json").display()
            ),
            format!("ignoring {}: {FIFO}", agent.join("auth.json").display()),
            format!(
                "Failed to read trust store {}: {FIFO}",
                agent.join("trust.json").display()
            ),
        ],
    );
}

#[test]
fn project_skills_and_prompt_templates_that_are_fifos_are_skipped_and_named() {
    let dirs = Dirs::new();
    let project = cwd(&dirs);
    let skill = project.join(".pi/skills/x/SKILL.md");
    let template = project.join(".pi/prompts/p.md");
    fifo(&skill);
    fifo(&template);
    let good = project.join(".pi/skills/y/SKILL.md");
    parent_of(&good);
    std::fs::write(
        &good,
        "---\nname: y\ndescription: A real skill\n---\nDo it.\n",
    )
    .unwrap();

    let mut t = answering_tau(&dirs, tau());
    stderr_with(
        &t,
        &[
            format!("skill {} skipped: {FIFO}", skill.display()),
            format!("prompt template {} skipped: {FIFO}", template.display()),
        ],
    );
    let names = crate::command_names(&mut t);
    assert!(names.contains(&"skill:y".to_string()), "{names:?}");
    assert!(!names.contains(&"skill:x".to_string()), "{names:?}");
    assert!(!names.contains(&"p".to_string()), "{names:?}");
}

#[test]
fn files_over_the_cap_are_refused_as_larger_than_it() {
    let dirs = Dirs::new();
    let project = cwd(&dirs);
    let settings = project.join(".pi/settings.json");
    let skill = project.join(".pi/skills/big/SKILL.md");
    // One byte over the caps: 1 MiB for settings, 4 MiB for skills and templates.
    sparse(&settings, (1 << 20) + 1);
    sparse(&skill, (4 << 20) + 1);
    let t = answering_tau(&dirs, tau());
    assert!(peak_mib(&t) < PEAK_MIB, "peak {} MiB", peak_mib(&t));
    stderr_with(
        &t,
        &[
            refused_settings(
                &settings,
                "it is larger than 1 MiB (at least 1048577 bytes)",
            ),
            format!(
                "cannot read skill {}: it is larger than 4 MiB",
                skill.display()
            ),
        ],
    );
}

#[test]
fn exporting_a_fifo_is_an_error_not_a_hang() {
    let dirs = Dirs::new();
    let planted = cwd(&dirs).join("session.jsonl");
    fifo(&planted);
    let (status, _, err) = run_within(
        tau()
            .dirs(dirs.clone())
            .raw_args(["--export", "session.jsonl"]),
    );
    assert!(!status.success());
    assert_eq!(
        err,
        format!("Error: cannot read {}: {FIFO}\n", planted.display())
    );
}

/// A session header as pi writes it.
fn header(id: &str, cwd: &Path) -> String {
    json!({"type": "session", "version": 3, "id": id,
           "timestamp": "2025-01-01T00:00:00.000Z", "cwd": cwd})
    .to_string()
        + "\n"
}

#[test]
fn acp_lists_sessions_past_a_fifo_in_a_session_folder() {
    let dirs = Dirs::new();
    let folder = dirs.agent_dir().join("sessions/--elsewhere--");
    fifo(&folder.join("2025-01-01_planted.jsonl"));
    std::fs::write(
        folder.join("2025-01-01_real.jsonl"),
        header("real-session", Path::new("/elsewhere")),
    )
    .unwrap();
    let (mut child, _dirs) = tau()
        .dirs(dirs.clone())
        .raw_args(["--mode", "acp"])
        .spawn_raw();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, responses) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Ok(value) = serde_json::from_str::<Value>(&line)
                && value.get("id").is_some()
                && tx.send(value).is_err()
            {
                return;
            }
        }
    });
    let mut request = |id: u64, method: &str, params: Value| {
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
        let deadline = Instant::now() + PROMPT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match responses.recv_timeout(left) {
                Ok(value) if value["id"] == id => return Some(value),
                Ok(_) => {}
                Err(_) => return None,
            }
        }
    };
    let initialized = request(
        1,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    let listed = initialized.and_then(|_| request(2, "session/list", json!({})));
    let _ = child.kill();
    let _ = child.wait();
    let listed = listed.expect("session/list answered");
    let ids: Vec<&str> = listed["result"]["sessions"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .filter_map(|s| s["sessionId"].as_str())
        .collect();
    assert_eq!(ids, ["real-session"], "{listed}");
}
