//! One dLLM rollout batch: `P` prompts × `G` decodings, their scores and advantages.

use std::time::Instant;

use candle_core::{DType, Tensor};
use drift_core::advantage::group_advantages;
pub use drift_core::groups::shuffle_within_groups;
use drift_core::groups::Groups;
use drift_core::rng::RngKey;
use drift_samplers::dllm::{decode, DecodeBatch, Padding, Trajectory};

use super::config::ResolvedConfig;
use super::task::{TaskScore, TextTask};
use crate::error::Result;
use crate::estimate::EstimateInput;
use crate::model::DiffusionLm;
use crate::tokenizer::{BOS_ID, EOS_ID, PAD_ID};

/// A scored rollout batch of `B = P·G` sequences, row `p·G + g` sample `g` of prompt `p`.
#[derive(Debug)]
pub struct RolloutBatch<I> {
    /// The item of every row.
    pub items: Vec<I>,
    /// The decoding: tokens, commit steps, log-probs, completion mask.
    pub trajectory: Trajectory,
    /// How the model sees left padding (its config's), which every estimator pass follows.
    pub padding: Padding,
    /// `[B, T]` u32: the sequences the estimators score, in the pretraining layout: prompt,
    /// the completion up to its first EOS, then EOS over the rest of the generated region
    /// (whatever the decoder left there carries no meaning once the completion has ended).
    pub sequences: Tensor,
    /// `[B][T]` host copy: completion positions (up to and including the first EOS).
    pub completion: Vec<Vec<bool>>,
    /// `[B][T]` host copy: the generated region after the completion (its EOS fill), which
    /// the estimators mask but never score.
    pub fill: Vec<Vec<bool>>,
    /// `[B][T]` host copy: real prompt tokens (not padding, not BOS).
    pub prompt: Vec<Vec<bool>>,
    /// The decoded completions.
    pub texts: Vec<String>,
    /// The scores.
    pub scores: Vec<TaskScore>,
    /// Advantages `[B]` f32 on the device, and on the host.
    pub advantages: Tensor,
    /// The advantages on the host.
    pub advantages_host: Vec<f32>,
    /// Fraction of groups whose rewards were all equal.
    pub degenerate_frac: f64,
    /// Seconds decoding.
    pub decode_seconds: f64,
    /// Seconds in the reward.
    pub reward_seconds: f64,
}

impl<I> RolloutBatch<I> {
    /// Rows `B`.
    pub fn len(&self) -> usize {
        self.items.len()
    }
    /// Whether the batch is empty.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
    /// The scored token ids ([`Self::sequences`]) of rows `start..start + n`, with their
    /// attention mask when the model hides padding ([`ModelConfig::padding`]).
    ///
    /// [`ModelConfig::padding`]: crate::model::ModelConfig::padding
    pub fn rows(&self, start: usize, n: usize) -> Result<ScoredRows> {
        let attention_mask = match self.padding {
            Padding::Masked => Some(self.trajectory.attention_mask.narrow(0, start, n)?),
            Padding::Visible => None,
        };
        Ok(ScoredRows { ids: self.sequences.narrow(0, start, n)?, attention_mask })
    }
    /// The estimator input of rows `start..start + n`, `rows` being [`Self::rows`] of them.
    pub fn input<'a>(&'a self, rows: &'a ScoredRows, start: usize, n: usize) -> EstimateInput<'a> {
        EstimateInput {
            ids: &rows.ids,
            completion: &self.completion[start..start + n],
            prompt: &self.prompt[start..start + n],
            fill: &self.fill[start..start + n],
            rows: &self.trajectory.rows[start..start + n],
            attention_mask: rows.attention_mask.as_ref(),
        }
    }
}

/// A slice of a [`RolloutBatch`]'s rows as the estimators read them.
#[derive(Debug, Clone)]
pub struct ScoredRows {
    /// `[n, T]` u32 token ids.
    pub ids: Tensor,
    /// `[n, T]` u8, 0 on left padding; `None` when padding is shown to the model.
    pub attention_mask: Option<Tensor>,
}

/// The key of iteration `step`'s rollouts.
pub fn rollout_key(seed: u64, step: u64) -> RngKey {
    RngKey::new(seed).stream("dllm_grpo/rollout").step(step)
}

/// Decodes iteration `step`'s batch with `model` (a frozen view of the policy), scores it
/// with `task` and computes the advantages of the recipe.
pub fn sample_batch<T: TextTask>(
    model: &DiffusionLm,
    task: &T,
    cfg: &ResolvedConfig,
    step: u64,
) -> Result<RolloutBatch<T::Item>> {
    let c = &cfg.given;
    let (p, g) = (c.prompts_per_step, cfg.parts.group_size);
    let t0 = Instant::now();
    let group_items: Vec<T::Item> =
        (0..p as u64).map(|i| task.train_item(c.run.seed, step * p as u64 + i)).collect();
    let prompts = group_items.iter().map(|i| task.prompt_ids(i)).collect::<Result<Vec<_>>>()?;
    let batch = DecodeBatch {
        prompts: &prompts,
        group_size: g,
        pad_id: PAD_ID,
        // As the model was trained to see it (config.json's drift_padding).
        padding: model.config().padding(),
        first_row: step * (p * g) as u64,
        greedy_per_group: c.greedy_per_group,
    };
    let trajectory =
        decode(model, &c.decode, &batch, rollout_key(c.run.seed, step), model.device())?;
    let tokens = trajectory.tokens.to_vec2::<u32>()?;
    let cmask = trajectory.completion_mask.to_vec2::<f32>()?;
    let pl = trajectory.prompt_len;
    let completion: Vec<Vec<bool>> =
        cmask.iter().map(|r| r.iter().map(|&m| m > 0.0).collect()).collect();
    let fill: Vec<Vec<bool>> = completion
        .iter()
        .map(|r| r.iter().enumerate().map(|(j, &c)| j >= pl && !c).collect())
        .collect();
    let canonical: Vec<u32> = tokens
        .iter()
        .zip(&fill)
        .flat_map(|(r, f)| r.iter().zip(f).map(|(&t, &f)| if f { EOS_ID } else { t }))
        .collect();
    let sequences = Tensor::from_vec(canonical, (tokens.len(), tokens[0].len()), model.device())?;
    let prompt: Vec<Vec<bool>> = tokens
        .iter()
        .map(|r| r.iter().enumerate().map(|(j, &t)| j < pl && t != PAD_ID && t != BOS_ID).collect())
        .collect();
    let texts =
        tokens.iter().map(|r| task.completion_text(&r[pl..])).collect::<Result<Vec<_>>>()?;
    let decode_seconds = t0.elapsed().as_secs_f64();
    let items: Vec<T::Item> =
        group_items.iter().flat_map(|i| std::iter::repeat_n(i.clone(), g)).collect();
    let t1 = Instant::now();
    let scores = task.score(&items, &texts);
    let reward_seconds = t1.elapsed().as_secs_f64();
    let dev = model.device();
    let groups = Groups::contiguous(p, g, dev)?;
    let mut r: Vec<f32> = scores.iter().map(|s| s.reward as f32).collect();
    if c.shuffle_rewards {
        shuffle_within_groups(&mut r, g, rollout_key(c.run.seed, step).stream("shuffle_rewards"));
    }
    let adv = group_advantages(&Tensor::from_vec(r, p * g, dev)?, &groups, &cfg.parts.advantage)?;
    let degenerate = adv.degenerate_groups()?;
    let degenerate_frac =
        degenerate.iter().filter(|&&d| d).count() as f64 / degenerate.len().max(1) as f64;
    let advantages = adv.values.to_dtype(DType::F32)?;
    let advantages_host = advantages.to_vec1::<f32>()?;
    Ok(RolloutBatch {
        padding: model.config().padding(),
        items,
        trajectory,
        sequences,
        completion,
        fill,
        prompt,
        texts,
        scores,
        advantages,
        advantages_host,
        degenerate_frac,
        decode_seconds,
        reward_seconds,
    })
}
