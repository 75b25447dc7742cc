//! KL estimators against a reference policy (docs/algorithms.md §2, "KL to a reference").

use candle_core::Tensor;

use super::config::KlEstimator;
use crate::error::{CoreError, Result};

/// Per-action KL estimate from log-probs (Schulman, "Approximating KL divergence", 2020):
/// `k1 = lp − lp_ref`, `k2 = ½(lp − lp_ref)²`, `k3 = exp(lp_ref − lp) − (lp_ref − lp) − 1`.
///
/// `lp` is differentiable; `lp_ref` is treated as a constant. Shapes must match.
pub fn kl_estimate(estimator: KlEstimator, lp: &Tensor, lp_ref: &Tensor) -> Result<Tensor> {
    let d = lp_ref.detach().sub(lp)?; // lp_ref − lp
    Ok(match estimator {
        KlEstimator::K1 => d.neg()?,
        KlEstimator::K2 => (d.sqr()? * 0.5)?,
        KlEstimator::K3 => ((d.exp()? - &d)? - 1.0)?,
        KlEstimator::LowVarKl => {
            let d = d.clamp(-20.0, 20.0)?;
            ((d.exp()? - &d)? - 1.0)?.clamp(-10.0, 10.0)?
        }
        KlEstimator::Precomputed => {
            return Err(CoreError::Mismatch(
                "the `precomputed` KL estimator takes a per-action KL (Reference::Kl), not reference log-probs"
                    .into(),
            ))
        }
    })
}

/// Flow-GRPO's KL between two Gaussian transitions with the same std (arXiv 2505.05470):
/// `‖μ − μ_ref‖² / (2 std²)`, averaged over every element but the batch dimension.
///
/// `mean` is `[N, …]` (differentiable), `mean_ref` the same shape (constant), `std` a scalar or
/// `[N]`. Returns `[N]`. Flow-GRPO's code passes the SDE's `σ_t` as `std`, omitting the `√−Δt`
/// of the transition's true std (β absorbs it); pass `σ_t √−Δt` for the exact KL. Which one is
/// the flow trainer's switch.
pub fn gaussian_mean_kl(mean: &Tensor, mean_ref: &Tensor, std: &Tensor) -> Result<Tensor> {
    if mean.dims() != mean_ref.dims() || mean.rank() < 1 {
        return Err(CoreError::Shape {
            name: "mean_ref",
            got: mean_ref.dims().to_vec(),
            expected: format!("the shape of mean, {:?}", mean.dims()),
        });
    }
    let n = mean.dim(0)?;
    let sq = mean.sub(&mean_ref.detach())?.sqr()?.reshape((n, ()))?.mean(1)?;
    let var2 = (std.to_dtype(mean.dtype())?.sqr()? * 2.0)?;
    let var2 = match var2.rank() {
        0 => var2.broadcast_as(n)?,
        _ => var2.reshape(n)?,
    };
    Ok(sq.div(&var2)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    #[test]
    fn estimators_by_hand() -> Result<()> {
        let dev = Device::Cpu;
        let lp = Tensor::new(&[-1.0f64, -2.0], &dev)?;
        let lp_ref = Tensor::new(&[-1.5f64, -1.0], &dev)?;
        let k1 = kl_estimate(KlEstimator::K1, &lp, &lp_ref)?.to_vec1::<f64>()?;
        assert_eq!(k1, vec![0.5, -1.0]);
        let k2 = kl_estimate(KlEstimator::K2, &lp, &lp_ref)?.to_vec1::<f64>()?;
        assert_eq!(k2, vec![0.125, 0.5]);
        let k3 = kl_estimate(KlEstimator::K3, &lp, &lp_ref)?.to_vec1::<f64>()?;
        let want = [(-0.5f64).exp() + 0.5 - 1.0, 1f64.exp() - 1.0 - 1.0];
        for (g, w) in k3.iter().zip(want) {
            assert!((g - w).abs() < 1e-15);
        }
        assert!(kl_estimate(KlEstimator::Precomputed, &lp, &lp_ref).is_err());
        Ok(())
    }

    #[test]
    fn low_var_kl_is_k3_below_its_bound_and_flat_above_it() -> Result<()> {
        let dev = Device::Cpu;
        // lp_ref − lp = −0.5, 1 (k3 as above), 3 (k3 = e³ − 4 = 16.09 → 10), 30 (clamped to 20).
        let lp = candle_core::Var::new(&[-1.0f64, -2.0, -4.0, -31.0], &dev)?;
        let lp_ref = Tensor::new(&[-1.5f64, -1.0, -1.0, -1.0], &dev)?;
        let k = kl_estimate(KlEstimator::LowVarKl, lp.as_tensor(), &lp_ref)?;
        let v = k.to_vec1::<f64>()?;
        let want = [(-0.5f64).exp() + 0.5 - 1.0, 1f64.exp() - 2.0, 10.0, 10.0];
        for (g, w) in v.iter().zip(want) {
            assert!((g - w).abs() < 1e-12, "{v:?}");
        }
        // d k3 / d lp = 1 − exp(lp_ref − lp) below the bound; 0 where the clamp holds.
        let grads = k.sum_all()?.backward()?;
        let g = grads.get(lp.as_tensor()).expect("a gradient").to_vec1::<f64>()?;
        let want = [1.0 - (-0.5f64).exp(), 1.0 - 1f64.exp(), 0.0, 0.0];
        for (a, b) in g.iter().zip(want) {
            assert!((a - b).abs() < 1e-12, "{g:?}");
        }
        Ok(())
    }

    #[test]
    fn gaussian_kl_by_hand() -> Result<()> {
        let dev = Device::Cpu;
        let mean = Tensor::new(&[[[1.0f64, 2.0]], [[0.0, 0.0]]], &dev)?; // [2, 1, 2]
        let mean_ref = Tensor::new(&[[[0.0f64, 0.0]], [[3.0, 1.0]]], &dev)?;
        let kl = gaussian_mean_kl(&mean, &mean_ref, &Tensor::new(&[1.0f64, 0.5], &dev)?)?;
        // row 0: mean(1, 4) / 2 = 1.25; row 1: mean(9, 1) / (2 · 0.25) = 10.
        assert_eq!(kl.to_vec1::<f64>()?, vec![1.25, 10.0]);
        let kl = gaussian_mean_kl(&mean, &mean_ref, &Tensor::new(2.0f64, &dev)?)?;
        assert_eq!(kl.to_vec1::<f64>()?, vec![2.5 / 8.0, 5.0 / 8.0]);
        Ok(())
    }
}
