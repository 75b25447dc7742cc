//! Advantages from several rewards per sample (docs/algorithms.md §1, last item).

use candle_core::{DType, Tensor};
use serde::{Deserialize, Serialize};

use super::compute::{group_advantages, Advantages};
use super::config::AdvantageConfig;
use crate::error::{CoreError, Result};
use crate::groups::Groups;

/// In which order several rewards are weighted and normalised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum CombineOrder {
    /// `r = Σ_j w_j r_j`, then group-normalise `r` (Flow-GRPO `multi_score`).
    #[default]
    SumThenNormalize,
    /// Group-normalise each reward without clipping, `A = Σ_j w_j A_j`, then clip
    /// (MixGRPO `advantage_aggr`, arXiv 2507.21802). A group is degenerate when it is
    /// degenerate for every reward.
    NormalizeThenSum,
}

/// Advantages from `rewards[N, R]` with `weights[R]` combined in `order`.
pub fn multi_reward_advantages(
    rewards: &Tensor,
    weights: &[f64],
    groups: &Groups,
    cfg: &AdvantageConfig,
    order: CombineOrder,
) -> Result<Advantages> {
    let (n, r) = rewards.dims2()?;
    if r != weights.len() || r == 0 {
        return Err(CoreError::Shape {
            name: "rewards",
            got: vec![n, r],
            expected: format!("[N, {}] (one column per weight, at least one)", weights.len()),
        });
    }
    let w = Tensor::new(weights, rewards.device())?.to_dtype(rewards.dtype())?;
    match order {
        CombineOrder::SumThenNormalize => {
            let combined = rewards.broadcast_mul(&w.unsqueeze(0)?)?.sum(1)?;
            group_advantages(&combined, groups, cfg)
        }
        CombineOrder::NormalizeThenSum => {
            let unclipped = AdvantageConfig { clip: None, ..*cfg };
            let mut values = rewards.narrow(1, 0, 1)?.squeeze(1)?.zeros_like()?;
            let mut degenerate = Tensor::ones(groups.num_groups(), DType::U8, rewards.device())?;
            let mut informative = values.zeros_like()?;
            for (j, &wj) in weights.iter().enumerate() {
                let column = rewards.narrow(1, j, 1)?.squeeze(1)?.contiguous()?;
                let a = group_advantages(&column, groups, &unclipped)?;
                values = (values + (a.values * wj)?)?;
                degenerate = degenerate.mul(&a.degenerate)?;
                informative = informative.maximum(&a.informative)?;
            }
            let values = match cfg.clip {
                Some(c) => values.clamp(-c, c)?,
                None => values,
            };
            Ok(Advantages { values, degenerate, informative })
        }
    }
}
