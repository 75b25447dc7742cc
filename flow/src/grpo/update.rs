//! One Flow-GRPO update: the per-transition PPO-clip loss with the Gaussian-mean KL to the
//! frozen reference, accumulated over micro-batches, then one optimizer step.

use candle_core::{DType, Tensor};
use drift_core::loss::{
    gaussian_mean_kl, policy_loss, LossDiagnostics, PolicyInputs, PolicyLoss, Reference,
};
use drift_core::train::{Accumulator, Optimizer, StepReport};
use drift_samplers::flow::{transitions_log_prob, Guidance, Schedule};

use super::config::{FlowGrpoConfig, KlStd};
use super::rollout::RolloutBatch;
use crate::error::{FlowModelError, Result};
use crate::policy::FlowPolicy;

/// What an update did; its `cost` counts the model evaluations.
pub type UpdateReport = drift_core::train::UpdateReport<UpdateCost>;

/// The model evaluations of one Flow-GRPO update.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UpdateCost {
    /// Model forward calls made (policy and reference, guidance counted twice); each call
    /// covers every trained step of one micro-batch.
    pub forward_calls: usize,
    /// Image evaluations: one model pass over one image at one step, i.e. trained samples ×
    /// trained steps × 2 (policy and reference) × (2 under guidance).
    pub image_evaluations: usize,
}

/// The transitions trained: the stochastic ones among the first `⌊N·f⌋`.
pub fn trained_transitions(cfg: &FlowGrpoConfig, stochastic: &[bool]) -> Vec<usize> {
    (0..cfg.trained_steps()).filter(|&i| stochastic.get(i).copied().unwrap_or(false)).collect()
}

/// The policy loss of samples `rows` of `batch` (one micro-batch).
fn micro_batch<M: FlowPolicy>(
    policy: &M,
    reference: &M,
    batch: &RolloutBatch<impl Sized>,
    rows: &[usize],
    steps: &[usize],
    cfg: &FlowGrpoConfig,
    schedule: &Schedule,
) -> Result<PolicyLoss> {
    let dev = policy.device();
    let idx =
        Tensor::from_vec(rows.iter().map(|&r| r as u32).collect::<Vec<_>>(), rows.len(), dev)?;
    let cond = batch.cond.index_select(&idx, 0)?;
    let pick = |i: usize| batch.rollout.latents[i].index_select(&idx, 0);
    // One pass per step, or every step in one pass (rows stacked step-major).
    let passes: Vec<&[usize]> =
        if cfg.stack_steps { vec![steps] } else { steps.chunks(1).collect() };
    let (mut lp_new, mut kl) = (Vec::new(), Vec::new());
    for pass in passes {
        let cond = Tensor::cat(&vec![&cond; pass.len()], 0)?;
        let null = policy.null_cond(cond.dim(0)?)?;
        let guide = Guidance { uncond: &null, scale: cfg.guidance };
        let guidance = (cfg.guidance != 1.0).then_some(&guide);
        let xs = pass.iter().map(|&i| pick(i)).collect::<candle_core::Result<Vec<_>>>()?;
        let next = pass.iter().map(|&i| pick(i + 1)).collect::<candle_core::Result<Vec<_>>>()?;
        // Only stochastic steps are trained, and inside a window those are the SDE's.
        let (kind, reduce) = (cfg.rollout.step, cfg.rollout.log_prob);
        let new = transitions_log_prob(
            policy, &xs, &next, pass, schedule, kind, &cond, guidance, reduce,
        )?;
        if cfg.loss.kl.is_none() {
            // Without a KL term the reference model is never evaluated.
            lp_new.extend(new.into_iter().map(|t| t.log_prob));
            continue;
        }
        let old_ref = transitions_log_prob(
            reference, &xs, &next, pass, schedule, kind, &cond, guidance, reduce,
        )?;
        for (t, r) in new.into_iter().zip(old_ref) {
            let std = match cfg.kl_std {
                KlStd::SigmaT => t.sigma_t,
                KlStd::Transition => t.std,
            };
            let std = Tensor::new(std as f32, dev)?;
            kl.push(gaussian_mean_kl(&t.mean, &r.mean.detach(), &std)?);
            lp_new.push(t.log_prob);
        }
    }
    let cols =
        Tensor::from_vec(steps.iter().map(|&i| i as u32).collect::<Vec<_>>(), steps.len(), dev)?;
    let lp_old = batch.rollout.log_probs.index_select(&idx, 0)?.index_select(&cols, 1)?;
    let lp_new = Tensor::stack(&lp_new, 1)?;
    let kl = if kl.is_empty() { None } else { Some(Tensor::stack(&kl, 1)?) };
    let adv = batch.advantages.index_select(&idx, 0)?;
    let keep = if cfg.mask_zero_advantage {
        adv.ne(0f32)?.to_dtype(DType::F32)?
    } else {
        adv.ones_like()?
    };
    let mask = keep.unsqueeze(1)?.broadcast_as(lp_new.shape())?.contiguous()?;
    let inputs = PolicyInputs {
        lp_new: &lp_new,
        lp_old: &lp_old,
        mask: &mask,
        advantages: &adv,
        reference: kl.as_ref().map(Reference::Kl),
    };
    Ok(policy_loss(&cfg.loss, &inputs)?)
}

/// Trains on samples `rows` of `batch`: micro-batches of `cfg.micro_batch` samples, each
/// weighted by its share of the trained samples, then one optimizer step. Samples with a zero
/// advantage (when masked) are skipped before any forward pass.
pub fn update<M: FlowPolicy>(
    policy: &M,
    reference: &M,
    batch: &RolloutBatch<impl Sized>,
    rows: &[usize],
    cfg: &FlowGrpoConfig,
    schedule: &Schedule,
    opt: &mut Optimizer,
) -> Result<UpdateReport> {
    let steps = trained_transitions(cfg, &batch.rollout.stochastic);
    if steps.is_empty() {
        return Err(FlowModelError::Config {
            field: "train_fraction / rollout.window",
            value: format!("{} of {} steps", cfg.trained_steps(), cfg.schedule.steps),
            expected: "at least one stochastic transition to train".into(),
        });
    }
    let rows: Vec<usize> = rows
        .iter()
        .copied()
        .filter(|&r| !cfg.mask_zero_advantage || batch.advantages_host[r] != 0.0)
        .collect();
    let per_call = if cfg.guidance != 1.0 { 2 } else { 1 };
    if rows.is_empty() {
        // Nothing to learn from: no optimizer step (weight decay alone would still move the
        // weights), reported as not applied.
        let lr = opt.config().adamw.lr * opt.config().schedule.factor(opt.step_count());
        let step = StepReport { applied: false, skipped: None, grad_norm: 0.0, lr };
        return Ok(UpdateReport {
            step,
            diagnostics: LossDiagnostics::default(),
            cost: UpdateCost::default(),
        });
    }
    let mut acc = Accumulator::new();
    let chunks: Vec<&[usize]> = rows.chunks(cfg.micro_batch).collect();
    for chunk in &chunks {
        let out = micro_batch(policy, reference, batch, chunk, &steps, cfg, schedule)?;
        acc.add(&out, chunk.len() as f64 / rows.len() as f64, opt.params())?;
    }
    let passes = if cfg.stack_steps { 1 } else { steps.len() };
    // The policy's pass, and the reference's when there is a KL term.
    let models = if cfg.loss.kl.is_some() { 2 } else { 1 };
    let forward_calls = chunks.len() * passes * models * per_call;
    let image_evaluations = rows.len() * steps.len() * models * per_call;
    Ok(acc.step(opt, UpdateCost { forward_calls, image_evaluations })?)
}
