//! The Flow-GRPO loop (arXiv 2505.05470, docs/algorithms.md §8): rollout → reward → advantages →
//! updates, with evaluation, metrics, curves, checkpoints and resume.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use candle_core::Device;
use candle_nn::VarBuilder;
use drift_core::metrics::{mean_std, retain_steps_up_to};
use drift_core::train::{detached_view, write_json, Finished, Optimizer, ParamSet, Resumed, Run};
use drift_samplers::flow::Schedule;
use serde::{Deserialize, Serialize};

use super::config::FlowGrpoConfig;
use super::eval::{diversity, evaluate, EvalReport, EvalSampling};
use super::rollout::{sample_batch, RolloutBatch};
use super::task::{ImageReward, ImageTask};
use super::update::update;
use crate::branch::{sample_tree_batch, update_edges, TreeBatch};
use crate::error::{FlowModelError, Result};
use crate::model::{load_dit_frozen, load_dit_trainable, save_dit, Dit};
use crate::policy::{FlowPolicy, PolicyModels, SavePolicy};

/// What a finished run reports.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FlowGrpoReport {
    /// The base model on the full held-out set (with diversity).
    pub base: EvalReport,
    /// The trained model (EMA weights when configured) on the full held-out set.
    pub trained: EvalReport,
    /// The held-out grid of the base model.
    pub grid_before: PathBuf,
    /// The held-out grid of the trained model.
    pub grid_after: PathBuf,
    /// The iteration reached, wall time, `metrics.jsonl` and `curves.png` (reward, accuracy,
    /// KL, clipping).
    #[serde(flatten)]
    pub run: Finished,
}

/// The metric keys drawn in `curves.png`.
pub const CURVE_KEYS: &[&str] =
    &["reward/mean", "eval/reward_mean", "eval/strict", "loss/kl", "clip/frac", "grad/norm"];

/// The DiT's models: the policy and its optimizer over `cfg.trainable` (every weight when
/// empty), a detached view, the frozen base as reference; saved as a whole DiT (the fixed
/// weights too), the trained ones under their EMA when configured.
fn load_dit_models(cfg: &FlowGrpoConfig, device: &Device) -> Result<PolicyModels<Dit>> {
    let (policy, varmap) = load_dit_trainable(&cfg.base, device)?;
    let view = Dit::new(
        *policy.config(),
        VarBuilder::from_tensors(detached_view(&varmap), candle_core::DType::F32, device),
    )?;
    let reference = load_dit_frozen(&cfg.base, device)?;
    let opt = Optimizer::new(cfg.optim_over_run(), ParamSet::matching(&varmap, &cfg.trainable)?)?;
    let all = ParamSet::all(&varmap);
    let dit_cfg = *policy.config();
    let save: SavePolicy = Box::new(move |dir: &Path, opt: &Optimizer| {
        let mut weights = all.snapshot()?;
        if let Some(ema) = opt.ema() {
            weights.extend(ema.weights().iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        save_dit(dir, &dit_cfg, &weights)
    });
    Ok(PolicyModels { policy, view, reference, opt, save })
}

fn eval_sampling(cfg: &FlowGrpoConfig) -> EvalSampling {
    EvalSampling { steps: cfg.eval_steps, guidance: cfg.guidance, seed: cfg.run.seed, batch: 32 }
}

/// Evaluates the view (under the EMA weights when configured) on `n` held-out prompts spread
/// evenly over the held-out list (so every category is represented; all when `None`), with
/// diversity when `with_diversity`.
fn evaluate_policy<M: FlowPolicy, T: ImageTask>(
    m: &PolicyModels<M>,
    task: &T,
    reward: &ImageReward<T::Prompt>,
    cfg: &FlowGrpoConfig,
    n: Option<usize>,
    grid: &Path,
    with_diversity: bool,
) -> Result<EvalReport> {
    let all = task.eval_prompts();
    let prompts = spread(all, n.unwrap_or(all.len()));
    let s = eval_sampling(cfg);
    let run = || -> Result<EvalReport> {
        let mut r = evaluate(&m.view, task, reward, &prompts, &s, Some(grid))?;
        if with_diversity {
            let d = spread(all, cfg.diversity_prompts);
            r.diversity = Some(diversity(&m.view, task, &d, cfg.diversity_samples, &s)?);
        }
        Ok(r)
    };
    match m.opt.ema() {
        Some(ema) => ema.with_weights(m.opt.params(), run)?,
        None => run(),
    }
}

/// `k` items of `all` at evenly spaced positions (all of them when `k >= all.len()`), so a
/// subset of a category-ordered list still covers every category.
fn spread<P: Clone>(all: &[P], k: usize) -> Vec<P> {
    let k = k.min(all.len());
    (0..k).map(|i| all[i * all.len() / k].clone()).collect()
}

fn log_eval(run: &mut Run, step: u64, r: &EvalReport) -> Result<()> {
    let mut v = vec![
        ("eval/reward_mean", r.reward_mean),
        ("eval/jpeg_compressibility", r.jpeg_compressibility),
    ];
    if let Some(s) = r.strict {
        v.push(("eval/strict", s));
    }
    if let Some(d) = r.diversity {
        v.push(("eval/diversity", d));
    }
    Ok(run.log(step, &v)?)
}

fn io_err(path: &Path, e: impl ToString) -> FlowModelError {
    FlowModelError::File { path: path.to_path_buf(), reason: e.to_string() }
}

/// The scored images of one iteration, `G` per prompt: a flat batch's samples or a tree
/// batch's leaves.
struct Scored<'a, P> {
    prompts: &'a [P],
    images: &'a [drift_rewards::image::Image],
    outcomes: &'a [drift_rewards::reward::Outcome],
    strict: &'a [Option<bool>],
}

impl<'a, P> Scored<'a, P> {
    fn of_flat(b: &'a RolloutBatch<P>) -> Self {
        Self { prompts: &b.prompts, images: &b.images, outcomes: &b.outcomes, strict: &b.strict }
    }

    fn of_tree(b: &'a TreeBatch<P>) -> Self {
        Self { prompts: &b.prompts, images: &b.images, outcomes: &b.outcomes, strict: &b.strict }
    }

    fn rewards(&self) -> Vec<f64> {
        self.outcomes.iter().map(|o| o.score).collect()
    }
}

/// Per-prompt reward statistics of a batch as JSON lines (`prompts.jsonl`).
fn write_prompt_stats<T: ImageTask>(
    path: &Path,
    step: u64,
    task: &T,
    batch: &Scored<'_, T::Prompt>,
    g: usize,
) -> Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| io_err(path, e))?;
    let rewards = batch.rewards();
    for (k, chunk) in rewards.chunks(g).enumerate() {
        let mean = chunk.iter().sum::<f64>() / chunk.len() as f64;
        let var = chunk.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / chunk.len() as f64;
        let strict = batch.strict[k * g..(k + 1) * g].iter().filter(|s| **s == Some(true)).count();
        let line = serde_json::json!({
            "step": step,
            "prompt": task.caption(&batch.prompts[k * g]),
            "reward_mean": mean,
            "reward_std": var.sqrt(),
            "strict": strict as f64 / g as f64,
        });
        writeln!(f, "{line}").map_err(|e| io_err(path, e))?;
    }
    Ok(())
}

/// Mean over groups of the per-pixel std across the group's images: how different the `G`
/// samples of one prompt are.
fn group_pixel_std(images: &[drift_rewards::image::Image], g: usize) -> f64 {
    let mut total = 0.0;
    let groups = images.chunks(g);
    let n = groups.len().max(1) as f64;
    for group in groups {
        let len = group[0].as_raw().len();
        let mut acc = 0.0;
        for p in 0..len {
            let vals = group.iter().map(|im| f64::from(im.as_raw()[p]) / 255.0);
            let mean = vals.clone().sum::<f64>() / group.len() as f64;
            acc += vals.map(|v| (v - mean).powi(2)).sum::<f64>() / group.len() as f64;
        }
        total += (acc / len as f64).sqrt();
    }
    total / n
}

/// Runs Flow-GRPO from `cfg.base` on `task` with `reward`, in `run_dir` (resuming from its
/// newest valid checkpoint). Logs one metrics line per iteration (reward, strict accuracy,
/// the core's loss diagnostics, timings, model evaluations) and evaluations every
/// `cfg.eval_every` iterations; ends with the trained model, curves and before/after grids.
pub fn train_flow_grpo<T: ImageTask>(
    cfg: &FlowGrpoConfig,
    config_text: &str,
    task: &T,
    reward: &ImageReward<T::Prompt>,
    run_dir: &Path,
    device: &Device,
) -> Result<FlowGrpoReport> {
    cfg.validate()?;
    let models = load_dit_models(cfg, device)?;
    train_flow_grpo_with(models, cfg, config_text, task, reward, run_dir)
}

/// [`train_flow_grpo`] on models already loaded: any [`FlowPolicy`] (the DiT, an SD3 MMDiT
/// with LoRA) with its reference, optimizer and saver. `cfg.base` is only recorded.
pub fn train_flow_grpo_with<M: FlowPolicy, T: ImageTask>(
    mut m: PolicyModels<M>,
    cfg: &FlowGrpoConfig,
    config_text: &str,
    task: &T,
    reward: &ImageReward<T::Prompt>,
    run_dir: &Path,
) -> Result<FlowGrpoReport> {
    cfg.validate()?;
    let schedule = Schedule::new(&cfg.schedule)?;
    let (mut run, resumed) =
        Run::open(run_dir, cfg.run, config_text, "flow-grpo", "iteration", &mut m.opt)?;
    std::fs::create_dir_all(run_dir.join("eval")).map_err(|e| io_err(run_dir, e))?;
    let grid_before = run_dir.join("eval/before.png");
    let base = match resumed {
        Resumed::From { dir, meta } => {
            retain_steps_up_to(&run_dir.join("prompts.jsonl"), meta.step)?;
            serde_json::from_value(meta.extra)
                .map_err(|e| io_err(&dir, format!("no base evaluation in the checkpoint: {e}")))?
        }
        Resumed::Fresh => {
            let _ = std::fs::remove_file(run_dir.join("prompts.jsonl"));
            let base = evaluate_policy(&m, task, reward, cfg, None, &grid_before, true)?;
            write_json(&run_dir.join("base_eval.json"), &base)?;
            log_eval(&mut run, 0, &base)?;
            base
        }
    };
    run.set_extra(serde_json::to_value(&base).map_err(|e| io_err(run_dir, e))?);
    let mut last_eval = base.clone();
    if let Some(branch) = &cfg.branch {
        run.println(&format!(
            "BranchGRPO: trees {} ({} leaves per prompt); {}",
            branch.shape(),
            branch.leaves_per_prompt(),
            if branch.prune == crate::branch::PruneConfig::default() {
                "no pruning".to_string()
            } else {
                format!("pruning {:?}", branch.prune)
            }
        ));
    }
    let stats_path = run_dir.join("prompts.jsonl");
    for step in run.steps() {
        // Rollouts run on the tracked policy: the same kernels as the update, so the first
        // update's ratio is exactly 1 (the fused inference kernels differ in the last bits).
        let (values, figures) = match &cfg.branch {
            None => {
                let batch = sample_batch(&m.policy, task, reward, cfg, &schedule, step)?;
                let scored = Scored::of_flat(&batch);
                write_prompt_stats(&stats_path, step + 1, task, &scored, cfg.group_size)?;
                update_and_measure(&mut m, &batch, cfg, &schedule, &run, step)?
            }
            Some(branch) => {
                let batch =
                    sample_tree_batch(&m.policy, task, reward, cfg, branch, &schedule, step)?;
                let scored = Scored::of_tree(&batch);
                write_prompt_stats(&stats_path, step + 1, task, &scored, cfg.group_size)?;
                update_tree_and_measure(&mut m, &batch, cfg, &schedule, &run, step)?
            }
        };
        run.log(step + 1, &values)?;
        let end = run.end_of(step);
        if end.eval_due {
            let grid = run_dir.join(format!("eval/step-{:05}.png", step + 1));
            last_eval =
                evaluate_policy(&m, task, reward, cfg, Some(cfg.eval_prompts), &grid, false)?;
            log_eval(&mut run, step + 1, &last_eval)?;
        }
        let mut figures = figures;
        if let Some(s) = last_eval.strict {
            figures.push(("eval_strict", s));
        }
        if run.close_step(step, end, &m.opt, &figures)?.is_break() {
            break;
        }
    }
    let grid_after = run_dir.join("eval/after.png");
    let trained = evaluate_policy(&m, task, reward, cfg, None, &grid_after, true)?;
    let last = run.step();
    log_eval(&mut run, last, &trained)?;
    if let Some(branch) = &cfg.branch {
        write_tree_grids(&m, task, reward, cfg, branch, &schedule, &run_dir.join("eval/trees"))?;
    }
    let model_dir = run.model_dir();
    (m.save)(&model_dir, &m.opt)?;
    // A task without a strict check (an SD3 run scored by a reward service) logs no
    // `eval/strict`.
    let keys: Vec<&str> = CURVE_KEYS
        .iter()
        .copied()
        .filter(|k| *k != "eval/strict" || trained.strict.is_some())
        .collect();
    let finished = run.finish(&keys)?;
    let report = FlowGrpoReport { base, trained, grid_before, grid_after, run: finished };
    write_json(&run_dir.join("summary.json"), &report)?;
    Ok(report)
}

/// A named value of a metrics line or the progress display.
type Figure = (&'static str, f64);

/// The updates of one iteration on `batch` (`updates_per_batch` mini-batches, `inner_epochs`
/// times), and its metrics line and progress figures.
fn update_and_measure<M: FlowPolicy, P>(
    m: &mut PolicyModels<M>,
    batch: &RolloutBatch<P>,
    cfg: &FlowGrpoConfig,
    schedule: &Schedule,
    run: &Run,
    step: u64,
) -> Result<(Vec<Figure>, Vec<Figure>)> {
    let t_update = Instant::now();
    let b = batch.len();
    let per_update = b.div_ceil(cfg.updates_per_batch);
    let per_call = if cfg.guidance != 1.0 { 2 } else { 1 };
    let parts: Vec<Vec<usize>> = (0..cfg.updates_per_batch)
        .map(|u| (u * per_update..((u + 1) * per_update).min(b)).collect())
        .collect();
    let totals = run_updates(&parts, cfg, run, step, |rows| {
        update(&m.policy, &m.reference, batch, rows, cfg, schedule, &mut m.opt)
    })?;
    let update_s = t_update.elapsed().as_secs_f64();
    let timing = (batch.rollout_seconds, batch.reward_seconds, update_s);
    let mut values = batch_values(&Scored::of_flat(batch), batch.degenerate_frac, cfg, timing);
    values.extend(totals.values());
    values.push(("evals/rollout_calls", batch.rollout.evaluations as f64));
    values.push(("evals/rollout_images", (b * cfg.schedule.steps * per_call) as f64));
    let figures = vec![("reward", values[0].1), ("strict", values[3].1)];
    Ok((values, figures))
}

/// Runs `one` on every mini-batch of `parts`, `inner_epochs` times (one optimizer step each),
/// reporting skipped steps, and sums what they did.
fn run_updates(
    parts: &[Vec<usize>],
    cfg: &FlowGrpoConfig,
    run: &Run,
    step: u64,
    mut one: impl FnMut(&[usize]) -> Result<super::update::UpdateReport>,
) -> Result<UpdateTotals> {
    let (mut diag, mut report, mut calls, mut images) = (Vec::new(), None, 0, 0);
    for _ in 0..cfg.inner_epochs {
        for part in parts.iter().filter(|p| !p.is_empty()) {
            let r = one(part)?;
            if let Some(reason) = r.step.skipped {
                run.println(&format!(
                    "iteration {step}: update skipped ({reason:?}); weights unchanged"
                ));
            }
            calls += r.cost.forward_calls;
            images += r.cost.image_evaluations;
            diag.push(r.diagnostics);
            report = Some(r.step);
        }
    }
    // No mini-batch at all (every edge pruned): nothing applied, nothing to report.
    let report = report.unwrap_or(drift_core::train::StepReport {
        applied: false,
        skipped: None,
        grad_norm: 0.0,
        lr: cfg.optim.adamw.lr,
    });
    if diag.is_empty() {
        diag.push(drift_core::loss::LossDiagnostics::default());
    }
    Ok(UpdateTotals { diag, report, calls, images })
}

/// The updates of one iteration of all optimizer steps, summed.
struct UpdateTotals {
    diag: Vec<drift_core::loss::LossDiagnostics>,
    report: drift_core::train::StepReport,
    calls: usize,
    images: usize,
}

impl UpdateTotals {
    fn values(&self) -> Vec<Figure> {
        let first = &self.diag[0];
        let first_dev = (first.ratio_min - 1.0).abs().max((first.ratio_max - 1.0).abs());
        let mut v = vec![
            ("grad/norm", self.report.grad_norm),
            ("lr", self.report.lr),
            ("update/applied", f64::from(u8::from(self.report.applied))),
            ("evals/update_calls", self.calls as f64),
            ("evals/update_images", self.images as f64),
            ("ratio/first_update_max_dev", first_dev),
        ];
        v.extend(self.diag.last().expect("at least one update").pairs());
        v
    }
}

/// The rollout's metrics: reward mean and std (values 0 and 1), failures, strict accuracy
/// (value 3), degenerate groups, within-group pixel diversity and the timings
/// `(rollout with reward, reward, update)` in seconds.
fn batch_values<P>(
    scored: &Scored<'_, P>,
    degenerate_frac: f64,
    cfg: &FlowGrpoConfig,
    (rollout_s, reward_s, update_s): (f64, f64, f64),
) -> Vec<Figure> {
    let b = scored.outcomes.len().max(1);
    let (mean, std) = mean_std(&scored.rewards());
    let strict = scored.strict.iter().filter(|s| **s == Some(true)).count() as f64 / b as f64;
    let failures = scored.outcomes.iter().filter(|o| !o.is_ok()).count();
    vec![
        ("reward/mean", mean),
        ("reward/std", std),
        ("reward/failures", failures as f64),
        ("train/strict", strict),
        ("groups/degenerate_frac", degenerate_frac),
        ("diversity/group_pixel_std", group_pixel_std(scored.images, cfg.group_size)),
        ("time/rollout_s", rollout_s - reward_s),
        ("time/reward_s", reward_s),
        ("time/update_s", update_s),
    ]
}

/// The updates of one BranchGRPO iteration on the kept edges of `batch`
/// (`updates_per_batch` mini-batches of edges, `inner_epochs` times), and its metrics line
/// (with the tree's size: leaves, edges, kept edges) and progress figures.
fn update_tree_and_measure<M: FlowPolicy, P>(
    m: &mut PolicyModels<M>,
    batch: &TreeBatch<P>,
    cfg: &FlowGrpoConfig,
    schedule: &Schedule,
    run: &Run,
    step: u64,
) -> Result<(Vec<Figure>, Vec<Figure>)> {
    let t_update = Instant::now();
    let kept = &batch.kept;
    // Mini-batch u takes every U-th kept edge, so each optimizer step sees every step of the
    // tree (the edges are stored step by step).
    let u = cfg.updates_per_batch.max(1);
    let parts: Vec<Vec<usize>> = (0..u)
        .map(|k| kept.iter().skip(k).step_by(u).copied().collect::<Vec<_>>())
        .filter(|p| !p.is_empty())
        .collect();
    let totals = run_updates(&parts, cfg, run, step, |edges| {
        update_edges(&m.policy, &m.reference, batch, edges, cfg, schedule, &mut m.opt)
    })?;
    let update_s = t_update.elapsed().as_secs_f64();
    let timing = (batch.rollout_seconds, batch.reward_seconds, update_s);
    let mut values = batch_values(&Scored::of_tree(batch), batch.degenerate_frac, cfg, timing);
    values.extend(totals.values());
    let per_call = if cfg.guidance != 1.0 { 2 } else { 1 };
    values.push(("evals/rollout_calls", cfg.schedule.steps as f64 * per_call as f64));
    values.push(("evals/rollout_images", batch.tree.evaluations as f64));
    values.push(("tree/leaves", batch.images.len() as f64));
    values.push(("tree/edges", batch.edges.steps.len() as f64));
    values.push(("tree/edges_kept", kept.len() as f64));
    values.push((
        "tree/shallowest_dropped_depth",
        batch.dropped_depths.iter().min().map_or(f64::NAN, |&d| d as f64),
    ));
    // The tree's shape in the progress line: leaves per prompt, edges built and trained.
    let figures = vec![
        ("reward", values[0].1),
        ("strict", values[3].1),
        ("leaves/prompt", cfg.group_size as f64),
        ("edges", batch.edges.steps.len() as f64),
        ("trained", kept.len() as f64),
    ];
    Ok((values, figures))
}

/// One grid per tree (root → leaves) for up to 4 held-out prompts, sampled by the trained
/// policy (under its EMA weights when configured) with the rollout's tree, in `dir`.
fn write_tree_grids<M: FlowPolicy, T: ImageTask>(
    m: &PolicyModels<M>,
    task: &T,
    reward: &ImageReward<T::Prompt>,
    cfg: &FlowGrpoConfig,
    branch: &crate::branch::BranchConfig,
    schedule: &Schedule,
    dir: &Path,
) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| io_err(dir, e))?;
    let prompts = spread(task.eval_prompts(), 4);
    let draw = || -> Result<()> {
        let dev = m.view.device().clone();
        let cond = task.encode(&prompts, &dev)?;
        let key = super::rollout::rollout_key(cfg.run.seed, u64::MAX);
        let rows: Vec<u64> = (0..prompts.len() as u64).collect();
        let x = super::rollout::initial_noise(key, &rows, m.view.latent_shape(), &dev)?;
        let null = m.view.null_cond(prompts.len())?;
        let guide = drift_samplers::flow::Guidance { uncond: &null, scale: cfg.guidance };
        let guidance = (cfg.guidance != 1.0).then_some(&guide);
        let tree = drift_samplers::flow::rollout_tree(
            &m.view,
            &x,
            &cond,
            schedule,
            &cfg.rollout,
            &branch.tree,
            guidance,
            key,
            &rows,
        )?;
        let leaves = super::task::tensor_to_images(&m.view.decode(tree.leaves())?)?;
        let per = branch.tree.leaves_per_root();
        let leaf_prompts: Vec<T::Prompt> =
            prompts.iter().flat_map(|q| std::iter::repeat_n(q.clone(), per)).collect();
        let scores: Vec<f64> = reward
            .evaluate_batch(&super::task::image_samples(&leaf_prompts, &leaves)?)
            .iter()
            .map(|o| o.score)
            .collect();
        let fused = crate::branch::fuse_rewards(&tree, &scores, branch.fusion)?;
        // Each drawn level shows the model's clean-image prediction x̂₀ = x − σ v, decoded.
        let mut previews =
            tree.latents.iter().map(|l| m.view.decode(l)).collect::<Result<Vec<_>>>()?;
        let n = schedule.steps();
        for level in crate::branch::grid::drawn_levels(&tree).into_iter().filter(|&l| l < n) {
            let x = &tree.latents[level];
            let rows = x.dim(0)?;
            let idx: Vec<u32> = tree.trees[level].iter().map(|&t| t as u32).collect();
            let idx = candle_core::Tensor::from_vec(idx, rows, &dev)?;
            let sigma = f64::from(schedule.sigmas()[level]);
            let s = candle_core::Tensor::full(sigma as f32, rows, &dev)?;
            let null = m.view.null_cond(rows)?;
            let guide = drift_samplers::flow::Guidance { uncond: &null, scale: cfg.guidance };
            let guidance = (cfg.guidance != 1.0).then_some(&guide);
            let c = cond.index_select(&idx, 0)?;
            let v = drift_samplers::flow::guided_velocity(&m.view, x, &s, &c, guidance)?;
            previews[level] = m.view.decode(&(x - (v * sigma)?)?)?;
        }
        for (k, q) in prompts.iter().enumerate() {
            let name: String = task
                .caption(q)
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                .collect();
            let path = dir.join(format!("tree-{k}-{name}.png"));
            crate::branch::write_tree_grid(&path, &tree, k, &fused, &previews)?;
        }
        Ok(())
    };
    match m.opt.ema() {
        Some(ema) => ema.with_weights(m.opt.params(), draw)?,
        None => draw(),
    }
}
