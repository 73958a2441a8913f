//! The `write` tool (being written).
