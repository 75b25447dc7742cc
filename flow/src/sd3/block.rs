//! The MMDiT joint transformer block (diffusers' `JointTransformerBlock`): adaLN-Zero
//! modulation of both streams from the conditioning vector, joint attention, MMDiT-X's second
//! image attention, and a GELU feed-forward per stream.

use candle_core::{Module, Tensor, D};
use candle_nn::VarBuilder;
use drift_core::ops::gelu;

use super::attention::{JointAttention, SelfAttention};
use super::config::Sd3Config;
use super::lora::{Proj, ProjLoader};
use crate::error::Result;
pub(crate) use crate::model::{modulate, norm};

/// `g ⊙ y` with a per-sample gate `g[B, D]`.
fn gate(g: &Tensor, y: &Tensor) -> Result<Tensor> {
    Ok(y.broadcast_mul(&g.unsqueeze(1)?)?)
}

/// `net.2(GELU_tanh(net.0.proj(x)))`, width 4D (diffusers' `FeedForward`, "gelu-approximate").
#[derive(Debug, Clone)]
struct FeedForward {
    up: Proj,
    down: Proj,
}

impl FeedForward {
    fn new(d: usize, vb: VarBuilder, lora: &ProjLoader, prefix: &str) -> Result<Self> {
        Ok(Self {
            up: lora.proj(d, 4 * d, true, vb.pp("net.0.proj"), &format!("{prefix}.net.0.proj"))?,
            down: lora.proj(4 * d, d, true, vb.pp("net.2"), &format!("{prefix}.net.2"))?,
        })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(self.down.forward(&gelu(&self.up.forward(x)?)?)?)
    }
}

/// The `n·D` modulation vectors `linear(SiLU(c))`, split in `n`.
fn modulation(linear: &Proj, c: &Tensor, n: usize) -> Result<Vec<Tensor>> {
    Ok(linear.forward(&candle_nn::ops::silu(c)?)?.chunk(n, D::Minus1)?)
}

/// What the text stream of a block does after the attention.
#[derive(Debug, Clone)]
enum TextStream {
    /// adaLN-Zero with 6 vectors, gated residual attention output and feed-forward.
    Full { ada: Proj, ff: FeedForward },
    /// The last block (`context_pre_only`): the text tokens only feed the attention, under
    /// `AdaLayerNormContinuous` (`scale, shift = chunk(linear(SiLU c), 2)`).
    PreOnly { ada: Proj },
}

/// One joint block. With `(shift, scale, gate)` triples from `norm1.linear(SiLU c)`:
/// `x += g_a · Attn_x(mod(LN x))`, [MMDiT-X: `x += g_a2 · Attn2(mod₂(LN x))`],
/// `x += g_m · FF(mod(LN x))`, and the same on the text stream `c_tok` with its own weights.
#[derive(Debug, Clone)]
pub struct JointBlock {
    ada: Proj,
    attn: JointAttention,
    attn2: Option<SelfAttention>,
    ff: FeedForward,
    text: TextStream,
}

impl JointBlock {
    /// Loads block `i` from `vb` (`transformer_blocks.{i}`).
    pub fn new(cfg: &Sd3Config, i: usize, vb: VarBuilder, lora: &ProjLoader) -> Result<Self> {
        let d = cfg.width();
        let prefix = format!("transformer_blocks.{i}");
        let p = |n: &str| format!("{prefix}.{n}");
        let dual = cfg.dual_attention_layers.contains(&i);
        let pre_only = i + 1 == cfg.num_layers;
        let n_ada = if dual { 9 } else { 6 };
        let ada = lora.proj(d, n_ada * d, true, vb.pp("norm1.linear"), &p("norm1.linear"))?;
        let attn = JointAttention::new(cfg, vb.pp("attn"), lora, &p("attn"), pre_only)?;
        let attn2 = if dual {
            Some(SelfAttention::new(cfg, vb.pp("attn2"), lora, &p("attn2"))?)
        } else {
            None
        };
        let ff = FeedForward::new(d, vb.pp("ff"), lora, &p("ff"))?;
        let text_ada = |n: usize| {
            lora.proj(d, n * d, true, vb.pp("norm1_context.linear"), &p("norm1_context.linear"))
        };
        let text = if pre_only {
            TextStream::PreOnly { ada: text_ada(2)? }
        } else {
            TextStream::Full {
                ada: text_ada(6)?,
                ff: FeedForward::new(d, vb.pp("ff_context"), lora, &p("ff_context"))?,
            }
        };
        Ok(Self { ada, attn, attn2, ff, text })
    }

    /// `(x[B, N, D], c_tok[B, M, D], c[B, D]) → (x', c_tok')`; `c_tok'` is `None` after the
    /// last block.
    pub fn forward(
        &self,
        x: &Tensor,
        ctx: &Tensor,
        c: &Tensor,
    ) -> Result<(Tensor, Option<Tensor>)> {
        let n_ada = if self.attn2.is_some() { 9 } else { 6 };
        let m = modulation(&self.ada, c, n_ada)?;
        let normed = norm(x)?;
        let h = modulate(&normed, &m[0], &m[1])?;
        let (ctx_h, ctx_mod) = match &self.text {
            TextStream::Full { ada, .. } => {
                let cm = modulation(ada, c, 6)?;
                (modulate(&norm(ctx)?, &cm[0], &cm[1])?, Some(cm))
            }
            TextStream::PreOnly { ada } => {
                let cm = modulation(ada, c, 2)?;
                (modulate(&norm(ctx)?, &cm[1], &cm[0])?, None)
            }
        };
        let (attn_x, attn_c) = self.attn.forward(&h, &ctx_h)?;
        let mut x = (x + gate(&m[2], &attn_x)?)?;
        if let Some(attn2) = &self.attn2 {
            let h2 = modulate(&normed, &m[6], &m[7])?;
            x = (x + gate(&m[8], &attn2.forward(&h2)?)?)?;
        }
        let h = modulate(&norm(&x)?, &m[3], &m[4])?;
        let x = (&x + gate(&m[5], &self.ff.forward(&h)?)?)?;
        let ctx = match (&self.text, ctx_mod, attn_c) {
            (TextStream::Full { ff, .. }, Some(cm), Some(attn_c)) => {
                let ctx = (ctx + gate(&cm[2], &attn_c)?)?;
                let h = modulate(&norm(&ctx)?, &cm[3], &cm[4])?;
                Some((&ctx + gate(&cm[5], &ff.forward(&h)?)?)?)
            }
            _ => None,
        };
        Ok((x, ctx))
    }
}
