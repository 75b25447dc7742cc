//! MMDiT attention: the joint attention over image and text tokens (SD3) and MMDiT-X's
//! image-only second attention (SD3.5), with optional per-head QK RMS-norm.

use candle_core::{Module, Tensor};
use candle_nn::VarBuilder;
use drift_core::ops::{rms_norm, softmax_last_dim};

use super::config::Sd3Config;
use super::lora::{Proj, ProjLoader};
use crate::error::Result;

/// RMS-norm epsilon of the QK norms (diffusers' `Attention(eps=1e-6)`).
const QK_EPS: f32 = 1e-6;

/// The query, key and value projections of one token stream, each `[B, T, D] → [B, H, T, d]`,
/// with the queries and keys RMS-normalised per head when the config asks.
#[derive(Debug, Clone)]
struct Qkv {
    q: Proj,
    k: Proj,
    v: Proj,
    norms: Option<(Tensor, Tensor)>,
    heads: usize,
}

impl Qkv {
    /// `names` = the projections' names under `vb` (`to_q`… or `add_q_proj`…) and the norms'
    /// (`norm_q`/`norm_k` or `norm_added_q`/`norm_added_k`).
    fn new(
        cfg: &Sd3Config,
        vb: &VarBuilder,
        lora: &ProjLoader,
        prefix: &str,
        names: [&str; 5],
    ) -> Result<Self> {
        let d = cfg.width();
        let proj = |n: &str| lora.proj(d, d, true, vb.pp(n), &format!("{prefix}.{n}"));
        let norms = if cfg.rms_qk_norm() {
            let hd = cfg.attention_head_dim;
            let w = |n: &str| vb.pp(n).get_with_hints(hd, "weight", candle_nn::Init::Const(1.0));
            Some((w(names[3])?, w(names[4])?))
        } else {
            None
        };
        Ok(Self {
            q: proj(names[0])?,
            k: proj(names[1])?,
            v: proj(names[2])?,
            norms,
            heads: cfg.num_attention_heads,
        })
    }

    fn split(&self, x: &Tensor, p: &Proj) -> Result<Tensor> {
        let (b, t, d) = x.dims3()?;
        Ok(p.forward(x)?.reshape((b, t, self.heads, d / self.heads))?.transpose(1, 2)?)
    }

    fn forward(&self, x: &Tensor) -> Result<[Tensor; 3]> {
        let (mut q, mut k) = (self.split(x, &self.q)?, self.split(x, &self.k)?);
        if let Some((nq, nk)) = &self.norms {
            q = rms_norm(&q, nq, QK_EPS)?;
            k = rms_norm(&k, nk, QK_EPS)?;
        }
        Ok([q, k, self.split(x, &self.v)?])
    }
}

/// `softmax(q kᵀ/√d) v` over heads `[B, H, T, d]`, merged back to `[B, T, H·d]`.
fn attend(q: &Tensor, k: &Tensor, v: &Tensor) -> Result<Tensor> {
    let (b, h, t, hd) = q.dims4()?;
    let scores = (q.contiguous()?.matmul(&k.contiguous()?.t()?)? / (hd as f64).sqrt())?;
    let out = softmax_last_dim(&scores)?.matmul(&v.contiguous()?)?;
    Ok(out.transpose(1, 2)?.reshape((b, t, h * hd))?)
}

/// SD3's joint attention (diffusers' `JointAttnProcessor2_0`): the image tokens `x[B, N, D]`
/// and the text tokens `c[B, M, D]` are projected separately (`to_*` and `add_*_proj`),
/// concatenated image-first, attended jointly, split, and projected out separately (`to_out.0`
/// and, except in the last block, `to_add_out`).
#[derive(Debug, Clone)]
pub struct JointAttention {
    image: Qkv,
    text: Qkv,
    to_out: Proj,
    to_add_out: Option<Proj>,
}

impl JointAttention {
    /// Loads the attention `attn` of a block; `context_pre_only` (the last block) has no
    /// `to_add_out`.
    pub fn new(
        cfg: &Sd3Config,
        vb: VarBuilder,
        lora: &ProjLoader,
        prefix: &str,
        context_pre_only: bool,
    ) -> Result<Self> {
        let d = cfg.width();
        let image = Qkv::new(cfg, &vb, lora, prefix, ["to_q", "to_k", "to_v", "norm_q", "norm_k"])?;
        let text = Qkv::new(
            cfg,
            &vb,
            lora,
            prefix,
            ["add_q_proj", "add_k_proj", "add_v_proj", "norm_added_q", "norm_added_k"],
        )?;
        let to_out = lora.proj(d, d, true, vb.pp("to_out.0"), &format!("{prefix}.to_out.0"))?;
        let to_add_out = if context_pre_only {
            None
        } else {
            Some(lora.proj(d, d, true, vb.pp("to_add_out"), &format!("{prefix}.to_add_out"))?)
        };
        Ok(Self { image, text, to_out, to_add_out })
    }

    /// `(x, c) → (attn_x[B, N, D], attn_c[B, M, D] unless context-pre-only)`.
    pub fn forward(&self, x: &Tensor, c: &Tensor) -> Result<(Tensor, Option<Tensor>)> {
        let n = x.dim(1)?;
        let [qx, kx, vx] = self.image.forward(x)?;
        let [qc, kc, vc] = self.text.forward(c)?;
        let cat = |a: &Tensor, b: &Tensor| Tensor::cat(&[a, b], 2);
        let out = attend(&cat(&qx, &qc)?, &cat(&kx, &kc)?, &cat(&vx, &vc)?)?;
        let m = out.dim(1)? - n;
        let x_out = self.to_out.forward(&out.narrow(1, 0, n)?)?;
        let c_out = match &self.to_add_out {
            Some(p) => Some(p.forward(&out.narrow(1, n, m)?)?),
            None => None,
        };
        Ok((x_out, c_out))
    }
}

/// MMDiT-X's image-only self-attention `attn2` (diffusers' `AttnProcessor2_0`).
#[derive(Debug, Clone)]
pub struct SelfAttention {
    qkv: Qkv,
    to_out: Proj,
}

impl SelfAttention {
    /// Loads `to_{q,k,v}`, `norm_{q,k}` and `to_out.0` under `vb`.
    pub fn new(cfg: &Sd3Config, vb: VarBuilder, lora: &ProjLoader, prefix: &str) -> Result<Self> {
        let d = cfg.width();
        let qkv = Qkv::new(cfg, &vb, lora, prefix, ["to_q", "to_k", "to_v", "norm_q", "norm_k"])?;
        let to_out = lora.proj(d, d, true, vb.pp("to_out.0"), &format!("{prefix}.to_out.0"))?;
        Ok(Self { qkv, to_out })
    }

    /// `x[B, N, D] → [B, N, D]`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let [q, k, v] = self.qkv.forward(x)?;
        Ok(self.to_out.forward(&attend(&q, &k, &v)?)?)
    }
}
