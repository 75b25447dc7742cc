//! Old and reference log-probabilities of a rollout batch, and the `μ` inner iterations of
//! micro-batched updates through the core's policy loss.

use candle_core::{DType, Tensor};
use drift_core::loss::{policy_loss, Aggregation, PolicyInputs, Reference};
use drift_core::rng::RngKey;
use drift_core::train::{Accumulator, Optimizer};

use super::config::ResolvedConfig;
use super::rollout::RolloutBatch;
use crate::error::Result;
use crate::estimate::estimate;
use crate::model::DiffusionLm;

/// The estimator's key at iteration `step`, inner iteration `it`: old, reference and current
/// passes of a row use the same masks.
pub fn estimate_key(seed: u64, step: u64, it: usize) -> RngKey {
    RngKey::new(seed).stream("dllm_grpo/estimate").step(step).iteration(it as u64)
}

/// Per-token estimates `[B, T]` of the whole batch under `model` at inner iteration `it`,
/// detached, in chunks of `micro_batch` rows (the same chunks as the update, so a tracked
/// policy gives bit-identical old log-probs).
pub fn batch_log_probs<I>(
    model: &DiffusionLm,
    batch: &RolloutBatch<I>,
    cfg: &ResolvedConfig,
    step: u64,
    it: usize,
) -> Result<(Tensor, usize)> {
    let key = estimate_key(cfg.given.run.seed, step, it);
    let (mut parts, mut rows) = (Vec::new(), 0);
    for start in (0..batch.len()).step_by(cfg.given.micro_batch) {
        let n = cfg.given.micro_batch.min(batch.len() - start);
        let rows_in = batch.rows(start, n)?;
        let input = batch.input(&rows_in, start, n);
        let est = estimate(model, &cfg.parts.estimator, &input, key, usize::MAX)?;
        parts.push(est.per_token.detach());
        rows += est.forward_rows;
    }
    Ok((Tensor::cat(&parts, 0)?, rows))
}

/// What one inner iteration did; its `cost` is the rows the model evaluated.
pub type UpdateReport = drift_core::train::UpdateReport<usize>;

/// One inner iteration `it`: micro-batches of `cfg.micro_batch` rows, each weighted by its
/// share of the batch ([`micro_batch_weights`]), gradients accumulated, then one optimizer
/// step. `old` and `reference` are this iteration's `[B, T]` log-probs; `old = None` takes
/// the current pass's own values, detached (on-policy, `μ = 1`: the ratio is exactly 1 and
/// the old pass would recompute the same numbers, as TRL does when `num_iterations = 1`).
#[allow(clippy::too_many_arguments)] // the parts of one inner iteration
pub fn update<I>(
    policy: &DiffusionLm,
    batch: &RolloutBatch<I>,
    old: Option<&Tensor>,
    reference: Option<&Tensor>,
    cfg: &ResolvedConfig,
    step: u64,
    it: usize,
    opt: &mut Optimizer,
) -> Result<UpdateReport> {
    let key = estimate_key(cfg.given.run.seed, step, it);
    let b = batch.len();
    let mask = batch.trajectory.completion_mask.to_dtype(DType::F32)?;
    let shares =
        micro_batch_weights(&batch.completion, cfg.given.micro_batch, cfg.parts.loss.aggregation);
    let (mut acc, mut rows) = (Accumulator::new(), 0);
    for (start, w) in (0..b).step_by(cfg.given.micro_batch).zip(shares) {
        let n = cfg.given.micro_batch.min(b - start);
        let rows_in = batch.rows(start, n)?;
        let input = batch.input(&rows_in, start, n);
        let est = estimate(policy, &cfg.parts.estimator, &input, key, usize::MAX)?;
        rows += est.forward_rows;
        let reference = reference.map(|r| r.narrow(0, start, n)).transpose()?;
        let lp_old = match old {
            Some(old) => old.narrow(0, start, n)?,
            None => est.per_token.detach(),
        };
        let inputs = PolicyInputs {
            lp_new: &est.per_token,
            lp_old: &lp_old,
            mask: &mask.narrow(0, start, n)?,
            advantages: &batch.advantages.narrow(0, start, n)?,
            reference: reference.as_ref().map(Reference::LogProbs),
        };
        let out = policy_loss(&cfg.parts.loss, &inputs)?;
        acc.add(&out, w, opt.params())?;
    }
    Ok(acc.step(opt, rows)?)
}

/// The weight of each micro-batch's loss in the batch's, so that the accumulated gradient is
/// the whole batch's: its share of the completion tokens under
/// [`Aggregation::TokenMean`] (`Σ m ℓ / Σ m` over the batch, as d1 and DiffuCoder compute
/// it), its share of the rows otherwise (`mean_b` and `Σ/(N·T_max)` average over rows).
pub fn micro_batch_weights(
    completion: &[Vec<bool>],
    micro_batch: usize,
    aggregation: Aggregation,
) -> Vec<f64> {
    let b = completion.len();
    let micro_batch = micro_batch.max(1);
    let tokens: Vec<usize> = completion.iter().map(|r| r.iter().filter(|&&c| c).count()).collect();
    let total: usize = tokens.iter().sum();
    (0..b)
        .step_by(micro_batch)
        .map(|start| {
            let end = (start + micro_batch).min(b);
            match aggregation {
                Aggregation::TokenMean if total > 0 => {
                    tokens[start..end].iter().sum::<usize>() as f64 / total as f64
                }
                _ => (end - start) as f64 / b as f64,
            }
        })
        .collect()
}
