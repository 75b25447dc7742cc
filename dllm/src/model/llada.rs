//! LLaDA (Nie et al., "Large Language Diffusion Models", arXiv 2502.09992): a LLaMA-style
//! transformer with fully bidirectional attention, in the layout of the released checkpoints
//! (`model.transformer.{wte, blocks.{i}.*, ln_f, ff_out}`).
//!
//! ```text
//! x = wte[ids]
//! per block: x += attn_out(attn(rope(q_proj h), rope(k_proj h), v_proj h)),  h = rms(x; attn_norm)
//!            x += ff_out(silu(ff_proj h) ⊙ up_proj h),                       h = rms(x; ff_norm)
//! logits = ff_out_lm(rms(x; ln_f))        (the LM head is `model.transformer.ff_out`)
//! ```
//! LLaDA predicts the token *at* each position: no logit shift.

use candle_core::{DType, Tensor};
use candle_nn::{Embedding, Module, VarBuilder};

use super::attention::{Attention, AttentionSpec, PaddingMask};
use super::config::LladaConfig;
use super::layers::{linear, Dense, RmsNorm, Rotary, SwiGlu, WEIGHT_INIT};
use crate::error::Result;

/// One LLaDA block, `model.transformer.blocks.{i}`.
#[derive(Debug, Clone)]
pub struct LladaBlock {
    attn_norm: RmsNorm,
    attn: Attention,
    ff_norm: RmsNorm,
    mlp: SwiGlu,
}

impl LladaBlock {
    /// Loads block weights from `vb` (already at `model.transformer.blocks.{i}`).
    pub fn new(cfg: &LladaConfig, vb: &VarBuilder) -> Result<Self> {
        let spec = AttentionSpec {
            hidden: cfg.d_model,
            n_heads: cfg.n_heads,
            n_kv_heads: cfg.kv_heads(),
            qkv_bias: cfg.qkv_bias(),
            out_bias: cfg.include_bias,
        };
        let eps = cfg.rms_norm_eps;
        Ok(Self {
            attn_norm: RmsNorm::new(cfg.d_model, eps, vb, "attn_norm")?,
            attn: Attention::new(spec, vb, ["q_proj", "k_proj", "v_proj", "attn_out"])?,
            ff_norm: RmsNorm::new(cfg.d_model, eps, vb, "ff_norm")?,
            mlp: SwiGlu::new(
                cfg.d_model,
                cfg.mlp_width(),
                cfg.include_bias,
                vb,
                ["ff_proj", "up_proj", "ff_out"],
            )?,
        })
    }

    /// Pre-norm residual block on `x: [B, T, d_model]`.
    pub fn forward(
        &self,
        x: &Tensor,
        rope: &(Tensor, Tensor),
        mask: Option<&PaddingMask>,
    ) -> Result<Tensor> {
        let x = (x + self.attn.forward(&self.attn_norm.forward(x)?, rope, mask)?)?;
        Ok((&x + self.mlp.forward(&self.ff_norm.forward(&x)?)?)?)
    }
}

/// The LLaDA network (`LLaDAModelLM`), returning raw logits.
#[derive(Debug, Clone)]
pub struct LladaModel {
    wte: Embedding,
    blocks: Vec<LladaBlock>,
    ln_f: RmsNorm,
    lm_head: Dense,
    rotary: Rotary,
    logit_scale: Option<f64>,
    dtype: DType,
}

impl LladaModel {
    /// Loads the model from `vb` at the checkpoint root (the names start with `model.`).
    pub fn new(cfg: &LladaConfig, vb: &VarBuilder) -> Result<Self> {
        let t = vb.pp("model").pp("transformer");
        let width = cfg.logit_width();
        let wte = t.pp("wte").get_with_hints((width, cfg.d_model), "weight", WEIGHT_INIT)?;
        let blocks = (0..cfg.n_layers)
            .map(|i| LladaBlock::new(cfg, &t.pp("blocks").pp(i)))
            .collect::<Result<Vec<_>>>()?;
        let lm_head = if cfg.weight_tying {
            Dense::new(wte.clone(), None)
        } else {
            linear(cfg.d_model, width, cfg.include_bias, &t, "ff_out")?
        };
        Ok(Self {
            wte: Embedding::new(wte, cfg.d_model),
            blocks,
            ln_f: RmsNorm::new(cfg.d_model, cfg.rms_norm_eps, &t, "ln_f")?,
            lm_head,
            rotary: Rotary::new(cfg.d_model / cfg.n_heads, cfg.rope_theta, vb.device())?,
            logit_scale: cfg.scale_logits.then(|| 1.0 / (cfg.d_model as f64).sqrt()),
            dtype: vb.dtype(),
        })
    }

    /// Raw logits `[B, T, embedding_size]` in f32 for `ids: [B, T]`, with an optional padding
    /// mask (the reference code ignores masks; with none given the two agree exactly).
    pub fn forward(&self, ids: &Tensor, mask: Option<&Tensor>) -> Result<Tensor> {
        let (_, seq_len) = ids.dims2()?;
        let mask = mask.map(|m| PaddingMask::new(m, self.dtype)).transpose()?;
        let rope = self.rotary.tables(seq_len)?;
        let mut x = self.wte.forward(ids)?;
        for block in &self.blocks {
            x = block.forward(&x, &rope, mask.as_ref())?;
        }
        let mut logits = self.lm_head.forward(&self.ln_f.forward(&x)?)?;
        if let Some(s) = self.logit_scale {
            logits = (logits * s)?;
        }
        Ok(logits.to_dtype(DType::F32)?)
    }
}
