//! Group advantages: baselines, scales, clipping, degenerate groups, several rewards
//! (docs/algorithms.md §1).

mod compute;
mod config;
mod multi;
#[cfg(test)]
mod tests;

pub use compute::{broadcast_to_actions, group_advantages, AdvantageStats, Advantages};
pub use config::{AdvantageConfig, Baseline, Scale, Singleton, StdKind};
pub use multi::{multi_reward_advantages, CombineOrder};
