//! One optimizer step: non-finite guard, global-norm clipping, scheduled AdamW, EMA.

use serde::{Deserialize, Serialize};

use super::adamw::{AdamW, AdamWConfig};
use super::ema::{Ema, EmaConfig};
use super::grads::Grads;
use super::params::ParamSet;
use super::schedule::LrSchedule;
use crate::error::{CoreError, Result};

/// Everything about how parameters are updated, as one TOML table.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OptimConfig {
    /// AdamW hyperparameters.
    pub adamw: AdamWConfig,
    /// Learning-rate schedule. Default constant.
    pub schedule: LrSchedule,
    /// Global-norm clip; none when unset. Default 1.0 (Flow-GRPO; the dLLM references use 0.2).
    pub max_grad_norm: Option<f64>,
    /// Weight EMA for evaluation; none when unset.
    pub ema: Option<EmaConfig>,
    /// The most one step may grow the global weight norm, as a factor `‖θ_new‖ / ‖θ_old‖`; a
    /// step beyond it (or one that makes a weight non-finite) is rejected like a NaN step,
    /// leaving weights and optimizer state untouched. Default 2 (an ordinary step changes the
    /// norm by well under 1%); `inf` turns the check off.
    pub max_weight_growth: f64,
}

impl OptimConfig {
    /// The config with its schedule's omitted `total` set to `updates`, the run's number of
    /// optimizer steps ([`LrSchedule::over_run`]); every trainer calls it before validating.
    #[must_use]
    pub fn over_run(self, updates: u64) -> Self {
        Self { schedule: self.schedule.over_run(updates), ..self }
    }

    /// Checks every value before any work, naming the TOML key at fault: AdamW's
    /// hyperparameters, the schedule, a positive finite clip norm, the EMA's decay and period.
    pub fn validate(&self) -> Result<()> {
        self.adamw.validate()?;
        self.schedule.validate()?;
        if let Some(c) = self.max_grad_norm {
            if !(c > 0.0 && c.is_finite()) {
                return Err(CoreError::Config {
                    field: "optim.max_grad_norm",
                    value: c.to_string(),
                    expected: "a finite number > 0, or no value for no clipping",
                });
            }
        }
        if !(self.max_weight_growth > 1.0) {
            return Err(CoreError::Config {
                field: "optim.max_weight_growth",
                value: self.max_weight_growth.to_string(),
                expected: "a factor > 1 (inf turns the check off)",
            });
        }
        if let Some(e) = self.ema {
            if !(0.0..=1.0).contains(&e.decay) || e.every == 0 {
                return Err(CoreError::Config {
                    field: "optim.ema",
                    value: format!("decay {} every {}", e.decay, e.every),
                    expected: "decay in [0, 1] and every >= 1",
                });
            }
        }
        Ok(())
    }
}

impl Default for OptimConfig {
    fn default() -> Self {
        Self {
            adamw: AdamWConfig::default(),
            schedule: LrSchedule::Constant,
            max_grad_norm: Some(1.0),
            ema: None,
            max_weight_growth: 2.0,
        }
    }
}

/// Why a step was not applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipReason {
    /// The loss was `NaN` or `±inf`.
    NonFiniteLoss,
    /// A gradient entry was `NaN` or `±inf`.
    NonFiniteGradient,
    /// The update would have made a weight non-finite, or grown the global weight norm by
    /// more than `max_weight_growth` (an lr far too large).
    WeightBlowUp,
}

/// What one call to [`Optimizer::step`] did.
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepReport {
    /// Whether the weights were updated.
    pub applied: bool,
    /// Why not, when they were not.
    pub skipped: Option<SkipReason>,
    /// The gradient's global norm before clipping (`grad/norm`).
    pub grad_norm: f64,
    /// The learning rate used (`lr`).
    pub lr: f64,
}

/// Trainable parameters with their AdamW state, schedule position, clip and EMA.
#[derive(Debug, Clone)]
pub struct Optimizer {
    cfg: OptimConfig,
    params: ParamSet,
    adamw: AdamW,
    ema: Option<Ema>,
    step: u64,
    skipped: u64,
}

impl Optimizer {
    /// An optimizer over `params`.
    pub fn new(cfg: OptimConfig, params: ParamSet) -> Result<Self> {
        cfg.validate()?;
        let ema = cfg.ema.map(|e| Ema::new(e, &params)).transpose()?;
        Ok(Self { adamw: AdamW::new(cfg.adamw)?, cfg, params, ema, step: 0, skipped: 0 })
    }

    /// One step down the gradient of the scalar `loss` (no accumulation, as a pretraining
    /// step): back-propagates it into this optimizer's parameters and [`Optimizer::step`]s.
    /// Returns the loss value and the report.
    pub fn minimize(&mut self, loss: &candle_core::Tensor) -> Result<(f64, StepReport)> {
        let value = f64::from(loss.to_scalar::<f32>()?);
        let grads = Grads::from_store(&loss.backward()?, &self.params, 1.0)?;
        Ok((value, self.step(value, grads)?))
    }

    /// Applies `grads` unless `loss` or a gradient is not finite; a skipped step leaves the
    /// weights, the moments, the schedule position and the EMA exactly as they were.
    pub fn step(&mut self, loss: f64, mut grads: Grads) -> Result<StepReport> {
        let lr = self.cfg.adamw.lr * self.cfg.schedule.factor(self.step);
        if !loss.is_finite() {
            self.skipped += 1;
            let report = StepReport {
                applied: false,
                skipped: Some(SkipReason::NonFiniteLoss),
                grad_norm: f64::NAN,
                lr,
            };
            return Ok(report);
        }
        let grad_norm = match self.cfg.max_grad_norm {
            Some(max) => grads.clip_global_norm(max)?,
            None => grads.global_norm()?,
        };
        if !grad_norm.is_finite() {
            self.skipped += 1;
            let skipped = Some(SkipReason::NonFiniteGradient);
            return Ok(StepReport { applied: false, skipped, grad_norm, lr });
        }
        let proposal = self.adamw.propose(&self.params, &grads, lr)?;
        if self.cfg.max_weight_growth.is_finite() {
            let (new, old) = proposal.squared_norms()?;
            // From all-zero weights (a zero-initialised adapter alone) any step is growth
            // without bound; only finiteness is checked then.
            let growth = if old > 0.0 { (new / old).sqrt() } else { 1.0 };
            if !new.is_finite() || growth > self.cfg.max_weight_growth {
                self.skipped += 1;
                let skipped = Some(SkipReason::WeightBlowUp);
                return Ok(StepReport { applied: false, skipped, grad_norm, lr });
            }
        }
        self.adamw.commit(proposal)?;
        self.step += 1;
        if let Some(ema) = &mut self.ema {
            ema.update(self.step, &self.params)?;
        }
        Ok(StepReport { applied: true, skipped: None, grad_norm, lr })
    }

    /// Updates applied so far (the schedule position).
    pub fn step_count(&self) -> u64 {
        self.step
    }

    /// Steps skipped for non-finite values so far.
    pub fn skipped_count(&self) -> u64 {
        self.skipped
    }

    /// The trainable parameters.
    pub fn params(&self) -> &ParamSet {
        &self.params
    }

    /// The configuration.
    pub fn config(&self) -> &OptimConfig {
        &self.cfg
    }

    /// The AdamW state (for checkpoints).
    pub fn adamw(&self) -> &AdamW {
        &self.adamw
    }

    /// The EMA, when configured.
    pub fn ema(&self) -> Option<&Ema> {
        self.ema.as_ref()
    }

    pub(crate) fn restore(&mut self, step: u64, skipped: u64, adamw: AdamW, ema: Option<Ema>) {
        self.step = step;
        self.skipped = skipped;
        self.adamw = adamw;
        if ema.is_some() {
            self.ema = ema;
        }
    }
}
