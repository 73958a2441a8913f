//! tau-mcp's integration tests, one test binary (one link instead of two in every test build).

mod config;
mod servers;
