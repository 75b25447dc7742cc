//! SplitMix64 (Steele, Lea & Flood, "Fast splittable pseudorandom number generators", OOPSLA
//! 2014): drift's one small sequential generator, and the finaliser and string hash that
//! [`super::RngKey`] derives its Philox keys from.
//!
//! The worlds of `drift_rewards` (code, Countdown, Sudoku, shapes) draw every item, split and
//! layout from a `SplitMix64` keyed by explicit words, never from a global RNG. Two key folds
//! and two precisions of the bounded draw exist side by side because the shipped worlds are
//! *defined* by them: the text worlds use [`SplitMix64::keyed`] and the 32-bit draws
//! ([`SplitMix64::below32`], [`SplitMix64::range32`], [`SplitMix64::shuffle32`]), the shapes world
//! [`SplitMix64::keyed_salted`] and the 64-bit ones. Changing either would change every shipped
//! item, split and base model's training data.

/// The Weyl increment of SplitMix64 (the odd integer closest to 2⁶⁴ / φ).
pub const GOLDEN_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// The start of [`SplitMix64::keyed`]'s fold (the fractional bits of √2, SHA-512's first IV word).
const KEY_START: u64 = 0x6A09_E667_F3BC_C908;

/// SplitMix64's finaliser (Stafford's variant 13): a bijection on `u64` that spreads every
/// input bit over the output.
#[must_use]
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// 64-bit FNV-1a of `bytes` (Fowler, Noll & Vo): `h ← (h ⊕ b) · 0x100000001B3` from
/// `0xCBF29CE484222325`.
#[must_use]
pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(0xCBF2_9CE4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01B3))
}

/// A SplitMix64 stream: `state ← state + γ`, output `mix64(state)`.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// The stream whose state starts at `seed`.
    #[must_use]
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// The stream keyed by `words` (e.g. `[seed, split, index]`):
    /// `h ← mix64(h ⊕ mix64(w))` from `0x6A09E667F3BCC908`, so nearby keys give unrelated
    /// streams. The text worlds' key fold.
    #[must_use]
    pub fn keyed(words: &[u64]) -> Self {
        Self { state: words.iter().fold(KEY_START, |h, &w| mix64(h ^ mix64(w))) }
    }

    /// The stream keyed by `words` under `salt`: `h ← mix64((h + γ) ⊕ mix64(w + γ))` from
    /// `salt`. The shapes world's key fold (its salt spells "SHAPES").
    #[must_use]
    pub fn keyed_salted(salt: u64, words: &[u64]) -> Self {
        let state = words.iter().fold(salt, |h, &w| {
            mix64(h.wrapping_add(GOLDEN_GAMMA) ^ mix64(w.wrapping_add(GOLDEN_GAMMA)))
        });
        Self { state }
    }

    /// The next 64 uniformly distributed bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN_GAMMA);
        mix64(self.state)
    }

    /// A uniform integer in `0..n` by Lemire's multiply-high on all 64 bits:
    /// `⌊x · n / 2⁶⁴⌋` (`0` when `n = 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// A uniform integer in `0..n` from the top 32 bits: `⌊(x >> 32) · n / 2³²⌋` (bias below
    /// 2⁻³² · n; `0` when `n = 0`). `n` must fit in 32 bits.
    pub fn below32(&mut self, n: usize) -> usize {
        (((self.next_u64() >> 32) * n as u64) >> 32) as usize
    }

    /// A uniform integer in `lo..=hi` by [`Self::below`] (`lo` when `hi ≤ lo`).
    pub fn range_inclusive(&mut self, lo: i64, hi: i64) -> i64 {
        if hi <= lo {
            return lo;
        }
        lo + self.below((hi - lo) as u64 + 1) as i64
    }

    /// A uniform integer in `lo..=hi` by [`Self::below32`]; needs `lo ≤ hi`.
    pub fn range32(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below32((hi - lo + 1) as usize) as i64
    }

    /// A uniform float in `[0, 1)` from the top 53 bits.
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A standard normal draw (Box–Muller, the cosine of the pair).
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.uniform(); // in (0, 1], so the log is finite
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// Shuffles `items` in place (Fisher–Yates, swap partner by [`Self::below`]).
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }

    /// Shuffles `items` in place (Fisher–Yates, swap partner by [`Self::below32`]).
    pub fn shuffle32<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.below32(i + 1));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_values() {
        // The first output of SplitMix64 seeded with 0 (the reference algorithm):
        // mix64(0 + γ).
        assert_eq!(SplitMix64::new(0).next_u64(), 0xE220_A839_7B1D_CDAF);
        // FNV-1a's published test vectors.
        assert_eq!(fnv1a(b""), 0xCBF2_9CE4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xAF63_DC4C_8601_EC8C);
    }

    #[test]
    fn keys_are_deterministic_and_order_sensitive() {
        let a = SplitMix64::keyed(&[1, 2]).next_u64();
        assert_eq!(a, SplitMix64::keyed(&[1, 2]).next_u64());
        assert_ne!(a, SplitMix64::keyed(&[2, 1]).next_u64());
        // The two folds, by hand for one word.
        let w = 5u64;
        let expect = mix64(KEY_START ^ mix64(w)).wrapping_add(GOLDEN_GAMMA);
        assert_eq!(SplitMix64::keyed(&[w]).next_u64(), mix64(expect));
        let salt: u64 = 0x5348_4150_4553;
        let s = mix64(salt.wrapping_add(GOLDEN_GAMMA) ^ mix64(w.wrapping_add(GOLDEN_GAMMA)));
        assert_eq!(
            SplitMix64::keyed_salted(salt, &[w]).next_u64(),
            mix64(s.wrapping_add(GOLDEN_GAMMA))
        );
    }

    #[test]
    fn bounded_draws_stay_in_bounds_and_cover() {
        let mut r = SplitMix64::new(3);
        let (mut seen64, mut seen32) = ([false; 5], [false; 5]);
        for _ in 0..1000 {
            let v = r.range_inclusive(-2, 2);
            seen64[(v + 2) as usize] = true;
            let v = r.range32(-2, 2);
            seen32[(v + 2) as usize] = true;
        }
        assert!(seen64.iter().chain(&seen32).all(|&s| s));
        assert_eq!(r.below(0), 0);
        assert_eq!(r.below32(0), 0);
        assert_eq!(r.range_inclusive(5, 1), 5);
        // The two precisions by hand on one draw.
        let x = SplitMix64::new(9).next_u64();
        assert_eq!(SplitMix64::new(9).below(10), ((u128::from(x) * 10) >> 64) as u64);
        assert_eq!(SplitMix64::new(9).below32(10), (((x >> 32) * 10) >> 32) as usize);
    }

    #[test]
    fn shuffles_are_permutations() {
        let mut a: Vec<u32> = (0..50).collect();
        let mut b = a.clone();
        SplitMix64::new(1).shuffle(&mut a);
        SplitMix64::new(1).shuffle32(&mut b);
        for v in [&mut a, &mut b] {
            assert_ne!(*v, (0..50).collect::<Vec<_>>());
            v.sort_unstable();
            assert_eq!(*v, (0..50).collect::<Vec<_>>());
        }
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
