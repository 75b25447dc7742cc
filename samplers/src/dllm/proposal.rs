//! Token proposals: greedy, Gumbel-max with temperature, top-k and top-p filtering.

use candle_core::{DType, Tensor, D};

use super::config::ProposalConfig;
use super::error::Result;

/// Inclusive cumulative sum over the last dimension by a Hillis–Steele scan: `log2 n`
/// shifted adds, `O(n log n)` work, where candle's `cumsum` builds an `n × n` matrix (too big
/// over a 126k vocabulary).
pub fn cumsum_last(x: &Tensor) -> Result<Tensor> {
    let n = x.dim(D::Minus1)?;
    let mut s = x.clone();
    let mut k = 1;
    while k < n {
        let mut pad_shape = x.dims().to_vec();
        *pad_shape.last_mut().expect("rank ≥ 1: dim(Minus1) succeeded") = k;
        let pad = Tensor::zeros(pad_shape, x.dtype(), x.device())?;
        let shifted = Tensor::cat(&[&pad, &s.narrow(D::Minus1, 0, n - k)?], D::Minus1)?;
        s = (s + shifted)?;
        k *= 2;
    }
    Ok(s)
}

fn neg_inf_like(x: &Tensor) -> Result<Tensor> {
    Ok(Tensor::full(f32::NEG_INFINITY, x.shape(), x.device())?.to_dtype(x.dtype())?)
}

/// Keeps the `k` largest logits of each row (ties with the `k`-th kept), the rest `−∞`
/// (HF / Dream `top_k_logits`).
pub fn filter_top_k(logits: &Tensor, k: usize) -> Result<Tensor> {
    let v = logits.dim(D::Minus1)?;
    if k >= v {
        return Ok(logits.clone());
    }
    let (sorted, _) = logits.contiguous()?.sort_last_dim(false)?;
    let kth = sorted.narrow(D::Minus1, k - 1, 1)?;
    Ok(logits.broadcast_ge(&kth)?.where_cond(logits, &neg_inf_like(logits)?)?)
}

/// Keeps the smallest prefix of tokens, by decreasing probability, whose mass reaches `p`
/// (a token is dropped when the mass strictly before it is already `≥ p`; the most likely one
/// is always kept), the rest `−∞` (nucleus sampling; Dream `top_p_logits`).
pub fn filter_top_p(logits: &Tensor, p: f64) -> Result<Tensor> {
    let probs = drift_core::ops::softmax_last_dim(&logits.to_dtype(DType::F32)?)?;
    let (sorted, idx) = probs.contiguous()?.sort_last_dim(false)?;
    let before = (cumsum_last(&sorted)? - &sorted)?;
    let keep_sorted = before.lt(p)?;
    let keep = keep_sorted.zeros_like()?.scatter(&idx, &keep_sorted, D::Minus1)?;
    Ok(keep.where_cond(logits, &neg_inf_like(logits)?)?)
}

/// The proposed token `x0[b, i]` from `logits[B, M, V]`: filters, then `argmax` at
/// temperature 0, else `argmax(logits/T − log(−log u))` in float64 with `u[B, M, V]` uniform
/// (LLaDA `add_gumbel_noise`: `exp(logits) / (−log u)^T`, the same argmax).
pub fn propose(logits: &Tensor, cfg: &ProposalConfig, uniforms: Option<&Tensor>) -> Result<Tensor> {
    let mut l = logits.clone();
    if let Some(k) = cfg.top_k {
        l = filter_top_k(&l, k)?;
    }
    if let Some(p) = cfg.top_p {
        l = filter_top_p(&l, p)?;
    }
    let scores = match uniforms {
        Some(u) if cfg.temperature > 0.0 => {
            let gumbel = u.to_dtype(DType::F64)?.log()?.neg()?.log()?.neg()?;
            ((l.to_dtype(DType::F64)? / cfg.temperature)? + gumbel)?
        }
        _ => l,
    };
    Ok(scores.argmax(D::Minus1)?)
}
