//! The `read` tool (being written).
