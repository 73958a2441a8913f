//! `docs/protocol.schema.json` is the generated schema, byte for byte: a change to a wire
//! type that is not also written to the file fails here. Regenerate with
//! `cargo run -p tau -- schema > docs/protocol.schema.json`.

#[test]
fn the_checked_in_schema_is_the_generated_one() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/protocol.schema.json"
    );
    let on_disk = std::fs::read_to_string(path).unwrap_or_default();
    let generated = tau_protocol::schema::protocol_schema_text();
    assert!(
        on_disk == generated,
        "docs/protocol.schema.json differs from the types; regenerate it with \
         `cargo run -p tau -- schema > docs/protocol.schema.json`"
    );
}
