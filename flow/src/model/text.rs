//! The prompt encoder: a few pre-LN transformer layers over the prompt tokens alone, run before
//! the joint blocks so that every prompt token carries its context ("red" bound to the
//! "circle" after it) when the image tokens first attend to it.

use candle_core::{Module, Tensor};
use candle_nn::VarBuilder;
use drift_core::nn::{torch_default_init, Linear};
use drift_core::ops::gelu;

use super::config::DitConfig;
use super::dit::{norm, Attention};
use crate::error::Result;

/// One encoder layer: `t += Attn(LN t)`, `t += MLP(LN t)` (Vaswani et al. arXiv 1706.03762 with
/// pre-LN, Xiong et al. arXiv 2002.04745), LayerNorm without affine as in the DiT blocks.
#[derive(Debug, Clone)]
struct TextLayer {
    attn: Attention,
    fc1: Linear,
    fc2: Linear,
}

impl TextLayer {
    fn new(cfg: &DitConfig, vb: VarBuilder) -> Result<Self> {
        let d = cfg.hidden;
        let wide = d * cfg.mlp_ratio;
        Ok(Self {
            attn: Attention::new(d, cfg.heads, vb.pp("attn"))?,
            fc1: Linear::load(d, wide, true, torch_default_init(d), vb.pp("mlp.fc1"))?,
            fc2: Linear::load(wide, d, true, torch_default_init(wide), vb.pp("mlp.fc2"))?,
        })
    }

    fn forward(&self, t: &Tensor, key_bias: &Tensor) -> Result<Tensor> {
        let t = (t + self.attn.forward(&norm(t)?, key_bias)?)?;
        let h = self.fc2.forward(&gelu(&self.fc1.forward(&norm(&t)?)?)?)?;
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
