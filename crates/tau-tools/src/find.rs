//! The `find` tool (being written).
