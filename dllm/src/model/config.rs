//! Model configurations, deserialised straight from the `config.json` that the Hugging Face
//! checkpoints ship, plus named tiny sizes for drift's shipped tasks.
//!
//! HF configs carry keys the forward pass never reads (`auto_map`, `init_fn`, …), so unlike
//! drift's own TOML configs these structs accept unknown keys; they keep them in `extra` so that
//! [`save_pretrained`](crate::model::DiffusionLm::save_pretrained) writes them back unchanged.
//! Values that change the forward pass but are not implemented are rejected by `validate` with
//! a message naming the key.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{DllmError, Result};

fn default_true() -> bool {
    true
}
fn default_mlp_ratio() -> usize {
    4
}
fn default_llada_theta() -> f64 {
    10_000.0
}
fn default_llada_eps() -> f64 {
    1e-5
}
fn default_dream_eps() -> f64 {
    1e-6
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
fn default_llada_mask() -> u32 {
    126_336
}
fn default_dream_mask() -> u32 {
    151_666
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
    #[serde(default = "default_llada_theta")]
    pub rope_theta: f64,
    /// RMSNorm epsilon (default 1e-5).
    #[serde(default = "default_llada_eps")]
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
    #[serde(default = "default_llada_mask")]
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
    #[serde(default = "default_llada_theta")]
    pub rope_theta: f64,
    /// RoPE scaling (must be `null` or of type `"default"`).
    #[serde(default)]
    pub rope_scaling: Option<Value>,
    /// RMSNorm epsilon (default 1e-6).
    #[serde(default = "default_dream_eps")]
    pub rms_norm_eps: f64,
    /// MLP activation (must be `"silu"`).
    #[serde(default = "default_silu")]
    pub hidden_act: String,
    /// Whether the LM head is the embedding matrix.
    #[serde(default)]
    pub tie_word_embeddings: bool,
    /// The mask token id (Dream-7B: 151666).
    #[serde(default = "default_dream_mask")]
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

/// Which of the two implemented architectures a checkpoint is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Architecture {
    /// LLaDA (arXiv 2502.09992): no logit shift.
    Llada,
    /// Dream / DiffuCoder (arXiv 2508.15487, 2506.20639): Qwen2 layout, shifted logits.
    Dream,
}

/// A parsed config.json of either architecture.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelConfig {
    /// A LLaDA config.
    Llada(LladaConfig),
    /// A Dream config.
    Dream(DreamConfig),
}

fn unsupported(key: &'static str, value: impl std::fmt::Debug, expected: &str) -> DllmError {
    DllmError::Config { key, value: format!("{value:?}"), expected: expected.to_string() }
}

fn check_heads(key: &'static str, hidden: usize, heads: usize, kv: usize) -> Result<()> {
    if heads == 0 || hidden % heads != 0 || (hidden / heads) % 2 != 0 {
        return Err(unsupported(
            key,
            heads,
            "a head count dividing the hidden size into even head dims",
        ));
    }
    if kv == 0 || heads % kv != 0 {
        return Err(unsupported(key, kv, "a key/value head count dividing the query head count"));
    }
    Ok(())
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

impl ModelConfig {
    /// Reads and validates `config.json`, detecting the architecture from `model_type`
    /// (`"llada"`, `"Dream"`, case-insensitive) or else `architectures`.
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(DllmError::io(path))?;
        let value: Value = serde_json::from_str(&text).map_err(DllmError::json(path))?;
        Self::from_value(value, path)
    }

    /// Parses an already-read config.json (`path` is only used in messages).
    pub fn from_value(value: Value, path: &Path) -> Result<Self> {
        let cfg = match detect(&value) {
            Some(Architecture::Llada) => {
                ModelConfig::Llada(serde_json::from_value(value).map_err(DllmError::json(path))?)
            }
            Some(Architecture::Dream) => {
                ModelConfig::Dream(serde_json::from_value(value).map_err(DllmError::json(path))?)
            }
            None => {
                let model_type = value.get("model_type").and_then(Value::as_str).map(String::from);
                let architectures = value
                    .get("architectures")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(|s| s.as_str().map(String::from)).collect())
                    .unwrap_or_default();
                return Err(DllmError::UnknownArchitecture {
                    path: path.to_path_buf(),
                    model_type,
                    architectures,
                });
            }
        };
        cfg.validate()?;
        Ok(cfg)
    }

    /// The architecture.
    pub fn architecture(&self) -> Architecture {
        match self {
            ModelConfig::Llada(_) => Architecture::Llada,
            ModelConfig::Dream(_) => Architecture::Dream,
        }
    }
    /// The mask token id.
    pub fn mask_id(&self) -> u32 {
        match self {
            ModelConfig::Llada(c) => c.mask_token_id,
            ModelConfig::Dream(c) => c.mask_token_id,
        }
    }
    /// The logits' width.
    pub fn logit_width(&self) -> usize {
        match self {
            ModelConfig::Llada(c) => c.logit_width(),
            ModelConfig::Dream(c) => c.vocab_size,
        }
    }
    /// The longest sequence (prompt + completion) the checkpoint declares it handles: LLaDA's
    /// `max_sequence_length`, Dream's `max_position_embeddings`.
    pub fn max_sequence_length(&self) -> usize {
        match self {
            ModelConfig::Llada(c) => c.max_sequence_length,
            ModelConfig::Dream(c) => c.max_position_embeddings,
        }
    }

    /// A lower estimate of the f32 bytes one forward pass over `rows × seq` tokens holds at
    /// once: the logits (`rows·seq·V`), one layer's attention scores (`rows·heads·seq²`) and
    /// its activations (`rows·seq·8d`, the residual, q/k/v and the MLP's hidden state), times 4
    /// bytes. Saturates instead of overflowing. Used to refuse a batch that cannot fit before
    /// any work starts.
    pub fn forward_bytes(&self, rows: usize, seq: usize) -> u64 {
        let (d, heads) = match self {
            ModelConfig::Llada(c) => (c.d_model, c.n_heads),
            ModelConfig::Dream(c) => (c.hidden_size, c.num_attention_heads),
        };
        let (rows, seq) = (rows as u64, seq as u64);
        let tokens = rows.saturating_mul(seq);
        let logits = tokens.saturating_mul(self.logit_width() as u64);
        let scores = rows.saturating_mul(heads as u64).saturating_mul(seq.saturating_mul(seq));
        let acts = tokens.saturating_mul(8 * d as u64);
        logits.saturating_add(scores).saturating_add(acts).saturating_mul(4)
    }

    /// Validates the inner config.
    pub fn validate(&self) -> Result<()> {
        match self {
            ModelConfig::Llada(c) => c.validate(),
            ModelConfig::Dream(c) => c.validate(),
        }
    }
    /// The config as the JSON object a checkpoint's config.json holds.
    pub fn to_json(&self) -> Result<Value> {
        let v = match self {
            ModelConfig::Llada(c) => serde_json::to_value(c),
            ModelConfig::Dream(c) => serde_json::to_value(c),
        };
        v.map_err(|e| DllmError::Json { path: "config.json".into(), message: e.to_string() })
    }
}

fn detect(value: &Value) -> Option<Architecture> {
    let from_name = |s: &str| match s.to_ascii_lowercase().as_str() {
        "llada" | "lladamodellm" => Some(Architecture::Llada),
        "dream" | "dreammodel" => Some(Architecture::Dream),
        _ => None,
    };
    if let Some(arch) = value.get("model_type").and_then(Value::as_str).and_then(from_name) {
        return Some(arch);
    }
    value.get("architectures")?.as_array()?.iter().filter_map(Value::as_str).find_map(from_name)
}
