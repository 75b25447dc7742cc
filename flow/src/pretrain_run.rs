//! The flow-matching pretraining run: a data stream, the plumbing of drift-core, a saved model.

use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use candle_nn::{VarBuilder, VarMap};
use drift_core::rng::RngKey;
use drift_core::train::{Grads, OptimConfig, Optimizer, ParamSet, Run, RunSettings, TailMean};
use serde::{Deserialize, Serialize};

use crate::error::{FlowModelError, Result};
use crate::model::{save_dit, Dit, DitConfig};
use crate::pretrain::{flow_matching_loss, FlowMatchingConfig};

/// Everything a pretraining run reads from its TOML file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PretrainFlowConfig {
    /// The model.
    pub model: DitConfig,
    /// Optimizer, schedule, clipping, EMA.
    pub optim: OptimConfig,
    /// The loss.
    pub loss: FlowMatchingConfig,
    /// Optimizer steps. Default 3000.
    pub steps: u64,
    /// Images per step. Default 64.
    pub batch: usize,
    /// Seed of every draw (data, noise, dropout). Default 0.
    pub seed: u64,
    /// Checkpoint every this many steps. Default 500.
    pub checkpoint_every: u64,
    /// Checkpoints kept. Default 2.
    pub keep_last: usize,
    /// Wall-clock budget of one invocation in seconds: the run stops after the step during
    /// which it runs out, with that step checkpointed and the model saved, as if `steps` had
    /// been reached (a later invocation resumes). Default none (no limit).
    pub max_seconds: Option<f64>,
}

impl PretrainFlowConfig {
    /// Checks the run's sizes before any work, naming the field at fault: `steps`, `batch`
    /// and `checkpoint_every` at least 1, and the model's own fields.
    pub fn validate(&self) -> Result<()> {
        for (field, value) in [
            ("steps", self.steps),
            ("batch", self.batch as u64),
            ("checkpoint_every", self.checkpoint_every),
        ] {
            if value == 0 {
                return Err(FlowModelError::Config {
                    field,
                    value: "0".into(),
                    expected: "at least 1".into(),
                });
            }
        }
        self.run_settings().validate()?;
        self.optim.validate()?;
        self.model.validate()
    }

    /// The run skeleton's settings (no intermediate evaluation).
    pub fn run_settings(&self) -> RunSettings {
        RunSettings {
            steps: self.steps,
            seed: self.seed,
            checkpoint_every: self.checkpoint_every,
            keep_last: self.keep_last,
            max_seconds: self.max_seconds,
            eval_every: 0,
        }
    }
}

impl Default for PretrainFlowConfig {
    fn default() -> Self {
        Self {
            model: DitConfig::default(),
            optim: OptimConfig::default(),
            loss: FlowMatchingConfig::default(),
            steps: 3000,
            batch: 64,
            seed: 0,
            checkpoint_every: 500,
            keep_last: 2,
            max_seconds: None,
        }
    }
}

/// What a finished run reports.
#[derive(Debug, Clone)]
pub struct PretrainReport {
    /// The saved model directory (`config.json` + `model.safetensors`; EMA weights when an EMA
    /// is configured).
    pub model_dir: PathBuf,
    /// The metrics file and its PNG curves.
    pub metrics: PathBuf,
    /// The curves.
    pub curves: PathBuf,
    /// Mean loss over the last 10% of `steps` (of the steps this invocation ran).
    pub final_loss: f64,
    /// The step the run ended at: `steps`, or fewer when `max_seconds` ran out.
    pub steps: u64,
    /// Wall time in seconds.
    pub seconds: f64,
}

/// Trains a DiT with the flow-matching loss on `data(step, batch) → (images[B, C, H, W] in
/// [−1, 1], prompt ids[B, text_len])`, logging `loss/total`, `grad/norm`, `lr` per step to
/// `run_dir/metrics.jsonl`, checkpointing into `run_dir/checkpoints` (and resuming from the
/// newest valid one), and saving the final model into `run_dir/model`.
pub fn pretrain_flow(
    cfg: &PretrainFlowConfig,
    config_text: &str,
    run_dir: &Path,
    device: &Device,
    mut data: impl FnMut(u64, usize) -> Result<(Tensor, Tensor)>,
) -> Result<PretrainReport> {
    cfg.validate()?;
    let varmap = VarMap::new();
    let model = Dit::new(cfg.model, VarBuilder::from_varmap(&varmap, DType::F32, device))?;
    let mut opt = Optimizer::new(cfg.optim, ParamSet::all(&varmap))?;
    let (mut run, _) =
        Run::open(run_dir, cfg.run_settings(), config_text, "pretrain flow", "step", &mut opt)?;
    let key = RngKey::new(cfg.seed);
    let mut tail = TailMean::last_tenth_of(cfg.steps);
    for step in run.steps() {
        let (x0, ids) = data(step, cfg.batch)?;
        let rows: Vec<u64> = (0..cfg.batch as u64).collect();
        let loss = flow_matching_loss(&model, &x0, &ids, &cfg.loss, key.step(step), &rows)?;
        let value = f64::from(loss.to_scalar::<f32>()?);
        let grads = Grads::from_store(&loss.backward()?, opt.params(), 1.0)?;
        let report = opt.step(value, grads)?;
        if let Some(reason) = report.skipped {
            run.println(&format!("step {step}: skipped ({reason:?})"));
        }
        run.log(
            step,
            &[("loss/total", value), ("grad/norm", report.grad_norm), ("lr", report.lr)],
        )?;
        tail.push(value);
        let end = run.end_of(step);
        if run.close_step(step, end, &opt, &[("loss", value)])?.is_break() {
            break;
        }
    }
    let weights = match opt.ema() {
        Some(ema) => ema.weights().clone(),
        None => opt.params().snapshot()?,
    };
    let model_dir = run_dir.join("model");
    save_dit(&model_dir, &cfg.model, &weights)?;
    let finished = run.finish(&["loss/total", "grad/norm"])?;
    Ok(PretrainReport {
        model_dir,
        steps: finished.steps,
        metrics: finished.metrics,
        curves: finished.curves,
        final_loss: tail.mean(),
        seconds: finished.seconds,
    })
}
