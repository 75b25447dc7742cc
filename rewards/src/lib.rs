//! drift-rewards: rewards, verifiers and the shipped toy worlds.
//!
//! - [`reward`]: the [`Reward`] trait (generic over the sample type), outcomes, failures;
//! - [`pool`]: parallel evaluation on a bounded thread pool with per-sample time-outs;
//! - [`combine`]: weighted sums of rewards.

pub mod code;
pub mod combine;
pub mod error;
pub mod image;
pub mod jsonl;
pub mod pool;
pub mod reward;
pub mod shapes;
pub mod verifiers;
pub mod worlds;

pub use error::RewardError;
pub use reward::{Details, Evaluation, Failure, FailureKind, Outcome, Reward};
