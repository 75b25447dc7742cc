//! LLaDA's per-step commit quota.

/// The number of tokens committed at each of `steps` steps when `n` masked tokens must be
/// decoded: `⌊n / steps⌋` each, and the remainder `n mod steps` given one extra token to the
/// first steps (LLaDA arXiv 2502.09992, `generate.py::get_num_transfer_tokens`). The entries
/// sum to `n`; `steps = 0` gives an empty quota.
///
/// ```
/// use drift_samplers::dllm::num_transfer_tokens;
/// assert_eq!(num_transfer_tokens(10, 4), vec![3, 3, 2, 2]);
/// ```
pub fn num_transfer_tokens(n: usize, steps: usize) -> Vec<usize> {
    if steps == 0 {
        return Vec::new();
    }
    let (base, rem) = (n / steps, n % steps);
    (0..steps).map(|s| base + usize::from(s < rem)).collect()
}

/// Entry `i` of torch's `linspace(start, end, n)` in f32, as its CPU kernel computes it:
/// `start + step·i` in the first half, `end − step·(n − 1 − i)` in the second, with
/// `step = (end − start)/(n − 1)` in f32.
fn torch_linspace_f32(start: f32, end: f32, n: usize, i: usize) -> f32 {
    let step = (end - start) / (n as f32 - 1.0);
    if i < n / 2 {
        start + step * i as f32
    } else {
        end - step * (n - 1 - i) as f32
    }
}

/// Dream's commit count at step `step` of `steps` with `masked` positions still masked:
/// `⌊masked · (1 − s/t)⌋`, `t, s` = entries `step, step + 1` of `linspace(1, eps, steps + 1)`
/// in f32, and every masked position at the last step (`diffusion_generate`).
///
/// ```
/// use drift_samplers::dllm::dream_transfer_count;
/// // 16 masked, 16 steps: 16·(1 − s/t) = 0.999 commits nothing at the first step.
/// assert_eq!(dream_transfer_count(16, 0, 16, 1e-3), 0);
/// assert_eq!(dream_transfer_count(5, 15, 16, 1e-3), 5);
/// ```
pub fn dream_transfer_count(masked: usize, step: usize, steps: usize, eps: f64) -> usize {
    if step + 1 >= steps {
        return masked;
    }
    let t = torch_linspace_f32(1.0, eps as f32, steps + 1, step);
    let s = torch_linspace_f32(1.0, eps as f32, steps + 1, step + 1);
    let n = masked as f32 * (1.0 - s / t);
    (n as usize).min(masked)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// torch's `int(m * (1 - s/t))` over `linspace(1, 1e-3, N + 1)`, as printed by torch 2.5.1
    /// for 16 masked positions: 16 steps commit nothing first, then one per step, two last.
    #[test]
    fn dream_counts_match_torch() {
        for (steps, want) in [
            (16, vec![0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2]),
            (6, vec![2, 2, 2, 3, 3, 4]),
        ] {
            let mut m = 16;
            let got: Vec<usize> = (0..steps)
                .map(|i| {
                    let n = dream_transfer_count(m, i, steps, 1e-3);
                    m -= n;
                    n
                })
                .collect();
            assert_eq!(got, want, "{steps} steps");
        }
    }

    #[test]
    fn quota_sums_and_front_loads() {
        for n in 0..40 {
            for steps in 1..12 {
                let q = num_transfer_tokens(n, steps);
                assert_eq!(q.len(), steps);
                assert_eq!(q.iter().sum::<usize>(), n);
                assert!(q.windows(2).all(|w| w[0] >= w[1] && w[0] - w[1] <= 1), "{q:?}");
            }
        }
    }
}
