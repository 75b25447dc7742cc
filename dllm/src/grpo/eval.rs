//! Held-out evaluation of a dLLM policy: greedy decoding and the task's pass rate.

use std::time::Instant;

use drift_core::rng::RngKey;
use drift_samplers::dllm::{
    decode, DecodeBatch, DecodeConfig, Padding, ProposalConfig, Trajectory,
};
use serde::{Deserialize, Serialize};

use super::task::{TaskScore, TextTask};
use crate::error::Result;
use crate::model::DiffusionLm;
use crate::tokenizer::PAD_ID;

/// What an evaluation measured.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct EvalReport {
    /// Items scored.
    pub items: usize,
    /// Fraction of items solved.
    pub pass_rate: f64,
    /// Mean reward.
    pub reward_mean: f64,
    /// Wall time in seconds.
    pub seconds: f64,
}

/// One batch of greedy decodes: the sampler's trajectory, the completions' text and their
/// scores.
#[derive(Debug, Clone)]
pub struct ScoredBatch {
    /// The decoding trajectory (tokens, commit steps, log-probs, model evaluations).
    pub trajectory: Trajectory,
    /// The completions' text, row order.
    pub completions: Vec<String>,
    /// Their scores, row order.
    pub scores: Vec<TaskScore>,
}

/// Decodes each item once with `decode_cfg` made greedy (temperature 0) in batches of
/// `batch` rows (keys row 0 onward in every batch), and scores each completion.
pub fn decode_and_score<T: TextTask>(
    model: &DiffusionLm,
    task: &T,
    items: &[T::Item],
    decode_cfg: &DecodeConfig,
    batch: usize,
) -> Result<Vec<ScoredBatch>> {
    let cfg = DecodeConfig {
        proposal: ProposalConfig { temperature: 0.0, ..decode_cfg.proposal },
        ..decode_cfg.clone()
    };
    let mut out = Vec::new();
    for chunk in items.chunks(batch.max(1)) {
        let prompts = chunk.iter().map(|i| task.prompt_ids(i)).collect::<Result<Vec<_>>>()?;
        let b = DecodeBatch {
            prompts: &prompts,
            group_size: 1,
            pad_id: PAD_ID,
            padding: Padding::Visible,
            first_row: 0,
        };
        let trajectory = decode(model, &cfg, &b, RngKey::new(0), model.device())?;
        let pl = trajectory.prompt_len;
        let completions = trajectory
            .tokens
            .to_vec2::<u32>()?
            .iter()
            .map(|r| task.completion_text(&r[pl..]))
            .collect::<Result<Vec<_>>>()?;
        let scores = task.score(chunk, &completions);
        out.push(ScoredBatch { trajectory, completions, scores });
    }
    Ok(out)
}

/// Decodes each item once with `decode` made greedy (temperature 0, the same position rule,
/// `steps` steps) in batches of `batch` rows, and scores it. Returns the report and every
/// (completion, score).
pub fn evaluate<T: TextTask>(
    model: &DiffusionLm,
    task: &T,
    items: &[T::Item],
    decode_cfg: &DecodeConfig,
    steps: usize,
    batch: usize,
) -> Result<(EvalReport, Vec<(String, TaskScore)>)> {
    let t0 = Instant::now();
    let cfg = DecodeConfig { steps, ..decode_cfg.clone() };
    let out: Vec<(String, TaskScore)> = decode_and_score(model, task, items, &cfg, batch)?
        .into_iter()
        .flat_map(|b| b.completions.into_iter().zip(b.scores))
        .collect();
    let n = out.len().max(1) as f64;
    let report = EvalReport {
        items: out.len(),
        pass_rate: out.iter().filter(|(_, s)| s.passed).count() as f64 / n,
        reward_mean: out.iter().map(|(_, s)| s.reward).sum::<f64>() / n,
        seconds: t0.elapsed().as_secs_f64(),
    };
    Ok((report, out))
}
