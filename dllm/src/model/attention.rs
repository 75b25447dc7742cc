//! Bidirectional multi-head attention with grouped-query heads, RoPE and an optional padding
//! mask, shared by LLaDA (arXiv 2502.09992) and Dream (arXiv 2508.15487).
//!
//! Masked diffusion LMs attend over the whole sequence: there is no causal mask. With a padding
//! mask, query `i` may attend key `j` iff both are real tokens (Dream's
//! `generation_utils.py` mask). A pad query then has no allowed key at all, and, as torch's
//! `scaled_dot_product_attention` does for an all-false boolean row, its attention output is
//! zero (not NaN, not uniform).

use candle_core::{DType, Module, Tensor};
use candle_nn::VarBuilder;
use drift_core::ops;

use drift_core::nn::Linear;

use drift_samplers::dllm::{CacheOp, KvCache};

use super::layers::{block_linear, Rotary};
use super::lora::LoraConfig;
use crate::error::{DllmError, Result};

/// Additive score bias for masked keys: finite, so an all-masked (pad) row stays finite before
/// its output is zeroed, and far below any real score so masked keys get exactly zero weight.
const MASKED_SCORE: f64 = -1e30;

/// The shape of an attention layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttentionSpec {
    /// Model width.
    pub hidden: usize,
    /// Query heads.
    pub n_heads: usize,
    /// Key/value heads; query head `h` uses kv head `h / (n_heads / n_kv_heads)`.
    pub n_kv_heads: usize,
    /// Biases on q, k and v (Dream: yes, LLaDA: no).
    pub qkv_bias: bool,
    /// Bias on the output projection.
    pub out_bias: bool,
}

impl AttentionSpec {
    /// Per-head width `hidden / n_heads`.
    pub fn head_dim(&self) -> usize {
        self.hidden / self.n_heads
    }
}

/// The padding mask of a batch, prepared once per forward and shared by every layer.
#[derive(Debug, Clone)]
pub struct PaddingMask {
    /// `[B, 1, 1, T]` f32: 0 for real keys, [`MASKED_SCORE`] for pads.
    key_bias: Tensor,
    /// `[B, 1, T, 1]`: 1 for real queries, 0 for pads (zero attention output), in the model
    /// dtype.
    query_keep: Tensor,
}

impl PaddingMask {
    /// Builds the mask from `attention_mask: [B, T]` (any dtype; non-zero = real token).
    pub fn new(attention_mask: &Tensor, dtype: DType) -> Result<Self> {
        let (b, t) = attention_mask.dims2().map_err(|_| DllmError::Input {
            name: "attention_mask",
            got: format!("shape {:?}", attention_mask.dims()),
            expected: "[B, T]".into(),
        })?;
        let real = attention_mask.ne(0u32)?.to_dtype(DType::F32)?;
        // (real − 1)·|MASKED_SCORE|: exactly 0 for real keys, MASKED_SCORE for pads.
        let key_bias = ((&real - 1.0)? * -MASKED_SCORE)?.reshape((b, 1, 1, t))?;
        let query_keep = real.to_dtype(dtype)?.reshape((b, 1, t, 1))?;
        Ok(Self { key_bias, query_keep })
    }

    /// Errors unless the mask covers `t` positions (a cached forward's whole sequence).
    pub fn check_len(&self, t: usize) -> Result<()> {
        let got = self.key_bias.dim(3)?;
        if got != t {
            return Err(DllmError::Input {
                name: "attention_mask",
                got: format!("{got} columns"),
                expected: format!("the whole cached sequence, {t} columns"),
            });
        }
        Ok(())
    }

    /// The same keys with only the queries at positions `start..start + n`: what a cached
    /// forward of those positions attends under (its keys are always the whole sequence).
    pub fn queries(&self, start: usize, n: usize) -> Result<Self> {
        Ok(Self {
            key_bias: self.key_bias.clone(),
            query_keep: self.query_keep.narrow(2, start, n)?,
        })
    }
}

/// Self-attention `softmax(q kᵀ / √D + mask) v` followed by the output projection.
#[derive(Debug, Clone)]
pub struct Attention {
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
    spec: AttentionSpec,
    /// `[q; k; v]` as one bf16 layer ([`Attention::use_bf16_matmuls`]): one product per
    /// forward instead of three.
    qkv: Option<Linear>,
}

impl Attention {
    /// Loads the projections from `[q, k, v, o]`, the caller's `vb.pp("…")` of each (LLaDA:
    /// `q_proj`, `k_proj`, `v_proj`, `attn_out`; Dream: `self_attn.{q,k,v,o}_proj`).
    /// Each gets a LoRA adapter when `lora` targets it.
    pub fn new(
        spec: AttentionSpec,
        vbs: [VarBuilder; 4],
        lora: Option<&LoraConfig>,
    ) -> Result<Self> {
        let kv = spec.n_kv_heads * spec.head_dim();
        let [q, k, v, o] = vbs;
        let h = spec.hidden;
        Ok(Self {
            q: block_linear(h, h, spec.qkv_bias, q, lora)?,
            k: block_linear(h, kv, spec.qkv_bias, k, lora)?,
            v: block_linear(h, kv, spec.qkv_bias, v, lora)?,
            o: block_linear(h, h, spec.out_bias, o, lora)?,
            spec,
            qkv: None,
        })
    }

    /// Runs the projections in bf16 on AMX tiles ([`Linear::with_bf16_matmul`]), `q`, `k` and
    /// `v` stacked into one layer `[W_q; W_k; W_v]` (biases likewise): the same three maps,
    /// one product. For frozen models without adapters.
    pub(crate) fn use_bf16_matmuls(&mut self) -> Result<()> {
        let (q, k, v) = (&self.q, &self.k, &self.v);
        let weight = Tensor::cat(&[q.weight(), k.weight(), v.weight()], 0)?;
        let bias = match (q.bias(), k.bias(), v.bias()) {
            (Some(a), Some(b), Some(c)) => Some(Tensor::cat(&[a, b, c], 0)?),
            _ => None,
        };
        self.qkv = Some(Linear::new(weight, bias).with_bf16_matmul()?);
        self.o = self.o.with_bf16_matmul()?;
        Ok(())
    }

    /// `(q, k, v)` of `x: [B, T, hidden]` as `[B, heads, T, head_dim]`, before rotation.
    fn project(&self, x: &Tensor) -> Result<(Tensor, Tensor, Tensor)> {
        let s = self.spec;
        let Some(qkv) = &self.qkv else {
            return Ok((
                self.heads(&self.q.forward(x)?, s.n_heads)?,
                self.heads(&self.k.forward(x)?, s.n_kv_heads)?,
                self.heads(&self.v.forward(x)?, s.n_kv_heads)?,
            ));
        };
        let y = qkv.forward(x)?;
        let kv = s.n_kv_heads * s.head_dim();
        Ok((
            self.heads(&y.narrow(2, 0, s.hidden)?.contiguous()?, s.n_heads)?,
            self.heads(&y.narrow(2, s.hidden, kv)?.contiguous()?, s.n_kv_heads)?,
            self.heads(&y.narrow(2, s.hidden + kv, kv)?.contiguous()?, s.n_kv_heads)?,
        ))
    }

    fn heads(&self, x: &Tensor, n: usize) -> Result<Tensor> {
        let (b, t, _) = x.dims3()?;
        Ok(x.reshape((b, t, n, self.spec.head_dim()))?.transpose(1, 2)?)
    }

    /// Attention over `x: [B, T, hidden]` with rotary tables `rope = (cos, sin)` for positions
    /// `0..T` and an optional padding mask.
    pub fn forward(
        &self,
        x: &Tensor,
        rope: &(Tensor, Tensor),
        mask: Option<&PaddingMask>,
    ) -> Result<Tensor> {
        let (b, t, _) = x.dims3()?;
        let (q, k, v) = self.project(x)?;
        let q = Rotary::apply(&q, &rope.0, &rope.1)?;
        let k = Rotary::apply(&k, &rope.0, &rope.1)?;
        self.attend(&q, &k, &v, mask, (b, t))
    }

    /// `o(softmax(q kᵀ / √D + mask) v)` for queries `q: [B, H, T, D]` over keys and values
    /// `[B, H_kv, S, D]` (repeated to `H` heads), merged back to `[B, T, hidden]`.
    fn attend(
        &self,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        mask: Option<&PaddingMask>,
        (b, t): (usize, usize),
    ) -> Result<Tensor> {
        let s = self.spec;
        let groups = s.n_heads / s.n_kv_heads;
        let (k, v) = (repeat_kv(k, groups)?, repeat_kv(v, groups)?);
        let scale = 1.0 / (s.head_dim() as f64).sqrt();
        if ops::fused_attention_applies(&[q, &k, &v]) {
            // The same operations as below, one head per thread (bit-equal, tested in core).
            let out = ops::attention(
                q,
                &k,
                &v,
                scale,
                mask.map(|m| &m.key_bias),
                mask.map(|m| &m.query_keep),
            )?;
            return Ok(self.o.forward(&out)?);
        }
        let scores = (q.contiguous()?.matmul(&k.t()?)? * scale)?;
        let mut scores = scores.to_dtype(DType::F32)?;
        if let Some(m) = mask {
            scores = scores.broadcast_add(&m.key_bias)?;
        }
        let probs = ops::softmax_last_dim(&scores)?.to_dtype(v.dtype())?;
        let mut out = probs.matmul(&v.contiguous()?)?;
        if let Some(m) = mask {
            out = out.broadcast_mul(&m.query_keep)?;
        }
        let out = out.transpose(1, 2)?.reshape((b, t, s.hidden))?;
        Ok(self.o.forward(&out)?)
    }
}

impl Attention {
    /// Attention of the input positions under a Fast-dLLM cache operation:
    /// `x: [B, T_in, hidden]` holds positions `start..start + T_in` of a sequence whose rotary
    /// tables `rope` cover every position. `Record` stores this layer's keys and values in
    /// `layer`; `Prefix` attends to the stored `0..start` followed by the input's own; `Dual`
    /// attends to the stored sequence with the input's positions replaced by its own. Every op
    /// attends over the whole sequence's keys, so `mask`, when given, is the whole sequence's
    /// padding mask (left-padded prompts of several lengths), its queries narrowed here.
    pub fn forward_cached(
        &self,
        x: &Tensor,
        rope: &(Tensor, Tensor),
        op: CacheOp,
        layer: &mut Option<(Tensor, Tensor)>,
        mask: Option<&PaddingMask>,
    ) -> Result<Tensor> {
        let (b, t, _) = x.dims3()?;
        let start = match op {
            CacheOp::Record => 0,
            CacheOp::Prefix { start } | CacheOp::Dual { start } => start,
        };
        let (cos, sin) = (rope.0.narrow(0, start, t)?, rope.1.narrow(0, start, t)?);
        let (q, k, v) = self.project(x)?;
        let (q, k) = (Rotary::apply(&q, &cos, &sin)?, Rotary::apply(&k, &cos, &sin)?);
        let missing = || DllmError::Input {
            name: "cache",
            got: "no recorded keys and values".into(),
            expected: "a Record forward before Prefix or Dual".into(),
        };
        let (k, v) = match op {
            CacheOp::Record => {
                *layer = Some((k.clone(), v.clone()));
                (k, v)
            }
            CacheOp::Prefix { start } => {
                let (pk, pv) = layer.as_ref().ok_or_else(missing)?;
                (
                    Tensor::cat(&[&pk.narrow(2, 0, start)?, &k], 2)?,
                    Tensor::cat(&[&pv.narrow(2, 0, start)?, &v], 2)?,
                )
            }
            CacheOp::Dual { start } => {
                let (pk, pv) = layer.as_ref().ok_or_else(missing)?;
                let total = pk.dim(2)?;
                let splice = |old: &Tensor, new: &Tensor| -> Result<Tensor> {
                    let after = old.narrow(2, start + t, total - start - t)?;
                    Ok(Tensor::cat(&[&old.narrow(2, 0, start)?, new, &after], 2)?)
                };
                (splice(pk, &k)?, splice(pv, &v)?)
            }
        };
        let mask = mask.map(|m| m.queries(start, t)).transpose()?;
        self.attend(&q, &k, &v, mask.as_ref(), (b, t))
    }
}

/// The layer loop of a Fast-dLLM cached forward, shared by LLaDA and Dream: `Record` clears
/// `cache` and stores each layer's keys and values; `Prefix { start }` and `Dual { start }` run
/// the input's positions against the record. `x` is the embedded input `[B, T_in, hidden]`;
/// `mask` the whole sequence's `[B, T]` padding mask; `layer_fn(i, x, rope, cache_slot, mask)`
/// runs layer `i` under `op`. Returns the last layer's output.
pub(crate) fn cached_layers(
    x: Tensor,
    n_layers: usize,
    rotary: &Rotary,
    op: CacheOp,
    cache: &mut KvCache,
    mask: Option<&Tensor>,
    mut layer_fn: impl FnMut(
        usize,
        &Tensor,
        &(Tensor, Tensor),
        &mut Option<(Tensor, Tensor)>,
        Option<&PaddingMask>,
    ) -> Result<Tensor>,
) -> Result<Tensor> {
    let t = x.dim(1)?;
    let total = match op {
        CacheOp::Record => {
            cache.layers.clear();
            t
        }
        CacheOp::Prefix { start } => start + t,
        CacheOp::Dual { .. } => cache.len(),
    };
    let rope = rotary.tables(total)?;
    // The embedded input carries the model's dtype.
    let mask = mask.map(|m| PaddingMask::new(m, x.dtype())).transpose()?;
    if let Some(m) = mask.as_ref() {
        m.check_len(total)?;
    }
    let mut x = x;
    for i in 0..n_layers {
        let mut layer = cache.layers.get(i).cloned();
        x = layer_fn(i, &x, &rope, &mut layer, mask.as_ref())?;
        if op == CacheOp::Record {
            cache.layers.push(layer.expect("a Record forward stores its layer"));
        }
    }
    Ok(x)
}

/// Repeats each of `n_kv` key/value heads `groups` times along the head axis, so query head
/// `h` meets kv head `h / groups` (HF `repeat_kv`): `[B, n_kv, T, D] → [B, n_kv·groups, T, D]`.
pub fn repeat_kv(x: &Tensor, groups: usize) -> Result<Tensor> {
    if groups == 1 {
        return Ok(x.clone());
    }
    let (b, n_kv, t, d) = x.dims4()?;
    Ok(x.unsqueeze(2)?.expand((b, n_kv, groups, t, d))?.reshape((b, n_kv * groups, t, d))?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, IndexOp};
    use drift_core::rng::RngKey;
    use std::collections::HashMap;

    fn randn(seed: u64, shape: &[usize]) -> Tensor {
        RngKey::new(seed).normal(shape, DType::F32, &Device::Cpu).unwrap()
    }

    fn layer(spec: AttentionSpec) -> Attention {
        let kv = spec.n_kv_heads * spec.head_dim();
        let mut ts = HashMap::new();
        for (i, (name, out)) in
            [("q", spec.hidden), ("k", kv), ("v", kv), ("o", spec.hidden)].into_iter().enumerate()
        {
            ts.insert(format!("{name}.weight"), randn(i as u64, &[out, spec.hidden]));
            ts.insert(format!("{name}.bias"), randn(10 + i as u64, &[out]));
        }
        let vb = VarBuilder::from_tensors(ts, DType::F32, &Device::Cpu);
        Attention::new(spec, [vb.pp("q"), vb.pp("k"), vb.pp("v"), vb.pp("o")], None).unwrap()
    }

    #[test]
    fn repeat_kv_gives_query_head_h_the_kv_head_h_over_groups() {
        let x = Tensor::arange(0f32, 2.0, &Device::Cpu).unwrap().reshape((1, 2, 1, 1)).unwrap();
        let r = repeat_kv(&x, 3).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
        assert_eq!(r, vec![0., 0., 0., 1., 1., 1.]);
    }

    #[test]
    fn pads_are_invisible_to_real_tokens_and_pad_queries_output_zero() {
        let spec =
            AttentionSpec { hidden: 8, n_heads: 4, n_kv_heads: 2, qkv_bias: true, out_bias: false };
        let attn = layer(spec);
        let rotary = Rotary::new(spec.head_dim(), 10_000.0, &Device::Cpu).unwrap();
        let x = randn(20, &[2, 5, 8]);
        let mask = Tensor::new(&[[1u32, 1, 1, 1, 1], [0, 0, 1, 1, 1]], &Device::Cpu).unwrap();
        let pm = PaddingMask::new(&mask, DType::F32).unwrap();
        let out = attn.forward(&x, &rotary.tables(5).unwrap(), Some(&pm)).unwrap();
        let pads = out.i((1, 0..2)).unwrap().abs().unwrap().sum_all().unwrap();
        assert_eq!(pads.to_scalar::<f32>().unwrap(), 0.0, "pad queries must output zero");
        // The real suffix alone, unpadded at positions 0..3: RoPE is relative, so equal.
        let alone =
            attn.forward(&x.i((1..2, 2..5)).unwrap(), &rotary.tables(3).unwrap(), None).unwrap();
        let diff = (out.i((1..2, 2..5)).unwrap() - alone).unwrap().abs().unwrap();
        let max: f32 = diff.flatten_all().unwrap().max(0).unwrap().to_scalar().unwrap();
        assert!(max < 1e-5, "padding changed the real tokens' attention by {max}");
        // A row that is all padding stays finite (zero).
        let none = Tensor::zeros((1, 5), DType::U32, &Device::Cpu).unwrap();
        let pm = PaddingMask::new(&none, DType::F32).unwrap();
        let out = attn.forward(&x.i(0..1).unwrap(), &rotary.tables(5).unwrap(), Some(&pm)).unwrap();
        assert_eq!(out.abs().unwrap().sum_all().unwrap().to_scalar::<f32>().unwrap(), 0.0);
    }
}
