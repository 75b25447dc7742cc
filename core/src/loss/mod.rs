//! Policy losses over actions: ratios, surrogates, KL estimators, aggregations, diagnostics
//! (docs/algorithms.md §2).
//!
//! The loss only sees `[N, T]` tensors of log-probs, advantages and masks; it never knows which
//! model family produced them.

mod actions;
mod aggregate;
mod config;
mod diagnostics;
mod kl;
mod policy;
mod surrogate;
#[cfg(test)]
mod tests;

pub use aggregate::aggregate;
pub use config::{
    Aggregation, KlEstimator, KlPenalty, PolicyLossConfig, RatioKind, Surrogate, PRESETS,
};
pub use diagnostics::{LossDiagnostics, STAT_NAMES};
pub use kl::{gaussian_mean_kl, kl_estimate};
pub use policy::{policy_loss, PolicyInputs, PolicyLoss, Reference};
