//! Held-out evaluation of a dLLM policy: greedy decoding and the task's pass rate.

use std::time::Instant;

use drift_core::rng::RngKey;
use drift_samplers::dllm::{
    decode, decode_with_policy, DecodeBatch, DecodeConfig, OrderPolicy, ProposalConfig, Trajectory,
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
    decode_and_score_keyed(model, task, items, &cfg, batch, 0)
}

/// Decodes each item once with `decode_cfg` as given (its temperature and position rule; the
/// random rule and sampled proposals keyed by `seed`, rows from 0 in every batch) in batches
/// of `batch` rows, and scores each completion.
pub fn decode_and_score_keyed<T: TextTask>(
    model: &DiffusionLm,
    task: &T,
    items: &[T::Item],
    decode_cfg: &DecodeConfig,
    batch: usize,
    seed: u64,
) -> Result<Vec<ScoredBatch>> {
    decode_and_score_ordered(model, task, items, decode_cfg, batch, seed, None)
}

/// [`decode_and_score_keyed`] with `order` (a learned order policy such as SAS's) choosing the
/// positions in place of `decode_cfg.position`, which must then be a quota rule.
pub fn decode_and_score_ordered<T: TextTask>(
    model: &DiffusionLm,
    task: &T,
    items: &[T::Item],
    decode_cfg: &DecodeConfig,
    batch: usize,
    seed: u64,
    order: Option<&dyn OrderPolicy>,
) -> Result<Vec<ScoredBatch>> {
    let mut out = Vec::new();
    for chunk in items.chunks(batch.max(1)) {
        let (trajectory, completions) =
            decode_texts(model, task, chunk, decode_cfg, (1, 0, seed), order)?;
        let scores = task.score(chunk, &completions);
        out.push(ScoredBatch { trajectory, completions, scores });
    }
    Ok(out)
}

/// Decodes `group` completions of each of `items` in one batch (rows keyed from `first_row`
/// under `seed`; `order` choosing the positions when given) and returns the trajectory with
/// each row's completion text.
fn decode_texts<T: TextTask>(
    model: &DiffusionLm,
    task: &T,
    items: &[T::Item],
    cfg: &DecodeConfig,
    (group, first_row, seed): (usize, u64, u64),
    order: Option<&dyn OrderPolicy>,
) -> Result<(Trajectory, Vec<String>)> {
    let prompts = items.iter().map(|i| task.prompt_ids(i)).collect::<Result<Vec<_>>>()?;
    let b = DecodeBatch {
        prompts: &prompts,
        group_size: group,
        pad_id: PAD_ID,
        padding: model.config().padding(),
        first_row,
        greedy_per_group: 0,
    };
    let key = RngKey::new(seed);
    let trajectory = match order {
        Some(p) => decode_with_policy(model, cfg, &b, key, model.device(), p)?,
        None => decode(model, cfg, &b, key, model.device())?,
    };
    let pl = trajectory.prompt_len;
    let completions = trajectory
        .tokens
        .to_vec2::<u32>()?
        .iter()
        .map(|r| task.completion_text(&r[pl..]))
        .collect::<Result<Vec<_>>>()?;
    Ok((trajectory, completions))
}

/// The unbiased pass@k estimate of one item from `n` samples of which `c` passed (Chen et al.
/// 2021, "Evaluating large language models trained on code", arXiv 2107.03374):
/// `1 − C(n − c, k) / C(n, k)`, computed as `1 − Π_{i = n−c+1}^{n} (1 − k / i)`. `None` when
/// `k` is 0 or above `n`.
pub fn pass_at_k(n: usize, c: usize, k: usize) -> Option<f64> {
    if k == 0 || k > n {
        return None;
    }
    if n - c.min(n) < k {
        return Some(1.0);
    }
    let product: f64 = (n - c.min(n) + 1..=n).map(|i| 1.0 - k as f64 / i as f64).product();
    Some(1.0 - product)
}

/// Decodes each item `samples` times with `decode_cfg` as given (its proposal temperature,
/// position rule and steps: the rollout's sampling; every draw keyed by `seed`) in batches of
/// about `batch` rows, and returns how many of each item's samples pass, in item order: the
/// counts [`pass_at_k`] reads. `order`, when given, chooses the positions in place of the rule.
pub fn sample_pass_counts<T: TextTask>(
    model: &DiffusionLm,
    task: &T,
    items: &[T::Item],
    decode_cfg: &DecodeConfig,
    (samples, batch, seed): (usize, usize, u64),
    order: Option<&dyn OrderPolicy>,
) -> Result<Vec<usize>> {
    let samples = samples.max(1);
    let per_chunk = (batch / samples).max(1);
    let mut counts = Vec::with_capacity(items.len());
    for (c, chunk) in items.chunks(per_chunk).enumerate() {
        let first_row = (c * per_chunk * samples) as u64;
        let (_, completions) =
            decode_texts(model, task, chunk, decode_cfg, (samples, first_row, seed), order)?;
        let repeated: Vec<T::Item> =
            chunk.iter().flat_map(|i| std::iter::repeat_n(i.clone(), samples)).collect();
        let scores = task.score(&repeated, &completions);
        counts.extend(scores.chunks(samples).map(|g| g.iter().filter(|s| s.passed).count()));
    }
    Ok(counts)
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

#[cfg(test)]
mod tests {
    use super::pass_at_k;

    #[test]
    fn pass_at_k_is_the_unbiased_combinatorial_estimate() {
        // 1 − C(n−c, k)/C(n, k) by hand: n 5, c 2, k 2 → 1 − C(3,2)/C(5,2) = 1 − 3/10.
        assert!((pass_at_k(5, 2, 2).unwrap() - 0.7).abs() < 1e-12);
        // k = 1 is the pass fraction; c = 0 gives 0; n − c < k gives 1.
        assert!((pass_at_k(8, 3, 1).unwrap() - 3.0 / 8.0).abs() < 1e-12);
        assert_eq!(pass_at_k(8, 0, 4), Some(0.0));
        assert_eq!(pass_at_k(4, 3, 2), Some(1.0));
        // n 10, c 1, k 5 → 1 − C(9,5)/C(10,5) = 1 − 126/252.
        assert!((pass_at_k(10, 1, 5).unwrap() - 0.5).abs() < 1e-12);
        assert_eq!(pass_at_k(4, 1, 0), None);
        assert_eq!(pass_at_k(4, 1, 5), None);
    }
}
