//! Exponential moving average of the weights, for evaluation.

use std::collections::HashMap;

use candle_core::{DType, Tensor};
use serde::{Deserialize, Serialize};

use super::params::ParamSet;
use crate::error::{CoreError, Result};

/// EMA settings (Flow-GRPO's `EMAModuleWrapper`, arXiv 2505.05470).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EmaConfig {
    /// The decay cap `d`. Default 0.9 (Flow-GRPO).
    pub decay: f64,
    /// Update the average every `every` optimizer steps. Default 8 (Flow-GRPO).
    pub every: u64,
}

impl Default for EmaConfig {
    fn default() -> Self {
        Self { decay: 0.9, every: 8 }
    }
}

/// The moving average `ē ← δ ē + (1 − δ) θ` with the warm-up decay
/// `δ(s) = min((1 + s)/(10 + s), d)`, `s` the optimizer step, updated every `k` steps.
/// Kept in f32, separately from the training weights.
#[derive(Debug, Clone)]
pub struct Ema {
    cfg: EmaConfig,
    shadow: HashMap<String, Tensor>,
}

impl Ema {
    /// An average initialised to the current weights.
    pub fn new(cfg: EmaConfig, params: &ParamSet) -> Result<Self> {
        if !(0.0..=1.0).contains(&cfg.decay) || cfg.every == 0 {
            return Err(CoreError::Config {
                field: "ema",
                value: format!("decay {} every {}", cfg.decay, cfg.every),
                expected: "decay in [0, 1] and every >= 1",
            });
        }
        let shadow = params
            .iter()
            .map(|(n, v)| Ok((n.to_string(), v.as_detached_tensor().to_dtype(DType::F32)?.copy()?)))
            .collect::<Result<_>>()?;
        Ok(Self { cfg, shadow })
    }

    /// The decay at optimizer step `s`: `min((1 + s)/(10 + s), d)`.
    pub fn decay_at(&self, s: u64) -> f64 {
        ((1 + s) as f64 / (10 + s) as f64).min(self.cfg.decay)
    }

    /// Called after optimizer step `s` (1-based count of applied updates); averages when
    /// `s` is a multiple of `every`.
    pub fn update(&mut self, s: u64, params: &ParamSet) -> Result<()> {
        if s % self.cfg.every != 0 {
            return Ok(());
        }
        let d = self.decay_at(s);
        for (name, var) in params.iter() {
            // Detached: from the tracked `Var`, each average would record the op that made it
            // and so keep every earlier average alive (a leak of three weight-sized tensors
            // per step, 16 MB a step for the shipped DiT, until the process ran out of memory).
            let theta = var.as_detached_tensor().to_dtype(DType::F32)?;
            let avg = match self.shadow.get(name) {
                Some(e) => ((e * d)? + (theta * (1.0 - d))?)?,
                None => theta.copy()?,
            };
            self.shadow.insert(name.to_string(), avg);
        }
        Ok(())
    }

    /// The averaged weights, by name (f32).
    pub fn weights(&self) -> &HashMap<String, Tensor> {
        &self.shadow
    }

    /// Replaces the average (checkpoint restore).
    pub fn set_weights(&mut self, weights: HashMap<String, Tensor>) {
        self.shadow = weights;
    }

    /// Runs `f` with the EMA weights swapped into `params`, then restores the training
    /// weights exactly, whatever `f` returns.
    pub fn with_weights<T>(&self, params: &ParamSet, f: impl FnOnce() -> T) -> Result<T> {
        let saved = params.snapshot()?;
        params.load(&self.shadow)?;
        let out = f();
        params.load(&saved)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Var};

    #[test]
    fn decay_schedule_and_average_by_hand() -> Result<()> {
        let var = Var::new(&[0.0f32], &Device::Cpu)?;
        let params = ParamSet::from_vars([("w".to_string(), var.clone())])?;
        let mut ema = Ema::new(EmaConfig { decay: 0.5, every: 2 }, &params)?;
        assert_eq!(ema.decay_at(0), 0.1);
        assert_eq!(ema.decay_at(2), 0.25);
        assert_eq!(ema.decay_at(100), 0.5);
        var.set(&Tensor::new(&[4.0f32], &Device::Cpu)?)?;
        ema.update(1, &params)?; // not a multiple of 2: no change
        assert_eq!(ema.weights()["w"].to_vec1::<f32>()?, vec![0.0]);
        ema.update(2, &params)?; // δ = 0.25: 0.25·0 + 0.75·4
        assert_eq!(ema.weights()["w"].to_vec1::<f32>()?, vec![3.0]);
        let seen = ema.with_weights(&params, || var.as_tensor().to_vec1::<f32>())??;
        assert_eq!(seen, vec![3.0]);
        assert_eq!(var.as_tensor().to_vec1::<f32>()?, vec![4.0], "training weights restored");
        Ok(())
    }

    /// The average records no autograd graph: a tracked average would hold the tensors of
    /// every earlier step alive (the memory leak that stopped a pretraining run at step 1537).
    #[test]
    fn the_average_is_detached_from_the_weights_and_from_its_history() -> Result<()> {
        let var = Var::new(&[1.0f32, 2.0], &Device::Cpu)?;
        let params = ParamSet::from_vars([("w".to_string(), var.clone())])?;
        let mut ema = Ema::new(EmaConfig { decay: 0.9, every: 1 }, &params)?;
        assert!(!ema.weights()["w"].track_op());
        for s in 1..=3 {
            ema.update(s, &params)?;
            assert!(!ema.weights()["w"].track_op(), "step {s}: the average tracks an op");
        }
        Ok(())
    }
}
