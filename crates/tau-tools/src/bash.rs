//! The `bash` tool (being written).
