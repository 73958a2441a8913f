//! The built-in tools the model can call: `read`, `bash`, `edit`, `write`, `grep`, `find`,
//! `ls`. Their output texts, notices and error strings are pi's, so a model tuned on pi
//! behaves the same; their descriptions are tau's own words.

pub mod bash;
pub mod edit;
mod env;
pub mod find;
pub mod grep;
pub mod ls;
pub mod paths;
pub mod read;
pub mod truncate;
pub mod write;

pub use env::ToolEnv;
