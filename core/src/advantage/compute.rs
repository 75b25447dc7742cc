//! Grouped advantages from a batch of rewards (docs/algorithms.md §1).

use candle_core::{DType, Tensor};

use super::config::{AdvantageConfig, Baseline, Scale, Singleton, StdKind};
use crate::error::{CoreError, Result};
use crate::groups::Groups;

/// Advantages of a batch and what a trainer needs to know about them.
///
/// Everything stays on the rewards' device; [`Advantages::stats`] reads the few summary numbers
/// to the host in one transfer.
#[derive(Debug, Clone)]
pub struct Advantages {
    /// `A_i`, `[N]`, in the rewards' dtype.
    pub values: Tensor,
    /// `1` for a degenerate group (all rewards equal), `[K]` u8.
    pub degenerate: Tensor,
    /// `1` for a sample that carries signal: its group is not degenerate and, under a
    /// leave-one-out baseline, not a singleton. `[N]`, rewards' dtype. Multiply a loss mask by
    /// it to drop zero-advantage samples (DAPO dynamic sampling) instead of keeping them.
    pub informative: Tensor,
}

/// Host-side summary of an [`Advantages`], for logging (`adv/mean`, `adv/std`; the trainers
/// log the degenerate fraction as `groups/degenerate_frac`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdvantageStats {
    /// Mean advantage over the batch.
    pub mean: f64,
    /// Population std of the advantages over the batch.
    pub std: f64,
    /// Fraction of (non-empty) groups that are degenerate.
    pub degenerate_frac: f64,
    /// Fraction of samples that carry signal (see [`Advantages::informative`]).
    pub informative_frac: f64,
}

impl Advantages {
    /// Per-action advantages `[N, T]`: `A_i` broadcast over the actions of sample `i`, zero
    /// where `mask` is zero.
    pub fn per_action(&self, mask: &Tensor) -> Result<Tensor> {
        broadcast_to_actions(&self.values, mask)
    }

    /// The degenerate flag of each group, read to the host.
    pub fn degenerate_groups(&self) -> Result<Vec<bool>> {
        Ok(self.degenerate.to_vec1::<u8>()?.into_iter().map(|d| d != 0).collect())
    }

    /// Summary statistics, with one host read.
    pub fn stats(&self, groups: &Groups) -> Result<AdvantageStats> {
        let a = self.values.to_dtype(DType::F64)?;
        let n = a.dims1()?.max(1) as f64;
        let mean = a.mean_all()?;
        let var = a.broadcast_sub(&mean)?.sqr()?.mean_all()?;
        let degenerate = self.degenerate.to_dtype(DType::F64)?.sum_all()?;
        let informative = self.informative.to_dtype(DType::F64)?.sum_all()?;
        let v = Tensor::stack(&[mean, var, degenerate, informative], 0)?.to_vec1::<f64>()?;
        let non_empty = groups.sizes().iter().filter(|&&s| s > 0).count().max(1) as f64;
        Ok(AdvantageStats {
            mean: v[0],
            std: v[1].max(0.0).sqrt(),
            degenerate_frac: v[2] / non_empty,
            informative_frac: v[3] / n,
        })
    }
}

/// `A[N]` broadcast to `[N, T]` and multiplied by `mask[N, T]`.
pub fn broadcast_to_actions(per_sample: &Tensor, mask: &Tensor) -> Result<Tensor> {
    let (n, _t) = mask.dims2()?;
    if per_sample.dims() != [n] {
        return Err(CoreError::Shape {
            name: "advantages",
            got: per_sample.dims().to_vec(),
            expected: format!("[{n}] (one per row of the mask)"),
        });
    }
    let a = per_sample.to_dtype(mask.dtype())?.unsqueeze(1)?;
    Ok(a.broadcast_mul(mask)?)
}

/// Group-relative advantages of `rewards[N]` under `groups`.
///
/// `A_i = clamp((r_i − b_i)/s_i, −clip, clip)` with `b` the baseline and `s` the scale of
/// `cfg` (docs/algorithms.md §1; GRPO arXiv 2402.03300, RLOO arXiv 2402.14740, Dr. GRPO
/// arXiv 2503.20783, Flow-GRPO arXiv 2505.05470). Leave-one-out is computed in the stable form
/// `r_i − b_i = n_k/(n_k−1)·(r_i − μ_k)`. A group whose population std is at most
/// `cfg.degenerate_tol` gets advantage exactly 0 and is flagged.
///
/// Tensor ops only (`index_add`/`index_select`) on the rewards' device; ragged groups cost
/// nothing extra.
pub fn group_advantages(
    rewards: &Tensor,
    groups: &Groups,
    cfg: &AdvantageConfig,
) -> Result<Advantages> {
    cfg.validate()?;
    if !rewards.dtype().is_float() {
        return Err(CoreError::Mismatch(format!(
            "rewards must be a float tensor, got {:?}",
            rewards.dtype()
        )));
    }
    if rewards.dims() != [groups.len()] {
        return Err(CoreError::Shape {
            name: "rewards",
            got: rewards.dims().to_vec(),
            expected: format!("[{}] (one per sample of the groups)", groups.len()),
        });
    }
    let (dtype, dev) = (rewards.dtype(), rewards.device());
    let n_k = groups.size_tensor(dtype, dev)?;
    let n_i = groups.broadcast(&n_k)?;
    let mu_i = groups.broadcast(&groups.mean(rewards)?)?;
    let centred = rewards.sub(&mu_i)?;
    let sq_k = groups.sum(&centred.sqr()?)?;
    let pop_std_k = sq_k.div(&n_k.clamp(1.0, f64::INFINITY)?)?.sqrt()?;
    // Empty groups are not degenerate: they hold no sample to drop.
    let degenerate_k = pop_std_k.le(cfg.degenerate_tol)?.mul(&n_k.gt(0.0)?)?;

    let deviation = match cfg.baseline {
        Baseline::Mean => centred.clone(),
        Baseline::LeaveOneOut => {
            if cfg.singleton == Singleton::Error {
                if let Some(k) = groups.sizes().iter().position(|&s| s == 1) {
                    return Err(CoreError::SingletonGroup { group: k });
                }
            }
            // n/(n−1) with singletons mapped to 0: their deviation is then exactly 0.
            let factor = n_i.gt(1.0)?.where_cond(
                &n_i.div(&(&n_i - 1.0)?.clamp(1.0, f64::INFINITY)?)?,
                &n_i.zeros_like()?,
            )?;
            centred.mul(&factor)?
        }
    };

    let ddof = match cfg.std {
        StdKind::Population => 0.0,
        StdKind::Unbiased => 1.0,
    };
    let scaled = match cfg.scale {
        Scale::None => deviation,
        Scale::GroupStd => {
            let std_k = sq_k.div(&(&n_k - ddof)?.clamp(1.0, f64::INFINITY)?)?.sqrt()?;
            let s_i = groups.broadcast(&(std_k + cfg.eps)?)?;
            deviation.div(&s_i)?
        }
        Scale::BatchStd => {
            let n = rewards.dims1()? as f64;
            let all_centred = rewards.broadcast_sub(&rewards.mean_all()?)?;
            let var = (all_centred.sqr()?.sum_all()? / (n - ddof).max(1.0))?;
            deviation.broadcast_div(&(var.sqrt()? + cfg.eps)?)?
        }
    };
    let clipped = match cfg.clip {
        Some(c) => scaled.clamp(-c, c)?,
        None => scaled,
    };

    let degenerate_i = groups.broadcast(&degenerate_k)?.to_dtype(dtype)?;
    let mut informative = (1.0 - degenerate_i)?;
    if cfg.baseline == Baseline::LeaveOneOut {
        informative = informative.mul(&n_i.gt(1.0)?.to_dtype(dtype)?)?;
    }
    let values = clipped.mul(&informative)?;
    Ok(Advantages { values, degenerate: degenerate_k, informative })
}
