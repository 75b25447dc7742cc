//! The flow-matching pretraining run: a data stream, the plumbing of drift-core, a saved model.

use std::path::{Path, PathBuf};
use std::time::Instant;

use candle_core::{DType, Device, Tensor};
use candle_nn::{VarBuilder, VarMap};
use drift_core::metrics::{plot_metrics, MetricsWriter, Progress};
use drift_core::rng::RngKey;
use drift_core::train::{
    CheckpointMeta, Checkpointer, Grads, OptimConfig, Optimizer, ParamSet, TailMean, TimeBudget,
};
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
        self.model.validate()
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
    let start = Instant::now();
    let budget = TimeBudget::new(cfg.max_seconds, "max_seconds")?;
    let varmap = VarMap::new();
    let model = Dit::new(cfg.model, VarBuilder::from_varmap(&varmap, DType::F32, device))?;
    let mut opt = Optimizer::new(cfg.optim, ParamSet::all(&varmap))?;
    let ckpt = Checkpointer::new(run_dir.join("checkpoints"), cfg.keep_last)?;
    let (latest, rejected) = ckpt.latest_valid()?;
    for (dir, err) in &rejected {
        eprintln!("warning: skipping checkpoint {}: {err}", dir.display());
    }
    let metrics_path = run_dir.join("metrics.jsonl");
    let (first, mut log) = match latest {
        Some(dir) => {
            let meta = Checkpointer::load(&dir, &mut opt)?;
            eprintln!("resuming from {} (step {})", dir.display(), meta.step);
            (meta.step, MetricsWriter::open(&metrics_path, Some(meta.metrics_cursor))?)
        }
        None => (0, MetricsWriter::create(&metrics_path)?),
    };
    let progress = Progress::new(cfg.steps, "pretrain flow");
    let key = RngKey::new(cfg.seed);
    let mut tail = TailMean::last_tenth_of(cfg.steps);
    let mut last = first;
    for step in first..cfg.steps {
        let (x0, ids) = data(step, cfg.batch)?;
        let rows: Vec<u64> = (0..cfg.batch as u64).collect();
        let loss = flow_matching_loss(&model, &x0, &ids, &cfg.loss, key.step(step), &rows)?;
        let value = f64::from(loss.to_scalar::<f32>()?);
        let grads = Grads::from_store(&loss.backward()?, opt.params(), 1.0)?;
        let report = opt.step(value, grads)?;
        if let Some(reason) = report.skipped {
            progress.println(&format!("step {step}: skipped ({reason:?})"));
        }
        log.log(
            step,
            &[("loss/total", value), ("grad/norm", report.grad_norm), ("lr", report.lr)],
        )?;
        tail.push(value);
        last = step + 1;
        progress.update(step + 1, &[("loss", value)]);
        let out_of_time = budget.stops_run(step + 1, cfg.steps);
        if (step + 1) % cfg.checkpoint_every.max(1) == 0 || step + 1 == cfg.steps || out_of_time {
            let meta = CheckpointMeta {
                step: step + 1,
                seed: cfg.seed,
                config: config_text.to_string(),
                metrics_cursor: log.cursor(),
                extra: serde_json::Value::Null,
                optimizer_step: 0,
                skipped_steps: 0,
            };
            ckpt.save(&opt, &meta)?;
        }
        if out_of_time {
            progress.println(&budget.stop_line("step", step + 1, cfg.steps));
            break;
        }
    }
    progress.finish();
    let weights = match opt.ema() {
        Some(ema) => ema.weights().clone(),
        None => opt.params().snapshot()?,
    };
    let model_dir = run_dir.join("model");
    save_dit(&model_dir, &cfg.model, &weights)?;
    let curves = run_dir.join("curves.png");
    plot_metrics(&metrics_path, &["loss/total", "grad/norm"], &curves)?;
    Ok(PretrainReport {
        model_dir,
        steps: last,
        metrics: metrics_path,
        curves,
        final_loss: tail.mean(),
        seconds: start.elapsed().as_secs_f64(),
    })
}
