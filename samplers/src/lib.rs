//! drift-samplers: dLLM decoding and flow ODE/SDE samplers over two small model traits.
//!
//! Samplers are functions of a model and a schedule; models know nothing about sampling
//! (the k-diffusion idea). Any model that implements [`MaskPredictor`] can be decoded, and any
//! that implements [`flow::VelocityField`] can be integrated: ours, a user's, or a wrapper
//! around candle-transformers.

pub mod dllm;
pub mod flow;

use candle_core::Tensor;

/// A masked denoiser: token ids in, per-position logits over the vocabulary out.
///
/// `logits[b, i]` is the distribution of the token *at* position `i` (an AR-initialised model
/// such as Dream shifts its raw logits inside its wrapper, so callers never see the shift).
pub trait MaskPredictor {
    /// Logits `[B, L, V]` (f32) for `ids[B, L]` (u32). `attention_mask[B, L]` (1 = real
    /// token, 0 = padding) hides padded keys; `None` means every position is real.
    fn logits(&self, ids: &Tensor, attention_mask: Option<&Tensor>) -> candle_core::Result<Tensor>;
    /// The id of the mask token.
    fn mask_id(&self) -> u32;
    /// The vocabulary size `V`.
    fn vocab_size(&self) -> usize;
}
