//! What a dLLM rollout returns: tokens, the decoding order and the model's log-probs.

use candle_core::{DType, Tensor, D};

use super::error::Result;

/// `commit_step` of prompt (and left-padding) columns.
pub const PROMPT_STEP: i64 = -1;

/// `commit_step` of completion positions never decoded: only after a row stopped early
/// ([`DecodeConfig::early_stop`](super::DecodeConfig::early_stop)); those positions hold the
/// row's first stop token and are outside its completion mask.
pub const NEVER_COMMITTED: i64 = -2;

/// One batched rollout of [`decode`](super::decode), every per-position tensor `[B, T]` over
/// the whole sequence, `T = prompt_len + gen_length`.
///
/// Row layout: prompts are left-padded (right-aligned) to the longest prompt, so the completion
/// of every row starts at column [`prompt_len`](Self::prompt_len); rows are prompt-major,
/// row `p · G + g` is sample `g` of prompt `p`.
#[derive(Debug, Clone)]
pub struct Trajectory {
    /// Final token ids `[B, T]` u32: padding, prompt, completion.
    pub tokens: Tensor,
    /// `P`, the first completion column (longest prompt length) for every row.
    pub prompt_len: usize,
    /// `[B, T]` u8, 1 on real tokens and 0 on left padding: what the model was given as its
    /// attention mask under [`Padding::Masked`](super::Padding::Masked) (all ones when every
    /// prompt has the same length).
    pub attention_mask: Tensor,
    /// `[B, T]` i64: the 0-based global decoding step (model evaluation) at which each
    /// completion position was committed; [`PROMPT_STEP`] on prompt columns,
    /// [`NEVER_COMMITTED`] after an early stop.
    pub commit_step: Tensor,
    /// `[B, T]` f32: `log softmax(logits)[x]` of the committed token `x` under the model at the
    /// step it was committed (temperature 1, before top-k/top-p, guided logits under CFG); 0
    /// on prompt columns and never-committed positions.
    pub token_log_prob: Tensor,
    /// `[B, T]` f32: 1 on completion positions up to and including the first stop token (all
    /// of the completion when there is none), 0 on the prompt and after the stop.
    pub completion_mask: Tensor,
    /// Number of `MaskPredictor::logits` calls made (one per decoding step; under CFG one call
    /// over the `2B` rows of the conditional and unconditional batches).
    pub evaluations: usize,
    /// `[B, S]` f32 over the `S = evaluations` steps when an order policy chose the positions:
    /// each step's decision log-probability (0 for rows with nothing to commit); `None` under
    /// a position rule.
    pub order_log_probs: Option<Tensor>,
    /// Global row ids, the `row` of every row's random key.
    pub rows: Vec<u64>,
}

impl Trajectory {
    /// Number of rows `B`.
    pub fn batch_size(&self) -> usize {
        self.rows.len()
    }

    /// The completion columns `[B, L]` of a `[B, T]` tensor of this trajectory.
    pub fn completion(&self, per_position: &Tensor) -> Result<Tensor> {
        let t = per_position.dim(1)?;
        Ok(per_position.narrow(1, self.prompt_len, t - self.prompt_len)?)
    }

    /// The pathwise log-likelihood of the decoding, `Σ_k log p_θ(x_{σ_k} | x_{σ_<k})` over the
    /// completion mask, `[B]` f32 (SAS's dense self-aware reward, arXiv 2606.23567).
    pub fn path_log_prob(&self) -> Result<Tensor> {
        Ok((&self.token_log_prob * &self.completion_mask)?.sum(D::Minus1)?)
    }

    /// Number of completion tokens per row that count (the completion mask's sum), `[B]` f32.
    pub fn completion_lengths(&self) -> Result<Tensor> {
        Ok(self.completion_mask.to_dtype(DType::F32)?.sum(D::Minus1)?)
    }
}
