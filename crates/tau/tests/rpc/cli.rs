//! Command-line handling: errors go to stderr as `Error: …` with exit status 1 and nothing on
//! stdout; `--help` and `--version` print real text.

use std::path::Path;

use tau_test_kit::run_once;

fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_tau"))
}

fn fails_with(args: &[&str], message: &str) {
    let (status, stdout, stderr) = run_once(bin(), args, b"{\"type\":\"get_state\"}\n");
    assert_eq!(status.code(), Some(1), "{args:?}: {stderr}");
    assert!(
        stdout.is_empty(),
        "{args:?} wrote to stdout: {}",
        String::from_utf8_lossy(&stdout)
    );
    assert_eq!(stderr.trim_end(), format!("Error: {message}"), "{args:?}");
}

#[test]
fn startup_errors_use_stderr_and_exit_1() {
    fails_with(&["--mode", "rpc", "--bogus"], "Unknown option: --bogus");
    fails_with(&["--mode", "rpc", "-z"], "Unknown option: -z");
    fails_with(
        &["--mode", "rpc", "@prompt.md"],
        "@file arguments are not supported in RPC mode",
    );
    fails_with(
        &["--mode", "rpc", "--name", "  "],
        "--name requires a non-empty value",
    );
    fails_with(
        &["--mode", "rpc", "--no-session", "--continue"],
        "--session, --session-id, --fork, --continue and --no-session cannot be combined",
    );
}

#[test]
fn without_a_mode_piped_tau_runs_print_mode_as_pi_does() {
    // stdin is a pipe here, so this is print mode; with no model configured it stops there.
    let (status, stdout, stderr) = run_once(bin(), &["hello"], b"");
    assert_eq!(status.code(), Some(1));
    assert!(stdout.is_empty());
    assert!(
        stderr.starts_with("Error: No models available."),
        "{stderr}"
    );
}

#[test]
fn help_and_version() {
    let (status, stdout, _) = run_once(bin(), &["--help"], b"");
    assert!(status.success());
    let help = String::from_utf8(stdout).unwrap();
    // It begins with the interactive use, then the modes for one answer, editors and programs.
    let start: Vec<&str> = help.lines().take(10).collect();
    let start = start.join("\n");
    for line in [
        "open an interactive session in this folder",
        "tau -p ",
        "tau --mode acp",
        "tau --mode rpc",
    ] {
        assert!(
            start.contains(line),
            "the first lines lack {line:?}:\n{start}"
        );
    }
    assert!(help.contains("tau-mock-llm"), "{help}");
    for option in [
        "--mode",
        "--provider",
        "--model",
        "--name",
        "--no-session",
        "--session-dir",
        "--thinking",
        "--system-prompt",
        "--append-system-prompt",
        "--tools",
        "TAU_AGENT_DIR",
    ] {
        assert!(help.contains(option), "help lacks {option}:\n{help}");
    }
    let (status, stdout, _) = run_once(bin(), &["--version"], b"");
    assert!(status.success());
    assert_eq!(
        String::from_utf8(stdout).unwrap(),
        format!("{}\n", env!("CARGO_PKG_VERSION")),
        "the bare version, as pi prints it"
    );
}

#[test]
fn pi_options_are_accepted() {
    let args = [
        "--mode",
        "rpc",
        "--provider",
        "anthropic",
        "--model",
        "anthropic/claude-sonnet-4-5:high",
        "--no-session",
        "-n",
        "x",
        "--system-prompt",
        "s",
        "--append-system-prompt",
        "a",
        "--append-system-prompt",
        "b",
        "--tools",
        "read,bash",
        "-nc",
        "-ne",
        "--offline",
        "ignored positional message",
    ];
    let (status, stdout, stderr) =
        run_once(bin(), &args, b"{\"id\":\"s\",\"type\":\"get_state\"}\n");
    assert!(status.success(), "{stderr}");
    let text = String::from_utf8(stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(lines[1].contains(r#""id":"s""#) && lines[1].contains(r#""sessionName":"x""#));
}

#[test]
fn session_ids_must_be_file_name_safe() {
    fails_with(
        &["--mode", "rpc", "--session-id", "bad."],
        "Invalid --session-id 'bad.': use letters, digits, '.', '_' and '-', starting and ending with a letter or digit",
    );
    fails_with(
        &["--mode", "rpc", "--session", "no-such-id"],
        "No session found matching 'no-such-id'",
    );
}

/// The model ids tau offers when started with `env` set over the kit's own variables.
fn models_seen(dirs: &tau_test_kit::Dirs, env: &[(&str, String)]) -> Vec<String> {
    let mut builder = crate::tau().dirs(dirs.clone()).arg("--no-session");
    for (key, value) in env {
        builder = builder.env(*key, value.clone());
    }
    let mut t = crate::ready_tau(builder);
    let models = t.request(serde_json::json!({"type": "get_available_models"}));
    t.close_stdin();
    t.wait_exit(std::time::Duration::from_secs(10));
    models["data"]["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_string())
        .collect()
}

/// A `models.json` offering one model named `id`.
fn offer(dir: &Path, id: &str) {
    std::fs::create_dir_all(dir).unwrap();
    let models = serde_json::json!({"providers": {"p": {"baseUrl": "http://127.0.0.1:9/v1",
        "api": "openai-completions", "apiKey": "k", "models": [{"id": id}]}}});
    std::fs::write(dir.join("models.json"), models.to_string()).unwrap();
}

#[test]
fn the_agent_directory_follows_both_variables_then_tau_s_then_pi_s_folder() {
    let dirs = tau_test_kit::Dirs::new();
    let home = dirs.home().to_path_buf();
    let tau_env = home.join("tau-env");
    let pi_env = home.join("pi-env");
    offer(&tau_env, "from-tau-env");
    offer(&pi_env, "from-pi-env");
    let home_env = ("HOME", home.display().to_string());
    let unset_tau = ("TAU_AGENT_DIR", String::new());
    let pi_var = ("PI_CODING_AGENT_DIR", pi_env.display().to_string());
    let tau_var = ("TAU_AGENT_DIR", tau_env.display().to_string());
    // Both variables: tau's wins; pi's alone is honoured (pi's clients set it).
    assert_eq!(
        models_seen(&dirs, &[home_env.clone(), tau_var, pi_var.clone()]),
        ["from-tau-env"]
    );
    assert_eq!(
        models_seen(&dirs, &[home_env.clone(), unset_tau.clone(), pi_var]),
        ["from-pi-env"]
    );
    // Neither: a pi user's ~/.pi/agent, unless ~/.tau/agent exists.
    offer(&home.join(".pi/agent"), "from-pi-home");
    assert_eq!(
        models_seen(&dirs, &[home_env.clone(), unset_tau.clone()]),
        ["from-pi-home"]
    );
    offer(&home.join(".tau/agent"), "from-tau-home");
    assert_eq!(
        models_seen(&dirs, &[home_env, unset_tau]),
        ["from-tau-home"]
    );
}
