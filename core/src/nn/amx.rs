//! bf16 matrix products on Intel AMX tiles, for frozen linear layers on the CPU.
//!
//! [`PackedBf16`] holds a linear layer's weight `W: [out, in]` rounded to bf16 (round to
//! nearest, ties to even) and laid out as AMX `B` tiles; [`PackedBf16::matmul`] computes
//! `y = x Wᵀ` for an f32 `x: [m, in]` with `x` rounded to bf16 the same way and every product
//! accumulated in f32 by `TDPBF16PS`:
//!
//! `y[i, j] = Σ_k bf16(x[i, k]) · bf16(W[j, k])`, summed in f32 in pairs of `k`.
//!
//! This is the precision of PyTorch's `bfloat16` inference (oneDNN runs the same instruction on
//! the same CPUs) and of Fast-dLLM's own setting (`torch_dtype=torch.bfloat16`): an 8-bit
//! mantissa on each factor, so logits move by about 2⁻⁸ of their scale against f32 and greedy
//! decoding can differ from the f32 model's at near-ties. It is opt-in and inference-only: a
//! packed layer is a frozen copy of its weight, refuses a tracked input, and the f32 path stays
//! the default everywhere (training, parity tests).
//!
//! One `TDPBF16PS` multiplies a 16 × 32 bf16 tile by a 32 × 16 one into a 16 × 16 f32
//! accumulator (16 384 flops); on the 2-core dev machine it sustains about 3 Tflop/s per core
//! against 0.1 for f32 FMA (BENCHMARKS.md, session 30). The kernel keeps a 32 × 32 block of `y`
//! in four accumulator tiles, streams two `x` tiles and two weight tiles per step of 32 along
//! `k`, and splits the output columns across rayon's threads. Linux hands the 8 KiB tile state
//! to a process only on request (`arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)`), which
//! [`available`] makes once.

use std::sync::{Arc, OnceLock};

use candle_core::{CpuStorage, CustomOp1, DType, Layout, Shape, Tensor};
use rayon::prelude::*;

use crate::error::{CoreError, Result};
use crate::sync_ptr::SyncPtr;

/// Rows of an `x` tile and of an accumulator tile.
const TILE_M: usize = 16;
/// bf16 values along `k` in one tile row (64 bytes).
const TILE_K: usize = 32;
/// f32 columns of an accumulator tile (64 bytes).
const TILE_N: usize = 16;
/// u16 values in one packed weight tile: 16 rows of `k` pairs × 16 columns × 2.
const BLOCK: usize = TILE_K * TILE_N;
/// Rows and columns of the block of `y` one kernel call computes (2 × 2 accumulator tiles).
const PAIR: usize = 2 * TILE_M;
/// Row pairs whose `x` tiles one thread keeps hot while it walks its columns.
const M_CHUNK: usize = 4;
/// Below this many tile steps (`row pairs × column pairs × k steps`, about 70 cycles each) a
/// product runs on the calling thread: a rayon dispatch costs more than it saves.
const SERIAL_STEPS: usize = 512;

/// Whether bf16 AMX products can run here: an x86-64 CPU with AMX-TILE and AMX-BF16, Linux
/// granting the process the tile state, and `DRIFT_NO_AMX` unset. Checked once per process.
#[must_use]
pub fn available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(detect)
}

#[cfg(all(target_arch = "x86_64", target_os = "linux", target_env = "gnu"))]
fn detect() -> bool {
    if std::env::var_os("DRIFT_NO_AMX").is_some() {
        return false;
    }
    // CPUID leaf 7, sub-leaf 0: EDX bit 22 is AMX-BF16, bit 24 AMX-TILE.
    #[allow(unused_unsafe)]
    let (max_leaf, leaf7) =
        unsafe { (std::arch::x86_64::__cpuid(0).eax, std::arch::x86_64::__cpuid_count(7, 0)) };
    if max_leaf < 7 || leaf7.edx & (1 << 22) == 0 || leaf7.edx & (1 << 24) == 0 {
        return false;
    }
    const ARCH_REQ_XCOMP_PERM: libc::c_long = 0x1023;
    const XFEATURE_XTILEDATA: libc::c_long = 18;
    // SAFETY: a plain system call with integer arguments; it only changes which register state
    // the kernel lets this process use.
    let granted =
        unsafe { libc::syscall(libc::SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) };
    granted == 0
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux", target_env = "gnu")))]
fn detect() -> bool {
    false
}

/// `x` rounded to bf16 (to nearest, ties to even), as its 16 bits; NaN stays NaN.
#[must_use]
pub fn bf16_bits(x: f32) -> u16 {
    let b = x.to_bits();
    if x.is_nan() {
        return ((b >> 16) | 0x40) as u16;
    }
    ((b + 0x7fff + ((b >> 16) & 1)) >> 16) as u16
}

/// The f32 value of bf16 bits.
#[must_use]
pub fn bf16_value(bits: u16) -> f32 {
    f32::from_bits(u32::from(bits) << 16)
}

/// A weight `W: [out, in]` in bf16, packed as AMX `B` tiles for `y = x Wᵀ`.
///
/// Tile `(nb, kb)` (columns `16 nb ..`, inner index `32 kb ..`) is 512 contiguous u16 at
/// `(nb · k_blocks + kb) · 512`; its row `r`, value `2 j + p` is `W[16 nb + j, 32 kb + 2 r + p]`
/// (zero beyond `W`), the pair-interleaved layout `TDPBF16PS` reads. Column tiles are padded to
/// an even count, so the kernel always works on pairs.
pub struct PackedBf16 {
    out: usize,
    inp: usize,
    n_blocks: usize,
    k_blocks: usize,
    data: Vec<u16>,
}

impl std::fmt::Debug for PackedBf16 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackedBf16").field("out", &self.out).field("in", &self.inp).finish()
    }
}

impl PackedBf16 {
    /// Packs `weight: [out, in]` (any float dtype, read once to the host: a load-time copy).
    pub fn pack(weight: &Tensor) -> Result<Self> {
        let (out, inp) = weight.dims2()?;
        let w = weight.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?;
        let n_blocks = out.div_ceil(PAIR) * 2;
        let k_blocks = inp.div_ceil(TILE_K);
        let mut data = vec![0u16; n_blocks * k_blocks * BLOCK];
        data.par_chunks_mut(k_blocks * BLOCK).enumerate().for_each(|(nb, panel)| {
            for (kb, tile) in panel.chunks_mut(BLOCK).enumerate() {
                for r in 0..TILE_K / 2 {
                    for j in 0..TILE_N {
                        let n = nb * TILE_N + j;
                        for p in 0..2 {
                            let k = kb * TILE_K + 2 * r + p;
                            if n < out && k < inp {
                                tile[r * TILE_K + 2 * j + p] = bf16_bits(w[n * inp + k]);
                            }
                        }
                    }
                }
            }
        });
        Ok(Self { out, inp, n_blocks, k_blocks, data })
    }

    /// Output features (`W`'s rows).
    #[must_use]
    pub fn out_features(&self) -> usize {
        self.out
    }

    /// Input features (`W`'s columns).
    #[must_use]
    pub fn in_features(&self) -> usize {
        self.inp
    }

    /// `y = x Wᵀ` for row-major `x: [m, in]`, returned row-major `[m, out]`. Needs
    /// [`available`]; errors name a mismatched length.
    pub fn matmul(&self, x: &[f32], m: usize) -> Result<Vec<f32>> {
        if x.len() != m * self.inp {
            return Err(CoreError::Shape {
                name: "x",
                got: vec![x.len()],
                expected: format!("{m} rows of {} values", self.inp),
            });
        }
        if !available() {
            return Err(CoreError::Mismatch(
                "bf16 AMX products need an x86-64 CPU with AMX-TILE and AMX-BF16 under Linux \
                 (and DRIFT_NO_AMX unset)"
                    .into(),
            ));
        }
        if m == 0 {
            return Ok(Vec::new());
        }
        let k_pad = self.k_blocks * TILE_K;
        let m_pairs = m.div_ceil(PAIR);
        let m_pad = m_pairs * PAIR;
        let n_pad = self.n_blocks * TILE_N;
        let a = round_rows(x, m, self.inp, m_pad, k_pad);
        // Every element of the padded output is stored by exactly one accumulator tile, so the
        // buffer is not zeroed first (its length is set once the tiles are stored).
        let mut y: Vec<f32> = Vec::with_capacity(m_pad * n_pad);
        let n_pairs = self.n_blocks / 2;
        let steps = m_pairs * n_pairs * self.k_blocks;
        let threads = if steps < SERIAL_STEPS { 1 } else { rayon::current_num_threads() };
        let parts = threads.clamp(1, n_pairs);
        let a_ptr = SyncPtr(a.as_ptr().cast_mut());
        let y_ptr = SyncPtr(y.as_mut_ptr());
        let run = |part: usize| {
            let (lo, hi) = (part * n_pairs / parts, (part + 1) * n_pairs / parts);
            // SAFETY: `available()` granted the tile state; `a` holds `m_pad × k_pad` values and
            // `data` `n_blocks × k_blocks` tiles, so every tile load is in bounds; each part
            // stores only its own columns `[32 lo, 32 hi)` of `y` (`m_pad × n_pad`).
            unsafe {
                self.columns(a_ptr.get().cast_const(), k_pad, m_pairs, lo..hi, y_ptr.get(), n_pad)
            };
        };
        if parts == 1 {
            run(0);
        } else {
            (0..parts).into_par_iter().for_each(run);
        }
        // SAFETY: the parts stored all `m_pad × n_pad` values (see above).
        unsafe { y.set_len(m_pad * n_pad) };
        if m_pad == m && n_pad == self.out {
            return Ok(y);
        }
        let mut out = Vec::with_capacity(m * self.out);
        for row in y.chunks(n_pad).take(m) {
            out.extend_from_slice(&row[..self.out]);
        }
        Ok(out)
    }

    /// The output columns of column pairs `pairs`, every row pair, `M_CHUNK` row pairs at a
    /// time so their `x` tiles stay in cache while the weight panel streams.
    ///
    /// # Safety
    /// The tile state must be granted; `a` must hold `m_pairs · 32` rows of `lda` values and
    /// `y` `m_pairs · 32` rows of `ldy` values, with `pairs` inside the packed columns.
    unsafe fn columns(
        &self,
        a: *const u16,
        lda: usize,
        m_pairs: usize,
        pairs: std::ops::Range<usize>,
        y: *mut f32,
        ldy: usize,
    ) {
        tiles::configure();
        let panel = self.k_blocks * BLOCK;
        for m0 in (0..m_pairs).step_by(M_CHUNK) {
            for np in pairs.clone() {
                let b0 = self.data.as_ptr().add(2 * np * panel);
                let b1 = b0.add(panel);
                for mp in m0..(m0 + M_CHUNK).min(m_pairs) {
                    let a0 = a.add(mp * PAIR * lda);
                    let y0 = y.add(mp * PAIR * ldy + np * PAIR);
                    tiles::block(a0, lda, b0, b1, self.k_blocks, y0, ldy);
                }
            }
        }
        tiles::release();
    }
}

/// `x: [m, k]` rounded to bf16 into a zero-padded row-major `[m_pad, k_pad]`.
fn round_rows(x: &[f32], m: usize, k: usize, m_pad: usize, k_pad: usize) -> Vec<u16> {
    let mut a = vec![0u16; m_pad * k_pad];
    let fill = |(row, dst): (usize, &mut [u16])| {
        if row < m {
            for (d, &v) in dst.iter_mut().zip(&x[row * k..(row + 1) * k]) {
                *d = bf16_bits(v);
            }
        }
    };
    if m * k >= 1 << 18 {
        a.par_chunks_mut(k_pad).enumerate().for_each(fill);
    } else {
        a.chunks_mut(k_pad).enumerate().for_each(fill);
    }
    a
}

/// The AMX instructions, one `asm!` each (stable Rust assembles them without target features).
#[cfg(target_arch = "x86_64")]
mod tiles {
    use std::arch::asm;

    /// Palette 1, all eight tiles 16 rows × 64 bytes.
    #[repr(C, align(64))]
    struct Config([u8; 64]);

    static CONFIG: Config = {
        let mut c = [0u8; 64];
        c[0] = 1;
        let mut t = 0;
        while t < 8 {
            c[16 + 2 * t] = 64;
            c[48 + t] = 16;
            t += 1;
        }
        Config(c)
    };

    /// Loads the tile configuration on this thread.
    pub(super) unsafe fn configure() {
        asm!("ldtilecfg [{0}]", in(reg) CONFIG.0.as_ptr(), options(nostack, readonly));
    }

    /// Returns the tiles to their initial state (no tile data in this thread's saved state).
    pub(super) unsafe fn release() {
        asm!("tilerelease", options(nostack, nomem));
    }

    /// `y[0..32, 0..32] = a[0..32, :] · [b0 | b1]`: accumulators tmm0–3, `a`'s two row tiles
    /// tmm4–5, the two weight tiles tmm6–7, one step of 32 along `k` per iteration.
    #[inline]
    pub(super) unsafe fn block(
        a: *const u16,
        lda: usize,
        b0: *const u16,
        b1: *const u16,
        k_blocks: usize,
        y: *mut f32,
        ldy: usize,
    ) {
        let sa = lda * 2;
        let a1 = a.add(16 * lda);
        asm!(
            "tilezero tmm0",
            "tilezero tmm1",
            "tilezero tmm2",
            "tilezero tmm3",
            options(nostack, nomem)
        );
        for kb in 0..k_blocks {
            let off = kb * super::TILE_K;
            let boff = kb * super::BLOCK;
            asm!(
                "tileloadd tmm4, [{a0} + {sa}*1]",
                "tileloadd tmm5, [{a1} + {sa}*1]",
                "tileloadd tmm6, [{b0} + {sb}*1]",
                "tileloadd tmm7, [{b1} + {sb}*1]",
                "tdpbf16ps tmm0, tmm4, tmm6",
                "tdpbf16ps tmm1, tmm4, tmm7",
                "tdpbf16ps tmm2, tmm5, tmm6",
                "tdpbf16ps tmm3, tmm5, tmm7",
                a0 = in(reg) a.add(off),
                a1 = in(reg) a1.add(off),
                b0 = in(reg) b0.add(boff),
                b1 = in(reg) b1.add(boff),
                sa = in(reg) sa,
                sb = in(reg) 64usize,
                options(nostack, readonly)
            );
        }
        let sy = ldy * 4;
        asm!(
            "tilestored [{y00} + {sy}*1], tmm0",
            "tilestored [{y01} + {sy}*1], tmm1",
            "tilestored [{y10} + {sy}*1], tmm2",
            "tilestored [{y11} + {sy}*1], tmm3",
            y00 = in(reg) y,
            y01 = in(reg) y.add(16),
            y10 = in(reg) y.add(16 * ldy),
            y11 = in(reg) y.add(16 * ldy + 16),
            sy = in(reg) sy,
            options(nostack)
        );
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod tiles {
    pub(super) unsafe fn configure() {
        unreachable!("available() is false off x86-64")
    }
    pub(super) unsafe fn release() {}
    pub(super) unsafe fn block(
        _: *const u16,
        _: usize,
        _: *const u16,
        _: *const u16,
        _: usize,
        _: *mut f32,
        _: usize,
    ) {
        unreachable!("available() is false off x86-64")
    }
}

/// `x Wᵀ` through a [`PackedBf16`] as a candle op on a contiguous f32 `[m, in]` CPU tensor
/// (no backward: packed layers are frozen).
pub(crate) struct AmxLinear(pub Arc<PackedBf16>);

impl CustomOp1 for AmxLinear {
    fn name(&self) -> &'static str {
        "drift-amx-bf16-linear"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let CpuStorage::F32(x) = s else {
            candle_core::bail!("{}: expected an f32 input", self.name())
        };
        let (m, k) = l.shape().dims2()?;
        if k != self.0.inp {
            candle_core::bail!(
                "{}: input of {k} features, the layer takes {}",
                self.name(),
                self.0.inp
            )
        }
        let Some((start, end)) = l.contiguous_offsets() else {
            candle_core::bail!("{}: the input must be contiguous", self.name())
        };
        let y = self.0.matmul(&x[start..end], m).map_err(candle_core::Error::wrap)?;
        Ok((CpuStorage::F32(y), Shape::from((m, self.0.out))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    /// The formula in the module doc, summed in f64 from the rounded factors.
    fn reference(x: &[f32], w: &[f32], m: usize, k: usize, n: usize) -> Vec<f64> {
        let mut y = vec![0f64; m * n];
        for i in 0..m {
            for j in 0..n {
                y[i * n + j] = (0..k)
                    .map(|t| {
                        f64::from(bf16_value(bf16_bits(x[i * k + t])))
                            * f64::from(bf16_value(bf16_bits(w[j * k + t])))
                    })
                    .sum();
            }
        }
        y
    }

    #[test]
    fn bf16_rounding_is_to_nearest_even() {
        // 1 + 2⁻⁸ is halfway between 1 and 1 + 2⁻⁷: ties go to the even mantissa (1).
        assert_eq!(bf16_bits(1.0 + 1.0 / 256.0), 0x3f80);
        // 1 + 3·2⁻⁸ is halfway between 1 + 2⁻⁷ (odd) and 1 + 2⁻⁶ (even).
        assert_eq!(bf16_bits(1.0 + 3.0 / 256.0), 0x3f82);
        assert_eq!(bf16_bits(1.0 + 1.0 / 128.0 + 1.0 / 4096.0), 0x3f81);
        assert_eq!(bf16_bits(-2.0), 0xc000);
        assert!(bf16_value(bf16_bits(f32::NAN)).is_nan());
        assert_eq!(bf16_value(bf16_bits(f32::INFINITY)), f32::INFINITY);
        assert_eq!(bf16_value(bf16_bits(3.4e38)), f32::INFINITY);
        assert_eq!(bf16_bits(3.38e38), 0x7f7e);
    }

    #[test]
    fn products_match_the_rounded_formula_on_ragged_shapes() -> Result<()> {
        if !available() {
            eprintln!("skipped: no AMX on this CPU");
            return Ok(());
        }
        let dev = Device::Cpu;
        // Shapes off every tile multiple (m 1, 33; out 17, 70; in 5, 100) and a large one that
        // takes the threaded path and several row chunks.
        for (m, k, n) in [(1, 5, 17), (33, 100, 70), (32, 64, 64), (300, 520, 200)] {
            let x = Tensor::randn(0f32, 1.0, (m, k), &dev)?.flatten_all()?.to_vec1::<f32>()?;
            let w = Tensor::randn(0f32, 1.0, (n, k), &dev)?;
            let packed = PackedBf16::pack(&w)?;
            let y = packed.matmul(&x, m)?;
            let want = reference(&x, &w.flatten_all()?.to_vec1::<f32>()?, m, k, n);
            assert_eq!(y.len(), m * n);
            for (i, (&got, &want)) in y.iter().zip(&want).enumerate() {
                // f32 accumulation of exact bf16 products: error ~ k · 2⁻²⁴ · Σ|terms|.
                let tol = 1e-5 * (k as f64).sqrt() * 4.0;
                assert!(
                    (f64::from(got) - want).abs() <= tol * (1.0 + want.abs()),
                    "m {m} k {k} n {n} at {i}: {got} vs {want}"
                );
            }
        }
        Ok(())
    }

    #[test]
    fn a_wrong_input_length_is_refused() -> Result<()> {
        let w = Tensor::zeros((4, 8), DType::F32, &Device::Cpu)?;
        let packed = PackedBf16::pack(&w)?;
        assert!(matches!(packed.matmul(&[0.0; 7], 1), Err(CoreError::Shape { .. })));
        Ok(())
    }
}
