//! SplitMix64: the small seeded generator behind every random choice of the shapes world.
//!
//! The shapes world never touches a global RNG (docs/architecture.md §5): every layout, colour jitter,
//! split and noise draw is a pure function of an explicit key, so a prompt set or a rendered
//! image is reproducible from its seed alone.

/// SplitMix64 (Steele, Lea & Flood, "Fast splittable pseudorandom number generators", 2014):
/// a 64-bit Weyl counter passed through a bijective finaliser.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

/// The Weyl increment of SplitMix64 (the odd integer closest to 2^64 / φ).
const GOLDEN_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// The SplitMix64 finaliser: a bijection on `u64` that spreads every input bit over the output.
#[must_use]
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl SplitMix64 {
    /// A generator whose stream is fixed by `seed`.
    #[must_use]
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// A generator keyed by several integers (a seed and stream ids such as a prompt index and
    /// an attempt number): the key parts are folded through the finaliser, so nearby keys give
    /// unrelated streams.
    #[must_use]
    pub fn keyed(parts: &[u64]) -> Self {
        let state = parts.iter().fold(0x5348_4150_4553_u64, |acc, &p| {
            mix64(acc.wrapping_add(GOLDEN_GAMMA) ^ mix64(p.wrapping_add(GOLDEN_GAMMA)))
        });
        Self { state }
    }

    /// The next 64 uniformly distributed bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN_GAMMA);
        mix64(self.state)
    }

    /// A uniform integer in `0..n` (Lemire's multiply-high reduction; `0` when `n == 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// A uniform integer in the inclusive range `lo..=hi` (`lo` when `hi < lo`).
    pub fn range_inclusive(&mut self, lo: i64, hi: i64) -> i64 {
        if hi <= lo {
            return lo;
        }
        let span = (hi - lo) as u64 + 1;
        lo + self.below(span) as i64
    }

    /// A uniform float in `[0, 1)` built from the top 53 bits.
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A standard normal draw (Box–Muller, one of the pair).
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.uniform(); // in (0, 1], so the log is finite
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// Shuffles `items` in place (Fisher–Yates).
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream_and_keys_differ() {
        let a: Vec<u64> = (0..4)
            .map({
                let mut r = SplitMix64::new(7);
                move |_| r.next_u64()
            })
            .collect();
        let mut r = SplitMix64::new(7);
        let b: Vec<u64> = (0..4).map(|_| r.next_u64()).collect();
        assert_eq!(a, b);
        let mut k1 = SplitMix64::keyed(&[1, 2]);
        let mut k2 = SplitMix64::keyed(&[2, 1]);
        assert_ne!(k1.next_u64(), k2.next_u64());
    }

    #[test]
    fn reference_value_of_splitmix64() {
        // The first output of SplitMix64 seeded with 0, as given by the reference algorithm:
        // mix64(0 + GOLDEN_GAMMA).
        let mut r = SplitMix64::new(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
    }

    #[test]
    fn below_and_range_stay_in_bounds_and_cover() {
        let mut r = SplitMix64::new(3);
        let mut seen = [false; 5];
        for _ in 0..1000 {
            let v = r.range_inclusive(-2, 2);
            assert!((-2..=2).contains(&v));
            seen[(v + 2) as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
        assert_eq!(r.below(0), 0);
        assert_eq!(r.range_inclusive(5, 1), 5);
    }

    #[test]
    fn normal_has_unit_moments() {
        let mut r = SplitMix64::new(11);
        let n = 20_000;
        let draws: Vec<f64> = (0..n).map(|_| r.normal()).collect();
        let mean = draws.iter().sum::<f64>() / n as f64;
        let var = draws.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / n as f64;
        assert!(mean.abs() < 0.03, "mean {mean}");
        assert!((var - 1.0).abs() < 0.05, "var {var}");
    }
}
