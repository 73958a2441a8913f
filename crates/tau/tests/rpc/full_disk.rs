//! A full disk (issue 47, decision T119): the session folder on a 256 KiB tmpfs, filled after
//! turn 5 and freed after turn 20 of 30. The client hears when saving fails and when it works
//! again, no turn is lost, no torn line is left, and the reopened session holds every turn.
//! Needs to mount a tmpfs (root, as on the project's machines); where that is refused the
//! test says so and checks nothing.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use tau_mock_llm::{MockServer, Reply};
use tau_test_kit::Dirs;

use crate::{ready_tau, tau};

/// A small tmpfs, unmounted when dropped.
struct SmallDisk {
    dir: PathBuf,
}

impl SmallDisk {
    fn mount(dir: &Path, size: &str) -> Option<Self> {
        std::fs::create_dir_all(dir).ok()?;
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .output()
            .ok()?;
        if !mounted.status.success() {
            eprintln!(
                "full_disk: skipped, cannot mount a tmpfs here: {}",
                String::from_utf8_lossy(&mounted.stderr).trim()
            );
            return None;
        }
        Some(Self {
            dir: dir.to_path_buf(),
        })
    }

    /// Writes a file until the disk is full.
    fn fill(&self) -> PathBuf {
        let filler = self.dir.join("filler");
        let mut file = std::fs::File::create(&filler).unwrap();
        let block = vec![0u8; 4096];
        while file.write_all(&block).is_ok() {}
        // The last partial block too.
        while file.write_all(&[0u8]).is_ok() {}
        filler
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.dir).status();
    }
}

fn session_file(dir: &Path) -> PathBuf {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .expect("a session file")
}

#[test]
fn a_full_disk_loses_no_turn_and_leaves_no_torn_line() {
    let dirs = Dirs::new();
    let Some(disk) = SmallDisk::mount(&dirs.home().join("disk"), "256k") else {
        return;
    };
    let mock = MockServer::start_background().unwrap();
    // Each reply is larger than a page, so a full disk refuses the next write at once.
    let answer = |n: usize| format!("answer {n} ") + &"x".repeat(6000);
    for n in 0..30 {
        mock.push(Reply::text(answer(n)));
    }
    let mut t = ready_tau(
        tau()
            .dirs(dirs.clone())
            .agent_file("models.json", crate::mock_models(&mock))
            .arg("--session-dir")
            .arg(disk.dir.display().to_string()),
    );
    let mut filler = None;
    let mut statuses = Vec::new();
    for n in 0..30 {
        if n == 6 {
            filler = Some(disk.fill());
        }
        if n == 21
            && let Some(filler) = filler.take()
        {
            std::fs::remove_file(filler).unwrap();
        }
        t.send(
            &json!({"id": format!("p{n}"), "type": "prompt", "message": format!("question {n}")}),
        );
        let records = t.records_until("agent_settled", Duration::from_secs(30));
        statuses.extend(
            records
                .into_iter()
                .filter(|r| r["type"] == "session_save_status")
                .map(|r| (n, r)),
        );
    }
    t.close_stdin();
    assert!(
        t.wait_exit(Duration::from_secs(30)).success(),
        "{}",
        t.stderr()
    );

    // Told once when saving failed (at turn 6), and once when it worked again (turn 21).
    let states: Vec<(usize, &str)> = statuses
        .iter()
        .map(|(n, r)| (*n, r["state"].as_str().unwrap_or_default()))
        .collect();
    assert_eq!(states, [(6, "failing"), (21, "saved")], "{statuses:?}");
    let failing = &statuses[0].1;
    assert!(
        failing["error"]
            .as_str()
            .unwrap_or_default()
            .contains("No space left"),
        "{failing}"
    );
    assert!(failing["unsaved"].as_u64().unwrap_or(0) >= 1, "{failing}");

    // Every line whole, every turn in the file.
    let file = session_file(&disk.dir);
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.ends_with('\n'));
    for line in text.lines() {
        serde_json::from_str::<Value>(line).unwrap_or_else(|e| panic!("torn line {line:?}: {e}"));
    }
    for n in 0..30 {
        assert!(
            text.contains(&format!("question {n}\"")),
            "turn {n} is missing"
        );
    }

    // Reopened: the whole conversation, from the first turn.
    let mut again = ready_tau(
        tau()
            .dirs(dirs.clone())
            .agent_file("models.json", crate::mock_models(&mock))
            .arg("--session")
            .arg(file.display().to_string()),
    );
    let messages = again.request(json!({"type": "get_messages"}));
    let messages = messages["data"]["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 60, "{}", messages.len());
    assert_eq!(messages[0]["content"][0]["text"], "question 0");
    again.close_stdin();
    again.wait_exit(Duration::from_secs(30));
    drop(disk);
}

#[test]
fn settings_and_an_export_on_a_full_disk_leave_the_old_files_whole() {
    let dirs = Dirs::new();
    let Some(disk) = SmallDisk::mount(&dirs.home().join("agent-disk"), "64k") else {
        return;
    };
    let mock = MockServer::start_background().unwrap();
    mock.push(Reply::text("hello"));
    let settings = json!({"steeringMode": "all", "compaction": {"enabled": true}}).to_string();
    std::fs::write(disk.dir.join("settings.json"), &settings).unwrap();
    std::fs::write(disk.dir.join("models.json"), crate::mock_models(&mock)).unwrap();
    std::fs::write(disk.dir.join("old.html"), "old export").unwrap();
    let mut t = ready_tau(
        tau()
            .dirs(dirs.clone())
            .env("TAU_AGENT_DIR", disk.dir.display().to_string())
            .arg("--session-dir")
            .arg(dirs.cwd().join("sessions").display().to_string()),
    );
    t.send(&json!({"id": "p", "type": "prompt", "message": "hi"}));
    t.records_until("agent_settled", Duration::from_secs(30));
    let filler = disk.fill();

    // The change holds for this process; the file keeps its old bytes.
    let set = t.request(json!({"type": "set_auto_compaction", "enabled": false}));
    assert_eq!(set["success"], true, "{set}");
    assert_eq!(
        std::fs::read_to_string(disk.dir.join("settings.json")).unwrap(),
        settings
    );
    let export = t.request(json!({
        "type": "export_html",
        "outputPath": disk.dir.join("old.html").display().to_string()
    }));
    assert_eq!(export["success"], false, "{export}");
    assert_eq!(
        std::fs::read_to_string(disk.dir.join("old.html")).unwrap(),
        "old export"
    );
    // Nothing half-written left beside them.
    let mut names: Vec<String> = std::fs::read_dir(&disk.dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["filler", "models.json", "old.html", "settings.json"],
        "{names:?}"
    );
    std::fs::remove_file(filler).unwrap();
    t.close_stdin();
    t.wait_exit(Duration::from_secs(30));
}
