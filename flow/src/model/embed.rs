//! Patchify/unpatchify and the sinusoidal embeddings of the DiT (its linear layer is
//! `drift_core::nn::Linear`, shared with the dLLM transformers).

use candle_core::{DType, Device, Tensor, D};

use crate::error::Result;

/// `[B, C, H, W] → [B, (H/p)(W/p), p·p·C]`, patches in row-major order.
pub fn patchify(x: &Tensor, p: usize) -> Result<Tensor> {
    let (b, c, h, w) = x.dims4()?;
    let x = x.reshape((b, c, h / p, p, w / p, p))?;
    let x = x.permute((0, 2, 4, 3, 5, 1))?; // b, gh, gw, py, px, c
    Ok(x.reshape((b, (h / p) * (w / p), p * p * c))?)
}

/// The inverse of [`patchify`].
pub fn unpatchify(x: &Tensor, p: usize, c: usize, side: usize) -> Result<Tensor> {
    let b = x.dim(0)?;
    let g = side / p;
    let x = x.reshape((b, g, g, p, p, c))?;
    let x = x.permute((0, 5, 1, 3, 2, 4))?; // b, c, gh, py, gw, px
    Ok(x.reshape((b, c, side, side))?)
}

/// Sinusoidal embedding of `t[B]` with `freqs` features: `[cos(t ω_k), sin(t ω_k)]`,
/// `ω_k = 10000^{−k/(freqs/2)}` (DiT's `timestep_embedding`).
pub fn timestep_embedding(t: &Tensor, freqs: usize) -> Result<Tensor> {
    let half = freqs / 2;
    let omega: Vec<f32> =
        (0..half).map(|k| (-(10000f32.ln()) * k as f32 / half as f32).exp()).collect();
    let omega = Tensor::from_vec(omega, (1, half), t.device())?;
    let args = t.to_dtype(DType::F32)?.unsqueeze(1)?.broadcast_mul(&omega)?;
    Ok(Tensor::cat(&[args.cos()?, args.sin()?], D::Minus1)?)
}

/// Fixed 2-D sine-cosine position embedding `[g², d]` of a `g × g` token grid (MAE, DiT):
/// half the features encode the row, half the column.
pub fn pos_embedding_2d(g: usize, d: usize, device: &Device) -> Result<Tensor> {
    let quarter = d / 4;
    let mut v = Vec::with_capacity(g * g * d);
    for row in 0..g {
        for col in 0..g {
            for pos in [row, col] {
                for k in 0..quarter {
                    let omega = 1.0 / 10000f32.powf(k as f32 / quarter as f32);
                    v.push((pos as f32 * omega).sin());
                }
                for k in 0..quarter {
                    let omega = 1.0 / 10000f32.powf(k as f32 / quarter as f32);
                    v.push((pos as f32 * omega).cos());
                }
            }
            v.extend(std::iter::repeat_n(0.0, d - 4 * quarter));
        }
    }
    Ok(Tensor::from_vec(v, (g * g, d), device)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patchify_round_trip_and_layout() -> Result<()> {
        let dev = Device::Cpu;
        let x = Tensor::arange(0f32, 2.0 * 3.0 * 8.0 * 8.0, &dev)?.reshape((2, 3, 8, 8))?;
        let p = patchify(&x, 4)?;
        assert_eq!(p.dims(), &[2, 4, 48]);
        // Patch 1 (top-right), its first value: pixel (0, 4), channel 0 = 4.
        assert_eq!(p.get(0)?.get(1)?.get(0)?.to_scalar::<f32>()?, 4.0);
        // Its second value: pixel (0, 4), channel 1 = 64 + 4.
        assert_eq!(p.get(0)?.get(1)?.get(1)?.to_scalar::<f32>()?, 68.0);
        let back = unpatchify(&p, 4, 3, 8)?;
        assert_eq!(back.flatten_all()?.to_vec1::<f32>()?, x.flatten_all()?.to_vec1::<f32>()?);
        Ok(())
    }
}
