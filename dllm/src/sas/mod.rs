//! SAS (self-aware scheduling, arXiv 2606.23567): a small order policy trained by GRPO to
//! choose which masked positions a frozen dLLM commits at each step (docs/sas.md holds the
//! design and why).

pub mod policy;
#[cfg(test)]
mod tests;

pub use policy::{OrderStep, RecordingPolicy, SasOrderPolicy, SasPolicyConfig, FEATURES};
