//! The wire types against what is written down: pi's RPC reference and the checked-in schema.
//! One test binary (each costs a link in every test build).

mod doc004_examples;
mod schema_file;
