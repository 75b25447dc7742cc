//! Dream (Ye et al., "Dream 7B: Diffusion Large Language Models", arXiv 2508.15487) and
//! DiffuCoder (Gong et al., arXiv 2506.20639): the Qwen2 layout (`model.embed_tokens`,
//! `model.layers.{i}.{self_attn, mlp, input_layernorm, post_attention_layernorm}`,
//! `model.norm`, `lm_head`) with bidirectional attention, grouped-query heads and q/k/v biases.
//!
//! ```text
//! x = embed_tokens[ids]
//! per layer: x += o_proj(attn(rope(q h + b_q), rope(k h + b_k), v h + b_v)),  h = rms(x; input_layernorm)
//!            x += down(silu(gate h) ⊙ up h),                                  h = rms(x; post_attention_layernorm)
//! raw = lm_head(rms(x; norm))
//! ```
//! The model is AR-initialised: `raw[:, i]` predicts the token at `i + 1`. This module returns
//! the raw logits; the shift lives in [`DiffusionLm`](crate::model::DiffusionLm).

use candle_core::{DType, Tensor};
use candle_nn::{Embedding, Module, VarBuilder};

use super::attention::{Attention, AttentionSpec, PaddingMask};
use super::config::DreamConfig;
use super::layers::{linear, Dense, RmsNorm, Rotary, SwiGlu, WEIGHT_INIT};
use crate::error::Result;

/// One decoder layer, `model.layers.{i}`.
#[derive(Debug, Clone)]
pub struct DreamLayer {
    input_layernorm: RmsNorm,
    self_attn: Attention,
    post_attention_layernorm: RmsNorm,
    mlp: SwiGlu,
}

impl DreamLayer {
    /// Loads layer weights from `vb` (already at `model.layers.{i}`).
    pub fn new(cfg: &DreamConfig, vb: &VarBuilder) -> Result<Self> {
        let spec = AttentionSpec {
            hidden: cfg.hidden_size,
            n_heads: cfg.num_attention_heads,
            n_kv_heads: cfg.kv_heads(),
            qkv_bias: true,
            out_bias: false,
        };
        let attn = vb.pp("self_attn");
        let eps = cfg.rms_norm_eps;
        let (d, m) = (cfg.hidden_size, cfg.intermediate_size);
        Ok(Self {
            input_layernorm: RmsNorm::new(d, eps, vb, "input_layernorm")?,
            self_attn: Attention::new(spec, &attn, ["q_proj", "k_proj", "v_proj", "o_proj"])?,
            post_attention_layernorm: RmsNorm::new(d, eps, vb, "post_attention_layernorm")?,
            mlp: SwiGlu::new(d, m, false, &vb.pp("mlp"), ["gate_proj", "up_proj", "down_proj"])?,
        })
    }

    /// Pre-norm residual layer on `x: [B, T, hidden]`.
    pub fn forward(
        &self,
        x: &Tensor,
        rope: &(Tensor, Tensor),
        mask: Option<&PaddingMask>,
    ) -> Result<Tensor> {
        let h = self.input_layernorm.forward(x)?;
        let x = (x + self.self_attn.forward(&h, rope, mask)?)?;
        Ok((&x + self.mlp.forward(&self.post_attention_layernorm.forward(&x)?)?)?)
    }
}

/// The Dream network (`DreamModel`), returning raw (unshifted) logits.
#[derive(Debug, Clone)]
pub struct DreamModel {
    embed_tokens: Embedding,
    layers: Vec<DreamLayer>,
    norm: RmsNorm,
    lm_head: Dense,
    rotary: Rotary,
    dtype: DType,
}

impl DreamModel {
    /// Loads the model from `vb` at the checkpoint root.
    pub fn new(cfg: &DreamConfig, vb: &VarBuilder) -> Result<Self> {
        let m = vb.pp("model");
        let (v, d) = (cfg.vocab_size, cfg.hidden_size);
        let embed = m.pp("embed_tokens").get_with_hints((v, d), "weight", WEIGHT_INIT)?;
        let layers = (0..cfg.num_hidden_layers)
            .map(|i| DreamLayer::new(cfg, &m.pp("layers").pp(i)))
            .collect::<Result<Vec<_>>>()?;
        let lm_head = if cfg.tie_word_embeddings {
            Dense::new(embed.clone(), None)
        } else {
            linear(d, v, false, vb, "lm_head")?
        };
        Ok(Self {
            embed_tokens: Embedding::new(embed, d),
            layers,
            norm: RmsNorm::new(d, cfg.rms_norm_eps, &m, "norm")?,
            lm_head,
            rotary: Rotary::new(d / cfg.num_attention_heads, cfg.rope_theta, vb.device())?,
            dtype: vb.dtype(),
        })
    }

    /// Raw logits `[B, T, vocab_size]` in f32 for `ids: [B, T]` at positions `0..T` (as
    /// Fast-dLLM's Dream, which overwrites `position_ids`; RoPE is relative, so left padding
    /// with a mask leaves real tokens' logits unchanged).
    pub fn forward(&self, ids: &Tensor, mask: Option<&Tensor>) -> Result<Tensor> {
        let (_, seq_len) = ids.dims2()?;
        let mask = mask.map(|m| PaddingMask::new(m, self.dtype)).transpose()?;
        let rope = self.rotary.tables(seq_len)?;
        let mut x = self.embed_tokens.forward(ids)?;
        for layer in &self.layers {
            x = layer.forward(&x, &rope, mask.as_ref())?;
        }
        let logits = self.lm_head.forward(&self.norm.forward(&x)?)?;
        Ok(logits.to_dtype(DType::F32)?)
    }
}
