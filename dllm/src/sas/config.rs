//! The SAS trainer's configuration (`drift train sas`), with documented defaults.

use std::path::PathBuf;

use drift_core::advantage::AdvantageConfig;
use drift_core::loss::{Aggregation, PolicyLossConfig, RatioKind, Surrogate};
use drift_core::train::{AdamWConfig, LrSchedule, OptimConfig, RunSettings};
use drift_samplers::dllm::{DecodeConfig, PositionRule, ProposalConfig};
use serde::{Deserialize, Serialize};

use super::policy::SasPolicyConfig;
use crate::error::{DllmError, Result};
use crate::grpo::SudokuTaskConfig;

/// Everything `drift train sas` reads from its TOML file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SasConfig {
    /// The frozen denoiser (a Sudoku model folder). Default
    /// `examples/checkpoints/dllm-sudoku4-v1`.
    pub base: PathBuf,
    /// The Sudoku task (`[sudoku]`): size 4, 5 clues (the shipped base solves 30% of such
    /// held-out puzzles under low-confidence decoding), solved bonus 1.
    pub sudoku: SudokuTaskConfig,
    /// The order policy's shape (`[policy]`): hidden 32, temperature 1, starting at the
    /// low-confidence heuristic (`init_linear = [5, 0, 0, 0, 0, 0]`: the top-1 probability
    /// weighted 5, the MLP's output 0). Over 3 seeds this start ended 27.6% against 26.3% from
    /// the uniform start (all weights 0) and never fell below the heuristic (BENCHMARKS.md,
    /// "Sudoku").
    pub policy: SasPolicyConfig,
    /// Iterations, seed, checkpoints (`[run]`). Default 60 iterations, a checkpoint every 20.
    pub run: RunSettings,
    /// Puzzles per iteration `P`. Default 8.
    pub puzzles_per_step: usize,
    /// Orderings per puzzle `G` (the GRPO group). Default 8.
    pub group_size: usize,
    /// Decoding: the canvas and the quota (LLaDA's count per step). Tokens are taken greedily
    /// (temperature 0), so the order is the only randomness of a rollout. Default 28
    /// positions (a 4×4 answer with its EOS in the BPE of `dllm-sudoku4-v1`), one block, 28
    /// steps (one position per step), EOS as stop token.
    pub decode: DecodeConfig,
    /// Weight of the task reward `w_task` in `r = w_task · task reward + λ · dense`. Default 1
    /// (0 trains on the dense self-aware term alone).
    pub task_weight: f64,
    /// Weight λ of the dense self-aware term: `r = task reward + λ · (1/L) Σ log p(committed
    /// token)` under the frozen denoiser at its commit step (a negative weight rewards
    /// unlikely commits: the learnability test's flipped control). Default 0.1.
    pub dense_weight: f64,
    /// The group advantage. Default GRPO's `(r − mean)/std`.
    pub advantage: AdvantageConfig,
    /// PPO clip ε of the policy loss over decoding steps (each step one action; token ratio,
    /// token mean, no KL: the policy has no reference; [`SasConfig::loss`]). Default 0.2.
    pub clip_eps: f64,
    /// Updates per rollout batch `μ`. Default 2.
    pub inner_iterations: usize,
    /// AdamW and schedule. Default lr 1e-2 constant after 2 warm-up updates, clip 1.
    pub optim: OptimConfig,
    /// Held-out puzzles per evaluation. Default 256.
    pub eval_items: usize,
    /// The shuffled-reward null: rewards permuted within each group before the advantages.
    /// Default false.
    pub shuffle_rewards: bool,
}

impl Default for SasConfig {
    fn default() -> Self {
        Self {
            base: PathBuf::from("examples/checkpoints/dllm-sudoku4-v1"),
            sudoku: SudokuTaskConfig { clues: 5, ..SudokuTaskConfig::default() },
            policy: SasPolicyConfig {
                init_linear: [5.0, 0.0, 0.0, 0.0, 0.0, 0.0],
                ..SasPolicyConfig::default()
            },
            run: RunSettings {
                steps: 60,
                seed: 0,
                checkpoint_every: 20,
                keep_last: 2,
                max_seconds: None,
                eval_every: 0,
            },
            puzzles_per_step: 8,
            group_size: 8,
            decode: DecodeConfig {
                gen_length: 28,
                block_length: 28,
                steps: 28,
                position: PositionRule::LowConfidence,
                proposal: ProposalConfig { temperature: 0.0, ..ProposalConfig::default() },
                stop_tokens: vec![crate::tokenizer::EOS_ID],
                ..DecodeConfig::default()
            },
            task_weight: 1.0,
            dense_weight: 0.1,
            advantage: AdvantageConfig::grpo(),
            clip_eps: 0.2,
            inner_iterations: 2,
            optim: OptimConfig {
                adamw: AdamWConfig { lr: 1e-2, weight_decay: 0.0, ..AdamWConfig::default() },
                max_grad_norm: Some(1.0),
                schedule: LrSchedule::ConstantWithWarmup { warmup: 2 },
                ..OptimConfig::default()
            },
            eval_items: 256,
            shuffle_rewards: false,
        }
    }
}

impl SasConfig {
    /// Optimizer steps of the whole run, `run.steps · inner_iterations`: a `linear` or
    /// `cosine` schedule given without `total` decays over them.
    pub fn updates(&self) -> u64 {
        self.run.steps * self.inner_iterations as u64
    }

    /// The core policy loss: each decoding step one action, PPO clip `clip_eps`, token mean
    /// over the steps of the batch, no KL.
    pub fn loss(&self) -> PolicyLossConfig {
        PolicyLossConfig {
            ratio: RatioKind::Token,
            surrogate: Surrogate::PpoClip { eps_low: self.clip_eps, eps_high: self.clip_eps },
            kl: None,
            aggregation: Aggregation::TokenMean,
        }
    }

    /// Checks every value serde cannot, naming the field at fault.
    pub fn validate(&self) -> Result<()> {
        let bad = |key: &'static str, value: String, expected: &str| {
            Err(DllmError::Config { key, value, expected: expected.into() })
        };
        self.run.validate()?;
        self.optim.over_run(self.updates()).validate()?;
        self.policy.validate()?;
        self.loss().validate()?;
        if self.puzzles_per_step == 0 {
            return bad("puzzles_per_step", "0".into(), "at least 1");
        }
        if self.group_size < 2 {
            return bad("group_size", self.group_size.to_string(), "at least 2");
        }
        if self.inner_iterations == 0 {
            return bad("inner_iterations", "0".into(), "at least 1");
        }
        if !self.decode.position.uses_quota() {
            return bad(
                "decode.position",
                format!("{:?}", self.decode.position),
                "a quota rule (low_confidence, margin, entropy, random): the policy replaces it",
            );
        }
        if !self.task_weight.is_finite() {
            return bad("task_weight", self.task_weight.to_string(), "finite");
        }
        if !self.dense_weight.is_finite() {
            return bad("dense_weight", self.dense_weight.to_string(), "finite");
        }
        Ok(())
    }
}
