//! Gradients by parameter name: extraction, accumulation over micro-batches, global-norm
//! clipping.

use std::collections::BTreeMap;

use candle_core::backprop::GradStore;
use candle_core::{DType, Tensor};

use super::params::ParamSet;
use crate::error::Result;

/// Gradients of the trainable parameters, by name. A parameter the loss did not reach has no
/// entry (the optimizer then leaves it untouched, as PyTorch does for `grad is None`).
#[derive(Debug, Clone, Default)]
pub struct Grads {
    map: BTreeMap<String, Tensor>,
}

impl Grads {
    /// Gradients given by name.
    pub fn from_map(map: BTreeMap<String, Tensor>) -> Self {
        Self { map }
    }

    /// The gradients of `params` in `store`, multiplied by `scale`.
    pub fn from_store(store: &GradStore, params: &ParamSet, scale: f64) -> Result<Self> {
        let mut map = BTreeMap::new();
        for (name, var) in params.iter() {
            if let Some(g) = store.get(var.as_tensor()) {
                let g = if scale == 1.0 { g.clone() } else { (g * scale)? };
                map.insert(name.to_string(), g);
            }
        }
        Ok(Self { map })
    }

    /// `(name, gradient)` pairs in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Tensor)> {
        self.map.iter().map(|(n, g)| (n.as_str(), g))
    }

    /// The gradient of `name`.
    pub fn get(&self, name: &str) -> Option<&Tensor> {
        self.map.get(name)
    }

    /// Number of parameters that have a gradient.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether no parameter has a gradient.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Adds `other` into `self` (accumulation): `g ← g + g_other`, per name.
    pub fn accumulate(&mut self, other: Grads) -> Result<()> {
        for (name, g) in other.map {
            let sum = match self.map.remove(&name) {
                Some(prev) => (prev + g)?,
                None => g,
            };
            self.map.insert(name, sum);
        }
        Ok(())
    }

    /// The global L2 norm `√(Σ_p ‖g_p‖²)`, with a single host read for all parameters.
    /// `NaN` or `inf` when any gradient is not finite.
    pub fn global_norm(&self) -> Result<f64> {
        if self.map.is_empty() {
            return Ok(0.0);
        }
        let squares: Vec<Tensor> = self
            .map
            .values()
            .map(|g| g.to_dtype(DType::F32)?.sqr()?.sum_all())
            .collect::<candle_core::Result<_>>()?;
        let total = Tensor::stack(&squares, 0)?.sum_all()?.to_scalar::<f32>()?;
        Ok(f64::from(total).sqrt())
    }

    /// Multiplies every gradient by `factor`.
    pub fn scale(&mut self, factor: f64) -> Result<()> {
        for g in self.map.values_mut() {
            *g = (&*g * factor)?;
        }
        Ok(())
    }

    /// Global-norm clipping (Pascanu et al., arXiv 1211.5063), as torch's
    /// `clip_grad_norm_`: with `n` the pre-clip norm, scale by `max_norm/(n + 1e-6)` when that is
    /// below 1. Returns `n`.
    pub fn clip_global_norm(&mut self, max_norm: f64) -> Result<f64> {
        let norm = self.global_norm()?;
        let factor = max_norm / (norm + 1e-6);
        if norm.is_finite() && factor < 1.0 {
            self.scale(factor)?;
        }
        Ok(norm)
    }
}
