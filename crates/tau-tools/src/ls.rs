//! The `ls` tool (being written).
