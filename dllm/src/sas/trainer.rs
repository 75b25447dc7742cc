//! The SAS trainer (`drift train sas`): GRPO over decoding orders of a frozen Sudoku model.
//!
//! One iteration: `P` train puzzles × `G` orderings decoded with the policy choosing the
//! committed positions (tokens greedy, so the order is the only randomness), every decision
//! recorded; reward = w × the task's (right empty cells + solved bonus) + λ × the mean log-prob of
//! the committed tokens under the frozen denoiser; per-puzzle group advantages (the core's
//! `group_advantages`); then `μ` updates of the core's `policy_loss` with each decoding step
//! one action (its Plackett–Luce log-prob re-scored under the current weights against the
//! rollout's). The denoiser is frozen: plain tensors, no `Var`s.

use std::path::Path;
use std::time::Instant;

use candle_core::{DType, Device, Tensor, D};
use drift_core::advantage::group_advantages;
use drift_core::groups::{shuffle_within_groups, Groups};
use drift_core::loss::{policy_loss, LossDiagnostics, PolicyInputs};
use drift_core::rng::RngKey;
use drift_core::train::{Finished, Optimizer, ParamSet, Resumed, Run};
use drift_samplers::dllm::{decode_with_policy, DecodeBatch};
use serde::{Deserialize, Serialize};

use super::config::SasConfig;
use super::eval::{completion_texts, evaluate_order, OrderEval};
use super::policy::{RecordingPolicy, SasOrderPolicy};
use crate::error::{DllmError, Result};
use crate::grpo::{SudokuTextTask, TextTask};
use crate::model::{DiffusionLm, LoadOptions};
use crate::tokenizer::PAD_ID;

/// What a SAS run reports.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SasReport {
    /// The frozen model under the configured heuristic rule (`decode.position`).
    pub heuristic: OrderEval,
    /// The untrained policy (greedy).
    pub base: OrderEval,
    /// The trained policy (greedy).
    pub trained: OrderEval,
    /// The run's end, wall time, metrics and curves.
    #[serde(flatten)]
    pub run: Finished,
}

/// The start of the run, kept in every checkpoint so a resumed run reports it.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Start {
    heuristic: OrderEval,
    base: OrderEval,
}

/// Curves plotted at the end.
pub const CURVE_KEYS: &[&str] =
    &["reward/mean", "train/solve_rate", "eval/solve_rate", "grad/norm", "clip/frac"];

fn io_err(path: &Path, e: impl ToString) -> DllmError {
    DllmError::Io { path: path.to_path_buf(), source: std::io::Error::other(e.to_string()) }
}

fn eval_policy(
    model: &DiffusionLm,
    task: &SudokuTextTask,
    policy: &SasOrderPolicy,
    cfg: &SasConfig,
) -> Result<OrderEval> {
    let items = task.eval_items(cfg.eval_items);
    evaluate_order(model, task, &items, &cfg.decode, Some(&policy.greedy()), 64, 0)
}

/// Trains an order policy for the frozen model `cfg.base` into `run_dir` (resuming from its
/// newest valid checkpoint), evaluating the heuristic and the untrained policy first and the
/// trained policy last; the policy is saved in `run_dir/model`.
pub fn train_sas(
    cfg: &SasConfig,
    config_text: &str,
    run_dir: &Path,
    device: &Device,
) -> Result<SasReport> {
    cfg.validate()?;
    let model = DiffusionLm::from_dir(
        &cfg.base,
        &LoadOptions { device: device.clone(), ..LoadOptions::frozen() },
    )?;
    let tokenizer = model.tokenizer().cloned().ok_or_else(|| DllmError::Config {
        key: "base",
        value: cfg.base.display().to_string(),
        expected: "a model folder with its tokenizer".into(),
    })?;
    let task = SudokuTextTask::new(&cfg.sudoku, tokenizer)?;
    let mut policy_cfg = cfg.policy;
    if policy_cfg.projection > 0 && policy_cfg.vocab_size == 0 {
        policy_cfg.vocab_size = model.config().logit_width();
    }
    let policy = SasOrderPolicy::new(policy_cfg, cfg.run.seed, device)?;
    let mut opt =
        Optimizer::new(cfg.optim.over_run(cfg.updates()), ParamSet::all(policy.varmap()))?;
    let (mut run, resumed) =
        Run::open(run_dir, cfg.run, config_text, "sas", "iteration", &mut opt)?;
    let start = match resumed {
        Resumed::From { dir, meta } => serde_json::from_value(meta.extra)
            .map_err(|e| io_err(&dir, format!("no start evaluation in the checkpoint: {e}")))?,
        Resumed::Fresh => {
            let items = task.eval_items(cfg.eval_items);
            let heuristic = evaluate_order(&model, &task, &items, &cfg.decode, None, 64, 0)?;
            let base = eval_policy(&model, &task, &policy, cfg)?;
            run.log(
                0,
                &[
                    ("eval/heuristic_solve_rate", heuristic.solve_rate),
                    ("eval/solve_rate", base.solve_rate),
                ],
            )?;
            Start { heuristic, base }
        }
    };
    run.set_extra(serde_json::to_value(&start).map_err(|e| io_err(run_dir, e))?);
    let mut last = start.base.solve_rate;
    for step in run.steps() {
        let figures = iteration(&model, &task, &policy, &mut opt, cfg, step, &mut run)?;
        let end = run.end_of(step);
        if end.eval_due {
            last = eval_policy(&model, &task, &policy, cfg)?.solve_rate;
            run.log(step + 1, &[("eval/solve_rate", last)])?;
        }
        let figures = [figures[0], figures[1], ("eval_solve", last)];
        if run.close_step(step, end, &opt, &figures)?.is_break() {
            break;
        }
    }
    let trained = eval_policy(&model, &task, &policy, cfg)?;
    let step = run.step();
    run.log(
        step,
        &[("eval/solve_rate", trained.solve_rate), ("eval/cell_accuracy", trained.cell_accuracy)],
    )?;
    policy.save(&run.model_dir())?;
    let finished = run.finish(CURVE_KEYS)?;
    let report = SasReport { heuristic: start.heuristic, base: start.base, trained, run: finished };
    let json = serde_json::to_string_pretty(&report).map_err(|e| io_err(run_dir, e))?;
    std::fs::write(run_dir.join("summary.json"), json).map_err(|e| io_err(run_dir, e))?;
    Ok(report)
}

/// One SAS iteration (module docs), logged.
fn iteration(
    model: &DiffusionLm,
    task: &SudokuTextTask,
    policy: &SasOrderPolicy,
    opt: &mut Optimizer,
    cfg: &SasConfig,
    step: u64,
    run: &mut Run,
) -> Result<[(&'static str, f64); 2]> {
    let (p, g) = (cfg.puzzles_per_step, cfg.group_size);
    let dev = model.device();
    let t0 = Instant::now();
    let puzzles: Vec<_> =
        (0..p as u64).map(|i| task.train_item(cfg.run.seed, step * p as u64 + i)).collect();
    let prompts = puzzles.iter().map(|i| task.prompt_ids(i)).collect::<Result<Vec<_>>>()?;
    let batch = DecodeBatch {
        prompts: &prompts,
        group_size: g,
        pad_id: PAD_ID,
        padding: model.config().padding(),
        first_row: step * (p * g) as u64,
        greedy_per_group: 0,
    };
    let key = RngKey::new(cfg.run.seed).stream("sas/rollout").step(step);
    let recorder = RecordingPolicy::new(policy);
    let t = decode_with_policy(model, &cfg.decode, &batch, key, dev, &recorder)?;
    let steps = recorder.into_steps();
    let old = t.order_log_probs.clone().ok_or_else(|| DllmError::Config {
        key: "decode",
        value: "no order decisions".into(),
        expected: "a decode with at least one step".into(),
    })?;
    let decode_s = t0.elapsed().as_secs_f64();
    // Rewards: the task's and the dense self-aware term (mean committed-token log-prob).
    let texts = completion_texts(task, &t)?;
    let items: Vec<_> = puzzles.iter().flat_map(|i| std::iter::repeat_n(i.clone(), g)).collect();
    let scores = task.score(&items, &texts);
    let committed = t.completion_mask.sum(D::Minus1)?.clamp(1.0, f64::INFINITY)?;
    let dense = (t.path_log_prob()? / committed)?.to_vec1::<f32>()?;
    let mut rewards: Vec<f32> = scores
        .iter()
        .zip(&dense)
        .map(|(s, &d)| (cfg.task_weight * s.reward + cfg.dense_weight * f64::from(d)) as f32)
        .collect();
    let reward_mean = rewards.iter().map(|&r| f64::from(r)).sum::<f64>() / rewards.len() as f64;
    if cfg.shuffle_rewards {
        shuffle_within_groups(&mut rewards, g, key.stream("shuffle_rewards"));
    }
    let groups = Groups::contiguous(p, g, dev)?;
    let adv = group_advantages(&Tensor::from_vec(rewards, p * g, dev)?, &groups, &cfg.advantage)?;
    let degenerate = adv.degenerate_groups()?.iter().filter(|&&d| d).count() as f64 / p as f64;
    let advantages = adv.values.to_dtype(DType::F32)?;
    // One action per decoding step of a row that still had positions to commit.
    let mask = Tensor::stack(
        &steps
            .iter()
            .map(|s| s.count.gt(0u32)?.to_dtype(DType::F32))
            .collect::<candle_core::Result<Vec<_>>>()?,
        1,
    )?;
    let t1 = Instant::now();
    let (mut report, mut diagnostics) = (None, None::<LossDiagnostics>);
    for it in 0..cfg.inner_iterations {
        let lp = policy.replay_log_probs(&steps)?;
        let inputs = PolicyInputs {
            lp_new: &lp,
            lp_old: &old,
            mask: &mask,
            advantages: &advantages,
            reference: None,
        };
        let loss = policy_loss(&cfg.loss(), &inputs)?;
        let (_, r) = opt.minimize(&loss.loss)?;
        if let Some(reason) = r.skipped {
            run.println(&format!("iteration {step}.{it}: update skipped ({reason:?})"));
        }
        diagnostics = Some(loss.diagnostics()?);
        report = Some(r);
    }
    let update_s = t1.elapsed().as_secs_f64();
    let (report, diagnostics) = (report.expect("μ ≥ 1"), diagnostics.expect("μ ≥ 1"));
    let n = scores.len() as f64;
    let solve = scores.iter().filter(|s| s.passed).count() as f64 / n;
    let cells = scores.iter().map(|s| s.components[0].1).sum::<f64>() / n;
    let dense_mean = dense.iter().map(|&d| f64::from(d)).sum::<f64>() / n;
    let mut values: Vec<(&str, f64)> = vec![
        ("reward/mean", reward_mean),
        ("train/solve_rate", solve),
        ("train/cell_accuracy", cells),
        ("reward/dense", dense_mean),
        ("groups/degenerate_frac", degenerate),
        ("grad/norm", report.grad_norm),
        ("lr", report.lr),
        ("time/decode_s", decode_s),
        ("time/update_s", update_s),
    ];
    values.extend(diagnostics.pairs());
    run.log(step + 1, &values)?;
    Ok([("reward", reward_mean), ("solve", solve)])
}
