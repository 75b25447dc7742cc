//! The prompt-embedding cache of an SD3 run: a fixed prompt set encoded once (by the SD3
//! pipeline's CLIP-L, CLIP-G and T5-XXL encoders) and looked up by prompt text afterwards.
//!
//! On disk, a directory with `prompts.jsonl` (one `{"prompt": …}` per line; line `i` is row
//! `i`) and `embeddings.safetensors` holding diffusers' `encode_prompt` outputs under their
//! names: `prompt_embeds [N, M, J]`, `pooled_prompt_embeds [N, P]`, and the empty prompt's
//! `negative_prompt_embeds [1, M, J]`, `negative_pooled_prompt_embeds [1, P]` (CFG's
//! unconditional branch). `drift train flow` writes one with the folder's own encoders
//! (`sd3::text`) when it is given none.

use std::collections::HashMap;
use std::path::Path;

use candle_core::{DType, Device, Tensor};

use super::policy::pack_cond;
use crate::error::{file_err, FlowModelError, Result};
use crate::grpo::ImageTask;
use drift_rewards::image::Image;

/// The prompt list file of a cache.
pub const PROMPTS_FILE: &str = "prompts.jsonl";
/// The tensor file of a cache.
pub const EMBEDDINGS_FILE: &str = "embeddings.safetensors";

/// Every prompt's packed conditioning ([`pack_cond`]) and the empty prompt's.
#[derive(Debug, Clone)]
pub struct PromptEmbeddings {
    rows: HashMap<String, usize>,
    packed: Tensor,
    null: Tensor,
}

impl PromptEmbeddings {
    /// Writes a cache: `text[N, M, J]`, `pooled[N, P]` for `prompts` (in order) and the empty
    /// prompt's `null_text[1, M, J]`, `null_pooled[1, P]`.
    pub fn save(
        dir: &Path,
        prompts: &[String],
        (text, pooled): (&Tensor, &Tensor),
        (null_text, null_pooled): (&Tensor, &Tensor),
    ) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| file_err(dir, e))?;
        let lines: Vec<String> =
            prompts.iter().map(|p| serde_json::json!({ "prompt": p }).to_string()).collect();
        let path = dir.join(PROMPTS_FILE);
        std::fs::write(&path, lines.join("\n") + "\n").map_err(|e| file_err(&path, e))?;
        let tensors: HashMap<String, Tensor> = [
            ("prompt_embeds", text),
            ("pooled_prompt_embeds", pooled),
            ("negative_prompt_embeds", null_text),
            ("negative_pooled_prompt_embeds", null_pooled),
        ]
        .into_iter()
        .map(|(k, t)| (k.to_string(), t.clone()))
        .collect();
        candle_core::safetensors::save(&tensors, dir.join(EMBEDDINGS_FILE))?;
        Ok(())
    }

    /// A cache in memory: `text[N, M, J]`, `pooled[N, P]` for `prompts` (in order) and the
    /// empty prompt's `null_text[1, M, J]`, `null_pooled[1, P]`.
    pub fn from_tensors(
        prompts: &[String],
        (text, pooled): (&Tensor, &Tensor),
        (null_text, null_pooled): (&Tensor, &Tensor),
    ) -> Result<Self> {
        let rows = prompts.iter().enumerate().map(|(i, p)| (p.clone(), i)).collect();
        Ok(Self {
            rows,
            packed: pack_cond(text, pooled)?,
            null: pack_cond(null_text, null_pooled)?,
        })
    }

    /// Reads a cache, checking that every tensor is there with consistent shapes and one row
    /// per prompt line; a malformed line is named by its number.
    pub fn load(dir: &Path, device: &Device) -> Result<Self> {
        let path = dir.join(PROMPTS_FILE);
        let text = std::fs::read_to_string(&path).map_err(|e| file_err(&path, e))?;
        let mut rows = HashMap::new();
        for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            let v: serde_json::Value = serde_json::from_str(line)
                .map_err(|e| file_err(&path, format!("line {}: {e}", i + 1)))?;
            let p = v.get("prompt").and_then(|p| p.as_str()).ok_or_else(|| {
                file_err(&path, format!("line {}: no string field \"prompt\"", i + 1))
            })?;
            let row = rows.len();
            if rows.insert(p.to_string(), row).is_some() {
                return Err(file_err(&path, format!("line {}: prompt {p:?} repeated", i + 1)));
            }
        }
        let file = dir.join(EMBEDDINGS_FILE);
        let t = candle_core::safetensors::load(&file, device).map_err(|e| file_err(&file, e))?;
        let get = |k: &str| -> Result<Tensor> {
            Ok(t.get(k)
                .ok_or_else(|| file_err(&file, format!("no tensor `{k}`")))?
                .to_dtype(DType::F32)?)
        };
        let (text, pooled) = (get("prompt_embeds")?, get("pooled_prompt_embeds")?);
        let (null_text, null_pooled) =
            (get("negative_prompt_embeds")?, get("negative_pooled_prompt_embeds")?);
        let n = text.dim(0)?;
        if n != rows.len() || pooled.dim(0)? != n || null_text.dim(0)? != 1 {
            return Err(file_err(
                &file,
                format!(
                    "{} prompt lines but prompt_embeds {:?}, pooled_prompt_embeds {:?}, \
                     negative_prompt_embeds {:?} (expected N rows, N rows, 1 row)",
                    rows.len(),
                    text.dims(),
                    pooled.dims(),
                    null_text.dims()
                ),
            ));
        }
        let packed = pack_cond(&text, &pooled).map_err(|e| file_err(&file, e))?;
        let null = pack_cond(&null_text, &null_pooled).map_err(|e| file_err(&file, e))?;
        if null.dims()[1..] != packed.dims()[1..] {
            return Err(file_err(
                &file,
                format!(
                    "negative_prompt_embeds {:?} do not match prompt_embeds {:?}",
                    null_text.dims(),
                    text.dims()
                ),
            ));
        }
        Ok(Self { rows, packed, null })
    }

    /// The packed conditioning `[1, M + 1, J]` of `prompt`, if cached.
    pub fn get(&self, prompt: &str) -> Option<Result<Tensor>> {
        self.rows.get(prompt).map(|&r| Ok(self.packed.narrow(0, r, 1)?))
    }

    /// The empty prompt's packed conditioning `[1, M + 1, J]`.
    #[must_use]
    pub fn null(&self) -> &Tensor {
        &self.null
    }

    /// How many prompts are cached.
    #[must_use]
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether the cache is empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

/// Any task whose prompts are encoded from a [`PromptEmbeddings`] cache (by their caption):
/// the inner task keeps its prompts, categories and checks.
pub struct EmbeddedTask<T> {
    inner: T,
    embeddings: PromptEmbeddings,
}

impl<T: ImageTask> EmbeddedTask<T> {
    /// Wraps `inner`; every training and evaluation prompt the run can draw must be cached,
    /// which is checked for the evaluation prompts here and for `train` (the prompts the
    /// inner task trains on, when it can list them) too.
    pub fn new(inner: T, embeddings: PromptEmbeddings, train: &[T::Prompt]) -> Result<Self> {
        let missing = inner
            .eval_prompts()
            .iter()
            .chain(train)
            .map(|p| inner.caption(p))
            .find(|c| embeddings.get(c).is_none());
        if let Some(c) = missing {
            return Err(FlowModelError::Config {
                field: "sd3.embeddings",
                value: format!("no embedding for the prompt {c:?}"),
                expected: "a cache holding every training and evaluation prompt".into(),
            });
        }
        Ok(Self { inner, embeddings })
    }
}

impl<T: ImageTask> ImageTask for EmbeddedTask<T> {
    type Prompt = T::Prompt;
    fn train_prompt(&self, seed: u64, index: u64) -> T::Prompt {
        self.inner.train_prompt(seed, index)
    }
    fn eval_prompts(&self) -> &[T::Prompt] {
        self.inner.eval_prompts()
    }
    fn encode(&self, prompts: &[T::Prompt], device: &Device) -> Result<Tensor> {
        let rows = prompts
            .iter()
            .map(|p| {
                let c = self.inner.caption(p);
                self.embeddings.get(&c).unwrap_or_else(|| {
                    Err(FlowModelError::Config {
                        field: "sd3.embeddings",
                        value: format!("no embedding for the prompt {c:?}"),
                        expected: "a cache holding every prompt the run draws".into(),
                    })
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Tensor::cat(&rows, 0)?.to_device(device)?)
    }
    fn caption(&self, p: &T::Prompt) -> String {
        self.inner.caption(p)
    }
    fn strict(&self, p: &T::Prompt, image: &Image) -> Option<bool> {
        self.inner.strict(p, image)
    }
    fn category(&self, p: &T::Prompt) -> Option<&'static str> {
        self.inner.category(p)
    }
    fn objects(&self, image: &Image) -> Option<usize> {
        self.inner.objects(image)
    }
}
