//! The small building blocks both architectures share: RMSNorm, the SwiGLU MLP over drift's one
//! linear layer (`drift_core::nn::Linear`), and the rotary tables. Every normalisation and rotation goes through `drift_core::ops`, which
//! keeps the autograd graph when a weight or input is tracked (docs/architecture.md §6).

use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{Init, VarBuilder};
use drift_core::nn::Linear;
use drift_core::ops;

use super::lora::{adapt, LoraConfig};
use crate::error::Result;

/// Standard deviation of the normal initialisation of fresh linear and embedding weights
/// (GPT-2 / OLMo style `N(0, 0.02²)`); norm gains start at 1 and biases at 0. Ignored when
/// weights come from a checkpoint.
pub const INIT_STD: f64 = 0.02;

/// The initialisation hint for fresh weight matrices.
pub(crate) const WEIGHT_INIT: Init = Init::Randn { mean: 0.0, stdev: INIT_STD };

/// A linear layer `y = x Wᵀ (+ b)` (drift's one [`Linear`]) with `W: [out, in]` drawn from
/// [`WEIGHT_INIT`] when fresh, under `vb` (the caller's `vb.pp("q_proj")`).
pub(crate) fn linear(in_dim: usize, out_dim: usize, bias: bool, vb: VarBuilder) -> Result<Linear> {
    Ok(Linear::load(in_dim, out_dim, bias, WEIGHT_INIT, vb)?)
}

/// A block projection: [`linear`], with a LoRA adapter when `lora` targets its path.
pub(crate) fn block_linear(
    in_dim: usize,
    out_dim: usize,
    bias: bool,
    vb: VarBuilder,
    lora: Option<&LoraConfig>,
) -> Result<Linear> {
    adapt(linear(in_dim, out_dim, bias, vb.clone())?, in_dim, out_dim, lora, &vb)
}

/// RMSNorm `w ⊙ x / √(mean(x²) + eps)` (Zhang & Sennrich 2019), computed in f32, its gain named
/// `weight` under the caller's `vb.pp("…")`.
#[derive(Debug, Clone)]
pub struct RmsNorm {
    weight: Tensor,
    eps: f32,
}

impl RmsNorm {
    /// Loads the gain `[size]` from `vb`.
    pub fn new(size: usize, eps: f64, vb: VarBuilder) -> Result<Self> {
        let weight = vb.get_with_hints(size, "weight", Init::Const(1.0))?;
        Ok(Self { weight, eps: eps as f32 })
    }

    /// Normalises the last dimension of `x`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(ops::rms_norm(x, &self.weight, self.eps)?)
    }
}

/// The SwiGLU MLP `down(silu(gate(x)) ⊙ up(x))` (Shazeer 2020), as in LLaMA, LLaDA and Qwen2.
#[derive(Debug, Clone)]
pub struct SwiGlu {
    gate: Linear,
    up: Linear,
    down: Linear,
    /// `[gate; up]` as one bf16 layer ([`SwiGlu::use_bf16_matmuls`]).
    gate_up: Option<Linear>,
}

impl SwiGlu {
    /// Loads the three projections from `[gate, up, down]`, the caller's `vb.pp("…")` of each
    /// (LLaDA: `ff_proj`, `up_proj`, `ff_out`; Dream: `mlp.gate_proj`, `mlp.up_proj`,
    /// `mlp.down_proj`), each with a LoRA adapter when `lora` targets it.
    pub fn new(
        d_model: usize,
        hidden: usize,
        bias: bool,
        vbs: [VarBuilder; 3],
        lora: Option<&LoraConfig>,
    ) -> Result<Self> {
        let [gate, up, down] = vbs;
        Ok(Self {
            gate: block_linear(d_model, hidden, bias, gate, lora)?,
            up: block_linear(d_model, hidden, bias, up, lora)?,
            down: block_linear(hidden, d_model, bias, down, lora)?,
            gate_up: None,
        })
    }

    /// Runs the projections in bf16 on AMX tiles ([`Linear::with_bf16_matmul`]), `gate` and
    /// `up` stacked into one layer `[W_gate; W_up]` (biases likewise): the same two maps, one
    /// product. For frozen models without adapters.
    pub(crate) fn use_bf16_matmuls(&mut self) -> Result<()> {
        let weight = Tensor::cat(&[self.gate.weight(), self.up.weight()], 0)?;
        let bias = match (self.gate.bias(), self.up.bias()) {
            (Some(a), Some(b)) => Some(Tensor::cat(&[a, b], 0)?),
            _ => None,
        };
        self.gate_up = Some(Linear::new(weight, bias).with_bf16_matmul()?);
        self.down = self.down.with_bf16_matmul()?;
        Ok(())
    }

    /// Applies the MLP to `x: [B, T, d_model]`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let hidden = match &self.gate_up {
            Some(gate_up) => {
                let y = gate_up.forward(x)?;
                let h = y.dim(2)? / 2;
                ops::swiglu(&y.narrow(2, 0, h)?, &y.narrow(2, h, h)?)?
            }
            None => ops::swiglu(&self.gate.forward(x)?, &self.up.forward(x)?)?,
        };
        Ok(self.down.forward(&hidden)?)
    }
}

/// Rotary position embedding tables in the half-split layout (RoFormer, Su et al. 2021;
/// GPT-NeoX / HF Llama): `inv_freq[j] = θ^(−2j/D)`, `angle[p, j] = p · inv_freq[j]`, computed in
/// f32 as LLaDA (`rope_full_precision`) and Qwen2 do.
#[derive(Debug, Clone)]
pub struct Rotary {
    inv_freq: Tensor,
}

impl Rotary {
    /// Tables for head dimension `head_dim` (even) and base `theta`.
    pub fn new(head_dim: usize, theta: f64, device: &Device) -> Result<Self> {
        let inv: Vec<f32> = (0..head_dim / 2)
            .map(|j| 1.0 / (theta as f32).powf((2 * j) as f32 / head_dim as f32))
            .collect();
        let n = inv.len();
        Ok(Self { inv_freq: Tensor::from_vec(inv, (1, n), device)? })
    }

    /// `(cos, sin)`, each `[T, D/2]` f32, for positions `0..T`.
    pub fn tables(&self, seq_len: usize) -> Result<(Tensor, Tensor)> {
        let pos = Tensor::arange(0u32, seq_len as u32, self.inv_freq.device())?
            .to_dtype(DType::F32)?
            .reshape((seq_len, 1))?;
        let angles = pos.matmul(&self.inv_freq)?;
        Ok((angles.cos()?, angles.sin()?))
    }

    /// Rotates `x: [B, H, T, D]` in f32 and returns it in `x`'s dtype.
    pub fn apply(x: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
        let dtype = x.dtype();
        let y = ops::rope(&x.to_dtype(DType::F32)?, cos, sin)?;
        Ok(y.to_dtype(dtype)?)
    }
}
