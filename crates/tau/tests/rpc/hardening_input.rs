//! Security hardening (issue 28): resource walks are bounded, images are decoded within a pixel
//! budget, and what reaches a terminal carries no control sequences.

use std::os::unix::fs::symlink;
use std::time::Duration;

use serde_json::{Value, json};
use tau_mock_llm::{MockServer, Reply};
use tau_test_kit::{Dirs, TauBuilder};

use crate::{ready_tau, tau};

const CHECKER: &str = "---\nname: checker\ndescription: A skill beside the trap\n---\nCheck.\n";

/// `.pi/skills/d0 … d30`, each `d_i` holding two links to `d_{i+1}`: 2^30 paths to a walk
/// that follows links without remembering where it has been.
fn link_diamond(dirs: &Dirs) {
    let skills = dirs.cwd().join(".pi/skills");
    for i in 0..=30 {
        std::fs::create_dir_all(skills.join(format!("d{i}"))).unwrap();
    }
    for i in 0..30 {
        for name in ["a", "b"] {
            symlink(
                format!("../d{}", i + 1),
                skills.join(format!("d{i}/{name}")),
            )
            .unwrap();
        }
    }
}

#[test]
fn a_diamond_of_skill_links_neither_hangs_start_up_nor_new_session() {
    let dirs = Dirs::new();
    link_diamond(&dirs);
    let mut t = ready_tau(
        tau()
            .dirs(dirs)
            .arg("--no-session")
            .cwd_file(".pi/skills/checker/SKILL.md", CHECKER),
    );
    // Start-up loaded the skills after `ready`; each of these waits the default time.
    let r = t.request(json!({"type": "new_session"}));
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(crate::command_names(&mut t), ["skill:checker"]);
}

#[test]
fn a_link_to_the_root_in_a_project_skills_folder_is_not_followed() {
    let dirs = Dirs::new();
    std::fs::create_dir_all(dirs.cwd().join(".pi/skills")).unwrap();
    symlink("/", dirs.cwd().join(".pi/skills/everything")).unwrap();
    std::fs::create_dir_all(dirs.cwd().join(".pi/prompts")).unwrap();
    symlink("/", dirs.cwd().join(".pi/prompts/everything")).unwrap();
    let mut t = ready_tau(
        tau()
            .dirs(dirs)
            .arg("--no-session")
            .cwd_file(".pi/skills/checker/SKILL.md", CHECKER),
    );
    assert_eq!(crate::command_names(&mut t), ["skill:checker"]);
    let r = t.request(json!({"type": "new_session"}));
    assert_eq!(r["success"], true, "{r}");
    let stderr = t.stderr();
    assert!(
        stderr.contains("everything is not read: it links to /, outside"),
        "{stderr}"
    );
}

#[test]
fn links_inside_a_resource_folder_still_load_and_links_out_of_it_do_not() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(
        outside.path().join("secret.md"),
        "---\ndescription: not the project's to read\n---\nsecret\n",
    )
    .unwrap();
    std::fs::create_dir_all(outside.path().join("away")).unwrap();
    std::fs::write(
        outside.path().join("away/SKILL.md"),
        "---\nname: away\ndescription: outside\n---\nx\n",
    )
    .unwrap();
    let dirs = Dirs::new();
    let pi = dirs.cwd().join(".pi");
    // Hidden folders are not walked: these are reached only through the links.
    std::fs::create_dir_all(pi.join("skills/.store/deploy")).unwrap();
    std::fs::write(
        pi.join("skills/.store/deploy/SKILL.md"),
        "---\ndescription: Deploy through a link\n---\nShip it.\n",
    )
    .unwrap();
    symlink(".store/deploy", pi.join("skills/deploy")).unwrap();
    symlink(outside.path().join("away"), pi.join("skills/away")).unwrap();
    std::fs::create_dir_all(pi.join("prompts/.drafts")).unwrap();
    std::fs::write(
        pi.join("prompts/.drafts/review.md"),
        "---\ndescription: Review through a link\n---\nReview $1\n",
    )
    .unwrap();
    symlink(".drafts/review.md", pi.join("prompts/review.md")).unwrap();
    symlink(
        outside.path().join("secret.md"),
        pi.join("prompts/secret.md"),
    )
    .unwrap();
    let mut t = ready_tau(tau().dirs(dirs).arg("--no-session"));
    assert_eq!(crate::command_names(&mut t), ["review", "skill:deploy"]);
}

#[test]
fn sigterm_right_after_ready_exits_143_although_the_skills_are_a_trap() {
    let dirs = Dirs::new();
    link_diamond(&dirs);
    // tau writes `ready` and then loads the skills: the signal arrives during or after that
    // load, and either way must end tau with 143.
    let mut t = ready_tau(tau().dirs(dirs).arg("--no-session"));
    t.signal(rustix::process::Signal::TERM);
    let status = t.wait_exit(Duration::from_secs(15));
    assert_eq!(status.code(), Some(143), "{}", t.stderr());
}

/// The peak resident memory of a running process, from Linux's `/proc`.
#[cfg(target_os = "linux")]
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn parallel_reads_of_decompression_bombs_answer_with_text_and_decode_nothing() {
    let mock = MockServer::start_background().unwrap();
    let bomb = tau_test_kit::png_bomb::png(
        11_500,
        11_500,
        &tau_test_kit::png_bomb::zero_idat(11_500, 11_500),
    );
    assert!(bomb.len() < 150_000, "{}", bomb.len());
    let builder = tau()
        .agent_file("models.json", crate::mock_models(&mock))
        .arg("--no-session")
        .cwd_file("bomb.png", bomb);
    let mut t = ready_tau(builder);
    // Six reads in one turn: run at once, each would have decoded 132 megapixels.
    let mut reply = Reply::new();
    for i in 0..6 {
        reply = reply.tool_call(format!("r{i}"), "read", json!({"path": "bomb.png"}));
    }
    mock.push(reply);
    mock.push(Reply::text("done"));
    t.send(&json!({"id": "p", "type": "prompt", "message": "look"}));
    let mut ends: Vec<Value> = Vec::new();
    loop {
        let record = t
            .next_record(Duration::from_secs(60))
            .expect("the run ends");
        let json = record.json.unwrap();
        if json["type"] == "tool_execution_end" {
            ends.push(json.clone());
        }
        if json["type"] == "agent_settled" {
            break;
        }
    }
    assert_eq!(ends.len(), 6);
    for end in &ends {
        assert_eq!(end["isError"], false, "{end}");
        assert_eq!(
            end["result"]["content"],
            json!([{"type": "text", "text": "Read image file [image/png]\n[Image omitted: 11500x11500 pixels is more than the 50 megapixels an image may have to be decoded.]"}]),
        );
    }
    // tau goes on answering.
    let r = t.request(json!({"type": "get_state"}));
    assert_eq!(r["success"], true, "{r}");
    // One decode of the bomb alone peaks near a gigabyte; tau without it stays far below.
    #[cfg(target_os = "linux")]
    {
        let peak = peak_rss_kib(t.pid());
        assert!(peak < 300 * 1024, "peak RSS {peak} KiB");
    }
}

/// Quotes `text` for `sh`.
fn sh_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

#[test]
fn progress_on_a_terminal_shows_a_hostile_tool_name_escaped() {
    // `script` (util-linux) runs tau on a pseudo-terminal and copies what tau writes to it.
    let have_script = std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        have_script,
        "this test needs `script` from util-linux to give tau a terminal"
    );
    let mock = MockServer::start_background().unwrap();
    // OSC 52 writes the clipboard, OSC 0 sets the title, CSI 2K erases the line; a line feed
    // and a C1 CSI (U+009B) besides.
    let name = "x\u{1b}]52;c;aGk=\u{7}\u{1b}]0;owned\u{7}\u{1b}[2K\nforged\u{9b}2J";
    mock.push(Reply::new().tool_call("c1", name, json!({"p": "\u{1b}[31m"})));
    mock.push(Reply::text("done \u{1b}]0;title\u{7}here"));
    let command = format!("{} -p go --no-session", sh_quote(env!("CARGO_BIN_EXE_tau")));
    let (status, output, stderr, _) = TauBuilder::new("script")
        .raw_args(["-q", "-e", "-c", command.as_str(), "/dev/null"])
        .agent_file("models.json", crate::mock_models(&mock))
        .agent_file("settings.json", r#"{"retry": {"enabled": false}}"#)
        .run(b"");
    let shown = String::from_utf8_lossy(&output);
    assert!(status.success(), "{shown}\n{stderr}");
    assert!(
        !output.contains(&0x1b),
        "raw ESC on the terminal: {shown:?}"
    );
    assert!(
        !shown.contains('\u{9b}'),
        "raw C1 on the terminal: {shown:?}"
    );
    // The progress line was shown, escaped, on one line; and the answer likewise.
    assert!(
        shown.contains(r"» x\u{1b}]52;c;aGk=\u{7}\u{1b}]0;owned\u{7}\u{1b}[2K\nforged\u{9b}2J "),
        "{shown:?}"
    );
    assert!(shown.contains(r"done \u{1b}]0;title\u{7}here"), "{shown:?}");
}

#[test]
fn a_tool_name_with_control_characters_is_kept_raw_in_the_protocol() {
    // The escaping is for terminals only: RPC clients get the name as the model sent it.
    let mock = MockServer::start_background().unwrap();
    let name = "x\u{1b}]52;c;aGk=\u{7}";
    mock.push(Reply::new().tool_call("c1", name, json!({})));
    mock.push(Reply::text("done"));
    let mut t = ready_tau(
        tau()
            .agent_file("models.json", crate::mock_models(&mock))
            .arg("--no-session"),
    );
    t.send(&json!({"id": "p", "type": "prompt", "message": "go"}));
    let start = t.event("tool_execution_start");
    assert_eq!(start["toolName"], name);
    t.event("agent_settled");
}
