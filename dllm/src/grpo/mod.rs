//! dLLM RL (docs/algorithms.md §3–4): one trainer for diffu-GRPO, coupled-GRPO, ESPO, GDPO and
//! StableDRL, each a [`Recipe`] — a likelihood estimator ([`crate::estimate`]) with the shared
//! core's advantage and policy loss.
//!
//! One iteration: decode `P` prompts × `G` samples with the frozen view of the policy
//! (drift-samplers' `decode`), score them with the task, compute per-prompt advantages,
//! compute the old (and, with a KL, the reference) log-probs once per inner iteration with
//! that iteration's masks, then run `μ` inner iterations of micro-batched updates, one
//! optimizer step each. With `μ = 1` the first ratio is exactly 1 (tested): old and current
//! passes use the same weights, kernels, masks and micro-batches.

pub mod config;
pub mod eval;
pub mod rollout;
pub mod sudoku_task;
pub mod task;
#[cfg(test)]
mod tests;
pub mod trainer;
pub mod update;

pub use config::{DllmGrpoConfig, Recipe, RecipeParts, ResolvedConfig, RECIPES};
pub use eval::{
    decode_and_score, decode_and_score_keyed, decode_and_score_ordered, evaluate, pass_at_k,
    sample_pass_counts, EvalReport, ScoredBatch,
};
pub use rollout::{sample_batch, RolloutBatch};
pub use sudoku_task::{SudokuTaskConfig, SudokuTextTask, TextWorld};
pub use task::{CodeTask, TaskScore, TextTask};
pub use trainer::{train_dllm_grpo, DllmGrpoReport, Evaluation};
pub use update::{batch_log_probs, update, UpdateReport};
