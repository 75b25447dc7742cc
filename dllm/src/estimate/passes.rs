//! Running an estimator's passes through the model as one batch.

use candle_core::{DType, Tensor, D};
use drift_core::ops;
use drift_samplers::MaskPredictor;

use super::draws::Pass;
use super::EstimateInput;
use crate::error::Result;

/// `Σ_k weight_k ⊙ log p(y | ids with mask_k)` as `[B, T]`: the `K` passes stacked
/// pass-major into `[K·B, T]` and run through `model` in chunks of `max_rows` rows.
pub(super) fn run_passes<M: MaskPredictor + ?Sized>(
    model: &M,
    input: &EstimateInput<'_>,
    passes: &[Pass],
    max_rows: usize,
) -> Result<Tensor> {
    let (b, t) = input.ids.dims2()?;
    let dev = input.ids.device();
    let k = passes.len();
    let masked: Vec<u8> =
        passes.iter().flat_map(|p| p.masked.iter().flatten().map(|&m| u8::from(m))).collect();
    let weight: Vec<f32> = passes.iter().flat_map(|p| p.weight.iter().flatten().copied()).collect();
    let masked = Tensor::from_vec(masked, (k * b, t), dev)?;
    let weight = Tensor::from_vec(weight, (k * b, t), dev)?;
    let ids = input.ids.to_dtype(DType::U32)?;
    let ids_all = Tensor::cat(&vec![&ids; k], 0)?;
    let noisy = masked.where_cond(&Tensor::full(model.mask_id(), (k * b, t), dev)?, &ids_all)?;
    let att_all = match input.attention_mask {
        Some(a) => Some(Tensor::cat(&vec![a; k], 0)?),
        None => None,
    };
    let mut lps = Vec::new();
    for start in (0..k * b).step_by(max_rows) {
        let n = max_rows.min(k * b - start);
        let att = att_all.as_ref().map(|a| a.narrow(0, start, n)).transpose()?;
        let logits =
            model.logits(&noisy.narrow(0, start, n)?, att.as_ref())?.to_dtype(DType::F32)?;
        let logp = ops::log_softmax_last_dim(&logits)?;
        let target = ids_all.narrow(0, start, n)?.unsqueeze(D::Minus1)?;
        lps.push(logp.gather(&target, D::Minus1)?.squeeze(D::Minus1)?);
    }
    let lp = if lps.len() == 1 { lps.pop().expect("one chunk") } else { Tensor::cat(&lps, 0)? };
    Ok((lp * weight)?.reshape((k, b, t))?.sum(0)?)
}
