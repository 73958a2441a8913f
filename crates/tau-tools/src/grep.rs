//! The `grep` tool (being written).
