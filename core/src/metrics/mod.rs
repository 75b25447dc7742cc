//! Metrics: a JSONL line per step under stable names (`reward/mean`, `loss/policy`,
//! `clip/frac`, `adv/std`, `time/rollout_s`, …; docs/architecture.md §5), a console progress display, and
//! PNG curves drawn without any system font.

mod canvas;
mod chart;
pub mod font;
mod jsonl;
mod plot;
mod progress;

pub use chart::{LineChart, Series};
pub use jsonl::{read_metrics, MetricsRow, MetricsWriter};
pub use plot::plot_metrics;
pub use progress::Progress;
