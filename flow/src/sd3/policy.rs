//! The SD3 / SD3.5 pipeline as a Flow-GRPO policy: the MMDiT with LoRA adapters over frozen
//! base weights, CFG's null prompt, the VAE decoder, and the adapter saved in PEFT's format.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use candle_core::{DType, Device, Tensor};
use candle_nn::{VarBuilder, VarMap};
use drift_core::rng::RngKey;
use drift_core::train::{detached_view, OptimConfig, Optimizer, ParamSet};
use drift_samplers::flow::VelocityField;

use super::config::Sd3Config;
use super::io::{read_sd3_config, read_sd3_weights};
use super::lora::{LoraConfig, ProjLoader};
use super::model::Sd3Transformer;
use super::vae::Sd3Vae;
use crate::error::{file_err, FlowModelError, Result};
use crate::policy::{FlowPolicy, PolicyModels, SavePolicy};

/// SD3's conditioning of `B` samples as one tensor, so that every sampler and the trainer
/// (which select, repeat and split conditioning rows along dimension 0) carry it unchanged:
/// `[B, M + 1, J]`, the text encoder states `text[B, M, J]` in rows `0..M` and the pooled
/// embedding `pooled[B, P]`, zero-padded to `J`, in row `M`. Needs `P ≤ J` (SD3: 2048 ≤ 4096).
pub fn pack_cond(text: &Tensor, pooled: &Tensor) -> Result<Tensor> {
    let (b, _, j) = text.dims3()?;
    let (bp, p) = pooled.dims2()?;
    if bp != b || p > j {
        return Err(FlowModelError::Config {
            field: "pooled_projections",
            value: format!("{:?} beside text states {:?}", pooled.dims(), text.dims()),
            expected: "one pooled row per sample, no wider than the text states".into(),
        });
    }
    let pooled = pooled.pad_with_zeros(1, 0, j - p)?.unsqueeze(1)?;
    Ok(Tensor::cat(&[text, &pooled.to_dtype(text.dtype())?], 1)?)
}

/// The inverse of [`pack_cond`]: `(text[B, M, J], pooled[B, P])`.
pub fn unpack_cond(cond: &Tensor, pooled_dim: usize) -> Result<(Tensor, Tensor)> {
    let m = cond.dim(1)? - 1;
    Ok((cond.narrow(1, 0, m)?, cond.narrow(1, m, 1)?.squeeze(1)?.narrow(1, 0, pooled_dim)?))
}

/// The SD3 pipeline's velocity field: `v(x, σ, c) = MMDiT(x, text, pooled, 1000σ)` on latents
/// of `latent_shape`, with the empty prompt's packed embedding as CFG's null conditioning and
/// the VAE (when loaded) as decoder.
#[derive(Clone)]
pub struct Sd3Policy {
    transformer: Sd3Transformer,
    null: Tensor,
    latent: (usize, usize, usize),
    vae: Option<Arc<Sd3Vae>>,
}

impl Sd3Policy {
    /// The policy over `transformer`; `null` is the packed embedding `[1, M + 1, J]` of the
    /// empty prompt, `latent_side` the latent's height and width.
    pub fn new(
        transformer: Sd3Transformer,
        null: Tensor,
        latent_side: usize,
        vae: Option<Arc<Sd3Vae>>,
    ) -> Result<Self> {
        let c = transformer.config().in_channels;
        if latent_side == 0 || latent_side % transformer.config().patch_size != 0 {
            return Err(FlowModelError::Config {
                field: "latent_side",
                value: latent_side.to_string(),
                expected: format!(
                    "a positive multiple of patch_size {}",
                    transformer.config().patch_size
                ),
            });
        }
        Ok(Self { transformer, null, latent: (c, latent_side, latent_side), vae })
    }

    /// The transformer.
    #[must_use]
    pub fn transformer(&self) -> &Sd3Transformer {
        &self.transformer
    }
}

impl VelocityField for Sd3Policy {
    type Cond = Tensor;
    fn velocity(&self, x: &Tensor, sigma: &Tensor, cond: &Tensor) -> candle_core::Result<Tensor> {
        let err = |e: FlowModelError| candle_core::Error::Msg(e.to_string());
        let (text, pooled) =
            unpack_cond(cond, self.transformer.config().pooled_projection_dim).map_err(err)?;
        // The base may be bf16/f16 on a GPU; the sampler's arithmetic stays in x's dtype.
        let dt = self.transformer.dtype();
        let t = (sigma.to_dtype(DType::F32)? * 1000.0)?;
        let v = self
            .transformer
            .forward(&x.to_dtype(dt)?, &text.to_dtype(dt)?, &pooled.to_dtype(dt)?, &t.to_dtype(dt)?)
            .map_err(err)?;
        v.to_dtype(x.dtype())
    }
}

impl FlowPolicy for Sd3Policy {
    fn device(&self) -> &Device {
        self.null.device()
    }
    fn latent_shape(&self) -> (usize, usize, usize) {
        self.latent
    }
    fn null_cond(&self, n: usize) -> Result<Tensor> {
        Ok(self.null.repeat((n, 1, 1))?)
    }
    /// The VAE decoder, or the latents' first three channels scaled into `[−1, 1]`-ish range
    /// when no VAE is loaded (a transformer-only folder: tests and latent-space rewards).
    fn decode(&self, latents: &Tensor) -> Result<Tensor> {
        match &self.vae {
            Some(vae) => vae.decode(latents),
            None => Ok(latents.narrow(1, 0, 3.min(latents.dim(1)?))?.tanh()?),
        }
    }
}

/// The adapter file in a saved model directory (PEFT's `save_pretrained` layout).
pub const ADAPTER_FILE: &str = "adapter_model.safetensors";
/// PEFT's adapter config beside it.
pub const ADAPTER_CONFIG: &str = "adapter_config.json";
/// The prefix PEFT gives every adapter weight.
const PEFT_PREFIX: &str = "base_model.model.";

/// Writes the adapter `weights` (drift's names, `{layer}.lora_{A,B}.weight`) into `dir` as
/// PEFT's `save_pretrained` does: `adapter_model.safetensors` with every name prefixed
/// `base_model.model.`, and `adapter_config.json` (`peft_type LORA`, `r`, `lora_alpha`,
/// `target_modules`), which `peft.PeftModel.from_pretrained(pipe.transformer, dir)` loads.
pub fn save_lora(dir: &Path, cfg: &LoraConfig, weights: &HashMap<String, Tensor>) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| file_err(dir, e))?;
    let named: HashMap<String, Tensor> =
        weights.iter().map(|(k, v)| (format!("{PEFT_PREFIX}{k}"), v.clone())).collect();
    candle_core::safetensors::save(&named, dir.join(ADAPTER_FILE))?;
    let config = serde_json::json!({
        "peft_type": "LORA",
        "r": cfg.rank,
        "lora_alpha": cfg.alpha,
        "target_modules": cfg.target_modules,
        "lora_dropout": 0.0,
        "bias": "none",
        "init_lora_weights": "gaussian",
    });
    let path = dir.join(ADAPTER_CONFIG);
    std::fs::write(&path, serde_json::to_string_pretty(&config).map_err(|e| file_err(&path, e))?)
        .map_err(|e| file_err(&path, e))
}

/// Reads an adapter saved by [`save_lora`] (or PEFT, or diffusers' `transformer.`-prefixed
/// LoRA file): its config and its weights under drift's names.
pub fn load_lora(dir: &Path, device: &Device) -> Result<(LoraConfig, HashMap<String, Tensor>)> {
    let path = dir.join(ADAPTER_CONFIG);
    let text = std::fs::read_to_string(&path).map_err(|e| file_err(&path, e))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| file_err(&path, e))?;
    let field = |k: &str| v.get(k).ok_or_else(|| file_err(&path, format!("no `{k}`")));
    let cfg = LoraConfig {
        rank: field("r")?.as_u64().ok_or_else(|| file_err(&path, "`r` is not an integer"))?
            as usize,
        alpha: field("lora_alpha")?
            .as_f64()
            .ok_or_else(|| file_err(&path, "`lora_alpha` is not a number"))?,
        target_modules: serde_json::from_value(field("target_modules")?.clone())
            .map_err(|e| file_err(&path, format!("`target_modules`: {e}")))?,
    };
    cfg.validate()?;
    let file = dir.join(ADAPTER_FILE);
    let tensors = candle_core::safetensors::load(&file, device).map_err(|e| file_err(&file, e))?;
    let weights = tensors
        .into_iter()
        .map(|(k, t)| {
            let name = k.strip_prefix(PEFT_PREFIX).or_else(|| k.strip_prefix("transformer."));
            let name = name.unwrap_or(&k).replace(".default.", ".");
            (name, t)
        })
        .collect();
    Ok((cfg, weights))
}

/// What [`load_sd3_lora_models`] needs besides the folder.
pub struct Sd3LoraSetup<'a> {
    /// The adapters.
    pub lora: LoraConfig,
    /// An adapter to start from ([`load_lora`]'s weights); fresh adapters when none: `B = 0`
    /// and `A ~ U(±1/√in)` (PEFT's Kaiming-uniform) drawn under `seed`, so a run is
    /// reproducible.
    pub init: Option<&'a HashMap<String, Tensor>>,
    /// Seed of the fresh adapters' `A`.
    pub seed: u64,
    /// The empty prompt's packed conditioning `[1, M + 1, J]` ([`pack_cond`]).
    pub null: Tensor,
    /// Latent height and width.
    pub latent_side: usize,
    /// The optimizer over the adapter weights.
    pub optim: OptimConfig,
    /// Weight dtype of the frozen base (f32 on CPU; bf16 or f16 on CUDA). The adapter is f32.
    pub dtype: DType,
}

/// The Flow-GRPO models of a diffusers SD3 / SD3.5 folder with LoRA (flow_grpo's setup): the
/// base weights loaded once as plain tensors and shared by the policy, its detached view and
/// the reference, which is the same transformer with the adapters off (no second copy of the
/// base); only the adapter weights are `Var`s. The VAE is loaded when the folder has `vae/`.
/// The run saves the adapter (under its EMA when configured) with [`save_lora`].
pub fn load_sd3_lora_models(
    dir: &Path,
    setup: Sd3LoraSetup<'_>,
    device: &Device,
) -> Result<PolicyModels<Sd3Policy>> {
    let cfg: Sd3Config = read_sd3_config(dir)?;
    let base = read_sd3_weights(dir, setup.dtype, device)?;
    let vae = if dir.join("vae").join("config.json").is_file() {
        Some(Arc::new(Sd3Vae::from_dir(&dir.join("vae"), setup.dtype, device)?))
    } else {
        None
    };
    sd3_lora_models(cfg, base, vae, setup, device).map_err(|e| match e {
        FlowModelError::Config { .. } => e,
        other => file_err(dir, other),
    })
}

/// [`load_sd3_lora_models`] from base weights in memory (diffusers' names) and an optional
/// VAE: what a benchmark of a randomly initialised full-size config uses.
pub fn sd3_lora_models(
    cfg: Sd3Config,
    base: HashMap<String, Tensor>,
    vae: Option<Arc<Sd3Vae>>,
    setup: Sd3LoraSetup<'_>,
    device: &Device,
) -> Result<PolicyModels<Sd3Policy>> {
    let varmap = VarMap::new();
    let build = |lora: &ProjLoader| -> Result<Sd3Policy> {
        let vb = VarBuilder::from_tensors(base.clone(), setup.dtype, device);
        let t = Sd3Transformer::new(cfg.clone(), vb, lora)?;
        Sd3Policy::new(t, setup.null.clone(), setup.latent_side, vae.clone())
    };
    let policy = build(&ProjLoader::with_lora(
        setup.lora.clone(),
        VarBuilder::from_varmap(&varmap, DType::F32, device),
    )?)?;
    if varmap.all_vars().is_empty() {
        return Err(FlowModelError::Config {
            field: "lora.target_modules",
            value: format!("{:?}", setup.lora.target_modules),
            expected: "module names of the transformer, e.g. \"attn.to_q\"".into(),
        });
    }
    for (name, var) in varmap.data().lock().expect("VarMap mutex poisoned").iter() {
        let value = match setup.init {
            Some(init) => init
                .get(name)
                .ok_or_else(|| FlowModelError::Config {
                    field: "init",
                    value: format!("no tensor `{name}`"),
                    expected: "an initial adapter with every adapter weight".into(),
                })?
                .to_dtype(DType::F32)?
                .to_device(device)?,
            None if name.ends_with("lora_A.weight") => {
                let bound = 1.0 / (var.dim(1)? as f64).sqrt();
                let u = RngKey::new(setup.seed).stream("lora_A").stream(name);
                ((u.uniform(var.shape(), DType::F32, device)? * (2.0 * bound))? - bound)?
            }
            None => continue,
        };
        var.set(&value)?;
    }
    let view = build(&ProjLoader::with_lora(
        setup.lora.clone(),
        VarBuilder::from_tensors(detached_view(&varmap), DType::F32, device),
    )?)?;
    let reference = build(&ProjLoader::plain())?;
    let params = ParamSet::all(&varmap);
    let opt = Optimizer::new(setup.optim, params.clone())?;
    let lora = setup.lora;
    let save: SavePolicy = Box::new(move |out: &Path, opt: &Optimizer| {
        let mut weights = params.snapshot()?;
        if let Some(ema) = opt.ema() {
            weights.extend(ema.weights().iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        save_lora(out, &lora, &weights)
    });
    Ok(PolicyModels { policy, view, reference, opt, save })
}
