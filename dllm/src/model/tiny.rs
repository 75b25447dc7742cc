//! Named small sizes for drift's shipped tasks and benchmarks, written out as ordinary LLaDA or
//! Dream configs so a model trained from scratch saves and loads like any HF checkpoint.

use serde_json::Map;

use super::config::{DreamConfig, LladaConfig, ModelConfig};
use crate::error::{DllmError, Result};

/// The shape of a transformer, independent of the architecture's key names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TinySpec {
    /// Hidden size.
    pub d_model: usize,
    /// Number of blocks.
    pub n_layers: usize,
    /// Query heads.
    pub n_heads: usize,
    /// Key/value heads (grouped-query attention when below `n_heads`).
    pub n_kv_heads: usize,
    /// MLP width (SwiGLU: gate and up are `d_model × mlp`, down is `mlp × d_model`).
    pub mlp_hidden: usize,
    /// Longest sequence written into the config (informative; RoPE extends).
    pub max_seq_len: usize,
}

/// Named sizes. Parameter counts are for a 128-symbol vocabulary with an untied LM head, as
/// computed by [`TinySpec::num_parameters`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TinySize {
    /// d 128, 4 layers, 4 heads, MLP 512: about 1.1 M parameters.
    Nano,
    /// d 256, 4 layers, 4 heads, MLP 512: about 2.7 M parameters.
    Micro,
    /// d 512, 12 layers, 8 heads, MLP 2048: about 50 M parameters (benchmarks).
    Small50M,
}

impl TinySize {
    /// Every named size.
    pub const ALL: [TinySize; 3] = [TinySize::Nano, TinySize::Micro, TinySize::Small50M];

    /// The size's name (`"nano"`, `"micro"`, `"small-50m"`).
    pub fn name(self) -> &'static str {
        match self {
            TinySize::Nano => "nano",
            TinySize::Micro => "micro",
            TinySize::Small50M => "small-50m",
        }
    }

    /// The size named `name`, or an error listing the names.
    pub fn from_name(name: &str) -> Result<Self> {
        Self::ALL.into_iter().find(|s| s.name() == name).ok_or_else(|| DllmError::Config {
            key: "size",
            value: format!("{name:?}"),
            expected: "one of \"nano\", \"micro\", \"small-50m\"".into(),
        })
    }

    /// The shape of this size.
    pub fn spec(self) -> TinySpec {
        let (d_model, n_layers, n_heads, mlp_hidden) = match self {
            TinySize::Nano => (128, 4, 4, 512),
            TinySize::Micro => (256, 4, 4, 512),
            TinySize::Small50M => (512, 12, 8, 2048),
        };
        TinySpec { d_model, n_layers, n_heads, n_kv_heads: n_heads, mlp_hidden, max_seq_len: 512 }
    }
}

/// The special token ids and vocabulary size a fresh config is written with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VocabSpec {
    /// Number of token ids (the logits' width).
    pub vocab_size: usize,
    /// Mask token id.
    pub mask_id: u32,
    /// Padding token id.
    pub pad_id: u32,
    /// Beginning-of-sequence token id.
    pub bos_id: u32,
    /// End-of-sequence token id.
    pub eos_id: u32,
}

impl TinySpec {
    /// Parameters of this shape with an untied LM head:
    /// `2 V d + L (2 d² + 2 d·d_kv + 3 d m + 2 d) + d` (`d_kv = d · kv/h`, biases excluded).
    pub fn num_parameters(&self, vocab_size: usize) -> usize {
        let d = self.d_model;
        let d_kv = d / self.n_heads * self.n_kv_heads;
        let per_layer = 2 * d * d + 2 * d * d_kv + 3 * d * self.mlp_hidden + 2 * d;
        2 * vocab_size * d + self.n_layers * per_layer + d
    }

    /// A LLaDA config of this shape (RoPE θ 10000, eps 1e-5, untied head, no biases).
    pub fn llada(&self, vocab: VocabSpec) -> ModelConfig {
        ModelConfig::Llada(LladaConfig {
            d_model: self.d_model,
            n_heads: self.n_heads,
            n_kv_heads: Some(self.n_kv_heads),
            n_layers: self.n_layers,
            mlp_ratio: 4,
            mlp_hidden_size: Some(self.mlp_hidden),
            vocab_size: vocab.vocab_size,
            embedding_size: Some(vocab.vocab_size),
            max_sequence_length: self.max_seq_len,
            rope: true,
            rope_theta: 10_000.0,
            rms_norm_eps: 1e-5,
            layer_norm_type: "rms".into(),
            layer_norm_with_affine: true,
            block_type: "llama".into(),
            activation_type: "silu".into(),
            include_bias: false,
            include_qkv_bias: Some(false),
            weight_tying: false,
            scale_logits: false,
            input_emb_norm: false,
            attention_layer_norm: false,
            alibi: false,
            bias_for_layer_norm: Some(false),
            multi_query_attention: None,
            mask_token_id: vocab.mask_id,
            eos_token_id: Some(vocab.eos_id),
            pad_token_id: Some(vocab.pad_id),
            model_type: Some("llada".into()),
            architectures: Some(vec!["LLaDAModelLM".into()]),
            extra: Map::new(),
        })
    }

    /// A Dream config of this shape (RoPE θ 10000, eps 1e-6, q/k/v biases, untied head).
    pub fn dream(&self, vocab: VocabSpec) -> ModelConfig {
        ModelConfig::Dream(DreamConfig {
            hidden_size: self.d_model,
            intermediate_size: self.mlp_hidden,
            num_attention_heads: self.n_heads,
            num_key_value_heads: Some(self.n_kv_heads),
            num_hidden_layers: self.n_layers,
            vocab_size: vocab.vocab_size,
            max_position_embeddings: self.max_seq_len,
            rope_theta: 10_000.0,
            rope_scaling: None,
            rms_norm_eps: 1e-6,
            hidden_act: "silu".into(),
            tie_word_embeddings: false,
            mask_token_id: vocab.mask_id,
            pad_token_id: Some(vocab.pad_id),
            bos_token_id: Some(vocab.bos_id),
            eos_token_id: Some(vocab.eos_id),
            model_type: Some("Dream".into()),
            architectures: Some(vec!["DreamModel".into()]),
            extra: Map::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_sizes_have_the_documented_parameter_counts() {
        let count = |s: TinySize| s.spec().num_parameters(128) as f64 / 1e6;
        assert!((1.0..1.3).contains(&count(TinySize::Nano)), "{}", count(TinySize::Nano));
        assert!((2.5..3.0).contains(&count(TinySize::Micro)), "{}", count(TinySize::Micro));
        assert!((49.0..52.0).contains(&count(TinySize::Small50M)), "{}", count(TinySize::Small50M));
        assert_eq!(TinySize::from_name("micro").unwrap(), TinySize::Micro);
        assert!(TinySize::from_name("huge").unwrap_err().to_string().contains("huge"));
    }
}
