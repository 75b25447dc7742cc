//! Configuration of group advantages (docs/algorithms.md §1).

use serde::{Deserialize, Serialize};

use crate::error::{CoreError, Result};

/// What a sample's reward is compared with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Baseline {
    /// The group mean, `b_i = μ_{g_i}` (GRPO, arXiv 2402.03300).
    #[default]
    Mean,
    /// The mean of the *other* samples of the group, `b_i = (n_k μ_k − r_i)/(n_k − 1)`
    /// (RLOO, arXiv 2402.14740; DiffuCoder, arXiv 2506.20639; ESPO, arXiv 2512.03759).
    LeaveOneOut,
}

/// What the centred reward is divided by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Scale {
    /// No division (Dr. GRPO arXiv 2503.20783, DiffuCoder, ESPO, GDPO, StableDRL: dividing by a
    /// noisy std amplifies ELBO noise).
    None,
    /// The standard deviation of the sample's group, plus `eps` (GRPO).
    #[default]
    GroupStd,
    /// The standard deviation of all rewards in the batch, plus `eps` (Flow-GRPO `global_std`,
    /// arXiv 2505.05470; REINFORCE++, arXiv 2501.03262).
    BatchStd,
}

/// Which standard deviation `GroupStd` and `BatchStd` use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum StdKind {
    /// `√(Σ(r−μ)²/n)`, numpy's default (Flow-GRPO).
    Population,
    /// `√(Σ(r−μ)²/(n−1))`, torch's default (TRL GRPO, BranchGRPO). A single-sample group has
    /// std 0.
    #[default]
    Unbiased,
}

/// What a leave-one-out baseline does with a group of one sample, where it is undefined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Singleton {
    /// The sample gets advantage exactly 0: it carries no comparison, so no signal.
    #[default]
    Zero,
    /// Return [`CoreError::SingletonGroup`].
    Error,
}

/// How rewards become advantages: `A_i = clamp((r_i − b_i)/scale, −clip, clip)`, with
/// degenerate groups (all rewards equal) set to exactly 0 and reported.
///
/// The default is GRPO's as TRL computes it: group-mean baseline, unbiased group std,
/// `eps = 1e-4`, no clipping.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdvantageConfig {
    /// Baseline subtracted from each reward. Default `mean`.
    pub baseline: Baseline,
    /// Divisor of the centred reward. Default `group_std`.
    pub scale: Scale,
    /// Population or unbiased std for the std scales. Default `unbiased`.
    pub std: StdKind,
    /// Added to the std before dividing. Default `1e-4` (TRL, Flow-GRPO).
    pub eps: f64,
    /// Advantages are clamped to `[−clip, clip]` when set. Default none; Flow-GRPO uses 5.
    pub clip: Option<f64>,
    /// A group whose population std is at most this is degenerate: its advantages are 0 and it
    /// is reported. Default `1e-6` (BranchGRPO's threshold; exact ties give a std of ~1e-17).
    pub degenerate_tol: f64,
    /// Leave-one-out on a single-sample group. Default `zero`.
    pub singleton: Singleton,
}

impl Default for AdvantageConfig {
    fn default() -> Self {
        Self::grpo()
    }
}

impl AdvantageConfig {
    /// GRPO (arXiv 2402.03300) as TRL computes it: `(r − μ_k)/(std_k + 1e-4)`, unbiased std.
    pub fn grpo() -> Self {
        Self {
            baseline: Baseline::Mean,
            scale: Scale::GroupStd,
            std: StdKind::Unbiased,
            eps: 1e-4,
            clip: None,
            degenerate_tol: 1e-6,
            singleton: Singleton::Zero,
        }
    }

    /// Dr. GRPO (arXiv 2503.20783), GDPO and StableDRL: `r − μ_k`, no division.
    pub fn mean_centred() -> Self {
        Self { scale: Scale::None, ..Self::grpo() }
    }

    /// Leave-one-out without a std (RLOO; coupled-GRPO and ESPO).
    pub fn leave_one_out() -> Self {
        Self { baseline: Baseline::LeaveOneOut, scale: Scale::None, ..Self::grpo() }
    }

    /// Flow-GRPO (arXiv 2505.05470): per-prompt mean, population std (numpy), `eps = 1e-4`,
    /// clipped to ±5. Set `scale = BatchStd` for its `global_std` option.
    pub fn flow_grpo() -> Self {
        Self { std: StdKind::Population, clip: Some(5.0), ..Self::grpo() }
    }

    /// BranchGRPO (arXiv 2509.06040): per `(tree, depth)` group, unbiased std `+ 1e-8`, zero
    /// when the std is below `1e-6`.
    pub fn branch_grpo() -> Self {
        Self { eps: 1e-8, ..Self::grpo() }
    }

    /// Checks every field's domain, naming the field at fault.
    pub fn validate(&self) -> Result<()> {
        if !(self.eps >= 0.0 && self.eps.is_finite()) {
            return Err(CoreError::Config {
                field: "advantage.eps",
                value: self.eps.to_string(),
                expected: "a finite number >= 0",
            });
        }
        if let Some(c) = self.clip {
            if !(c > 0.0) {
                return Err(CoreError::Config {
                    field: "advantage.clip",
                    value: c.to_string(),
                    expected: "a number > 0, or no value for no clipping",
                });
            }
        }
        if !(self.degenerate_tol >= 0.0) {
            return Err(CoreError::Config {
                field: "advantage.degenerate_tol",
                value: self.degenerate_tol.to_string(),
                expected: "a number >= 0",
            });
        }
        if self.scale != Scale::None && self.eps == 0.0 && self.degenerate_tol == 0.0 {
            return Err(CoreError::Config {
                field: "advantage.eps",
                value: "0".into(),
                expected: "> 0 when dividing by a std with degenerate_tol = 0 (a tied group would give 0/0)",
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_round_trip_and_unknown_field() {
        let cfg: AdvantageConfig =
            toml::from_str("baseline = \"leave_one_out\"\nscale = \"none\"\nclip = 3.0").unwrap();
        assert_eq!(cfg.baseline, Baseline::LeaveOneOut);
        assert_eq!(cfg.clip, Some(3.0));
        assert_eq!(cfg.eps, 1e-4, "unset fields keep their defaults");
        let err =
            toml::from_str::<AdvantageConfig>("baseline = \"mean\"\nclipp = 1.0").unwrap_err();
        assert!(err.to_string().contains("clipp"), "{err}");
    }

    #[test]
    fn validate_names_the_field() {
        let cfg = AdvantageConfig { clip: Some(-1.0), ..AdvantageConfig::grpo() };
        assert!(cfg.validate().unwrap_err().to_string().contains("advantage.clip"));
    }
}
