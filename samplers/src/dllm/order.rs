//! The `OrderPolicy` hook: a policy that replaces the position rule (SAS, docs/algorithms.md §6).

use candle_core::{DType, Tensor, D};

use super::error::Result;
use super::proposal::cumsum_last;
use super::select::{gumbel_perturb, mask_ineligible, top_n_mask};

/// Per-position features of the completion the policy scores, each `[B, L]` f32 over the `L`
/// completion positions.
#[derive(Debug, Clone)]
pub struct OrderFeatures {
    /// Top-1 probability of the denoiser at the position.
    pub top1_prob: Tensor,
    /// Margin `p1 − p2`.
    pub margin: Tensor,
    /// `Σ p log p` (negative entropy; larger = more confident).
    pub neg_entropy: Tensor,
    /// `j / L` for completion position `j`.
    pub rel_position: Tensor,
    /// 1 inside the current block, else 0.
    pub in_block: Tensor,
    /// 1 where the position is still masked (and its row not frozen), else 0.
    pub masked: Tensor,
    /// The denoiser's log-distribution `log p(· | x_t)` at every completion position,
    /// `[B, L, V]` f32. The LM head is linear in the final hidden state, so a learned
    /// projection of it reads what the hidden state says about the position in its context
    /// (SAS's optional hidden-state feature); the scalar features above are summaries of it.
    pub log_probs: Tensor,
}

impl OrderFeatures {
    /// The features in a fixed order, `[top1_prob, margin, neg_entropy, rel_position,
    /// in_block, masked]`, the order of [`LinearOrderPolicy::weights`].
    pub fn as_array(&self) -> [&Tensor; 6] {
        [
            &self.top1_prob,
            &self.margin,
            &self.neg_entropy,
            &self.rel_position,
            &self.in_block,
            &self.masked,
        ]
    }

    /// The positions a policy may commit: masked and in the current block, `[B, L]` u8.
    pub fn eligible(&self) -> Result<Tensor> {
        Ok((&self.masked * &self.in_block)?.gt(0.5)?)
    }
}

/// What a policy sees at one decoding step.
#[derive(Debug, Clone, Copy)]
pub struct OrderInput<'a> {
    /// The features.
    pub features: &'a OrderFeatures,
    /// How many positions to commit per row, `[B]` u32 (LLaDA's quota; 0 for finished rows).
    pub count: &'a Tensor,
    /// Uniforms `[B, L]` f32 keyed by (global row, block, step): the policy's only randomness,
    /// so a rollout stays reproducible from its key.
    pub uniforms: &'a Tensor,
}

/// A policy's decision at one step.
#[derive(Debug, Clone)]
pub struct OrderDecision {
    /// Positions to commit, `[B, L]` u8: exactly `count[b]` eligible positions per row.
    pub commit: Tensor,
    /// The decision's log-probability per row, `[B]` f32 (0 for rows with `count = 0`).
    pub log_prob: Tensor,
}

/// A decoding-order policy: it replaces a quota position rule, choosing which `count[b]`
/// positions of each row to commit and reporting the log-probability of that choice (SAS,
/// arXiv 2606.23567). `decode` checks the contract (eligible positions only, exact counts).
pub trait OrderPolicy {
    /// The positions to commit at this step and their log-probability.
    fn choose(&self, input: &OrderInput<'_>) -> Result<OrderDecision>;
}

/// Plackett–Luce log-probability of picking, in order, the `n[b]` positions of highest
/// `perturbed` score, under scores `s[B, L]` (`−∞` = ineligible):
/// `Σ_{k<n} (s_{σk} − log Σ_{j≥k} exp s_{σj})` with `σ` the descending order of `perturbed`.
pub fn plackett_luce_log_prob(s: &Tensor, perturbed: &Tensor, n: &Tensor) -> Result<Tensor> {
    let (b, l) = s.dims2()?;
    let order = perturbed.contiguous()?.arg_sort_last_dim(false)?;
    let sorted = s.contiguous()?.gather(&order, 1)?;
    let top = sorted.max_keepdim(1)?.maximum(-1e30)?;
    let shifted = sorted.broadcast_sub(&top)?;
    let suffix = cumsum_last(&shifted.exp()?.flip(&[1])?)?.flip(&[1])?;
    let rank = Tensor::arange(0u32, l as u32, s.device())?.unsqueeze(0)?.broadcast_as((b, l))?;
    let take = rank.broadcast_lt(&n.unsqueeze(1)?)?;
    // Ranks past the picks may hold an empty suffix (log 0): they are replaced by 1 before
    // the log, so neither the value nor the gradient of a trained policy sees a NaN.
    let suffix = take.where_cond(&suffix, &suffix.ones_like()?)?;
    let term = (&shifted - suffix.log()?)?;
    Ok(take.where_cond(&term, &term.zeros_like()?)?.sum(D::Minus1)?)
}

/// A softmax policy over a linear score: `s = Σ_k w_k f_k / temperature` on eligible
/// positions, `count` positions drawn without replacement (Gumbel-top-k on the given
/// uniforms), log-probability by Plackett–Luce. A built-in baseline for SAS's learned policy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinearOrderPolicy {
    /// Weights of `[top1_prob, margin, neg_entropy, rel_position, in_block, masked]`.
    pub weights: [f64; 6],
    /// Softmax temperature `> 0`.
    pub temperature: f64,
}

impl LinearOrderPolicy {
    /// The masked linear scores `[B, L]` (`−∞` at ineligible positions).
    pub fn scores(&self, f: &OrderFeatures) -> Result<Tensor> {
        let mut s = f.top1_prob.zeros_like()?;
        for (w, x) in self.weights.iter().zip(f.as_array()) {
            s = (s + (x * (*w / self.temperature))?)?;
        }
        mask_ineligible(&s, &f.eligible()?)
    }
}

impl OrderPolicy for LinearOrderPolicy {
    fn choose(&self, input: &OrderInput<'_>) -> Result<OrderDecision> {
        let s = self.scores(input.features)?;
        let perturbed = gumbel_perturb(&s, input.uniforms, 1.0)?;
        let commit = (top_n_mask(&perturbed, input.count)? * input.features.eligible()?)?;
        let log_prob = plackett_luce_log_prob(&s, &perturbed, input.count)?;
        Ok(OrderDecision { commit, log_prob: log_prob.to_dtype(DType::F32)? })
    }
}
