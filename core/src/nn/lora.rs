//! LoRA adapters (Hu et al., "LoRA: Low-Rank Adaptation of Large Language Models", arXiv
//! 2106.09685) on drift's one [`Linear`](super::Linear), shared by every model family: the
//! SD3 MMDiT (Flow-GRPO trains SD3.5 through one) and the dLLMs (d1 trains LLaDA through one).
//!
//! An adapted layer computes `y = x Wᵀ + b + (α/r) (x Aᵀ) Bᵀ` with `A: [r, in]`, `B: [out, r]`.
//! `B` starts at zero, so the adapted model starts as the base model; only `A` and `B` train,
//! so every update `ΔW = (α/r) B A` has rank at most `r`. Tensor names follow PEFT:
//! `{layer}.lora_A.weight` and `{layer}.lora_B.weight`.

use candle_core::{DType, Tensor};
use candle_nn::{Init, VarBuilder};

use super::torch_default_init;
use crate::error::{CoreError, Result};

/// One low-rank update `ΔW = scale · B A` (`scale = α / r`).
#[derive(Debug, Clone)]
pub struct LoraAdapter {
    a: Tensor,
    b: Tensor,
    scale: f64,
}

impl LoraAdapter {
    /// The adapter with `A: [r, in]`, `B: [out, r]` and `scale = α / r`.
    #[must_use]
    pub fn new(a: Tensor, b: Tensor, scale: f64) -> Self {
        Self { a, b, scale }
    }

    /// Loads (or, from a `VarMap` or an initialising backend, creates) `lora_A.weight: [r, in]`
    /// with torch's default `nn.Linear` init and `lora_B.weight: [out, r]` at zero, as PEFT
    /// does, under `vb` (the layer's own path), with `scale = alpha / rank`.
    pub fn load(
        in_dim: usize,
        out_dim: usize,
        rank: usize,
        alpha: f64,
        vb: VarBuilder,
    ) -> Result<Self> {
        check_rank_alpha(rank, alpha)?;
        let a =
            vb.pp("lora_A").get_with_hints((rank, in_dim), "weight", torch_default_init(in_dim))?;
        let b = vb.pp("lora_B").get_with_hints((out_dim, rank), "weight", Init::Const(0.0))?;
        Ok(Self::new(a, b, alpha / rank as f64))
    }

    /// `A: [r, in]`.
    #[must_use]
    pub fn a(&self) -> &Tensor {
        &self.a
    }

    /// `B: [out, r]`.
    #[must_use]
    pub fn b(&self) -> &Tensor {
        &self.b
    }

    /// `α / r`.
    #[must_use]
    pub fn scale(&self) -> f64 {
        self.scale
    }

    /// `(α/r) (x Aᵀ) Bᵀ` for `x: [N, in]`, computed in the adapter's dtype and returned in
    /// `out_dtype` (an f32 adapter beside a bf16 base, as PEFT keeps them).
    pub fn delta(&self, x: &Tensor, out_dtype: DType) -> candle_core::Result<Tensor> {
        let x = x.to_dtype(self.a.dtype())?;
        let low = x.matmul(&self.a.t()?)?;
        (low.matmul(&self.b.t()?)? * self.scale)?.to_dtype(out_dtype)
    }

    /// `ΔW = (α/r) B A`, `[out, in]`, in `dtype`.
    pub fn delta_weight(&self, dtype: DType) -> Result<Tensor> {
        let w = (self.b.detach().matmul(&self.a.detach())? * self.scale)?;
        Ok(w.to_dtype(dtype)?)
    }
}

/// Checks a rank and an `α` before any adapter is built.
pub fn check_rank_alpha(rank: usize, alpha: f64) -> Result<()> {
    if rank == 0 {
        return Err(CoreError::Config {
            field: "lora.rank",
            value: "0".into(),
            expected: "a positive rank",
        });
    }
    if !alpha.is_finite() || alpha <= 0.0 {
        return Err(CoreError::Config {
            field: "lora.alpha",
            value: alpha.to_string(),
            expected: "a positive number",
        });
    }
    Ok(())
}

/// PEFT's `target_modules` rule: the layer `name` (a module path such as
/// `model.transformer.blocks.0.q_proj`) is adapted when it equals one of `targets` or ends
/// with `"." + target`.
#[must_use]
pub fn targets(targets: &[String], name: &str) -> bool {
    targets.iter().any(|t| name == t || name.ends_with(&format!(".{t}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::Linear;
    use candle_core::{Device, Module, Var};
    use candle_nn::VarMap;

    #[test]
    fn an_adapted_layer_computes_the_formula_and_merges_to_the_same_map() -> Result<()> {
        let dev = Device::Cpu;
        // W = [[1, 2], [3, 4], [5, 6]], A = [[1, -1]] (r 1), B = [[1], [0], [2]], α/r = 0.5.
        let w = Tensor::new(&[[1f32, 2.], [3., 4.], [5., 6.]], &dev)?;
        let a = Tensor::new(&[[1f32, -1.]], &dev)?;
        let b = Tensor::new(&[[1f32], [0.], [2.]], &dev)?;
        let layer = Linear::new(w, None).with_adapter(LoraAdapter::new(a, b, 0.5));
        let x = Tensor::new(&[[2f32, 1.]], &dev)?;
        // x Wᵀ = [4, 10, 16]; x Aᵀ = 1; (x Aᵀ) Bᵀ · 0.5 = [0.5, 0, 1].
        assert_eq!(layer.forward(&x)?.to_vec2::<f32>()?, vec![vec![4.5, 10.0, 17.0]]);
        let merged = layer.merged()?;
        assert!(merged.adapter().is_none());
        assert_eq!(merged.forward(&x)?.to_vec2::<f32>()?, vec![vec![4.5, 10.0, 17.0]]);
        Ok(())
    }

    #[test]
    fn a_fresh_adapter_is_the_identity_and_its_gradient_reaches_b_only_first() -> Result<()> {
        let dev = Device::Cpu;
        let map = VarMap::new();
        let vb = VarBuilder::from_varmap(&map, DType::F32, &dev);
        let w = Tensor::randn(0f32, 1.0, (5, 4), &dev)?;
        let adapter = LoraAdapter::load(4, 5, 2, 4.0, vb.pp("layer"))?;
        assert_eq!(adapter.scale(), 2.0);
        let layer = Linear::new(w.clone(), None).with_adapter(adapter);
        let x = Tensor::randn(0f32, 1.0, (3, 4), &dev)?;
        let diff = (layer.forward(&x)? - x.matmul(&w.t()?)?)?.abs()?.max_all()?;
        assert_eq!(diff.to_scalar::<f32>()?, 0.0);
        // With B = 0: ∂L/∂A = 0 and ∂L/∂B = scale · gᵀ (x Aᵀ) for L = Σ y ⊙ g.
        let g = Tensor::randn(0f32, 1.0, (3, 5), &dev)?;
        let loss = (layer.forward(&x)? * &g)?.sum_all()?;
        let grads = loss.backward()?;
        let vars = map.data().lock().expect("varmap").clone();
        let a: &Var = &vars["layer.lora_A.weight"];
        let b: &Var = &vars["layer.lora_B.weight"];
        let ga = grads.get(a.as_tensor()).expect("A grad").abs()?.max_all()?;
        assert_eq!(ga.to_scalar::<f32>()?, 0.0);
        let want = (g.t()?.matmul(&x.matmul(&a.as_tensor().t()?)?)? * 2.0)?;
        let gb = grads.get(b.as_tensor()).expect("B grad");
        let err = (gb - want)?.abs()?.max_all()?.to_scalar::<f32>()?;
        assert!(err < 1e-5, "{err}");
        Ok(())
    }

    #[test]
    fn targets_follow_peft_and_bad_ranks_are_refused() {
        let t = vec!["q_proj".to_string(), "attn.to_out.0".into()];
        assert!(targets(&t, "model.transformer.blocks.0.q_proj"));
        assert!(targets(&t, "q_proj"));
        assert!(targets(&t, "blocks.1.attn.to_out.0"));
        assert!(!targets(&t, "model.transformer.blocks.0.xq_proj"));
        let err = check_rank_alpha(0, 1.0).unwrap_err().to_string();
        assert!(err.contains("lora.rank"), "{err}");
        assert!(check_rank_alpha(4, f64::NAN).unwrap_err().to_string().contains("lora.alpha"));
    }
}
