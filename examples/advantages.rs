//! Notebook 3 as a program (`examples/notebooks/advantages.ipynb` calls the same functions):
//! how the core's baselines and scales turn groups of rewards into advantages, and how each
//! loss aggregation spreads a sequence's advantage over its tokens.
//!
//! ```sh
//! cargo run --release --example advantages -- [OUT_DIR]
//! ```

use std::path::PathBuf;

use drift::notebook::advantages::{
    advantage_presets, advantage_table, aggregation_presets, aggregation_table,
    pull_vs_length_chart,
};
use drift::notebook::Png;

fn main() -> anyhow::Result<()> {
    let out = PathBuf::from(
        std::env::args().nth(1).unwrap_or_else(|| "runs/notebooks/advantages".into()),
    );
    std::fs::create_dir_all(&out)?;
    // A mixed group, a group with one success, a degenerate (all-equal) group, a pair.
    let groups =
        vec![vec![1.0, 0.0, 0.5, 0.5], vec![1.0, 0.0, 0.0, 0.0], vec![0.3; 4], vec![2.0, 0.0]];
    println!("{}", advantage_table(&groups, &advantage_presets())?);
    let lengths = [4, 16, 64, 16];
    let adv = [1.0, 1.0, 1.0, -1.0];
    println!("{}", aggregation_table(&lengths, &adv, &aggregation_presets())?);
    let chart = pull_vs_length_chart(&[2, 4, 8, 16, 32, 64], 1.0, &aggregation_presets())?;
    Png::from_chart(&chart)?.save(out.join("pull_vs_length.png"))?;
    println!("pictures in {}", out.display());
    Ok(())
}
