//! Reading a diffusers SD3 / SD3.5 `transformer/` folder: `config.json` and
//! `diffusion_pytorch_model.safetensors` (or its sharded `.index.json` form).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};

use super::config::Sd3Config;
use crate::error::{file_err, Result};

/// The transformer folder of `dir`: `dir` itself when it holds `config.json`, else
/// `dir/transformer` (a whole pipeline folder with `model_index.json`).
pub fn transformer_dir(dir: &Path) -> Result<PathBuf> {
    if dir.join("config.json").is_file() {
        return Ok(dir.to_path_buf());
    }
    let sub = dir.join("transformer");
    if sub.join("config.json").is_file() {
        return Ok(sub);
    }
    Err(file_err(dir, "no config.json here or in transformer/ (expected a diffusers SD3 folder)"))
}

/// Reads and validates `config.json` of a transformer folder.
pub fn read_sd3_config(dir: &Path) -> Result<Sd3Config> {
    let path = transformer_dir(dir)?.join("config.json");
    let text = std::fs::read_to_string(&path).map_err(|e| file_err(&path, e))?;
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| file_err(&path, e))?;
    if let Some(class) = value.get("_class_name").and_then(|v| v.as_str()) {
        if class != "SD3Transformer2DModel" {
            return Err(file_err(
                &path,
                format!("_class_name is {class:?}, expected \"SD3Transformer2DModel\""),
            ));
        }
    }
    let cfg: Sd3Config = serde_json::from_value(value).map_err(|e| file_err(&path, e))?;
    cfg.validate().map_err(|e| file_err(&path, e))?;
    Ok(cfg)
}

/// The weight files of `dir` named `{stem}.safetensors`, or every shard its
/// `{stem}.safetensors.index.json` names (Hugging Face's sharded layout).
pub(crate) fn safetensors_files(dir: &Path, stem: &str) -> Result<Vec<PathBuf>> {
    let single = dir.join(format!("{stem}.safetensors"));
    if single.is_file() {
        return Ok(vec![single]);
    }
    let index = dir.join(format!("{stem}.safetensors.index.json"));
    let text = std::fs::read_to_string(&index).map_err(|e| file_err(&index, e))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| file_err(&index, e))?;
    let map = v
        .get("weight_map")
        .and_then(|m| m.as_object())
        .ok_or_else(|| file_err(&index, "no `weight_map` object"))?;
    let mut shards: Vec<PathBuf> =
        map.values().filter_map(|f| f.as_str()).map(|f| dir.join(f)).collect();
    shards.sort();
    shards.dedup();
    Ok(shards)
}

/// Every tensor of the folder's weights, converted to `dtype`: the single
/// `diffusion_pytorch_model.safetensors`, or every shard its `.index.json` names.
pub fn read_sd3_weights(
    dir: &Path,
    dtype: DType,
    device: &Device,
) -> Result<HashMap<String, Tensor>> {
    let dir = transformer_dir(dir)?;
    let files = safetensors_files(&dir, "diffusion_pytorch_model")?;
    let mut out = HashMap::new();
    for f in files {
        let tensors = candle_core::safetensors::load(&f, device).map_err(|e| file_err(&f, e))?;
        for (name, t) in tensors {
            out.insert(name, t.to_dtype(dtype)?);
        }
    }
    Ok(out)
}

/// Where an SD3 base lives: `base` itself when it is a directory, else `base` read as a Hugging
/// Face repo id (`"stabilityai/stable-diffusion-3.5-medium"`, optionally `@revision`) and
/// resolved, offline, to its snapshot folder in the hub cache `cache` (`HF_HOME`, default
/// `~/.cache/huggingface/hub`) through its `model_index.json`. Nothing is downloaded; an absent
/// repo is an error naming the repo id and the cache.
pub fn resolve_base(base: &Path, cache: &hf_hub::Cache) -> Result<PathBuf> {
    if base.is_dir() {
        return Ok(base.to_path_buf());
    }
    let id = base.to_string_lossy();
    let (repo_id, revision) = match id.split_once('@') {
        Some((r, rev)) => (r.to_string(), rev.to_string()),
        None => (id.to_string(), "main".to_string()),
    };
    let looks_like_id = repo_id.split('/').count() == 2 && !repo_id.starts_with(['.', '/', '~']);
    let not_found = |why: &str| {
        file_err(
            base,
            format!(
                "not a directory, and {why} (looked for {repo_id:?} at revision {revision:?} in \
                 the Hugging Face cache {}; nothing is downloaded)",
                cache.path().display()
            ),
        )
    };
    if !looks_like_id {
        return Err(not_found("not a repo id of the form owner/name"));
    }
    let repo = cache.repo(hf_hub::Repo::with_revision(
        repo_id.clone(),
        hf_hub::RepoType::Model,
        revision.clone(),
    ));
    let index = repo.get("model_index.json").ok_or_else(|| not_found("not in the cache"))?;
    Ok(index.parent().map(Path::to_path_buf).unwrap_or_default())
}

/// [`resolve_base`] in the cache `HF_HOME` points to (default `~/.cache/huggingface/hub`).
pub fn resolve_base_from_env(base: &Path) -> Result<PathBuf> {
    resolve_base(base, &hf_hub::Cache::from_env())
}
