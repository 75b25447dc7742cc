//! The Flow-GRPO trainer's configuration, with the reference defaults (docs/algorithms.md §8).

use std::collections::BTreeMap;
use std::path::PathBuf;

use drift_core::advantage::AdvantageConfig;
use drift_core::loss::PolicyLossConfig;
use drift_core::train::{AdamWConfig, EmaConfig, OptimConfig, RunSettings};
use drift_samplers::flow::{RolloutConfig, ScheduleConfig, StepKind};
use serde::{Deserialize, Serialize};

use super::shapes::RewardTerm;
use crate::error::{FlowModelError, Result};

/// Which std Flow-GRPO's Gaussian-mean KL `‖μ − μ_ref‖² / (2 s²)` divides by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum KlStd {
    /// The SDE's `σ_t`, as Flow-GRPO's code does (the transition's `√−Δt` is left out; β
    /// absorbs it). Default.
    #[default]
    SigmaT,
    /// The transition's true std `σ_t √−Δt`: the exact KL between the two Gaussians.
    Transition,
}

/// Everything a Flow-GRPO run reads from its TOML file. Every field is optional; the defaults
/// are Flow-GRPO's (arXiv 2505.05470, `config/grpo.py`) scaled to the shipped 1.3 M DiT where
/// noted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FlowGrpoConfig {
    /// The base model directory (`config.json` + `model.safetensors`): the initial policy and
    /// the frozen KL reference. Default `examples/checkpoints/flow-shapes-v2`.
    pub base: PathBuf,
    /// Length in RL iterations (rollout batch + its updates), seed (prompts, noise),
    /// evaluation and checkpoint cadence, budget: `[run]`. Defaults: 40 iterations, seed 0,
    /// an evaluation every 20 iterations (and always at the start and the end), a checkpoint
    /// every 10 (and at the end), 2 kept, no time limit (when one runs out, the run stops after
    /// that iteration, checkpoints it, then evaluates and saves the model as at `steps`).
    pub run: RunSettings,
    /// Prompts per iteration `P`. Default 16 (8 gained 14.5 points, 16 gained 19.0 at seed 0:
    /// BENCHMARKS.md, session 11).
    pub prompts_per_step: usize,
    /// Images per prompt `G`. Default 8 (Flow-GRPO: 24 on 8 GPUs, scaled down).
    pub group_size: usize,
    /// The reward: a weighted sum of named rewards (for the shapes world: `geneval`,
    /// `geneval_strict`, `unrequested_objects`, `jpeg_compressibility`,
    /// `jpeg_incompressibility`). Default `[{ name = "geneval", weight = 1 }]`, the GenEval-style
    /// partial score. `unrequested_objects` prices objects the prompt did not ask for (the
    /// policy learns to fill the canvas under `geneval` alone); at weight 0.5 it made the main
    /// job worse (BENCHMARKS.md), so it is not in the default.
    pub rewards: Vec<RewardTerm>,
    /// The training (rollout) schedule: `N_train` steps with the SD3 shift. Default 10 steps,
    /// shift 3 (denoising reduction).
    pub schedule: ScheduleConfig,
    /// ODE steps of evaluation `N_eval`. Default 40.
    pub eval_steps: usize,
    /// The rollout's stochastic step, log-prob reduction and optional window
    /// (Flow-GRPO-Fast / MixGRPO). Default the Flow-GRPO SDE, `a = 0.7`, mean over elements,
    /// on the first 3 of the 10 steps only.
    pub rollout: RolloutConfig,
    /// Classifier-free guidance scale `w` in rollout, training and evaluation; 1 is none.
    /// Default 1.0 (Flow-GRPO uses 4.5 for SD3.5-M; the shipped DiT is best without).
    pub guidance: f64,
    /// Fraction of the stochastic transitions trained, from the first: `⌊N·f⌋` (the last,
    /// near-clean one is excluded). Default 0.99.
    pub train_fraction: f64,
    /// Advantages per prompt group. Default Flow-GRPO's GenEval setting: each group's mean as
    /// the baseline, divided by the population std of the whole batch (`global_std`),
    /// `eps = 1e-4`, clip 5.
    pub advantage: AdvantageConfig,
    /// The loss over transitions. Default Flow-GRPO's: per-transition PPO clip `ε = 1e-4`,
    /// Gaussian-mean KL with β 0.04, mean over transitions.
    pub loss: PolicyLossConfig,
    /// The std of the KL. Default `sigma_t` (the reference code).
    pub kl_std: KlStd,
    /// Samples whose advantage is exactly 0 (degenerate groups) are left out of the loss.
    /// Default true.
    pub mask_zero_advantage: bool,
    /// Optimizer steps per rollout batch (the batch is split into this many mini-batches).
    /// Default 1: every update is on-policy. Flow-GRPO uses 2; measured here (shapes world,
    /// seed 0, 30 iterations) the second update is 20–38% clipped at `ε = 1e-4` and held-out
    /// reward rose less (0.300 → 0.316 with 2, → 0.404 at 20 iterations with 1).
    pub updates_per_batch: usize,
    /// Passes over each rollout batch `μ`. Default 1.
    pub inner_epochs: usize,
    /// Samples per forward/backward pass (gradient accumulation inside an update). Default 16.
    pub micro_batch: usize,
    /// Stack every trained step of a micro-batch into one forward and backward pass
    /// (`micro_batch × steps` rows) instead of one pass per step: fewer, larger passes, for
    /// accelerators (measured on the 2-core CPU: no faster, 12.5 s vs 12 s per update). A
    /// batch of another size rounds differently in the last bits, so the first ratio is 1
    /// only to about 1e-7 instead of exactly. Default false (exactly on-policy).
    pub stack_steps: bool,
    /// AdamW, schedule, clipping, EMA. Default lr 2e-4 (under GenEval's rule it gained +16.1
    /// held-out points at seed 0 against 1e-4's +12.3, 60 iterations at 1e-4 +15.0, and its
    /// shuffled-reward nulls lost 7–9 points in 3 seeds; BENCHMARKS.md, session 28; 1e-3
    /// collapsed the v2 base in 20 iterations), Adam eps 1e-6 (near the ~3e-6 per-weight
    /// gradient scale, so updates without signal stay small: the shuffled-reward null lost 10
    /// points instead of 21), wd 1e-4, clip 1.0, EMA 0.9 every step.
    pub optim: OptimConfig,
    /// Held-out prompts evaluated at the intermediate evaluations; the first and the last
    /// evaluation always use every held-out prompt. Default 96.
    pub eval_prompts: usize,
    /// Prompts of the diversity measure (first and last evaluation). Default 8.
    pub diversity_prompts: usize,
    /// Samples per prompt of the diversity measure. Default 4.
    pub diversity_samples: usize,
    /// A null control for studies: each group's rewards are permuted (keyed by seed, step and
    /// prompt) before the advantages, so the updates keep their size, their rollouts and
    /// their zero-advantage masks but lose the reward's direction. Logged rewards and strict
    /// accuracies stay the true ones. Default false.
    pub shuffle_rewards: bool,
    /// The parameters trained: those whose name contains any of these strings (`"attn"`: the
    /// attention projections, the full-rank analogue of Flow-GRPO's LoRA target; `"ada"`: the
    /// adaLN modulation). The others stay at the base's values. Default empty: every parameter.
    /// A string that matches no parameter is refused.
    pub trainable: Vec<String>,
    /// A JSONL prompt file (`{"prompt": …, "category": …, "split": …}` per line, the shapes
    /// grammar): lines tagged `"split": "held_out"` are the evaluation set, every other line a
    /// training prompt; a file without held-out lines is evaluated on the world's held-out
    /// split. Default none: the shapes world's own split.
    pub prompts: Option<PathBuf>,
    /// Images per category of the held-out evaluation (each category's held-out prompts
    /// repeated to at least this many; every prompt at least once). Default 48.
    pub eval_images_per_category: usize,
    /// Draw weights of the training prompts' GenEval categories, e.g.
    /// `{ position = 2, color_attr = 2 }`: a category is drawn with probability `w / Σ w`, then
    /// a prompt of it uniformly; a category not named weighs 1. Default empty: every category
    /// equally often (GenEval scores the mean over categories).
    pub category_weights: BTreeMap<String, f64>,
    /// BranchGRPO: tree rollouts instead of `G` independent samples per prompt, their rewards
    /// fused up the tree, advantages per `(prompt, depth)`, every (kept) edge trained
    /// ([`crate::branch::BranchConfig`]; presets [`FlowGrpoConfig::branch_grpo`],
    /// `branch_grpo_pruned`, `branch_grpo_mix`). Default none: Flow-GRPO.
    pub branch: Option<crate::branch::BranchConfig>,
    /// How to train an SD3 / SD3.5 base (`base` a diffusers folder): its LoRA, latent size,
    /// weight dtype and prompt-embedding cache. Default none; required for such a base.
    pub sd3: Option<crate::sd3::Sd3TrainConfig>,
}

impl Default for FlowGrpoConfig {
    /// The shipped shapes world's preset: flow_grpo's loss and advantage with the settings the
    /// sweep on flow-shapes-v2 chose (BENCHMARKS.md, "Flow-GRPO on the shapes world v2"):
    /// the SDE only on the first 3 of 10 steps (Flow-GRPO-Fast; ODE after, so no SDE noise
    /// is left in the image the verifier sees, and 3 trained transitions instead of 9),
    /// advantages scaled by the batch std (flow_grpo's GenEval `global_std`), 16 prompts × 8
    /// images per iteration, lr 2e-4 with Adam eps 1e-6.
    fn default() -> Self {
        let mut advantage = AdvantageConfig::flow_grpo();
        advantage.scale = drift_core::advantage::Scale::BatchStd;
        Self {
            base: PathBuf::from("examples/checkpoints/flow-shapes-v2"),
            run: RunSettings {
                steps: 40,
                seed: 0,
                checkpoint_every: 10,
                keep_last: 2,
                max_seconds: None,
                eval_every: 20,
            },
            prompts_per_step: 16,
            group_size: 8,
            rewards: vec![RewardTerm::named("geneval", 1.0)],
            schedule: ScheduleConfig::default(),
            eval_steps: 40,
            rollout: RolloutConfig {
                window: Some(drift_samplers::flow::Window { start: 0, len: 3 }),
                ..RolloutConfig::default()
            },
            guidance: 1.0,
            train_fraction: 0.99,
            advantage,
            loss: PolicyLossConfig::flow_grpo(),
            kl_std: KlStd::SigmaT,
            mask_zero_advantage: true,
            updates_per_batch: 1,
            inner_epochs: 1,
            micro_batch: 16,
            stack_steps: false,
            optim: OptimConfig {
                adamw: AdamWConfig {
                    lr: 2e-4,
                    eps: 1e-6,
                    weight_decay: 1e-4,
                    ..AdamWConfig::default()
                },
                max_grad_norm: Some(1.0),
                ema: Some(EmaConfig { decay: 0.9, every: 1 }),
                ..OptimConfig::default()
            },
            eval_prompts: 96,
            diversity_prompts: 8,
            diversity_samples: 4,
            shuffle_rewards: false,
            trainable: Vec::new(),
            prompts: None,
            eval_images_per_category: 48,
            category_weights: BTreeMap::new(),
            branch: None,
            sd3: None,
        }
    }
}

impl FlowGrpoConfig {
    /// flow_grpo's GenEval recipe for SD3.5-Medium (`config/grpo.py:geneval_sd3` on 32 GPUs),
    /// for users fine-tuning real checkpoints: 48 prompts × 24 images per iteration, two
    /// optimizer steps per batch (gradient accumulation over half the batch), advantages over
    /// each prompt's group scaled by the std of the whole batch (`global_std = True`), PPO clip
    /// `ε = 1e-4`, Gaussian-mean KL β 0.04, lr 3e-4 (LoRA in the reference), EMA, CFG 4.5,
    /// 10 SDE steps at noise level 0.7 training the first 99 %, 40-step evaluation. The
    /// shipped shapes world's own preset is [`FlowGrpoConfig::default`], decided by the sweep
    /// in BENCHMARKS.md.
    pub fn flow_grpo_sd35() -> Self {
        let mut advantage = AdvantageConfig::flow_grpo();
        advantage.scale = drift_core::advantage::Scale::BatchStd;
        Self {
            prompts_per_step: 48,
            group_size: 24,
            guidance: 4.5,
            updates_per_batch: 2,
            advantage,
            loss: PolicyLossConfig::flow_grpo(),
            rollout: RolloutConfig::default(),
            schedule: ScheduleConfig::default(),
            train_fraction: 0.99,
            eval_steps: 40,
            optim: OptimConfig {
                adamw: AdamWConfig { lr: 3e-4, weight_decay: 1e-4, ..AdamWConfig::default() },
                max_grad_norm: Some(1.0),
                ema: Some(EmaConfig { decay: 0.9, every: 1 }),
                ..OptimConfig::default()
            },
            ..Self::default()
        }
    }
}

fn bad(field: &'static str, value: impl ToString, expected: &str) -> FlowModelError {
    FlowModelError::Config { field, value: value.to_string(), expected: expected.into() }
}

impl FlowGrpoConfig {
    /// Samples per rollout batch, `P · G`.
    pub fn batch_size(&self) -> usize {
        self.prompts_per_step * self.group_size
    }

    /// Optimizer steps of the whole run, `run.steps · inner_epochs · updates_per_batch`.
    pub fn updates(&self) -> u64 {
        self.run.steps * (self.inner_epochs * self.updates_per_batch) as u64
    }

    /// `optim` with a `linear` or `cosine` schedule given without `total` decaying over the
    /// run's [`FlowGrpoConfig::updates`] ([`OptimConfig::over_run`]).
    pub fn optim_over_run(&self) -> OptimConfig {
        self.optim.over_run(self.updates())
    }

    /// The trained transitions `0..⌊N·train_fraction⌋` (at least one).
    pub fn trained_steps(&self) -> usize {
        ((self.schedule.steps as f64 * self.train_fraction).floor() as usize)
            .clamp(1, self.schedule.steps.max(1))
    }

    /// Checks every field's domain, naming the field at fault.
    pub fn validate(&self) -> Result<()> {
        self.run.validate()?;
        self.optim_over_run().validate()?;
        // Every reward term builds (names known, weights finite, an `http` term's service
        // configured); nothing is contacted yet.
        super::shapes::shapes_reward(&self.rewards)?;
        if let Some(sd3) = &self.sd3 {
            sd3.validate()?;
        }
        if self.prompts_per_step == 0 {
            return Err(bad("prompts_per_step", 0, "at least 1"));
        }
        if self.group_size < 2 {
            return Err(bad(
                "group_size",
                self.group_size,
                "at least 2 (a group needs a baseline)",
            ));
        }
        if self.schedule.steps == 0 || self.eval_steps == 0 {
            return Err(bad("schedule.steps / eval_steps", 0, "at least 1"));
        }
        if !(self.train_fraction > 0.0 && self.train_fraction <= 1.0) {
            return Err(bad("train_fraction", self.train_fraction, "a number in (0, 1]"));
        }
        if !(self.guidance.is_finite() && self.guidance >= 0.0) {
            return Err(bad("guidance", self.guidance, "a finite number >= 0"));
        }
        if self.updates_per_batch == 0 || self.updates_per_batch > self.batch_size() {
            return Err(bad(
                "updates_per_batch",
                self.updates_per_batch,
                "between 1 and prompts_per_step * group_size",
            ));
        }
        if self.eval_images_per_category == 0 {
            return Err(bad("eval_images_per_category", 0, "at least 1"));
        }
        if self.inner_epochs == 0 || self.micro_batch == 0 {
            return Err(bad("inner_epochs / micro_batch", 0, "at least 1"));
        }
        if !self.rollout.step.is_stochastic() {
            return Err(bad(
                "rollout.step",
                format!("{:?}", self.rollout.step),
                "a stochastic step (noise level > 0): ODE steps have no log-probability",
            ));
        }
        if self.loss.kl.is_some_and(|k| k.estimator != drift_core::loss::KlEstimator::Precomputed) {
            return Err(bad(
                "loss.kl.estimator",
                format!("{:?}", self.loss.kl.map(|k| k.estimator)),
                "precomputed (Flow-GRPO's Gaussian-mean KL)",
            ));
        }
        if self.loss.kl.is_some()
            && self.kl_std == KlStd::SigmaT
            && matches!(self.rollout.step, StepKind::Cps { .. })
        {
            // CPS has no σ_t (its step reports 0): the KL's 1 / (2 σ_t²) would be infinite.
            return Err(bad(
                "kl_std",
                "sigma_t",
                "\"transition\" with rollout.step.kind = \"cps\" and a KL term (CPS has no sigma_t)",
            ));
        }
        self.rollout.step.validate()?;
        self.advantage.validate()?;
        self.loss.validate()?;
        if let Some(branch) = &self.branch {
            branch.validate(self.schedule.steps, &self.rollout, self.group_size)?;
            if self.stack_steps {
                return Err(bad(
                    "stack_steps",
                    true,
                    "false with `branch` (a tree's edges are re-scored one step at a time)",
                ));
            }
        }
        Ok(())
    }
}
