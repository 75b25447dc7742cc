//! Per-action surrogates: PPO clip and StableDRL's self-normalised weighting.

use candle_core::Tensor;

use super::actions::{masked, Actions};
use crate::error::Result;

/// A surrogate's per-action loss and which actions it clipped.
pub(crate) struct SurrogateTerms {
    /// `ℓ[N, T']`, zero at invalid actions.
    pub loss: Tensor,
    /// 1 where the lower bound was active (`ρ < 1−ε_low` with `A < 0`).
    pub clipped_low: Tensor,
    /// 1 where the upper bound was active (`ρ > 1+ε_high` with `A > 0`).
    pub clipped_high: Tensor,
}

/// PPO clip, `ℓ = max(−A ρ, −A clip(ρ, 1−ε_low, 1+ε_high))` (arXiv 1707.06347).
///
/// Written as a select so the gradient is exact: for `A > 0` the max is the constant
/// `−A(1+ε_high)` exactly when `ρ > 1+ε_high`, for `A < 0` it is `−A(1−ε_low)` exactly when
/// `ρ < 1−ε_low`, and `−A ρ` otherwise.
pub(crate) fn ppo_clip(a: &Actions, eps_low: f64, eps_high: f64) -> Result<SurrogateTerms> {
    let valid = a.valid()?;
    let ratio = a.log_ratio.exp()?;
    let ratio_d = ratio.detach();
    let low = ratio_d.lt(1.0 - eps_low)?.mul(&a.adv.lt(0.0)?)?.mul(&valid)?;
    let high = ratio_d.gt(1.0 + eps_high)?.mul(&a.adv.gt(0.0)?)?.mul(&valid)?;
    let bound = high.where_cond(
        &ratio_d.ones_like()?.affine(1.0, eps_high)?,
        &ratio_d.ones_like()?.affine(1.0, -eps_low)?,
    )?;
    let clipped = low.maximum(&high)?;
    let effective = clipped.where_cond(&bound, &ratio)?;
    let loss = masked(&a.adv.mul(&effective)?.neg()?, &valid)?;
    let dtype = a.lp.dtype();
    Ok(SurrogateTerms {
        loss,
        clipped_low: low.to_dtype(dtype)?,
        clipped_high: high.to_dtype(dtype)?,
    })
}

/// StableDRL's self-normalised surrogate: `log w = min(sg(Δlp), ln c)` whatever the sign of
/// `A`, `w = softmax(log w)` over every valid action of the batch, `ℓ = −w A lp`. Its sum is
/// the loss. Nothing is clipped in the PPO sense, so both clip flags are 0.
pub(crate) fn self_normalized(a: &Actions, weight_clip: f64) -> Result<SurrogateTerms> {
    let valid = a.valid()?;
    let log_w = a.log_ratio.detach().minimum(weight_clip.ln())?;
    let neg_inf = log_w.ones_like()?.affine(0.0, f64::NEG_INFINITY)?;
    let log_w = valid.where_cond(&log_w, &neg_inf)?;
    let max = log_w.flatten_all()?.max(0)?;
    let w = masked(&log_w.broadcast_sub(&max)?.exp()?, &valid)?;
    let w = w.broadcast_div(&w.sum_all()?.clamp(f64::MIN_POSITIVE, f64::INFINITY)?)?;
    let loss = masked(&w.mul(&a.adv)?.mul(&a.lp)?.neg()?, &valid)?;
    let zeros = a.lp.zeros_like()?;
    Ok(SurrogateTerms { loss, clipped_low: zeros.clone(), clipped_high: zeros })
}
