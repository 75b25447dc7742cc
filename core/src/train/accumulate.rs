//! Gradient accumulation over micro-batches, shared by every RL update.
//!
//! A batch too large for one pass is split into micro-batches `k` with weights `w_k` (each
//! one's share of the batch's samples or tokens, `Σ w_k = 1`). Each micro-batch's loss `ℓ_k`
//! is back-propagated as `w_k ℓ_k` and the gradients summed, so the step sees
//! `∇ Σ_k w_k ℓ_k`, the gradient of the whole batch's loss; the loss reported is the same sum
//! and the diagnostics are combined by [`LossDiagnostics::combine`] with the same weights.

use candle_core::Tensor;

use super::grads::Grads;
use super::optimizer::{Optimizer, StepReport};
use super::params::ParamSet;
use crate::error::{CoreError, Result};
use crate::loss::{LossDiagnostics, PolicyLoss};

/// What one RL update did: the optimizer's step, the loss diagnostics combined over its
/// micro-batches, and `cost`, the family's own count of the model evaluations it made (the
/// dLLM trainer counts rows, Flow-GRPO forward calls and image evaluations).
#[derive(Debug, Clone)]
pub struct UpdateReport<C> {
    /// The optimizer's report (applied or skipped, grad norm, lr).
    pub step: StepReport,
    /// The loss diagnostics over the update's micro-batches: means weighted as the
    /// micro-batches were, `ratio/min` and `ratio/max` the extremes, `actions/count` the total.
    pub diagnostics: LossDiagnostics,
    /// The model evaluations the update made, in the family's unit.
    pub cost: C,
}

/// Sums weighted micro-batch gradients, losses and diagnostics until one optimizer step.
#[derive(Debug, Default)]
pub struct Accumulator {
    grads: Option<Grads>,
    loss: Option<Tensor>,
    stats: Vec<Tensor>,
    weights: Vec<f64>,
}

impl Accumulator {
    /// An empty accumulator.
    pub fn new() -> Self {
        Self::default()
    }

    /// Back-propagates `weight · out.loss` into the gradients of `params` and adds them, the
    /// weighted (detached) loss and `out.stats` to the sums.
    pub fn add(&mut self, out: &PolicyLoss, weight: f64, params: &ParamSet) -> Result<()> {
        let weighted = (&out.loss * weight)?;
        let g = Grads::from_store(&weighted.backward()?, params, 1.0)?;
        match self.grads.as_mut() {
            Some(acc) => acc.accumulate(g)?,
            None => self.grads = Some(g),
        }
        let l = weighted.detach();
        self.loss = Some(match self.loss.take() {
            Some(acc) => (acc + l)?,
            None => l,
        });
        self.stats.push(out.stats.clone());
        self.weights.push(weight);
        Ok(())
    }

    /// Micro-batches added so far.
    pub fn len(&self) -> usize {
        self.weights.len()
    }

    /// Whether nothing was added.
    pub fn is_empty(&self) -> bool {
        self.weights.is_empty()
    }

    /// One optimizer step on the summed gradients; returns its report and the combined
    /// diagnostics (one host read of the stacked stats) with `cost` attached. Errors when
    /// nothing was added.
    pub fn step<C>(self, opt: &mut Optimizer, cost: C) -> Result<UpdateReport<C>> {
        let (Some(grads), Some(loss)) = (self.grads, self.loss) else {
            return Err(CoreError::Config {
                field: "micro_batch",
                value: "0 micro-batches".into(),
                expected: "at least one micro-batch before an optimizer step",
            });
        };
        let loss = loss.to_scalar::<f32>()?;
        let rows = Tensor::stack(&self.stats, 0)?.to_vec2::<f32>()?;
        let diagnostics = LossDiagnostics::combine(&rows, &self.weights)?;
        let step = opt.step(f64::from(loss), grads)?;
        Ok(UpdateReport { step, diagnostics, cost })
    }
}
