//! The command line as clap reads it (the low args), one module per
//! subcommand; each turns into the plain settings its library takes, so no
//! library knows about flags.

pub mod compare;
pub mod mock;
pub mod report;
pub mod run;
#[cfg(feature = "bench")]
pub mod selftest;
pub mod worker;
