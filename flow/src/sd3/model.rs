//! The SD3 / SD3.5 MMDiT (diffusers' `SD3Transformer2DModel`), loadable from a diffusers
//! `transformer/` folder by its own weight names, differentiable end to end.

use candle_core::{Module, Tensor};
use candle_nn::VarBuilder;

use super::block::{modulate, norm, JointBlock};
use super::config::Sd3Config;
use super::embed::{unpatchify, Conditioning, PatchEmbed};
use super::lora::{Proj, ProjLoader};
use crate::error::Result;

/// The MMDiT (Esser et al., arXiv 2403.03206). `forward(x, text, pooled, t)` predicts the
/// rectified-flow velocity `v = ε − x₀` of latents `x[B, C, H, W]` at diffusers timesteps
/// `t[B] = 1000 σ`, given the text encoder states `text[B, M, joint_attention_dim]` and the
/// pooled text embedding `pooled[B, pooled_projection_dim]`:
///
/// `c = MLP_t(sincos t) + MLP_p(pooled)`, `h = PatchEmbed(x) + pos`, `τ = W_ctx text`; for each
/// block `(h, τ) = Block(h, τ, c)`; `out = W_out(LN(h)(1 + scale) + shift)`, `(scale, shift)`
/// from `norm_out.linear(SiLU c)`; unpatchified to `[B, C_out, H, W]`.
#[derive(Debug, Clone)]
pub struct Sd3Transformer {
    cfg: Sd3Config,
    patch: PatchEmbed,
    cond: Conditioning,
    context_embedder: Proj,
    blocks: Vec<JointBlock>,
    norm_out: Proj,
    proj_out: Proj,
}

impl Sd3Transformer {
    /// Builds the model from `vb` (diffusers' names: `pos_embed.*`, `time_text_embed.*`,
    /// `context_embedder`, `transformer_blocks.{i}.*`, `norm_out.linear`, `proj_out`) with the
    /// adapters `lora` builds. Base weights from plain tensors stay frozen; from a `VarMap`
    /// they train.
    pub fn new(cfg: Sd3Config, vb: VarBuilder, lora: &ProjLoader) -> Result<Self> {
        cfg.validate()?;
        let d = cfg.width();
        let blocks = (0..cfg.num_layers)
            .map(|i| JointBlock::new(&cfg, i, vb.pp(format!("transformer_blocks.{i}")), lora))
            .collect::<Result<_>>()?;
        let out = cfg.patch_size * cfg.patch_size * cfg.out_channels;
        Ok(Self {
            patch: PatchEmbed::new(&cfg, vb.pp("pos_embed"))?,
            cond: Conditioning::new(&cfg, vb.pp("time_text_embed"))?,
            context_embedder: lora.proj(
                cfg.joint_attention_dim,
                d,
                true,
                vb.pp("context_embedder"),
                "context_embedder",
            )?,
            blocks,
            norm_out: lora.proj(d, 2 * d, true, vb.pp("norm_out.linear"), "norm_out.linear")?,
            proj_out: lora.proj(d, out, true, vb.pp("proj_out"), "proj_out")?,
            cfg,
        })
    }

    /// The config.
    #[must_use]
    pub fn config(&self) -> &Sd3Config {
        &self.cfg
    }

    /// The dtype of the base weights (inputs are cast to it).
    #[must_use]
    pub fn dtype(&self) -> candle_core::DType {
        self.proj_out.weight().dtype()
    }

    /// The velocity `[B, C_out, H, W]`; `H` and `W` must be multiples of the patch size and
    /// at most `pos_embed_max_size` patches.
    pub fn forward(
        &self,
        x: &Tensor,
        text: &Tensor,
        pooled: &Tensor,
        timestep: &Tensor,
    ) -> Result<Tensor> {
        let (_, _, h, w) = x.dims4()?;
        let p = self.cfg.patch_size;
        let c = self.cond.forward(timestep, pooled)?;
        let mut hidden = self.patch.forward(x)?;
        let mut ctx = self.context_embedder.forward(text)?;
        for block in &self.blocks {
            let (next, next_ctx) = block.forward(&hidden, &ctx, &c)?;
            hidden = next;
            if let Some(n) = next_ctx {
                ctx = n;
            }
        }
        let m = self.norm_out.forward(&candle_nn::ops::silu(&c)?)?.chunk(2, 1)?;
        let hidden = modulate(&norm(&hidden)?, &m[1], &m[0])?;
        let out = self.proj_out.forward(&hidden)?;
        unpatchify(&out, p, self.cfg.out_channels, h / p, w / p)
    }
}
