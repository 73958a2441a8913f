//! Provider clients (filled in next).
