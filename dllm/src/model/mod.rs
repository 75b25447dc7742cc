//! LLaDA- and Dream-compatible masked diffusion transformers, their configs, loading from
//! Hugging Face-format checkpoints and saving in the same layout.
//!
//! - [`llada`], [`dream`]: the two networks, each with its `config.json` struct beside it and
//!   weight names mirroring the checkpoints (candle-transformers' layout).
//! - [`config`]: [`ModelConfig`], either architecture's config, detected from `config.json`.
//! - [`tiny`]: named small sizes for the shipped tasks and benchmarks.
//! - [`layers`], [`attention`]: shared building blocks (graph-preserving via `drift_core::ops`).
//! - [`load`], [`save`]: checkpoint folders and the offline hub cache.
//! - [`lora`]: LoRA adapters on the block projections (d1's way of training LLaDA).
//! - [`wrapper`]: [`DiffusionLm`], the [`MaskPredictor`](drift_samplers::MaskPredictor) with
//!   Dream's logit shift inside.

pub mod attention;
pub mod config;
pub mod dream;
pub mod layers;
pub mod llada;
pub mod load;
pub mod lora;
pub mod save;
pub mod tiny;
mod weights;
pub mod wrapper;

pub use config::{Architecture, DreamConfig, LladaConfig, ModelConfig};
pub use load::CheckpointFiles;
pub use lora::LoraConfig;
pub use tiny::{TinySize, TinySpec, VocabSpec};
pub use wrapper::{shift_logits, DiffusionLm, LoadOptions, Network};
