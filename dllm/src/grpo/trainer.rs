//! The dLLM RL loop: rollout → reward → advantages → old/reference log-probs → `μ` updates,
//! with evaluation, metrics, curves, checkpoints and resume.

use std::path::Path;
use std::time::Instant;

use candle_core::Device;
use drift_core::metrics::mean_std;
use drift_core::rng::RngKey;
use drift_core::train::{write_json, Checkpointer, Finished, Optimizer, ParamSet, Resumed, Run};
use serde::{Deserialize, Serialize};

use super::config::{DllmGrpoConfig, ResolvedConfig};
use super::eval::{evaluate, EvalReport};
use super::rollout::sample_batch;
use super::task::TextTask;
use super::update::{batch_log_probs, update};
use crate::error::{DllmError, Result};
use crate::model::{DiffusionLm, LoadOptions};

/// What a run produced.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DllmGrpoReport {
    /// The base model's held-out evaluation (the task's `eval_items`), with the task's
    /// further held-out sets.
    pub base: Evaluation,
    /// The trained model's.
    pub trained: Evaluation,
    /// The iteration reached, wall time, `metrics.jsonl` and `curves.png`.
    #[serde(flatten)]
    pub run: Finished,
}

/// The curves plotted at the end (with `eval/<set>/pass_rate` of each further held-out set
/// after `eval/pass_rate`).
pub const CURVE_KEYS: &[&str] =
    &["reward/mean", "train/pass_rate", "eval/pass_rate", "loss/kl", "clip/frac", "grad/norm"];

/// One evaluation: the headline held-out set and the task's further sets by name.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Evaluation {
    /// The task's `eval_items`.
    #[serde(flatten)]
    pub main: EvalReport,
    /// The task's `extra_eval_sets`, in order.
    #[serde(default)]
    pub extra: Vec<(String, EvalReport)>,
}

fn io_err(path: &Path, e: impl ToString) -> DllmError {
    DllmError::Io { path: path.to_path_buf(), source: std::io::Error::other(e.to_string()) }
}

struct Models {
    policy: DiffusionLm,
    view: DiffusionLm,
    reference: DiffusionLm,
    opt: Optimizer,
}

impl Models {
    /// Brings the rollout view up to the policy's weights. A plain policy's view shares its
    /// storage and needs nothing; with LoRA the view is the policy with its adapters merged
    /// (one GEMM per layer, as the base), rebuilt after the weights change.
    fn refresh_view(&mut self) -> Result<()> {
        if self.policy.lora().is_some() {
            self.view = self.policy.merged()?;
        }
        Ok(())
    }
}

fn load_models(cfg: &DllmGrpoConfig, device: &Device) -> Result<Models> {
    let trainable = LoadOptions {
        device: device.clone(),
        lora: cfg.lora.clone(),
        adapter_key: RngKey::new(cfg.run.seed).stream("lora"),
        ..LoadOptions::trainable()
    };
    let policy = DiffusionLm::from_dir(&cfg.base, &trainable)?;
    // With LoRA, `refresh_view` replaces this by the merged policy once the run is open.
    let view = policy.detached()?;
    // Merged, a LoRA policy's reference is the base itself (`B = 0`), at the base's cost.
    let reference = policy.merged()?;
    let varmap = policy.varmap().ok_or(DllmError::Config {
        key: "base",
        value: cfg.base.display().to_string(),
        expected: "trainable weights".into(),
    })?;
    let opt = Optimizer::new(cfg.optim, ParamSet::matching(varmap, &cfg.trainable)?)?;
    Ok(Models { policy, view, reference, opt })
}

/// The checkpoint file of a refreshing run's reference policy (`ref_refresh_every > 0`), so a
/// resumed run continues against exactly the reference it had.
const REFERENCE_FILE: &str = "reference.safetensors";

/// The reference policy's weights by checkpoint name (shared storage: the reference is frozen).
fn reference_weights(
    reference: &DiffusionLm,
) -> std::collections::HashMap<String, candle_core::Tensor> {
    reference.weights().iter().map(|(n, t)| (n.clone(), t.clone())).collect()
}

/// Evaluates the policy on the task's held-out sets; with `optim.ema` set, the policy under its
/// EMA weights (Flow-GRPO evaluates its EMA the same way), the training weights restored after.
fn run_eval<T: TextTask>(m: &Models, task: &T, cfg: &DllmGrpoConfig) -> Result<Evaluation> {
    match m.opt.ema() {
        None => eval_view(&m.view, task, cfg),
        Some(ema) => ema.with_weights(m.opt.params(), || {
            // A plain view shares the policy's storage and so sees the swapped weights; a
            // LoRA view is a merged copy, merged again here from the averaged adapters.
            match m.policy.lora() {
                Some(_) => eval_view(&m.policy.merged()?, task, cfg),
                None => eval_view(&m.view, task, cfg),
            }
        })?,
    }
}

/// Saves the trained policy (adapters merged); with `optim.ema` set, its EMA weights, the
/// ones every evaluation of the run scored.
fn save_policy(m: &Models, dir: &Path) -> Result<()> {
    match m.opt.ema() {
        None => m.policy.save_pretrained(dir),
        Some(ema) => ema.with_weights(m.opt.params(), || m.policy.save_pretrained(dir))?,
    }
}

fn eval_view<T: TextTask>(
    view: &DiffusionLm,
    task: &T,
    cfg: &DllmGrpoConfig,
) -> Result<Evaluation> {
    let score = |items: &[T::Item]| -> Result<EvalReport> {
        Ok(evaluate(view, task, items, &cfg.decode, cfg.eval_steps, cfg.eval_batch)?.0)
    };
    let main = score(&task.eval_items(cfg.eval_items))?;
    let extra = task
        .extra_eval_sets(cfg.eval_items)
        .into_iter()
        .map(|(name, items)| Ok((name.to_string(), score(&items)?)))
        .collect::<Result<Vec<_>>>()?;
    Ok(Evaluation { main, extra })
}

fn log_eval(run: &mut Run, step: u64, r: &Evaluation) -> Result<()> {
    let mut values = vec![
        ("eval/pass_rate".to_string(), r.main.pass_rate),
        ("eval/reward_mean".into(), r.main.reward_mean),
    ];
    for (name, e) in &r.extra {
        values.push((format!("eval/{name}/pass_rate"), e.pass_rate));
        values.push((format!("eval/{name}/reward_mean"), e.reward_mean));
    }
    let values: Vec<(&str, f64)> = values.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    Ok(run.log(step, &values)?)
}

/// Runs the recipe of `cfg` on `task` into `run_dir` (resuming from its newest valid
/// checkpoint), evaluating the base first and the trained policy last.
pub fn train_dllm_grpo<T: TextTask>(
    cfg: &DllmGrpoConfig,
    config_text: &str,
    task: &T,
    run_dir: &Path,
    device: &Device,
) -> Result<DllmGrpoReport> {
    let rc = cfg.resolved()?;
    // The resolved config: its schedule's omitted `total` is the run's length.
    let mut m = load_models(&rc.given, device)?;
    let label = format!("{:?}", cfg.recipe).to_lowercase();
    let (mut run, resumed) =
        Run::open(run_dir, cfg.run, config_text, &label, "iteration", &mut m.opt)?;
    m.refresh_view()?;
    let base = match resumed {
        Resumed::From { dir, meta } => {
            if cfg.ref_refresh_every > 0 {
                // The reference of a refreshing run is the policy at the last refresh, which
                // every checkpoint of such a run stores.
                let weights = Checkpointer::load_tensors(&dir, REFERENCE_FILE, device)?;
                m.reference = m.policy.frozen_with_weights(weights)?;
            }
            serde_json::from_value(meta.extra)
                .map_err(|e| io_err(&dir, format!("no base evaluation in the checkpoint: {e}")))?
        }
        Resumed::Fresh => {
            let base = run_eval(&m, task, cfg)?;
            log_eval(&mut run, 0, &base)?;
            base
        }
    };
    run.set_extra(serde_json::to_value(&base).map_err(|e| io_err(run_dir, e))?);
    if cfg.ref_refresh_every > 0 {
        run.set_extra_tensors(REFERENCE_FILE, reference_weights(&m.reference));
    }
    let mut last_pass = base.main.pass_rate;
    for step in run.steps() {
        let figures = iteration(&mut m, task, &rc, step, &mut run)?;
        let end = run.end_of(step);
        if end.eval_due {
            let e = run_eval(&m, task, cfg)?;
            log_eval(&mut run, step + 1, &e)?;
            last_pass = e.main.pass_rate;
        }
        if cfg.ref_refresh_every > 0 && (step + 1) % cfg.ref_refresh_every == 0 {
            m.reference = m.policy.merged()?;
            run.set_extra_tensors(REFERENCE_FILE, reference_weights(&m.reference));
        }
        let figures = [figures[0], figures[1], ("eval_pass", last_pass)];
        if run.close_step(step, end, &m.opt, &figures)?.is_break() {
            break;
        }
    }
    let trained = run_eval(&m, task, cfg)?;
    let last = run.step();
    log_eval(&mut run, last, &trained)?;
    let model_dir = run.model_dir();
    save_policy(&m, &model_dir)?;
    let extra: Vec<String> =
        trained.extra.iter().map(|(name, _)| format!("eval/{name}/pass_rate")).collect();
    let mut keys: Vec<&str> = CURVE_KEYS.to_vec();
    keys.splice(3..3, extra.iter().map(String::as_str));
    let finished = run.finish(&keys)?;
    let report = DllmGrpoReport { base, trained, run: finished };
    write_json(&run_dir.join("summary.json"), &report)?;
    Ok(report)
}

/// One RL iteration, logged.
fn iteration<T: TextTask>(
    m: &mut Models,
    task: &T,
    rc: &ResolvedConfig,
    step: u64,
    run: &mut Run,
) -> Result<[(&'static str, f64); 2]> {
    let batch = sample_batch(&m.view, task, rc, step)?;
    let t_lp = Instant::now();
    let mu = rc.parts.inner_iterations;
    let mut estimator_rows = 0;
    let mut olds = Vec::with_capacity(mu);
    let mut refs = Vec::with_capacity(mu);
    for it in 0..mu {
        // The tracked policy: the same kernels as the update, so the first ratio is exactly 1.
        // On-policy (μ = 1) the update's own pass gives the same values, so none is run here.
        if mu > 1 {
            let (old, rows) = batch_log_probs(&m.policy, &batch, rc, step, it)?;
            olds.push(Some(old));
            estimator_rows += rows;
        } else {
            olds.push(None);
        }
        if rc.parts.loss.kl.is_some() {
            let (r, rows) = batch_log_probs(&m.reference, &batch, rc, step, it)?;
            refs.push(r);
            estimator_rows += rows;
        }
    }
    let logprob_s = t_lp.elapsed().as_secs_f64();
    let t_up = Instant::now();
    let mut reports = Vec::with_capacity(mu);
    for (it, old) in olds.iter().enumerate() {
        let r = update(&m.policy, &batch, old.as_ref(), refs.get(it), rc, step, it, &mut m.opt)?;
        if let Some(reason) = r.step.skipped {
            run.println(&format!("iteration {step}.{it}: update skipped ({reason:?})"));
        }
        estimator_rows += r.cost;
        reports.push(r);
    }
    m.refresh_view()?;
    let update_s = t_up.elapsed().as_secs_f64();
    let b = batch.len() as f64;
    let rewards: Vec<f64> = batch.scores.iter().map(|s| s.reward).collect();
    let (mean, std) = mean_std(&rewards);
    let pass = batch.scores.iter().filter(|s| s.passed).count() as f64 / b;
    let failures = batch.scores.iter().filter(|s| s.failure.is_some()).count() as f64;
    let len = batch.completion.iter().map(|r| r.iter().filter(|&&c| c).count()).sum::<usize>();
    let first = &reports[0].diagnostics;
    let first_dev = (first.ratio_min - 1.0).abs().max((first.ratio_max - 1.0).abs());
    let last = reports.last().expect("μ ≥ 1");
    let mut values: Vec<(&str, f64)> = vec![
        ("reward/mean", mean),
        ("reward/std", std),
        ("reward/failures", failures),
        ("train/pass_rate", pass),
        ("completion/len", len as f64 / b),
        ("groups/degenerate_frac", batch.degenerate_frac),
        ("grad/norm", last.step.grad_norm),
        ("lr", last.step.lr),
        ("time/decode_s", batch.decode_seconds),
        ("time/reward_s", batch.reward_seconds),
        ("time/logprob_s", logprob_s),
        ("time/update_s", update_s),
        ("evals/decode_steps", batch.trajectory.evaluations as f64),
        ("evals/estimator_rows", estimator_rows as f64),
        ("ratio/first_update_max_dev", first_dev),
    ];
    values.extend(last.diagnostics.pairs());
    run.log(step + 1, &values)?;
    Ok([("reward", mean), ("pass", pass)])
}
