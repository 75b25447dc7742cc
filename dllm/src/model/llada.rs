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
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::attention::{cached_layers, Attention, AttentionSpec, PaddingMask};
use super::config::{check_heads, unsupported};
use drift_core::nn::Linear;

use drift_samplers::dllm::{CacheOp, KvCache};

use super::layers::{linear, RmsNorm, Rotary, SwiGlu, WEIGHT_INIT};
use super::lora::LoraConfig;
use crate::error::Result;

fn default_true() -> bool {
    true
}
fn default_mlp_ratio() -> usize {
    4
}
fn default_theta() -> f64 {
    10_000.0
}
fn default_eps() -> f64 {
    1e-5
}
fn default_max_seq() -> usize {
    2048
}
fn default_rms() -> String {
    "rms".into()
}
fn default_llama() -> String {
    "llama".into()
}
fn default_silu() -> String {
    "silu".into()
}
fn default_mask() -> u32 {
    126_336
}

/// LLaDA's configuration (`GSAI-ML/LLaDA-8B-Instruct/config.json`, an OLMo-style config),
/// LLaDA, arXiv 2502.09992.
///
/// Only the llama block (RMSNorm, RoPE, SwiGLU MLP with separate gate and up projections) is
/// implemented, which is what every released LLaDA checkpoint uses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LladaConfig {
    /// Hidden size.
    pub d_model: usize,
    /// Number of query heads.
    pub n_heads: usize,
    /// Number of key/value heads (`null` means `n_heads`).
    #[serde(default)]
    pub n_kv_heads: Option<usize>,
    /// Number of transformer blocks.
    pub n_layers: usize,
    /// MLP width as a multiple of `d_model`, used when `mlp_hidden_size` is `null` (default 4).
    #[serde(default = "default_mlp_ratio")]
    pub mlp_ratio: usize,
    /// MLP width; takes precedence over `mlp_ratio · d_model`.
    #[serde(default)]
    pub mlp_hidden_size: Option<usize>,
    /// Tokenizer vocabulary size.
    pub vocab_size: usize,
    /// Rows of the embedding and LM-head matrices (≥ `vocab_size`, padded); `null` means
    /// `vocab_size`. The logits have this width.
    #[serde(default)]
    pub embedding_size: Option<usize>,
    /// Longest sequence the checkpoint was trained on (not enforced: RoPE extends).
    #[serde(default = "default_max_seq")]
    pub max_sequence_length: usize,
    /// Whether RoPE is used (must be true).
    #[serde(default = "default_true")]
    pub rope: bool,
    /// RoPE base θ (LLaDA-8B: 500000).
    #[serde(default = "default_theta")]
    pub rope_theta: f64,
    /// RMSNorm epsilon (default 1e-5).
    #[serde(default = "default_eps")]
    pub rms_norm_eps: f64,
    /// Normalisation layer (must be `"rms"`).
    #[serde(default = "default_rms")]
    pub layer_norm_type: String,
    /// Whether norms have a gain (must be true).
    #[serde(default = "default_true")]
    pub layer_norm_with_affine: bool,
    /// Block layout (must be `"llama"`).
    #[serde(default = "default_llama")]
    pub block_type: String,
    /// MLP activation (must be `"silu"`, with the separate `up_proj`).
    #[serde(default = "default_silu")]
    pub activation_type: String,
    /// Biases on every linear layer.
    #[serde(default)]
    pub include_bias: bool,
    /// Biases on the q/k/v projections (`null` means `include_bias`).
    #[serde(default)]
    pub include_qkv_bias: Option<bool>,
    /// Whether the LM head is the transposed embedding matrix.
    #[serde(default)]
    pub weight_tying: bool,
    /// Whether logits are multiplied by `1/√d_model`.
    #[serde(default)]
    pub scale_logits: bool,
    /// Embedding scaling (must be false).
    #[serde(default)]
    pub input_emb_norm: bool,
    /// Query/key normalisation (must be false).
    #[serde(default)]
    pub attention_layer_norm: bool,
    /// ALiBi position bias (must be false).
    #[serde(default)]
    pub alibi: bool,
    /// Norm bias (must be false or null).
    #[serde(default)]
    pub bias_for_layer_norm: Option<bool>,
    /// Multi-query attention (one kv head) when true; overrides `n_kv_heads`.
    #[serde(default)]
    pub multi_query_attention: Option<bool>,
    /// The mask token id (LLaDA-8B: 126336).
    #[serde(default = "default_mask")]
    pub mask_token_id: u32,
    /// End-of-sequence token id.
    #[serde(default)]
    pub eos_token_id: Option<u32>,
    /// Padding token id.
    #[serde(default)]
    pub pad_token_id: Option<u32>,
    /// `"llada"`.
    #[serde(default)]
    pub model_type: Option<String>,
    /// `["LLaDAModelLM"]`.
    #[serde(default)]
    pub architectures: Option<Vec<String>>,
    /// Keys the forward pass does not read, kept for round trips.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl LladaConfig {
    /// Number of key/value heads (1 under multi-query attention, else `n_kv_heads` or
    /// `n_heads`).
    pub fn kv_heads(&self) -> usize {
        if self.multi_query_attention == Some(true) {
            1
        } else {
            self.n_kv_heads.unwrap_or(self.n_heads)
        }
    }
    /// MLP width: `mlp_hidden_size`, else `mlp_ratio · d_model`.
    pub fn mlp_width(&self) -> usize {
        self.mlp_hidden_size.unwrap_or(self.mlp_ratio * self.d_model)
    }
    /// Rows of the embedding / LM head, the logits' width.
    pub fn logit_width(&self) -> usize {
        self.embedding_size.unwrap_or(self.vocab_size)
    }
    /// Whether q/k/v carry biases.
    pub fn qkv_bias(&self) -> bool {
        self.include_qkv_bias.unwrap_or(self.include_bias)
    }

    /// Rejects values the forward pass does not implement, naming the key.
    pub fn validate(&self) -> Result<()> {
        if !self.rope {
            return Err(unsupported(
                "rope",
                self.rope,
                "true (only RoPE positions are implemented)",
            ));
        }
        if self.layer_norm_type != "rms" {
            return Err(unsupported("layer_norm_type", &self.layer_norm_type, "\"rms\""));
        }
        if !self.layer_norm_with_affine {
            return Err(unsupported("layer_norm_with_affine", false, "true"));
        }
        if self.bias_for_layer_norm == Some(true) {
            return Err(unsupported("bias_for_layer_norm", true, "false or null"));
        }
        if self.block_type != "llama" {
            return Err(unsupported("block_type", &self.block_type, "\"llama\""));
        }
        if self.activation_type != "silu" {
            return Err(unsupported("activation_type", &self.activation_type, "\"silu\""));
        }
        for (key, on) in [
            ("alibi", self.alibi),
            ("input_emb_norm", self.input_emb_norm),
            ("attention_layer_norm", self.attention_layer_norm),
        ] {
            if on {
                return Err(unsupported(key, true, "false (not implemented)"));
            }
        }
        if self.logit_width() < self.vocab_size {
            return Err(unsupported("embedding_size", self.embedding_size, "at least vocab_size"));
        }
        check_heads("n_heads", self.d_model, self.n_heads, self.kv_heads())
    }
}

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
    pub fn new(cfg: &LladaConfig, vb: &VarBuilder, lora: Option<&LoraConfig>) -> Result<Self> {
        let spec = AttentionSpec {
            hidden: cfg.d_model,
            n_heads: cfg.n_heads,
            n_kv_heads: cfg.kv_heads(),
            qkv_bias: cfg.qkv_bias(),
            out_bias: cfg.include_bias,
        };
        let eps = cfg.rms_norm_eps;
        Ok(Self {
            attn_norm: RmsNorm::new(cfg.d_model, eps, vb.pp("attn_norm"))?,
            attn: Attention::new(
                spec,
                [vb.pp("q_proj"), vb.pp("k_proj"), vb.pp("v_proj"), vb.pp("attn_out")],
                lora,
            )?,
            ff_norm: RmsNorm::new(cfg.d_model, eps, vb.pp("ff_norm"))?,
            mlp: SwiGlu::new(
                cfg.d_model,
                cfg.mlp_width(),
                cfg.include_bias,
                [vb.pp("ff_proj"), vb.pp("up_proj"), vb.pp("ff_out")],
                lora,
            )?,
        })
    }

    /// [`LladaBlock::forward`] under a Fast-dLLM cache operation (`Attention::forward_cached`).
    pub fn forward_cached(
        &self,
        x: &Tensor,
        rope: &(Tensor, Tensor),
        op: CacheOp,
        layer: &mut Option<(Tensor, Tensor)>,
        mask: Option<&PaddingMask>,
    ) -> Result<Tensor> {
        let a = self.attn.forward_cached(&self.attn_norm.forward(x)?, rope, op, layer, mask)?;
        self.mlp_residual(&(x + a)?)
    }

    /// `x + MLP(ff_norm x)`, the block's second half.
    fn mlp_residual(&self, x: &Tensor) -> Result<Tensor> {
        Ok((x + self.mlp.forward(&self.ff_norm.forward(x)?)?)?)
    }

    /// Pre-norm residual block on `x: [B, T, d_model]`.
    pub fn forward(
        &self,
        x: &Tensor,
        rope: &(Tensor, Tensor),
        mask: Option<&PaddingMask>,
    ) -> Result<Tensor> {
        self.mlp_residual(&(x + self.attn.forward(&self.attn_norm.forward(x)?, rope, mask)?)?)
    }
}

/// The LLaDA network (`LLaDAModelLM`), returning raw logits.
#[derive(Debug, Clone)]
pub struct LladaModel {
    wte: Embedding,
    blocks: Vec<LladaBlock>,
    ln_f: RmsNorm,
    lm_head: Linear,
    rotary: Rotary,
    logit_scale: Option<f64>,
    dtype: DType,
}

impl LladaModel {
    /// Runs every linear layer in bf16 on AMX tiles (the attention's `q`, `k`, `v` and the
    /// MLP's gate and up stacked, [`Attention::use_bf16_matmuls`]), for a frozen copy.
    pub(crate) fn use_bf16_matmuls(&mut self) -> Result<()> {
        for b in &mut self.blocks {
            b.attn.use_bf16_matmuls()?;
            b.mlp.use_bf16_matmuls()?;
        }
        self.lm_head = self.lm_head.with_bf16_matmul()?;
        Ok(())
    }

    /// Loads the model from `vb` at the checkpoint root (the names start with `model.`), with
    /// LoRA adapters on the block projections `lora` targets (never on the head).
    pub fn new(cfg: &LladaConfig, vb: &VarBuilder, lora: Option<&LoraConfig>) -> Result<Self> {
        let t = vb.pp("model").pp("transformer");
        let width = cfg.logit_width();
        let wte = t.pp("wte").get_with_hints((width, cfg.d_model), "weight", WEIGHT_INIT)?;
        let blocks = (0..cfg.n_layers)
            .map(|i| LladaBlock::new(cfg, &t.pp("blocks").pp(i), lora))
            .collect::<Result<Vec<_>>>()?;
        let lm_head = if cfg.weight_tying {
            Linear::new(wte.clone(), None)
        } else {
            linear(cfg.d_model, width, cfg.include_bias, t.pp("ff_out"))?
        };
        Ok(Self {
            wte: Embedding::new(wte, cfg.d_model),
            blocks,
            ln_f: RmsNorm::new(cfg.d_model, cfg.rms_norm_eps, t.pp("ln_f"))?,
            lm_head,
            rotary: Rotary::new(cfg.d_model / cfg.n_heads, cfg.rope_theta, vb.device())?,
            logit_scale: cfg.scale_logits.then(|| 1.0 / (cfg.d_model as f64).sqrt()),
            dtype: vb.dtype(),
        })
    }

    /// Raw logits `[B, T_in, embedding_size]` (f32) of `ids: [B, T_in]` under a Fast-dLLM cache
    /// operation: `Record` runs the whole sequence and fills `cache`; `Prefix` and `Dual` run
    /// positions `start..start + T_in` of the recorded sequence against it. `mask` is the whole
    /// sequence's `[B, T]` attention mask (left padding hidden, as [`LladaModel::forward`]),
    /// the same for every op of one decode.
    pub fn forward_cached(
        &self,
        ids: &Tensor,
        op: CacheOp,
        cache: &mut KvCache,
        mask: Option<&Tensor>,
    ) -> Result<Tensor> {
        let x = cached_layers(
            self.wte.forward(ids)?,
            self.blocks.len(),
            &self.rotary,
            op,
            cache,
            mask,
            |i, x, rope, layer, mask| self.blocks[i].forward_cached(x, rope, op, layer, mask),
        )?;
        self.head(&x)
    }

    /// `lm_head(ln_f x)`, scaled when the config asks, in f32.
    fn head(&self, x: &Tensor) -> Result<Tensor> {
        let mut logits = self.lm_head.forward(&self.ln_f.forward(x)?)?;
        if let Some(s) = self.logit_scale {
            logits = (logits * s)?;
        }
        Ok(logits.to_dtype(DType::F32)?)
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
        self.head(&x)
    }
}
