//! The toy worlds shipped for demos and tests, one folder each holding the world's generator
//! (fixed train / held-out splits by seed), its verifier or reward, and its JSONL so users can
//! bring their own items:
//! - [`shapes`]: GenEval-style text-to-image composition (prompts → 32×32 images);
//! - [`code`], [`countdown`], [`sudoku`]: the text worlds, whose items give a dLLM its prompt
//!   and target text ([`split::TextItem`]) and split by the shared content rule of [`split`].

pub mod code;
pub mod countdown;
pub mod shapes;
pub mod split;
pub mod sudoku;

pub use split::{Split, TextItem};
