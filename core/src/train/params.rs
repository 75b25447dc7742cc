//! Parameter sets: which weights an optimizer trains, and frozen copies.

use std::collections::{BTreeMap, HashMap};

use candle_core::{Tensor, Var};
use candle_nn::VarMap;

use crate::error::{CoreError, Result};

/// The trainable parameters of a model, by name, in a fixed (sorted) order.
///
/// Only these are updated, decayed, clipped and checkpointed as optimizer state. Weights meant
/// to stay fixed (a reference policy, a frozen encoder) should be loaded as plain tensors, not
/// `Var`s, so candle does not even compute their gradients (DESIGN.md §6).
#[derive(Debug, Clone, Default)]
pub struct ParamSet {
    entries: Vec<(String, Var)>,
}

impl ParamSet {
    /// Every variable of `varmap`.
    pub fn all(varmap: &VarMap) -> Self {
        Self::filtered(varmap, |_| true)
    }

    /// The variables of `varmap` whose name satisfies `keep` (train only some layers, or an
    /// adapter).
    pub fn filtered(varmap: &VarMap, keep: impl Fn(&str) -> bool) -> Self {
        let data = varmap.data().lock().expect("VarMap mutex poisoned");
        let mut entries: Vec<(String, Var)> =
            data.iter().filter(|(n, _)| keep(n)).map(|(n, v)| (n.clone(), v.clone())).collect();
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        Self { entries }
    }

    /// From explicit `(name, var)` pairs. Errors on a duplicate name.
    pub fn from_vars(vars: impl IntoIterator<Item = (String, Var)>) -> Result<Self> {
        let mut map = BTreeMap::new();
        for (n, v) in vars {
            if map.insert(n.clone(), v).is_some() {
                return Err(CoreError::Mismatch(format!("parameter `{n}` given twice")));
            }
        }
        Ok(Self { entries: map.into_iter().collect() })
    }

    /// `(name, var)` pairs in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Var)> {
        self.entries.iter().map(|(n, v)| (n.as_str(), v))
    }

    /// Number of parameter tensors.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there is nothing to train.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Total number of scalar parameters.
    pub fn num_elements(&self) -> usize {
        self.entries.iter().map(|(_, v)| v.elem_count()).sum()
    }

    /// The variable named `name`.
    pub fn get(&self, name: &str) -> Option<&Var> {
        self.entries.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }

    /// Deep copies of the current values (a frozen reference policy, or a checkpoint).
    pub fn snapshot(&self) -> Result<HashMap<String, Tensor>> {
        self.entries.iter().map(|(n, v)| Ok((n.clone(), v.as_tensor().copy()?))).collect()
    }

    /// Overwrites every parameter from `values`; errors naming a missing tensor or a wrong
    /// shape.
    pub fn load(&self, values: &HashMap<String, Tensor>) -> Result<()> {
        for (name, var) in &self.entries {
            let t = values.get(name).ok_or_else(|| {
                CoreError::Mismatch(format!("no value for parameter `{name}` in the weights"))
            })?;
            if t.dims() != var.dims() {
                return Err(CoreError::Shape {
                    name: "parameter",
                    got: t.dims().to_vec(),
                    expected: format!("{:?} for `{name}`", var.dims()),
                });
            }
            var.set(&t.to_dtype(var.dtype())?.to_device(var.device())?)?;
        }
        Ok(())
    }
}

/// Deep copies of every tensor of `varmap` as plain (untracked) tensors: a frozen reference
/// model is built from these with `VarBuilder::from_tensors`.
pub fn frozen_copy(varmap: &VarMap) -> Result<HashMap<String, Tensor>> {
    ParamSet::all(varmap).snapshot()
}
