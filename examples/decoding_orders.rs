//! Notebook 1 as a program (`examples/notebooks/decoding_orders.ipynb` calls the same
//! functions): greedy decoding of the code world's held-out specs with the shipped code dLLM
//! under each position rule and step budget, scored by running the tests; a chart of mean
//! reward and pass rate against model evaluations; and the commit order of two rows.
//!
//! ```sh
//! cargo run --release --example decoding_orders -- [ITEMS] [OUT_DIR]
//! ```
//! Defaults: 8 held-out items, `runs/notebooks/decoding_orders`.

use std::path::PathBuf;

use drift::dllm::grpo::{CodeTask, TextTask};
use drift::dllm::model::{DiffusionLm, LoadOptions};
use drift::notebook::decoding::{
    commit_order_picture, decode_items, default_rules, steps_sweep, sweep_chart, sweep_table,
};
use drift::notebook::Png;
use drift::samplers::dllm::{DecodeConfig, PositionRule};

fn main() -> anyhow::Result<()> {
    drift::core::alloc::keep_freed_memory();
    let mut args = std::env::args().skip(1);
    let items: usize = args.next().map_or(Ok(8), |a| a.parse())?;
    let out = PathBuf::from(args.next().unwrap_or_else(|| "runs/notebooks/decoding_orders".into()));
    std::fs::create_dir_all(&out)?;
    let model = DiffusionLm::from_dir("examples/checkpoints/dllm-code-v3", &LoadOptions::frozen())?;
    let task = CodeTask::new()?;
    let held_out = task.eval_items(items);
    let base = DecodeConfig { gen_length: 106, block_length: 106, ..DecodeConfig::default() };

    let rows = steps_sweep(&model, &task, &held_out, &default_rules(), &[13, 26, 53], &base, 8)?;
    println!("{}", sweep_table(&rows)?);
    Png::from_chart(&sweep_chart(&rows, "reward_mean")?)?
        .save(out.join("reward_vs_evaluations.png"))?;
    Png::from_chart(&sweep_chart(&rows, "pass_rate")?)?
        .save(out.join("pass_vs_evaluations.png"))?;

    let cfg = DecodeConfig { steps: 106, position: PositionRule::LowConfidence, ..base };
    let run = decode_items(&model, &task, &held_out[..2], &cfg, 2)?;
    for (c, s) in run.completions.iter().zip(&run.scores) {
        println!("reward {:.3}: {c:?}", s.reward);
    }
    commit_order_picture(&task, &run.trajectories[0], &[0, 1], 53)?
        .save(out.join("commit_order.png"))?;
    println!("pictures in {}", out.display());
    Ok(())
}
