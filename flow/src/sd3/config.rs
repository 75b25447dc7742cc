//! The configuration of an SD3 / SD3.5 MMDiT, read from the diffusers `transformer/config.json`.

use serde::{Deserialize, Serialize};

use crate::error::{FlowModelError, Result};

/// The fields of diffusers' `SD3Transformer2DModel` config (Esser et al., "Scaling Rectified
/// Flow Transformers", arXiv 2403.03206; SD3.5's MMDiT-X adds `dual_attention_layers` and QK
/// RMS-norm). Keys drift does not use (`_class_name`, `_diffusers_version`, …) are ignored; a
/// missing key takes diffusers' default, which is SD3-Medium's value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Sd3Config {
    /// Latent side the position embedding is centred for (`height // patch_size` is its base
    /// size); default 128.
    pub sample_size: usize,
    /// Side of a square patch; default 2.
    pub patch_size: usize,
    /// Latent channels in; default 16.
    pub in_channels: usize,
    /// Joint transformer blocks; default 18.
    pub num_layers: usize,
    /// Channels per attention head; default 64.
    pub attention_head_dim: usize,
    /// Attention heads; default 18. The width is `heads · head_dim`.
    pub num_attention_heads: usize,
    /// Width of the text encoder states (`encoder_hidden_states`); default 4096 (T5-XXL).
    pub joint_attention_dim: usize,
    /// Width the context embedder projects the text states to; must equal the width. Default
    /// 1152.
    pub caption_projection_dim: usize,
    /// Width of the pooled text embedding (CLIP-L ⊕ CLIP-G); default 2048.
    pub pooled_projection_dim: usize,
    /// Latent channels out; default 16.
    pub out_channels: usize,
    /// Side of the stored position-embedding grid, cropped at the centre to the latent's patch
    /// grid; default 96.
    pub pos_embed_max_size: usize,
    /// Blocks with MMDiT-X's second, image-only self-attention (`attn2`); default none (SD3).
    pub dual_attention_layers: Vec<usize>,
    /// `"rms_norm"` to RMS-normalise queries and keys per head (SD3.5); default none (SD3).
    pub qk_norm: Option<String>,
}

impl Default for Sd3Config {
    fn default() -> Self {
        Self {
            sample_size: 128,
            patch_size: 2,
            in_channels: 16,
            num_layers: 18,
            attention_head_dim: 64,
            num_attention_heads: 18,
            joint_attention_dim: 4096,
            caption_projection_dim: 1152,
            pooled_projection_dim: 2048,
            out_channels: 16,
            pos_embed_max_size: 96,
            dual_attention_layers: Vec::new(),
            qk_norm: None,
        }
    }
}

impl Sd3Config {
    /// Stable Diffusion 3.5 Medium's transformer config (2.5 B parameters): 24 blocks of width
    /// 1536, MMDiT-X attention in blocks 0–12, QK RMS-norm, a 384-side position grid.
    #[must_use]
    pub fn sd35_medium() -> Self {
        Self {
            num_layers: 24,
            num_attention_heads: 24,
            caption_projection_dim: 1536,
            pos_embed_max_size: 384,
            dual_attention_layers: (0..=12).collect(),
            qk_norm: Some("rms_norm".into()),
            ..Self::default()
        }
    }

    /// The model width, `heads · head_dim`.
    #[must_use]
    pub fn width(&self) -> usize {
        self.num_attention_heads * self.attention_head_dim
    }

    /// Whether queries and keys are RMS-normalised.
    #[must_use]
    pub fn rms_qk_norm(&self) -> bool {
        self.qk_norm.is_some()
    }

    /// Checks the values drift relies on, naming the field at fault.
    pub fn validate(&self) -> Result<()> {
        let bad = |field: &'static str, value: String, expected: String| {
            Err(FlowModelError::Config { field, value, expected })
        };
        let positive = [
            ("sample_size", self.sample_size),
            ("patch_size", self.patch_size),
            ("in_channels", self.in_channels),
            ("num_layers", self.num_layers),
            ("attention_head_dim", self.attention_head_dim),
            ("num_attention_heads", self.num_attention_heads),
            ("joint_attention_dim", self.joint_attention_dim),
            ("pooled_projection_dim", self.pooled_projection_dim),
            ("out_channels", self.out_channels),
        ];
        for (field, v) in positive {
            if v == 0 {
                return bad(field, "0".into(), "a positive integer".into());
            }
        }
        if self.caption_projection_dim != self.width() {
            return bad(
                "caption_projection_dim",
                self.caption_projection_dim.to_string(),
                format!("the width num_attention_heads · attention_head_dim = {}", self.width()),
            );
        }
        if let Some(n) = &self.qk_norm {
            if n != "rms_norm" {
                return bad("qk_norm", format!("{n:?}"), "null or \"rms_norm\"".into());
            }
        }
        if let Some(&l) = self.dual_attention_layers.iter().find(|&&l| l >= self.num_layers) {
            return bad(
                "dual_attention_layers",
                l.to_string(),
                format!("block indices below num_layers = {}", self.num_layers),
            );
        }
        if self.pos_embed_max_size * self.patch_size < self.sample_size {
            return bad(
                "pos_embed_max_size",
                self.pos_embed_max_size.to_string(),
                format!(
                    "at least sample_size / patch_size = {}",
                    self.sample_size / self.patch_size
                ),
            );
        }
        Ok(())
    }
}

/// How `drift train flow` trains an SD3 / SD3.5 base (the `[sd3]` table of its config).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Sd3TrainConfig {
    /// A prompt-embedding cache to use (`prompts.jsonl` + `embeddings.safetensors`, see
    /// `PromptEmbeddings`) holding every training and evaluation prompt and the empty prompt.
    /// Default none: the run encodes its prompts once with the folder's own text encoders
    /// (`text_encoder{,_2,_3}/`) and keeps the cache in `embeddings/` of the run directory.
    pub embeddings: Option<std::path::PathBuf>,
    /// T5 tokens per prompt when encoding; default 128 (flow_grpo's; diffusers' default is
    /// 256).
    pub max_sequence_length: usize,
    /// The adapters; default flow_grpo's (r 32, α 64, the attention projections).
    pub lora: super::LoraConfig,
    /// Latent height and width; default 64 (512² images through SD3's 8× VAE).
    pub latent_side: usize,
    /// Weight dtype of the frozen base: `"f32"` (default), `"bf16"` or `"f16"` (GPU). The
    /// adapters and the log-prob arithmetic stay f32.
    pub dtype: String,
}

impl Default for Sd3TrainConfig {
    fn default() -> Self {
        Self {
            embeddings: None,
            max_sequence_length: 128,
            lora: super::LoraConfig::default(),
            latent_side: 64,
            dtype: "f32".into(),
        }
    }
}

impl Sd3TrainConfig {
    /// The base weights' dtype, naming a bad `sd3.dtype`.
    pub fn dtype(&self) -> Result<candle_core::DType> {
        match self.dtype.as_str() {
            "f32" => Ok(candle_core::DType::F32),
            "bf16" => Ok(candle_core::DType::BF16),
            "f16" => Ok(candle_core::DType::F16),
            other => Err(FlowModelError::Config {
                field: "sd3.dtype",
                value: format!("{other:?}"),
                expected: "\"f32\", \"bf16\" or \"f16\"".into(),
            }),
        }
    }

    /// Checks the dtype, the LoRA, the T5 length and the latent size.
    pub fn validate(&self) -> Result<()> {
        self.dtype()?;
        self.lora.validate()?;
        if self.max_sequence_length == 0 {
            return Err(FlowModelError::Config {
                field: "sd3.max_sequence_length",
                value: "0".into(),
                expected: "a positive number of T5 tokens".into(),
            });
        }
        if self.latent_side == 0 {
            return Err(FlowModelError::Config {
                field: "sd3.latent_side",
                value: "0".into(),
                expected: "a positive multiple of the patch size".into(),
            });
        }
        Ok(())
    }
}
