//! Fast-dLLM's key/value caches for semi-autoregressive block decoding (Wu et al., "Fast-dLLM",
//! arXiv 2505.22618): at each block's first step the model runs the whole sequence and records
//! every layer's keys and values; the block's later steps run only part of the sequence against
//! that record. The record is not refreshed within a block, so the result is an approximation
//! of plain decoding, the one the reference code computes.

use candle_core::Tensor;
use serde::{Deserialize, Serialize};

/// Which cache block decoding uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KvCacheMode {
    /// None: every step runs the whole sequence (LLaDA's `generate`).
    #[default]
    None,
    /// Prefix cache (`generate_with_prefix_cache`): later steps run the current block and
    /// everything after it; the keys and values before the block come from the record.
    Prefix,
    /// Dual cache (`generate_with_dual_cache`): later steps run the current block only; the keys
    /// and values before and after it come from the record.
    Dual,
}

/// How one forward uses the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheOp {
    /// The input is the whole sequence: record every layer's keys and values.
    Record,
    /// The input holds positions `start..T` of the recorded sequence: its queries attend to the
    /// recorded keys/values of `0..start` followed by its own.
    Prefix {
        /// First position of the input.
        start: usize,
    },
    /// The input holds positions `start..start + n`: its queries attend to the recorded
    /// keys/values with these positions replaced by its own.
    Dual {
        /// First position of the input.
        start: usize,
    },
}

/// Every layer's keys and values `[B, H_kv, T, D]` (after the rotary embedding) of the last
/// [`CacheOp::Record`] forward.
#[derive(Debug, Clone, Default)]
pub struct KvCache {
    /// `(keys, values)` per layer, in layer order.
    pub layers: Vec<(Tensor, Tensor)>,
}

impl KvCache {
    /// The recorded sequence length (0 when nothing is recorded).
    pub fn len(&self) -> usize {
        self.layers.first().and_then(|(k, _)| k.dim(2).ok()).unwrap_or(0)
    }

    /// Whether nothing is recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
