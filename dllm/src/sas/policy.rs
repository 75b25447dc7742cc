//! SAS's order policy: a small MLP over the frozen denoiser's per-position features, sampled
//! by Plackett–Luce (Gumbel-top-k), recorded during a rollout so the training step can
//! re-score the same decisions under the current weights.
//!
//! Score of completion position `j` at a step (features `f_j` of
//! [`OrderFeatures::as_array`]: top-1 probability, margin, negative entropy, relative
//! position, in-block, masked):
//!
//! ```text
//! s_j = (w · f_j + W₂ tanh(W₁ f_j + b₁)) / τ        on eligible positions, −∞ elsewhere
//! ```
//!
//! The linear skip `w` lets a heuristic be written exactly (`w = (1, 0, …)` is the
//! low-confidence rule); the MLP learns what the heuristics miss. With `projection = k > 0`
//! the MLP also reads `P · log p(· | x_t)_j`, a learned `k`-dimensional projection of the
//! denoiser's output distribution at the position ([`OrderFeatures::log_probs`], linear in
//! its final hidden state: SAS's hidden-state feature), so it can use what the denoiser knows
//! about the position's context and not only how confident it is:
//! `s_j = (w · f_j + W₂ tanh(W₁ [f_j; P log p_j] + b₁)) / τ`. A step that commits `n`
//! positions draws them without replacement from `softmax(s)` (Gumbel-top-`n`) and has
//! log-probability `Σ_{k<n} (s_{σk} − log Σ_{i≥k} exp s_{σi})` (Plackett–Luce, σ the draw's
//! order); in greedy mode the top-`n` scores are taken and the same formula is reported.

use std::cell::RefCell;
use std::path::Path;

use candle_core::{DType, Device, Tensor, D};
use candle_nn::{Linear, Module, VarBuilder, VarMap};
use drift_samplers::dllm::{
    gumbel_perturb, mask_ineligible, plackett_luce_log_prob, top_n_mask, OrderDecision,
    OrderFeatures, OrderInput, OrderPolicy,
};
use serde::{Deserialize, Serialize};

use crate::error::{DllmError, Result};

/// Features per position ([`OrderFeatures::as_array`]).
pub const FEATURES: usize = 6;

/// The saved policy's weights.
pub const POLICY_WEIGHTS: &str = "sas_policy.safetensors";
/// The saved policy's shape.
pub const POLICY_CONFIG: &str = "sas_policy.json";

/// The order policy's shape and sampling.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SasPolicyConfig {
    /// Hidden width of the MLP. Default 32.
    pub hidden: usize,
    /// Softmax temperature `τ > 0` of the scores. Default 1.
    pub temperature: f64,
    /// Initial linear-skip weights `w` (top-1, margin, neg-entropy, rel-position, in-block,
    /// masked). Default all 0 with a zero MLP output layer: the untrained policy is the
    /// uniform-random order.
    pub init_linear: [f64; FEATURES],
    /// Width `k` of the learned projection of the denoiser's log-distribution fed to the MLP
    /// (module docs). Default 0: off, the six scalar features only.
    pub projection: usize,
    /// The denoiser's vocabulary size `V` (the projection's input width); required by
    /// [`SasOrderPolicy::new`] when `projection > 0`. Default 0, which `drift train sas` fills
    /// in from the model.
    pub vocab_size: usize,
}

impl Default for SasPolicyConfig {
    fn default() -> Self {
        Self {
            hidden: 32,
            temperature: 1.0,
            init_linear: [0.0; FEATURES],
            projection: 0,
            vocab_size: 0,
        }
    }
}

impl SasPolicyConfig {
    /// Checks the values, naming the field at fault.
    pub fn validate(&self) -> Result<()> {
        let bad = |key: &'static str, value: String, expected: &str| {
            Err(DllmError::Config { key, value, expected: expected.into() })
        };
        if self.hidden == 0 {
            return bad("policy.hidden", "0".into(), "at least 1");
        }
        if !(self.temperature.is_finite() && self.temperature > 0.0) {
            return bad("policy.temperature", self.temperature.to_string(), "finite and > 0");
        }
        if self.init_linear.iter().any(|w| !w.is_finite()) {
            return bad("policy.init_linear", format!("{:?}", self.init_linear), "finite");
        }
        Ok(())
    }
}

/// The SAS order policy (module docs): trainable `Var`s in its own [`VarMap`].
pub struct SasOrderPolicy {
    cfg: SasPolicyConfig,
    linear: Linear,
    hidden: Linear,
    out: Linear,
    /// `P: [k, V]`, when `projection > 0`.
    proj: Option<Linear>,
    varmap: VarMap,
}

impl SasOrderPolicy {
    /// A fresh policy: the linear skip at `cfg.init_linear`, the hidden layer random (seeded
    /// by `seed`), the output layer zero, so its scores are exactly the skip's.
    pub fn new(cfg: SasPolicyConfig, seed: u64, device: &Device) -> Result<Self> {
        cfg.validate()?;
        if cfg.projection > 0 && cfg.vocab_size == 0 {
            return Err(DllmError::Config {
                key: "policy.vocab_size",
                value: "0".into(),
                expected: "the denoiser's vocabulary size when policy.projection > 0".into(),
            });
        }
        let varmap = VarMap::new();
        let vb = VarBuilder::from_varmap(&varmap, DType::F32, device);
        let zero = candle_nn::Init::Const(0.0);
        let h = cfg.hidden;
        let inputs = FEATURES + cfg.projection;
        let linear = Linear::new(vb.get_with_hints((1, FEATURES), "linear.weight", zero)?, None);
        let hidden = Linear::new(
            vb.get_with_hints((h, inputs), "hidden.weight", zero)?,
            Some(vb.get_with_hints(h, "hidden.bias", zero)?),
        );
        let proj = if cfg.projection > 0 {
            Some(Linear::new(
                vb.get_with_hints((cfg.projection, cfg.vocab_size), "proj.weight", zero)?,
                None,
            ))
        } else {
            None
        };
        let out = Linear::new(
            vb.get_with_hints((1, h), "out.weight", zero)?,
            Some(vb.get_with_hints(1, "out.bias", zero)?),
        );
        let mut varmap = varmap;
        let w = Tensor::new(&cfg.init_linear.map(|x| x as f32), device)?.unsqueeze(0)?;
        varmap.set_one("linear.weight", w)?;
        let key = drift_core::rng::RngKey::new(seed);
        let w1 = key.stream("sas/init").normal((h, inputs), DType::F32, device)?;
        varmap.set_one("hidden.weight", (w1 * (1.0 / inputs as f64).sqrt())?)?;
        if cfg.projection > 0 {
            let p = key.stream("sas/proj").normal(
                (cfg.projection, cfg.vocab_size),
                DType::F32,
                device,
            )?;
            varmap.set_one("proj.weight", (p * (1.0 / cfg.vocab_size as f64).sqrt())?)?;
        }
        Ok(Self { cfg, linear, hidden, out, proj, varmap })
    }

    /// The policy in greedy mode: the top-`n` scores, no noise (evaluation).
    pub fn greedy(&self) -> Greedy<'_> {
        Greedy(self)
    }

    /// The trainable variables.
    pub fn varmap(&self) -> &VarMap {
        &self.varmap
    }

    /// The configuration.
    pub fn config(&self) -> &SasPolicyConfig {
        &self.cfg
    }

    /// The raw scores `[B, L]` of stacked features `x[B, L, 6]` and, with a projection, the
    /// log-distributions `log_probs[B, L, V]` (module formula, before the eligibility mask).
    pub fn raw_scores(&self, x: &Tensor, log_probs: Option<&Tensor>) -> Result<Tensor> {
        let skip = self.linear.forward(x)?;
        let input = match (&self.proj, log_probs) {
            (Some(p), Some(lp)) => Tensor::cat(&[x, &p.forward(lp)?], D::Minus1)?,
            (None, _) => x.clone(),
            (Some(_), None) => {
                return Err(DllmError::Config {
                    key: "policy.projection",
                    value: self.cfg.projection.to_string(),
                    expected: "the denoiser's log-probabilities with the features".into(),
                })
            }
        };
        let mlp = self.out.forward(&self.hidden.forward(&input)?.tanh()?)?;
        Ok(((skip + mlp)? / self.cfg.temperature)?.squeeze(D::Minus1)?)
    }

    /// The masked scores `[B, L]` (`−∞` where `eligible` is 0).
    pub fn scores(
        &self,
        x: &Tensor,
        log_probs: Option<&Tensor>,
        eligible: &Tensor,
    ) -> Result<Tensor> {
        Ok(mask_ineligible(&self.raw_scores(x, log_probs)?, eligible)?)
    }

    /// Saves the weights and the shape into `dir` ([`POLICY_WEIGHTS`], [`POLICY_CONFIG`]).
    pub fn save(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
        self.varmap.save(dir.join(POLICY_WEIGHTS))?;
        let json = serde_json::to_string_pretty(&self.cfg).map_err(|e| io(dir, e))?;
        std::fs::write(dir.join(POLICY_CONFIG), json).map_err(|e| io(dir, e))
    }

    /// Loads a policy saved by [`SasOrderPolicy::save`]; errors name the missing or bad file.
    pub fn load(dir: &Path, device: &Device) -> Result<Self> {
        let path = dir.join(POLICY_CONFIG);
        let text = std::fs::read_to_string(&path).map_err(|e| io(&path, e))?;
        let cfg: SasPolicyConfig = serde_json::from_str(&text).map_err(|e| io(&path, e))?;
        let mut policy = Self::new(cfg, 0, device)?;
        let weights = dir.join(POLICY_WEIGHTS);
        policy.varmap.load(&weights).map_err(|e| io(&weights, e))?;
        Ok(policy)
    }
}

fn io(path: &Path, e: impl ToString) -> DllmError {
    DllmError::Io { path: path.to_path_buf(), source: std::io::Error::other(e.to_string()) }
}

fn policy_err(e: DllmError) -> drift_samplers::dllm::DecodeError {
    match e {
        DllmError::Decode(d) => d,
        other => {
            drift_samplers::dllm::DecodeError::Candle(candle_core::Error::Msg(other.to_string()))
        }
    }
}

/// The features of one step stacked as `[B, L, 6]` f32.
pub fn stack_features(f: &OrderFeatures) -> Result<Tensor> {
    Ok(Tensor::stack(&f.as_array(), 2)?.to_dtype(DType::F32)?)
}

/// One recorded decision: what re-scoring it needs.
#[derive(Debug, Clone)]
pub struct OrderStep {
    /// Stacked features `[B, L, 6]`.
    pub features: Tensor,
    /// The denoiser's log-distributions `[B, L, V]`, kept only when the policy projects them.
    pub log_probs: Option<Tensor>,
    /// Eligible positions `[B, L]` u8.
    pub eligible: Tensor,
    /// The perturbed scores whose descending order is the draw's order `[B, L]`.
    pub perturbed: Tensor,
    /// Positions committed per row `[B]` u32.
    pub count: Tensor,
}

impl OrderPolicy for SasOrderPolicy {
    fn choose(&self, input: &OrderInput<'_>) -> drift_samplers::dllm::Result<OrderDecision> {
        Ok(self.decide(input, false).map_err(policy_err)?.0)
    }
}

impl SasOrderPolicy {
    /// The decision at one step and its record.
    fn decide(&self, input: &OrderInput<'_>, greedy: bool) -> Result<(OrderDecision, OrderStep)> {
        let x = stack_features(input.features)?;
        let eligible = input.features.eligible()?;
        let log_probs = self.proj.as_ref().map(|_| input.features.log_probs.detach());
        let s = self.scores(&x, log_probs.as_ref(), &eligible)?.detach();
        let perturbed = if greedy { s.clone() } else { gumbel_perturb(&s, input.uniforms, 1.0)? };
        let commit = (top_n_mask(&perturbed, input.count)? * &eligible)?;
        let log_prob = plackett_luce_log_prob(&s, &perturbed, input.count)?;
        let decision = OrderDecision { commit, log_prob: log_prob.to_dtype(DType::F32)? };
        let step =
            OrderStep { features: x, log_probs, eligible, perturbed, count: input.count.clone() };
        Ok((decision, step))
    }

    /// The log-probabilities `[B, S]` of recorded steps under the current weights
    /// (differentiable in them): each step's Plackett–Luce term of its recorded order.
    pub fn replay_log_probs(&self, steps: &[OrderStep]) -> Result<Tensor> {
        let per_step = steps
            .iter()
            .map(|st| {
                let s = self.scores(&st.features, st.log_probs.as_ref(), &st.eligible)?;
                Ok(plackett_luce_log_prob(&s, &st.perturbed, &st.count)?)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Tensor::stack(&per_step, 1)?)
    }
}

/// A policy in greedy mode ([`SasOrderPolicy::greedy`]).
pub struct Greedy<'p>(&'p SasOrderPolicy);

impl OrderPolicy for Greedy<'_> {
    fn choose(&self, input: &OrderInput<'_>) -> drift_samplers::dllm::Result<OrderDecision> {
        Ok(self.0.decide(input, true).map_err(policy_err)?.0)
    }
}

/// A policy that records every decision of a rollout ([`OrderStep`]) for re-scoring.
pub struct RecordingPolicy<'p> {
    policy: &'p SasOrderPolicy,
    steps: RefCell<Vec<OrderStep>>,
}

impl<'p> RecordingPolicy<'p> {
    /// Records `policy`'s decisions.
    pub fn new(policy: &'p SasOrderPolicy) -> Self {
        Self { policy, steps: RefCell::new(Vec::new()) }
    }

    /// The recorded steps, in decoding order.
    pub fn into_steps(self) -> Vec<OrderStep> {
        self.steps.into_inner()
    }
}

impl OrderPolicy for RecordingPolicy<'_> {
    fn choose(&self, input: &OrderInput<'_>) -> drift_samplers::dllm::Result<OrderDecision> {
        let (decision, step) = self.policy.decide(input, false).map_err(policy_err)?;
        self.steps.borrow_mut().push(step);
        Ok(decision)
    }
}
