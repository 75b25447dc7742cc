//! Loading a checkpoint in the Hugging Face layout, from a folder or from the local hub cache.
//!
//! A checkpoint is `config.json` + `model.safetensors`, or shards
//! `model-0000i-of-0000n.safetensors` listed in `model.safetensors.index.json`, plus an
//! optional tokenizer (`tokenizer.json`, or drift's own [`CHAR_TOKENIZER_FILE`]). The hub
//! cache is read through `hf-hub`'s offline `Cache`: drift never makes a network call.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use candle_core::safetensors::MmapedSafetensors;
use hf_hub::{Cache, Repo, RepoType};
use serde_json::Value;

use super::config::ModelConfig;
use super::weights::Source;
use super::wrapper::{DiffusionLm, LoadOptions};
use crate::error::{DllmError, Result};
use crate::tokenizer::{Tokenizer, CHAR_TOKENIZER_FILE, HF_TOKENIZER_FILE};

/// The config file name.
pub const CONFIG_FILE: &str = "config.json";
/// The single-file weights name.
pub const WEIGHTS_FILE: &str = "model.safetensors";
/// The shard index name.
pub const INDEX_FILE: &str = "model.safetensors.index.json";

/// The files of one checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointFiles {
    /// `config.json`.
    pub config: PathBuf,
    /// One or more safetensors files.
    pub weights: Vec<PathBuf>,
    /// `tokenizer.json` or drift's character tokenizer file, when present.
    pub tokenizer: Option<PathBuf>,
}

impl CheckpointFiles {
    /// Finds the files of the checkpoint in `dir`.
    pub fn in_dir(dir: &Path) -> Result<Self> {
        let config = dir.join(CONFIG_FILE);
        if !config.is_file() {
            return Err(DllmError::MissingFile { dir: dir.into(), file: CONFIG_FILE.into() });
        }
        let single = dir.join(WEIGHTS_FILE);
        let index = dir.join(INDEX_FILE);
        let weights = if single.is_file() {
            vec![single]
        } else if index.is_file() {
            shard_names(&index)?.into_iter().map(|f| dir.join(f)).collect()
        } else {
            return Err(DllmError::MissingFile {
                dir: dir.into(),
                file: format!("{WEIGHTS_FILE} or {INDEX_FILE}"),
            });
        };
        if let Some(missing) = weights.iter().find(|w| !w.is_file()) {
            return Err(DllmError::MissingFile {
                dir: dir.into(),
                file: format!("{} (listed in {INDEX_FILE})", file_name(missing)),
            });
        }
        let tokenizer = [HF_TOKENIZER_FILE, CHAR_TOKENIZER_FILE]
            .iter()
            .map(|f| dir.join(f))
            .find(|p| p.is_file());
        Ok(Self { config, weights, tokenizer })
    }

    /// Finds the files of `repo_id` at `revision` (default `"main"`) in the hub cache `cache`
    /// (`Cache::from_env()` honours `HF_HOME`; the default is `~/.cache/huggingface/hub`).
    pub fn in_hf_cache(cache: &Cache, repo_id: &str, revision: Option<&str>) -> Result<Self> {
        let revision = revision.unwrap_or("main").to_string();
        let repo =
            cache.repo(Repo::with_revision(repo_id.into(), RepoType::Model, revision.clone()));
        let find = |file: &str| {
            repo.get(file).ok_or_else(|| DllmError::NotInCache {
                repo_id: repo_id.into(),
                revision: revision.clone(),
                file: file.into(),
                cache: cache.path().clone(),
            })
        };
        let config = find(CONFIG_FILE)?;
        let weights = match repo.get(WEIGHTS_FILE) {
            Some(single) => vec![single],
            None => {
                let index = find(INDEX_FILE)?;
                shard_names(&index)?.iter().map(|f| find(f)).collect::<Result<Vec<_>>>()?
            }
        };
        let tokenizer = repo.get(HF_TOKENIZER_FILE).or_else(|| repo.get(CHAR_TOKENIZER_FILE));
        Ok(Self { config, weights, tokenizer })
    }

    /// A short description of the weight files for error messages.
    pub fn describe_weights(&self) -> String {
        let names: Vec<String> = self.weights.iter().map(|p| p.display().to_string()).collect();
        names.join(", ")
    }
}

fn file_name(p: &Path) -> String {
    p.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default()
}

/// The distinct shard file names of a `model.safetensors.index.json` (its `weight_map`
/// values), sorted.
pub fn shard_names(index: &Path) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(index).map_err(DllmError::io(index))?;
    let value: Value = serde_json::from_str(&text).map_err(DllmError::json(index))?;
    let map =
        value.get("weight_map").and_then(Value::as_object).ok_or_else(|| DllmError::Json {
            path: index.into(),
            message: "expected an object `weight_map` from tensor names to shard files".into(),
        })?;
    let mut names = BTreeSet::new();
    for (tensor, file) in map {
        let file = file.as_str().ok_or_else(|| DllmError::Json {
            path: index.into(),
            message: format!("weight_map[{tensor:?}] is not a file name"),
        })?;
        if file.contains('/') || file.contains("..") {
            return Err(DllmError::Json {
                path: index.into(),
                message: format!("weight_map[{tensor:?}] = {file:?} is not a plain file name"),
            });
        }
        names.insert(file.to_string());
    }
    Ok(names.into_iter().collect())
}

impl DiffusionLm {
    /// Loads the checkpoint in folder `dir` (config.json + safetensors, optional tokenizer).
    pub fn from_dir(dir: impl AsRef<Path>, opts: &LoadOptions) -> Result<Self> {
        Self::from_files(&CheckpointFiles::in_dir(dir.as_ref())?, opts)
    }

    /// Loads `repo_id` (e.g. `"GSAI-ML/LLaDA-8B-Instruct"`) from the local Hugging Face cache
    /// (`HF_HOME`, default `~/.cache/huggingface/hub`), never from the network; an absent repo
    /// or file is an error naming the repo id and the cache path.
    pub fn from_hf_cache(
        repo_id: &str,
        revision: Option<&str>,
        opts: &LoadOptions,
    ) -> Result<Self> {
        Self::from_hf_cache_at(&Cache::from_env(), repo_id, revision, opts)
    }

    /// As [`DiffusionLm::from_hf_cache`] with an explicit cache folder.
    pub fn from_hf_cache_at(
        cache: &Cache,
        repo_id: &str,
        revision: Option<&str>,
        opts: &LoadOptions,
    ) -> Result<Self> {
        Self::from_files(&CheckpointFiles::in_hf_cache(cache, repo_id, revision)?, opts)
    }

    /// Loads from explicit files. The architecture comes from config.json
    /// (`model_type` / `architectures`); every tensor is checked by name and shape.
    pub fn from_files(files: &CheckpointFiles, opts: &LoadOptions) -> Result<Self> {
        let config = ModelConfig::from_file(&files.config)?;
        for w in &files.weights {
            if !w.is_file() {
                return Err(DllmError::Io {
                    path: w.clone(),
                    source: std::io::Error::new(std::io::ErrorKind::NotFound, "no such file"),
                });
            }
        }
        // SAFETY: the files are memory-mapped read-only; as with every mmap, modifying them
        // while the model is alive is undefined behaviour (candle's documented contract).
        let mmaped = unsafe { MmapedSafetensors::multi(&files.weights) }?;
        let source = Source::Checkpoint { files: mmaped, description: files.describe_weights() };
        let model = Self::build(config, source, opts)?;
        Ok(match &files.tokenizer {
            Some(path) => model.with_tokenizer(Tokenizer::from_file(path)?),
            None => model,
        })
    }
}
