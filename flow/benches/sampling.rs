//! Sampling throughput of the shipped DiT at batch 32: the Euler ODE (evaluation) and the
//! Flow-GRPO / DanceGRPO / CPS SDE rollouts that record every latent and log-probability
//! (training). One JSON line per case on stdout: sampler, steps, batch, CFG scale, seconds
//! (median of the timed runs), images/s and model evaluations/s (a CFG call counts two).
//!
//! Run with `cargo bench -p drift-flow --bench sampling` (from the workspace root, so the
//! shipped checkpoint `examples/checkpoints/flow-shapes-v2` is found; `DRIFT_BENCH_MODEL`
//! points at another one).

use std::path::PathBuf;

use candle_core::{DType, Device, Tensor};
use drift_core::bench::median_seconds;
use drift_core::rng::RngKey;
use drift_flow::grpo::{ImageTask, ShapesTask};
use drift_flow::model::{load_dit_frozen, Dit};
use drift_samplers::flow::{
    rollout_sde, sample_ode, Guidance, LogProbReduce, RolloutConfig, Schedule, ScheduleConfig,
    StepKind,
};
use serde_json::json;

const BATCH: usize = 32;

fn model_dir() -> PathBuf {
    if let Ok(p) = std::env::var("DRIFT_BENCH_MODEL") {
        return PathBuf::from(p);
    }
    // `cargo bench` runs in the crate's directory; the checkpoint lives at the workspace root.
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    root.join("examples/checkpoints/flow-shapes-v2")
}

struct Inputs {
    x: Tensor,
    cond: Tensor,
    null: Tensor,
    rows: Vec<u64>,
}

fn inputs(model: &Dit, dev: &Device) -> drift_flow::Result<Inputs> {
    let task = ShapesTask::new()?;
    let prompts: Vec<_> = task.eval_prompts().iter().take(BATCH).cloned().collect();
    let cond = task.encode(&prompts, dev)?;
    let mc = model.config();
    let x = RngKey::new(7).normal(
        (BATCH, mc.channels, mc.image_size, mc.image_size),
        DType::F32,
        dev,
    )?;
    Ok(Inputs { x, cond, null: model.null_prompt(BATCH)?, rows: (0..BATCH as u64).collect() })
}

fn report(sampler: &str, steps: usize, scale: f64, evals_per_step: usize, secs: f64) {
    let evals = (steps * evals_per_step) as f64;
    println!(
        "{}",
        json!({
            "case": "flow_sampling", "sampler": sampler, "steps": steps, "batch": BATCH,
            "cfg": scale, "seconds": secs, "images_per_s": BATCH as f64 / secs,
            "model_evals_per_s": evals / secs,
        })
    );
}

fn main() -> drift_flow::Result<()> {
    let dev = Device::Cpu;
    let model = load_dit_frozen(&model_dir(), &dev)?;
    let inp = inputs(&model, &dev)?;
    eprintln!(
        "model {}, batch {BATCH}, {} threads",
        model_dir().display(),
        candle_core::utils::get_num_threads()
    );
    for (steps, scale) in [(40, 1.0), (10, 1.0), (40, 4.5)] {
        let schedule = Schedule::new(&ScheduleConfig { steps, ..ScheduleConfig::default() })?;
        let guide = Guidance { uncond: &inp.null, scale };
        let guidance = (scale != 1.0).then_some(&guide);
        let secs = median_seconds(3, || sample_ode(&model, &inp.x, &inp.cond, &schedule, guidance));
        report("ode_euler", steps, scale, if scale != 1.0 { 2 } else { 1 }, secs);
    }
    let kinds = [
        ("sde_flow_grpo", StepKind::FlowGrpo { noise_level: 0.7 }),
        ("sde_dance_grpo", StepKind::Dance { eta: 0.3 }),
        ("sde_cps", StepKind::Cps { noise_level: 0.7 }),
    ];
    for steps in [10, 40] {
        let schedule = Schedule::new(&ScheduleConfig { steps, ..ScheduleConfig::default() })?;
        for (name, step) in kinds {
            let cfg = RolloutConfig { step, log_prob: LogProbReduce::Mean, window: None };
            let key = RngKey::new(3);
            let secs = median_seconds(3, || {
                rollout_sde(&model, &inp.x, &inp.cond, &schedule, &cfg, None, key, &inp.rows)
            });
            report(name, steps, 1.0, 1, secs);
        }
    }
    Ok(())
}
