//! Process lifecycle (decision 11): EOF exits 0 after answering, signals give 130/143/129,
//! a vanished reader ends the process, and stdout belongs to the protocol alone.

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use rustix::process::Signal;
use serde_json::json;

use crate::{ready_tau, tau};

#[test]
fn eof_answers_everything_then_exits_zero() {
    let mut t = ready_tau(tau());
    for i in 0..20 {
        t.send(&json!({"id": format!("e{i}"), "type": "get_state"}));
    }
    t.close_stdin();
    for i in 0..20 {
        assert_eq!(t.response(&format!("e{i}"))["success"], true);
    }
    let status = t.wait_exit(Duration::from_secs(15));
    assert_eq!(status.code(), Some(0));
    assert!(
        t.drain(Duration::from_secs(15)).is_empty(),
        "nothing after the last response"
    );
}

#[test]
fn signals_exit_with_their_codes() {
    for (signal, code) in [(Signal::INT, 130), (Signal::TERM, 143), (Signal::HUP, 129)] {
        let mut t = ready_tau(tau());
        t.signal(signal);
        let status = t.wait_exit(Duration::from_secs(15));
        assert_eq!(status.code(), Some(code), "{signal:?}: {}", t.stderr());
    }
}

#[test]
fn a_closed_stdout_ends_the_process_with_status_1() {
    let agent = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_tau"))
        .args(["--mode", "rpc"])
        .env("TAU_AGENT_DIR", agent.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 1];
    stdout.read_exact(&mut first).unwrap();
    drop(stdout);
    let mut stdin = child.stdin.take().unwrap();
    // Keep writing until tau notices that nobody reads its answers.
    for _ in 0..200 {
        if stdin.write_all(b"{\"type\":\"get_state\"}\n").is_err() {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
        if child.try_wait().unwrap().is_some() {
            break;
        }
    }
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(1));
}

#[test]
fn file_descriptor_1_no_longer_reaches_the_protocol_stream() {
    let mut t = ready_tau(tau());
    let fd = |n: u32| std::fs::read_link(format!("/proc/{}/fd/{n}", t.pid())).unwrap();
    assert_eq!(
        fd(1),
        fd(2),
        "fd 1 points at stderr, so stray writes cannot corrupt stdout"
    );
    assert_eq!(t.request(json!({"type": "get_state"}))["success"], true);
}
