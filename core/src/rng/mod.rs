//! Keyed, counter-based randomness: every draw is a pure function of its key.
//!
//! drift never uses a global RNG. A [`RngKey`] names *what* a draw is for (`seed`, `step`,
//! `row`, `iteration`, `draw`, and a `stream` tag), and element `i` of a tensor drawn under it
//! is a function of the key and `i` alone (Philox4x32-10, Salmon et al., "Parallel random
//! numbers: as easy as 1, 2, 3", SC 2011). So old, reference and current passes over the same
//! row see the same masks and noise whatever the micro-batching, a run is reproducible from its
//! config, and a resumed run draws exactly what the uninterrupted one would have.
//!
//! Draws are generated on the host and uploaded once to the target device (a host → device
//! copy; nothing is read back).

use candle_core::{DType, Device, Shape, Tensor};
use serde::{Deserialize, Serialize};

use crate::error::Result;

mod splitmix;

pub use splitmix::{fnv1a, mix64, SplitMix64};

const M0: u64 = 0xD251_1F53;
const M1: u64 = 0xCD9E_8D57;
const W0: u32 = 0x9E37_79B9;
const W1: u32 = 0xBB67_AE85;

/// Philox4x32 with 10 rounds: a bijection of the 128-bit counter under a 64-bit key.
pub fn philox4x32_10(counter: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let (mut c, mut k) = (counter, key);
    for round in 0..10 {
        if round > 0 {
            k = [k[0].wrapping_add(W0), k[1].wrapping_add(W1)];
        }
        let p0 = M0 * u64::from(c[0]);
        let p1 = M1 * u64::from(c[2]);
        c = [
            ((p1 >> 32) as u32) ^ c[1] ^ k[0],
            p1 as u32,
            ((p0 >> 32) as u32) ^ c[3] ^ k[1],
            p0 as u32,
        ];
    }
    c
}

/// The name of a random draw. Two keys that differ in any field give independent streams; the
/// same key gives the same numbers on every call, in every process, on every device.
///
/// ```
/// use drift_core::rng::RngKey;
/// use candle_core::{DType, Device};
/// let key = RngKey::new(7).stream("coupled_mask").step(3).row(12).iteration(1);
/// let a = key.uniform((2, 5), DType::F32, &Device::Cpu).unwrap();
/// let b = key.uniform((2, 5), DType::F32, &Device::Cpu).unwrap();
/// assert_eq!(a.to_vec2::<f32>().unwrap(), b.to_vec2::<f32>().unwrap());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RngKey {
    /// The run's seed.
    pub seed: u64,
    /// What the draw is for (hash of a name, see [`RngKey::stream`]).
    pub stream: u64,
    /// Training step (rollout batch).
    pub step: u64,
    /// Global row id (sample index within the step, independent of micro-batching).
    pub row: u64,
    /// Inner iteration (μ) or denoising step.
    pub iteration: u64,
    /// Monte Carlo draw, quadrature node or tree node.
    pub draw: u64,
}

impl RngKey {
    /// A key for `seed` with every other field 0.
    pub fn new(seed: u64) -> Self {
        Self { seed, ..Self::default() }
    }
    /// The same key for the stream named `name`.
    #[must_use]
    pub fn stream(self, name: &str) -> Self {
        Self { stream: fnv1a(name.as_bytes()), ..self }
    }
    /// The same key at training step `step`.
    #[must_use]
    pub fn step(self, step: u64) -> Self {
        Self { step, ..self }
    }
    /// The same key for global row `row`.
    #[must_use]
    pub fn row(self, row: u64) -> Self {
        Self { row, ..self }
    }
    /// The same key at inner iteration `iteration`.
    #[must_use]
    pub fn iteration(self, iteration: u64) -> Self {
        Self { iteration, ..self }
    }
    /// The same key for draw `draw`.
    #[must_use]
    pub fn draw(self, draw: u64) -> Self {
        Self { draw, ..self }
    }

    fn philox_key(&self) -> [u32; 2] {
        let k = mix64(mix64(self.seed) ^ self.stream.rotate_left(17));
        [k as u32, (k >> 32) as u32]
    }

    fn counter_high(&self) -> u64 {
        [self.step, self.row, self.iteration, self.draw].iter().enumerate().fold(
            0x6A09_E667_F3BC_C908,
            |h, (i, &v)| {
                mix64(h ^ mix64(v.wrapping_add((i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15))))
            },
        )
    }

    /// The 128 random bits of block `index` under this key.
    pub fn block(&self, index: u64) -> [u32; 4] {
        self.blocks().at(index)
    }

    /// The block generator of this key, with the key-dependent words computed once.
    fn blocks(&self) -> Blocks {
        let hi = self.counter_high();
        Blocks { hi: [hi as u32, (hi >> 32) as u32], key: self.philox_key() }
    }

    /// `n` uniforms in `[0, 1)` with 24 random bits each; element `i` depends only on the key
    /// and `i` (word `i mod 4` of block `i / 4`).
    pub fn uniform_f32_vec(&self, n: usize) -> Vec<f32> {
        let b = self.blocks();
        fill(n, |i| (b.at((i / 4) as u64)[i % 4] >> 8) as f32 * (1.0 / 16_777_216.0))
    }

    /// `n` uniforms in `[0, 1)` with 53 random bits each (for Gumbel noise, as LLaDA draws in
    /// float64).
    pub fn uniform_f64_vec(&self, n: usize) -> Vec<f64> {
        let b = self.blocks();
        fill(n, |i| {
            let w = b.at((i / 2) as u64);
            let j = 2 * (i % 2);
            bits_to_f64(w[j], w[j + 1])
        })
    }

    /// `n` standard normals (Box–Muller on two 53-bit uniforms per element):
    /// `z_i = sqrt(−2 ln(1 − u₁)) · cos(2π u₂)` with `(u₁, u₂)` the two halves of block `i`.
    pub fn normal_f64_vec(&self, n: usize) -> Vec<f64> {
        let b = self.blocks();
        fill(n, |i| box_muller(b.at(i as u64)))
    }

    /// A uniformly random permutation of `0..n` (sort by 64-bit keys, ties by index).
    pub fn permutation_vec(&self, n: usize) -> Vec<u32> {
        let mut idx: Vec<(u64, u32)> = (0..n)
            .map(|i| {
                let b = self.block(i as u64);
                ((u64::from(b[0]) << 32) | u64::from(b[1]), i as u32)
            })
            .collect();
        idx.sort_unstable();
        idx.into_iter().map(|(_, i)| i).collect()
    }

    /// A tensor of uniforms in `[0, 1)` of `shape` and `dtype` on `device` (53-bit precision
    /// for F64, 24-bit otherwise).
    pub fn uniform<S: Into<Shape>>(
        &self,
        shape: S,
        dtype: DType,
        device: &Device,
    ) -> Result<Tensor> {
        let shape = shape.into();
        let n = shape.elem_count();
        let t = if dtype == DType::F64 {
            Tensor::from_vec(self.uniform_f64_vec(n), shape, device)?
        } else {
            Tensor::from_vec(self.uniform_f32_vec(n), shape, device)?.to_dtype(dtype)?
        };
        Ok(t)
    }

    /// A tensor of standard normals of `shape` and `dtype` on `device`.
    pub fn normal<S: Into<Shape>>(
        &self,
        shape: S,
        dtype: DType,
        device: &Device,
    ) -> Result<Tensor> {
        let shape = shape.into();
        let n = shape.elem_count();
        Ok(Tensor::from_vec(self.normal_f64_vec(n), shape, device)?.to_dtype(dtype)?)
    }

    /// A random permutation of `0..n` as a `[n]` u32 tensor on `device`.
    pub fn permutation(&self, n: usize, device: &Device) -> Result<Tensor> {
        Ok(Tensor::from_vec(self.permutation_vec(n), n, device)?)
    }

    /// `[rows.len(), cols]` uniforms where row `j` is drawn under `self.row(rows[j])`: the
    /// values of a global row do not depend on which micro-batch it lands in.
    pub fn uniform_rows(
        &self,
        rows: &[u64],
        cols: usize,
        dtype: DType,
        device: &Device,
    ) -> Result<Tensor> {
        let t = if dtype == DType::F64 {
            let v = fill_rows(*self, rows, cols, |k| k.uniform_f64_vec(cols));
            Tensor::from_vec(v, (rows.len(), cols), device)?
        } else {
            let v = fill_rows(*self, rows, cols, |k| k.uniform_f32_vec(cols));
            Tensor::from_vec(v, (rows.len(), cols), device)?.to_dtype(dtype)?
        };
        Ok(t)
    }

    /// `[rows.len(), cols]` standard normals where row `j` is drawn under `self.row(rows[j])`.
    /// An F32 request is rounded on the host (the same IEEE rounding as on any device), so
    /// half the bytes travel.
    pub fn normal_rows(
        &self,
        rows: &[u64],
        cols: usize,
        dtype: DType,
        device: &Device,
    ) -> Result<Tensor> {
        let shape = (rows.len(), cols);
        if dtype == DType::F32 {
            let v = fill_rows(*self, rows, cols, |k| {
                k.normal_f64_vec(cols).into_iter().map(|z| z as f32).collect()
            });
            return Ok(Tensor::from_vec(v, shape, device)?);
        }
        let v = fill_rows(*self, rows, cols, |k| k.normal_f64_vec(cols));
        Ok(Tensor::from_vec(v, shape, device)?.to_dtype(dtype)?)
    }
}

/// The Philox blocks of one key: `at(i) = philox4x32_10([i_lo, i_hi, hi_0, hi_1], key)`.
#[derive(Clone, Copy)]
struct Blocks {
    hi: [u32; 2],
    key: [u32; 2],
}

impl Blocks {
    fn at(&self, index: u64) -> [u32; 4] {
        philox4x32_10([index as u32, (index >> 32) as u32, self.hi[0], self.hi[1]], self.key)
    }
}

/// A standard normal from one block (Box–Muller on its two 53-bit halves).
fn box_muller(b: [u32; 4]) -> f64 {
    let u1 = 1.0 - bits_to_f64(b[0], b[1]); // (0, 1]: ln is finite
    let u2 = bits_to_f64(b[2], b[3]);
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// Elements generated per parallel task: below two of these a draw stays on the calling thread.
const PAR_CHUNK: usize = 1 << 14;

/// `[f(0), …, f(n − 1)]`, in parallel chunks when `n` is large (every element is a pure
/// function of its index, so the result does not depend on the split).
fn fill<T: Copy + Default + Send>(n: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    use rayon::prelude::*;
    let mut out = vec![T::default(); n];
    if n < 2 * PAR_CHUNK {
        out.iter_mut().enumerate().for_each(|(i, o)| *o = f(i));
    } else {
        out.par_chunks_mut(PAR_CHUNK).enumerate().for_each(|(c, chunk)| {
            chunk.iter_mut().enumerate().for_each(|(j, o)| *o = f(c * PAR_CHUNK + j));
        });
    }
    out
}

/// The rows of `key.row(r)` for each `r` in `rows`, each `cols` long, concatenated; rows are
/// generated in parallel when there is enough work.
fn fill_rows<T: Copy + Default + Send>(
    key: RngKey,
    rows: &[u64],
    cols: usize,
    row: impl Fn(RngKey) -> Vec<T> + Sync,
) -> Vec<T> {
    use rayon::prelude::*;
    let mut out = vec![T::default(); rows.len() * cols];
    if cols == 0 {
        return out;
    }
    let one = |(o, &r): (&mut [T], &u64)| o.copy_from_slice(&row(key.row(r)));
    if rows.len() * cols < 2 * PAR_CHUNK {
        out.chunks_mut(cols).zip(rows).for_each(one);
    } else {
        out.par_chunks_mut(cols).zip(rows.par_iter()).for_each(one);
    }
    out
}

fn bits_to_f64(hi: u32, lo: u32) -> f64 {
    (((u64::from(hi) << 32) | u64::from(lo)) >> 11) as f64 * (1.0 / 9_007_199_254_740_992.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn philox_known_answers() {
        // Random123's kat_vectors for philox4x32_10.
        assert_eq!(
            philox4x32_10([0; 4], [0; 2]),
            [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8]
        );
        assert_eq!(
            philox4x32_10([u32::MAX; 4], [u32::MAX; 2]),
            [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd]
        );
        assert_eq!(
            philox4x32_10(
                [0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344],
                [0xa409_3822, 0x299f_31d0]
            ),
            [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1]
        );
    }

    #[test]
    fn same_key_same_draw_and_fields_matter() -> Result<()> {
        let dev = Device::Cpu;
        let key = RngKey::new(1).stream("x").step(2).row(3).iteration(4).draw(5);
        let a = key.uniform(64, DType::F32, &dev)?.to_vec1::<f32>()?;
        assert_eq!(a, key.uniform(64, DType::F32, &dev)?.to_vec1::<f32>()?);
        for other in [
            key.step(9),
            key.row(9),
            key.iteration(9),
            key.draw(9),
            key.stream("y"),
            RngKey { seed: 2, ..key },
        ] {
            let b = other.uniform(64, DType::F32, &dev)?.to_vec1::<f32>()?;
            assert_ne!(a, b, "{other:?} must give another stream");
        }
        Ok(())
    }

    #[test]
    fn draws_are_prefix_stable() {
        let key = RngKey::new(11);
        assert_eq!(key.uniform_f32_vec(5), key.uniform_f32_vec(50)[..5].to_vec());
        assert_eq!(key.normal_f64_vec(3), key.normal_f64_vec(30)[..3].to_vec());
    }

    #[test]
    fn moments_within_monte_carlo_error() {
        let n = 200_000;
        let key = RngKey::new(3).stream("moments");
        let u = key.uniform_f64_vec(n);
        let mean = u.iter().sum::<f64>() / n as f64;
        let var = u.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
        // std error of the mean: √(1/12 / n) ≈ 6.5e-4; allow 5 of them.
        assert!((mean - 0.5).abs() < 5.0 * (1.0 / 12.0 / n as f64).sqrt(), "{mean}");
        assert!((var - 1.0 / 12.0).abs() < 2e-3, "{var}");
        let z = key.normal_f64_vec(n);
        let mean = z.iter().sum::<f64>() / n as f64;
        let var = z.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
        let kurt = z.iter().map(|x| (x - mean).powi(4)).sum::<f64>() / n as f64 / var.powi(2);
        assert!(mean.abs() < 5.0 / (n as f64).sqrt(), "{mean}");
        assert!((var - 1.0).abs() < 0.02, "{var}");
        assert!((kurt - 3.0).abs() < 0.1, "{kurt}");
        let u32s = key.uniform_f32_vec(n);
        assert!(u32s.iter().all(|&x| (0.0..1.0).contains(&x)));
    }

    #[test]
    fn permutation_is_a_permutation_and_varies() {
        let key = RngKey::new(5);
        let mut p = key.permutation_vec(100);
        assert_ne!(p, (0..100).collect::<Vec<u32>>());
        assert_ne!(p, key.step(1).permutation_vec(100));
        p.sort_unstable();
        assert_eq!(p, (0..100).collect::<Vec<u32>>());
    }

    #[test]
    fn rows_do_not_depend_on_the_micro_batch() -> Result<()> {
        let dev = Device::Cpu;
        let key = RngKey::new(9).stream("mask");
        let whole = key.uniform_rows(&[0, 1, 2, 3], 6, DType::F32, &dev)?.to_vec2::<f32>()?;
        let half = key.uniform_rows(&[2, 3], 6, DType::F32, &dev)?.to_vec2::<f32>()?;
        assert_eq!(whole[2..].to_vec(), half);
        assert_eq!(key.normal_rows(&[], 4, DType::F32, &dev)?.dims(), &[0, 4]);
        Ok(())
    }

    /// The definitions, one block per element computed from the key's fields every time, as
    /// the module documents them: the hoisted, parallel generators must equal them exactly.
    fn naive_block(k: &RngKey, i: u64) -> [u32; 4] {
        let hi = k.counter_high();
        philox4x32_10([i as u32, (i >> 32) as u32, hi as u32, (hi >> 32) as u32], k.philox_key())
    }

    #[test]
    fn fast_generators_equal_the_per_element_definitions_across_the_parallel_split() {
        let k = RngKey::new(5).stream("sde_noise").step(2).row(7).iteration(3);
        let n = 2 * PAR_CHUNK + 1234; // large enough for the parallel path, ragged last chunk
        let normal: Vec<f64> = (0..n).map(|i| box_muller(naive_block(&k, i as u64))).collect();
        assert_eq!(k.normal_f64_vec(n), normal);
        let u32s: Vec<f32> = (0..n)
            .map(|i| (naive_block(&k, (i / 4) as u64)[i % 4] >> 8) as f32 / 16_777_216.0)
            .collect();
        assert_eq!(k.uniform_f32_vec(n), u32s);
        let u64s: Vec<f64> = (0..n)
            .map(|i| {
                let b = naive_block(&k, (i / 2) as u64);
                bits_to_f64(b[2 * (i % 2)], b[2 * (i % 2) + 1])
            })
            .collect();
        assert_eq!(k.uniform_f64_vec(n), u64s);
        // The sequential path (small n) is the same prefix.
        assert_eq!(k.normal_f64_vec(100), normal[..100].to_vec());
    }

    #[test]
    fn parallel_rows_equal_row_by_row_draws_and_f32_rounds_like_the_device_cast() -> Result<()> {
        let dev = Device::Cpu;
        let key = RngKey::new(11).stream("noise").step(4);
        let rows: Vec<u64> = (0..40).map(|r| 3 * r + 1).collect();
        let cols = 3 * 32 * 32; // 40 × 3072 elements: the parallel path
        let f64s = key.normal_rows(&rows, cols, DType::F64, &dev)?.to_vec2::<f64>()?;
        for (j, &r) in rows.iter().enumerate() {
            assert_eq!(f64s[j], key.row(r).normal_f64_vec(cols));
        }
        let f32s = key.normal_rows(&rows, cols, DType::F32, &dev)?.to_vec2::<f32>()?;
        let cast = Tensor::new(f64s, &dev)?.to_dtype(DType::F32)?.to_vec2::<f32>()?;
        assert_eq!(f32s, cast);
        let u = key.uniform_rows(&rows, cols, DType::F32, &dev)?.to_vec2::<f32>()?;
        assert_eq!(u[5], key.row(rows[5]).uniform_f32_vec(cols));
        Ok(())
    }
}
