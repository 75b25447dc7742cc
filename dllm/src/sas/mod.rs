//! SAS (self-aware scheduling, arXiv 2606.23567): a small order policy trained by GRPO to
//! choose which masked positions a frozen dLLM commits at each step (docs/sas.md holds the
//! design and why).

pub mod config;
pub mod eval;
pub mod policy;
#[cfg(test)]
mod tests;
pub mod trainer;

pub use config::SasConfig;
pub use eval::{evaluate_order, OrderEval};
pub use policy::{Greedy, OrderStep, RecordingPolicy, SasOrderPolicy, SasPolicyConfig, FEATURES};
pub use trainer::{train_sas, SasReport};
