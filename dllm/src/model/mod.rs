//! LLaDA- and Dream-compatible masked diffusion transformers, their configs, loading from
//! Hugging Face-format checkpoints and saving in the same layout.
//!
//! - [`config`]: `config.json` of both architectures, architecture detection.
//! - [`tiny`]: named small sizes for the shipped tasks and benchmarks.
//! - [`layers`], [`attention`]: shared building blocks (graph-preserving via `drift_core::ops`).
//! - [`llada`], [`dream`]: the two networks, weight names mirroring the checkpoints.
//! - [`load`], [`save`]: checkpoint folders and the offline hub cache.
//! - [`wrapper`]: [`DiffusionLm`], the [`MaskPredictor`](drift_samplers::MaskPredictor) with
//!   Dream's logit shift inside.

pub mod attention;
pub mod config;
pub mod dream;
pub mod layers;
pub mod llada;
pub mod load;
pub mod save;
pub mod tiny;
mod weights;
pub mod wrapper;

pub use config::{Architecture, DreamConfig, LladaConfig, ModelConfig};
pub use load::CheckpointFiles;
pub use tiny::{TinySize, TinySpec, VocabSpec};
pub use wrapper::{shift_logits, DiffusionLm, LoadOptions, Network};
