//! Aggregation of per-action losses into one scalar (docs/algorithms.md §2, "Aggregation").

use candle_core::Tensor;

use super::config::Aggregation;
use crate::error::Result;

/// `Σ x / max(Σ m, 1)`; 0 when nothing is valid.
pub(crate) fn masked_mean(x: &Tensor, mask: &Tensor) -> Result<Tensor> {
    let count = mask.sum_all()?.clamp(1.0, f64::INFINITY)?;
    Ok(x.mul(mask)?.sum_all()?.div(&count)?)
}

/// Aggregates `loss[N, T]` (zero where `mask` is 0) into a scalar.
///
/// `adv[N, T]` is only read by [`Aggregation::Balanced`], to split the sequences by the sign of
/// their mean advantage. Formulas: `TokenMean` `Σ m ℓ / Σ m` (DAPO); `SeqMeanTokenMean`
/// `mean_b(Σ_t m ℓ / Σ_t m)` (GRPO); `SeqMeanTokenSumNorm` `Σ m ℓ / (N · T_max)` (Dr. GRPO);
/// `Balanced` `(n_pos/N)·mean_{A>0}(ℓ) + (n_neg/N)·mean_{A<0}(ℓ)`.
pub fn aggregate(agg: Aggregation, loss: &Tensor, mask: &Tensor, adv: &Tensor) -> Result<Tensor> {
    let (n, t) = loss.dims2()?;
    let lm = loss.mul(mask)?;
    Ok(match agg {
        Aggregation::TokenMean => masked_mean(loss, mask)?,
        Aggregation::SeqMeanTokenMean => {
            let per_seq = lm.sum(1)?.div(&mask.sum(1)?.clamp(1.0, f64::INFINITY)?)?;
            per_seq.mean_all()?
        }
        Aggregation::SeqMeanTokenSumNorm { max_len } => {
            (lm.sum_all()? / (n.max(1) * max_len.unwrap_or(t).max(1)) as f64)?
        }
        Aggregation::Balanced => {
            let count = mask.sum_keepdim(1)?;
            let seq_adv = adv.mul(mask)?.sum_keepdim(1)?.div(&count.clamp(1.0, f64::INFINITY)?)?;
            let valid_seq = count.gt(0.0)?.to_dtype(loss.dtype())?;
            let pos = seq_adv.gt(0.0)?.to_dtype(loss.dtype())?.mul(&valid_seq)?;
            let neg = seq_adv.lt(0.0)?.to_dtype(loss.dtype())?.mul(&valid_seq)?;
            let mut total = loss.zeros_like()?.sum_all()?;
            for side in [pos, neg] {
                let side_mask = mask.broadcast_mul(&side)?;
                let weight = (side.sum_all()? / n.max(1) as f64)?;
                total = (total + masked_mean(loss, &side_mask)?.mul(&weight)?)?;
            }
            total
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    fn inputs() -> Result<(Tensor, Tensor, Tensor)> {
        let dev = Device::Cpu;
        // Row 0: 3 valid tokens with loss 1, 2, 3 (A > 0). Row 1: 1 valid token, loss 10 (A < 0).
        // Row 2: 2 valid tokens, loss 4, 4, A = 0.
        let loss = Tensor::new(&[[1f64, 2., 3., 0.], [10., 0., 0., 0.], [4., 4., 0., 0.]], &dev)?;
        let mask = Tensor::new(&[[1f64, 1., 1., 0.], [1., 0., 0., 0.], [1., 1., 0., 0.]], &dev)?;
        let adv = Tensor::new(&[[2f64, 2., 2., 0.], [-1., 0., 0., 0.], [0., 0., 0., 0.]], &dev)?;
        Ok((loss, mask, adv))
    }

    fn run(agg: Aggregation) -> Result<f64> {
        let (l, m, a) = inputs()?;
        Ok(aggregate(agg, &l, &m, &a)?.to_scalar::<f64>()?)
    }

    #[test]
    fn every_aggregation_by_hand() -> Result<()> {
        assert!((run(Aggregation::TokenMean)? - 24.0 / 6.0).abs() < 1e-12);
        assert!((run(Aggregation::SeqMeanTokenMean)? - (2.0 + 10.0 + 4.0) / 3.0).abs() < 1e-12);
        let dr = run(Aggregation::SeqMeanTokenSumNorm { max_len: None })?;
        assert!((dr - 24.0 / 12.0).abs() < 1e-12);
        let dr = run(Aggregation::SeqMeanTokenSumNorm { max_len: Some(8) })?;
        assert!((dr - 24.0 / 24.0).abs() < 1e-12);
        // positives: row 0, token mean 2, weight 1/3; negatives: row 1, mean 10, weight 1/3.
        assert!((run(Aggregation::Balanced)? - (2.0 / 3.0 + 10.0 / 3.0)).abs() < 1e-12);
        Ok(())
    }

    #[test]
    fn empty_mask_gives_zero_not_nan() -> Result<()> {
        let (l, m, a) = inputs()?;
        let m = m.zeros_like()?;
        for agg in [
            Aggregation::TokenMean,
            Aggregation::SeqMeanTokenMean,
            Aggregation::SeqMeanTokenSumNorm { max_len: None },
            Aggregation::Balanced,
        ] {
            assert_eq!(aggregate(agg, &l, &m, &a)?.to_scalar::<f64>()?, 0.0, "{agg:?}");
        }
        Ok(())
    }
}
