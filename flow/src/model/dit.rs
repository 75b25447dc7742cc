//! The DiT: joint prompt + image token sequence, adaLN-Zero blocks, velocity output.

use candle_core::{DType, Device, Module, Tensor, D};
use candle_nn::{Init, VarBuilder};
use drift_core::nn::{torch_default_init, Linear};
use drift_core::ops::{gelu, normalize, softmax_last_dim};
use drift_samplers::flow::VelocityField;

use super::config::DitConfig;
use super::embed::{patchify, pos_embedding_2d, timestep_embedding, unpatchify};
use super::text::TextEncoder;
use crate::error::Result;

/// LayerNorm without affine parameters (DiT's `elementwise_affine=False`), eps 1e-6.
pub(crate) fn norm(x: &Tensor) -> Result<Tensor> {
    Ok(normalize(x, 1e-6)?)
}

/// `x(1 + scale) + shift` with per-sample `shift, scale[B, d]`.
pub(crate) fn modulate(x: &Tensor, shift: &Tensor, scale: &Tensor) -> Result<Tensor> {
    let x = x.broadcast_mul(&(scale.unsqueeze(1)? + 1.0)?)?;
    Ok(x.broadcast_add(&shift.unsqueeze(1)?)?)
}

/// Multi-head self-attention with a key padding bias.
#[derive(Debug, Clone)]
pub(crate) struct Attention {
    qkv: Linear,
    proj: Linear,
    heads: usize,
}

impl Attention {
    pub(crate) fn new(d: usize, heads: usize, vb: VarBuilder) -> Result<Self> {
        Ok(Self {
            qkv: Linear::load(d, 3 * d, true, torch_default_init(d), vb.pp("qkv"))?,
            proj: Linear::load(d, d, true, torch_default_init(d), vb.pp("proj"))?,
            heads,
        })
    }

    /// `x[B, T, d]`; `key_bias[B, 1, 1, T]` is 0 for real keys and −1e9 for padding.
    pub(crate) fn forward(&self, x: &Tensor, key_bias: &Tensor) -> Result<Tensor> {
        let (b, t, d) = x.dims3()?;
        let hd = d / self.heads;
        let qkv =
            self.qkv.forward(x)?.reshape((b, t, 3, self.heads, hd))?.permute((2, 0, 3, 1, 4))?;
        let (q, k, v) =
            (qkv.get(0)?.contiguous()?, qkv.get(1)?.contiguous()?, qkv.get(2)?.contiguous()?);
        let scores = (q.matmul(&k.t()?)? / (hd as f64).sqrt())?.broadcast_add(key_bias)?;
        let att = softmax_last_dim(&scores)?.matmul(&v)?;
        let att = att.transpose(1, 2)?.reshape((b, t, d))?;
        Ok(self.proj.forward(&att)?)
    }
}

/// A DiT block with adaLN-Zero: `x += g₁·Attn(mod(LN x; s₁, c₁))`,
/// `x += g₂·MLP(mod(LN x; s₂, c₂))`, with `(s₁, c₁, g₁, s₂, c₂, g₂) = W·SiLU(c)`, `W` zero at
/// init so each block starts as the identity.
#[derive(Debug, Clone)]
struct Block {
    attn: Attention,
    mlp: Mlp,
    ada: Linear,
}

/// The transformer MLP `fc2(GELU(fc1 x))`, `mlp_ratio·d` wide (tensor names `fc1`, `fc2`).
#[derive(Debug, Clone)]
pub(crate) struct Mlp {
    fc1: Linear,
    fc2: Linear,
}

impl Mlp {
    pub(crate) fn new(cfg: &DitConfig, vb: VarBuilder) -> Result<Self> {
        let (d, wide) = (cfg.hidden, cfg.hidden * cfg.mlp_ratio);
        Ok(Self {
            fc1: Linear::load(d, wide, true, torch_default_init(d), vb.pp("fc1"))?,
            fc2: Linear::load(wide, d, true, torch_default_init(wide), vb.pp("fc2"))?,
        })
    }

    pub(crate) fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(self.fc2.forward(&gelu(&self.fc1.forward(x)?)?)?)
    }
}

impl Block {
    fn new(cfg: &DitConfig, vb: VarBuilder) -> Result<Self> {
        let d = cfg.hidden;
        Ok(Self {
            attn: Attention::new(d, cfg.heads, vb.pp("attn"))?,
            mlp: Mlp::new(cfg, vb.pp("mlp"))?,
            ada: Linear::load(d, 6 * d, true, Init::Const(0.0), vb.pp("ada"))?,
        })
    }

    fn forward(&self, x: &Tensor, c: &Tensor, key_bias: &Tensor) -> Result<Tensor> {
        let m = self.ada.forward(&candle_nn::ops::silu(c)?)?.chunk(6, D::Minus1)?;
        let h = modulate(&norm(x)?, &m[0], &m[1])?;
        let x = (x + self.attn.forward(&h, key_bias)?.broadcast_mul(&m[2].unsqueeze(1)?)?)?;
        let h = modulate(&norm(&x)?, &m[3], &m[4])?;
        let h = self.mlp.forward(&h)?;
        Ok((&x + h.broadcast_mul(&m[5].unsqueeze(1)?)?)?)
    }
}

/// The small conditional DiT. `forward(x, σ, prompt ids)` predicts the flow velocity
/// `v = ε − x₀` for images `x[B, C, H, W]` at noise levels `σ[B]` (embedded as the SD3 timestep
/// `1000σ`) given prompt token ids `[B, text_len]` (u32, padded with `pad_id`; an all-padding
/// prompt is the null prompt).
#[derive(Debug, Clone)]
pub struct Dit {
    cfg: DitConfig,
    patch_embed: Linear,
    pos: Tensor,
    t1: Linear,
    t2: Linear,
    tok_embed: Tensor,
    text_pos: Tensor,
    text_proj: Linear,
    text_encoder: TextEncoder,
    blocks: Vec<Block>,
    final_ada: Linear,
    final_out: Linear,
}

impl Dit {
    /// Builds the model from `vb` (a `VarMap` for training, plain tensors for a frozen or
    /// detached copy). Tensor names: `patch_embed`, `t_embed.{0,2}`, `text.tok`, `text.pos`,
    /// `text.proj`, `text.blocks.{i}.{attn.qkv, attn.proj, mlp.fc1, mlp.fc2}` (the prompt
    /// encoder, `text_layers` of them), `blocks.{i}.{attn.qkv, attn.proj, mlp.fc1, mlp.fc2,
    /// ada}`, `final.{ada,out}`.
    pub fn new(cfg: DitConfig, vb: VarBuilder) -> Result<Self> {
        cfg.validate()?;
        let d = cfg.hidden;
        let blocks = (0..cfg.depth)
            .map(|i| Block::new(&cfg, vb.pp(format!("blocks.{i}"))))
            .collect::<Result<_>>()?;
        let g = cfg.image_size / cfg.patch;
        Ok(Self {
            patch_embed: Linear::load(
                cfg.patch_dim(),
                d,
                true,
                torch_default_init(cfg.patch_dim()),
                vb.pp("patch_embed"),
            )?,
            pos: pos_embedding_2d(g, d, vb.device())?,
            t1: Linear::load(
                cfg.time_freqs,
                d,
                true,
                torch_default_init(cfg.time_freqs),
                vb.pp("t_embed.0"),
            )?,
            t2: Linear::load(d, d, true, torch_default_init(d), vb.pp("t_embed.2"))?,
            tok_embed: vb.get_with_hints(
                (cfg.text_vocab, d),
                "text.tok",
                Init::Randn { mean: 0.0, stdev: 0.02 },
            )?,
            text_pos: vb.get_with_hints(
                (cfg.text_len, d),
                "text.pos",
                Init::Randn { mean: 0.0, stdev: 0.02 },
            )?,
            text_proj: Linear::load(d, d, true, torch_default_init(d), vb.pp("text.proj"))?,
            text_encoder: TextEncoder::new(&cfg, vb.pp("text"))?,
            blocks,
            final_ada: Linear::load(d, 2 * d, true, Init::Const(0.0), vb.pp("final.ada"))?,
            final_out: Linear::load(
                d,
                cfg.patch_dim(),
                true,
                Init::Const(0.0),
                vb.pp("final.out"),
            )?,
            cfg,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &DitConfig {
        &self.cfg
    }

    /// The device of the weights.
    pub fn device(&self) -> &Device {
        self.tok_embed.device()
    }

    /// The null prompt (all padding) for `b` samples, for CFG and prompt dropout.
    pub fn null_prompt(&self, b: usize) -> Result<Tensor> {
        Ok(Tensor::full(self.cfg.pad_id, (b, self.cfg.text_len), self.device())?)
    }

    /// The velocity `v[B, C, H, W]`.
    pub fn forward(&self, x: &Tensor, sigma: &Tensor, ids: &Tensor) -> Result<Tensor> {
        let cfg = &self.cfg;
        let b = x.dim(0)?;
        let x =
            x.reshape((b, cfg.channels, cfg.image_size, cfg.image_size))?.to_dtype(DType::F32)?;
        let img = self.patch_embed.forward(&patchify(&x, cfg.patch)?)?.broadcast_add(&self.pos)?;
        let real = ids.ne(cfg.pad_id)?.to_dtype(DType::F32)?; // [B, L]
        let txt = self.tok_embed.embedding(&ids.flatten_all()?)?.reshape((
            b,
            cfg.text_len,
            cfg.hidden,
        ))?;
        let txt = txt.broadcast_add(&self.text_pos)?;
        let text_bias = ((&real - 1.0)? * 1e9)?.reshape((b, 1, 1, cfg.text_len))?;
        let txt = self.text_encoder.forward(&txt, &text_bias)?;
        // Pooled prompt: masked mean of the (encoded) tokens (0 for the null prompt).
        let count = real.sum_keepdim(1)?.clamp(1.0, f64::INFINITY)?;
        let pooled = txt.broadcast_mul(&real.unsqueeze(2)?)?.sum(1)?.broadcast_div(&count)?;
        let t = timestep_embedding(&(sigma.to_dtype(DType::F32)? * 1000.0)?, cfg.time_freqs)?;
        let c = (self.t2.forward(&candle_nn::ops::silu(&self.t1.forward(&t)?)?)?
            + self.text_proj.forward(&pooled)?)?;
        let key_real =
            Tensor::cat(&[real, Tensor::ones((b, cfg.tokens()), DType::F32, x.device())?], 1)?;
        let key_bias =
            ((key_real - 1.0)? * 1e9)?.reshape((b, 1, 1, cfg.text_len + cfg.tokens()))?;
        let mut h = Tensor::cat(&[txt, img], 1)?;
        for block in &self.blocks {
            h = block.forward(&h, &c, &key_bias)?;
        }
        let h = h.narrow(1, cfg.text_len, cfg.tokens())?;
        let m = self.final_ada.forward(&candle_nn::ops::silu(&c)?)?.chunk(2, D::Minus1)?;
        let out = self.final_out.forward(&modulate(&norm(&h)?, &m[0], &m[1])?)?;
        unpatchify(&out, cfg.patch, cfg.channels, cfg.image_size)
    }
}

impl crate::policy::FlowPolicy for Dit {
    fn device(&self) -> &Device {
        Dit::device(self)
    }
    fn latent_shape(&self) -> (usize, usize, usize) {
        (self.cfg.channels, self.cfg.image_size, self.cfg.image_size)
    }
    fn null_cond(&self, n: usize) -> Result<Tensor> {
        self.null_prompt(n)
    }
    /// The DiT samples pixels: the identity.
    fn decode(&self, latents: &Tensor) -> Result<Tensor> {
        Ok(latents.clone())
    }
}

impl VelocityField for Dit {
    type Cond = Tensor;
    fn velocity(&self, x: &Tensor, sigma: &Tensor, ids: &Tensor) -> candle_core::Result<Tensor> {
        let v = self.forward(x, sigma, ids).map_err(|e| candle_core::Error::Msg(e.to_string()))?;
        v.reshape(x.shape())
    }
}
