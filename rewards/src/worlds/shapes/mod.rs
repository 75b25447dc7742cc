//! The shapes world: a text-to-image toy task for composition alignment (docs/architecture.md §4).
//!
//! Prompts in GenEval's six categories — "a circle", "a red circle", "3 circles", "a circle
//! and a square", "a red circle and a blue square", "a circle left of a square" ([`grammar`],
//! [`parse`], [`vocab`]); the prompt space with a fixed per-category train / held-out split
//! and category-balanced draws ([`split`](mod@split)) and JSONL prompt sets ([`jsonl`]); a renderer that
//! draws a correct 32×32 image of any prompt on a 2×2 cell layout ([`render`], [`scene`]); and
//! a GenEval-style verifier
//! (arXiv 2310.11513) that finds shapes by colour segmentation and connected components
//! ([`segment`], [`classify`]) and scores counts, colours and relations ([`verify`](mod@verify)), under GenEval's evaluation rule or
//! Flow-GRPO's exact-count training score ([`exact`]).

#[cfg(test)]
mod acceptance;
pub mod classify;
pub mod error;
pub mod exact;
pub mod grammar;
pub mod jsonl;
pub mod noise;
pub mod parse;
pub mod render;
pub mod reward;
pub mod scene;
pub mod segment;
pub mod split;
pub mod verify;
pub mod vocab;

use drift_core::rng::SplitMix64;

pub use error::ShapesError;
pub use exact::exact_score;
pub use grammar::{Category, Clause, Colour, Object, Prompt, Relation, ShapeKind, Spec};
pub use parse::from_text;
pub use render::{
    layout, render_prompt, training_example, training_example_grouped, training_example_weighted,
    RenderOptions,
};
pub use reward::{ShapesReward, ShapesScore};
pub use scene::{Scene, SceneObject, IMAGE_SIZE};
pub use split::{
    all_prompts, balanced_prompt, by_category, category_prompts, eval_list, split, weighted_prompt,
    PromptSplit, SplitConfig,
};
pub use verify::{verify, verify_with, Detection, Verdict, VerifyOptions};
pub use vocab::{tokenize, MAX_TOKENS, PAD_ID, VOCABULARY, VOCAB_SIZE};

/// The salt of the shapes world's key fold: the bytes of "SHAPES".
const SALT: u64 = 0x5348_4150_4553;

/// The shapes world's seeded stream for the key `words` (a seed and stream ids such as a prompt
/// index): [`SplitMix64::keyed_salted`] under the world's salt. Every layout, colour jitter,
/// split and noise draw of the world comes from one, so a prompt set or a rendered image is
/// reproducible from its seed alone.
pub(crate) fn keyed_rng(words: &[u64]) -> SplitMix64 {
    SplitMix64::keyed_salted(SALT, words)
}
