//! Writing a model in the Hugging Face layout that [`DiffusionLm::from_dir`] reads back.

use std::collections::HashMap;
use std::path::Path;

use super::load::{CONFIG_FILE, WEIGHTS_FILE};
use super::wrapper::{merged_weights, DiffusionLm};
use crate::error::{DllmError, Result};

/// Writes `bytes` to `dir/name` through a temporary file and a rename, so a crash never leaves
/// a half-written file under the final name.
pub(crate) fn write_atomic(
    dir: &Path,
    name: &str,
    write: impl FnOnce(&Path) -> Result<()>,
) -> Result<()> {
    let tmp = dir.join(format!(".{name}.tmp"));
    write(&tmp)?;
    let dst = dir.join(name);
    std::fs::rename(&tmp, &dst).map_err(DllmError::io(dst))
}

impl DiffusionLm {
    /// Saves `config.json`, `model.safetensors` (every weight under its checkpoint name, in
    /// the weights' dtype; LoRA adapters merged into their layers, `W + (α/r) B A`, so the
    /// folder is a plain checkpoint) and the tokenizer (`tokenizer.json` for a Hugging Face tokenizer,
    /// [`CHAR_TOKENIZER_FILE`](crate::tokenizer::CHAR_TOKENIZER_FILE) for drift's character
    /// tokenizer) into `dir`, creating it. Keys of the original config.json that the forward
    /// pass does not read are written back unchanged.
    pub fn save_pretrained(&self, dir: impl AsRef<Path>) -> Result<()> {
        let dir = dir.as_ref();
        std::fs::create_dir_all(dir).map_err(DllmError::io(dir))?;
        let config = serde_json::to_string_pretty(&self.config().to_json()?)
            .map_err(DllmError::json(dir.join(CONFIG_FILE)))?;
        write_atomic(dir, CONFIG_FILE, |p| std::fs::write(p, config).map_err(DllmError::io(p)))?;
        let tensors: HashMap<String, candle_core::Tensor> = match self.lora() {
            Some(lora) => merged_weights(self.weights(), lora.scale())?,
            None => self.weights().iter().map(|(n, t)| (n.clone(), t.detach())).collect(),
        };
        write_atomic(dir, WEIGHTS_FILE, |p| Ok(candle_core::safetensors::save(&tensors, p)?))?;
        if let Some(tok) = self.tokenizer() {
            tok.save_in_dir(dir)?;
        }
        Ok(())
    }
}
