//! Metrics: a JSONL line per step under stable names (`reward/mean`, `loss/policy`,
//! `clip/frac`, `adv/std`, `time/rollout_s`, …; docs/architecture.md §5), a console progress display, and
//! PNG curves drawn without any system font.

mod canvas;
mod chart;
mod jsonl;
mod plot;
mod progress;

pub use chart::{LineChart, Series};
pub use jsonl::{read_metrics, retain_steps_up_to, MetricsRow, MetricsWriter};
pub use plot::{plot_metrics, MAX_PANELS};
pub use progress::Progress;

/// Mean and population standard deviation of `values`: `μ = Σv / n`, `√(Σ(v − μ)² / n)` (the
/// `reward/mean` and `reward/std` lines of every trainer); NaN for an empty slice.
pub fn mean_std(values: &[f64]) -> (f64, f64) {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
    (mean, var.sqrt())
}
