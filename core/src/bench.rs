//! Timing helpers shared by the crates' benchmarks and `drift bench`: the median of repeated
//! runs after a warm-up, and a plain f32 matmul as the machine's reference rate.

use std::time::Instant;

use candle_core::{DType, Device};

use crate::error::Result;
use crate::rng::RngKey;

/// Median seconds of `iters` (at least 1) timed runs of `f` after one untimed warm-up run.
pub fn median_seconds<T>(iters: usize, mut f: impl FnMut() -> T) -> f64 {
    std::hint::black_box(f());
    let mut runs: Vec<f64> = (0..iters.max(1))
        .map(|_| {
            let start = Instant::now();
            std::hint::black_box(f());
            start.elapsed().as_secs_f64()
        })
        .collect();
    runs.sort_by(f64::total_cmp);
    runs[runs.len() / 2]
}

/// GFLOP/s of an `n × n × n` f32 matmul on `device` (`2 n³` FLOPs over the median of 5 runs):
/// the reference peak the model benchmarks are compared with.
pub fn matmul_gflops(n: usize, device: &Device) -> Result<f64> {
    let a = RngKey::new(1).normal((n, n), DType::F32, device)?;
    let b = RngKey::new(2).normal((n, n), DType::F32, device)?;
    let secs = median_seconds(5, || a.matmul(&b).and_then(|c| c.sum_all()?.to_scalar::<f32>()));
    Ok(2.0 * (n as f64).powi(3) / secs / 1e9)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_is_of_the_timed_runs_not_the_warm_up() {
        let mut calls = 0;
        let secs = median_seconds(3, || {
            calls += 1;
            if calls == 1 {
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
        });
        assert_eq!(calls, 4, "one warm-up and three timed runs");
        assert!(secs < 0.1, "the slow warm-up is not timed: {secs}");
        assert!(matmul_gflops(64, &Device::Cpu).unwrap() > 0.0);
    }
}
