//! dLLM decoding: semi-autoregressive blocks, token proposals, position rules, threshold parallel decoding, order policies and recorded trajectories (docs/algorithms.md §5).
//!
//! Entry points: [`decode`] and [`decode_with_policy`] turn a [`DecodeBatch`] of prompts into a
//! [`Trajectory`] under a [`DecodeConfig`]. The building blocks they compose are public too:
//! LLaDA's step quota, token proposals, per-position confidences, position selection and the
//! [`OrderPolicy`] hook.

mod cache;
mod confidence;
mod config;
mod decode;
mod error;
mod order;
mod proposal;
mod quota;
mod select;
mod trajectory;

#[cfg(test)]
mod tests;

pub use cache::{CacheOp, KvCache, KvCacheMode};
pub use confidence::{rule_confidence, token_stats, TokenStats};
pub use config::{DecodeConfig, PositionRule, ProposalConfig, TransferSchedule};
pub use decode::{decode, decode_with_policy, guide, DecodeBatch, Padding};
pub use error::{DecodeError, Result};
pub use order::{
    plackett_luce_log_prob, LinearOrderPolicy, OrderDecision, OrderFeatures, OrderInput,
    OrderPolicy,
};
pub use proposal::{cumsum_last, filter_top_k, filter_top_p, propose};
pub use quota::{dream_transfer_count, num_transfer_tokens};
pub use select::{
    capped_threshold_mask, gumbel_perturb, mask_ineligible, origin_mask, origin_probability,
    row_counts, threshold_mask, top_n_mask,
};
pub use trajectory::{Trajectory, NEVER_COMMITTED, PROMPT_STEP};
