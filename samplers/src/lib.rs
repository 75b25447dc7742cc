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
    /// Whether [`MaskPredictor::cached_logits`] is implemented (Fast-dLLM's key/value caches).
    /// Default false.
    fn supports_kv_cache(&self) -> bool {
        false
    }
    /// Whether Fast-dLLM's cached block decoding of this model family commits each block's
    /// first position at the block's recording step, before any confidence rule (Dream's
    /// `generation_utils_block.py`: `x[:, block_start] = x0[:, block_start]`); the block's
    /// other steps then follow the schedule from its second step on. Default false (LLaDA's
    /// `generate_with_prefix_cache` / `generate_with_dual_cache`).
    fn cache_commits_block_start(&self) -> bool {
        false
    }
    /// Logits `[B, T_in, V]` (f32) of the input positions under `op`, reading or writing
    /// `cache` (`dllm::KvCache`); position `i` scores the token at `i`. `attention_mask`, when
    /// given, is the whole sequence's `[B, T]` mask (0 = hidden left padding), the same for
    /// every op of one decode. The default has no cache and errors.
    fn cached_logits(
        &self,
        _ids: &Tensor,
        _op: dllm::CacheOp,
        _cache: &mut dllm::KvCache,
        _attention_mask: Option<&Tensor>,
    ) -> candle_core::Result<Tensor> {
        Err(candle_core::Error::Msg("this model has no key/value cache".into()))
    }
}
