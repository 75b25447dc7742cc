//! The toy worlds shipped for demos and tests: each is a prompt generator with fixed train /
//! held-out splits by seed, the verifier's task type, and what a dLLM needs (prompt and
//! target text, [`split::TextItem`]); each item set round-trips through JSONL
//! ([`crate::jsonl`]) so users can bring their own.

pub mod code;
pub mod countdown;
pub mod rng;
pub mod split;
pub mod sudoku;

pub use split::{Split, TextItem};
