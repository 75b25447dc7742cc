//! Kernels that keep the autograd graph when it is needed (docs/architecture.md §6).
//!
//! candle's fused `softmax_last_dim`, `rms_norm`, `layer_norm` and `rope*` kernels silently cut
//! the autograd graph: parameters upstream of them get no gradient and no error is raised.
//! Every model in drift calls these wrappers instead. Each picks the fused kernel when no input
//! is tracked (rollouts, old/reference passes over detached weights) and the differentiable
//! composition of elementary ops when one is (training). Both compute the same function.
//! Inputs to the fused kernels are made contiguous first (they reject strided views).
//!
//! On the CPU in f32, [`gelu`], [`normalize`], [`softmax_last_dim`], [`swiglu`] and the
//! tracked [`layer_norm`] and [`rms_norm`] run drift's own one-pass kernels (`cpu_kernels`), which carry their backward
//! pass; the same kernel serves the rollout and the training forward, so the old policy and the
//! policy being trained evaluate one function. [`attention`] (untracked f32 only) runs the
//! composition's own per-head GEMMs and softmax one head per thread, bit-equal to it.

mod attention;
mod cpu_kernels;

pub use attention::{attention, fused_attention_applies};

use candle_core::{DType, Tensor, D};

use crate::error::Result;

/// Whether drift's fused CPU kernels apply: an f32 tensor on the CPU.
fn cpu_f32(x: &Tensor) -> bool {
    x.device().is_cpu() && x.dtype() == DType::F32 && std::env::var("DRIFT_NO_KERNELS").is_err()
}

fn tracked(ts: &[&Tensor]) -> bool {
    ts.iter().any(|t| t.track_op())
}

/// GELU in its tanh form, `½x(1 + tanh(√(2/π)(x + 0.044715x³)))` (Hendrycks & Gimpel 2016),
/// candle's `Tensor::gelu`.
pub fn gelu(x: &Tensor) -> Result<Tensor> {
    Ok(if cpu_f32(x) { x.contiguous()?.apply_op1(cpu_kernels::Gelu)? } else { x.gelu()? })
}

/// `(x − mean)/√(var + eps)` over the last dimension: LayerNorm without affine parameters
/// (DiT's `elementwise_affine=False`).
pub fn normalize(x: &Tensor, eps: f32) -> Result<Tensor> {
    if cpu_f32(x) {
        return Ok(x.contiguous()?.apply_op1(cpu_kernels::Normalize { eps })?);
    }
    let d = x.dim(D::Minus1)?;
    let ones = Tensor::ones(d, x.dtype(), x.device())?;
    let zeros = Tensor::zeros(d, x.dtype(), x.device())?;
    layer_norm(x, &ones, &zeros, eps)
}

/// `softmax(x)` over the last dimension.
pub fn softmax_last_dim(x: &Tensor) -> Result<Tensor> {
    Ok(if cpu_f32(x) {
        x.contiguous()?.apply_op1(cpu_kernels::Softmax)?
    } else if tracked(&[x]) {
        candle_nn::ops::softmax(x, D::Minus1)?
    } else {
        candle_nn::ops::softmax_last_dim(&x.contiguous()?)?
    })
}

/// `log softmax(x)` over the last dimension, `x − max − log Σ exp(x − max)` (always the
/// differentiable composition; candle has no fused kernel that cuts it).
pub fn log_softmax_last_dim(x: &Tensor) -> Result<Tensor> {
    Ok(candle_nn::ops::log_softmax(x, D::Minus1)?)
}

/// RMSNorm, `w ⊙ x / √(mean(x²) + eps)` over the last dimension (Zhang & Sennrich 2019),
/// computed in f32 for half-precision inputs. Tracked on the CPU in f32 it is drift's one-pass
/// normalisation (with its one-pass backward) times `w`; untracked it stays candle's fused
/// kernel, whose rounding the decoding parity checks were made with.
pub fn rms_norm(x: &Tensor, weight: &Tensor, eps: f32) -> Result<Tensor> {
    Ok(if tracked(&[x, weight]) && cpu_f32(x) && weight.dtype() == DType::F32 {
        x.contiguous()?.apply_op1(cpu_kernels::RmsNormalize { eps })?.broadcast_mul(weight)?
    } else if tracked(&[x, weight]) {
        candle_nn::ops::rms_norm_slow(x, weight, eps)?
    } else {
        candle_nn::ops::rms_norm(&x.contiguous()?, weight, eps)?
    })
}

/// SwiGLU's gate `silu(gate) ⊙ up` (Shazeer 2020; LLaMA, LLaDA, Qwen2), `silu(x) = x·σ(x)`.
/// On the CPU in f32 it is one fused pass (bit-equal to the composition in value) with a
/// fused backward; elsewhere candle's `silu` and product.
pub fn swiglu(gate: &Tensor, up: &Tensor) -> Result<Tensor> {
    Ok(if cpu_f32(gate) && cpu_f32(up) && gate.shape() == up.shape() {
        gate.contiguous()?.apply_op2(&up.contiguous()?, cpu_kernels::SwiGlu)?
    } else {
        (candle_nn::ops::silu(gate)? * up)?
    })
}

/// LayerNorm, `w ⊙ (x − mean)/√(var + eps) + b` over the last dimension (Ba et al. 2016).
pub fn layer_norm(x: &Tensor, weight: &Tensor, bias: &Tensor, eps: f32) -> Result<Tensor> {
    Ok(if tracked(&[x, weight, bias]) && cpu_f32(x) {
        normalize(x, eps)?.broadcast_mul(weight)?.broadcast_add(bias)?
    } else if tracked(&[x, weight, bias]) {
        candle_nn::ops::layer_norm_slow(x, weight, bias, eps)?
    } else {
        candle_nn::ops::layer_norm(&x.contiguous()?, weight, bias, eps)?
    })
}

/// Rotary embedding in the half-split layout (GPT-NeoX, HF Llama, LLaDA, Qwen2):
/// `x' = x cos + rotate_half(x) sin` with `rotate_half(x) = [−x₂, x₁]`. `x` is
/// `[B, H, T, D]`, `cos`/`sin` are `[T, D/2]`.
pub fn rope(x: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
    Ok(if tracked(&[x, cos, sin]) {
        candle_nn::rotary_emb::rope_slow(x, cos, sin)?
    } else {
        candle_nn::rotary_emb::rope(&x.contiguous()?, cos, sin)?
    })
}

/// Rotary embedding with interleaved pairs (GPT-J layout); shapes as [`rope`].
pub fn rope_interleaved(x: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
    Ok(if tracked(&[x, cos, sin]) {
        candle_nn::rotary_emb::rope_i_slow(x, cos, sin)?
    } else {
        candle_nn::rotary_emb::rope_i(&x.contiguous()?, cos, sin)?
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::RngKey;
    use candle_core::{DType, Device, Var};

    fn randn(seed: u64, shape: &[usize]) -> Tensor {
        RngKey::new(seed).normal(shape, DType::F32, &Device::Cpu).unwrap()
    }

    fn max_diff(a: &Tensor, b: &Tensor) -> f32 {
        a.sub(b).unwrap().abs().unwrap().flatten_all().unwrap().max(0).unwrap().to_scalar().unwrap()
    }

    /// The tracked path gives the untracked path's values and a non-zero gradient to `x`.
    fn check(f: impl Fn(&Tensor) -> Result<Tensor>, shape: &[usize]) -> Result<()> {
        let x = randn(1, shape);
        let fused = f(&x)?;
        let var = Var::from_tensor(&x)?;
        let slow = f(var.as_tensor())?;
        assert!(max_diff(&fused, &slow) < 1e-5, "fused and differentiable paths disagree");
        let weights = randn(2, slow.dims());
        let grads = slow.mul(&weights)?.sum_all()?.backward()?;
        let g = grads.get(var.as_tensor()).expect("the graph was cut: no gradient reached x");
        assert!(g.abs()?.sum_all()?.to_scalar::<f32>()? > 0.0);
        Ok(())
    }

    #[test]
    fn every_wrapper_keeps_the_graph_when_tracked() -> Result<()> {
        let w = randn(3, &[8]);
        let b = randn(4, &[8]);
        let (cos, sin) = (randn(5, &[3, 4]), randn(6, &[3, 4]));
        check(softmax_last_dim, &[2, 3, 8])?;
        check(log_softmax_last_dim, &[2, 3, 8])?;
        check(|x| rms_norm(x, &w, 1e-5), &[2, 3, 8])?;
        check(|x| layer_norm(x, &w, &b, 1e-5), &[2, 3, 8])?;
        check(|x| rope(x, &cos, &sin), &[2, 2, 3, 8])?;
        check(|x| rope_interleaved(x, &cos, &sin), &[2, 2, 3, 8])?;
        Ok(())
    }

    /// Value and gradient of `Σ w ⊙ f(x)` through drift's kernel and through candle's
    /// composition of elementary ops (the reference): they must agree.
    fn agrees_with_candle(
        ours: impl Fn(&Tensor) -> Result<Tensor>,
        reference: impl Fn(&Tensor) -> candle_core::Result<Tensor>,
        shape: &[usize],
    ) -> Result<()> {
        let x = (randn(11, shape) * 3.0)?;
        let (a, b) = (Var::from_tensor(&x)?, Var::from_tensor(&x)?);
        let (ya, yb) = (ours(a.as_tensor())?, reference(b.as_tensor())?);
        let w = randn(12, ya.dims());
        assert!(max_diff(&ya, &yb) < 2e-6, "forward: {}", max_diff(&ya, &yb));
        let ga = ya.mul(&w)?.sum_all()?.backward()?.remove(a.as_tensor()).unwrap();
        let gb = yb.mul(&w)?.sum_all()?.backward()?.remove(b.as_tensor()).unwrap();
        let scale = gb.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()?;
        assert!(max_diff(&ga, &gb) < 1e-5 * scale.max(1.0), "backward: {}", max_diff(&ga, &gb));
        Ok(())
    }

    #[test]
    fn cpu_kernels_match_candle_in_value_and_gradient() -> Result<()> {
        agrees_with_candle(gelu, |x| x.gelu(), &[3, 5, 40])?;
        agrees_with_candle(
            |x| normalize(x, 1e-6),
            |x| {
                let d = x.dim(D::Minus1)?;
                let (one, zero) = (
                    Tensor::ones(d, DType::F32, x.device())?,
                    Tensor::zeros(d, DType::F32, x.device())?,
                );
                candle_nn::ops::layer_norm_slow(x, &one, &zero, 1e-6)
            },
            &[3, 5, 40],
        )?;
        agrees_with_candle(
            softmax_last_dim,
            |x| candle_nn::ops::softmax(x, D::Minus1),
            &[3, 5, 40],
        )?;
        // A transposed (strided) input and a row longer than one rayon task.
        agrees_with_candle(
            |x| softmax_last_dim(&x.t()?),
            |x| candle_nn::ops::softmax(&x.t()?, D::Minus1),
            &[4, 3, 9000],
        )?;
        let (w, b) = (randn(13, &[40]), randn(14, &[40]));
        agrees_with_candle(
            |x| layer_norm(x, &w, &b, 1e-5),
            |x| candle_nn::ops::layer_norm_slow(x, &w, &b, 1e-5),
            &[6, 40],
        )?;
        Ok(())
    }

    /// Central finite differences of `Σ w ⊙ gelu(x)` against the analytic backward.
    #[test]
    fn gelu_gradient_matches_finite_differences() -> Result<()> {
        let xs = [-6.0f32, -2.5, -0.7, -1e-3, 0.0, 0.4, 1.3, 3.0, 8.0];
        let x = Var::new(&xs[..], &Device::Cpu)?;
        let g = gelu(x.as_tensor())?.sum_all()?.backward()?.remove(x.as_tensor()).unwrap();
        let g = g.to_vec1::<f32>()?;
        for (i, &v) in xs.iter().enumerate() {
            let h = 1e-2f64;
            let f = |v: f64| {
                0.5 * v
                    * (1.0
                        + ((2.0 / std::f64::consts::PI).sqrt() * (v + 0.044715 * v.powi(3))).tanh())
            };
            let fd = (f(v as f64 + h) - f(v as f64 - h)) / (2.0 * h);
            assert!((g[i] as f64 - fd).abs() < 1e-4, "x={v}: {} vs {fd}", g[i]);
        }
        Ok(())
    }

    #[test]
    fn rms_norm_kernel_matches_candle_in_value_and_gradient() -> Result<()> {
        let w = randn(15, &[40]);
        agrees_with_candle(
            |x| rms_norm(x, &w, 1e-5),
            |x| candle_nn::ops::rms_norm_slow(x, &w, 1e-5),
            &[3, 5, 40],
        )?;
        // The gain's gradient too: `Σ_rows g ⊙ y`, through both paths.
        let x = randn(16, &[6, 40]);
        let (wa, wb) = (Var::from_tensor(&w)?, Var::from_tensor(&w)?);
        let wt = randn(17, &[6, 40]);
        let ga = rms_norm(&x, wa.as_tensor(), 1e-5)?;
        let gb = candle_nn::ops::rms_norm_slow(&x, wb.as_tensor(), 1e-5)?;
        let da = ga.mul(&wt)?.sum_all()?.backward()?.remove(wa.as_tensor()).unwrap();
        let db = gb.mul(&wt)?.sum_all()?.backward()?.remove(wb.as_tensor()).unwrap();
        assert!(max_diff(&da, &db) < 1e-5, "gain gradient: {}", max_diff(&da, &db));
        // Tracked and untracked (candle's fused kernel) give the same bits, so a policy's
        // first ratio and KL against its own rollout are exactly 1 and 0.
        let tracked = rms_norm(&x, wa.as_tensor(), 1e-5)?;
        let fused = rms_norm(&x, &w, 1e-5)?;
        assert_eq!(max_diff(&tracked, &fused), 0.0);
        Ok(())
    }

    /// Central finite differences of `Σ w ⊙ x/√(mean(x²) + eps)` in f64 against the kernel's
    /// backward, on one row.
    #[test]
    fn rms_normalize_gradient_matches_finite_differences() -> Result<()> {
        let xs = [0.3f32, -1.2, 2.5, 0.0, -0.7, 1.9];
        let ws = [0.5f64, -1.0, 2.0, 0.25, 1.5, -0.75];
        let x = Var::new(&xs[..], &Device::Cpu)?;
        let one = Tensor::ones(6, DType::F32, &Device::Cpu)?;
        let wt = Tensor::new(&ws.map(|w| w as f32)[..], &Device::Cpu)?;
        let y = rms_norm(&x.as_tensor().unsqueeze(0)?, &one, 1e-5)?.squeeze(0)?;
        let g = y.mul(&wt)?.sum_all()?.backward()?.remove(x.as_tensor()).unwrap();
        let g = g.to_vec1::<f32>()?;
        let f = |v: &[f64]| {
            let r = 1.0 / (v.iter().map(|x| x * x).sum::<f64>() / 6.0 + 1e-5).sqrt();
            v.iter().zip(&ws).map(|(x, w)| w * x * r).sum::<f64>()
        };
        for i in 0..6 {
            let h = 1e-4;
            let mut p: Vec<f64> = xs.iter().map(|&v| f64::from(v)).collect();
            let mut m = p.clone();
            p[i] += h;
            m[i] -= h;
            let fd = (f(&p) - f(&m)) / (2.0 * h);
            assert!((f64::from(g[i]) - fd).abs() < 1e-4, "x[{i}]: {} vs {fd}", g[i]);
        }
        Ok(())
    }

    #[test]
    fn swiglu_is_the_composition_in_value_and_gradient() -> Result<()> {
        // Three rayon tasks' worth, a length no task size divides, and a strided `up`.
        let (gate, up) = ((randn(18, &[5, 7, 1000]) * 3.0)?, randn(19, &[5, 1000, 7]));
        let (ga, gb) = (Var::from_tensor(&gate)?, Var::from_tensor(&gate)?);
        let (ua, ub) = (Var::from_tensor(&up)?, Var::from_tensor(&up)?);
        let ours = swiglu(ga.as_tensor(), &ua.as_tensor().transpose(1, 2)?)?;
        let reference =
            (candle_nn::ops::silu(gb.as_tensor())? * ub.as_tensor().transpose(1, 2)?)?;
        assert_eq!(max_diff(&ours, &reference), 0.0, "the value is bit-equal to the composition");
        let w = randn(20, ours.dims());
        let mut da = ours.mul(&w)?.sum_all()?.backward()?;
        let mut db = reference.mul(&w)?.sum_all()?.backward()?;
        for (a, b) in [(ga.as_tensor(), gb.as_tensor()), (ua.as_tensor(), ub.as_tensor())] {
            let (a, b) = (da.remove(a).unwrap(), db.remove(b).unwrap());
            assert!(max_diff(&a, &b) < 1e-5, "gradient: {}", max_diff(&a, &b));
        }
        Ok(())
    }

    /// `d/dg Σ w ⊙ silu(g)·u` by central differences in f64.
    #[test]
    fn swiglu_gate_gradient_matches_finite_differences() -> Result<()> {
        let gs = [-6.0f32, -1.5, -1e-3, 0.0, 0.8, 4.0];
        let us = [0.7f32, -1.1, 2.0, 0.5, -0.3, 1.2];
        let g = Var::new(&gs[..], &Device::Cpu)?;
        let u = Tensor::new(&us[..], &Device::Cpu)?;
        let d = swiglu(g.as_tensor(), &u)?.sum_all()?.backward()?.remove(g.as_tensor()).unwrap();
        let d = d.to_vec1::<f32>()?;
        for i in 0..gs.len() {
            let (x, h) = (f64::from(gs[i]), 1e-4);
            let silu = |v: f64| v / (1.0 + (-v).exp());
            let fd = f64::from(us[i]) * (silu(x + h) - silu(x - h)) / (2.0 * h);
            assert!((f64::from(d[i]) - fd).abs() < 1e-4, "g={x}: {} vs {fd}", d[i]);
        }
        Ok(())
    }

    #[test]
    fn a_tracked_weight_alone_selects_the_differentiable_path() -> Result<()> {
        let x = randn(7, &[4, 8]);
        let w = Var::from_tensor(&randn(8, &[8]))?;
        let y = rms_norm(&x, w.as_tensor(), 1e-6)?;
        let grads = y.sum_all()?.backward()?;
        assert!(grads.get(w.as_tensor()).is_some(), "the RMSNorm gain must get a gradient");
        Ok(())
    }
}
