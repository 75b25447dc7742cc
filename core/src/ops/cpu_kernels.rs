//! Fused CPU kernels, with their own backward passes, for the element- and row-wise maps that
//! dominate a small model's training step on the CPU (docs/architecture.md §6).
//!
//! Composed of elementary candle ops, GELU's backward alone costs two `powf` and a `tanh` per
//! element and six temporaries, and LayerNorm and softmax cost a dozen passes over memory each
//! way. Each kernel here is one pass forward and one pass backward, split over rows on rayon's
//! pool. They take contiguous f32 CPU tensors; [`super`]'s wrappers route everything else to
//! candle's ops, so the maths is the same on every device.

use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, CustomOp1, CustomOp2, CustomOp3, Layout, Shape, Tensor};
use rayon::prelude::*;

const SQRT_2_OVER_PI: f32 = 0.797_884_6;
const GELU_CUBIC: f32 = 0.044_715;

/// Rows handed to one rayon task: enough work (≥ 16 Ki elements) to amortise the scheduling.
fn rows_per_task(row_len: usize) -> usize {
    (16 * 1024 / row_len.max(1)).max(1)
}

fn f32_slice<'a>(
    s: &'a CpuStorage,
    l: &Layout,
    op: &'static str,
) -> candle_core::Result<&'a [f32]> {
    let CpuStorage::F32(v) = s else {
        candle_core::bail!("{op}: expected an f32 tensor, got {:?}", s.dtype())
    };
    let Some((start, end)) = l.contiguous_offsets() else {
        candle_core::bail!("{op}: expected a contiguous tensor")
    };
    Ok(&v[start..end])
}

/// `tanh(u) = 1 − 2/(e^{2u} + 1)`: one `exp` instead of libm's `tanhf` (3× faster here), exact
/// to ~1e-7 absolute, saturating correctly at ±∞.
#[inline]
fn tanh_fast(u: f32) -> f32 {
    1.0 - 2.0 / ((2.0 * u).exp() + 1.0)
}

/// GELU, tanh form (Hendrycks & Gimpel 2016): `½x(1 + tanh(√(2/π)(x + 0.044715x³)))`.
#[inline]
fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + tanh_fast(SQRT_2_OVER_PI * x * (1.0 + GELU_CUBIC * x * x)))
}

/// `d gelu/dx = ½(1 + t) + ½x(1 − t²)·√(2/π)(1 + 3·0.044715x²)`, `t` the tanh above.
#[inline]
fn gelu_grad(x: f32) -> f32 {
    let t = tanh_fast(SQRT_2_OVER_PI * x * (1.0 + GELU_CUBIC * x * x));
    0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_CUBIC * x * x)
}

/// A new `len`-element buffer filled in parallel by `f(offset, chunk)`, each chunk a whole
/// number of `row_len`-element rows starting at element `offset`.
fn map_rows(len: usize, row_len: usize, f: impl Fn(usize, &mut [f32]) + Sync) -> Vec<f32> {
    let mut out = vec![0f32; len];
    let chunk = rows_per_task(row_len) * row_len;
    out.par_chunks_mut(chunk).enumerate().for_each(|(i, o)| f(i * chunk, o));
    out
}

/// Elements per "row" of the element-wise kernels: any split is exact for them, this one keeps
/// each rayon task at 16 Ki elements.
const ELEMENTWISE_ROW: usize = 1024;

/// A forward kernel's body: `f(x_row, out_row)` for every `row_len`-element row of `x` (the
/// last row may be shorter when `row_len` does not divide the length).
fn unary_rows(
    op: &'static str,
    (s, l): (&CpuStorage, &Layout),
    row_len: usize,
    f: impl Fn(&[f32], &mut [f32]) + Sync,
) -> candle_core::Result<(CpuStorage, Shape)> {
    let x = f32_slice(s, l, op)?;
    let d = row_len.max(1);
    let out = map_rows(x.len(), d, |at, o| {
        for (o, x) in o.chunks_mut(d).zip(x[at..].chunks(d)) {
            f(x, o);
        }
    });
    Ok((CpuStorage::F32(out), l.shape().clone()))
}

/// A backward kernel's body: `f(x_row, g_row, out_row)` for every `row_len`-element row of the
/// forward input (or output) `x` and the incoming gradient `g`, which must have `x`'s length.
fn binary_rows(
    op: &'static str,
    (s1, l1): (&CpuStorage, &Layout),
    (s2, l2): (&CpuStorage, &Layout),
    row_len: usize,
    f: impl Fn(&[f32], &[f32], &mut [f32]) + Sync,
) -> candle_core::Result<(CpuStorage, Shape)> {
    let (x, g) = (f32_slice(s1, l1, op)?, f32_slice(s2, l2, op)?);
    if x.len() != g.len() {
        candle_core::bail!("{op}: input of {} elements, gradient of {}", x.len(), g.len())
    }
    let d = row_len.max(1);
    let out = map_rows(x.len(), d, |at, o| {
        for ((o, x), g) in o.chunks_mut(d).zip(x[at..].chunks(d)).zip(g[at..].chunks(d)) {
            f(x, g, o);
        }
    });
    Ok((CpuStorage::F32(out), l1.shape().clone()))
}

/// A three-input element-wise body: `f(a, b, c, out)` over equal-length chunks of three
/// contiguous tensors of one length.
fn ternary_elementwise(
    op: &'static str,
    (s1, l1): (&CpuStorage, &Layout),
    (s2, l2): (&CpuStorage, &Layout),
    (s3, l3): (&CpuStorage, &Layout),
    f: impl Fn(&[f32], &[f32], &[f32], &mut [f32]) + Sync,
) -> candle_core::Result<(CpuStorage, Shape)> {
    let (a, b, c) = (f32_slice(s1, l1, op)?, f32_slice(s2, l2, op)?, f32_slice(s3, l3, op)?);
    if a.len() != b.len() || a.len() != c.len() {
        candle_core::bail!("{op}: inputs of {}, {} and {} elements", a.len(), b.len(), c.len())
    }
    let d = ELEMENTWISE_ROW;
    let out = map_rows(a.len(), d, |at, o| {
        let n = o.len();
        f(&a[at..at + n], &b[at..at + n], &c[at..at + n], o);
    });
    Ok((CpuStorage::F32(out), l1.shape().clone()))
}

/// A one-input kernel's gradient: its backward kernel `op` applied to the saved tensor `x` (the
/// forward's input or output) and the incoming gradient, both made contiguous.
fn backward_of(
    x: &Tensor,
    grad: &Tensor,
    op: &impl CustomOp2,
) -> candle_core::Result<Option<Tensor>> {
    Ok(Some(x.contiguous()?.apply_op2_no_bwd(&grad.contiguous()?, op)?))
}

/// The length of the last dimension: the row of the row-wise kernels.
fn last_dim(l: &Layout) -> usize {
    l.dims().last().copied().unwrap_or(1)
}

/// Element-wise tanh-GELU with its analytic backward.
pub(super) struct Gelu;

impl CustomOp1 for Gelu {
    fn name(&self) -> &'static str {
        "drift-gelu"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        unary_rows(self.name(), (s, l), ELEMENTWISE_ROW, |x, o| {
            for (o, &x) in o.iter_mut().zip(x) {
                *o = gelu(x);
            }
        })
    }

    fn bwd(
        &self,
        arg: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<Option<Tensor>> {
        backward_of(arg, grad, &GeluBackward)
    }
}

/// `(x, g) ↦ g · gelu'(x)`.
struct GeluBackward;

impl CustomOp2 for GeluBackward {
    fn name(&self) -> &'static str {
        "drift-gelu-backward"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        binary_rows(self.name(), (s1, l1), (s2, l2), ELEMENTWISE_ROW, |x, g, o| {
            for ((o, &x), &g) in o.iter_mut().zip(x).zip(g) {
                *o = g * gelu_grad(x);
            }
        })
    }
}

/// Mean and `1/√(var + eps)` of one row (biased variance, as LayerNorm).
#[inline]
fn moments(row: &[f32], eps: f32) -> (f32, f32) {
    let n = row.len() as f32;
    let mean = row.iter().sum::<f32>() / n;
    let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / n;
    (mean, 1.0 / (var + eps).sqrt())
}

/// `(x − mean)/√(var + eps)` over the last dimension: LayerNorm without its affine part.
pub(super) struct Normalize {
    pub eps: f32,
}

impl CustomOp1 for Normalize {
    fn name(&self) -> &'static str {
        "drift-normalize"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        unary_rows(self.name(), (s, l), last_dim(l), |x, o| {
            let (mean, inv) = moments(x, self.eps);
            for (o, &x) in o.iter_mut().zip(x) {
                *o = (x - mean) * inv;
            }
        })
    }

    fn bwd(
        &self,
        arg: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<Option<Tensor>> {
        backward_of(arg, grad, &NormalizeBackward { eps: self.eps })
    }
}

/// `(x, g) ↦ (g − mean(g) − y·mean(g ⊙ y)) / σ` per row, `y` the normalized row.
struct NormalizeBackward {
    eps: f32,
}

impl CustomOp2 for NormalizeBackward {
    fn name(&self) -> &'static str {
        "drift-normalize-backward"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        binary_rows(self.name(), (s1, l1), (s2, l2), last_dim(l1), |x, g, o| {
            let n = x.len() as f32;
            let (mean, inv) = moments(x, self.eps);
            let (mut g_mean, mut gy_mean) = (0f32, 0f32);
            for (&x, &g) in x.iter().zip(g) {
                g_mean += g;
                gy_mean += g * (x - mean) * inv;
            }
            let (g_mean, gy_mean) = (g_mean / n, gy_mean / n);
            for ((o, &x), &g) in o.iter_mut().zip(x).zip(g) {
                *o = inv * (g - g_mean - (x - mean) * inv * gy_mean);
            }
        })
    }
}

/// `softmax` over the last dimension, `e^{x − max} / Σ e^{x − max}`.
pub(super) struct Softmax;

/// `o = softmax(x)` of one row: `exp(x − max)`, then times `1 / Σ`.
pub(super) fn softmax_row(x: &[f32], o: &mut [f32]) {
    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0f32;
    for (o, &x) in o.iter_mut().zip(x) {
        *o = (x - max).exp();
        sum += *o;
    }
    let inv = 1.0 / sum;
    o.iter_mut().for_each(|o| *o *= inv);
}

impl CustomOp1 for Softmax {
    fn name(&self) -> &'static str {
        "drift-softmax"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        unary_rows(self.name(), (s, l), last_dim(l), softmax_row)
    }

    fn bwd(
        &self,
        _arg: &Tensor,
        res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<Option<Tensor>> {
        backward_of(res, grad, &SoftmaxBackward)
    }
}

/// `(y, g) ↦ y ⊙ (g − Σ g ⊙ y)` per row, `y` the softmax output.
struct SoftmaxBackward;

impl CustomOp2 for SoftmaxBackward {
    fn name(&self) -> &'static str {
        "drift-softmax-backward"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        binary_rows(self.name(), (s1, l1), (s2, l2), last_dim(l1), |y, g, o| {
            let dot: f32 = y.iter().zip(g).map(|(y, g)| y * g).sum();
            for ((o, &y), &g) in o.iter_mut().zip(y).zip(g) {
                *o = y * (g - dot);
            }
        })
    }
}

/// SiLU, `x·σ(x) = x / (1 + e^{−x})`, written as candle's `silu` computes it in f32 so the
/// fused SwiGLU's value is bit-equal to `silu(gate) ⊙ up`.
#[inline]
fn silu(x: f32) -> f32 {
    x / (1.0 + (-x).exp())
}

/// `d silu/dx = σ(x)(1 + x(1 − σ(x)))`.
#[inline]
fn silu_grad(x: f32) -> f32 {
    let s = 1.0 / (1.0 + (-x).exp());
    s * (1.0 + x * (1.0 - s))
}

/// SwiGLU's gate, `silu(gate) ⊙ up` (Shazeer 2020), one pass forward and one pass per input
/// backward (candle's composition costs a `silu` map and a product forward and eight
/// temporaries backward).
pub(super) struct SwiGlu;

impl CustomOp2 for SwiGlu {
    fn name(&self) -> &'static str {
        "drift-swiglu"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        binary_rows(self.name(), (s1, l1), (s2, l2), ELEMENTWISE_ROW, |gate, up, o| {
            for ((o, &g), &u) in o.iter_mut().zip(gate).zip(up) {
                *o = silu(g) * u;
            }
        })
    }

    fn bwd(
        &self,
        gate: &Tensor,
        up: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        let (gate, up, grad) = (gate.contiguous()?, up.contiguous()?, grad.contiguous()?);
        let d_gate = gate.apply_op3_no_bwd(&up, &grad, &SwiGluGateBackward)?;
        let d_up = gate.apply_op2_no_bwd(&grad, &SwiGluUpBackward)?;
        Ok((Some(d_gate), Some(d_up)))
    }
}

/// `(gate, up, g) ↦ g ⊙ up ⊙ silu'(gate)`.
struct SwiGluGateBackward;

impl CustomOp3 for SwiGluGateBackward {
    fn name(&self) -> &'static str {
        "drift-swiglu-gate-backward"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        ternary_elementwise(self.name(), (s1, l1), (s2, l2), (s3, l3), |gate, up, g, o| {
            for (((o, &x), &u), &g) in o.iter_mut().zip(gate).zip(up).zip(g) {
                *o = g * u * silu_grad(x);
            }
        })
    }
}

/// `(gate, g) ↦ g ⊙ silu(gate)`.
struct SwiGluUpBackward;

impl CustomOp2 for SwiGluUpBackward {
    fn name(&self) -> &'static str {
        "drift-swiglu-up-backward"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        binary_rows(self.name(), (s1, l1), (s2, l2), ELEMENTWISE_ROW, |gate, g, o| {
            for ((o, &x), &g) in o.iter_mut().zip(gate).zip(g) {
                *o = g * silu(x);
            }
        })
    }
}

/// `√(mean(x²) + eps)` of one row, summed in order as candle's fused `rms_norm` does, so the
/// normalised row `x / rms` is bit-equal to it (the untracked path) and a fresh policy's ratio
/// and KL against its rollout are exactly 1 and 0.
#[inline]
fn rms(row: &[f32], eps: f32) -> f32 {
    let ms = row.iter().map(|v| v * v).sum::<f32>() / row.len() as f32;
    (ms + eps).sqrt()
}

/// `x / √(mean(x²) + eps)` over the last dimension: RMSNorm without its gain (Zhang &
/// Sennrich 2019).
pub(super) struct RmsNormalize {
    pub eps: f32,
}

impl CustomOp1 for RmsNormalize {
    fn name(&self) -> &'static str {
        "drift-rms-normalize"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        unary_rows(self.name(), (s, l), last_dim(l), |x, o| {
            let m = rms(x, self.eps);
            for (o, &x) in o.iter_mut().zip(x) {
                *o = x / m;
            }
        })
    }

    fn bwd(
        &self,
        arg: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<Option<Tensor>> {
        backward_of(arg, grad, &RmsNormalizeBackward { eps: self.eps })
    }
}

/// `(x, g) ↦ (g − y·mean(g ⊙ y)) / m` per row, `m = √(mean(x²) + eps)` and `y = x / m`.
struct RmsNormalizeBackward {
    eps: f32,
}

impl CustomOp2 for RmsNormalizeBackward {
    fn name(&self) -> &'static str {
        "drift-rms-normalize-backward"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        binary_rows(self.name(), (s1, l1), (s2, l2), last_dim(l1), |x, g, o| {
            let m = rms(x, self.eps);
            let gy_mean = x.iter().zip(g).map(|(&x, &g)| g * (x / m)).sum::<f32>() / x.len() as f32;
            for ((o, &x), &g) in o.iter_mut().zip(x).zip(g) {
                *o = (g - (x / m) * gy_mean) / m;
            }
        })
    }
}
