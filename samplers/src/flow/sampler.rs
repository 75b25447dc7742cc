//! Full samplers: ODE sampling for evaluation, and SDE rollouts that record every latent and
//! log-probability for training, optionally with the SDE confined to a window of steps.

use candle_core::{DType, Tensor};
use drift_core::rng::RngKey;
use serde::{Deserialize, Serialize};

use super::error::{FlowError, Result};
use super::schedule::Schedule;
use super::step::{LogProbReduce, Next, StepKind};
use super::velocity::{evaluations_per_call, guided_velocity, Guidance, VelocityField};

/// The steps where a rollout uses its SDE; elsewhere it takes Euler ODE steps
/// (Flow-GRPO-Fast, MixGRPO arXiv 2507.21802).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Window {
    /// First SDE step.
    pub start: usize,
    /// Number of SDE steps `W`.
    pub len: usize,
}

/// How a training rollout samples.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RolloutConfig {
    /// The stochastic step. Default Flow-GRPO's SDE with `a = 0.7`.
    pub step: StepKind,
    /// Mean or sum of the per-element log-density. Default mean (Flow-GRPO).
    pub log_prob: LogProbReduce,
    /// SDE only inside this window (ODE elsewhere); every step when unset.
    pub window: Option<Window>,
}

impl Default for RolloutConfig {
    fn default() -> Self {
        Self {
            step: StepKind::FlowGrpo { noise_level: 0.7 },
            log_prob: LogProbReduce::Mean,
            window: None,
        }
    }
}

/// A recorded rollout of `B` samples over `N` steps.
#[derive(Debug, Clone)]
pub struct Rollout {
    /// `x_0 (noise), x_1, …, x_N (the image)`, each `[B, …]`, detached.
    pub latents: Vec<Tensor>,
    /// `log p(x_{i+1} | x_i)` under the sampling model, `[B, N]` f32 (NaN at ODE steps).
    pub log_probs: Tensor,
    /// Whether step `i` was stochastic (and so can be trained).
    pub stochastic: Vec<bool>,
    /// The SDE's `σ_t` at each step (0 at ODE steps).
    pub sigma_t: Vec<f64>,
    /// The transition std at each step.
    pub std: Vec<f64>,
    /// Model evaluations made (2 per step under guidance).
    pub evaluations: usize,
}

impl Rollout {
    /// The final samples `x_N`.
    pub fn images(&self) -> &Tensor {
        self.latents.last().expect("a rollout has at least its initial latent")
    }
}

fn sigma_batch(x: &Tensor, sigma: f64) -> Result<Tensor> {
    Ok(Tensor::full(sigma as f32, x.dim(0)?, x.device())?)
}

fn step_kind_at(cfg: &RolloutConfig, i: usize) -> StepKind {
    match cfg.window {
        Some(w) if i < w.start || i >= w.start + w.len => StepKind::Ode,
        _ => cfg.step,
    }
}

/// Integrates the probability-flow ODE with Euler steps from `x_init` (at `σ = 1`) to an image,
/// for evaluation. The model should hold detached weights so no graph is recorded.
pub fn sample_ode<M: VelocityField>(
    model: &M,
    x_init: &Tensor,
    cond: &M::Cond,
    schedule: &Schedule,
    guidance: Option<&Guidance<'_, M::Cond>>,
) -> Result<Tensor> {
    let mut x = x_init.to_dtype(DType::F32)?;
    for i in 0..schedule.steps() {
        let (s, s_next) = schedule.pair(i)?;
        let v = guided_velocity(model, &x, &sigma_batch(&x, s)?, cond, guidance)?;
        x = (&x + (v.to_dtype(DType::F32)? * (s_next - s))?)?.detach();
    }
    Ok(x)
}

/// Samples a training rollout: every step's latent and log-probability recorded. The noise of
/// step `i` for global row `rows[b]` is drawn under `key.iteration(i).row(rows[b])`, so a
/// sample does not depend on its batch-mates and the rollout is reproducible from its key.
#[allow(clippy::too_many_arguments)] // each argument is a distinct part of the rollout
pub fn rollout_sde<M: VelocityField>(
    model: &M,
    x_init: &Tensor,
    cond: &M::Cond,
    schedule: &Schedule,
    cfg: &RolloutConfig,
    guidance: Option<&Guidance<'_, M::Cond>>,
    key: RngKey,
    rows: &[u64],
) -> Result<Rollout> {
    cfg.step.validate()?;
    let b = x_init.dim(0)?;
    if rows.len() != b {
        return Err(FlowError::Config {
            field: "rows",
            value: rows.len().to_string(),
            expected: "one global row id per sample of x_init",
        });
    }
    if let Some(w) = cfg.window {
        if w.len == 0 || w.start + w.len > schedule.steps() {
            return Err(FlowError::Config {
                field: "window",
                value: format!("start {} len {}", w.start, w.len),
                expected: "a non-empty window inside the schedule's steps",
            });
        }
    }
    let sigma_1 = f64::from(schedule.sigmas()[1.min(schedule.steps())]);
    let elems = x_init.elem_count() / b.max(1);
    let mut x = x_init.to_dtype(DType::F32)?.detach();
    let (mut latents, mut lps) = (vec![x.clone()], Vec::new());
    let (mut stochastic, mut sigma_t, mut stds) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..schedule.steps() {
        let kind = step_kind_at(cfg, i);
        let pair = schedule.pair(i)?;
        let v = guided_velocity(model, &x, &sigma_batch(&x, pair.0)?, cond, guidance)?;
        let eps = key.iteration(i as u64).normal_rows(rows, elems, DType::F32, x.device())?;
        let eps = eps.reshape(x.shape())?;
        let t = kind.step(&x, &v.detach(), pair, sigma_1, Next::Noise(&eps), cfg.log_prob)?;
        x = t.next;
        latents.push(x.clone());
        lps.push(t.log_prob.detach());
        stochastic.push(kind.is_stochastic());
        sigma_t.push(t.sigma_t);
        stds.push(t.std);
    }
    Ok(Rollout {
        latents,
        log_probs: Tensor::stack(&lps, 1)?,
        stochastic,
        sigma_t,
        std: stds,
        evaluations: schedule.steps() * evaluations_per_call(guidance),
    })
}

/// The log-probability, under `model`, of the recorded transition `x_i → x_{i+1}` of a
/// rollout taken with `kind`, and the transition's mean (differentiable through the model's
/// velocity): what a trainer needs for the ratio and for Flow-GRPO's Gaussian-mean KL.
#[allow(clippy::too_many_arguments)]
pub fn transition_log_prob<M: VelocityField>(
    model: &M,
    x: &Tensor,
    x_next: &Tensor,
    i: usize,
    schedule: &Schedule,
    kind: StepKind,
    cond: &M::Cond,
    guidance: Option<&Guidance<'_, M::Cond>>,
    reduce: LogProbReduce,
) -> Result<super::step::Transition> {
    let pair = schedule.pair(i)?;
    let sigma_1 = f64::from(schedule.sigmas()[1.min(schedule.steps())]);
    let v = guided_velocity(model, x, &sigma_batch(x, pair.0)?, cond, guidance)?;
    kind.step(x, &v, pair, sigma_1, Next::Given(x_next), reduce)
}

/// [`transition_log_prob`] of several recorded transitions `x_{i_k} → x_{i_k + 1}` of the same
/// `B` samples in one model evaluation: the latents of the `S` steps are stacked into one
/// `[S·B, …]` batch with per-row noise levels, so a trainer pays one (larger, faster) forward
/// and backward instead of `S`. `xs[k]`, `x_nexts[k]` are `[B, …]`; `cond` (and the guidance's
/// `uncond`) must already hold `S·B` rows, repeated step-major like the latents. Returns one
/// [`Transition`](super::step::Transition) per step, each over `B` rows; the values equal
/// `transition_log_prob` of each step on its own.
#[allow(clippy::too_many_arguments)]
pub fn transitions_log_prob<M: VelocityField>(
    model: &M,
    xs: &[Tensor],
    x_nexts: &[Tensor],
    steps: &[usize],
    schedule: &Schedule,
    kind: StepKind,
    cond: &M::Cond,
    guidance: Option<&Guidance<'_, M::Cond>>,
    reduce: LogProbReduce,
) -> Result<Vec<super::step::Transition>> {
    if xs.len() != steps.len() || x_nexts.len() != steps.len() || steps.is_empty() {
        return Err(FlowError::Config {
            field: "steps",
            value: format!(
                "{} steps, {} latents, {} next latents",
                steps.len(),
                xs.len(),
                x_nexts.len()
            ),
            expected: "one latent and one next latent per step, at least one step",
        });
    }
    let b = xs[0].dim(0)?;
    let sigma_1 = f64::from(schedule.sigmas()[1.min(schedule.steps())]);
    let pairs = steps.iter().map(|&i| schedule.pair(i)).collect::<Result<Vec<_>>>()?;
    let sigmas: Vec<Tensor> =
        xs.iter().zip(&pairs).map(|(x, p)| sigma_batch(x, p.0)).collect::<Result<_>>()?;
    let x_all = Tensor::cat(xs, 0)?;
    let v_all = guided_velocity(model, &x_all, &Tensor::cat(&sigmas, 0)?, cond, guidance)?;
    let mut out = Vec::with_capacity(steps.len());
    for (k, pair) in pairs.into_iter().enumerate() {
        let v = v_all.narrow(0, k * b, b)?;
        out.push(kind.step(&xs[k], &v, pair, sigma_1, Next::Given(&x_nexts[k]), reduce)?);
    }
    Ok(out)
}
