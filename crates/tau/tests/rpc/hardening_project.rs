//! Security hardening (issue 38, items 1, 2 and 4): what a hostile repository the user has
//! not trusted reaches through the user's own configuration. The repository is played by the
//! tests: a committed `node_modules/.bin`, a Python module that shadows the one a command
//! names, a script a relative argument names, and context files linking out of the project.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use tau_mock_llm::{MockServer, Reply};
use tau_test_kit::{Dirs, Tau};

use crate::mcp::{status, test_server};
use crate::{ready_tau, tau};

/// Plants the repository's programs in `dirs.cwd()`; each leaves a file named `pwned-<kind>`
/// in the project when it runs.
fn plant_hostile_repository(cwd: &Path) {
    let touch = |name: &str| cwd.join(format!("pwned-{name}")).display().to_string();
    std::fs::write(
        cwd.join("hostile.py"),
        format!("open({:?}, 'w').close()\n", touch("python")),
    )
    .unwrap();
    std::fs::write(
        cwd.join("server.js"),
        format!("require('fs').writeFileSync({:?}, '');\n", touch("node")),
    )
    .unwrap();
    let bin = cwd.join("node_modules/.bin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = bin.join("hostile-server");
    std::fs::write(&script, format!("#!/bin/sh\ntouch '{}'\n", touch("npx"))).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn ran(cwd: &Path) -> Vec<String> {
    ["python", "node", "npx"]
        .into_iter()
        .filter(|kind| cwd.join(format!("pwned-{kind}")).exists())
        .map(str::to_string)
        .collect()
}

/// A stdio entry that records its working directory and environment in `record` (a
/// folder), then becomes tau-mcp's test server.
fn probe_entry(record: &Path, name: &str) -> Value {
    let out = record.join(name).display().to_string();
    json!({"command": "sh", "args": ["-c", format!(
        "pwd -P > '{out}.cwd'; env > '{out}.env'; exec '{}'",
        test_server().display()
    )]})
}

fn with(mut entry: Value, key: &str, value: Value) -> Value {
    entry[key] = value;
    entry
}

fn recorded(record: &Path, name: &str, what: &str) -> String {
    std::fs::read_to_string(record.join(format!("{name}.{what}")))
        .unwrap_or_else(|e| panic!("{name}.{what}: {e}"))
}

/// The user's settings naming the servers a careful user might configure, in a project that
/// plants what they would resolve there.
fn start_with_user_servers(dirs: &Dirs, record: &Path, args: &[&str]) -> Tau {
    let servers = json!({
        "py": {"command": "python3", "args": ["-m", "hostile"]},
        "node": {"command": "node", "args": ["server.js"]},
        // Offline, so that the package is not looked for on the network once the project's
        // copy is out of reach.
        "npx": {"command": "npx", "args": ["--yes", "hostile-server"],
                "env": {"npm_config_offline": "true"}},
        "probe": probe_entry(record, "probe"),
        "keys": with(probe_entry(record, "keys"), "inheritEnv", json!(["OPENAI_*"])),
    });
    let mut builder = tau()
        .dirs(dirs.clone())
        .env("OPENAI_API_KEY", "sk-never-leaves-tau")
        .env("ANTHROPIC_API_KEY", "sk-ant-never-leaves-tau")
        .agent_file("settings.json", json!({"mcpServers": servers}).to_string())
        .arg("--no-session");
    for arg in args {
        builder = builder.arg(*arg);
    }
    let mut t = ready_tau(builder);
    for server in ["py", "node", "npx"] {
        let reached = t.wait_for(&format!("{server} settled"), Duration::from_secs(60), |r| {
            r.json.as_ref().is_some_and(|j| {
                j["type"] == "mcp_server_status"
                    && j["server"] == server
                    && (j["state"] == "failed" || j["state"] == "ready")
            })
        });
        drop(reached);
    }
    status(&mut t, "probe", "ready");
    status(&mut t, "keys", "ready");
    t
}

/// Starts tau with the user's servers in the planted repository, stops it, and checks that
/// none of the repository's programs ran.
fn run_user_servers_and_check_nothing_ran(dirs: &Dirs, record: &Path) {
    let t = start_with_user_servers(dirs, record, &[]);
    crate::mcp::stop(t);
    assert_eq!(
        ran(dirs.cwd()),
        Vec::<String>::new(),
        "the project's code ran"
    );
}

fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap()
}

#[test]
fn the_users_mcp_servers_resolve_nothing_of_an_untrusted_project() {
    // Nothing of the project's waits for trust, so pi's answer is "trusted" for what it
    // holds; the user has still not said that its code may run.
    let dirs = Dirs::new();
    plant_hostile_repository(dirs.cwd());
    let record = tempfile::tempdir().unwrap();
    run_user_servers_and_check_nothing_ran(&dirs, record.path());
    // The servers start in the user's agent folder.
    assert_eq!(
        recorded(record.path(), "probe", "cwd").trim(),
        canonical(dirs.agent_dir()).display().to_string()
    );
    // They get the SDKs' short list of variables, not tau's keys, unless an entry asks.
    let env = recorded(record.path(), "probe", "env");
    assert!(env.lines().any(|l| l.starts_with("PATH=")), "{env}");
    assert!(env.lines().any(|l| l.starts_with("HOME=")), "{env}");
    assert!(!env.contains("never-leaves-tau"), "{env}");
    assert!(!env.contains("TAU_AGENT_DIR"), "{env}");
    let keys = recorded(record.path(), "keys", "env");
    assert!(
        keys.contains("OPENAI_API_KEY=sk-never-leaves-tau"),
        "{keys}"
    );
    assert!(!keys.contains("ANTHROPIC_API_KEY"), "{keys}");
}

#[test]
fn an_untrusted_project_with_settings_reaches_no_user_server_either() {
    let dirs = Dirs::new();
    plant_hostile_repository(dirs.cwd());
    std::fs::create_dir_all(dirs.cwd().join(".pi")).unwrap();
    std::fs::write(dirs.cwd().join(".pi/settings.json"), "{}").unwrap();
    let record = tempfile::tempdir().unwrap();
    run_user_servers_and_check_nothing_ran(&dirs, record.path());
}

#[test]
fn once_the_user_trusts_the_project_the_servers_start_in_it() {
    let dirs = Dirs::new();
    let record = tempfile::tempdir().unwrap();
    let servers = json!({
        "probe": probe_entry(record.path(), "probe"),
        "rel": with(probe_entry(record.path(), "rel"), "cwd", json!("sub")),
    });
    std::fs::create_dir_all(dirs.cwd().join("sub")).unwrap();
    let mut t = ready_tau(
        tau()
            .dirs(dirs.clone())
            .agent_file("settings.json", json!({"mcpServers": servers}).to_string())
            .arg("--no-session")
            .arg("--approve"),
    );
    status(&mut t, "probe", "ready");
    status(&mut t, "rel", "ready");
    crate::mcp::stop(t);
    assert_eq!(
        recorded(record.path(), "probe", "cwd").trim(),
        canonical(dirs.cwd()).display().to_string()
    );
    // A relative `cwd` is taken from the folder the servers start in.
    assert_eq!(
        recorded(record.path(), "rel", "cwd").trim(),
        canonical(&dirs.cwd().join("sub")).display().to_string()
    );
}

#[test]
fn a_user_extension_run_as_python_dash_m_imports_its_own_module() {
    // `python3 -m mine` searches the working directory first: in the project, the
    // repository's `mine.py` would be the extension.
    let dirs = Dirs::new();
    std::fs::write(
        dirs.cwd().join("mine.py"),
        format!(
            "open({:?}, 'w').close()\n",
            dirs.cwd().join("pwned-python").display().to_string()
        ),
    )
    .unwrap();
    let mut t = ready_tau(
        tau()
            .dirs(dirs.clone())
            .arg("--no-session")
            .agent_file(
                "extensions/py/tau-extension.json",
                r#"{"command": ["python3", "-m", "mine"]}"#,
            )
            .agent_file(
                "extensions/py/mine.py",
                crate::hardening_host::python_extension("mine", None),
            ),
    );
    let names = crate::command_names(&mut t);
    assert!(names.contains(&"mine".to_string()), "{names:?}");
    t.close_stdin();
    t.wait_exit(Duration::from_secs(30));
    assert_eq!(
        ran(dirs.cwd()),
        Vec::<String>::new(),
        "the project's module ran"
    );
}

/// The system prompt of the first request the model got.
fn system_prompt_sent(args: &[&str], dirs: &Dirs) -> (String, String) {
    let mock = MockServer::start_background().unwrap();
    mock.push(Reply::text("ok"));
    let mut builder = tau()
        .dirs(dirs.clone())
        .in_subfolder("sub")
        .env("TAU_CANARY", "canary-from-the-environment")
        .agent_file("models.json", crate::mock_models(&mock))
        .arg("--no-session");
    for arg in args {
        builder = builder.arg(*arg);
    }
    let mut t = ready_tau(builder);
    t.send(&json!({"id": "p", "type": "prompt", "message": "hi"}));
    t.records_until("agent_settled", Duration::from_secs(30));
    t.close_stdin();
    t.wait_exit(Duration::from_secs(30));
    let requests = mock.requests();
    let body = requests[0].body.to_string();
    (body, t.stderr())
}

#[test]
fn context_files_that_link_out_of_an_untrusted_project_are_not_sent() {
    let dirs = Dirs::new();
    let outside = tempfile::tempdir().unwrap();
    let key = outside.path().join("id_rsa");
    std::fs::write(&key, "-----BEGIN PRIVATE KEY----- secret-key-material").unwrap();
    let cwd = dirs.cwd();
    std::fs::create_dir_all(cwd.join(".git")).unwrap();
    std::fs::create_dir_all(cwd.join("sub")).unwrap();
    std::os::unix::fs::symlink(&key, cwd.join("AGENTS.md")).unwrap();
    std::os::unix::fs::symlink("/proc/self/environ", cwd.join("sub/AGENTS.md")).unwrap();
    std::fs::write(cwd.join("sub/CLAUDE.md"), "ignored: AGENTS.md comes first").unwrap();

    let (body, stderr) = system_prompt_sent(&[], &dirs);
    assert!(!body.contains("secret-key-material"), "{body}");
    assert!(!body.contains("canary-from-the-environment"), "{body}");
    assert!(stderr.contains("AGENTS.md is not read"), "{stderr}");
    assert!(stderr.contains("id_rsa"), "{stderr}");

    // A project the user trusts may link where it likes.
    let (body, _) = system_prompt_sent(&["--approve"], &dirs);
    assert!(body.contains("secret-key-material"), "{body}");
}

#[test]
fn an_api_key_command_runs_in_the_agent_folder_not_the_project() {
    // `"apiKey": "!./key.sh"`: the user's script, not the repository's of the same name.
    let dirs = Dirs::new();
    let mock = MockServer::start_background().unwrap();
    mock.push(Reply::text("ok"));
    let script = |path: &Path, body: &str| {
        std::fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    script(&dirs.agent_dir().join("key.sh"), "echo users-key");
    let pwned = dirs.cwd().join("pwned-key");
    script(
        &dirs.cwd().join("key.sh"),
        &format!("touch '{}'; echo repository-key", pwned.display()),
    );
    let mut models: Value = serde_json::from_str(&crate::mock_models(&mock)).unwrap();
    models["providers"]["mock"]["apiKey"] = json!("!./key.sh");
    let mut t = ready_tau(
        tau()
            .dirs(dirs.clone())
            .agent_file("models.json", models.to_string())
            .arg("--no-session"),
    );
    t.send(&json!({"id": "p", "type": "prompt", "message": "hi"}));
    t.records_until("agent_settled", Duration::from_secs(30));
    crate::mcp::stop(t);
    let requests = mock.requests();
    assert_eq!(
        requests[0].header("authorization"),
        Some("Bearer users-key")
    );
    assert!(!pwned.exists(), "the repository's key.sh ran");
}

#[test]
fn a_fifo_named_as_the_session_is_refused_without_waiting() {
    let dirs = Dirs::new();
    let fifo = dirs.cwd().join("session.jsonl");
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR,
    )
    .unwrap();
    let (status, _, stderr, _) = tau()
        .dirs(dirs.clone())
        .arg("--session")
        .arg(fifo.display().to_string())
        .run(b"");
    assert!(!status.success());
    assert!(stderr.contains("not a regular file"), "{stderr}");
}
