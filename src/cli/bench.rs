//! `drift bench`: throughput of the shipped models on this machine, one JSON line per case
//! (the same measurements as `cargo bench`, without building the bench profile).

use std::path::Path;

use anyhow::Result;
use candle_core::{DType, Device, Tensor};
use drift::core::bench::{matmul_gflops, median_seconds};
use drift::core::rng::RngKey;
use drift::dllm::model::{DiffusionLm, LoadOptions};
use drift::flow::grpo::{ImageTask, ShapesTask};
use drift::flow::model::{load_dit_frozen, load_dit_trainable};
use drift::flow::pretrain::{flow_matching_loss, FlowMatchingConfig};
use drift::samplers::flow::{rollout_sde, sample_ode, RolloutConfig, Schedule, ScheduleConfig};
use serde_json::json;

/// The cases `drift bench` knows.
pub const CASES: &[&str] = &["matmul", "rng", "dllm", "flow", "branch"];

/// Runs `cases` (all when empty) with `iters` timed repetitions each on `dev` (each timed run
/// ends with a device synchronisation, so GPU times include the queued kernels).
pub fn run(cases: &[String], iters: usize, dev: &Device) -> Result<()> {
    let all: Vec<String> = CASES.iter().map(|c| c.to_string()).collect();
    let cases = if cases.is_empty() { &all } else { cases };
    for c in cases {
        match c.as_str() {
            "matmul" => matmul(dev)?,
            "rng" => rng(iters, dev)?,
            "dllm" => dllm(iters, dev)?,
            "flow" => flow(iters, dev)?,
            "branch" => branch(iters, dev)?,
            other => {
                return Err(super::usage(format!(
                    "unknown bench case {other:?}: expected one of {CASES:?}"
                )))
            }
        }
    }
    Ok(())
}

fn matmul(dev: &Device) -> Result<()> {
    let n = if dev.is_cpu() { 1024 } else { 4096 };
    let gflops = matmul_gflops(n, dev)?;
    let device = format!("{:?}", dev.location());
    outln!(
        "{}",
        json!({"case": "matmul", "n": n, "dtype": "f32", "gflops": gflops, "device": device})
    );
    Ok(())
}

/// The keyed noise of one Flow-GRPO rollout step: 64 rows (8 prompts × 8 images) × 3 072
/// standard normals, drawn on the host and uploaded to `dev` as f32.
fn rng(iters: usize, dev: &Device) -> Result<()> {
    let (rows, cols) = (64, 3 * 32 * 32);
    let ids: Vec<u64> = (0..rows as u64).collect();
    let key = RngKey::new(0).stream("bench_noise");
    let secs = median_seconds(iters.max(5), || -> Result<()> {
        key.normal_rows(&ids, cols, DType::F32, dev)?;
        Ok(dev.synchronize()?)
    });
    let n = rows * cols;
    let line = json!({
        "case": "rng", "draw": "normal_rows", "rows": rows, "cols": cols, "seconds": secs,
        "normals_per_s": n as f64 / secs, "threads": candle_core::utils::get_num_threads(),
    });
    outln!("{line}");
    Ok(())
}

/// The shipped code dLLM: one frozen forward over 16 rows × 200 positions (a rollout step)
/// and one tracked forward + backward (a training micro-batch).
fn dllm(iters: usize, dev: &Device) -> Result<()> {
    let dir = Path::new("examples/checkpoints/dllm-code-v3");
    super::existing_dir(dir, "the shipped dLLM")?;
    let (b, t) = (16, 200);
    let ids = (RngKey::new(3).uniform((b, t), DType::F32, dev)? * 90.0)?
        .floor()?
        .affine(1.0, 4.0)?
        .to_dtype(DType::U32)?;
    for tracked in [false, true] {
        let opts = if tracked { LoadOptions::trainable() } else { LoadOptions::frozen() };
        let opts = LoadOptions { device: dev.clone(), ..opts };
        let model = DiffusionLm::from_dir(dir, &opts)?;
        let secs = median_seconds(iters, || -> Result<()> {
            let logits = model.raw_logits(&ids, None)?;
            if tracked {
                logits.sqr()?.mean_all()?.backward()?;
            }
            Ok(dev.synchronize()?)
        });
        let line = json!({
            "case": "dllm", "model": dir.display().to_string(), "params": model.num_parameters(),
            "mode": if tracked { "forward+backward" } else { "forward" },
            "batch": b, "seq_len": t, "seconds": secs, "tokens_per_s": (b * t) as f64 / secs,
        });
        outln!("{line}");
    }
    Ok(())
}

/// The shipped shapes DiT: 32 images with the 10-step ODE and the 10-step Flow-GRPO SDE.
fn flow(iters: usize, dev: &Device) -> Result<()> {
    let dir = Path::new("examples/checkpoints/flow-shapes-v2");
    super::existing_dir(dir, "the shipped DiT")?;
    let model = load_dit_frozen(dir, dev)?;
    let task = ShapesTask::new()?;
    let prompts = &task.eval_prompts()[..32];
    let cond = task.encode(prompts, dev)?;
    let mc = *model.config();
    let x = Tensor::randn(0f32, 1.0, (32, mc.channels, mc.image_size, mc.image_size), dev)?;
    let schedule = Schedule::new(&ScheduleConfig::default())?;
    let rows: Vec<u64> = (0..32).collect();
    let ode = median_seconds(iters, || -> Result<()> {
        sample_ode(&model, &x, &cond, &schedule, None)?;
        Ok(dev.synchronize()?)
    });
    let cfg = RolloutConfig::default();
    let sde = median_seconds(iters, || -> Result<()> {
        rollout_sde(&model, &x, &cond, &schedule, &cfg, None, RngKey::new(0), &rows)?;
        Ok(dev.synchronize()?)
    });
    for (sampler, secs) in [("ode", ode), ("flow_grpo_sde", sde)] {
        let line = json!({
            "case": "flow", "model": dir.display().to_string(), "sampler": sampler, "steps": 10,
            "batch": 32, "seconds": secs, "images_per_s": 32.0 / secs,
            "model_evals_per_s": 320.0 / secs,
        });
        outln!("{line}");
    }
    flow_train_step(dir, iters, dev)
}

/// One pretraining step's forward and backward of the flow-matching loss (batch 64, the
/// shipped `pretrain_flow.toml`), the optimizer step excluded.
fn flow_train_step(dir: &Path, iters: usize, dev: &Device) -> Result<()> {
    let (model, _varmap) = load_dit_trainable(dir, dev)?;
    let task = ShapesTask::new()?;
    let b = 64;
    let prompts: Vec<_> = task.eval_prompts().iter().cycle().take(b).cloned().collect();
    let ids = task.encode(&prompts, dev)?;
    let mc = *model.config();
    let x0 = Tensor::randn(0f32, 1.0, (b, mc.channels, mc.image_size, mc.image_size), dev)?;
    let rows: Vec<u64> = (0..b as u64).collect();
    let fm = FlowMatchingConfig::default();
    let secs = median_seconds(iters, || -> Result<()> {
        flow_matching_loss(&model, &x0, &ids, &fm, RngKey::new(0), &rows)?.backward()?;
        Ok(dev.synchronize()?)
    });
    let line = json!({
        "case": "flow", "model": dir.display().to_string(), "mode": "train_step",
        "batch": b, "seconds": secs, "images_per_s": b as f64 / secs,
    });
    outln!("{line}");
    Ok(())
}

/// One RL iteration (rollout with the GenEval-style reward, then one update) of Flow-GRPO and of
/// the BranchGRPO presets from the shipped DiT, 16 prompts × 8 final images each: model
/// evaluations (one model pass over one image at one step; policy and reference counted),
/// trained actions and the median wall time over `iters` iterations after one warm-up, with the
/// speed-up over Flow-GRPO with the SDE on every step (the paper's baseline).
fn branch(iters: usize, dev: &Device) -> Result<()> {
    use drift::core::train::{Optimizer, ParamSet};
    use drift::flow::branch::{sample_tree_batch, update_edges};
    use drift::flow::grpo::{sample_batch, shapes_reward, update, FlowGrpoConfig};
    use std::time::Instant;
    let presets = [
        ("flow_grpo_all_steps", FlowGrpoConfig::flow_grpo_all_steps()),
        ("flow_grpo (default: SDE on steps 0-2)", FlowGrpoConfig::default()),
        ("branch_grpo", FlowGrpoConfig::branch_grpo()),
        ("branch_grpo_pruned", FlowGrpoConfig::branch_grpo_pruned()),
        ("branch_grpo_mix", FlowGrpoConfig::branch_grpo_mix()),
    ];
    let task = ShapesTask::new()?;
    let mut baseline = None;
    for (name, cfg) in presets {
        super::existing_dir(&cfg.base, "the shipped DiT")?;
        let reward = shapes_reward(&cfg.rewards)?;
        let reference = load_dit_frozen(&cfg.base, dev)?;
        let schedule = Schedule::new(&cfg.schedule)?;
        let mut runs = Vec::new();
        let mut counts = (0, 0, 0);
        for rep in 0..=iters.max(1) {
            // Every repetition starts from the base weights: the same batch, masks and work.
            let (policy, varmap) = load_dit_trainable(&cfg.base, dev)?;
            let mut opt = Optimizer::new(cfg.optim, ParamSet::all(&varmap))?;
            let start = Instant::now();
            let (rollout_evals, r) = match &cfg.branch {
                None => {
                    let b = sample_batch(&policy, &task, reward.as_ref(), &cfg, &schedule, 0)?;
                    let rollout_s = start.elapsed().as_secs_f64();
                    let rows: Vec<usize> = (0..b.len()).collect();
                    let r = update(&policy, &reference, &b, &rows, &cfg, &schedule, &mut opt)?;
                    // One model pass per image per step (twice under guidance).
                    let per_call = if cfg.guidance != 1.0 { 2 } else { 1 };
                    (b.len() * cfg.schedule.steps * per_call, (rollout_s, r))
                }
                Some(branch) => {
                    let b = sample_tree_batch(
                        &policy,
                        &task,
                        reward.as_ref(),
                        &cfg,
                        branch,
                        &schedule,
                        0,
                    )?;
                    let rollout_s = start.elapsed().as_secs_f64();
                    let r =
                        update_edges(&policy, &reference, &b, &b.kept, &cfg, &schedule, &mut opt)?;
                    (b.tree.evaluations, (rollout_s, r))
                }
            };
            dev.synchronize()?;
            let total = start.elapsed().as_secs_f64();
            let (rollout_s, report) = r;
            counts =
                (rollout_evals, report.cost.image_evaluations, report.diagnostics.actions as usize);
            if rep > 0 {
                runs.push((total, rollout_s));
            }
        }
        runs.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (secs, rollout_s) = runs[runs.len() / 2];
        let base = *baseline.get_or_insert(secs);
        let line = json!({
            "case": "branch", "preset": name, "prompts": cfg.prompts_per_step,
            "images_per_prompt": cfg.group_size,
            "tree": cfg.branch.as_ref().map(|b| b.shape()),
            "rollout_model_evals": counts.0, "update_model_evals": counts.1,
            "trained_actions": counts.2, "rollout_s": rollout_s, "update_s": secs - rollout_s,
            "seconds": secs, "speedup_vs_flow_grpo_all_steps": base / secs,
            "threads": candle_core::utils::get_num_threads(),
        });
        outln!("{line}");
    }
    Ok(())
}
