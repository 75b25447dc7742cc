//! LoRA on the dLLM's block projections, as d1 trains LLaDA with diffu-GRPO (PEFT, r 128,
//! α 64): the base weights stay frozen and each targeted layer gains
//! `(α/r) (x Aᵀ) Bᵀ` ([`drift_core::nn::lora`]). The adapters' tensors live beside the base's
//! in the model's weights as `{layer}.lora_A.weight` / `{layer}.lora_B.weight`; a saved model
//! has them merged (`W + (α/r) B A`), so it loads and decodes as a plain checkpoint.

use candle_nn::VarBuilder;
use drift_core::nn::{lora, Linear, LoraAdapter};
use serde::{Deserialize, Serialize};

use crate::error::{DllmError, Result};

/// The `target_modules` entry that adapts every projection inside the blocks (attention and
/// MLP), PEFT's `"all-linear"`. The output head and the embeddings are never adapted.
pub const ALL_LINEAR: &str = "all-linear";

/// Which block projections get an adapter, and its size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LoraConfig {
    /// The adapter rank `r`. Default 16.
    pub rank: usize,
    /// `α`: the update is scaled by `α / r`. Default 32 (`α = 2r`, PEFT's common choice).
    pub alpha: f64,
    /// PEFT's `target_modules`: a projection is adapted when its path ends with
    /// `"." + target` (LLaDA: `q_proj`, `k_proj`, `v_proj`, `attn_out`, `ff_proj`, `up_proj`,
    /// `ff_out`; Dream: `q_proj`, `k_proj`, `v_proj`, `o_proj`, `gate_proj`, `up_proj`,
    /// `down_proj`), or always with [`ALL_LINEAR`]. Default `["all-linear"]`.
    pub target_modules: Vec<String>,
}

impl Default for LoraConfig {
    fn default() -> Self {
        Self { rank: 16, alpha: 32.0, target_modules: vec![ALL_LINEAR.to_string()] }
    }
}

impl LoraConfig {
    /// Whether the block projection at `path` (e.g. `model.transformer.blocks.0.q_proj`) is
    /// adapted.
    #[must_use]
    pub fn targets(&self, path: &str) -> bool {
        self.target_modules.iter().any(|t| t == ALL_LINEAR)
            || lora::targets(&self.target_modules, path)
    }

    /// Checks the rank, α and that some target is named.
    pub fn validate(&self) -> Result<()> {
        let bad = |key, value: String, expected: &str| {
            Err(DllmError::Config { key, value, expected: expected.into() })
        };
        if self.rank == 0 {
            return bad("lora.rank", "0".into(), "a positive rank");
        }
        if !self.alpha.is_finite() || self.alpha <= 0.0 {
            return bad("lora.alpha", self.alpha.to_string(), "a positive number");
        }
        if self.target_modules.is_empty() {
            return bad("lora.target_modules", "[]".into(), "at least one module name");
        }
        Ok(())
    }

    /// `α / r`.
    #[must_use]
    pub fn scale(&self) -> f64 {
        self.alpha / self.rank as f64
    }
}

/// Whether `name` is one of an adapter's tensors (`….lora_A.weight`, `….lora_B.weight`).
#[must_use]
pub fn is_adapter_tensor(name: &str) -> bool {
    name.ends_with(".lora_A.weight") || name.ends_with(".lora_B.weight")
}

/// Attaches an adapter to the block projection `layer` (built from `vb`) when `lora` targets
/// it; its tensors come from the same `vb`.
pub(crate) fn adapt(
    layer: Linear,
    in_dim: usize,
    out_dim: usize,
    lora: Option<&LoraConfig>,
    vb: &VarBuilder,
) -> Result<Linear> {
    match lora {
        Some(cfg) if cfg.targets(vb.prefix().as_str()) => Ok(layer
            .with_adapter(LoraAdapter::load(in_dim, out_dim, cfg.rank, cfg.alpha, vb.clone())?)),
        _ => Ok(layer),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{DiffusionLm, LoadOptions, TinySize};
    use crate::tokenizer::CharTokenizer;
    use candle_core::{Device, Tensor};
    use drift_core::rng::RngKey;

    fn nano(opts: &LoadOptions) -> DiffusionLm {
        let cfg = TinySize::Nano.spec().llada(CharTokenizer::ascii().vocab_spec());
        DiffusionLm::init(cfg, RngKey::new(3), opts).unwrap()
    }

    fn max_diff(a: &Tensor, b: &Tensor) -> f32 {
        (a - b).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap()
    }

    /// A fresh adapter leaves the logits bit-equal to the base's; only the adapters are
    /// `Var`s; once `B` moves, the merged model computes the adapted map.
    #[test]
    fn adapters_start_as_the_base_train_alone_and_merge_to_the_same_map() {
        let ids = Tensor::new(&[[1u32, 40, 41, 42, 43, 44, 45, 2]], &Device::Cpu).unwrap();
        let plain = nano(&LoadOptions::frozen()).raw_logits(&ids, None).unwrap();
        let cfg = LoraConfig {
            rank: 4,
            alpha: 8.0,
            target_modules: vec!["q_proj".into(), "ff_out".into()],
        };
        let opts = LoadOptions { lora: Some(cfg), ..LoadOptions::trainable() };
        let model = nano(&opts);
        assert_eq!(max_diff(&model.raw_logits(&ids, None).unwrap(), &plain), 0.0);
        let vars = model.varmap().unwrap().data().lock().unwrap().clone();
        let n_layers = TinySize::Nano.spec().n_layers;
        // q_proj and the blocks' ff_out, never the head `model.transformer.ff_out`.
        assert_eq!(vars.len(), 2 * 2 * n_layers, "{:?}", vars.keys().collect::<Vec<_>>());
        assert!(vars.keys().all(|n| is_adapter_tensor(n) && n.contains(".blocks.")));
        for (name, var) in &vars {
            if name.ends_with("lora_B.weight") {
                let bump = Tensor::randn(0f32, 0.05, var.shape(), &Device::Cpu).unwrap();
                var.set(&bump).unwrap();
            }
        }
        let adapted = model.raw_logits(&ids, None).unwrap();
        assert!(max_diff(&adapted, &plain) > 1e-3);
        let merged = model.merged().unwrap();
        assert!(
            merged.lora().is_none() && merged.weights().iter().all(|(n, _)| !is_adapter_tensor(n))
        );
        assert!(max_diff(&merged.raw_logits(&ids, None).unwrap(), &adapted) < 1e-4);
        // A detached view shares the adapters' storage.
        let view = model.detached().unwrap();
        assert_eq!(max_diff(&view.raw_logits(&ids, None).unwrap(), &adapted), 0.0);
    }

    #[test]
    fn a_target_that_matches_no_projection_is_refused() {
        let cfg = LoraConfig { target_modules: vec!["q_prj".into()], ..LoraConfig::default() };
        let err = DiffusionLm::init(
            TinySize::Nano.spec().llada(CharTokenizer::ascii().vocab_spec()),
            RngKey::new(3),
            &LoadOptions { lora: Some(cfg), ..LoadOptions::trainable() },
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("lora.target_modules") && err.contains("q_prj"), "{err}");
    }

    #[test]
    fn targets_and_validation() {
        let all = LoraConfig::default();
        assert!(all.targets("model.transformer.blocks.3.ff_out"));
        let qv = LoraConfig { target_modules: vec!["q_proj".into(), "v_proj".into()], ..all };
        assert!(qv.targets("model.layers.0.self_attn.q_proj"));
        assert!(!qv.targets("model.layers.0.self_attn.k_proj"));
        assert_eq!(qv.scale(), 2.0);
        let err = LoraConfig { rank: 0, ..LoraConfig::default() }.validate().unwrap_err();
        assert!(err.to_string().contains("lora.rank"), "{err}");
        let none = LoraConfig { target_modules: vec![], ..LoraConfig::default() };
        assert!(none.validate().unwrap_err().to_string().contains("lora.target_modules"));
        assert!(is_adapter_tensor("a.b.q_proj.lora_B.weight"));
        assert!(!is_adapter_tensor("a.b.q_proj.weight"));
    }
}
