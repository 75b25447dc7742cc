//! Saving and loading a DiT: `config.json` + `model.safetensors` in one directory.

use std::path::Path;

use candle_core::{DType, Device, Tensor};
use candle_nn::{VarBuilder, VarMap};

use super::config::DitConfig;
use super::dit::Dit;
use crate::error::{file_err, Result};

/// Writes `config.json` and `model.safetensors` (every tensor of `weights`) into `dir`.
pub fn save_dit(
    dir: &Path,
    cfg: &DitConfig,
    weights: &std::collections::HashMap<String, Tensor>,
) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| file_err(dir, e))?;
    let json = serde_json::to_string_pretty(cfg).map_err(|e| file_err(dir, e))?;
    std::fs::write(dir.join("config.json"), json)
        .map_err(|e| file_err(&dir.join("config.json"), e))?;
    candle_core::safetensors::save(weights, dir.join("model.safetensors"))?;
    Ok(())
}

/// Reads the config of a saved DiT, naming the file and the field at fault.
pub fn load_dit_config(dir: &Path) -> Result<DitConfig> {
    let path = dir.join("config.json");
    let text = std::fs::read_to_string(&path).map_err(|e| file_err(&path, e))?;
    let cfg: DitConfig = serde_json::from_str(&text).map_err(|e| file_err(&path, e))?;
    cfg.validate()?;
    Ok(cfg)
}

/// Loads a saved DiT into a fresh `VarMap` (trainable). A missing or mis-shaped tensor is an
/// error naming it.
pub fn load_dit_trainable(dir: &Path, device: &Device) -> Result<(Dit, VarMap)> {
    let cfg = load_dit_config(dir)?;
    let varmap = VarMap::new();
    let model = Dit::new(cfg, VarBuilder::from_varmap(&varmap, DType::F32, device))?;
    let path = dir.join("model.safetensors");
    let tensors = candle_core::safetensors::load(&path, device).map_err(|e| file_err(&path, e))?;
    for (name, var) in varmap.data().lock().expect("VarMap mutex poisoned").iter() {
        let t = tensors.get(name).ok_or_else(|| file_err(&path, format!("no tensor `{name}`")))?;
        if t.dims() != var.dims() {
            return Err(file_err(
                &path,
                format!("`{name}` has shape {:?}, expected {:?}", t.dims(), var.dims()),
            ));
        }
        var.set(&t.to_dtype(DType::F32)?)?;
    }
    Ok((model, varmap))
}

/// Loads a saved DiT as plain tensors (frozen: a reference model, or evaluation).
pub fn load_dit_frozen(dir: &Path, device: &Device) -> Result<Dit> {
    let cfg = load_dit_config(dir)?;
    let path = dir.join("model.safetensors");
    let tensors = candle_core::safetensors::load(&path, device).map_err(|e| file_err(&path, e))?;
    Dit::new(cfg, VarBuilder::from_tensors(tensors, DType::F32, device))
        .map_err(|e| file_err(&path, e))
}
