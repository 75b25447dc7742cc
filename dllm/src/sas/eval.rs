//! Held-out puzzle accuracy of a frozen Sudoku model under a position rule or an order
//! policy.

use drift_core::rng::RngKey;
use drift_samplers::dllm::{
    decode, decode_with_policy, DecodeBatch, DecodeConfig, OrderPolicy, Trajectory,
};
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::grpo::{SudokuTextTask, TextTask};
use crate::model::DiffusionLm;
use crate::tokenizer::PAD_ID;
use drift_rewards::worlds::sudoku::SudokuItem;

/// One evaluation of an order.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct OrderEval {
    /// Puzzles scored.
    pub puzzles: usize,
    /// Fraction solved (grid valid, clues kept).
    pub solve_rate: f64,
    /// Mean fraction of empty cells filled right.
    pub cell_accuracy: f64,
    /// Mean reward (cells + solved bonus).
    pub reward_mean: f64,
}

/// Decodes every item once with `cfg` (the rule of `cfg.position`, or `policy` in its place),
/// rows keyed by `seed` from 0, in batches of `batch`, and scores them.
pub fn evaluate_order(
    model: &DiffusionLm,
    task: &SudokuTextTask,
    items: &[SudokuItem],
    cfg: &DecodeConfig,
    policy: Option<&dyn OrderPolicy>,
    batch: usize,
    seed: u64,
) -> Result<OrderEval> {
    let (mut solved, mut cells, mut reward) = (0usize, 0.0, 0.0);
    for (c, chunk) in items.chunks(batch.max(1)).enumerate() {
        let prompts = chunk.iter().map(|i| task.prompt_ids(i)).collect::<Result<Vec<_>>>()?;
        let b = DecodeBatch {
            prompts: &prompts,
            group_size: 1,
            pad_id: PAD_ID,
            padding: model.config().padding(),
            first_row: (c * batch.max(1)) as u64,
            greedy_per_group: 0,
        };
        let key = RngKey::new(seed).stream("sas/eval");
        let t = match policy {
            Some(p) => decode_with_policy(model, cfg, &b, key, model.device(), p)?,
            None => decode(model, cfg, &b, key, model.device())?,
        };
        for s in task.score(chunk, &completion_texts(task, &t)?) {
            solved += usize::from(s.passed);
            cells += s.components[0].1;
            reward += s.reward;
        }
    }
    let n = items.len().max(1) as f64;
    Ok(OrderEval {
        puzzles: items.len(),
        solve_rate: solved as f64 / n,
        cell_accuracy: cells / n,
        reward_mean: reward / n,
    })
}

/// The completion text of every row of `t` (up to its first EOS).
pub fn completion_texts(task: &SudokuTextTask, t: &Trajectory) -> Result<Vec<String>> {
    let pl = t.prompt_len;
    t.tokens.to_vec2::<u32>()?.iter().map(|r| task.completion_text(&r[pl..])).collect()
}
