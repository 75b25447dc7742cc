//! The diagnostics every trainer logs (docs/algorithms.md §2, last paragraph), under the stable
//! metric names of docs/architecture.md §5.

use crate::error::{CoreError, Result};

/// Metric names of the entries of [`crate::loss::PolicyLoss::stats`], in order.
pub const STAT_NAMES: [&str; 13] = [
    "clip/frac_low",
    "clip/frac_high",
    "clip/frac",
    "kl/approx",
    "ratio/mean",
    "ratio/min",
    "ratio/max",
    "adv/mean",
    "adv/std",
    "loss/policy",
    "loss/kl",
    "loss/total",
    "actions/count",
];

/// Plain-number diagnostics of one policy-loss evaluation. Means are over valid actions.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LossDiagnostics {
    /// Fraction of actions where the lower clip was active (`ρ < 1−ε_low`, `A < 0`).
    pub clip_frac_low: f64,
    /// Fraction of actions where the upper clip was active (`ρ > 1+ε_high`, `A > 0`).
    pub clip_frac_high: f64,
    /// Sum of the two.
    pub clip_frac: f64,
    /// `½ mean(Δlp²)`, the approximate KL between the old and the current policy.
    pub approx_kl: f64,
    /// Mean importance ratio.
    pub ratio_mean: f64,
    /// Smallest importance ratio.
    pub ratio_min: f64,
    /// Largest importance ratio.
    pub ratio_max: f64,
    /// Mean advantage over valid actions.
    pub adv_mean: f64,
    /// Std of the advantage over valid actions.
    pub adv_std: f64,
    /// The surrogate term.
    pub policy_loss: f64,
    /// The KL term before `β`.
    pub kl_loss: f64,
    /// The total loss.
    pub total_loss: f64,
    /// Number of valid actions.
    pub actions: f64,
}

impl LossDiagnostics {
    /// Combines per-micro-batch stats rows (each in [`STAT_NAMES`] order, as
    /// `PolicyLoss::stats` returns them) into one: means weighted by `weights` (each
    /// micro-batch's share of the samples), except the ratio extremes (min / max) and the
    /// action count (sum).
    pub fn combine(rows: &[Vec<f32>], weights: &[f64]) -> Result<Self> {
        let mut out = vec![0f32; STAT_NAMES.len()];
        for (k, name) in STAT_NAMES.iter().enumerate() {
            let col = rows.iter().map(|r| r[k]);
            out[k] = match *name {
                "ratio/min" => col.fold(f32::INFINITY, f32::min),
                "ratio/max" => col.fold(f32::NEG_INFINITY, f32::max),
                "actions/count" => col.sum(),
                _ => col.zip(weights).map(|(v, &w)| v * w as f32).sum(),
            };
        }
        Self::from_stats(&out)
    }

    /// From the stats vector of a [`crate::loss::PolicyLoss`].
    pub fn from_stats(v: &[f32]) -> Result<Self> {
        if v.len() != STAT_NAMES.len() {
            return Err(CoreError::Mismatch(format!(
                "a loss stats vector has {} entries, got {}",
                STAT_NAMES.len(),
                v.len()
            )));
        }
        let g = |i: usize| f64::from(v[i]);
        Ok(Self {
            clip_frac_low: g(0),
            clip_frac_high: g(1),
            clip_frac: g(2),
            approx_kl: g(3),
            ratio_mean: g(4),
            ratio_min: g(5),
            ratio_max: g(6),
            adv_mean: g(7),
            adv_std: g(8),
            policy_loss: g(9),
            kl_loss: g(10),
            total_loss: g(11),
            actions: g(12),
        })
    }

    /// `(metric name, value)` pairs for a metrics logger.
    pub fn pairs(&self) -> [(&'static str, f64); 13] {
        let v = [
            self.clip_frac_low,
            self.clip_frac_high,
            self.clip_frac,
            self.approx_kl,
            self.ratio_mean,
            self.ratio_min,
            self.ratio_max,
            self.adv_mean,
            self.adv_std,
            self.policy_loss,
            self.kl_loss,
            self.total_loss,
            self.actions,
        ];
        std::array::from_fn(|i| (STAT_NAMES[i], v[i]))
    }
}
