//! The shapes world: a text-to-image toy task for composition alignment (DESIGN.md §4).
//!
//! Prompts such as "3 red circles", "2 green triangles and 1 red square" or "a blue square
//! left of a green triangle" ([`grammar`], [`parse`], [`vocab`]); the prompt space with a fixed
//! train / held-out split ([`split`]) and JSONL prompt sets ([`jsonl`]); a renderer that draws a
//! correct 32×32 image of any prompt ([`render`], [`scene`]); and a GenEval-style verifier
//! (arXiv 2310.11513) that finds shapes by colour segmentation and connected components
//! ([`segment`], [`classify`]) and scores counts, colours and relations ([`verify`]).

#[cfg(test)]
mod acceptance;
pub mod classify;
pub mod error;
pub mod grammar;
pub mod jsonl;
pub mod noise;
pub mod parse;
pub mod render;
pub mod reward;
pub mod rng;
pub mod scene;
pub mod segment;
pub mod split;
pub mod verify;
pub mod vocab;

pub use error::ShapesError;
pub use grammar::{Clause, Colour, Object, Prompt, Relation, ShapeKind};
pub use parse::from_text;
pub use render::{layout, render_prompt, training_example, RenderOptions};
pub use reward::{ShapesReward, ShapesScore};
pub use scene::{Scene, SceneObject, IMAGE_SIZE};
pub use split::{all_prompts, split, PromptSplit, SplitConfig};
pub use verify::{verify, verify_with, Detection, Verdict, VerifyOptions};
pub use vocab::{tokenize, MAX_TOKENS, PAD_ID, VOCABULARY, VOCAB_SIZE};
