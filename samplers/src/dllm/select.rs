//! Choosing positions from confidences: top-n, Gumbel-top-n, threshold, origin.

use candle_core::{DType, Tensor, D};

use super::error::Result;

/// `scores` where `eligible[B, M]` (u8) is 1, `−∞` elsewhere (positions outside the block and
/// already-decided ones, LLaDA `confidence[:, block_end:] = -inf`).
pub fn mask_ineligible(scores: &Tensor, eligible: &Tensor) -> Result<Tensor> {
    let neg_inf = Tensor::full(f32::NEG_INFINITY, scores.shape(), scores.device())?;
    Ok(eligible.where_cond(&scores.to_dtype(DType::F32)?, &neg_inf)?)
}

/// A u8 mask `[B, M]` of the `n[b]` highest scores of each row (`n[B]` u32), by one
/// descending arg-sort and a scatter (LLaDA `torch.topk(confidence, k)`). Ties are broken by
/// the sort (candle's sort is unstable), so give ineligible positions `−∞` and keep
/// `n[b]` at most the row's number of finite scores.
pub fn top_n_mask(scores: &Tensor, n: &Tensor) -> Result<Tensor> {
    let (b, m) = scores.dims2()?;
    let order = scores.contiguous()?.arg_sort_last_dim(false)?;
    let rank =
        Tensor::arange(0u32, m as u32, scores.device())?.unsqueeze(0)?.broadcast_as((b, m))?;
    let keep_sorted = rank.broadcast_lt(&n.unsqueeze(1)?)?;
    Ok(keep_sorted.zeros_like()?.scatter(&order, &keep_sorted, 1)?)
}

/// `scores / temp + g`, `g = −log(−log u)` Gumbel noise from uniforms `u` of the same shape:
/// the top-n of the result is a draw of `n` positions without replacement from
/// `softmax(scores / temp)` (Gumbel-top-k; Kool et al. 2019), as Dream's
/// `torch.multinomial(softmax(conf / alg_temp), n)`. `−∞` stays `−∞`.
pub fn gumbel_perturb(scores: &Tensor, u: &Tensor, temp: f64) -> Result<Tensor> {
    let g = u.to_dtype(DType::F32)?.log()?.neg()?.log()?.neg()?;
    Ok(((scores / temp)? + g)?)
}

/// Fast-dLLM threshold rule (arXiv 2505.22618): the top-1 eligible position of each row with
/// `any[b] = 1`, plus every eligible position with `conf ≥ tau`. `conf` must be `−∞` outside
/// `eligible`.
pub fn threshold_mask(conf: &Tensor, eligible: &Tensor, any: &Tensor, tau: f64) -> Result<Tensor> {
    let top1 = top_n_mask(conf, &any.to_dtype(DType::U32)?)?;
    let above = (conf.ge(tau)? * eligible)?;
    Ok(top1.maximum(&above)?)
}

/// Dream's `confidence_threshold` commit `[B, M]` u8: of the `budget[b]` (u32) highest scores
/// of row `b`, the first, and the others whose score is at least `tau`, all restricted to
/// `eligible`.
pub fn capped_threshold_mask(
    conf: &Tensor,
    eligible: &Tensor,
    budget: &Tensor,
    tau: f64,
) -> Result<Tensor> {
    let top = top_n_mask(conf, budget)?;
    let first = top_n_mask(conf, &budget.minimum(1u32)?)?;
    let above = conf.ge(tau)?;
    Ok(((top * eligible)? * first.maximum(&above)?)?)
}

/// Dream's origin rule: each eligible position is revealed with probability `p` (`u < p`).
pub fn origin_mask(eligible: &Tensor, u: &Tensor, p: f64) -> Result<Tensor> {
    Ok((u.lt(p)? * eligible)?)
}

/// Dream's origin transfer probability at step `s` of `steps`: with
/// `t_k = 1 − k (1 − eps) / steps` (`linspace(1, eps, steps + 1)`), `1 − t_{s+1} / t_s`, and 1 at
/// the last step.
pub fn origin_probability(s: usize, steps: usize, eps: f64) -> f64 {
    if s + 1 >= steps {
        return 1.0;
    }
    let t = |k: usize| 1.0 - k as f64 * (1.0 - eps) / steps as f64;
    1.0 - t(s + 1) / t(s)
}

/// The number of set entries per row of a u8 mask `[B, M]`, as `[B]` u32.
pub fn row_counts(mask: &Tensor) -> Result<Tensor> {
    Ok(mask.to_dtype(DType::U32)?.sum(D::Minus1)?)
}
