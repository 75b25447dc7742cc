//! Kernels that keep the autograd graph when it is needed (docs/architecture.md §6).
//!
//! candle's fused `softmax_last_dim`, `rms_norm`, `layer_norm` and `rope*` kernels silently cut
//! the autograd graph: parameters upstream of them get no gradient and no error is raised.
//! Every model in drift calls these wrappers instead. Each picks the fused kernel when no input
//! is tracked (rollouts, old/reference passes over detached weights) and the differentiable
//! composition of elementary ops when one is (training). Both compute the same function.
//! Inputs to the fused kernels are made contiguous first (they reject strided views).

use candle_core::{Tensor, D};

use crate::error::Result;

fn tracked(ts: &[&Tensor]) -> bool {
    ts.iter().any(|t| t.track_op())
}

/// `softmax(x)` over the last dimension.
pub fn softmax_last_dim(x: &Tensor) -> Result<Tensor> {
    Ok(if tracked(&[x]) {
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
/// computed in f32 for half-precision inputs.
pub fn rms_norm(x: &Tensor, weight: &Tensor, eps: f32) -> Result<Tensor> {
    Ok(if tracked(&[x, weight]) {
        candle_nn::ops::rms_norm_slow(x, weight, eps)?
    } else {
        candle_nn::ops::rms_norm(&x.contiguous()?, weight, eps)?
    })
}

/// LayerNorm, `w ⊙ (x − mean)/√(var + eps) + b` over the last dimension (Ba et al. 2016).
pub fn layer_norm(x: &Tensor, weight: &Tensor, bias: &Tensor, eps: f32) -> Result<Tensor> {
    Ok(if tracked(&[x, weight, bias]) {
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
