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
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::attention::{cached_layers, Attention, AttentionSpec, PaddingMask};
use super::config::{check_heads, unsupported};
use drift_core::nn::Linear;
use drift_samplers::dllm::{CacheOp, KvCache};

use super::layers::{linear, RmsNorm, Rotary, SwiGlu, WEIGHT_INIT};
use super::lora::LoraConfig;
use crate::error::Result;

fn default_theta() -> f64 {
    10_000.0
}
fn default_eps() -> f64 {
    1e-6
}
fn default_max_seq() -> usize {
    2048
}
fn default_silu() -> String {
    "silu".into()
}
fn default_mask() -> u32 {
    151_666
}

/// Dream's configuration (Qwen2 keys, `Dream-org/Dream-v0-Instruct-7B/config.json`), Dream,
/// arXiv 2508.15487; DiffuCoder (arXiv 2506.20639) ships the same format.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DreamConfig {
    /// Hidden size.
    pub hidden_size: usize,
    /// MLP width.
    pub intermediate_size: usize,
    /// Number of query heads.
    pub num_attention_heads: usize,
    /// Number of key/value heads (`null` means `num_attention_heads`).
    #[serde(default)]
    pub num_key_value_heads: Option<usize>,
    /// Number of decoder layers.
    pub num_hidden_layers: usize,
    /// Vocabulary size (the logits' width).
    pub vocab_size: usize,
    /// Longest trained sequence (not enforced).
    #[serde(default = "default_max_seq")]
    pub max_position_embeddings: usize,
    /// RoPE base θ (default 10000).
    #[serde(default = "default_theta")]
    pub rope_theta: f64,
    /// RoPE scaling (must be `null` or of type `"default"`).
    #[serde(default)]
    pub rope_scaling: Option<Value>,
    /// RMSNorm epsilon (default 1e-6).
    #[serde(default = "default_eps")]
    pub rms_norm_eps: f64,
    /// MLP activation (must be `"silu"`).
    #[serde(default = "default_silu")]
    pub hidden_act: String,
    /// Whether the LM head is the embedding matrix.
    #[serde(default)]
    pub tie_word_embeddings: bool,
    /// The mask token id (Dream-7B: 151666).
    #[serde(default = "default_mask")]
    pub mask_token_id: u32,
    /// Padding token id.
    #[serde(default)]
    pub pad_token_id: Option<u32>,
    /// Beginning-of-sequence token id.
    #[serde(default)]
    pub bos_token_id: Option<u32>,
    /// End-of-sequence token id.
    #[serde(default)]
    pub eos_token_id: Option<u32>,
    /// `"Dream"`.
    #[serde(default)]
    pub model_type: Option<String>,
    /// `["DreamModel"]`.
    #[serde(default)]
    pub architectures: Option<Vec<String>>,
    /// Keys the forward pass does not read, kept for round trips.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl DreamConfig {
    /// Number of key/value heads.
    pub fn kv_heads(&self) -> usize {
        self.num_key_value_heads.unwrap_or(self.num_attention_heads)
    }

    /// Rejects values the forward pass does not implement, naming the key.
    pub fn validate(&self) -> Result<()> {
        if self.hidden_act != "silu" {
            return Err(unsupported("hidden_act", &self.hidden_act, "\"silu\""));
        }
        if let Some(scaling) = &self.rope_scaling {
            let kind = scaling.get("rope_type").or_else(|| scaling.get("type"));
            if !scaling.is_null() && kind.and_then(Value::as_str) != Some("default") {
                return Err(unsupported("rope_scaling", scaling, "null (plain RoPE)"));
            }
        }
        check_heads(
            "num_attention_heads",
            self.hidden_size,
            self.num_attention_heads,
            self.kv_heads(),
        )
    }
}

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
    pub fn new(cfg: &DreamConfig, vb: &VarBuilder, lora: Option<&LoraConfig>) -> Result<Self> {
        let spec = AttentionSpec {
            hidden: cfg.hidden_size,
            n_heads: cfg.num_attention_heads,
            n_kv_heads: cfg.kv_heads(),
            qkv_bias: true,
            out_bias: false,
        };
        let (attn, mlp) = (vb.pp("self_attn"), vb.pp("mlp"));
        let eps = cfg.rms_norm_eps;
        let (d, m) = (cfg.hidden_size, cfg.intermediate_size);
        Ok(Self {
            input_layernorm: RmsNorm::new(d, eps, vb.pp("input_layernorm"))?,
            self_attn: Attention::new(
                spec,
                [attn.pp("q_proj"), attn.pp("k_proj"), attn.pp("v_proj"), attn.pp("o_proj")],
                lora,
            )?,
            post_attention_layernorm: RmsNorm::new(d, eps, vb.pp("post_attention_layernorm"))?,
            mlp: SwiGlu::new(
                d,
                m,
                false,
                [mlp.pp("gate_proj"), mlp.pp("up_proj"), mlp.pp("down_proj")],
                lora,
            )?,
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
        self.mlp_residual(&x)
    }

    /// [`DreamLayer::forward`] under a Fast-dLLM cache operation (`Attention::forward_cached`).
    pub fn forward_cached(
        &self,
        x: &Tensor,
        rope: &(Tensor, Tensor),
        op: CacheOp,
        layer: &mut Option<(Tensor, Tensor)>,
        mask: Option<&PaddingMask>,
    ) -> Result<Tensor> {
        let h = self.input_layernorm.forward(x)?;
        self.mlp_residual(&(x + self.self_attn.forward_cached(&h, rope, op, layer, mask)?)?)
    }

    /// `x + MLP(post_attention_layernorm x)`, the layer's second half.
    fn mlp_residual(&self, x: &Tensor) -> Result<Tensor> {
        Ok((x + self.mlp.forward(&self.post_attention_layernorm.forward(x)?)?)?)
    }
}

/// The Dream network (`DreamModel`), returning raw (unshifted) logits.
#[derive(Debug, Clone)]
pub struct DreamModel {
    embed_tokens: Embedding,
    layers: Vec<DreamLayer>,
    norm: RmsNorm,
    lm_head: Linear,
    rotary: Rotary,
    dtype: DType,
}

impl DreamModel {
    /// Runs every linear layer in bf16 on AMX tiles (the attention's `q`, `k`, `v` and the
    /// MLP's gate and up stacked, [`Attention::use_bf16_matmuls`]), for a frozen copy.
    pub(crate) fn use_bf16_matmuls(&mut self) -> Result<()> {
        for l in &mut self.layers {
            l.self_attn.use_bf16_matmuls()?;
            l.mlp.use_bf16_matmuls()?;
        }
        self.lm_head = self.lm_head.with_bf16_matmul()?;
        Ok(())
    }

    /// Loads the model from `vb` at the checkpoint root, with LoRA adapters on the layer
    /// projections `lora` targets (never on the head).
    pub fn new(cfg: &DreamConfig, vb: &VarBuilder, lora: Option<&LoraConfig>) -> Result<Self> {
        let m = vb.pp("model");
        let (v, d) = (cfg.vocab_size, cfg.hidden_size);
        let embed = m.pp("embed_tokens").get_with_hints((v, d), "weight", WEIGHT_INIT)?;
        let layers = (0..cfg.num_hidden_layers)
            .map(|i| DreamLayer::new(cfg, &m.pp("layers").pp(i), lora))
            .collect::<Result<Vec<_>>>()?;
        let lm_head = if cfg.tie_word_embeddings {
            Linear::new(embed.clone(), None)
        } else {
            linear(d, v, false, vb.pp("lm_head"))?
        };
        Ok(Self {
            embed_tokens: Embedding::new(embed, d),
            layers,
            norm: RmsNorm::new(d, cfg.rms_norm_eps, m.pp("norm"))?,
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
        self.head(&x)
    }

    /// `lm_head(norm x)` in f32.
    fn head(&self, x: &Tensor) -> Result<Tensor> {
        Ok(self.lm_head.forward(&self.norm.forward(x)?)?.to_dtype(DType::F32)?)
    }

    /// Raw (unshifted) logits `[B, T_in, vocab_size]` (f32) of `ids: [B, T_in]` under a
    /// Fast-dLLM cache operation, as Fast-dLLM's Dream computes them with `past_key_values`
    /// (`dream/model/modeling_dream.py`): `Record` runs the whole sequence and fills `cache`;
    /// `Prefix { start }` runs positions `start..` against the recorded keys and values before
    /// them; `Dual { start }` runs positions `start..start + T_in` against the record with those
    /// positions replaced. Queries and keys take their absolute positions' rotary angles. `mask`
    /// is the whole sequence's `[B, T]` padding mask, the same for every op of one decode.
    pub fn forward_cached(
        &self,
        ids: &Tensor,
        op: CacheOp,
        cache: &mut KvCache,
        mask: Option<&Tensor>,
    ) -> Result<Tensor> {
        let x = cached_layers(
            self.embed_tokens.forward(ids)?,
            self.layers.len(),
            &self.rotary,
            op,
            cache,
            mask,
            |i, x, rope, layer, mask| self.layers[i].forward_cached(x, rope, op, layer, mask),
        )?;
        self.head(&x)
    }
}
