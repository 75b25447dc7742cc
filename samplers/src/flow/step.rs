//! One denoising transition `σ → σ'`: the Euler ODE, the Flow-GRPO and DanceGRPO SDEs and
//! CPS, each returning the next latent, the Gaussian transition's mean and std, and the
//! log-probability of the next latent.

use candle_core::{DType, Tensor};
use serde::{Deserialize, Serialize};

use super::error::{FlowError, Result};

/// Which transition a step takes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum StepKind {
    /// Euler on the probability-flow ODE, `x' = x + v dt` (deterministic; std 0).
    Ode,
    /// Flow-GRPO's SDE (arXiv 2505.05470): `σ_t = a √(σ/(1−σ))` (with `1 − σ_1`, the second
    /// sigma, in the denominator at `σ = 1`), `mean = x(1 + σ_t² dt/(2σ)) + v(1 +
    /// σ_t²(1−σ)/(2σ)) dt`, std `σ_t √(−dt)`.
    FlowGrpo {
        /// The noise level `a`. 0.7 for SD3.5-M; `a = 0` is exactly the Euler step.
        noise_level: f64,
    },
    /// DanceGRPO's SDE (arXiv 2505.07818): the same drift with a constant `σ_t = η`, std
    /// `η √(σ − σ')`.
    Dance {
        /// `η`. DanceGRPO uses 0.3.
        eta: f64,
    },
    /// Coefficients-preserving sampling (CPS, arXiv 2509.05952): std `s = σ' sin(aπ/2)`,
    /// `x̂₀ = x − σv`, `x̂₁ = x + (1−σ)v`, `mean = (1−σ')x̂₀ + √(σ'² − s²) x̂₁`.
    Cps {
        /// The noise level `a` in `[0, 1]`.
        noise_level: f64,
    },
}

/// How a transition's per-element log-density becomes one number per sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum LogProbReduce {
    /// The mean over elements, as Flow-GRPO's code (ratios then stay near 1, hence its
    /// clip range 1e-4).
    #[default]
    Mean,
    /// The sum over elements: the true log-density of the whole latent.
    Sum,
}

/// What the next latent is: drawn now from noise, or a stored sample whose log-probability
/// under the (current) model is wanted.
#[derive(Debug, Clone, Copy)]
pub enum Next<'a> {
    /// Sample `x' = mean + std·ε` with this `ε` (same shape as `x`).
    Noise(&'a Tensor),
    /// Evaluate this stored `x'` (treated as a constant).
    Given(&'a Tensor),
}

/// The result of one transition.
#[derive(Debug, Clone)]
pub struct Transition {
    /// The next latent `x'` (detached when it was sampled).
    pub next: Tensor,
    /// The mean of the Gaussian transition (differentiable through the velocity).
    pub mean: Tensor,
    /// The std of the transition (a scalar for every element). 0 for the ODE.
    pub std: f64,
    /// The SDE's `σ_t` (Flow-GRPO's KL divides by `2σ_t²`). 0 for the ODE and CPS.
    pub sigma_t: f64,
    /// `log p(x' | x)` per sample, `[B]`, f32. NaN for a zero-noise step (the reference
    /// returns 0/0 there too); such steps are never trained.
    pub log_prob: Tensor,
}

impl StepKind {
    /// Validates the noise parameters.
    pub fn validate(&self) -> Result<()> {
        let bad = |field, v: f64, expected| {
            Err(FlowError::Config { field, value: v.to_string(), expected })
        };
        match *self {
            StepKind::Ode => Ok(()),
            StepKind::FlowGrpo { noise_level }
                if !(noise_level >= 0.0 && noise_level.is_finite()) =>
            {
                bad("step.noise_level", noise_level, "a finite number >= 0")
            }
            StepKind::Dance { eta } if !(eta >= 0.0 && eta.is_finite()) => {
                bad("step.eta", eta, "a finite number >= 0")
            }
            StepKind::Cps { noise_level } if !(0.0..=1.0).contains(&noise_level) => {
                bad("step.noise_level", noise_level, "a number in [0, 1]")
            }
            _ => Ok(()),
        }
    }

    /// Whether the step injects noise (and so has a trainable log-probability).
    pub fn is_stochastic(&self) -> bool {
        match *self {
            StepKind::Ode => false,
            StepKind::FlowGrpo { noise_level } | StepKind::Cps { noise_level } => noise_level > 0.0,
            StepKind::Dance { eta } => eta > 0.0,
        }
    }

    /// One transition from `x` at `σ` to `σ'` given the velocity `v = model(x, σ)`. `sigma_1`
    /// is the schedule's second sigma (used by Flow-GRPO at `σ = 1`). Computed in f32.
    pub fn step(
        &self,
        x: &Tensor,
        v: &Tensor,
        (sigma, sigma_next): (f64, f64),
        sigma_1: f64,
        next: Next<'_>,
        reduce: LogProbReduce,
    ) -> Result<Transition> {
        let x = x.to_dtype(DType::F32)?;
        let v = v.to_dtype(DType::F32)?;
        let dt = sigma_next - sigma;
        let (mean, std, sigma_t) = match *self {
            StepKind::Ode => ((&x + (&v * dt)?)?, 0.0, 0.0),
            StepKind::FlowGrpo { noise_level } => {
                let denom = 1.0 - if sigma >= 1.0 { sigma_1 } else { sigma };
                let st = noise_level * (sigma / denom).sqrt();
                (sde_mean(&x, &v, sigma, dt, st)?, st * (-dt).sqrt(), st)
            }
            StepKind::Dance { eta } => (sde_mean(&x, &v, sigma, dt, eta)?, eta * (-dt).sqrt(), eta),
            StepKind::Cps { noise_level } => {
                let s = sigma_next * (noise_level * std::f64::consts::FRAC_PI_2).sin();
                let x0 = (&x - (&v * sigma)?)?;
                let x1 = (&x + (&v * (1.0 - sigma))?)?;
                let c1 = (sigma_next * sigma_next - s * s).max(0.0).sqrt();
                (((x0 * (1.0 - sigma_next))? + (x1 * c1)?)?, s, 0.0)
            }
        };
        let next = match next {
            Next::Noise(eps) => {
                if std == 0.0 {
                    mean.detach()
                } else {
                    (mean.detach() + (eps.to_dtype(DType::F32)? * std)?)?
                }
            }
            Next::Given(x_next) => x_next.to_dtype(DType::F32)?.detach(),
        };
        let log_prob = gaussian_log_prob(&next, &mean, std, reduce)?;
        Ok(Transition { next, mean, std, sigma_t, log_prob })
    }
}

/// The shared drift of the Flow-GRPO and DanceGRPO SDEs:
/// `x(1 + σ_t² dt/(2σ)) + v(1 + σ_t²(1−σ)/(2σ)) dt`.
fn sde_mean(x: &Tensor, v: &Tensor, sigma: f64, dt: f64, st: f64) -> Result<Tensor> {
    let cx = 1.0 + st * st / (2.0 * sigma) * dt;
    let cv = (1.0 + st * st * (1.0 - sigma) / (2.0 * sigma)) * dt;
    Ok(((x * cx)? + (v * cv)?)?)
}

/// `log N(x'; mean, std²)` per element, `−(x'−μ)²/(2s²) − ln s − ½ ln 2π`, reduced per
/// sample over every dimension but the first.
pub fn gaussian_log_prob(
    next: &Tensor,
    mean: &Tensor,
    std: f64,
    reduce: LogProbReduce,
) -> Result<Tensor> {
    let b = next.dim(0)?;
    let sq = next.sub(mean)?.sqr()?;
    let half_ln_2pi = 0.5 * (2.0 * std::f64::consts::PI).ln();
    let per = (sq * (-1.0 / (2.0 * std * std)))?.affine(1.0, -std.ln() - half_ln_2pi)?;
    let per = per.reshape((b, ()))?;
    Ok(match reduce {
        LogProbReduce::Mean => per.mean(1)?,
        LogProbReduce::Sum => per.sum(1)?,
    })
}
