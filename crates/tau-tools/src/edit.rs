//! The `edit` tool (being written).
