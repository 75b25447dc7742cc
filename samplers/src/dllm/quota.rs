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

#[cfg(test)]
mod tests {
    use super::*;

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
