//! The policy loss: ratio → surrogate → KL → aggregation, with its diagnostics.

use candle_core::{DType, Tensor};

use super::actions::{reduce, Actions};
use super::aggregate::{aggregate, masked_mean};
use super::config::{Aggregation, KlEstimator, PolicyLossConfig, Surrogate};
use super::diagnostics::{LossDiagnostics, STAT_NAMES};
use super::kl::kl_estimate;
use super::surrogate::{ppo_clip, self_normalized};
use crate::error::{expect_dims, CoreError, Result};

/// What the KL term compares the current policy with.
#[derive(Debug, Clone, Copy)]
pub enum Reference<'a> {
    /// Reference log-probs `lp_ref[N, T]`, for the k1/k2/k3 estimators.
    LogProbs(&'a Tensor),
    /// A per-action KL `[N, T]` computed by the caller, for
    /// [`KlEstimator::Precomputed`] (Flow-GRPO's Gaussian-mean KL).
    Kl(&'a Tensor),
}

/// The inputs of a policy loss, all `[N, T]` but the advantages.
#[derive(Debug, Clone, Copy)]
pub struct PolicyInputs<'a> {
    /// Log-probs of the actions under the current policy; the loss is differentiable in it.
    pub lp_new: &'a Tensor,
    /// Log-probs under the policy that produced the rollout (treated as constants).
    pub lp_old: &'a Tensor,
    /// Validity of each action, 0/1.
    pub mask: &'a Tensor,
    /// Advantages, `[N]` (one per sample) or `[N, T]` (one per action).
    pub advantages: &'a Tensor,
    /// Reference for the KL term; required when the config has one.
    pub reference: Option<Reference<'a>>,
}

/// A computed policy loss.
#[must_use]
#[derive(Debug, Clone)]
pub struct PolicyLoss {
    /// The scalar to minimise, `policy + β·kl`, differentiable w.r.t. `lp_new`.
    pub loss: Tensor,
    /// The surrogate term alone (scalar).
    pub policy: Tensor,
    /// The aggregated KL before `β` (scalar; 0 without a KL term).
    pub kl: Tensor,
    /// The diagnostics as one small detached f32 tensor, in the order of [`STAT_NAMES`]: sum
    /// these over micro-batches on the device and read them once per step.
    pub stats: Tensor,
}

impl PolicyLoss {
    /// The diagnostics as plain numbers (one host read).
    pub fn diagnostics(&self) -> Result<LossDiagnostics> {
        LossDiagnostics::from_stats(&self.stats.to_vec1::<f32>()?)
    }
}

/// Computes the policy loss of docs/algorithms.md §2 for `cfg`.
///
/// Actions come from `cfg.ratio` (tokens, or whole sequences for GSPO/ESPO/GDPO), the
/// surrogate is PPO clip or StableDRL's self-normalised weighting, the KL is `β·agg(KL)` with
/// the configured estimator, and the aggregation is applied to the surrogate and, for linear
/// aggregations, identically to the KL (`Balanced` aggregates the KL as a token mean, since a
/// zero-advantage sequence still has a KL). Positions where `mask` is 0 never reach the loss or
/// its gradient, even if their log-probs are `NaN` or `−inf`.
pub fn policy_loss(cfg: &PolicyLossConfig, x: &PolicyInputs<'_>) -> Result<PolicyLoss> {
    cfg.validate()?;
    let (n, t) = x.lp_new.dims2().map_err(|_| CoreError::Shape {
        name: "lp_new",
        got: x.lp_new.dims().to_vec(),
        expected: "[N, T]".into(),
    })?;
    expect_dims(x.lp_old, "lp_old", &[n, t])?;
    expect_dims(x.mask, "mask", &[n, t])?;
    let dtype = x.lp_new.dtype();
    let mask = x.mask.to_dtype(dtype)?;
    let valid = mask.gt(0.0)?;
    let a = Actions::new(cfg.ratio, x.lp_new, &x.lp_old.to_dtype(dtype)?, x.advantages, &mask)?;

    let terms = match cfg.surrogate {
        Surrogate::PpoClip { eps_low, eps_high } => ppo_clip(&a, eps_low, eps_high)?,
        Surrogate::SelfNormalized { weight_clip } => self_normalized(&a, weight_clip)?,
    };
    let policy = match cfg.surrogate {
        Surrogate::SelfNormalized { .. } => terms.loss.sum_all()?,
        Surrogate::PpoClip { .. } => aggregate(cfg.aggregation, &terms.loss, &a.mask, &a.adv)?,
    };

    let (kl, beta) = match cfg.kl {
        None => (policy.zeros_like()?, 0.0),
        Some(penalty) => {
            let per_action = match (penalty.estimator, x.reference) {
                (KlEstimator::Precomputed, Some(Reference::Kl(kl))) => {
                    expect_dims(kl, "reference KL", &[n, t])?;
                    reduce(cfg.ratio, &kl.to_dtype(dtype)?, &mask, &valid)?
                }
                (est, Some(Reference::LogProbs(lp_ref))) if est != KlEstimator::Precomputed => {
                    expect_dims(lp_ref, "lp_ref", &[n, t])?;
                    let lp_ref = reduce(cfg.ratio, &lp_ref.to_dtype(dtype)?, &mask, &valid)?;
                    kl_estimate(est, &a.lp, &lp_ref)?
                }
                (est, r) => {
                    return Err(CoreError::Mismatch(format!(
                        "the KL estimator {est:?} needs {}, got {}",
                        if est == KlEstimator::Precomputed {
                            "Reference::Kl (a per-action KL)"
                        } else {
                            "Reference::LogProbs (reference log-probs)"
                        },
                        match r {
                            None => "no reference",
                            Some(Reference::Kl(_)) => "Reference::Kl",
                            Some(Reference::LogProbs(_)) => "Reference::LogProbs",
                        }
                    )))
                }
            };
            let per_action = per_action.mul(&a.mask)?;
            let agg = match cfg.aggregation {
                Aggregation::Balanced => Aggregation::TokenMean,
                other => other,
            };
            (aggregate(agg, &per_action, &a.mask, &a.adv)?, penalty.beta)
        }
    };
    let loss = (&policy + (&kl * beta)?)?;
    let stats = stats(&a, &terms.clipped_low, &terms.clipped_high, &policy, &kl, &loss)?;
    Ok(PolicyLoss { loss, policy, kl, stats })
}

/// The detached diagnostics vector, in the order of [`STAT_NAMES`].
fn stats(
    a: &Actions,
    low: &Tensor,
    high: &Tensor,
    policy: &Tensor,
    kl: &Tensor,
    loss: &Tensor,
) -> Result<Tensor> {
    let m = &a.mask;
    let d = a.log_ratio.detach();
    let ratio = d.exp()?;
    let valid = a.valid()?;
    let big = ratio.ones_like()?.affine(0.0, f64::MAX)?;
    let adv_mean = masked_mean(&a.adv, m)?;
    let adv_var = masked_mean(&a.adv.broadcast_sub(&adv_mean)?.sqr()?, m)?;
    let values = [
        masked_mean(low, m)?,
        masked_mean(high, m)?,
        masked_mean(&low.add(high)?, m)?,
        (masked_mean(&d.sqr()?, m)? * 0.5)?,
        masked_mean(&ratio, m)?,
        valid.where_cond(&ratio, &big)?.min_all()?,
        valid.where_cond(&ratio, &big.neg()?)?.max_all()?,
        adv_mean,
        adv_var.sqrt()?,
        policy.detach(),
        kl.detach(),
        loss.detach(),
        m.sum_all()?,
    ];
    debug_assert_eq!(values.len(), STAT_NAMES.len());
    let values: Vec<Tensor> =
        values.iter().map(|v| v.to_dtype(DType::F32)).collect::<candle_core::Result<_>>()?;
    Ok(Tensor::stack(&values, 0)?)
}
