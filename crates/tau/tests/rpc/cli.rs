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
