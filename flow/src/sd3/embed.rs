//! The MMDiT's input embeddings: the patch embedding with its cropped 2-D sine-cosine position
//! grid, and the timestep + pooled-text conditioning vector.

use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{Init, VarBuilder};
use drift_core::nn::{torch_default_init, Linear};

use super::config::Sd3Config;
use crate::error::Result;
use crate::model::timestep_embedding;

/// diffusers' `get_2d_sincos_pos_embed(dim, grid, base_size)`: for the grid position at row
/// `i`, column `j` (flattened `i·grid + j`), with `u = j·base/grid` and `v = i·base/grid`, the
/// features are `[sin(u ω), cos(u ω), sin(v ω), cos(v ω)]`, `ω_k = 10000^{−k/(dim/4)}` for
/// `k < dim/4`. (diffusers stacks its meshgrid with the column coordinate first, so the first
/// half encodes the column.) Returns `[grid², dim]`.
pub fn sincos_2d(dim: usize, grid: usize, base_size: usize, device: &Device) -> Result<Tensor> {
    let quarter = dim / 4;
    let omega: Vec<f64> =
        (0..quarter).map(|k| 1.0 / 10000f64.powf(k as f64 / quarter as f64)).collect();
    let scale = base_size as f64 / grid as f64;
    let mut v = Vec::with_capacity(grid * grid * dim);
    for i in 0..grid {
        for j in 0..grid {
            for pos in [j as f64 * scale, i as f64 * scale] {
                v.extend(omega.iter().map(|w| (pos * w).sin() as f32));
                v.extend(omega.iter().map(|w| (pos * w).cos() as f32));
            }
        }
    }
    Ok(Tensor::from_vec(v, (grid * grid, dim), device)?)
}

/// diffusers' `PatchEmbed` with `pos_embed_max_size`: a stride-`p` convolution (computed as
/// one GEMM over the flattened `C·p·p` patches), plus the centre crop of the stored position
/// grid to the latent's `h × w` patch grid.
#[derive(Debug, Clone)]
pub struct PatchEmbed {
    proj: Linear,
    /// `[max, max, D]`, the stored grid.
    pos: Tensor,
    patch: usize,
}

impl PatchEmbed {
    /// Loads `proj.{weight [D, C, p, p], bias}` and the persistent buffer `pos_embed
    /// [1, max², D]` under `vb` (`pos_embed`); when the checkpoint has no buffer (a fresh
    /// model) the grid is computed.
    pub fn new(cfg: &Sd3Config, vb: VarBuilder) -> Result<Self> {
        let (d, c, p) = (cfg.width(), cfg.in_channels, cfg.patch_size);
        let fan_in = c * p * p;
        let w = vb.get_with_hints((d, c, p, p), "proj.weight", torch_default_init(fan_in))?;
        let b = vb.get_with_hints(d, "proj.bias", Init::Const(0.0))?;
        let proj = Linear::new(w.reshape((d, fan_in))?, Some(b));
        let max = cfg.pos_embed_max_size;
        let pos = if vb.contains_tensor("pos_embed") {
            vb.get((1, max * max, d), "pos_embed")?.detach()
        } else {
            sincos_2d(d, max, cfg.sample_size / p, vb.device())?.unsqueeze(0)?
        };
        Ok(Self { proj, pos: pos.reshape((max, max, d))?, patch: p })
    }

    /// `x[B, C, H, W] → [B, (H/p)(W/p), D]`, patches in row-major order.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let (b, c, h, w) = x.dims4()?;
        let p = self.patch;
        let (gh, gw) = (h / p, w / p);
        let patches = x.reshape((b, c, gh, p, gw, p))?.permute((0, 2, 4, 1, 3, 5))?.reshape((
            b,
            gh * gw,
            c * p * p,
        ))?;
        let max = self.pos.dim(0)?;
        let (top, left) = ((max - gh) / 2, (max - gw) / 2);
        let pos = self.pos.narrow(0, top, gh)?.narrow(1, left, gw)?.reshape((1, gh * gw, ()))?;
        Ok(self.proj.forward(&patches)?.broadcast_add(&pos)?)
    }
}

/// `[B, h·w, p·p·C] → [B, C, h·p, w·p]`, the inverse of the patch layout of the output
/// projection (`nhwpqc → nchpwq`).
pub fn unpatchify(x: &Tensor, p: usize, c: usize, gh: usize, gw: usize) -> Result<Tensor> {
    let b = x.dim(0)?;
    Ok(x.reshape((b, gh, gw, p, p, c))?.permute((0, 5, 1, 3, 2, 4))?.reshape((
        b,
        c,
        gh * p,
        gw * p,
    ))?)
}

/// A two-layer MLP with SiLU between, `linear_2(SiLU(linear_1(x)))` (diffusers'
/// `TimestepEmbedding` and `PixArtAlphaTextProjection`).
#[derive(Debug, Clone)]
struct Mlp2 {
    l1: Linear,
    l2: Linear,
}

impl Mlp2 {
    fn new(i: usize, d: usize, vb: VarBuilder) -> Result<Self> {
        Ok(Self {
            l1: Linear::load(i, d, true, torch_default_init(i), vb.pp("linear_1"))?,
            l2: Linear::load(d, d, true, torch_default_init(d), vb.pp("linear_2"))?,
        })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(self.l2.forward(&candle_nn::ops::silu(&self.l1.forward(x)?)?)?)
    }
}

/// Channels of the sinusoidal timestep features.
const TIME_FREQS: usize = 256;

/// diffusers' `CombinedTimestepTextProjEmbeddings`: the conditioning vector
/// `c = MLP_t([cos(t ω), sin(t ω)]) + MLP_p(pooled)`, `ω_k = 10000^{−k/128}`, where `t` is the
/// diffusers timestep `1000 σ`.
#[derive(Debug, Clone)]
pub struct Conditioning {
    time: Mlp2,
    text: Mlp2,
}

impl Conditioning {
    /// Loads `timestep_embedder.linear_{1,2}` and `text_embedder.linear_{1,2}` under `vb`.
    pub fn new(cfg: &Sd3Config, vb: VarBuilder) -> Result<Self> {
        let d = cfg.width();
        Ok(Self {
            time: Mlp2::new(TIME_FREQS, d, vb.pp("timestep_embedder"))?,
            text: Mlp2::new(cfg.pooled_projection_dim, d, vb.pp("text_embedder"))?,
        })
    }

    /// `timestep[B]` (`1000 σ`) and `pooled[B, P]` → `c[B, D]`.
    pub fn forward(&self, timestep: &Tensor, pooled: &Tensor) -> Result<Tensor> {
        let t = timestep_embedding(&timestep.to_dtype(DType::F32)?, TIME_FREQS)?
            .to_dtype(pooled.dtype())?;
        Ok((self.time.forward(&t)? + self.text.forward(pooled)?)?)
    }
}
