//! The dLLM RL trainer's configuration and the recipe presets (docs/algorithms.md §4).

use std::path::PathBuf;

use drift_core::advantage::AdvantageConfig;
use drift_core::loss::{
    Aggregation, KlEstimator, KlPenalty, PolicyLossConfig, RatioKind, Surrogate,
};
use drift_core::train::{AdamWConfig, LrSchedule, OptimConfig, RunSettings};
use drift_rewards::sandbox::SandboxConfig;
use drift_samplers::dllm::{DecodeConfig, KvCacheMode, PositionRule, ProposalConfig};
use serde::{Deserialize, Serialize};

use crate::error::{DllmError, Result};
use crate::estimate::EstimatorConfig;
use crate::grpo::sudoku_task::{SudokuTaskConfig, TextWorld};
use crate::model::LoraConfig;

/// A dLLM RL recipe: an estimator, a ratio and loss, an advantage, `μ` and `G`, with the
/// reference code's defaults (docs/algorithms.md §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Recipe {
    /// diffu-GRPO (d1, arXiv 2504.12216): one-step estimator, token ratio, clip 0.5, k3 KL
    /// β 0.04, token mean over the batch, `r − mean`, μ 12, G 6. On the shipped code world it
    /// learns at lr 2e-4, not at the trainer's shared 5e-5
    /// (`examples/configs/dllm_diffu_grpo.toml`; BENCHMARKS.md, session 27).
    DiffuGrpo,
    /// coupled-GRPO (DiffuCoder, arXiv 2506.20639): coupled estimator, token ratio, clip 0.5,
    /// k3 KL β 0.01, token mean over the batch, leave-one-out without std, μ 2, G 10.
    #[default]
    CoupledGrpo,
    /// ESPO (arXiv 2512.03759): ELBO Monte Carlo (2 draws), ratio `exp(ΔELBO/L)`, clip 0.2,
    /// k2 KL β 1e-3, leave-one-out without std, μ 8, G 6.
    Espo,
    /// GDPO (arXiv 2510.08554): Gauss–Legendre quadrature (2 nodes), ratio `exp(ΔELBO/L)`,
    /// clip 0.5, no KL, `r − mean`, μ 12, G 6. Its gradient is 10–30× smaller than the other
    /// estimators'; at lr 2e-4 it collapses on the code world (BENCHMARKS.md, session 27).
    Gdpo,
    /// StableDRL: ELBO per-token mean (Monte Carlo, 2 draws), self-normalised weights capped
    /// at 5, no KL, `r − mean`, μ 2, G 8.
    StableDrl,
}

/// Every recipe, in the order of docs/algorithms.md §4.
pub const RECIPES: &[Recipe] =
    &[Recipe::DiffuGrpo, Recipe::CoupledGrpo, Recipe::Espo, Recipe::Gdpo, Recipe::StableDrl];

/// What a recipe fixes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RecipeParts {
    /// The likelihood estimator.
    pub estimator: EstimatorConfig,
    /// Ratio, surrogate, KL and aggregation.
    pub loss: PolicyLossConfig,
    /// The advantage.
    pub advantage: AdvantageConfig,
    /// Inner iterations `μ` per rollout batch.
    pub inner_iterations: usize,
    /// Samples per prompt `G`.
    pub group_size: usize,
}

impl Recipe {
    /// The recipe's parts for completions of `gen_length` tokens (the fixed-length ratio's `L`).
    pub fn parts(self, gen_length: usize) -> RecipeParts {
        // d1 and DiffuCoder both average the token losses over the batch's completion
        // tokens: `(ℓ · m).sum() / m.sum()` (diffu_grpo_trainer.py, coupled_grpo.py).
        let token = |eps: f64, kl: Option<KlPenalty>| PolicyLossConfig {
            ratio: RatioKind::Token,
            surrogate: Surrogate::PpoClip { eps_low: eps, eps_high: eps },
            kl,
            aggregation: Aggregation::TokenMean,
        };
        match self {
            Self::DiffuGrpo => RecipeParts {
                estimator: EstimatorConfig::one_step(),
                loss: token(0.5, Some(KlPenalty { estimator: KlEstimator::K3, beta: 0.04 })),
                advantage: AdvantageConfig::mean_centred(),
                inner_iterations: 12,
                group_size: 6,
            },
            Self::CoupledGrpo => RecipeParts {
                estimator: EstimatorConfig::coupled(),
                loss: token(0.5, Some(KlPenalty { estimator: KlEstimator::K3, beta: 0.01 })),
                advantage: AdvantageConfig::leave_one_out(),
                inner_iterations: 2,
                group_size: 10,
            },
            Self::Espo => RecipeParts {
                estimator: EstimatorConfig::elbo_mc(),
                loss: PolicyLossConfig::espo(gen_length),
                advantage: AdvantageConfig::leave_one_out(),
                inner_iterations: 8,
                group_size: 6,
            },
            Self::Gdpo => RecipeParts {
                estimator: EstimatorConfig::quadrature(),
                loss: PolicyLossConfig::gdpo(gen_length),
                advantage: AdvantageConfig::mean_centred(),
                inner_iterations: 12,
                group_size: 6,
            },
            Self::StableDrl => RecipeParts {
                estimator: EstimatorConfig::elbo_mc(),
                loss: PolicyLossConfig::stable_drl(),
                advantage: AdvantageConfig::mean_centred(),
                inner_iterations: 2,
                group_size: 8,
            },
        }
    }
}

/// The dLLM RL trainer's configuration. Fields left unset (`None`) take the recipe's value;
/// [`DllmGrpoConfig::resolved`] fills them in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DllmGrpoConfig {
    /// The base model folder (Hugging Face layout). Default the shipped
    /// `examples/checkpoints/dllm-code-v5` (BPE tokens).
    pub base: PathBuf,
    /// The recipe. Default coupled-GRPO.
    pub recipe: Recipe,
    /// Length in RL iterations (rollout batches), seed, evaluation and checkpoint cadence,
    /// budget: `[run]`. Defaults: 40 iterations (about 25 s each alone on 2 CPU cores; the
    /// whole run 19.1 minutes, BENCHMARKS.md session 26), seed 0,
    /// evaluations at the start and the end only (`eval_every` 40: one costs about 82 s), a
    /// checkpoint every 10 (and at the end),
    /// 2 kept, no time limit (when one runs out, the run stops after that iteration, checkpoints it, then
    /// evaluates and saves the model as at `steps`).
    pub run: RunSettings,
    /// Prompts per rollout batch `P`. Default 8 (80 fresh completions behind each update at
    /// `G` 10: the shuffled-reward null's signal-free damage falls with the completions per
    /// update; BENCHMARKS.md, sessions 24–25).
    pub prompts_per_step: usize,
    /// Samples per prompt `G`. Default: the recipe's.
    pub group_size: Option<usize>,
    /// Inner iterations `μ` per rollout batch (one optimizer step each). Default 1: every
    /// update on-policy, on fresh completions (measured on the code world, BENCHMARKS.md,
    /// session 25), which also skips the old pass. The recipes' own `μ` (d1 12, DiffuCoder 2,
    /// ESPO 8, GDPO 12, StableDRL 2; docs/algorithms.md §4) is used only when this is unset
    /// (`None`, from Rust); a config reproduces a paper's with e.g. `inner_iterations = 12`.
    pub inner_iterations: Option<usize>,
    /// The likelihood estimator. Default: the recipe's.
    pub estimator: Option<EstimatorConfig>,
    /// The policy loss. Default: the recipe's.
    pub loss: Option<PolicyLossConfig>,
    /// The advantage. Default: the recipe's.
    pub advantage: Option<AdvantageConfig>,
    /// Rollout decoding. Default: gen_length 38 (the code corpus's completion region in
    /// the BPE tokens of `dllm-code-v5`), one block, 19 steps (2 tokens per step), temperature 1
    /// with low-confidence remasking, EOS as stop token, Fast-dLLM's prefix cache
    /// (`kv_cache = "prefix"`: the prompt's keys and values recorded once per block, about
    /// 1.5× faster decoding, an approximation; BENCHMARKS.md, session 24). With a Dream
    /// checkpoint the cache follows Fast-dLLM's Dream block decoder, which commits each
    /// block's first position at the block's first step (docs/algorithms.md §5).
    pub decode: DecodeConfig,
    /// Evaluation decoding: greedy, otherwise as `decode` (position rule and `kv_cache`
    /// included), in this many steps. Default 38 (one token per step).
    pub eval_steps: usize,
    /// Sequences per estimator / update forward chunk. Default 40 (the default batch of 80,
    /// `P·G`, in two chunks).
    pub micro_batch: usize,
    /// Refresh the frozen reference to the current policy every this many iterations
    /// (0 = never). Default 0.
    pub ref_refresh_every: u64,
    /// AdamW, schedule, clipping. Default lr 5e-5 after a 4-update linear warm-up, then a
    /// cosine decay to 0.1 of it at the run's last update (`{ kind = "cosine", warmup = 4,
    /// min_ratio = 0.1 }`, its `total` the run's length), wd 0, clip 1.0. From `dllm-code-v5`
    /// these defaults raise held-out items by 12.2 points (mean of 3 seeds) while the
    /// shuffled-reward null loses 4.2 (BENCHMARKS.md, session 25; at a constant 5e-5, 4 prompts
    /// and μ 2: +5.0 and −11.2, session 15); at 1e-4 seed 0 lost them (session 15);
    /// without the warm-up, AdamW's sign-like first steps move the largest token ratio to 67
    /// (session 14). The 7B references use 1e-6…5e-6; this 3.1 M model does not move there.
    /// A `linear` or `cosine` schedule given without `total` decays over the whole run
    /// (`run.steps · μ` updates), e.g. `{ kind = "cosine", warmup = 4, min_ratio = 0.1 }`.
    /// With `[optim.ema]` (e.g. `{ decay = 0.9, every = 1 }`) every evaluation scores, and the
    /// run saves, the EMA of the weights (Flow-GRPO's evaluation); rollouts use the policy.
    /// Default none.
    pub optim: OptimConfig,
    /// Items of each held-out set in each evaluation. Default 128.
    pub eval_items: usize,
    /// Sequences decoded together in an evaluation. Default 128 (the default's 128 items of
    /// each set in one batch: 50.3 s against 56.8 s in batches of 32, the same verdicts;
    /// BENCHMARKS.md, session 25).
    pub eval_batch: usize,
    /// A null control for studies: each group's rewards are permuted (keyed by seed, step and
    /// prompt) before the advantages, so the updates keep their size, their rollouts and their
    /// masks but lose the reward's direction. Logged rewards and pass rates stay the true
    /// ones. Default false.
    pub shuffle_rewards: bool,
    /// Rows of each group decoded greedily instead of sampled: the last `greedy_per_group` of
    /// the `G` completions of a prompt are its greedy decode (at the rollout's steps and
    /// position rule), the others samples at `decode.proposal.temperature`. They are scored,
    /// share the group's baseline and are trained on like the samples, so a group whose greedy
    /// completion fails while samples pass pushes the greedy mode, the one the held-out
    /// evaluation decodes, away from its failure (and one that passes sharpens it). An
    /// off-policy row: its tokens were not drawn from the policy. Default 0 (every row
    /// sampled); at most `G − 1`.
    pub greedy_per_group: usize,
    /// Train only the parameters whose name contains one of these strings (e.g. `["attn"]`:
    /// the attention projections, the full-rank analogue of a LoRA on them). The others stay
    /// at the base's values and are saved with the trained model. Default empty: every
    /// parameter. A string that matches no parameter is refused.
    pub trainable: Vec<String>,
    /// Train LoRA adapters on the block projections instead of the weights themselves
    /// (`[lora]`: [`LoraConfig`], rank 16, α 32, every block projection), as d1 trains LLaDA:
    /// the base stays frozen, so every update `ΔW = (α/r) B A` has rank ≤ r; `A` is drawn from
    /// the run's seed, `B` starts at zero. Rollouts and evaluation use the merged weights; the
    /// saved model has the adapters merged. `trainable` then selects among the adapters' tensors.
    /// Default none: full fine-tuning.
    pub lora: Option<LoraConfig>,
    /// Your own code problems instead of the code world: a JSONL file with one
    /// `{"prompt": …, "tests": [...]}` per line (optional `"split": "held_out"` for the
    /// evaluation set; a file without it is trained on and evaluated whole), scored by the same
    /// sandboxed code reward. Default none: the shipped code world.
    pub data: Option<PathBuf>,
    /// Where the code reward runs model-written programs (`[sandbox]`, drift_rewards'
    /// `SandboxConfig`). Default `mode = "auto"`: drift's namespace jail, else bubblewrap, else
    /// the run is refused; `mode = "limits"` runs them under resource limits only, with no
    /// filesystem or network jail. Also `timeout_s` (5), `memory_mb` (1024), `tmpfs_mb` (64).
    pub sandbox: SandboxConfig,
    /// The world trained on and evaluated: `"code"` (the default) or `"sudoku"` (d1's 4×4
    /// Sudoku, `[sudoku]`; `base` must then be a Sudoku model, e.g.
    /// `examples/checkpoints/dllm-sudoku4-v1`, and `decode.gen_length` fit its answer).
    pub world: TextWorld,
    /// The Sudoku task when `world = "sudoku"` ([`SudokuTaskConfig`]: size 4, the world's
    /// default clues, solved bonus 1).
    pub sudoku: SudokuTaskConfig,
}

impl Default for DllmGrpoConfig {
    fn default() -> Self {
        Self {
            base: PathBuf::from("examples/checkpoints/dllm-code-v5"),
            recipe: Recipe::default(),
            run: RunSettings {
                steps: 40,
                seed: 0,
                checkpoint_every: 10,
                keep_last: 2,
                max_seconds: None,
                eval_every: 40,
            },
            prompts_per_step: 8,
            group_size: None,
            inner_iterations: Some(1),
            estimator: None,
            loss: None,
            advantage: None,
            decode: DecodeConfig {
                gen_length: 38,
                block_length: 38,
                steps: 19,
                proposal: ProposalConfig { temperature: 1.0, ..ProposalConfig::default() },
                position: PositionRule::LowConfidence,
                stop_tokens: vec![crate::tokenizer::EOS_ID],
                kv_cache: KvCacheMode::Prefix,
                ..DecodeConfig::default()
            },
            eval_steps: 38,
            micro_batch: 40,
            ref_refresh_every: 0,
            optim: OptimConfig {
                adamw: AdamWConfig { lr: 5e-5, weight_decay: 0.0, ..AdamWConfig::default() },
                max_grad_norm: Some(1.0),
                // `total` 0: the run's length, filled by `resolved`.
                schedule: LrSchedule::Cosine { warmup: 4, total: 0, min_ratio: 0.1 },
                ..OptimConfig::default()
            },
            eval_items: 128,
            eval_batch: 128,
            shuffle_rewards: false,
            greedy_per_group: 0,
            trainable: Vec::new(),
            lora: None,
            data: None,
            sandbox: SandboxConfig::default(),
            world: TextWorld::Code,
            sudoku: SudokuTaskConfig::default(),
        }
    }
}

/// A [`DllmGrpoConfig`] with the recipe's values filled in.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedConfig {
    /// The configuration as given, but for an omitted `optim.schedule.total`, filled with the
    /// run's length in optimizer steps (`run.steps · μ`).
    pub given: DllmGrpoConfig,
    /// The estimator, loss, advantage, `μ` and `G` in force.
    pub parts: RecipeParts,
}

impl DllmGrpoConfig {
    /// Fills the unset fields from the recipe and checks every value, naming the field at fault.
    pub fn resolved(&self) -> Result<ResolvedConfig> {
        let r = self.recipe.parts(self.decode.gen_length);
        let parts = RecipeParts {
            estimator: self.estimator.unwrap_or(r.estimator),
            loss: self.loss.unwrap_or(r.loss),
            advantage: self.advantage.unwrap_or(r.advantage),
            inner_iterations: self.inner_iterations.unwrap_or(r.inner_iterations),
            group_size: self.group_size.unwrap_or(r.group_size),
        };
        let bad = |key: &'static str, value: String, expected: &str| {
            Err(DllmError::Config { key, value, expected: expected.into() })
        };
        self.run.validate()?;
        let mut given = self.clone();
        let updates = self.run.steps.saturating_mul(parts.inner_iterations as u64);
        given.optim.schedule = self.optim.schedule.over_run(updates);
        given.optim.validate()?;
        if self.prompts_per_step == 0 {
            return bad("prompts_per_step", "0".into(), "at least 1");
        }
        if parts.group_size < 2 {
            return bad(
                "group_size",
                parts.group_size.to_string(),
                "at least 2 (a group needs a baseline)",
            );
        }
        if self.greedy_per_group >= parts.group_size {
            return bad(
                "greedy_per_group",
                self.greedy_per_group.to_string(),
                &format!("at most group_size − 1 = {}", parts.group_size - 1),
            );
        }
        if parts.inner_iterations == 0 {
            return bad("inner_iterations", "0".into(), "at least 1");
        }
        if self.micro_batch == 0 {
            return bad("micro_batch", "0".into(), "at least 1");
        }
        if self.eval_batch == 0 {
            return bad("eval_batch", "0".into(), "at least 1");
        }
        let d = &self.decode;
        if d.gen_length == 0 {
            return bad("decode.gen_length", "0".into(), "at least 1");
        }
        if d.block_length == 0 || d.gen_length % d.block_length != 0 {
            return bad(
                "decode.block_length",
                d.block_length.to_string(),
                &format!("a positive divisor of decode.gen_length = {}", d.gen_length),
            );
        }
        let blocks = d.gen_length / d.block_length;
        if self.eval_steps == 0 || self.eval_steps % blocks != 0 {
            return bad(
                "eval_steps",
                self.eval_steps.to_string(),
                &format!("a positive multiple of the number of blocks ({blocks})"),
            );
        }
        parts.estimator.validate()?;
        parts.advantage.validate()?;
        parts.loss.validate()?;
        Ok(ResolvedConfig { given, parts })
    }
}
