//! Parameter sets: which weights an optimizer trains, and frozen copies.

use std::collections::{BTreeMap, HashMap};

use candle_core::{Tensor, Var};
use candle_nn::VarMap;

use crate::error::{CoreError, Result};

/// The trainable parameters of a model, by name, in a fixed (sorted) order.
///
/// Only these are updated, decayed, clipped and checkpointed as optimizer state. Weights meant
/// to stay fixed (a reference policy, a frozen encoder) should be loaded as plain tensors, not
/// `Var`s, so candle does not even compute their gradients (docs/architecture.md §6).
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

    /// The variables of `varmap` whose name contains one of `patterns` (all of them when
    /// `patterns` is empty): the `trainable = ["attn"]` option of the trainers, the full-rank
    /// analogue of training a LoRA on the attention projections (Flow-GRPO, arXiv 2505.05470).
    /// A pattern that matches no name is a [`CoreError::Config`] naming it, so a typo cannot
    /// silently freeze the whole model.
    pub fn matching(varmap: &VarMap, patterns: &[String]) -> Result<Self> {
        if patterns.is_empty() {
            return Ok(Self::all(varmap));
        }
        let names: Vec<String> =
            varmap.data().lock().expect("VarMap mutex poisoned").keys().cloned().collect();
        if let Some(unmatched) =
            patterns.iter().find(|p| !names.iter().any(|n| n.contains(p.as_str())))
        {
            return Err(CoreError::Config {
                field: "trainable",
                value: format!("{unmatched:?}"),
                expected: "a part of a parameter name, e.g. \"attn\"",
            });
        }
        Ok(Self::filtered(varmap, |n| patterns.iter().any(|p| n.contains(p.as_str()))))
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

/// Untracked views of every variable of `varmap` that share its storage
/// (`Var::as_detached_tensor`): a model built on them records no graph (rollouts, old-policy
/// passes) yet sees every optimizer update, with no copy (docs/architecture.md §6).
pub fn detached_view(varmap: &VarMap) -> HashMap<String, Tensor> {
    let data = varmap.data().lock().expect("VarMap mutex poisoned");
    data.iter().map(|(n, v)| (n.clone(), v.as_detached_tensor())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{DType, Device};
    use candle_nn::Init;

    #[test]
    fn detached_view_shares_storage_and_records_no_graph() -> Result<()> {
        let vm = VarMap::new();
        vm.get(3, "w", Init::Const(1.0), DType::F32, &Device::Cpu)?;
        let view = detached_view(&vm);
        assert!(!view["w"].track_op());
        let var = vm.data().lock().unwrap()["w"].clone();
        var.set(&Tensor::new(&[2f32, 3., 4.], &Device::Cpu)?)?;
        assert_eq!(view["w"].to_vec1::<f32>()?, vec![2., 3., 4.], "the view sees the update");
        let frozen = frozen_copy(&vm)?;
        var.set(&Tensor::new(&[0f32, 0., 0.], &Device::Cpu)?)?;
        assert_eq!(frozen["w"].to_vec1::<f32>()?, vec![2., 3., 4.], "a frozen copy does not");
        Ok(())
    }
}
