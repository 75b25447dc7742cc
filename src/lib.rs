//! drift: RL fine-tuning of masked diffusion LMs and flow-matching image models on candle.
//!
//! This facade re-exports the workspace's crates, and candle itself, so that a notebook cell or
//! a downstream crate can name everything through `drift::…`.

pub use candle_core as candle;
pub use candle_nn;
pub use drift_core as core;
pub use drift_dllm as dllm;
pub use drift_flow as flow;
pub use drift_rewards as rewards;
pub use drift_samplers as samplers;
pub mod notebook;
