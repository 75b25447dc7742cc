//! The prompt encoder: a few pre-LN transformer layers over the prompt tokens alone, run before
//! the joint blocks so that every prompt token carries its context ("red" bound to the
//! "circle" after it) when the image tokens first attend to it.

use candle_core::Tensor;
use candle_nn::VarBuilder;

use super::config::DitConfig;
use super::dit::{norm, Attention, Mlp};
use crate::error::Result;

/// One encoder layer: `t += Attn(LN t)`, `t += MLP(LN t)` (Vaswani et al. arXiv 1706.03762 with
/// pre-LN, Xiong et al. arXiv 2002.04745), LayerNorm without affine as in the DiT blocks.
#[derive(Debug, Clone)]
struct TextLayer {
    attn: Attention,
    mlp: Mlp,
}

impl TextLayer {
    fn new(cfg: &DitConfig, vb: VarBuilder) -> Result<Self> {
        Ok(Self {
            attn: Attention::new(cfg.hidden, cfg.heads, vb.pp("attn"))?,
            mlp: Mlp::new(cfg, vb.pp("mlp"))?,
        })
    }

    fn forward(&self, t: &Tensor, key_bias: &Tensor) -> Result<Tensor> {
        let t = (t + self.attn.forward(&norm(t)?, key_bias)?)?;
        let h = self.mlp.forward(&norm(&t)?)?;
        Ok((&t + h)?)
    }
}

/// `DitConfig::text_layers` encoder layers over the prompt's token + position embeddings
/// `[B, text_len, d]`, padding masked out of the keys. With zero layers it is the identity
/// (the v2 model, which has none).
#[derive(Debug, Clone)]
pub(crate) struct TextEncoder {
    layers: Vec<TextLayer>,
}

impl TextEncoder {
    /// Tensor names `text.blocks.{i}.{attn.qkv, attn.proj, mlp.fc1, mlp.fc2}` under `vb`.
    pub(crate) fn new(cfg: &DitConfig, vb: VarBuilder) -> Result<Self> {
        let layers = (0..cfg.text_layers)
            .map(|i| TextLayer::new(cfg, vb.pp(format!("blocks.{i}"))))
            .collect::<Result<_>>()?;
        Ok(Self { layers })
    }

    /// `txt[B, text_len, d]`, `key_bias[B, 1, 1, text_len]` (0 real, −1e9 padding). An
    /// all-padding prompt attends uniformly over its padding, so the null prompt stays finite.
    pub(crate) fn forward(&self, txt: &Tensor, key_bias: &Tensor) -> Result<Tensor> {
        let mut t = txt.clone();
        for layer in &self.layers {
            t = layer.forward(&t, key_bias)?;
        }
        Ok(t)
    }
}
