//! The one linear layer of every model family (the dLLM transformers, the flow DiT).
//!
//! [`Linear`] computes `y = x Wᵀ (+ b)` with `W: [out, in]` and `b: [out]`, named `weight` and
//! `bias` under the caller's `vb.pp("…")` as torch's `nn.Linear` and the Hugging Face
//! checkpoints name them. Unlike `candle_nn::Linear`, which broadcasts `W` over a 3-D input's
//! batch axis, it folds every leading axis into one first, so `[B, T, in]` is one
//! `[B·T, in] × [in, out]` GEMM; on a 2-D input the two compute the same operations. A layer
//! may carry a [`LoraAdapter`] ([`lora`]), which adds its low-rank update to the output.

pub mod amx;
pub mod lora;

pub use lora::LoraAdapter;

use std::sync::Arc;

use candle_core::{DType, Module, Tensor};
use candle_nn::{Init, VarBuilder};

use crate::error::Result;

/// torch's default `nn.Linear` weight initialisation, `U(−1/√in, 1/√in)` (Kaiming-uniform with
/// `a = √5`).
#[must_use]
pub fn torch_default_init(in_dim: usize) -> Init {
    let bound = 1.0 / (in_dim as f64).sqrt();
    Init::Uniform { lo: -bound, up: bound }
}

/// `y = x Wᵀ (+ b) (+ (α/r) (x Aᵀ) Bᵀ with a LoRA adapter)` over the last dimension.
#[derive(Debug, Clone)]
pub struct Linear {
    weight: Tensor,
    bias: Option<Tensor>,
    adapter: Option<LoraAdapter>,
    packed: Option<Arc<amx::PackedBf16>>,
}

impl Linear {
    /// The layer with weight `[out, in]` and an optional bias `[out]`.
    #[must_use]
    pub fn new(weight: Tensor, bias: Option<Tensor>) -> Self {
        Self { weight, bias, adapter: None, packed: None }
    }

    /// The same layer computing `x Wᵀ` in bf16 on AMX tiles ([`amx`]: both factors rounded to
    /// bf16, products summed in f32) from a packed copy of `W` made now: for frozen inference
    /// models on the CPU (decoding, evaluation). The packed copy does not follow later updates
    /// of `W`, and the layer refuses an input that records a gradient. Errors when
    /// [`amx::available`] is false or `W` is not on the CPU.
    pub fn with_bf16_matmul(&self) -> Result<Self> {
        if !self.weight.device().is_cpu() || !amx::available() {
            return Err(crate::CoreError::Config {
                field: "matmul",
                value: "\"bf16\"".into(),
                expected: "an x86-64 CPU with AMX-BF16 under Linux (Intel Xeon 4th generation \
                           or later) and the model on the CPU; use \"f32\" elsewhere",
            });
        }
        let packed = Arc::new(amx::PackedBf16::pack(&self.weight)?);
        Ok(Self { packed: Some(packed), ..self.clone() })
    }

    /// Whether `x Wᵀ` runs in bf16 on AMX tiles ([`with_bf16_matmul`](Self::with_bf16_matmul)).
    #[must_use]
    pub fn is_bf16(&self) -> bool {
        self.packed.is_some()
    }

    /// The same layer with a LoRA adapter (replacing any it had).
    #[must_use]
    pub fn with_adapter(mut self, adapter: LoraAdapter) -> Self {
        self.adapter = Some(adapter);
        self
    }

    /// The LoRA adapter, if any.
    #[must_use]
    pub fn adapter(&self) -> Option<&LoraAdapter> {
        self.adapter.as_ref()
    }

    /// The layer with its adapter folded in, `W' = W + (α/r) B A` (detached, in `W`'s dtype),
    /// and no adapter: the same map up to rounding, one GEMM cheaper per adapted layer.
    pub fn merged(&self) -> Result<Self> {
        let weight = match &self.adapter {
            Some(a) => (self.weight.detach() + a.delta_weight(self.weight.dtype())?)?,
            None => self.weight.detach(),
        };
        Ok(Self::new(weight, self.bias.as_ref().map(Tensor::detach)))
    }

    /// Loads (or, from a `VarMap`, creates) `weight: [out_dim, in_dim]` with `weight_init`, then,
    /// when `bias` is true, `bias: [out_dim]` initialised to zero, both under `vb`.
    pub fn load(
        in_dim: usize,
        out_dim: usize,
        bias: bool,
        weight_init: Init,
        vb: VarBuilder,
    ) -> Result<Self> {
        let weight = vb.get_with_hints((out_dim, in_dim), "weight", weight_init)?;
        let bias =
            if bias { Some(vb.get_with_hints(out_dim, "bias", Init::Const(0.0))?) } else { None };
        Ok(Self::new(weight, bias))
    }

    /// The weight `[out, in]`.
    #[must_use]
    pub fn weight(&self) -> &Tensor {
        &self.weight
    }

    /// The bias `[out]`, if any.
    #[must_use]
    pub fn bias(&self) -> Option<&Tensor> {
        self.bias.as_ref()
    }
}

/// Whether `x[m, k] Wᵀ` runs faster as `(W xᵀ)ᵀ`: few rows against a long inner dimension, the
/// shape of batch-1 decoding (a 32-token block). With `x Wᵀ` the GEMM tiles the `m` rows by its
/// microkernel's height (24 rows with AVX2, 64 with the `avx512` feature's kernels), so a
/// 32-row block wastes up to half of each tile; transposed, the `out` side fills the tiles.
/// Measured on the 2-core dev machine (`[m, 1024] × [1024, 4096]`): m 32 went from 113 to 147
/// GFLOP/s (AVX2) and from 95 to 190 (AVX-512). At k 128 the transpose's copy costs more than it
/// saves. CPU only: cuBLAS tiles small products well, and the transpose would cost a copy.
/// BENCHMARKS.md, session 20.
fn few_rows(m: usize, k: usize) -> bool {
    let most = if cfg!(feature = "avx512") { 96 } else { 48 };
    m <= most && k >= 512
}

impl Module for Linear {
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let dims = x.dims();
        let folded = dims.len() > 2;
        let x2 = if folded {
            let (lead, last) = dims.split_at(dims.len() - 1);
            x.reshape((lead.iter().product::<usize>(), last[0]))?
        } else {
            x.clone()
        };
        let mut y = if let Some(packed) = &self.packed {
            if x2.track_op() {
                candle_core::bail!(
                    "a bf16 (AMX) linear layer is a frozen inference copy; it cannot record \
                     gradients (train with matmul = \"f32\")"
                )
            }
            x2.to_dtype(DType::F32)?
                .contiguous()?
                .apply_op1_no_bwd(&amx::AmxLinear(packed.clone()))?
                .to_dtype(self.weight.dtype())?
        } else if x2.device().is_cpu() && few_rows(x2.dim(0)?, x2.dim(1)?) {
            // `(W xᵀ)ᵀ`: the same dot products, summed in the same order (bit-equal, tested), with
            // the long side on the GEMM's row axis, which its microkernel tiles by 24 (AVX2) or
            // 64 (AVX-512) rows.
            self.weight.matmul(&x2.t()?)?.t()?
        } else {
            x2.matmul(&self.weight.t()?)?
        };
        if let Some(b) = &self.bias {
            y = y.broadcast_add(b)?;
        }
        if let Some(a) = &self.adapter {
            y = (y + a.delta(&x2, self.weight.dtype())?)?;
        }
        let mut y = y.contiguous()?;
        if folded {
            let mut out = dims[..dims.len() - 1].to_vec();
            out.push(self.weight.dim(0)?);
            y = y.reshape(out)?;
        }
        Ok(y)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{DType, Device};
    use candle_nn::VarMap;

    #[test]
    fn matches_the_formula_on_2d_and_3d_inputs() -> Result<()> {
        let dev = Device::Cpu;
        // W = [[1, 2], [3, 4], [5, 6]] (out 3, in 2), b = [0.5, -1, 2].
        let w = Tensor::new(&[[1f32, 2.], [3., 4.], [5., 6.]], &dev)?;
        let b = Tensor::new(&[0.5f32, -1., 2.], &dev)?;
        let layer = Linear::new(w, Some(b));
        let x = Tensor::new(&[[1f32, -1.], [2., 0.5]], &dev)?;
        // Row 0: [1−2, 3−4, 5−6] + b = [−0.5, −2, 1]; row 1: [3, 8, 13] + b = [3.5, 7, 15].
        let y = layer.forward(&x)?.to_vec2::<f32>()?;
        assert_eq!(y, vec![vec![-0.5, -2.0, 1.0], vec![3.5, 7.0, 15.0]]);
        let y3 = layer.forward(&x.reshape((1, 2, 2))?)?;
        assert_eq!(y3.dims(), &[1, 2, 3]);
        assert_eq!(y3.get(0)?.to_vec2::<f32>()?, y);
        let no_bias = Linear::new(layer.weight().clone(), None);
        assert_eq!(no_bias.forward(&x)?.to_vec2::<f32>()?[0], vec![-1.0, -1.0, -1.0]);
        Ok(())
    }

    #[test]
    fn few_rows_against_a_long_inner_side_give_the_same_bits_either_way() -> Result<()> {
        // 32 rows × k 1024 takes the transposed GEMM; the plain product must equal it bit for
        // bit (and so must the gradient's path through it give finite values).
        let dev = Device::Cpu;
        let w = Tensor::randn(0f32, 1.0, (300, 1024), &dev)?;
        let b = Tensor::randn(0f32, 1.0, 300, &dev)?;
        let layer = Linear::new(w.clone(), Some(b.clone()));
        for rows in [1, 7, 32, 48, 200] {
            let x = Tensor::randn(0f32, 1.0, (2, rows, 1024), &dev)?;
            let y = layer.forward(&x)?;
            assert_eq!(y.dims(), &[2, rows, 300]);
            assert!(y.is_contiguous());
            let plain = x.reshape((2 * rows, 1024))?.matmul(&w.t()?)?.broadcast_add(&b)?;
            let diff = (y.reshape((2 * rows, 300))? - plain)?.abs()?.max_all()?;
            assert_eq!(diff.to_scalar::<f32>()?, 0.0, "rows {rows}");
        }
        assert!(few_rows(32, 1024) && !few_rows(32, 128) && !few_rows(200, 1024));
        Ok(())
    }

    #[test]
    fn a_bf16_layer_computes_the_rounded_product_and_refuses_gradients() -> Result<()> {
        let dev = Device::Cpu;
        let w = Tensor::randn(0f32, 1.0, (96, 200), &dev)?;
        let b = Tensor::randn(0f32, 1.0, 96, &dev)?;
        let layer = Linear::new(w.clone(), Some(b.clone()));
        if !amx::available() {
            assert!(layer.with_bf16_matmul().is_err(), "no AMX here: the layer must say so");
            return Ok(());
        }
        let fast = layer.with_bf16_matmul()?;
        assert!(fast.is_bf16() && !layer.is_bf16());
        let x = Tensor::randn(0f32, 1.0, (2, 40, 200), &dev)?;
        let y = fast.forward(&x)?;
        assert_eq!(y.dims(), &[2, 40, 96]);
        // The same product from the rounded factors in f32 on candle's GEMM, plus the bias.
        let round =
            |t: &Tensor| -> Result<Tensor> { Ok(t.to_dtype(DType::BF16)?.to_dtype(DType::F32)?) };
        let want = round(&x.reshape((80, 200))?)?
            .matmul(&round(&w)?.t()?)?
            .broadcast_add(&b)?
            .reshape((2, 40, 96))?;
        let diff = (&y - &want)?.abs()?.max_all()?.to_scalar::<f32>()?;
        assert!(diff < 1e-3, "bf16 layer off the rounded product by {diff}");
        // And it is not the f32 product (the rounding is real).
        let exact = layer.forward(&x)?;
        assert!((&y - &exact)?.abs()?.max_all()?.to_scalar::<f32>()? > 1e-3);
        let var = candle_core::Var::from_tensor(&x)?;
        assert!(fast.forward(var.as_tensor()).is_err(), "a tracked input must be refused");
        Ok(())
    }

    #[test]
    fn load_names_and_initialises_as_torch() -> Result<()> {
        let map = VarMap::new();
        let vb = VarBuilder::from_varmap(&map, DType::F32, &Device::Cpu);
        let layer = Linear::load(16, 4, true, torch_default_init(16), vb.pp("proj"))?;
        let names: Vec<String> = map.data().lock().expect("varmap").keys().cloned().collect();
        assert!(names.contains(&"proj.weight".to_string()) && names.contains(&"proj.bias".into()));
        let w = layer.weight().flatten_all()?.to_vec1::<f32>()?;
        assert!(w.iter().all(|v| v.abs() <= 0.25) && w.iter().any(|v| *v != 0.0));
        assert!(layer.bias().expect("bias").to_vec1::<f32>()?.iter().all(|v| *v == 0.0));
        let bare = Linear::load(16, 4, false, Init::Const(0.0), vb.pp("bare"))?;
        assert!(bare.bias().is_none());
        Ok(())
    }
}
