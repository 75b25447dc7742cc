//! Notebook 2 as a program (`examples/notebooks/flow_sde.ipynb` calls the same functions):
//! the shipped shapes DiT sampled from shared initial noise with the Flow-GRPO SDE, DanceGRPO's
//! SDE and CPS at several noise levels, and with the Flow-GRPO SDE at several step counts;
//! log-probability, diversity and GenEval-style scores per setting, charts and image grids.
//!
//! ```sh
//! cargo run --release --example flow_sde -- [PROMPTS] [OUT_DIR]
//! ```
//! Defaults: 4 held-out prompts × 4 samples, `runs/notebooks/flow_sde`.

use std::path::{Path, PathBuf};

use drift::candle::Device;
use drift::flow::grpo::{ImageTask, ShapesTask};
use drift::flow::model::load_dit_frozen;
use drift::notebook::flow_sde::{
    level_settings, sde_sweep, steps_settings, sweep_chart, sweep_grid, sweep_table,
};
use drift::notebook::Png;

fn main() -> anyhow::Result<()> {
    drift::core::alloc::keep_freed_memory();
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().map_or(Ok(4), |a| a.parse())?;
    let out = PathBuf::from(args.next().unwrap_or_else(|| "runs/notebooks/flow_sde".into()));
    std::fs::create_dir_all(&out)?;
    let model = load_dit_frozen(Path::new("examples/checkpoints/flow-shapes-v2"), &Device::Cpu)?;
    let task = ShapesTask::new()?;
    let prompts = task.eval_prompts()[..n].to_vec();

    let levels = sde_sweep(&model, &task, &prompts, 4, &level_settings(), 0)?;
    println!("{}", sweep_table(&levels)?);
    for metric in ["log_prob", "diversity", "partial"] {
        let chart = sweep_chart(&levels, metric, "level")?;
        Png::from_chart(&chart)?.save(out.join(format!("{metric}_vs_level.png")))?;
    }
    sweep_grid(&levels, 0)?.save(out.join("grid_levels.png"))?;

    let steps = sde_sweep(&model, &task, &prompts, 4, &steps_settings(), 0)?;
    println!("{}", sweep_table(&steps)?);
    Png::from_chart(&sweep_chart(&steps, "log_prob", "steps")?)?
        .save(out.join("log_prob_vs_steps.png"))?;
    sweep_grid(&steps, 0)?.save(out.join("grid_steps.png"))?;
    println!("pictures in {}", out.display());
    Ok(())
}
