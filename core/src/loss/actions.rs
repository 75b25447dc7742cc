//! From `[N, T]` token tensors to the actions a ratio kind defines.

use candle_core::Tensor;

use super::config::RatioKind;
use crate::error::{CoreError, Result};

/// The batch seen at the level of actions: `[N, T]` for token actions, `[N, 1]` for sequence
/// actions. Invalid positions hold exact zeros.
pub(crate) struct Actions {
    /// Log-prob of each action under the current policy (differentiable).
    pub lp: Tensor,
    /// `lp_new − lp_old` of each action (differentiable through `lp_new`).
    pub log_ratio: Tensor,
    /// Advantage of each action.
    pub adv: Tensor,
    /// Validity, 0/1 in the log-probs' dtype.
    pub mask: Tensor,
}

/// Zeroes `x` where `valid` is 0. Unlike a multiplication, this keeps a `NaN` or `±inf` at a
/// padded position out of the values *and* out of the gradient.
pub(crate) fn masked(x: &Tensor, valid: &Tensor) -> Result<Tensor> {
    Ok(valid.where_cond(x, &x.zeros_like()?)?)
}

/// Reduces a token tensor `[N, T]` to per-action values under `kind`.
pub(crate) fn reduce(kind: RatioKind, x: &Tensor, mask: &Tensor, valid: &Tensor) -> Result<Tensor> {
    let x = masked(x, valid)?;
    match kind {
        RatioKind::Token => Ok(x),
        RatioKind::SequenceMean => {
            let count = mask.sum_keepdim(1)?.clamp(1.0, f64::INFINITY)?;
            Ok(x.sum_keepdim(1)?.div(&count)?)
        }
        RatioKind::SequenceFixed { length } => Ok((x.sum_keepdim(1)? / length)?),
    }
}

impl Actions {
    /// Builds the actions of a batch. `adv` is `[N]` or `[N, T]`.
    pub fn new(
        kind: RatioKind,
        lp_new: &Tensor,
        lp_old: &Tensor,
        adv: &Tensor,
        mask: &Tensor,
    ) -> Result<Self> {
        let valid = mask.gt(0.0)?;
        let dtype = lp_new.dtype();
        let (n, t) = lp_new.dims2()?;
        let adv = adv.to_dtype(dtype)?;
        let adv_tokens = match adv.dims() {
            [a] if *a == n => adv.unsqueeze(1)?.broadcast_as((n, t))?.contiguous()?,
            [a, b] if *a == n && *b == t => adv,
            _ => {
                return Err(CoreError::Shape {
                    name: "advantages",
                    got: adv.dims().to_vec(),
                    expected: format!("[{n}] or [{n}, {t}]"),
                })
            }
        };
        let delta = lp_new.sub(&lp_old.detach())?;
        let lp = reduce(kind, lp_new, mask, &valid)?;
        let log_ratio = reduce(kind, &delta, mask, &valid)?;
        let (adv, mask) = match kind {
            RatioKind::Token => (masked(&adv_tokens, &valid)?, mask.clone()),
            _ => {
                let count = mask.sum_keepdim(1)?;
                let adv = masked(&adv_tokens, &valid)?
                    .sum_keepdim(1)?
                    .div(&count.clamp(1.0, f64::INFINITY)?)?;
                (adv, count.gt(0.0)?.to_dtype(dtype)?)
            }
        };
        Ok(Self { lp, log_ratio, adv, mask })
    }

    /// Boolean validity of the actions.
    pub fn valid(&self) -> Result<Tensor> {
        Ok(self.mask.gt(0.0)?)
    }
}
