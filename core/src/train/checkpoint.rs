//! Checkpoints: weights, optimizer moments, EMA, step, RNG seed, config and metrics cursor in
//! one directory, written atomically and verified on load.
//!
//! Layout of `<root>/step-00000042/`:
//! `weights.safetensors` (the trainable parameters), `optimizer.safetensors` (AdamW moments),
//! `ema.safetensors` (when an EMA is kept), `meta.json` ([`CheckpointMeta`]) and
//! `MANIFEST.json` (size and SHA-256 of each file). The directory is assembled under a
//! temporary name, every file is fsynced, and it is renamed into place: a process killed at any
//! point leaves either the complete new checkpoint or none, and the previous ones untouched.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use candle_core::{Device, Tensor};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::optimizer::Optimizer;
use crate::error::{io_err, CoreError, Result};

const MANIFEST: &str = "MANIFEST.json";
const META: &str = "meta.json";
const WEIGHTS: &str = "weights.safetensors";
const OPTIMIZER: &str = "optimizer.safetensors";
const EMA: &str = "ema.safetensors";

/// Everything but tensors that a resumed run needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckpointMeta {
    /// The training step (rollout batch) the checkpoint was taken after.
    pub step: u64,
    /// The run's seed; every draw after resume is keyed by `(seed, step, …)`.
    pub seed: u64,
    /// The run's configuration as written (TOML or JSON text).
    pub config: String,
    /// Byte length of the metrics file at save time; resume truncates it there.
    pub metrics_cursor: u64,
    /// Trainer-specific state (best score so far, data cursor, …).
    #[serde(default)]
    pub extra: serde_json::Value,
    /// Optimizer updates applied (the schedule position), filled in by [`Checkpointer::save`].
    #[serde(default)]
    pub optimizer_step: u64,
    /// Steps skipped for non-finite values, filled in by [`Checkpointer::save`].
    #[serde(default)]
    pub skipped_steps: u64,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileEntry {
    bytes: u64,
    sha256: String,
}

/// Checkpoints that failed verification, with the reason for each.
pub type Rejected = Vec<(PathBuf, CoreError)>;

/// Writes, lists, prunes and loads the checkpoints of a run directory.
#[derive(Debug, Clone)]
pub struct Checkpointer {
    root: PathBuf,
    keep_last: usize,
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut f = fs::File::create(path).map_err(io_err(path))?;
    f.write_all(bytes).map_err(io_err(path))?;
    f.sync_all().map_err(io_err(path))
}

fn sync_dir(path: &Path) -> Result<()> {
    fs::File::open(path).and_then(|d| d.sync_all()).map_err(io_err(path))
}

fn safetensors_bytes(tensors: &HashMap<String, Tensor>, path: &Path) -> Result<Vec<u8>> {
    // candle writes safetensors to a path; write, then read back the exact bytes to hash them.
    candle_core::safetensors::save(tensors, path)?;
    fs::read(path).map_err(io_err(path))
}

impl Checkpointer {
    /// Checkpoints under `root`, keeping the newest `keep_last` (at least 1). Removes stale
    /// temporary directories left by a killed save.
    pub fn new(root: impl Into<PathBuf>, keep_last: usize) -> Result<Self> {
        let root = root.into();
        fs::create_dir_all(&root).map_err(io_err(&root))?;
        for entry in fs::read_dir(&root).map_err(io_err(&root))? {
            let path = entry.map_err(io_err(&root))?.path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if name.starts_with(".tmp-") || name.starts_with(".trash-") {
                fs::remove_dir_all(&path).map_err(io_err(&path))?;
            }
        }
        Ok(Self { root, keep_last: keep_last.max(1) })
    }

    /// The directory of step `step`.
    pub fn dir_for(&self, step: u64) -> PathBuf {
        self.root.join(format!("step-{step:08}"))
    }

    /// Saves the optimizer's parameters, moments and EMA with `meta`, atomically, then prunes
    /// to the newest `keep_last`. Returns the checkpoint directory.
    pub fn save(&self, opt: &Optimizer, meta: &CheckpointMeta) -> Result<PathBuf> {
        self.save_with(opt, meta, &[])
    }

    /// [`Checkpointer::save`] plus trainer tensors outside the optimizer (a refreshed RL
    /// reference policy), each `(file name, tensors)` written as a safetensors file of the
    /// checkpoint and covered by its manifest; read back with [`Checkpointer::load_tensors`].
    pub fn save_with(
        &self,
        opt: &Optimizer,
        meta: &CheckpointMeta,
        extra: &[(String, HashMap<String, Tensor>)],
    ) -> Result<PathBuf> {
        let tmp = self.root.join(format!(".tmp-step-{:08}-{}", meta.step, std::process::id()));
        if tmp.exists() {
            fs::remove_dir_all(&tmp).map_err(io_err(&tmp))?;
        }
        fs::create_dir_all(&tmp).map_err(io_err(&tmp))?;
        let mut files: Vec<(&str, Vec<u8>)> = Vec::new();
        let weights = opt.params().snapshot()?;
        files.push((WEIGHTS, safetensors_bytes(&weights, &tmp.join(WEIGHTS))?));
        let moments = opt.adamw().state_tensors()?;
        files.push((OPTIMIZER, safetensors_bytes(&moments, &tmp.join(OPTIMIZER))?));
        if let Some(ema) = opt.ema() {
            files.push((EMA, safetensors_bytes(ema.weights(), &tmp.join(EMA))?));
        }
        for (name, tensors) in extra {
            if [WEIGHTS, OPTIMIZER, EMA, META, MANIFEST].contains(&name.as_str()) {
                return Err(CoreError::Checkpoint {
                    path: tmp.join(name),
                    reason: "a trainer file may not take the name of a checkpoint file".into(),
                });
            }
            files.push((name.as_str(), safetensors_bytes(tensors, &tmp.join(name))?));
        }
        let mut meta = meta.clone();
        meta.optimizer_step = opt.step_count();
        meta.skipped_steps = opt.skipped_count();
        let meta_json = serde_json::to_vec_pretty(&meta).map_err(|e| CoreError::Checkpoint {
            path: tmp.clone(),
            reason: format!("cannot serialise meta.json: {e}"),
        })?;
        files.push((META, meta_json));
        let mut manifest = BTreeMap::new();
        for (name, bytes) in &files {
            let path = tmp.join(name);
            write_synced(&path, bytes)?;
            let entry = FileEntry { bytes: bytes.len() as u64, sha256: sha256_hex(bytes) };
            manifest.insert(name.to_string(), entry);
        }
        let manifest = serde_json::to_vec_pretty(&manifest).expect("a manifest serialises");
        write_synced(&tmp.join(MANIFEST), &manifest)?;
        sync_dir(&tmp)?;
        let dest = self.dir_for(meta.step);
        if dest.exists() {
            self.discard(&dest)?;
        }
        fs::rename(&tmp, &dest).map_err(io_err(&dest))?;
        sync_dir(&self.root)?;
        self.prune()?;
        Ok(dest)
    }

    /// Moves a directory out of the listing first, then deletes it: a kill in between leaves
    /// only a `.trash-` directory, which [`Checkpointer::new`] removes.
    fn discard(&self, dir: &Path) -> Result<()> {
        let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("old");
        let trash = self.root.join(format!(".trash-{name}-{}", std::process::id()));
        fs::rename(dir, &trash).map_err(io_err(dir))?;
        fs::remove_dir_all(&trash).map_err(io_err(&trash))
    }

    fn prune(&self) -> Result<()> {
        let all = self.list()?;
        let excess = all.len().saturating_sub(self.keep_last);
        for (_, dir) in all.into_iter().take(excess) {
            self.discard(&dir)?;
        }
        Ok(())
    }

    /// Checkpoint directories, oldest first.
    pub fn list(&self) -> Result<Vec<(u64, PathBuf)>> {
        let mut out = Vec::new();
        for entry in fs::read_dir(&self.root).map_err(io_err(&self.root))? {
            let path = entry.map_err(io_err(&self.root))?.path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if let Some(step) = name.strip_prefix("step-").and_then(|s| s.parse::<u64>().ok()) {
                out.push((step, path));
            }
        }
        out.sort();
        Ok(out)
    }

    /// The newest checkpoint that verifies, and the newer ones that did not (each with its
    /// error), so a caller can report them.
    pub fn latest_valid(&self) -> Result<(Option<PathBuf>, Rejected)> {
        let mut rejected = Vec::new();
        for (_, dir) in self.list()?.into_iter().rev() {
            match verify(&dir) {
                Ok(()) => return Ok((Some(dir), rejected)),
                Err(e) => rejected.push((dir, e)),
            }
        }
        Ok((None, rejected))
    }

    /// The trainer tensors saved as `name` by [`Checkpointer::save_with`] in checkpoint `dir`,
    /// after verifying the checkpoint; an error naming the file when the checkpoint has none.
    pub fn load_tensors(
        dir: &Path,
        name: &str,
        device: &Device,
    ) -> Result<HashMap<String, Tensor>> {
        verify(dir)?;
        let path = dir.join(name);
        if !path.exists() {
            return Err(CoreError::Checkpoint {
                path,
                reason: "not in this checkpoint (written by a run with other settings?)".into(),
            });
        }
        Ok(candle_core::safetensors::load(&path, device)?)
    }

    /// Loads checkpoint `dir` into `opt` (weights, moments, schedule position, EMA) after
    /// verifying every file against the manifest. Returns its meta.
    pub fn load(dir: &Path, opt: &mut Optimizer) -> Result<CheckpointMeta> {
        verify(dir)?;
        let meta: CheckpointMeta = read_json(&dir.join(META))?;
        let device =
            opt.params().iter().next().map(|(_, v)| v.device().clone()).unwrap_or(Device::Cpu);
        let weights = candle_core::safetensors::load(dir.join(WEIGHTS), &device)?;
        opt.params().load(&weights).map_err(|e| CoreError::Checkpoint {
            path: dir.join(WEIGHTS),
            reason: e.to_string(),
        })?;
        let mut adamw = opt.adamw().clone();
        adamw.load_state(&candle_core::safetensors::load(dir.join(OPTIMIZER), &device)?)?;
        let ema = match opt.ema() {
            Some(e) if dir.join(EMA).exists() => {
                let mut e = e.clone();
                e.set_weights(candle_core::safetensors::load(dir.join(EMA), &device)?);
                Some(e)
            }
            _ => None,
        };
        opt.restore(meta.optimizer_step, meta.skipped_steps, adamw, ema);
        Ok(meta)
    }
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    let bytes = fs::read(path).map_err(io_err(path))?;
    serde_json::from_slice(&bytes).map_err(|e| CoreError::Checkpoint {
        path: path.to_path_buf(),
        reason: format!("unreadable JSON: {e}"),
    })
}

/// Checks every file of checkpoint `dir` against its manifest: present, same size, same
/// SHA-256. A truncated or tampered file is refused with a message naming it.
pub fn verify(dir: &Path) -> Result<()> {
    let fail = |reason: String| CoreError::Checkpoint { path: dir.to_path_buf(), reason };
    if !dir.join(MANIFEST).exists() {
        return Err(fail("no MANIFEST.json: not a complete checkpoint".into()));
    }
    let manifest: BTreeMap<String, FileEntry> = read_json(&dir.join(MANIFEST))?;
    for required in [WEIGHTS, OPTIMIZER, META] {
        if !manifest.contains_key(required) {
            return Err(fail(format!("the manifest does not list {required}")));
        }
    }
    for (name, entry) in &manifest {
        let path = dir.join(name);
        let bytes = fs::read(&path).map_err(|e| fail(format!("{name}: {e}")))?;
        if bytes.len() as u64 != entry.bytes {
            return Err(fail(format!(
                "{name} has {} bytes, the manifest says {} (truncated or overwritten)",
                bytes.len(),
                entry.bytes
            )));
        }
        let sha = sha256_hex(&bytes);
        if sha != entry.sha256 {
            return Err(fail(format!(
                "{name} has SHA-256 {sha}, the manifest says {} (corrupted or tampered)",
                entry.sha256
            )));
        }
    }
    Ok(())
}
