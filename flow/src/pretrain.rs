//! The flow-matching pretraining objective (Lipman et al. arXiv 2210.02747; rectified flow,
//! Liu et al. arXiv 2209.03003; SD3's logit-normal σ, arXiv 2403.03206).

use candle_core::{DType, Tensor};
use drift_core::rng::RngKey;
use serde::{Deserialize, Serialize};

use crate::error::{FlowModelError, Result};
use crate::model::Dit;

/// How training noise levels are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum SigmaSampling {
    /// `σ ~ U(0, 1)`.
    Uniform,
    /// `σ = sigmoid(m + s z)`, `z ~ N(0, 1)` (SD3's logit-normal, `m = 0, s = 1`).
    LogitNormal {
        /// `m`.
        mean: f64,
        /// `s`.
        std: f64,
    },
}

/// Settings of the flow-matching loss.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FlowMatchingConfig {
    /// Noise-level distribution. Default logit-normal(0, 1).
    pub sigma: SigmaSampling,
    /// Probability of replacing a prompt by the null prompt, so CFG has an unconditional
    /// model. Default 0.1.
    pub prompt_dropout: f64,
}

impl Default for FlowMatchingConfig {
    fn default() -> Self {
        Self { sigma: SigmaSampling::LogitNormal { mean: 0.0, std: 1.0 }, prompt_dropout: 0.1 }
    }
}

/// `E‖v_θ(x_σ, σ, c) − (ε − x₀)‖²` with `x_σ = (1−σ)x₀ + σε`, as a mean over elements.
///
/// Every draw of row `r` (its σ, its noise, its prompt dropout) is keyed by
/// `key.row(rows[r])`, so the loss of a sample does not depend on its batch-mates.
pub fn flow_matching_loss(
    model: &Dit,
    x0: &Tensor,
    ids: &Tensor,
    cfg: &FlowMatchingConfig,
    key: RngKey,
    rows: &[u64],
) -> Result<Tensor> {
    let b = x0.dim(0)?;
    if rows.len() != b || ids.dim(0)? != b {
        return Err(FlowModelError::Config {
            field: "rows",
            value: format!("{} rows, {} prompts", rows.len(), ids.dim(0)?),
            expected: format!("one row id and one prompt per image ({b})"),
        });
    }
    let dev = x0.device();
    let elems = x0.elem_count() / b;
    let u = key.stream("fm_sigma").uniform_rows(rows, 1, DType::F32, dev)?;
    let sigma = match cfg.sigma {
        SigmaSampling::Uniform => u.squeeze(1)?,
        SigmaSampling::LogitNormal { mean, std } => {
            let z = key.stream("fm_sigma_z").normal_rows(rows, 1, DType::F32, dev)?;
            candle_nn::ops::sigmoid(&z.affine(std, mean)?)?.squeeze(1)?
        }
    };
    let eps =
        key.stream("fm_noise").normal_rows(rows, elems, DType::F32, dev)?.reshape(x0.shape())?;
    let s = sigma.reshape((b, 1, 1, 1))?;
    let x0 = x0.to_dtype(DType::F32)?;
    let xs = (x0.broadcast_mul(&(1.0 - &s)?)? + eps.broadcast_mul(&s)?)?;
    let drop =
        key.stream("fm_dropout").uniform_rows(rows, 1, DType::F32, dev)?.lt(cfg.prompt_dropout)?;
    let null = model.null_prompt(b)?;
    let ids = drop.broadcast_as(ids.shape())?.where_cond(&null, &ids.to_dtype(DType::U32)?)?;
    let v = model.forward(&xs, &sigma, &ids)?;
    Ok(v.sub(&(eps - x0)?)?.sqr()?.mean_all()?)
}
