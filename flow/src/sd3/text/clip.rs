//! The CLIP text encoder of SD3's `text_encoder` / `text_encoder_2` (transformers'
//! `CLIPTextModelWithProjection`, Radford et al., arXiv 2103.00020), frozen inference only:
//! what SD3 reads of it is the penultimate layer's states and the projected pooled state.

use candle_core::{DType, Device, IndexOp, Module, Tensor};
use candle_nn::{
    embedding, layer_norm, linear, linear_no_bias, Embedding, LayerNorm, Linear, VarBuilder,
};
use serde::Deserialize;

use crate::error::{FlowModelError, Result};

/// The fields of a transformers `CLIPTextConfig` the encoder needs.
#[derive(Debug, Clone, Deserialize)]
pub struct ClipTextConfig {
    /// Vocabulary size.
    pub vocab_size: usize,
    /// Width.
    pub hidden_size: usize,
    /// MLP width.
    pub intermediate_size: usize,
    /// Layers.
    pub num_hidden_layers: usize,
    /// Attention heads.
    pub num_attention_heads: usize,
    /// Positions (77).
    pub max_position_embeddings: usize,
    /// `"quick_gelu"` (CLIP-L) or `"gelu"` (OpenCLIP bigG).
    pub hidden_act: String,
    /// Width of `text_projection`.
    pub projection_dim: usize,
    /// LayerNorm epsilon; default 1e-5.
    #[serde(default = "default_eps")]
    pub layer_norm_eps: f64,
    /// The end-of-text id whose position gives the pooled state.
    pub eos_token_id: u32,
}

fn default_eps() -> f64 {
    1e-5
}

#[derive(Debug)]
struct Layer {
    ln1: LayerNorm,
    q: Linear,
    k: Linear,
    v: Linear,
    out: Linear,
    ln2: LayerNorm,
    fc1: Linear,
    fc2: Linear,
}

/// `CLIPTextModelWithProjection`: `h₀ = E[ids] + P[0..T]`; per layer, with a causal mask,
/// `h += Attn(LN₁ h)`, `h += fc2(act(fc1(LN₂ h)))`; `act` is QuickGELU `x σ(1.702x)` or GELU.
/// The pooled state is `LN_f(h_L)` at the first end-of-text token (the largest id when
/// `eos_token_id` is 2, transformers' legacy rule), projected by `text_projection`.
#[derive(Debug)]
pub struct ClipTextEncoder {
    cfg: ClipTextConfig,
    tokens: Embedding,
    positions: Tensor,
    layers: Vec<Layer>,
    final_ln: LayerNorm,
    projection: Linear,
}

impl ClipTextEncoder {
    /// Loads transformers' names (`text_model.*`, `text_projection`) from `vb`.
    pub fn new(cfg: ClipTextConfig, vb: VarBuilder) -> Result<Self> {
        if !matches!(cfg.hidden_act.as_str(), "quick_gelu" | "gelu") {
            return Err(FlowModelError::Config {
                field: "hidden_act",
                value: format!("{:?}", cfg.hidden_act),
                expected: "\"quick_gelu\" or \"gelu\" (CLIP-L, CLIP-G)".into(),
            });
        }
        let d = cfg.hidden_size;
        let tm = vb.pp("text_model");
        let emb = tm.pp("embeddings");
        let eps = cfg.layer_norm_eps;
        let layers = (0..cfg.num_hidden_layers)
            .map(|i| {
                let l = tm.pp(format!("encoder.layers.{i}"));
                let a = l.pp("self_attn");
                Ok(Layer {
                    ln1: layer_norm(d, eps, l.pp("layer_norm1"))?,
                    q: linear(d, d, a.pp("q_proj"))?,
                    k: linear(d, d, a.pp("k_proj"))?,
                    v: linear(d, d, a.pp("v_proj"))?,
                    out: linear(d, d, a.pp("out_proj"))?,
                    ln2: layer_norm(d, eps, l.pp("layer_norm2"))?,
                    fc1: linear(d, cfg.intermediate_size, l.pp("mlp.fc1"))?,
                    fc2: linear(cfg.intermediate_size, d, l.pp("mlp.fc2"))?,
                })
            })
            .collect::<Result<_>>()?;
        Ok(Self {
            tokens: embedding(cfg.vocab_size, d, emb.pp("token_embedding"))?,
            positions: emb
                .pp("position_embedding")
                .get((cfg.max_position_embeddings, d), "weight")?,
            layers,
            final_ln: layer_norm(d, eps, tm.pp("final_layer_norm"))?,
            projection: linear_no_bias(d, cfg.projection_dim, vb.pp("text_projection"))?,
            cfg,
        })
    }

    fn act(&self, x: &Tensor) -> Result<Tensor> {
        Ok(if self.cfg.hidden_act == "quick_gelu" {
            (x * candle_nn::ops::sigmoid(&(x * 1.702)?)?)?
        } else {
            x.gelu_erf()?
        })
    }

    fn layer(&self, l: &Layer, h: &Tensor, mask: &Tensor) -> Result<Tensor> {
        let (b, t, d) = h.dims3()?;
        let heads = self.cfg.num_attention_heads;
        let hd = d / heads;
        let x = l.ln1.forward(h)?;
        let split = |p: &Linear| -> Result<Tensor> {
            Ok(p.forward(&x)?.reshape((b, t, heads, hd))?.transpose(1, 2)?.contiguous()?)
        };
        let (q, k, v) = (split(&l.q)?, split(&l.k)?, split(&l.v)?);
        let scores = ((q.matmul(&k.t()?)? / (hd as f64).sqrt())?).broadcast_add(mask)?;
        let att = candle_nn::ops::softmax_last_dim(&scores)?.matmul(&v)?;
        let att = att.transpose(1, 2)?.reshape((b, t, d))?;
        let h = (h + l.out.forward(&att)?)?;
        let m = l.fc2.forward(&self.act(&l.fc1.forward(&l.ln2.forward(&h)?)?)?)?;
        Ok((h + m)?)
    }

    /// `ids[B, T]` (u32) → (the states after layer `L − 1`, `[B, T, D]` — transformers'
    /// `hidden_states[-2]`; the projected pooled state `[B, projection_dim]`).
    pub fn encode(&self, ids: &Tensor) -> Result<(Tensor, Tensor)> {
        let (b, t) = ids.dims2()?;
        let dev = ids.device();
        let mut h = self.tokens.forward(ids)?.broadcast_add(&self.positions.narrow(0, 0, t)?)?;
        let mask = causal_mask(t, h.dtype(), dev)?;
        // With one layer, `hidden_states[-2]` is the embeddings' output.
        let mut penultimate = h.clone();
        let n = self.layers.len();
        for (i, l) in self.layers.iter().enumerate() {
            h = self.layer(l, &h, &mask)?;
            if i + 2 == n {
                penultimate = h.clone();
            }
        }
        let last = self.final_ln.forward(&h)?;
        let host: Vec<Vec<u32>> = ids.to_vec2()?;
        let rows = host
            .iter()
            .enumerate()
            .map(|(r, row)| {
                let pos = if self.cfg.eos_token_id == 2 {
                    row.iter()
                        .enumerate()
                        .max_by_key(|(i, &v)| (v, std::cmp::Reverse(*i)))
                        .map_or(0, |(i, _)| i)
                } else {
                    row.iter().position(|&v| v == self.cfg.eos_token_id).unwrap_or(0)
                };
                Ok(last.i((r, pos))?.unsqueeze(0)?)
            })
            .collect::<Result<Vec<_>>>()?;
        let pooled = self.projection.forward(&Tensor::cat(&rows, 0)?)?;
        debug_assert_eq!(pooled.dim(0)?, b);
        Ok((penultimate, pooled))
    }
}

/// `[1, 1, T, T]`: 0 on and below the diagonal, −∞ above.
fn causal_mask(t: usize, dtype: DType, dev: &Device) -> Result<Tensor> {
    let v: Vec<f32> = (0..t)
        .flat_map(|i| (0..t).map(move |j| if j > i { f32::NEG_INFINITY } else { 0.0 }))
        .collect();
    Ok(Tensor::from_vec(v, (1, 1, t, t), dev)?.to_dtype(dtype)?)
}
