//! The flow-matching pretraining run: a data stream, the plumbing of drift-core, a saved model.

use std::collections::BTreeMap;
use std::path::Path;

use candle_core::{DType, Device, Tensor};
use candle_nn::{VarBuilder, VarMap};
use drift_core::rng::RngKey;
use drift_core::train::{Finished, OptimConfig, Optimizer, ParamSet, Run, RunSettings, TailMean};
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
    /// Images per step. Default 64.
    pub batch: usize,
    /// Length, seed (data, noise, dropout), checkpoints and budget: `[run]`. Defaults: 3000
    /// optimizer steps, seed 0, a checkpoint every 500 steps, 2 kept, no time limit.
    pub run: RunSettings,
    /// Draw weights of the shapes world's GenEval categories in the training data, e.g.
    /// `{ position = 2, color_attr = 2 }`: an example's category is drawn with probability
    /// `w / Σ w`, then a prompt of it uniformly ([`crate::grpo::category_weights`]); a category
    /// not named weighs 1. Default empty: every category equally often, the stream that made
    /// `flow-shapes-v2`.
    pub category_weights: BTreeMap<String, f64>,
}

impl PretrainFlowConfig {
    /// Checks the run's sizes before any work, naming the field at fault: `batch` at least 1,
    /// the `[run]` table, the optimizer and the model's own fields.
    pub fn validate(&self) -> Result<()> {
        if self.batch == 0 {
            return Err(FlowModelError::Config {
                field: "batch",
                value: "0".into(),
                expected: "at least 1".into(),
            });
        }
        self.run.validate()?;
        self.optim.over_run(self.run.steps).validate()?;
        self.model.validate()
    }
}

impl Default for PretrainFlowConfig {
    fn default() -> Self {
        Self {
            model: DitConfig::default(),
            optim: OptimConfig::default(),
            loss: FlowMatchingConfig::default(),
            batch: 64,
            run: RunSettings { steps: 3000, checkpoint_every: 500, ..RunSettings::default() },
            category_weights: BTreeMap::new(),
        }
    }
}

/// What a finished run reports.
#[derive(Debug, Clone)]
pub struct PretrainReport {
    /// Mean loss over the last 10% of `steps` (of the steps this invocation ran).
    pub final_loss: f64,
    /// The step reached, wall time, `metrics.jsonl` and `curves.png`.
    pub run: Finished,
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
    let mut opt = Optimizer::new(cfg.optim.over_run(cfg.run.steps), ParamSet::all(&varmap))?;
    let (mut run, _) = Run::open(run_dir, cfg.run, config_text, "pretrain flow", "step", &mut opt)?;
    let key = RngKey::new(cfg.run.seed);
    let mut tail = TailMean::last_tenth_of(cfg.run.steps);
    for step in run.steps() {
        let (x0, ids) = data(step, cfg.batch)?;
        let rows: Vec<u64> = (0..cfg.batch as u64).collect();
        let loss = flow_matching_loss(&model, &x0, &ids, &cfg.loss, key.step(step), &rows)?;
        let (value, report) = opt.minimize(&loss)?;
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
    let model_dir = run.model_dir();
    save_dit(&model_dir, &cfg.model, &weights)?;
    let finished = run.finish(&["loss/total", "grad/norm"])?;
    Ok(PretrainReport { final_loss: tail.mean(), run: finished })
}
