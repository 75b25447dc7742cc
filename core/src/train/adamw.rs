//! AdamW with f32 moments and state that saves and loads.
//!
//! candle-nn's `AdamW` keeps private state, moments in the parameter's dtype and no parameter
//! groups (docs/architecture.md §6); this one keeps its moments in f32 whatever the weights' dtype, and
//! exposes them for checkpoints.

use std::collections::{BTreeMap, HashMap};

use candle_core::{DType, Tensor, Var};
use serde::{Deserialize, Serialize};

use super::grads::Grads;
use super::params::ParamSet;
use crate::error::{CoreError, Result};

/// AdamW hyperparameters (Loshchilov & Hutter, arXiv 1711.05101, as torch.optim.AdamW).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdamWConfig {
    /// Base learning rate. Default 3e-4 (Flow-GRPO); the schedule multiplies it.
    pub lr: f64,
    /// `β₁`. Default 0.9.
    pub beta1: f64,
    /// `β₂`. Default 0.999.
    pub beta2: f64,
    /// `ε`. Default 1e-8.
    pub eps: f64,
    /// Decoupled weight decay `λ`. Default 1e-4 (Flow-GRPO; torch's default is 1e-2).
    pub weight_decay: f64,
}

impl Default for AdamWConfig {
    fn default() -> Self {
        Self { lr: 3e-4, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 1e-4 }
    }
}

impl AdamWConfig {
    /// Checks the hyperparameters, naming the field at fault.
    pub fn validate(&self) -> Result<()> {
        let bad = |field, v: f64, expected| {
            Err(CoreError::Config { field, value: v.to_string(), expected })
        };
        if !(self.lr >= 0.0 && self.lr.is_finite()) {
            return bad("optim.adamw.lr", self.lr, "a finite number >= 0");
        }
        if !(0.0..1.0).contains(&self.beta1) {
            return bad("optim.adamw.beta1", self.beta1, "a number in [0, 1)");
        }
        if !(0.0..1.0).contains(&self.beta2) {
            return bad("optim.adamw.beta2", self.beta2, "a number in [0, 1)");
        }
        if !(self.eps > 0.0) {
            return bad("optim.adamw.eps", self.eps, "a number > 0");
        }
        if !(self.weight_decay >= 0.0) {
            return bad("optim.adamw.weight_decay", self.weight_decay, "a number >= 0");
        }
        Ok(())
    }
}

/// First and second moments of one parameter, f32.
#[derive(Debug, Clone)]
struct Moments {
    m: Tensor,
    v: Tensor,
    /// Updates applied to this parameter (bias correction is per parameter, as torch).
    t: u64,
}

/// An AdamW update computed but not applied ([`AdamW::propose`]).
#[derive(Debug)]
pub struct Proposal {
    /// Per parameter: its name, its variable, the new weights (f32) and moments.
    rows: Vec<(String, Var, Tensor, Moments)>,
}

impl Proposal {
    /// `(Σ θ_new², Σ θ_old²)` over the proposed parameters, as f64: one host read per step.
    pub fn squared_norms(&self) -> Result<(f64, f64)> {
        if self.rows.is_empty() {
            return Ok((0.0, 0.0));
        }
        let mut sums = Vec::with_capacity(2 * self.rows.len());
        for (_, var, theta, _) in &self.rows {
            sums.push(theta.sqr()?.sum_all()?);
            sums.push(var.as_tensor().to_dtype(DType::F32)?.sqr()?.sum_all()?);
        }
        // Rows of [new, old]: the column sums are the two totals.
        let n = self.rows.len();
        let totals = Tensor::stack(&sums, 0)?.reshape((n, 2))?.sum(0)?.to_vec1::<f32>()?;
        Ok((f64::from(totals[0]), f64::from(totals[1])))
    }
}

/// The AdamW optimizer and its state.
#[derive(Debug, Clone)]
pub struct AdamW {
    cfg: AdamWConfig,
    state: BTreeMap<String, Moments>,
}

impl AdamW {
    /// A fresh optimizer (zero moments, created lazily per parameter).
    pub fn new(cfg: AdamWConfig) -> Result<Self> {
        cfg.validate()?;
        Ok(Self { cfg, state: BTreeMap::new() })
    }

    /// The hyperparameters.
    pub fn config(&self) -> &AdamWConfig {
        &self.cfg
    }

    /// One update at learning rate `lr` of every parameter of `params` that has a gradient:
    /// `θ ← θ(1 − lr λ)`, `m ← β₁m + (1−β₁)g`, `v ← β₂v + (1−β₂)g²`,
    /// `θ ← θ − lr · (m/(1−β₁ᵗ)) / (√(v/(1−β₂ᵗ)) + ε)`, all in f32.
    pub fn step(&mut self, params: &ParamSet, grads: &Grads, lr: f64) -> Result<()> {
        let proposal = self.propose(params, grads, lr)?;
        self.commit(proposal)
    }

    /// The update [`AdamW::step`] would make, computed but not applied: the new weights and
    /// moments of every parameter with a gradient, for a caller to check before
    /// [`AdamW::commit`]ting it (or dropping it, which leaves weights and state untouched).
    pub fn propose(&self, params: &ParamSet, grads: &Grads, lr: f64) -> Result<Proposal> {
        let c = self.cfg;
        let mut rows = Vec::new();
        for (name, var) in params.iter() {
            let Some(g) = grads.get(name) else { continue };
            let g = g.to_dtype(DType::F32)?;
            let (m0, v0, t0) = match self.state.get(name) {
                Some(s) => (s.m.clone(), s.v.clone(), s.t),
                None => (g.zeros_like()?, g.zeros_like()?, 0),
            };
            let t = t0 + 1;
            let m = ((&m0 * c.beta1)? + (&g * (1.0 - c.beta1))?)?;
            let v = ((&v0 * c.beta2)? + (g.sqr()? * (1.0 - c.beta2))?)?;
            let m_hat = (&m / (1.0 - c.beta1.powi(t as i32)))?;
            let v_hat = (&v / (1.0 - c.beta2.powi(t as i32)))?;
            let theta = var.as_tensor().to_dtype(DType::F32)?;
            let theta = (theta * (1.0 - lr * c.weight_decay))?;
            let update = (m_hat / (v_hat.sqrt()? + c.eps)?)?;
            let theta = (theta - (update * lr)?)?;
            rows.push((name.to_string(), var.clone(), theta, Moments { m, v, t }));
        }
        Ok(Proposal { rows })
    }

    /// Applies the proposal made by [`AdamW::propose`].
    pub fn commit(&mut self, proposal: Proposal) -> Result<()> {
        for (name, var, theta, moments) in proposal.rows {
            var.set(&theta.to_dtype(var.dtype())?)?;
            self.state.insert(name, moments);
        }
        Ok(())
    }

    /// The state as named tensors (`m/<name>`, `v/<name>`, `t/<name>`) for a safetensors file.
    pub fn state_tensors(&self) -> Result<HashMap<String, Tensor>> {
        let mut out = HashMap::new();
        for (name, s) in &self.state {
            out.insert(format!("m/{name}"), s.m.clone());
            out.insert(format!("v/{name}"), s.v.clone());
            let t = Tensor::new(&[s.t as i64], s.m.device())?;
            out.insert(format!("t/{name}"), t);
        }
        Ok(out)
    }

    /// Restores the state written by [`AdamW::state_tensors`]; errors naming an incomplete
    /// entry.
    pub fn load_state(&mut self, tensors: &HashMap<String, Tensor>) -> Result<()> {
        let mut state = BTreeMap::new();
        for key in tensors.keys() {
            let Some(name) = key.strip_prefix("m/") else { continue };
            let get = |prefix: &str| {
                tensors.get(&format!("{prefix}/{name}")).ok_or_else(|| {
                    CoreError::Mismatch(format!(
                        "optimizer state for `{name}` has `m` but no `{prefix}` tensor"
                    ))
                })
            };
            let t = get("t")?.to_vec1::<i64>()?.first().copied().unwrap_or(0).max(0) as u64;
            let m = tensors[key].to_dtype(DType::F32)?;
            state.insert(name.to_string(), Moments { m, v: get("v")?.to_dtype(DType::F32)?, t });
        }
        self.state = state;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Var};

    #[test]
    fn first_steps_by_hand() -> Result<()> {
        // One scalar parameter θ = 1, gradients 0.5 then −1; lr 0.1, λ 0.01.
        let var = Var::new(&[1.0f32], &Device::Cpu)?;
        let params = ParamSet::from_vars([("w".to_string(), var.clone())])?;
        let cfg = AdamWConfig { lr: 0.1, weight_decay: 0.01, ..AdamWConfig::default() };
        let mut opt = AdamW::new(cfg)?;
        let mut theta = 1.0f64;
        let (mut m, mut v) = (0.0f64, 0.0f64);
        for (t, g) in [(1, 0.5f64), (2, -1.0)] {
            let mut map = BTreeMap::new();
            map.insert("w".to_string(), Tensor::new(&[g as f32], &Device::Cpu)?);
            opt.step(&params, &Grads::from_map(map), 0.1)?;
            theta *= 1.0 - 0.1 * 0.01;
            m = 0.9 * m + 0.1 * g;
            v = 0.999 * v + 0.001 * g * g;
            let mh = m / (1.0 - 0.9f64.powi(t));
            let vh = v / (1.0 - 0.999f64.powi(t));
            theta -= 0.1 * mh / (vh.sqrt() + 1e-8);
            let got = f64::from(var.as_tensor().to_vec1::<f32>()?[0]);
            assert!((got - theta).abs() < 1e-6, "step {t}: {got} vs {theta}");
        }
        Ok(())
    }

    #[test]
    fn validate_names_the_field() {
        let err = AdamW::new(AdamWConfig { beta2: 1.0, ..AdamWConfig::default() }).unwrap_err();
        assert!(err.to_string().contains("optim.adamw.beta2"));
    }
}
