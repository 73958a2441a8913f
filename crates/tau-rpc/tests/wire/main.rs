//! The RPC front-end from the outside: pi's documented records through tau's wire types, and
//! arbitrary input through framing, parsing and dispatch. One test binary (each costs a link
//! in every test build).

mod line_props;
mod roundtrip;
