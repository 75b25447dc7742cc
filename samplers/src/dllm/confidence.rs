//! Per-position statistics of the model's distribution and the confidence of each rule.

use candle_core::{DType, Tensor, D};

use super::config::PositionRule;
use super::error::Result;

/// Statistics of `softmax(logits)` at each position, each `[B, M]` f32.
#[derive(Debug, Clone)]
pub struct TokenStats {
    /// `log p(x0)`, the proposed token's log-probability.
    pub log_p_x0: Tensor,
    /// Top-1 probability `p1`.
    pub top1: Tensor,
    /// Margin `p1 − p2` (0 when the top probability is tied).
    pub margin: Tensor,
    /// Negative entropy `Σ p log p` (terms with `p = 0` count 0); larger = more confident.
    pub neg_entropy: Tensor,
}

/// The statistics of `logits[B, M, V]` and of the proposal `x0[B, M]` (u32).
pub fn token_stats(logits: &Tensor, x0: &Tensor) -> Result<TokenStats> {
    let log_p = drift_core::ops::log_softmax_last_dim(&logits.to_dtype(DType::F32)?)?;
    let p = log_p.exp()?;
    let log_p_x0 = log_p.gather(&x0.unsqueeze(D::Minus1)?, D::Minus1)?.squeeze(D::Minus1)?;
    let top1 = p.max_keepdim(D::Minus1)?;
    let is_top = p.broadcast_eq(&top1)?;
    let ties = is_top.to_dtype(DType::F32)?.sum(D::Minus1)?;
    let p2 = is_top.where_cond(&p.zeros_like()?, &p)?.max(D::Minus1)?;
    let top1 = top1.squeeze(D::Minus1)?;
    let margin = ties.gt(1.0)?.where_cond(&top1.zeros_like()?, &(&top1 - p2)?)?;
    let plogp = p.gt(0.0)?.where_cond(&(&p * &log_p)?, &p.zeros_like()?)?;
    Ok(TokenStats { log_p_x0, top1, margin, neg_entropy: plogp.sum(D::Minus1)? })
}

/// The confidence `[B, M]` of a quota or threshold rule: `p(x0)` (low-confidence and
/// threshold, LLaDA / Fast-dLLM), `random_u` (LLaDA random), `p1 − p2` (Dream margin) or
/// `Σ p log p` (Dream entropy). `random_u[B, M]` is only read by the random rule; origin has no
/// confidence and returns `p(x0)`.
pub fn rule_confidence(
    rule: &PositionRule,
    stats: &TokenStats,
    random_u: &Tensor,
) -> Result<Tensor> {
    Ok(match rule {
        PositionRule::LowConfidence
        | PositionRule::Threshold { .. }
        | PositionRule::DreamThreshold { .. }
        | PositionRule::Origin { .. } => stats.log_p_x0.exp()?,
        PositionRule::Random => random_u.to_dtype(DType::F32)?,
        PositionRule::Margin => stats.margin.clone(),
        PositionRule::Entropy => stats.neg_entropy.clone(),
    })
}
