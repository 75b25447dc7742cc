//! [`ModelConfig`]: a checkpoint's `config.json` of either architecture, detected from its
//! `model_type` or `architectures`. Each architecture's own config lives beside its network, in
//! the candle-transformers layout ([`LladaConfig`] in `llada.rs`, [`DreamConfig`] in
//! `dream.rs`).
//!
//! HF configs carry keys the forward pass never reads (`auto_map`, `init_fn`, …), so unlike
//! drift's own TOML configs these structs accept unknown keys; they keep them in `extra` so that
//! [`save_pretrained`](crate::model::DiffusionLm::save_pretrained) writes them back unchanged.
//! Values that change the forward pass but are not implemented are rejected by `validate` with
//! a message naming the key.

use std::path::Path;

use drift_samplers::dllm::Padding;
use serde_json::{Map, Value};

use crate::error::{DllmError, Result};

/// drift's config.json key saying how the model sees left padding ([`ModelConfig::padding`]).
pub const PADDING_KEY: &str = "drift_padding";

pub use super::dream::DreamConfig;
pub use super::llada::LladaConfig;

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

pub(super) fn unsupported(
    key: &'static str,
    value: impl std::fmt::Debug,
    expected: &str,
) -> DllmError {
    DllmError::Config { key, value: format!("{value:?}"), expected: expected.to_string() }
}

pub(super) fn check_heads(key: &'static str, hidden: usize, heads: usize, kv: usize) -> Result<()> {
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

    /// Validates the inner config and drift's own keys.
    pub fn validate(&self) -> Result<()> {
        match self {
            ModelConfig::Llada(c) => c.validate(),
            ModelConfig::Dream(c) => c.validate(),
        }?;
        if let Some(v) = self.extra().get(PADDING_KEY) {
            if serde_json::from_value::<Padding>(v.clone()).is_err() {
                return Err(DllmError::Config {
                    key: PADDING_KEY,
                    value: v.to_string(),
                    expected: "\"masked\" or \"visible\"".into(),
                });
            }
        }
        Ok(())
    }

    fn extra(&self) -> &Map<String, Value> {
        match self {
            ModelConfig::Llada(c) => &c.extra,
            ModelConfig::Dream(c) => &c.extra,
        }
    }

    /// How the model was trained to see left padding, so every decode, evaluation and
    /// estimator pass shows it the same way: config.json's `"drift_padding"` (written by
    /// `drift pretrain dllm`); [`Padding::Masked`] when absent, as released LLaDA / Dream
    /// checkpoints are run (an attention mask hides padding). An invalid value is refused by
    /// [`Self::validate`] at load.
    pub fn padding(&self) -> Padding {
        self.extra()
            .get(PADDING_KEY)
            .and_then(|v| serde_json::from_value(v.clone()).ok())
            .unwrap_or_default()
    }

    /// The config with `"drift_padding"` set to `padding`.
    pub fn with_padding(mut self, padding: Padding) -> Self {
        let extra = match &mut self {
            ModelConfig::Llada(c) => &mut c.extra,
            ModelConfig::Dream(c) => &mut c.extra,
        };
        let value = serde_json::to_value(padding).expect("a unit enum serializes");
        extra.insert(PADDING_KEY.into(), value);
        self
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
