//! The `bash` tool and the shell runner against real processes.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use tau_agent::{AgentTool, ToolContext};
use tau_protocol::{AgentToolResult, UserContentBlock};
use tau_tools::ToolEnv;
use tau_tools::bash::{BashTool, ShellRequest, ShellStatus, run_shell};
use tokio_util::sync::CancellationToken;

struct Session {
    dir: tempfile::TempDir,
    env: ToolEnv,
}

fn session() -> Session {
    let dir = tempfile::tempdir().unwrap();
    let env = ToolEnv::new(dir.path(), dir.path().join("agent"));
    Session { dir, env }
}

fn args(command: &str) -> Map<String, Value> {
    let Value::Object(map) = json!({ "command": command }) else {
        unreachable!()
    };
    map
}

fn text(result: &AgentToolResult) -> &str {
    match result.content.as_slice() {
        [UserContentBlock::Text(t)] => &t.text,
        other => panic!("expected one text block, got {other:?}"),
    }
}

async fn run(env: ToolEnv, arguments: Map<String, Value>) -> Result<AgentToolResult, String> {
    let tool = BashTool::new(Arc::new(env));
    tool.execute_with(arguments, &CancellationToken::new(), |_| {})
        .await
}

async fn bash(command: &str) -> Result<AgentToolResult, String> {
    run(session().env, args(command)).await
}

/// The path in a `Full output: <path>]` notice.
fn notice_path(text: &str) -> PathBuf {
    let start = text.rfind("Full output: ").unwrap() + "Full output: ".len();
    PathBuf::from(text[start..].trim_end_matches(']'))
}

/// Processes of the group that are still alive (zombies do not count: nobody may reap them in
/// a container whose init does not).
fn live_members(pgid: i32) -> Vec<i32> {
    let mut live = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // Fields after the parenthesised command name: state, ppid, pgrp, …
        let Some(rest) = stat.rsplit_once(')').map(|(_, rest)| rest) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.len() > 2 && fields[2] == pgid.to_string() && fields[0] != "Z" {
            live.push(pid);
        }
    }
    live
}

/// Waits up to 2 s for the group to die; SIGKILL delivery is asynchronous.
async fn assert_group_gone(pgid: i32) {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let live = live_members(pgid);
        if live.is_empty() {
            return;
        }
        assert!(Instant::now() < deadline, "group {pgid} still has {live:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z'))
    })
}

#[tokio::test]
async fn echo_returns_its_output() {
    let result = bash("echo hello").await.unwrap();
    assert_eq!(text(&result), "hello\n");
    assert_eq!(result.details, None);
}

#[tokio::test]
async fn stderr_is_merged_in_order_and_exit_codes_fail() {
    let err = bash("echo out; echo err >&2; exit 3").await.unwrap_err();
    assert_eq!(err, "out\nerr\n\n\nCommand exited with code 3");
    let result = bash("for i in 1 2 3 4 5; do echo o$i; echo e$i >&2; done")
        .await
        .unwrap();
    assert_eq!(text(&result), "o1\ne1\no2\ne2\no3\ne3\no4\ne4\no5\ne5\n");
}

#[tokio::test]
async fn silence_is_no_output() {
    assert_eq!(text(&bash("true").await.unwrap()), "(no output)");
    assert_eq!(
        bash("exit 7").await.unwrap_err(),
        "(no output)\n\nCommand exited with code 7"
    );
}

#[tokio::test]
async fn a_signal_that_was_not_ours_is_success() {
    assert_eq!(text(&bash("kill -9 $$").await.unwrap()), "(no output)");
}

#[tokio::test]
async fn long_output_keeps_the_last_lines_and_saves_everything() {
    let result = bash("seq 1 3000").await.unwrap();
    let text = text(&result);
    let path = notice_path(text);
    assert!(
        path.file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("pi-bash-")
    );
    let expected = format!(
        "\n\n[Showing lines 1001-3000 of 3000. Full output: {}]",
        path.display()
    );
    assert!(text.ends_with(&expected), "{}", &text[text.len() - 120..]);
    assert!(text.starts_with("1001\n1002\n"));
    assert!(
        text.contains("\n3000\n\n[Showing"),
        "kept lines joined without the final newline"
    );

    let full = std::fs::read_to_string(&path).unwrap();
    // The complete output may hold secrets: readable by the owner only.
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&path).unwrap().permissions());
    let _ = std::fs::remove_file(&path);
    assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    let all: String = (1..=3000).map(|i| format!("{i}\n")).collect();
    assert_eq!(full, all);

    let details = result.details.unwrap();
    assert_eq!(details["fullOutputPath"], json!(path.display().to_string()));
    let t = &details["truncation"];
    assert_eq!(t["truncated"], json!(true));
    assert_eq!(t["truncatedBy"], json!("lines"));
    assert_eq!(t["totalLines"], json!(3000));
    assert_eq!(t["totalBytes"], json!(all.len()));
    assert_eq!(t["outputLines"], json!(2000));
    assert_eq!(t["maxLines"], json!(2000));
    assert_eq!(t["maxBytes"], json!(51200));
}

#[tokio::test]
async fn long_lines_are_cut_by_bytes() {
    // 100 lines of 999 zeros: 52 lines (counting the empty last one) fit in 50 KB.
    let result = bash("yes $(printf '%0999d' 0) | head -n 100")
        .await
        .unwrap();
    let text = text(&result);
    let path = notice_path(text);
    let _ = std::fs::remove_file(&path);
    assert!(text.ends_with(&format!(
        "\n\n[Showing lines 50-100 of 100 (50.0KB limit). Full output: {}]",
        path.display()
    )));
    assert_eq!(
        result.details.unwrap()["truncation"]["truncatedBy"],
        json!("bytes")
    );
}

#[tokio::test]
async fn one_huge_line_shows_its_end() {
    let result = bash("head -c 300000 /dev/zero | tr '\\0' x").await.unwrap();
    let text = text(&result);
    let path = notice_path(text);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 300_000);
    let _ = std::fs::remove_file(&path);
    let expected = format!(
        "{}\n\n[Showing last 50.0KB of line 1 (line is 293.0KB). Full output: {}]",
        "x".repeat(51_200),
        path.display()
    );
    assert_eq!(text, expected);
    let t = &result.details.unwrap()["truncation"];
    assert_eq!(t["lastLinePartial"], json!(true));
    assert_eq!(t["totalBytes"], json!(300_000));
}

fn peak_rss_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Peak RSS belongs to the whole process, and the other tests of this binary run beside this
/// one on other threads: what they allocate would count against it. So the measuring half runs
/// alone, in this test binary started again for this one test.
#[test]
fn a_hundred_megabytes_stay_out_of_memory() {
    const ALONE: &str = "TAU_TEST_RSS_ALONE";
    if std::env::var_os(ALONE).is_none() {
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "bash::a_hundred_megabytes_stay_out_of_memory",
                "--test-threads=1",
            ])
            .env(ALONE, "1")
            .status()
            .unwrap();
        assert!(status.success(), "the run on its own failed: {status}");
        return;
    }
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(a_hundred_megabytes_measured());
}

async fn a_hundred_megabytes_measured() {
    let s = session();
    // 1,000,000 lines of 99 characters and a newline.
    let mut request = ShellRequest::new(&s.env, "yes $(printf '%099d' 0) | head -c 100000000");
    request.update_interval = Some(Duration::from_millis(100));
    let before = peak_rss_kb();
    let started = Instant::now();
    let mut updates = 0;
    let outcome = run_shell(request, &CancellationToken::new(), |_| updates += 1)
        .await
        .unwrap();
    let elapsed = started.elapsed();
    let grown_mb = (peak_rss_kb() - before) / 1024;
    let out = &outcome.output;
    let path = out.full_output_path.clone().unwrap();
    let file_len = std::fs::metadata(&path).unwrap().len();
    let _ = std::fs::remove_file(&path);

    assert_eq!(outcome.status, ShellStatus::Exited(0));
    assert_eq!(file_len, 100_000_000);
    assert_eq!(out.raw_bytes, 100_000_000);
    assert_eq!(out.truncation.total_bytes, 100_000_000);
    assert_eq!(out.truncation.total_lines, 1_000_000);
    assert!(out.truncation.truncated);
    // The kept lines are joined without the final newline (pi 0.79).
    assert_eq!(out.truncation.output_bytes, out.truncation.content.len());
    assert!(out.truncation.output_bytes > 51_000 && out.truncation.output_bytes <= 51_200);
    assert_eq!(
        out.truncation.output_lines,
        out.truncation.content.split('\n').count()
    );
    assert!(out.tail.len() <= 204_800);
    assert!(grown_mb < 40, "peak RSS grew by {grown_mb} MB");
    // At most one update per 100 ms, plus the first and the final one.
    assert!(updates >= 1);
    assert!(
        updates as u128 <= elapsed.as_millis() / 100 + 2,
        "{updates} in {elapsed:?}"
    );
}

#[tokio::test]
async fn timeout_kills_the_whole_group() {
    let mut arguments = args("echo $$; sleep 30 & sleep 31; echo never");
    arguments.insert("timeout".into(), json!(1));
    let started = Instant::now();
    let err = run(session().env, arguments).await.unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let (pid, rest) = err.split_once('\n').unwrap();
    assert_eq!(rest, "\n\nCommand timed out after 1 seconds");
    assert_group_gone(pid.parse().unwrap()).await;

    let mut arguments = args("sleep 5");
    arguments.insert("timeout".into(), json!(0.3));
    let err = run(session().env, arguments).await.unwrap_err();
    assert_eq!(err, "Command timed out after 0.3 seconds");
}

#[tokio::test]
async fn abort_returns_at_once_and_kills_the_group() {
    let s = session();
    let tool = BashTool::new(Arc::new(s.env.clone()));
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    let canceller = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        trigger.cancel();
        Instant::now()
    });
    let err = tool
        .execute_with(args("echo $$; sleep 30 & sleep 30"), &cancel, |_| {})
        .await
        .unwrap_err();
    let cancelled_at = canceller.await.unwrap();
    assert!(
        // Well under the 30 s the commands sleep, with room for a loaded machine.
        cancelled_at.elapsed() < Duration::from_secs(5),
        "{:?}",
        cancelled_at.elapsed()
    );
    let (pid, rest) = err.split_once('\n').unwrap();
    assert_eq!(rest, "\n\nCommand aborted");
    assert_group_gone(pid.parse().unwrap()).await;

    // Already cancelled: nothing runs.
    let marker = tempfile::tempdir().unwrap();
    let command = format!("touch {}/ran", marker.path().display());
    let err = tool
        .execute_with(args(&command), &cancel, |_| {})
        .await
        .unwrap_err();
    assert_eq!(err, "Command aborted");
    assert!(!marker.path().join("ran").exists());
}

#[tokio::test]
async fn dropping_a_running_call_kills_the_group() {
    let s = session();
    let mut request = ShellRequest::new(&s.env, "echo $$; sleep 30 & sleep 30");
    request.update_interval = Some(Duration::from_millis(10));
    let mut first = String::new();
    let cancel = CancellationToken::new();
    let call = run_shell(request, &cancel, |snapshot| {
        if first.is_empty() {
            first = snapshot.tail.clone();
        }
    });
    assert!(
        tokio::time::timeout(Duration::from_millis(300), call)
            .await
            .is_err()
    );
    assert_group_gone(first.trim().parse().unwrap()).await;
}

#[tokio::test]
async fn a_background_job_holding_stdout_does_not_hang_and_survives() {
    let started = Instant::now();
    let result = bash("sleep 5 & echo $!; echo done").await.unwrap();
    let elapsed = started.elapsed();
    let text = text(&result);
    let (pid, rest) = text.split_once('\n').unwrap();
    assert_eq!(rest, "done\n");
    // Waiting for the job would take its 5 s; under load the answer alone may take a second.
    assert!(elapsed < Duration::from_millis(4_000), "{elapsed:?}");
    let pid: i32 = pid.parse().unwrap();
    assert!(alive(pid), "the background job was killed");
    let _ = rustix::process::kill_process(
        rustix::process::Pid::from_raw(pid).unwrap(),
        rustix::process::Signal::KILL,
    );
}

#[tokio::test]
async fn a_background_job_flooding_the_pipe_does_not_hang() {
    let started = Instant::now();
    let result = bash("yes & sleep 0.1; echo started").await.unwrap();
    // A hang would last as long as `yes` runs (forever); a loaded machine takes a second.
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let text = text(&result);
    let _ = std::fs::remove_file(notice_path(text));
    assert!(text.contains("y\ny\n") && text.contains("Full output: "));
}

#[tokio::test]
async fn a_timeout_during_a_flood_keeps_the_tail() {
    let mut arguments = args("yes");
    arguments.insert("timeout".into(), json!(0.5));
    let started = Instant::now();
    let err = run(session().env, arguments).await.unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    let _ = std::fs::remove_file(notice_path(
        err.trim_end_matches("\n\nCommand timed out after 0.5 seconds"),
    ));
    assert!(err.starts_with("y\ny\n"));
    assert!(
        err.ends_with("]\n\nCommand timed out after 0.5 seconds"),
        "{}",
        &err[err.len() - 200..]
    );
}

#[tokio::test]
async fn progress_is_streamed_and_throttled() {
    let s = session();
    let tool = BashTool::new(Arc::new(s.env.clone()));
    let updates = Arc::new(Mutex::new(Vec::new()));
    let sink = updates.clone();
    let started = Instant::now();
    let result = tool
        .execute_with(
            args("echo a; sleep 0.3; for i in 1 2 3 4 5 6 7 8 9 10; do echo $i; sleep 0.05; done"),
            &CancellationToken::new(),
            move |update| sink.lock().unwrap().push(update),
        )
        .await
        .unwrap();
    let elapsed = started.elapsed();
    let updates = updates.lock().unwrap();

    assert_eq!(
        updates[0],
        AgentToolResult {
            extra: Default::default(),
            content: vec![],
            details: None,
            terminate: None
        }
    );
    assert_eq!(text(&updates[1]), "a\n");
    assert_eq!(updates[1].details, Some(json!({})));
    let last = updates.last().unwrap();
    assert_eq!(text(last), text(&result));
    assert!(text(&result).starts_with("a\n1\n2\n") && text(&result).ends_with("10\n"));
    // Eleven writes over ~0.8 s, at most one update per 100 ms.
    let max = elapsed.as_millis() as usize / 100 + 3;
    assert!(
        updates.len() >= 4 && updates.len() <= max,
        "{} updates in {elapsed:?}",
        updates.len()
    );
    // Snapshots are cumulative.
    for pair in updates[1..].windows(2) {
        assert!(text(&pair[1]).starts_with(text(&pair[0])));
    }
}

#[tokio::test]
async fn the_agent_tool_interface_streams_through_the_context() {
    let s = session();
    let tool: Arc<dyn AgentTool> = Arc::new(BashTool::new(Arc::new(s.env.clone())));
    assert_eq!(tool.name(), "bash");
    assert!(tool.description().contains("2000 lines"));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let cancel = CancellationToken::new();
    let context = ToolContext::new(cancel.clone(), tx);
    let running = tokio::spawn({
        let tool = tool.clone();
        async move {
            tool.execute("call-1", args("echo first; sleep 30"), context)
                .await
        }
    });
    assert_eq!(rx.recv().await.unwrap().content, vec![]);
    assert_eq!(text(&rx.recv().await.unwrap()), "first\n");
    cancel.cancel();
    let err = running.await.unwrap().unwrap_err();
    assert_eq!(err, "first\n\n\nCommand aborted");
}

#[tokio::test]
async fn updates_of_truncated_output_carry_details() {
    let s = session();
    let tool = BashTool::new(Arc::new(s.env.clone()));
    let mut last = None;
    let result = tool
        .execute_with(args("seq 1 3000"), &CancellationToken::new(), |u| {
            last = Some(u)
        })
        .await
        .unwrap();
    let last = last.unwrap();
    let path = result.details.as_ref().unwrap()["fullOutputPath"].clone();
    let _ = std::fs::remove_file(path.as_str().unwrap());
    let details = last.details.clone().unwrap();
    assert_eq!(details["fullOutputPath"], path);
    assert_eq!(details["truncation"]["totalLines"], json!(3000));
    assert!(text(&last).starts_with("1001\n") && !text(&last).contains("[Showing"));
}

#[tokio::test]
async fn custom_shell_paths() {
    let mut s = session();
    s.env.shell_path = Some("/no/such/shell".into());
    let err = run(s.env.clone(), args("echo hi")).await.unwrap_err();
    assert_eq!(err, "Custom shell path not found: /no/such/shell");

    s.env.shell_path = Some("/bin/sh".into());
    let result = run(s.env, args("echo \"$0\"")).await.unwrap();
    assert_eq!(text(&result), "/bin/sh\n");
}

#[tokio::test]
async fn a_missing_working_directory_is_reported() {
    let mut s = session();
    let missing = s.dir.path().join("gone");
    s.env.cwd = missing.clone();
    let err = run(s.env, args("echo hi")).await.unwrap_err();
    assert_eq!(
        err,
        format!(
            "Working directory does not exist: {}\nCannot execute bash commands.",
            missing.display()
        )
    );
}

#[tokio::test]
async fn the_command_runs_in_the_session_with_its_environment() {
    let mut s = session();
    s.env.shell_command_prefix = Some("export GREETING=hi".into());
    let agent_bin = s.env.agent_dir.join("bin");
    let cwd = std::fs::canonicalize(s.dir.path()).unwrap();
    let result = run(
        s.env,
        args("echo $GREETING; pwd -P; echo \"$PI_CODING_AGENT $TAU_CODING_AGENT\"; echo \"$PATH\" | cut -d: -f1; read x || echo eof"),
    )
    .await
    .unwrap();
    assert_eq!(
        text(&result),
        format!(
            "hi\n{}\ntrue true\n{}\neof\n",
            cwd.display(),
            agent_bin.display()
        )
    );
}

#[tokio::test]
async fn invalid_utf8_is_replaced() {
    let result = bash("printf '\\377\\376abc\\n'; printf '\\303'")
        .await
        .unwrap();
    assert_eq!(text(&result), "\u{FFFD}\u{FFFD}abc\n\u{FFFD}");
}

#[tokio::test]
async fn the_runner_can_sanitise_for_the_rpc_command() {
    let s = session();
    let mut request = ShellRequest::new(
        &s.env,
        "printf '\\033[31mred\\033[0m\\r\\n\\001x\\n'; exit 4",
    );
    request.sanitize = true;
    let outcome = run_shell(request, &CancellationToken::new(), |_| {})
        .await
        .unwrap();
    assert_eq!(outcome.status, ShellStatus::Exited(4));
    assert_eq!(outcome.output.tail, "red\nx\n");
    assert_eq!(outcome.output.truncation.total_bytes, 6);
    assert_eq!(outcome.output.full_output_path, None);

    // The tool itself leaves the bytes alone.
    let result = bash("printf '\\033[1mb\\r\\n'").await.unwrap();
    assert_eq!(text(&result), "\x1b[1mb\r\n");
}

#[tokio::test]
async fn the_shell_is_bash_compatible() {
    let shell = tau_tools::bash::resolve_shell(None).unwrap();
    let name = shell.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        ["bash", "zsh", "sh"].contains(&name.as_str()),
        "{}",
        shell.display()
    );
    assert!(Path::new(&shell).is_absolute() || name == "sh");
}
