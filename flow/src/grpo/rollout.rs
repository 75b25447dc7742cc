//! One Flow-GRPO rollout batch: `P` prompts × `G` SDE samples, their rewards and their
//! per-prompt advantages.

use std::time::Instant;

use candle_core::{DType, Device, Tensor};
use drift_core::advantage::group_advantages;
use drift_core::groups::{shuffle_within_groups, Groups};
use drift_core::rng::RngKey;
use drift_rewards::image::Image;
use drift_rewards::reward::Outcome;
use drift_samplers::flow::{rollout_sde, Guidance, Rollout, Schedule};

use super::config::FlowGrpoConfig;
use super::task::{image_samples, tensor_to_images, ImageReward, ImageTask};
use crate::error::Result;
use crate::policy::FlowPolicy;

/// A scored rollout batch of `B = P·G` samples, sample `b` belonging to prompt `b / G`.
#[derive(Debug)]
pub struct RolloutBatch<P> {
    /// The prompt of every sample.
    pub prompts: Vec<P>,
    /// The conditioning `[B, L]`.
    pub cond: Tensor,
    /// Every latent and the sampling log-probs `[B, N]`.
    pub rollout: Rollout,
    /// The decoded images.
    pub images: Vec<Image>,
    /// The reward outcomes (score, details, failure).
    pub outcomes: Vec<Outcome>,
    /// The task's strict check of every image, where it has one.
    pub strict: Vec<Option<bool>>,
    /// The prompt groups.
    pub groups: Groups,
    /// Advantages `[B]` (f32).
    pub advantages: Tensor,
    /// The advantages on the host (for masking, logging and per-prompt statistics).
    pub advantages_host: Vec<f32>,
    /// Fraction of groups whose rewards were all equal (zero advantage).
    pub degenerate_frac: f64,
    /// Seconds spent sampling and scoring.
    pub rollout_seconds: f64,
    /// Seconds spent in the reward.
    pub reward_seconds: f64,
}

impl<P> RolloutBatch<P> {
    /// Number of samples `B`.
    pub fn len(&self) -> usize {
        self.prompts.len()
    }

    /// Whether the batch is empty.
    pub fn is_empty(&self) -> bool {
        self.prompts.is_empty()
    }

    /// The reward of every sample.
    pub fn rewards(&self) -> Vec<f64> {
        self.outcomes.iter().map(|o| o.score).collect()
    }
}

/// The key of iteration `step`'s rollouts.
pub fn rollout_key(seed: u64, step: u64) -> RngKey {
    RngKey::new(seed).stream("flow_grpo/rollout").step(step)
}

/// The initial noise `x_σ=1` of global rows `rows` under `key`: `[rows, 3, H, W]`.
pub fn initial_noise(
    key: RngKey,
    rows: &[u64],
    shape: (usize, usize, usize),
    dev: &Device,
) -> Result<Tensor> {
    let (c, h, w) = shape;
    let x = key.stream("x_init").normal_rows(rows, c * h * w, DType::F32, dev)?;
    Ok(x.reshape((rows.len(), c, h, w))?)
}

/// Samples iteration `step`'s batch with `model` (the current policy) in
/// micro-batches of `cfg.micro_batch` rows, scores it with `reward`, and computes the
/// per-prompt advantages of `cfg.advantage`.
pub fn sample_batch<M: FlowPolicy, T: ImageTask>(
    model: &M,
    task: &T,
    reward: &ImageReward<T::Prompt>,
    cfg: &FlowGrpoConfig,
    schedule: &Schedule,
    step: u64,
) -> Result<RolloutBatch<T::Prompt>> {
    let start = Instant::now();
    let dev = model.device().clone();
    let (p, g) = (cfg.prompts_per_step, cfg.group_size);
    let group_prompts: Vec<T::Prompt> =
        (0..p as u64).map(|i| task.train_prompt(cfg.run.seed, step * p as u64 + i)).collect();
    let prompts: Vec<T::Prompt> =
        group_prompts.iter().flat_map(|q| std::iter::repeat_n(q.clone(), g)).collect();
    let cond = task.encode(&prompts, &dev)?;
    let key = rollout_key(cfg.run.seed, step);
    let shape = model.latent_shape();
    let mut parts = Vec::new();
    for start_row in (0..prompts.len()).step_by(cfg.micro_batch) {
        let n = cfg.micro_batch.min(prompts.len() - start_row);
        let rows: Vec<u64> = (start_row as u64..(start_row + n) as u64).collect();
        let x = initial_noise(key, &rows, shape, &dev)?;
        let c = cond.narrow(0, start_row, n)?;
        let null = model.null_cond(n)?;
        let guide = Guidance { uncond: &null, scale: cfg.guidance };
        let guidance = (cfg.guidance != 1.0).then_some(&guide);
        parts.push(rollout_sde(model, &x, &c, schedule, &cfg.rollout, guidance, key, &rows)?);
    }
    let rollout = concat_rollouts(parts)?;
    let images = tensor_to_images(&model.decode(rollout.images())?)?;
    let reward_start = Instant::now();
    let outcomes = reward.evaluate_batch(&image_samples(&prompts, &images)?);
    let reward_seconds = reward_start.elapsed().as_secs_f64();
    let strict = prompts.iter().zip(&images).map(|(q, im)| task.strict(q, im)).collect();
    let groups = Groups::contiguous(p, g, &dev)?;
    let mut scores: Vec<f32> = outcomes.iter().map(|o| o.score as f32).collect();
    if cfg.shuffle_rewards {
        shuffle_within_groups(&mut scores, g, key.stream("shuffle_rewards"));
    }
    let adv =
        group_advantages(&Tensor::from_vec(scores, prompts.len(), &dev)?, &groups, &cfg.advantage)?;
    let degenerate_frac = {
        let d = adv.degenerate_groups()?;
        d.iter().filter(|&&x| x).count() as f64 / d.len().max(1) as f64
    };
    let advantages_host = adv.values.to_dtype(DType::F32)?.to_vec1::<f32>()?;
    Ok(RolloutBatch {
        prompts,
        cond,
        rollout,
        images,
        outcomes,
        strict,
        groups,
        advantages: adv.values.to_dtype(DType::F32)?,
        advantages_host,
        degenerate_frac,
        rollout_seconds: start.elapsed().as_secs_f64(),
        reward_seconds,
    })
}

/// Joins rollouts of consecutive row blocks into one.
fn concat_rollouts(parts: Vec<Rollout>) -> Result<Rollout> {
    let first = parts.first().expect("at least one micro-batch").clone();
    if parts.len() == 1 {
        return Ok(first);
    }
    let steps = first.latents.len();
    let latents = (0..steps)
        .map(|i| Tensor::cat(&parts.iter().map(|r| &r.latents[i]).collect::<Vec<_>>(), 0))
        .collect::<candle_core::Result<Vec<_>>>()?;
    let log_probs = Tensor::cat(&parts.iter().map(|r| &r.log_probs).collect::<Vec<_>>(), 0)?;
    let evaluations = parts.iter().map(|r| r.evaluations).sum();
    Ok(Rollout { latents, log_probs, evaluations, ..first })
}
