//! drift: RL fine-tuning of masked diffusion LMs and flow-matching image models.
pub use drift_core as core;
