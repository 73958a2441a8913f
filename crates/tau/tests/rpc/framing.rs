//! Framing: LF-only records, CR stripping, raw U+2028/U+2029, partial last lines, junk lines
//! and very large lines.

use std::time::Duration;

use serde_json::json;

use crate::{ready_tau, tau};

#[test]
fn ready_is_the_first_record() {
    let mut t = tau().spawn();
    t.send(&json!({"id": "s", "type": "get_state"}));
    let first = t
        .next_record(Duration::from_secs(15))
        .expect("a first record");
    assert_eq!(first.kind(), Some("ready"));
    assert_eq!(first.json.unwrap()["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(t.response("s")["success"], true);
}

#[test]
fn crlf_is_stripped_and_line_separators_stay_raw() {
    let mut t = ready_tau(tau());
    // U+2028 and U+2029 raw inside a JSON string, and a CRLF terminator.
    t.send_raw(
        "{\"id\":\"n\",\"type\":\"set_session_name\",\"name\":\"a\u{2028}b\u{2029}c\"}\r\n"
            .as_bytes(),
    );
    let event = t.wait_for("session_info_changed", Duration::from_secs(15), |r| {
        r.kind() == Some("session_info_changed")
    });
    let raw = String::from_utf8(event.raw.clone()).unwrap();
    assert!(
        raw.contains("a\u{2028}b\u{2029}c"),
        "written raw, not escaped: {raw}"
    );
    assert!(!raw.contains("\\u2028"));
    assert_eq!(t.response("n")["success"], true);
    let state = t.request(json!({"type": "get_state"}));
    assert_eq!(state["data"]["sessionName"], "a\u{2028}b\u{2029}c");
}

#[test]
fn unterminated_last_line_is_answered_before_exit() {
    let mut t = ready_tau(tau());
    t.send_raw(br#"{"id":"last","type":"get_state"}"#);
    t.close_stdin();
    assert_eq!(t.response("last")["success"], true);
    assert!(t.wait_exit(Duration::from_secs(15)).success());
}

#[test]
fn a_record_split_across_writes_is_one_command() {
    let mut t = ready_tau(tau());
    t.send_raw(br#"{"id":"split","ty"#);
    std::thread::sleep(Duration::from_millis(50));
    t.send_raw(b"pe\":\"get_state\"}\n");
    assert_eq!(t.response("split")["command"], "get_state");
}

#[test]
fn every_bad_line_gets_one_error_and_reading_continues() {
    let mut t = ready_tau(tau());
    let bad: &[&[u8]] = &[
        b"",
        b"not json",
        b"null",
        b"[1,2]",
        b"42",
        b"\"text\"",
        b"{}",
        br#"{"id":"t1"}"#,
        br#"{"id":"t2","type":5}"#,
        b"{\"id\":\"t3\",\"type\":\"get_state\",\"x\":\"\xff\xfe\"}",
        br#"{"id":"t4","type":"bogus"}"#,
        b"{\"type\":",
    ];
    for line in bad {
        t.send_raw(line);
        t.send_raw(b"\n");
    }
    t.send(&json!({"id": "after", "type": "get_state"}));
    let mut errors = Vec::new();
    loop {
        let record = t.next_record(Duration::from_secs(15)).expect("a record");
        let json = record.json.expect("every record is JSON");
        if json["id"] == "after" {
            assert_eq!(json["success"], true);
            break;
        }
        assert_eq!(json["type"], "response", "{json}");
        assert_eq!(json["success"], false, "{json}");
        errors.push(json);
    }
    assert_eq!(
        errors.len(),
        bad.len(),
        "one error per bad line: {errors:#?}"
    );
    for (i, e) in errors.iter().enumerate() {
        let error = e["error"].as_str().unwrap();
        match i {
            7 | 8 => {
                assert_eq!(e["id"], format!("t{}", i - 6));
                assert_eq!(e["command"], "parse");
                // pi says `Unknown command: undefined` without `command` (decision T2).
                let expected = if i == 7 {
                    r#"Failed to parse command: missing "type""#
                } else {
                    r#"Failed to parse command: "type" must be a string"#
                };
                assert_eq!(error, expected);
            }
            10 => {
                assert_eq!(e["id"], "t4");
                assert_eq!(error, "Unknown command: bogus");
            }
            _ => {
                assert!(e.get("id").is_none(), "{e}");
                assert_eq!(e["command"], "parse");
                assert!(error.starts_with("Failed to parse command: "), "{error}");
            }
        }
    }
}

#[test]
fn a_fifty_megabyte_line_is_read_and_answered() {
    let mut t = ready_tau(tau());
    let data = "A".repeat(50 * 1024 * 1024);
    let command = json!({
        "id": "big",
        "type": "prompt",
        "message": "What is in this image?",
        "images": [{"type": "image", "data": data, "mimeType": "image/png"}],
    });
    t.send(&command);
    let r = t.response_within("big", Duration::from_secs(60));
    // Fully parsed and validated: what stops it is the missing model key.
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .starts_with("No API key found for"),
        "{r}"
    );
    // A huge line that is not JSON is one parse error, and the next line still works.
    let mut junk = vec![b'x'; 20 * 1024 * 1024];
    junk.push(b'\n');
    t.send_raw(&junk);
    let parse = t.wait_for("parse error", Duration::from_secs(60), |r| {
        r.json.as_ref().is_some_and(|j| j["command"] == "parse")
    });
    assert_eq!(parse.json.unwrap()["success"], false);
    assert_eq!(t.request(json!({"type": "get_state"}))["success"], true);
}
