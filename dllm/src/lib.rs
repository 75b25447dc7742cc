//! drift-dllm: masked diffusion language models, likelihood estimators and dLLM RL recipes.
//!
//! - [`model`]: LLaDA-compatible (arXiv 2502.09992) and Dream-compatible (arXiv 2508.15487;
//!   DiffuCoder, arXiv 2506.20639) bidirectional transformers that load Hugging Face
//!   checkpoints as they are, and [`model::DiffusionLm`], a
//!   [`MaskPredictor`](drift_samplers::MaskPredictor) over either.
//! - [`tokenizer`]: `tokenizer.json` via the tokenizers crate, and drift's character-level
//!   tokenizer for the shipped tasks.
//! - [`estimate`]: the likelihood estimators of dLLM RL (one-step, coupled, ELBO Monte Carlo,
//!   semi-deterministic quadrature).
//! - [`pretrain`]: the masked-diffusion pretraining / SFT objective (LLaDA).
//! - [`pretrain_run`]: a whole SFT pretraining run from scratch (padded batches, checkpoints,
//!   metrics, a saved Hugging Face-layout model): `drift pretrain dllm`.
//!
//! ```
//! use candle_core::{Device, Tensor};
//! use drift_core::rng::RngKey;
//! use drift_dllm::model::{DiffusionLm, LoadOptions, TinySize};
//! use drift_dllm::tokenizer::CharTokenizer;
//! use drift_samplers::MaskPredictor;
//!
//! let tok = CharTokenizer::ascii();
//! let cfg = TinySize::Nano.spec().llada(tok.vocab_spec());
//! let model = DiffusionLm::init(cfg, RngKey::new(0), &LoadOptions::frozen())?;
//! let ids = Tensor::new(vec![tok.encode("1+1=2")?], &Device::Cpu)?;
//! let logits = model.logits(&ids, None)?;
//! assert_eq!(logits.dims(), &[1, 5, tok.vocab_size()]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![deny(missing_docs)]

pub mod error;
pub mod estimate;
pub mod grpo;
pub mod model;
pub mod pretrain;
pub mod pretrain_run;
pub mod sas;
pub mod tokenizer;

pub use error::{DllmError, Result};
