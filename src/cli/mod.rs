//! The subcommands of the `drift` binary.

pub mod config;
pub mod dllm;
pub mod flow;
