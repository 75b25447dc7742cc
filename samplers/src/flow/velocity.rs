//! The model side of a flow sampler: a velocity field, and classifier-free guidance over it.

use candle_core::Tensor;

/// A flow-matching velocity field `v(x_σ, σ, c)`, trained so that `v ≈ ε − x₀`.
pub trait VelocityField {
    /// The conditioning: prompt token ids, an embedding, a class label, …
    type Cond;
    /// The velocity at latents `x[B, …]` and noise levels `sigma[B]` (in `[0, 1]`; a model
    /// that wants SD3's timestep uses `1000·σ`).
    fn velocity(
        &self,
        x: &Tensor,
        sigma: &Tensor,
        cond: &Self::Cond,
    ) -> candle_core::Result<Tensor>;
}

/// Classifier-free guidance (Ho & Salimans, arXiv 2207.12598) as SD3 and Flow-GRPO apply it:
/// `v = v_u + w (v_c − v_u)` with the unconditional `uncond` (the null prompt).
#[derive(Debug, Clone, Copy)]
pub struct Guidance<'a, C> {
    /// The unconditional conditioning.
    pub uncond: &'a C,
    /// The scale `w` (Flow-GRPO uses 4.5 for SD3.5-M); `w = 1` is plain conditional sampling.
    pub scale: f64,
}

/// The (guided) velocity: one model evaluation without guidance, two with it.
pub fn guided_velocity<M: VelocityField>(
    model: &M,
    x: &Tensor,
    sigma: &Tensor,
    cond: &M::Cond,
    guidance: Option<&Guidance<'_, M::Cond>>,
) -> candle_core::Result<Tensor> {
    let vc = model.velocity(x, sigma, cond)?;
    match guidance {
        None => Ok(vc),
        Some(g) => {
            let vu = model.velocity(x, sigma, g.uncond)?;
            &vu + ((vc - &vu)? * g.scale)?
        }
    }
}

/// Model evaluations per velocity call: 1, or 2 under guidance.
pub fn evaluations_per_call<C>(guidance: Option<&Guidance<'_, C>>) -> usize {
    if guidance.is_some() {
        2
    } else {
        1
    }
}
