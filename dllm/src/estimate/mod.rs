//! Likelihood estimators for masked diffusion LMs (docs/algorithms.md §3): the per-token
//! log-probability terms of completions that dLLM RL recipes put into the policy ratio.
//!
//! A masked diffusion model has no tractable `log p(y | prompt)`; every recipe replaces it by
//! an estimate built from passes over partially masked copies of the sequence:
//!
//! - [`EstimatorConfig::OneStep`] (diffu-GRPO / d1, arXiv 2504.12216): every completion
//!   token masked (and each real prompt token with probability `p_prompt`), `lp_j` per token;
//!   one pass.
//! - [`EstimatorConfig::Coupled`] (coupled-GRPO / DiffuCoder, arXiv 2506.20639): `t ~ U(a, b)`,
//!   `A = {j : R_j < t}` and its complement `Ā`, passes fully masked, `A`-masked and
//!   `Ā`-masked: `lp_j = ½(lp_full_j + [j∈A] lp_A_j / t + [j∈Ā] lp_Ā_j / (1−t))`. Every
//!   completion token is scored exactly once by the pair.
//! - [`EstimatorConfig::ElboMc`] (LLaDA / ESPO, arXiv 2512.03759): per draw a masked count
//!   `x` (stratified over the draws), `x` random completion positions masked in one pass and
//!   the other `L − x` in a complement pass, weights `(L+1)/x` and `(L+1)/(L−x)`, halved, the
//!   mean over draws.
//! - [`EstimatorConfig::Quadrature`] (GDPO, arXiv 2510.08554): `ELBO = ∫₀¹ E[(1/t) Σ_masked lp] dt`
//!   by Gauss–Legendre (1–5 nodes) or Simpson's rule in `t`, `k_n = round(t_n L)` positions
//!   masked at node `n`.
//!
//! Every estimator returns per-token terms `[B, T]` (0 outside the completion) whose row sum
//! is the sequence estimate, so the core's token ratio (diffu-/coupled-GRPO) and its
//! fixed-length sequence ratio (ESPO, GDPO) both consume them as they are.
//!
//! **The fill.** Positions after the completion (the EOS fill of a fixed-length generated
//! region, [`EstimateInput::fill`]) are masked with each pass's rate and never scored: all of
//! them by one-step and the full pass, split by the same uniform matrix as the completion
//! between the coupled pair (DiffuCoder's `~prompt_index & (R < t)`), with probability `x/L`
//! per ELBO draw (the complement pass takes the rest) and `k/L` per quadrature node.
//!
//! **Randomness.** Every mask is a pure function of the caller's key (seed, step, inner
//! iteration), the row's global id and the draw or node: row `b` draws under
//! `key.row(rows[b])`, so old, reference and current passes of a row match under any
//! micro-batching (tested). Masks are built on the host from host-side completion flags (one
//! upload per call); the passes of a call run as one batch (in chunks of `max_rows` rows).
//!
//! **Expectations.** Under a model whose predictions ignore the context, one-step, ELBO-MC,
//! quadrature and the coupled pair without its full pass are unbiased for the exact
//! log-likelihood (tested). The coupled estimator *as DiffuCoder computes it* (with the full
//! pass) has expectation `1.5 ×` the log-likelihood there: the pair already scores each token
//! once in expectation, and the full pass adds a half more. It only rescales the log-ratio,
//! but it is not a likelihood; `full_pass = false` gives the unbiased pair.

mod draws;
mod passes;
mod quadrature;
#[cfg(test)]
mod tests;

use candle_core::Tensor;
use drift_core::rng::RngKey;
use drift_samplers::MaskPredictor;
use serde::{Deserialize, Serialize};

pub use draws::{draw_passes, Pass};
pub use quadrature::{gauss_legendre, simpson, QuadratureRule};

use crate::error::{DllmError, Result};

/// Which estimator, with its parameters (docs/algorithms.md §3 defaults).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum EstimatorConfig {
    /// diffu-GRPO's one-step estimate.
    OneStep {
        /// Probability of masking each real prompt token. d1: 0.15.
        #[serde(default = "default_prompt_mask")]
        prompt_mask_prob: f64,
    },
    /// coupled-GRPO's complementary masks.
    Coupled {
        /// Lower end of `t`'s range. DiffuCoder: 0.2.
        #[serde(default = "default_t_min")]
        t_min: f64,
        /// Upper end of `t`'s range. DiffuCoder: 0.8.
        #[serde(default = "default_t_max")]
        t_max: f64,
        /// One `t` per row instead of one per call (DiffuCoder draws one per call). Default false.
        #[serde(default)]
        per_row_t: bool,
        /// Include the fully masked pass (DiffuCoder). Default true; false gives the unbiased
        /// pair `½([j∈A] lp_A/t + [j∈Ā] lp_Ā/(1−t))` in two passes.
        #[serde(default = "default_true")]
        full_pass: bool,
    },
    /// LLaDA / ESPO ELBO by Monte Carlo, two passes per draw.
    ElboMc {
        /// Draws `num_mc`. ESPO: 2.
        #[serde(default = "default_draws")]
        draws: usize,
    },
    /// GDPO's semi-deterministic quadrature in `t`.
    Quadrature {
        /// The rule. GDPO: Gauss–Legendre with 2 nodes (3 for Countdown).
        #[serde(default)]
        rule: QuadratureRule,
        /// Random position draws per node. Default 1.
        #[serde(default = "default_one")]
        draws: usize,
    },
}

fn default_prompt_mask() -> f64 {
    0.15
}
fn default_t_min() -> f64 {
    0.2
}
fn default_t_max() -> f64 {
    0.8
}
fn default_true() -> bool {
    true
}
fn default_draws() -> usize {
    2
}
fn default_one() -> usize {
    1
}

impl EstimatorConfig {
    /// diffu-GRPO's default: one step, prompt masked with probability 0.15.
    pub fn one_step() -> Self {
        Self::OneStep { prompt_mask_prob: 0.15 }
    }
    /// coupled-GRPO's default: `t ~ U(0.2, 0.8)` per call, with the full pass.
    pub fn coupled() -> Self {
        Self::Coupled { t_min: 0.2, t_max: 0.8, per_row_t: false, full_pass: true }
    }
    /// ESPO's default: 2 Monte Carlo draws.
    pub fn elbo_mc() -> Self {
        Self::ElboMc { draws: 2 }
    }
    /// GDPO's default: 2-node Gauss–Legendre, one draw per node.
    pub fn quadrature() -> Self {
        Self::Quadrature { rule: QuadratureRule::default(), draws: 1 }
    }

    /// Model passes per row.
    pub fn passes_per_row(&self) -> usize {
        match *self {
            Self::OneStep { .. } => 1,
            Self::Coupled { full_pass, .. } => 2 + usize::from(full_pass),
            Self::ElboMc { draws } => 2 * draws,
            Self::Quadrature { rule, draws } => rule.nodes().len() * draws,
        }
    }

    /// Checks every parameter's domain, naming the field at fault.
    pub fn validate(&self) -> Result<()> {
        let bad = |key: &'static str, value: String, expected: &str| DllmError::Config {
            key,
            value,
            expected: expected.into(),
        };
        match *self {
            Self::OneStep { prompt_mask_prob: p } if !(0.0..=1.0).contains(&p) => {
                Err(bad("estimator.prompt_mask_prob", p.to_string(), "a probability in [0, 1]"))
            }
            Self::Coupled { t_min, t_max, .. }
                if !(t_min > 0.0 && t_min <= t_max && t_max < 1.0) =>
            {
                Err(bad(
                    "estimator.t_min / t_max",
                    format!("{t_min} / {t_max}"),
                    "0 < t_min <= t_max < 1",
                ))
            }
            Self::ElboMc { draws: 0 } | Self::Quadrature { draws: 0, .. } => {
                Err(bad("estimator.draws", "0".into(), "at least 1"))
            }
            Self::Quadrature { rule: QuadratureRule::GaussLegendre { nodes }, .. }
                if !(1..=5).contains(&nodes) =>
            {
                Err(bad("estimator.rule.nodes", nodes.to_string(), "1 to 5 Gauss–Legendre nodes"))
            }
            _ => Ok(()),
        }
    }
}

/// The sequences an estimator scores.
#[derive(Debug, Clone, Copy)]
pub struct EstimateInput<'a> {
    /// Token ids `[B, T]` (u32): prompt and completion.
    pub ids: &'a Tensor,
    /// `[B][T]` on the host: completion positions that count (up to and including the first
    /// EOS; never padding or prompt).
    pub completion: &'a [Vec<bool>],
    /// `[B][T]` on the host: prompt positions that may be masked (real prompt tokens; the
    /// one-step estimator's `p_prompt`). Empty rows (or all false) mask no prompt token.
    pub prompt: &'a [Vec<bool>],
    /// `[B][T]` on the host: the generated region after the completion (its EOS fill).
    /// Every pass masks these positions at its own rate and never scores them, so the model
    /// sees the whole generated region noised as when it decodes (d1 and DiffuCoder mask all
    /// of it); a visible fill would tell it where the completion ends. Empty: no fill.
    pub fill: &'a [Vec<bool>],
    /// Global row ids `[B]`: the `row` of every row's key.
    pub rows: &'a [u64],
    /// Optional attention mask `[B, T]` passed to the model with every pass.
    pub attention_mask: Option<&'a Tensor>,
}

/// An estimate for `B` sequences.
#[derive(Debug, Clone)]
pub struct Estimate {
    /// Per-token terms `[B, T]` f32, differentiable in the model's weights; 0 outside the
    /// completion.
    pub per_token: Tensor,
    /// The sequence estimate `[B]`: the row sums of `per_token`.
    pub sequence: Tensor,
    /// Rows evaluated by the model (`B · passes_per_row`).
    pub forward_rows: usize,
}

/// The estimate of hand-made `passes` (masks and weights, e.g. a custom estimator for a
/// study): `Σ_k weight_k ⊙ log p(y | ids with mask_k)` per token.
pub fn estimate_passes<M: MaskPredictor + ?Sized>(
    model: &M,
    input: &EstimateInput<'_>,
    passes: &[Pass],
    max_rows: usize,
) -> Result<Estimate> {
    let per_token = passes::run_passes(model, input, passes, max_rows.max(1))?;
    let sequence = per_token.sum(1)?;
    Ok(Estimate { per_token, sequence, forward_rows: passes.len() * input.rows.len() })
}

/// Estimates the log-likelihood terms of `input` under `model` with `cfg`, every mask keyed
/// by `key` (the caller sets seed, step and inner iteration; the estimator sets stream, row
/// and draw). Passes run in chunks of at most `max_rows` model rows.
pub fn estimate<M: MaskPredictor + ?Sized>(
    model: &M,
    cfg: &EstimatorConfig,
    input: &EstimateInput<'_>,
    key: RngKey,
    max_rows: usize,
) -> Result<Estimate> {
    cfg.validate()?;
    let passes = draw_passes(cfg, input, key)?;
    estimate_passes(model, input, &passes, max_rows)
}
