//! Configuration of a policy loss (docs/algorithms.md §2) and the named presets of the papers.

use serde::{Deserialize, Serialize};

use crate::error::{CoreError, Result};

/// What one *action* is, and so what its importance ratio is.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum RatioKind {
    /// Each valid `[b, t]` is an action: `ρ_bt = exp(lp_new − lp_old)` (GRPO, diffu-GRPO,
    /// coupled-GRPO, Flow-GRPO per transition).
    #[default]
    Token,
    /// Each sequence is an action with the mean log-ratio of its tokens,
    /// `ρ_b = exp(Σ_t m(lp_new − lp_old) / Σ_t m)` (GSPO, arXiv 2507.18071).
    SequenceMean,
    /// Each sequence is an action with a fixed normaliser,
    /// `ρ_b = exp(Σ_t m(lp_new − lp_old) / L)`: with per-token ELBO terms (or an `[N, 1]`
    /// ELBO) this is ESPO's `exp((ELBO_new − ELBO_old)/L)` (arXiv 2512.03759) and GDPO's
    /// (arXiv 2510.08554), `L` the completion length.
    SequenceFixed {
        /// The normaliser `L` (the generation length). Must be > 0.
        length: f64,
    },
}

/// The per-action surrogate objective (to be minimised).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Surrogate {
    /// PPO clip (arXiv 1707.06347) with asymmetric bounds (DAPO "clip-higher",
    /// arXiv 2503.14476): `ℓ = max(−A ρ, −A clip(ρ, 1−ε_low, 1+ε_high))`.
    PpoClip {
        /// `ε_low`, the lower clip distance. GRPO 0.2.
        eps_low: f64,
        /// `ε_high`, the upper clip distance. GRPO 0.2, DAPO 0.28.
        eps_high: f64,
    },
    /// Self-normalised importance weighting (StableDRL): `log w = min(sg(lp_new − lp_old),
    /// ln c)` whatever the sign of `A`, `w = softmax(log w)` over every valid action of the batch,
    /// `ℓ = −w A lp_new`. The loss is `Σ ℓ`, the weights already sum to one, so the
    /// aggregation is not applied to it (it still applies to the KL term).
    SelfNormalized {
        /// `c`, the cap of the importance weight before normalisation. StableDRL uses 5.
        weight_clip: f64,
    },
}

impl Default for Surrogate {
    fn default() -> Self {
        Surrogate::PpoClip { eps_low: 0.2, eps_high: 0.2 }
    }
}

/// The estimator of the per-action KL to a reference policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KlEstimator {
    /// `k1 = lp_new − lp_ref` (Schulman's unbiased, high-variance estimator).
    K1,
    /// `k2 = ½(lp_new − lp_ref)²` (ESPO).
    K2,
    /// `k3 = exp(lp_ref − lp_new) − (lp_ref − lp_new) − 1` (GRPO, d1, DiffuCoder).
    K3,
    /// k3 bounded as verl's `low_var_kl`: the log-ratio `lp_ref − lp_new` clamped to ±20, then
    /// `k3` clamped to ±10, so a token the policy has made far less likely than the reference
    /// (`π_ref/π > ~13.5`) contributes a constant and no gradient instead of a weight
    /// `1 − π_ref/π` in the hundreds (the single-token KL spikes of BENCHMARKS.md, session 15).
    LowVarKl,
    /// A KL the caller computed per action, such as Flow-GRPO's Gaussian-mean KL
    /// ([`crate::loss::gaussian_mean_kl`]); pass it as [`crate::loss::Reference::Kl`].
    Precomputed,
}

/// `β · KL` added to the loss.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KlPenalty {
    /// Which estimator.
    pub estimator: KlEstimator,
    /// The coefficient `β`. GRPO 0.04, coupled-GRPO 0.01, Flow-GRPO 0.04 (GenEval/OCR).
    pub beta: f64,
}

/// How per-action losses `ℓ[N, T]` become one scalar.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Aggregation {
    /// `Σ m ℓ / Σ m` (DAPO, arXiv 2503.14476): every token weighs the same.
    #[default]
    TokenMean,
    /// `mean_b(Σ_t m ℓ / Σ_t m)` (original GRPO): every sequence weighs the same.
    SeqMeanTokenMean,
    /// `Σ m ℓ / (N · T_max)` (Dr. GRPO, arXiv 2503.20783): no length bias.
    SeqMeanTokenSumNorm {
        /// `T_max`; when unset, the action dimension `T` of the batch.
        #[serde(default)]
        max_len: Option<usize>,
    },
    /// Token means taken separately over the sequences with `A > 0` and with `A < 0`, weighted
    /// `n_pos/N` and `n_neg/N` (Balanced Aggregation). A sequence's sign is that of its mean
    /// advantage over its valid actions.
    Balanced,
}

/// A whole policy loss: ratio, surrogate, optional KL, aggregation.
///
/// The default is GRPO's ([`PolicyLossConfig::grpo`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PolicyLossConfig {
    /// What an action is. Default `token`.
    pub ratio: RatioKind,
    /// The surrogate. Default PPO clip 0.2 / 0.2.
    pub surrogate: Surrogate,
    /// KL to the reference. Default k3 with β 0.04 (GRPO).
    pub kl: Option<KlPenalty>,
    /// The aggregation. Default `seq_mean_token_mean` (GRPO).
    pub aggregation: Aggregation,
}

impl Default for PolicyLossConfig {
    fn default() -> Self {
        Self::grpo()
    }
}

/// The presets by name, for configs and the command line.
pub const PRESETS: &[&str] =
    &["grpo", "dr_grpo", "dapo", "gspo", "espo", "gdpo", "stable_drl", "flow_grpo"];

impl PolicyLossConfig {
    /// GRPO (arXiv 2402.03300): token ratio, clip 0.2, k3 KL β 0.04, per-sequence token mean.
    pub fn grpo() -> Self {
        Self {
            ratio: RatioKind::Token,
            surrogate: Surrogate::PpoClip { eps_low: 0.2, eps_high: 0.2 },
            kl: Some(KlPenalty { estimator: KlEstimator::K3, beta: 0.04 }),
            aggregation: Aggregation::SeqMeanTokenMean,
        }
    }

    /// Dr. GRPO (arXiv 2503.20783): clip 0.2, no KL, `Σ m ℓ / (N · T_max)`.
    pub fn dr_grpo(max_len: Option<usize>) -> Self {
        Self { kl: None, aggregation: Aggregation::SeqMeanTokenSumNorm { max_len }, ..Self::grpo() }
    }

    /// DAPO (arXiv 2503.14476): clip-higher 0.2 / 0.28, no KL, token mean.
    pub fn dapo() -> Self {
        Self {
            surrogate: Surrogate::PpoClip { eps_low: 0.2, eps_high: 0.28 },
            kl: None,
            aggregation: Aggregation::TokenMean,
            ..Self::grpo()
        }
    }

    /// GSPO (arXiv 2507.18071): sequence-mean ratio, clip 3e-4 / 4e-4 (the paper's), no KL.
    pub fn gspo() -> Self {
        Self {
            ratio: RatioKind::SequenceMean,
            surrogate: Surrogate::PpoClip { eps_low: 3e-4, eps_high: 4e-4 },
            kl: None,
            aggregation: Aggregation::SeqMeanTokenMean,
        }
    }

    /// ESPO (arXiv 2512.03759): sequence ratio `exp(ΔELBO / L)`, clip 0.2, k2 KL. The
    /// reference code sweeps β over 1e-3…1e-2; the preset takes the low end, 1e-3.
    pub fn espo(completion_len: usize) -> Self {
        Self {
            ratio: RatioKind::SequenceFixed { length: completion_len as f64 },
            surrogate: Surrogate::PpoClip { eps_low: 0.2, eps_high: 0.2 },
            kl: Some(KlPenalty { estimator: KlEstimator::K2, beta: 1e-3 }),
            aggregation: Aggregation::SeqMeanTokenMean,
        }
    }

    /// GDPO (arXiv 2510.08554): sequence ratio `exp(ΔELBO / L)`, clip 0.5, no KL.
    pub fn gdpo(completion_len: usize) -> Self {
        Self {
            ratio: RatioKind::SequenceFixed { length: completion_len as f64 },
            surrogate: Surrogate::PpoClip { eps_low: 0.5, eps_high: 0.5 },
            kl: None,
            aggregation: Aggregation::SeqMeanTokenMean,
        }
    }

    /// StableDRL: per-token-mean ELBO per sequence, self-normalised weights capped at c = 5,
    /// no KL.
    pub fn stable_drl() -> Self {
        Self {
            ratio: RatioKind::SequenceMean,
            surrogate: Surrogate::SelfNormalized { weight_clip: 5.0 },
            kl: None,
            aggregation: Aggregation::SeqMeanTokenMean,
        }
    }

    /// Flow-GRPO (arXiv 2505.05470): per-transition ratio, clip 1e-4 (log-probs are means over
    /// elements, so ratios stay near 1), Gaussian-mean KL with β 0.04, mean over transitions.
    pub fn flow_grpo() -> Self {
        Self {
            ratio: RatioKind::Token,
            surrogate: Surrogate::PpoClip { eps_low: 1e-4, eps_high: 1e-4 },
            kl: Some(KlPenalty { estimator: KlEstimator::Precomputed, beta: 0.04 }),
            aggregation: Aggregation::TokenMean,
        }
    }

    /// A preset by name (one of [`PRESETS`]); `completion_len` is used by `espo`, `gdpo` and
    /// `dr_grpo`.
    pub fn preset(name: &str, completion_len: usize) -> Result<Self> {
        Ok(match name {
            "grpo" => Self::grpo(),
            "dr_grpo" => Self::dr_grpo(Some(completion_len)),
            "dapo" => Self::dapo(),
            "gspo" => Self::gspo(),
            "espo" => Self::espo(completion_len),
            "gdpo" => Self::gdpo(completion_len),
            "stable_drl" => Self::stable_drl(),
            "flow_grpo" => Self::flow_grpo(),
            _ => {
                return Err(CoreError::Config {
                    field: "loss.preset",
                    value: name.to_string(),
                    expected: "one of grpo, dr_grpo, dapo, gspo, espo, gdpo, stable_drl, flow_grpo",
                })
            }
        })
    }

    /// Checks every field's domain, naming the field at fault.
    pub fn validate(&self) -> Result<()> {
        let bad = |field, value: f64, expected| {
            Err(CoreError::Config { field, value: value.to_string(), expected })
        };
        if let RatioKind::SequenceFixed { length } = self.ratio {
            if !(length > 0.0 && length.is_finite()) {
                return bad("loss.ratio.length", length, "a finite number > 0");
            }
        }
        match self.surrogate {
            Surrogate::PpoClip { eps_low, eps_high } => {
                if !(0.0..1.0).contains(&eps_low) {
                    return bad("loss.surrogate.eps_low", eps_low, "a number in [0, 1)");
                }
                if !(eps_high >= 0.0 && eps_high.is_finite()) {
                    return bad("loss.surrogate.eps_high", eps_high, "a finite number >= 0");
                }
            }
            Surrogate::SelfNormalized { weight_clip } => {
                if !(weight_clip > 0.0) {
                    return bad("loss.surrogate.weight_clip", weight_clip, "a number > 0");
                }
            }
        }
        if let Some(kl) = self.kl {
            if !(kl.beta >= 0.0 && kl.beta.is_finite()) {
                return bad("loss.kl.beta", kl.beta, "a finite number >= 0");
            }
        }
        if let Aggregation::SeqMeanTokenSumNorm { max_len: Some(0) } = self.aggregation {
            return bad("loss.aggregation.max_len", 0.0, "a length >= 1");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_forms() {
        let cfg: PolicyLossConfig = toml::from_str(
            r#"
            ratio = { kind = "sequence_fixed", length = 256.0 }
            surrogate = { kind = "ppo_clip", eps_low = 0.2, eps_high = 0.28 }
            kl = { estimator = "k2", beta = 0.01 }
            aggregation = { kind = "balanced" }
            "#,
        )
        .unwrap();
        assert_eq!(cfg.ratio, RatioKind::SequenceFixed { length: 256.0 });
        assert_eq!(cfg.kl.unwrap().estimator, KlEstimator::K2);
        let partial: PolicyLossConfig =
            toml::from_str("aggregation = { kind = \"token_mean\" }").unwrap();
        assert_eq!(partial.surrogate, PolicyLossConfig::grpo().surrogate);
        for bad in [
            "ratioo = { kind = \"token\" }",
            "surrogate = { kind = \"ppo_clip\", eps_low = 0.2, eps_hi = 0.2 }",
            "aggregation = { kind = \"token_avg\" }",
        ] {
            assert!(toml::from_str::<PolicyLossConfig>(bad).is_err(), "{bad} must be refused");
        }
    }

    #[test]
    fn presets_validate_and_unknown_is_named() {
        for name in PRESETS {
            PolicyLossConfig::preset(name, 128).unwrap().validate().unwrap();
        }
        let msg = PolicyLossConfig::preset("ppo2", 1).unwrap_err().to_string();
        assert!(msg.contains("ppo2") && msg.contains("loss.preset"), "{msg}");
        let cfg = PolicyLossConfig {
            kl: Some(KlPenalty { estimator: KlEstimator::K3, beta: -1.0 }),
            ..PolicyLossConfig::grpo()
        };
        assert!(cfg.validate().unwrap_err().to_string().contains("loss.kl.beta"));
    }
}
