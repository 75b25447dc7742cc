//! The SD3 VAE decoder (diffusers' `AutoencoderKL.decoder`), frozen inference only: conv in,
//! a mid block (ResNet, single-head spatial self-attention, ResNet), up blocks of
//! `layers_per_block + 1` ResNets with nearest ×2 upsampling and a 3×3 conv between levels,
//! GroupNorm, SiLU, conv out.

use candle_core::{Module, Tensor};
use candle_nn::{conv2d, group_norm, Conv2d, Conv2dConfig, GroupNorm, VarBuilder};
use drift_core::nn::Linear;
use drift_core::ops::softmax_last_dim;

use crate::error::Result;

/// GroupNorm epsilon of every norm of the decoder.
const EPS: f64 = 1e-6;

fn conv3(i: usize, o: usize, vb: VarBuilder) -> Result<Conv2d> {
    Ok(conv2d(i, o, 3, Conv2dConfig { padding: 1, ..Default::default() }, vb)?)
}

/// `x + conv2(SiLU(GN(conv1(SiLU(GN x)))))`, the skip through a 1×1 conv when the channel
/// count changes (diffusers' `ResnetBlock2D` without a time embedding).
#[derive(Debug)]
struct Resnet {
    norm1: GroupNorm,
    conv1: Conv2d,
    norm2: GroupNorm,
    conv2: Conv2d,
    shortcut: Option<Conv2d>,
}

impl Resnet {
    fn new(i: usize, o: usize, groups: usize, vb: VarBuilder) -> Result<Self> {
        Ok(Self {
            norm1: group_norm(groups, i, EPS, vb.pp("norm1"))?,
            conv1: conv3(i, o, vb.pp("conv1"))?,
            norm2: group_norm(groups, o, EPS, vb.pp("norm2"))?,
            conv2: conv3(o, o, vb.pp("conv2"))?,
            shortcut: if i == o {
                None
            } else {
                Some(conv2d(i, o, 1, Conv2dConfig::default(), vb.pp("conv_shortcut"))?)
            },
        })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let silu = candle_nn::ops::silu;
        let h = self.conv1.forward(&silu(&self.norm1.forward(x)?)?)?;
        let h = self.conv2.forward(&silu(&self.norm2.forward(&h)?)?)?;
        let skip = match &self.shortcut {
            Some(c) => c.forward(x)?,
            None => x.clone(),
        };
        Ok((skip + h)?)
    }
}

/// `x + to_out(softmax(q kᵀ/√C) v)` over the `H·W` positions of `GN(x)`, one head.
#[derive(Debug)]
struct SpatialAttention {
    norm: GroupNorm,
    q: Linear,
    k: Linear,
    v: Linear,
    out: Linear,
}

impl SpatialAttention {
    fn new(c: usize, groups: usize, vb: VarBuilder) -> Result<Self> {
        let lin = |n: &str| -> Result<Linear> {
            let vb = vb.pp(n);
            Ok(Linear::new(vb.get((c, c), "weight")?, Some(vb.get(c, "bias")?)))
        };
        Ok(Self {
            norm: group_norm(groups, c, EPS, vb.pp("group_norm"))?,
            q: lin("to_q")?,
            k: lin("to_k")?,
            v: lin("to_v")?,
            out: lin("to_out.0")?,
        })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let (b, c, h, w) = x.dims4()?;
        let t = self.norm.forward(x)?.reshape((b, c, h * w))?.transpose(1, 2)?.contiguous()?;
        let (q, k, v) = (self.q.forward(&t)?, self.k.forward(&t)?, self.v.forward(&t)?);
        let scores = (q.matmul(&k.t()?)? / (c as f64).sqrt())?;
        let att = softmax_last_dim(&scores)?.matmul(&v)?;
        let y = self.out.forward(&att)?.transpose(1, 2)?.reshape((b, c, h, w))?;
        Ok((x + y)?)
    }
}

/// One level of the decoder: ResNets, then (except the last level) nearest ×2 and a 3×3 conv.
#[derive(Debug)]
struct UpBlock {
    resnets: Vec<Resnet>,
    upsample: Option<Conv2d>,
}

/// The decoder of a diffusers `AutoencoderKL`.
#[derive(Debug)]
pub struct Decoder {
    conv_in: Conv2d,
    mid: (Resnet, Option<SpatialAttention>, Resnet),
    up: Vec<UpBlock>,
    norm_out: GroupNorm,
    conv_out: Conv2d,
}

impl Decoder {
    /// Loads `decoder.*` from `vb` (the caller's `vb.pp("decoder")`).
    pub fn new(
        latent: usize,
        out: usize,
        channels: &[usize],
        layers_per_block: usize,
        groups: usize,
        mid_attention: bool,
        vb: VarBuilder,
    ) -> Result<Self> {
        let rev: Vec<usize> = channels.iter().rev().copied().collect();
        let top = rev[0];
        let mid = vb.pp("mid_block");
        let mid = (
            Resnet::new(top, top, groups, mid.pp("resnets.0"))?,
            if mid_attention {
                Some(SpatialAttention::new(top, groups, mid.pp("attentions.0"))?)
            } else {
                None
            },
            Resnet::new(top, top, groups, mid.pp("resnets.1"))?,
        );
        let mut up = Vec::with_capacity(rev.len());
        let mut prev = top;
        for (i, &o) in rev.iter().enumerate() {
            let vb = vb.pp(format!("up_blocks.{i}"));
            let resnets = (0..=layers_per_block)
                .map(|j| {
                    Resnet::new(
                        if j == 0 { prev } else { o },
                        o,
                        groups,
                        vb.pp(format!("resnets.{j}")),
                    )
                })
                .collect::<Result<_>>()?;
            let upsample = if i + 1 < rev.len() {
                Some(conv3(o, o, vb.pp("upsamplers.0.conv"))?)
            } else {
                None
            };
            up.push(UpBlock { resnets, upsample });
            prev = o;
        }
        Ok(Self {
            conv_in: conv3(latent, top, vb.pp("conv_in"))?,
            mid,
            up,
            norm_out: group_norm(groups, channels[0], EPS, vb.pp("conv_norm_out"))?,
            conv_out: conv3(channels[0], out, vb.pp("conv_out"))?,
        })
    }

    /// `z[B, latent, h, w] → [B, out, h·2^(levels−1), w·2^(levels−1)]`.
    pub fn forward(&self, z: &Tensor) -> Result<Tensor> {
        let mut x = self.mid.0.forward(&self.conv_in.forward(z)?)?;
        if let Some(a) = &self.mid.1 {
            x = a.forward(&x)?;
        }
        x = self.mid.2.forward(&x)?;
        for block in &self.up {
            for r in &block.resnets {
                x = r.forward(&x)?;
            }
            if let Some(conv) = &block.upsample {
                let (_, _, h, w) = x.dims4()?;
                x = conv.forward(&x.upsample_nearest2d(2 * h, 2 * w)?)?;
            }
        }
        let x = candle_nn::ops::silu(&self.norm_out.forward(&x)?)?;
        Ok(self.conv_out.forward(&x)?)
    }
}
