//! The subcommands of the `drift` binary.

pub mod config;
pub mod flow;
