//! Unit tests of the store's internals: ids, timestamps, header parsing, opaque entries.

use super::*;
use serde_json::json;

#[test]
fn entry_ids_are_8_hex_and_fall_back_to_a_full_uuid() {
    let id = new_entry_id(|_| false);
    assert_eq!(id.len(), 8);
    assert!(id.chars().all(|c| c.is_ascii_hexdigit()));
    let tries = std::cell::Cell::new(0);
    let id = new_entry_id(|_| {
        tries.set(tries.get() + 1);
        true
    });
    assert_eq!(tries.get(), 100);
    assert!(uuid::Uuid::parse_str(&id).is_ok(), "{id}");
}

#[test]
fn iso_timestamps_convert_to_epoch_ms() {
    assert_eq!(iso_to_ms("1970-01-01T00:00:01.500Z"), 1500);
    assert_eq!(iso_to_ms("2026-11-22T00:18:09.481Z"), 1_795_306_689_481);
    assert_eq!(iso_to_ms("yesterday"), 0);
}

#[test]
fn header_without_version_is_version_1() -> Result<(), serde_json::Error> {
    let map = serde_json::from_value(json!({"type":"session","id":"x","cwd":"/w"}))?;
    let header = SessionHeader::from_map(map);
    assert_eq!(header.map(|h| h.version), Some(1));
    let not_header = serde_json::from_value(json!({"type":"message","id":"x"}))?;
    assert!(SessionHeader::from_map(not_header).is_none());
    let no_id = serde_json::from_value(json!({"type":"session","id":5}))?;
    assert!(SessionHeader::from_map(no_id).is_none());
    Ok(())
}

#[test]
fn opaque_entry_follows_a_new_parent() -> Result<(), serde_json::Error> {
    let raw = json!({"type":"future","id":"f1","parentId":"p0","timestamp":"t","x":[1]});
    let serde_json::Value::Object(map) = raw else {
        unreachable!("object literal")
    };
    let mut entry = SessionEntry {
        id: "f1".into(),
        parent_id: Some("p0".into()),
        timestamp: "t".into(),
        kind: EntryKind::Unknown(map),
        extra: serde_json::Map::new(),
    };
    assert_eq!(
        entry.to_line()?,
        r#"{"type":"future","id":"f1","parentId":"p0","timestamp":"t","x":[1]}"#
    );
    entry.parent_id = Some("q9".into());
    assert_eq!(
        entry.to_line()?,
        r#"{"type":"future","id":"f1","parentId":"q9","timestamp":"t","x":[1]}"#
    );
    assert_eq!(entry.type_name(), "future");
    Ok(())
}

#[test]
fn known_entry_with_bad_fields_is_kept_opaque() {
    let line = br#"{"type":"model_change","id":"m1","parentId":null,"timestamp":"t","provider":7}"#;
    let loaded = load::read_session(
        &[
            br#"{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/w"}"#.as_slice(),
            b"\n",
            line,
            b"\n",
        ]
        .concat()[..],
        Path::new("mem"),
    );
    let Ok(loaded) = loaded else {
        panic!("session should load");
    };
    assert_eq!(loaded.entries.len(), 1);
    assert!(matches!(loaded.entries[0].kind, EntryKind::Unknown(_)));
    assert_eq!(
        loaded.entries[0].to_line().ok().as_deref(),
        std::str::from_utf8(line).ok()
    );
}

#[test]
fn a_custom_entry_keeps_the_id_its_writer_chose_when_it_is_free_and_well_formed()
-> Result<(), StoreError> {
    let mut store = SessionStore::in_memory(Path::new("/w"));
    assert_eq!(
        store.append_custom_as("mark", None, Some("a1b2c3d4"))?,
        "a1b2c3d4"
    );
    assert_eq!(store.leaf_id(), Some("a1b2c3d4"));
    // Taken, malformed, too long: tau chooses instead.
    for proposed in ["a1b2c3d4", "no spaces", "", &"x".repeat(65)] {
        let id = store.append_custom_as("mark", None, Some(proposed))?;
        assert_ne!(id, proposed);
        assert_eq!(id.len(), 8);
    }
    assert_eq!(store.entries().len(), 5);
    Ok(())
}

#[test]
fn a_file_parsed_piece_by_piece_gives_the_entries_of_its_bytes() -> std::io::Result<()> {
    use std::io::Write;
    let mut lines = Vec::new();
    for i in 0..40 {
        let parent = if i == 0 {
            "null".to_owned()
        } else {
            format!("\"e{}\"", i - 1)
        };
        lines.push(format!(
            r#"{{"type":"message","id":"e{i}","parentId":{parent},"timestamp":"t","message":{{"role":"user","content":"{}","timestamp":{i}}}}}"#,
            "x".repeat(i * 3)
        ));
    }
    lines.push(String::new());
    lines.push(r#"{"type":"message","id":"torn","parentId":"#.to_owned());
    let text = lines.join("\n");
    let mut file = tempfile::tempfile()?;
    file.write_all(text.as_bytes())?;
    let expected = load::parse_run(text.as_bytes(), Path::new("mem"), 0);
    assert_eq!(expected.len(), 40);
    for chunk in [1, 7, 64, 1 << 20] {
        let streamed =
            load::parse_file_run(&file, 0, text.len() as u64, Path::new("mem"), 0, chunk);
        assert_eq!(streamed, expected, "chunk {chunk}");
    }
    let middle = text
        .find("\n{\"type\":\"message\",\"id\":\"e20\"")
        .map_or(0, |at| at + 1);
    let cuts = [0, middle as u64, text.len() as u64];
    assert_eq!(
        load::parse_file(&file, &cuts, Path::new("mem"), 41),
        expected
    );
    Ok(())
}
