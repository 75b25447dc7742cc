//! LoRA adapters on the MMDiT's linear layers (Hu et al., "LoRA: Low-Rank Adaptation of Large
//! Language Models", arXiv 2106.09685), as Flow-GRPO trains SD3.5 (r 32, α 64 on the
//! attention projections).

use candle_nn::VarBuilder;
use drift_core::error::CoreError;
use drift_core::nn::{lora, torch_default_init, Linear, LoraAdapter};
use serde::{Deserialize, Serialize};

use crate::error::{FlowModelError, Result};

/// Which layers get an adapter, and its size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LoraConfig {
    /// The adapter rank `r`; default 32 (flow_grpo's SD3.5 configs).
    pub rank: usize,
    /// `α`: the update is scaled by `α / r`; default 64.
    pub alpha: f64,
    /// PEFT's `target_modules`: a layer is adapted when its name equals one of these or ends
    /// with `"." + target`. Default flow_grpo's: the joint attention's eight projections
    /// (`attn.to_q`, `attn.to_k`, `attn.to_v`, `attn.to_out.0`, `attn.add_q_proj`,
    /// `attn.add_k_proj`, `attn.add_v_proj`, `attn.to_add_out`).
    pub target_modules: Vec<String>,
}

impl Default for LoraConfig {
    fn default() -> Self {
        let t = [
            "attn.add_k_proj",
            "attn.add_q_proj",
            "attn.add_v_proj",
            "attn.to_add_out",
            "attn.to_k",
            "attn.to_out.0",
            "attn.to_q",
            "attn.to_v",
        ];
        Self { rank: 32, alpha: 64.0, target_modules: t.iter().map(|s| s.to_string()).collect() }
    }
}

impl LoraConfig {
    /// Whether the layer `name` (a module path such as `transformer_blocks.0.attn.to_q`) is
    /// adapted.
    #[must_use]
    pub fn targets(&self, name: &str) -> bool {
        lora::targets(&self.target_modules, name)
    }

    /// Checks the rank and α.
    pub fn validate(&self) -> Result<()> {
        lora::check_rank_alpha(self.rank, self.alpha).map_err(|e| match e {
            CoreError::Config { field, value, expected } => {
                FlowModelError::Config { field, value, expected: expected.into() }
            }
            other => FlowModelError::from(other),
        })
    }
}

/// A linear layer with an optional LoRA adapter, `y = x Wᵀ + b + (α/r)(x Aᵀ) Bᵀ`: drift's one
/// [`Linear`], whose adapter runs in its own dtype (f32 beside a bf16 base), its output cast
/// back.
pub type Proj = Linear;

/// Builds the model's projections: the base weights from the model's `VarBuilder`, and, for
/// the layers [`LoraConfig::targets`] names, an adapter from the adapter's `VarBuilder` under
/// `{layer}.lora_A.weight` / `{layer}.lora_B.weight` (PEFT's names without a prefix).
#[derive(Clone, Default)]
pub struct ProjLoader<'a> {
    lora: Option<(LoraConfig, VarBuilder<'a>)>,
}

impl<'a> ProjLoader<'a> {
    /// No adapters.
    #[must_use]
    pub fn plain() -> Self {
        Self { lora: None }
    }

    /// Adapters per `cfg`, created in (or loaded from) `vb`.
    pub fn with_lora(cfg: LoraConfig, vb: VarBuilder<'a>) -> Result<Self> {
        cfg.validate()?;
        Ok(Self { lora: Some((cfg, vb)) })
    }

    /// The layer `name`: `weight[out, in]` (+ `bias[out]`) under `vb`, with an adapter when
    /// targeted. `A` starts as torch's default (Kaiming-uniform) init, `B` at zero, as PEFT's.
    pub fn proj(&self, i: usize, o: usize, bias: bool, vb: VarBuilder, name: &str) -> Result<Proj> {
        let base = Linear::load(i, o, bias, torch_default_init(i), vb)?;
        Ok(match &self.lora {
            Some((cfg, lvb)) if cfg.targets(name) => {
                base.with_adapter(LoraAdapter::load(i, o, cfg.rank, cfg.alpha, lvb.pp(name))?)
            }
            _ => base,
        })
    }
}
