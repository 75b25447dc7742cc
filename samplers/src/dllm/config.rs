//! Decoding configuration: block layout, token proposal, position rule, guidance, stops.

use serde::{Deserialize, Serialize};

use super::error::{config_err, Result};

/// How a token is proposed at every masked position.
///
/// `temperature = 0` is greedy (`argmax`); otherwise `x0 = argmax(logits/T + Gumbel)` with
/// float64 Gumbel noise, which samples `softmax(logits/T)` (LLaDA arXiv 2502.09992,
/// `generate.py::add_gumbel_noise`). `top_k` / `top_p` first drop the tokens outside the `k`
/// most likely / the smallest set with mass `≥ p` (Dream arXiv 2508.15487,
/// `generation_utils.py`), so the Gumbel-max draw is top-k / top-p categorical sampling.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProposalConfig {
    /// Sampling temperature `T ≥ 0`. Default 0 (greedy, LLaDA's default).
    pub temperature: f64,
    /// Keep only the `k ≥ 1` most likely tokens. Default none.
    pub top_k: Option<usize>,
    /// Keep the smallest set of tokens with mass `≥ p`, `p ∈ (0, 1]`. Default none.
    pub top_p: Option<f64>,
}

impl Default for ProposalConfig {
    fn default() -> Self {
        Self { temperature: 0.0, top_k: None, top_p: None }
    }
}

/// Which masked positions of the current block are committed at a step.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub enum PositionRule {
    /// Confidence `p(x0)` (LLaDA `remasking = "low_confidence"`).
    LowConfidence,
    /// Confidence `U(0, 1)` (LLaDA `remasking = "random"`).
    Random,
    /// Confidence `p1 − p2`, top-1 minus top-2 probability (Dream `alg = "topk_margin"`).
    Margin,
    /// Confidence `Σ p log p`, larger = more confident (Dream `alg = "entropy"`).
    Entropy,
    /// Each masked position of the block is revealed independently with probability
    /// `1 − s/t`, `t, s` consecutive values of `linspace(1, eps, steps_per_block + 1)`, and
    /// every remaining one at the last step (Dream `alg = "origin"`).
    Origin {
        /// Final time of the schedule. Dream's default 1e-3.
        eps: f64,
    },
    /// Commit the most confident masked position plus every other masked position of the
    /// block with `p(x0) ≥ tau`; a block ends when none of its positions is masked, so
    /// `steps` is not used (Fast-dLLM arXiv 2505.22618, threshold parallel decoding).
    Threshold {
        /// Confidence threshold `τ ∈ [0, 1]`. Fast-dLLM's default 0.9.
        tau: f64,
    },
    /// Dream's `confidence_threshold` (Fast-dLLM's Dream `diffusion_generate`): each step has a
    /// budget, `m₀/N` (the block's masked count over its steps) plus the positions the previous
    /// step declined; of the budget's most confident masked positions the first is committed
    /// and the others only when `p(x0) ≥ τ`, the declined ones carried over. When the last step
    /// declines any, one more step is added with no new budget, until the block is done.
    DreamThreshold {
        /// Confidence threshold `τ ∈ [0, 1]`. Dream's default 0.9.
        tau: f64,
    },
}

impl PositionRule {
    /// Whether the rule commits LLaDA's quota per step (and so can be replaced by an
    /// order policy).
    pub fn uses_quota(&self) -> bool {
        !matches!(self, Self::Origin { .. } | Self::Threshold { .. } | Self::DreamThreshold { .. })
    }
}

/// How many positions a quota rule commits at each step of a block.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum TransferSchedule {
    /// LLaDA's: `⌊n / steps⌋` per step, the remainder one each to the first steps, fixed at
    /// the block's start (`generate.py::get_num_transfer_tokens`).
    #[default]
    Llada,
    /// Dream's: at step `i` of `N`, with `t, s` = entries `i, i + 1` of `linspace(1, eps, N + 1)`
    /// (f32, as torch computes them), commit `⌊m (1 − s/t)⌋` of the `m` positions still masked,
    /// and all of them at the last step (`diffusion_generate`, `maskgit_plus` / `topk_margin` /
    /// `entropy`). Whole-sequence decoding in Dream is `block_length = gen_length`.
    Dream {
        /// Final time of the schedule; Dream's default 1e-3.
        eps: f64,
    },
}

/// A full decoding configuration (LLaDA `generate()` arguments plus Dream's and Fast-dLLM's).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DecodeConfig {
    /// Completion length `L`. Default 128 (LLaDA).
    pub gen_length: usize,
    /// Block length; `L` must be a multiple of it; `block_length = L` is plain any-order
    /// decoding. Default 32 (LLaDA's evaluation setting).
    pub block_length: usize,
    /// Total denoising steps, a multiple of the number of blocks (unused by `threshold`).
    /// Default 128.
    pub steps: usize,
    /// Token proposal. Default greedy.
    pub proposal: ProposalConfig,
    /// Position rule. Default low-confidence.
    pub position: PositionRule,
    /// How many positions a quota rule commits per step. Default LLaDA's.
    pub schedule: TransferSchedule,
    /// Fast-dLLM's key/value cache (`none`, `prefix`, `dual`): each block's first step runs the
    /// whole sequence and records it, the later steps run part of it against the record (an
    /// approximation; arXiv 2505.22618). Needs a model that supports it (LLaDA), prompts of
    /// one length, no guidance and no order policy. Default none.
    pub kv_cache: super::cache::KvCacheMode,
    /// With `alg_temp > 0`, quota rules sample their positions without replacement from
    /// `softmax(conf / alg_temp)` instead of taking the top-n (Dream). Default 0.
    pub alg_temp: f64,
    /// Classifier-free guidance scale `g ≥ 1` in drift's one convention, diffusers' and the
    /// flow models': logits `u + g(c − u)`, `u` from the prompt replaced by mask tokens, so
    /// `g = 1` is the unguided model. `None` runs no unconditional pass. Default none.
    pub guidance: Option<f64>,
    /// LLaDA's name and convention for the same thing (`cfg_scale` in its `generate`): weight
    /// `w ≥ 0` with logits `u + (w + 1)(c − u)`, i.e. `guidance = w + 1`; kept as an alias so
    /// LLaDA recipes read as written. `Some(0.0)` runs the unconditional pass and gives the
    /// unguided logits exactly. Set at most one of the two. Default none.
    pub cfg_scale: Option<f64>,
    /// Stop tokens (EOS, EOT): the completion mask ends at the first one. Default none.
    pub stop_tokens: Vec<u32>,
    /// Freeze a row once it has committed a stop token with every earlier completion
    /// position committed, and end the rollout when every row is frozen. Default false.
    pub early_stop: bool,
}

impl Default for DecodeConfig {
    fn default() -> Self {
        Self {
            gen_length: 128,
            block_length: 32,
            steps: 128,
            proposal: ProposalConfig::default(),
            position: PositionRule::LowConfidence,
            schedule: TransferSchedule::Llada,
            kv_cache: super::cache::KvCacheMode::None,
            alg_temp: 0.0,
            guidance: None,
            cfg_scale: None,
            stop_tokens: Vec::new(),
            early_stop: false,
        }
    }
}

fn finite_at_least(field: &'static str, v: f64, min: f64) -> Result<()> {
    if !v.is_finite() || v < min {
        return Err(config_err(field, v, format!("a finite number ≥ {min}")));
    }
    Ok(())
}

impl DecodeConfig {
    /// The number of blocks, `gen_length / block_length`.
    pub fn blocks(&self) -> usize {
        self.gen_length / self.block_length.max(1)
    }

    /// The guidance weight in LLaDA's form, `w = g − 1` (the `w` of [`crate::dllm::guide`]),
    /// from `guidance` or its alias `cfg_scale`; `None` when neither is set (no unconditional
    /// pass).
    pub fn guidance_weight(&self) -> Option<f64> {
        self.cfg_scale.or(self.guidance.map(|g| g - 1.0))
    }

    /// Steps per block, `steps / blocks` (0 under `threshold`, whose steps are adaptive).
    pub fn steps_per_block(&self) -> usize {
        match self.position {
            PositionRule::Threshold { .. } => 0,
            _ => self.steps / self.blocks().max(1),
        }
    }

    /// Checks every field against its domain and against the model (`vocab_size`, `mask_id`).
    pub fn validate(&self, vocab_size: usize, mask_id: u32) -> Result<()> {
        if self.gen_length == 0 {
            return Err(config_err("gen_length", 0, "at least 1"));
        }
        if self.block_length == 0 || self.gen_length % self.block_length != 0 {
            return Err(config_err(
                "block_length",
                self.block_length,
                format!("a positive divisor of gen_length = {}", self.gen_length),
            ));
        }
        if self.position.uses_quota()
            || matches!(
                self.position,
                PositionRule::Origin { .. } | PositionRule::DreamThreshold { .. }
            )
        {
            let blocks = self.blocks();
            if self.steps == 0 || self.steps % blocks != 0 {
                return Err(config_err(
                    "steps",
                    self.steps,
                    format!("a positive multiple of the number of blocks ({blocks})"),
                ));
            }
        }
        if let PositionRule::DreamThreshold { .. } = self.position {
            let spb = self.steps_per_block();
            if self.block_length % spb != 0 {
                return Err(config_err(
                    "steps",
                    self.steps,
                    format!(
                        "steps per block ({spb}) dividing block_length = {} (Dream's \
                         confidence_threshold gives each step an equal budget)",
                        self.block_length
                    ),
                ));
            }
        }
        let p = &self.proposal;
        finite_at_least("proposal.temperature", p.temperature, 0.0)?;
        if p.top_k == Some(0) {
            return Err(config_err("proposal.top_k", 0, "at least 1"));
        }
        if let Some(top_p) = p.top_p {
            if !(top_p > 0.0 && top_p <= 1.0) {
                return Err(config_err("proposal.top_p", top_p, "a number in (0, 1]"));
            }
        }
        finite_at_least("alg_temp", self.alg_temp, 0.0)?;
        if let Some(w) = self.cfg_scale {
            finite_at_least("cfg_scale", w, 0.0)?;
        }
        if let Some(g) = self.guidance {
            finite_at_least("guidance", g, 1.0)?;
            if self.cfg_scale.is_some() {
                return Err(config_err(
                    "guidance",
                    g,
                    "unset when cfg_scale (LLaDA's alias, guidance = cfg_scale + 1) is set",
                ));
            }
        }
        if self.kv_cache != super::cache::KvCacheMode::None && self.guidance_weight().is_some() {
            return Err(config_err(
                "kv_cache",
                format!("{:?}", self.kv_cache),
                "none when guidance or cfg_scale is set (the caches hold the conditional pass only)",
            ));
        }
        if let TransferSchedule::Dream { eps } = self.schedule {
            if !(eps > 0.0 && eps < 1.0) {
                return Err(config_err("schedule.eps", eps, "a number in (0, 1)"));
            }
        }
        match self.position {
            PositionRule::Origin { eps } if !(eps > 0.0 && eps < 1.0) => {
                return Err(config_err("position.origin.eps", eps, "a number in (0, 1)"));
            }
            PositionRule::Threshold { tau } | PositionRule::DreamThreshold { tau }
                if !(0.0..=1.0).contains(&tau) =>
            {
                return Err(config_err("position.tau", tau, "a number in [0, 1]"));
            }
            _ => {}
        }
        for &t in &self.stop_tokens {
            if t as usize >= vocab_size || t == mask_id {
                return Err(config_err(
                    "stop_tokens",
                    t,
                    format!("token ids below vocab_size = {vocab_size}, not the mask id {mask_id}"),
                ));
            }
        }
        Ok(())
    }
}
