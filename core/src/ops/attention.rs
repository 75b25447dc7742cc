//! Scaled dot-product attention in one pass over the heads, for untracked f32 tensors on the
//! CPU (decoding, rollouts, reference passes):
//!
//! `out[b, i, h·D + d] = keep[b, i] · Σ_j softmax_j(scale · q_bh[i] · k_bh[j] + bias[b, j]) · v_bh[j, d]`
//!
//! with `q: [B, H, Tq, D]`, `k, v: [B, H, Tk, D]`, an optional key bias `[B, 1, 1, Tk]` and query
//! keep `[B, 1, Tq, 1]` (a padding mask), returned as `[B, Tq, H·D]`, the layout the output
//! projection reads. It runs the very operations of candle's composition
//! (`(q kᵀ) · scale + bias`, drift's row softmax, `· v`, `· keep`) with the same GEMM calls per
//! head, so its values are bit-equal to it (tested), but it hands each of the `B·H` heads to one
//! thread whole instead of dispatching every per-head GEMM to the pool, and writes the heads
//! straight into the projection's layout: on batch-1 cached decoding, where each head is a
//! 32 × 192 product, the dispatches and copies cost more than the arithmetic.

use candle_core::{DType, Device, Storage, Tensor};
use gemm::{gemm, Parallelism};
use rayon::prelude::*;

use super::cpu_kernels::softmax_row;
use crate::error::{CoreError, Result};
use crate::sync_ptr::SyncPtr;

/// Whether [`attention`] applies: f32 tensors on the CPU, none recording a gradient, and
/// `DRIFT_NO_KERNELS` unset.
#[must_use]
pub fn fused_attention_applies(ts: &[&Tensor]) -> bool {
    ts.iter().all(|t| super::cpu_f32(t) && !t.track_op())
}

/// The values of a contiguous f32 CPU tensor's storage (no copy).
fn values<'a>(storage: &'a Storage, layout: &candle_core::Layout) -> Result<&'a [f32]> {
    match (storage, layout.contiguous_offsets()) {
        (Storage::Cpu(candle_core::CpuStorage::F32(all)), Some((a, b))) => Ok(&all[a..b]),
        _ => Err(CoreError::Mismatch("attention: expected contiguous f32 CPU tensors".into())),
    }
}

/// The formula in the module doc. Errors on shapes that do not fit together.
pub fn attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    scale: f64,
    key_bias: Option<&Tensor>,
    query_keep: Option<&Tensor>,
) -> Result<Tensor> {
    let (b, h, tq, d) = q.dims4()?;
    let (kb, kh, tk, kd) = k.dims4()?;
    if (kb, kh, kd) != (b, h, d) || v.dims() != k.dims() {
        return Err(CoreError::Shape {
            name: "k, v",
            got: k.dims().to_vec(),
            expected: format!("[{b}, {h}, Tk, {d}] for both, as q {:?}", q.dims()),
        });
    }
    if let Some(bias) = key_bias {
        if bias.dims() != [b, 1, 1, tk] {
            return Err(CoreError::Shape {
                name: "key_bias",
                got: bias.dims().to_vec(),
                expected: format!("[{b}, 1, 1, {tk}]"),
            });
        }
    }
    if let Some(keep) = query_keep {
        if keep.dims() != [b, 1, tq, 1] {
            return Err(CoreError::Shape {
                name: "query_keep",
                got: keep.dims().to_vec(),
                expected: format!("[{b}, 1, {tq}, 1]"),
            });
        }
    }
    let (q, k, v) = (q.contiguous()?, k.contiguous()?, v.contiguous()?);
    // The mask's two small vectors (`B·Tk` and `B·Tq` values) as host rows.
    let host = |t: &Tensor| t.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>();
    let bias = key_bias.map(host).transpose()?;
    let keep = query_keep.map(host).transpose()?;
    let hd = h * d;
    let mut out = vec![0f32; b * tq * hd];
    let out_ptr = SyncPtr(out.as_mut_ptr());
    let scale = scale as f32;
    let (qg, ql) = q.storage_and_layout();
    let (kg, kl) = k.storage_and_layout();
    let (vg, vl) = v.storage_and_layout();
    let (qv, kv, vv) = (values(&qg, ql)?, values(&kg, kl)?, values(&vg, vl)?);
    (0..b * h).into_par_iter().for_each(|bh| {
        let (bi, hi) = (bh / h, bh % h);
        let qs = &qv[bh * tq * d..(bh + 1) * tq * d];
        let ks = &kv[bh * tk * d..(bh + 1) * tk * d];
        let vs = &vv[bh * tk * d..(bh + 1) * tk * d];
        let mut scores = vec![0f32; tq * tk];
        // SAFETY: the slices hold `tq × d`, `tk × d` and `tq × tk` values, read and written
        // with exactly the strides candle passes for `q · kᵀ`.
        unsafe { product(&mut scores, tk, qs, d, ks, (d, 1), (tq, tk, d)) };
        let mut logits = vec![0f32; tk];
        for row in scores.chunks_mut(tk) {
            for s in row.iter_mut() {
                *s = *s * scale + 0.0;
            }
            if let Some(bias) = &bias {
                for (s, &c) in row.iter_mut().zip(&bias[bi * tk..(bi + 1) * tk]) {
                    *s += c;
                }
            }
            logits.copy_from_slice(row);
            softmax_row(&logits, row);
        }
        let mut head = vec![0f32; tq * d];
        // SAFETY: as above, for `probs · v`.
        unsafe { product(&mut head, d, &scores, tk, vs, (1, d), (tq, d, tk)) };
        for (i, row) in head.chunks(d).enumerate() {
            let w = keep.as_ref().map(|k| k[bi * tq + i]);
            let at = (bi * tq + i) * hd + hi * d;
            for (j, &x) in row.iter().enumerate() {
                let y = match w {
                    Some(w) => x * w,
                    None => x,
                };
                // SAFETY: head `(bi, hi)` alone writes columns `hi·d..(hi+1)·d` of its
                // batch's rows of `out` (`b · tq` rows of `hd`).
                unsafe { *out_ptr.get().add(at + j) = y };
            }
        }
    });
    Ok(Tensor::from_vec(out, (b, tq, hd), &Device::Cpu)?)
}

/// `dst[m, n] = lhs[m, k] · rhs` on one thread through the GEMM candle's matmul calls, `lhs`
/// row-major with row stride `lhs_rs`, `rhs` read with `(column stride, row stride)`, `dst`
/// row-major with row stride `dst_rs`.
///
/// # Safety
/// The slices must hold every element those strides reach.
#[allow(clippy::too_many_arguments)]
unsafe fn product(
    dst: &mut [f32],
    dst_rs: usize,
    lhs: &[f32],
    lhs_rs: usize,
    rhs: &[f32],
    (rhs_cs, rhs_rs): (usize, usize),
    (m, n, k): (usize, usize, usize),
) {
    gemm(
        m,
        n,
        k,
        dst.as_mut_ptr(),
        1,
        dst_rs as isize,
        false,
        lhs.as_ptr(),
        1,
        lhs_rs as isize,
        rhs.as_ptr(),
        rhs_cs as isize,
        rhs_rs as isize,
        0.0,
        1.0,
        false,
        false,
        false,
        Parallelism::None,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::RngKey;

    /// candle's composition, as the dLLM attention computes it.
    fn composed(
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        scale: f64,
        bias: Option<&Tensor>,
        keep: Option<&Tensor>,
    ) -> Tensor {
        let mut s = (q.contiguous().unwrap().matmul(&k.t().unwrap()).unwrap() * scale).unwrap();
        if let Some(b) = bias {
            s = s.broadcast_add(b).unwrap();
        }
        let p = crate::ops::softmax_last_dim(&s).unwrap();
        let mut o = p.matmul(&v.contiguous().unwrap()).unwrap();
        if let Some(k) = keep {
            o = o.broadcast_mul(k).unwrap();
        }
        let (b, h, t, d) = o.dims4().unwrap();
        o.transpose(1, 2).unwrap().reshape((b, t, h * d)).unwrap()
    }

    #[test]
    fn equals_the_composition_bit_for_bit_with_and_without_a_padding_mask() -> Result<()> {
        let dev = Device::Cpu;
        let key = RngKey::new(7);
        for (b, h, tq, tk, d) in [(1, 8, 32, 192, 64), (2, 3, 5, 5, 16), (3, 2, 7, 20, 8)] {
            let q = key.stream("q").normal(&[b, h, tq, d], DType::F32, &dev)?;
            let k = key.stream("k").normal(&[b, h, tk, d], DType::F32, &dev)?;
            let v = key.stream("v").normal(&[b, h, tk, d], DType::F32, &dev)?;
            let scale = 1.0 / (d as f64).sqrt();
            assert!(fused_attention_applies(&[&q, &k, &v]));
            let plain = attention(&q, &k, &v, scale, None, None)?;
            let want = composed(&q, &k, &v, scale, None, None);
            assert_eq!(plain.dims(), &[b, tq, h * d]);
            let diff = (&plain - &want)?.abs()?.max_all()?.to_scalar::<f32>()?;
            assert_eq!(diff, 0.0, "unmasked {b}x{h}x{tq}x{tk}x{d}");
            // Left padding of one key in every row but the first; pad queries zeroed.
            let real: Vec<f32> =
                (0..b * tk).map(|i| if i / tk > 0 && i % tk == 0 { 0.0 } else { 1.0 }).collect();
            let real = Tensor::from_vec(real, (b, tk), &dev)?;
            let bias = ((&real - 1.0)? * 1e9)?.reshape((b, 1, 1, tk))?;
            let keep = real.narrow(1, tk - tq, tq)?.reshape((b, 1, tq, 1))?;
            let masked = attention(&q, &k, &v, scale, Some(&bias), Some(&keep))?;
            let want = composed(&q, &k, &v, scale, Some(&bias), Some(&keep));
            let diff = (&masked - &want)?.abs()?.max_all()?.to_scalar::<f32>()?;
            assert_eq!(diff, 0.0, "masked {b}x{h}x{tq}x{tk}x{d}");
        }
        Ok(())
    }

    #[test]
    fn tracked_inputs_and_mismatched_shapes_are_refused() -> Result<()> {
        let dev = Device::Cpu;
        let q = Tensor::zeros((1, 2, 3, 4), DType::F32, &dev)?;
        let k = Tensor::zeros((1, 2, 5, 4), DType::F32, &dev)?;
        let var = candle_core::Var::from_tensor(&q)?;
        assert!(!fused_attention_applies(&[var.as_tensor(), &k, &k]));
        let bad = Tensor::zeros((1, 2, 5, 3), DType::F32, &dev)?;
        assert!(matches!(attention(&q, &bad, &bad, 1.0, None, None), Err(CoreError::Shape { .. })));
        let bias = Tensor::zeros((1, 1, 1, 4), DType::F32, &dev)?;
        assert!(attention(&q, &k, &k, 1.0, Some(&bias), None).is_err());
        Ok(())
    }
}
