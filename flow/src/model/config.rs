//! Configuration of the small DiT.

use serde::{Deserialize, Serialize};

use crate::error::{FlowModelError, Result};

/// A small conditional DiT over pixel-space images (Peebles & Xie, arXiv 2212.09748), with the
/// prompt's tokens joined to the image tokens in one attention sequence (as SD3's MMDiT,
/// arXiv 2403.03206, with shared weights) and adaLN-Zero modulation on `σ` and the pooled
/// prompt.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DitConfig {
    /// Image side in pixels. Default 32.
    pub image_size: usize,
    /// Image channels. Default 3 (RGB).
    pub channels: usize,
    /// Patch side. Default 4 (64 image tokens at 32×32).
    pub patch: usize,
    /// Hidden width `d`. Default 128.
    pub hidden: usize,
    /// Transformer blocks. Default 6.
    pub depth: usize,
    /// Attention heads (must divide `hidden`). Default 4.
    pub heads: usize,
    /// MLP width as a multiple of `hidden`. Default 4.
    pub mlp_ratio: usize,
    /// Prompt vocabulary size (the shapes world's word vocabulary). Default 32.
    pub text_vocab: usize,
    /// Prompt length in tokens (padded). Default 8 (the shapes world's).
    pub text_len: usize,
    /// The padding token id; an all-padding prompt is the null prompt of CFG. Default 0.
    pub pad_id: u32,
    /// Frequencies of the sinusoidal timestep embedding. Default 256 (DiT).
    pub time_freqs: usize,
    /// Prompt-encoder layers run over the prompt tokens alone before the joint blocks (a
    /// pre-LN transformer, as SD3's text encoders precede its MMDiT). Default 0: the prompt's
    /// token + position embeddings enter the joint blocks directly (flow-shapes-v2).
    pub text_layers: usize,
}

impl Default for DitConfig {
    fn default() -> Self {
        Self {
            image_size: 32,
            channels: 3,
            patch: 4,
            hidden: 128,
            depth: 6,
            heads: 4,
            mlp_ratio: 4,
            text_vocab: 32,
            text_len: 8,
            pad_id: 0,
            time_freqs: 256,
            text_layers: 0,
        }
    }
}

impl DitConfig {
    /// A very small configuration for tests (≈0.2 M parameters).
    pub fn test_tiny() -> Self {
        Self { hidden: 48, depth: 2, heads: 2, mlp_ratio: 2, time_freqs: 32, ..Self::default() }
    }

    /// Image tokens per image.
    pub fn tokens(&self) -> usize {
        (self.image_size / self.patch).pow(2)
    }

    /// Values per patch, `patch² · channels`.
    pub fn patch_dim(&self) -> usize {
        self.patch * self.patch * self.channels
    }

    /// A lower estimate of the f32 bytes a training step over `batch` images keeps for its
    /// backward pass: per block and image, `T·16d` activations (norms, q/k/v, attention output,
    /// the `mlp_ratio`-wide MLP) and `2·heads·T²` attention scores, `T` the image plus text
    /// tokens (the text tokens alone for a prompt-encoder layer); times 4 bytes. Saturates instead of overflowing. Sampling holds one block's
    /// share of it at a time. Used to refuse a batch that cannot fit before any work starts.
    pub fn training_bytes(&self, batch: usize) -> u64 {
        let per_block = |t: u64| {
            t * (8 + 2 * self.mlp_ratio as u64) * self.hidden as u64 + 2 * self.heads as u64 * t * t
        };
        let joint = per_block((self.tokens() + self.text_len) as u64) * self.depth.max(1) as u64;
        let text = per_block(self.text_len as u64) * self.text_layers as u64;
        (batch as u64).saturating_mul(joint + text).saturating_mul(4)
    }

    /// Checks the fields, naming the one at fault.
    pub fn validate(&self) -> Result<()> {
        let bad = |field, value: usize, expected: &str| {
            Err(FlowModelError::Config {
                field,
                value: value.to_string(),
                expected: expected.into(),
            })
        };
        if self.patch == 0 || self.image_size % self.patch != 0 {
            return bad("model.patch", self.patch, "a divisor of image_size");
        }
        if self.heads == 0 || self.hidden % self.heads != 0 || (self.hidden / self.heads) % 2 != 0 {
            return bad("model.heads", self.heads, "a divisor of hidden giving an even head size");
        }
        if self.depth == 0 || self.mlp_ratio == 0 || self.text_len == 0 || self.channels == 0 {
            return bad("model.depth", self.depth, "depth, mlp_ratio, text_len and channels >= 1");
        }
        if self.time_freqs < 2 || self.time_freqs % 2 != 0 {
            return bad("model.time_freqs", self.time_freqs, "an even number >= 2");
        }
        if (self.pad_id as usize) >= self.text_vocab {
            return bad("model.pad_id", self.pad_id as usize, "an id below text_vocab");
        }
        Ok(())
    }
}
