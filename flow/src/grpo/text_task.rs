//! A task of free-text prompts (GenEval's, PickScore's, a user's), for models with real text
//! encoders such as SD3: prompts and categories from a JSONL file, scored by a reward service
//! or an image-only reward; no built-in strict check.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use candle_core::{Device, Tensor};
use drift_core::rng::RngKey;
use drift_rewards::http::PromptText;
use drift_rewards::image::{Image, JpegCompressibility, JpegIncompressibility};

use super::shapes::{http_reward, weighted_reward, RewardTerm};
use super::task::{ImageReward, ImageTask};
use crate::error::{FlowModelError, Result};

/// A prompt and its category, if the file gives one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextPrompt {
    /// The prompt.
    pub text: String,
    /// Its category (GenEval's `counting`, …), for the per-category table.
    pub category: Option<&'static str>,
}

impl PromptText for TextPrompt {
    fn prompt_text(&self) -> String {
        self.text.clone()
    }
}

/// Free-text prompts: the lines of a JSONL file, `{"prompt": …, "category": …, "split": …}`
/// (`category` optional; `split` `"train"` (default) or `"held_out"`). Training draws a train
/// prompt uniformly, keyed by `(seed, index)`; evaluation takes every held-out prompt.
/// Captions are the prompts; an embedding model (`EmbeddedTask`) encodes them.
#[derive(Debug, Clone)]
pub struct TextPromptTask {
    train: Vec<TextPrompt>,
    held_out: Vec<TextPrompt>,
}

impl TextPromptTask {
    /// Reads `path`, naming a malformed line by its number; needs at least one train and one
    /// held-out line.
    pub fn from_jsonl(path: &Path) -> Result<Self> {
        let err = |reason: String| FlowModelError::File { path: path.to_path_buf(), reason };
        let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
        // Category names live as long as the task; each distinct name is stored once.
        let mut names: HashMap<String, &'static str> = HashMap::new();
        let (mut train, mut held_out) = (Vec::new(), Vec::new());
        for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            let n = i + 1;
            let v: serde_json::Value =
                serde_json::from_str(line).map_err(|e| err(format!("line {n}: {e}")))?;
            let prompt = v
                .get("prompt")
                .and_then(|p| p.as_str())
                .ok_or_else(|| err(format!("line {n}: no string field \"prompt\"")))?;
            let category = match v.get("category") {
                None | Some(serde_json::Value::Null) => None,
                Some(c) => {
                    let c = c
                        .as_str()
                        .ok_or_else(|| err(format!("line {n}: \"category\" is not a string")))?;
                    let name = names
                        .entry(c.to_string())
                        .or_insert_with(|| Box::leak(c.to_string().into_boxed_str()));
                    Some(*name)
                }
            };
            let p = TextPrompt { text: prompt.to_string(), category };
            match v.get("split").and_then(|s| s.as_str()) {
                None | Some("train") => train.push(p),
                Some("held_out") => held_out.push(p),
                Some(other) => {
                    return Err(err(format!(
                        "line {n}: \"split\" is {other:?}, expected \"train\" or \"held_out\""
                    )))
                }
            }
        }
        if train.is_empty() || held_out.is_empty() {
            return Err(err(format!(
                "{} train and {} held-out lines; a run needs at least one of each \
                 (\"split\": \"held_out\" marks the evaluation prompts)",
                train.len(),
                held_out.len()
            )));
        }
        Ok(Self { train, held_out })
    }

    /// A task over given prompts; both sets must be non-empty.
    pub fn new(train: Vec<TextPrompt>, held_out: Vec<TextPrompt>) -> Result<Self> {
        if train.is_empty() || held_out.is_empty() {
            return Err(FlowModelError::Config {
                field: "prompts",
                value: format!("{} train and {} held-out prompts", train.len(), held_out.len()),
                expected: "at least one of each".into(),
            });
        }
        Ok(Self { train, held_out })
    }

    /// The prompts trained on.
    #[must_use]
    pub fn train_prompts(&self) -> &[TextPrompt] {
        &self.train
    }
}

impl ImageTask for TextPromptTask {
    type Prompt = TextPrompt;
    fn train_prompt(&self, seed: u64, index: u64) -> TextPrompt {
        let u = RngKey::new(seed).stream("text_prompts").step(index).uniform_f64_vec(1)[0];
        let k = ((u * self.train.len() as f64) as usize).min(self.train.len() - 1);
        self.train[k].clone()
    }
    fn eval_prompts(&self) -> &[TextPrompt] {
        &self.held_out
    }
    /// Free text has no tokenizer here: wrap the task in an embedding model.
    fn encode(&self, _: &[TextPrompt], _: &Device) -> Result<Tensor> {
        Err(FlowModelError::Config {
            field: "prompts",
            value: "free-text prompts".into(),
            expected: "a text encoder or embedding cache (sd3.embeddings) to encode them".into(),
        })
    }
    fn caption(&self, p: &TextPrompt) -> String {
        p.text.clone()
    }
    fn strict(&self, _: &TextPrompt, _: &Image) -> Option<bool> {
        None
    }
    fn category(&self, p: &TextPrompt) -> Option<&'static str> {
        p.category
    }
}

/// The rewards that apply to free-text prompts: `http` (a scoring service), and the
/// image-only `jpeg_compressibility` / `jpeg_incompressibility`.
pub const TEXT_REWARDS: &[&str] = &["http", "jpeg_compressibility", "jpeg_incompressibility"];

fn text_named(term: &RewardTerm) -> Result<Arc<ImageReward<TextPrompt>>> {
    Ok(match term.name.as_str() {
        "http" => Arc::new(http_reward(term)?),
        "jpeg_compressibility" => Arc::new(JpegCompressibility),
        "jpeg_incompressibility" => Arc::new(JpegIncompressibility),
        other => {
            return Err(FlowModelError::Config {
                field: "rewards.name",
                value: other.to_string(),
                expected: format!(
                    "for free-text prompts one of {} (the shapes verifier scores only the \
                     shapes world's own images)",
                    TEXT_REWARDS.join(", ")
                ),
            })
        }
    })
}

/// The reward of `terms` over free-text prompts: one term of weight 1 itself, else the
/// weighted sum `Σ wᵢ rᵢ`.
pub fn text_reward(terms: &[RewardTerm]) -> Result<Arc<ImageReward<TextPrompt>>> {
    weighted_reward(terms, text_named)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prompt_file_is_read_with_its_splits_and_a_bad_line_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("p.jsonl");
        std::fs::write(
            &p,
            "{\"prompt\": \"a photo of a bench\", \"category\": \"single_object\"}\n\n\
             {\"prompt\": \"a photo of two cats\", \"category\": \"counting\", \"split\": \"held_out\"}\n\
             {\"prompt\": \"a red car\"}\n",
        )
        .unwrap();
        let t = TextPromptTask::from_jsonl(&p).unwrap();
        assert_eq!(t.train_prompts().len(), 2);
        assert_eq!(t.eval_prompts()[0].category, Some("counting"));
        assert_eq!(t.train_prompts()[1].category, None);
        // Draws are keyed: the same (seed, index) gives the same prompt, and both appear.
        let draws: Vec<String> = (0..40).map(|i| t.train_prompt(3, i).text).collect();
        assert_eq!(draws, (0..40).map(|i| t.train_prompt(3, i).text).collect::<Vec<_>>());
        assert!(
            draws.iter().any(|d| d == "a red car") && draws.iter().any(|d| d.contains("bench"))
        );
        std::fs::write(&p, "{\"prompt\": \"x\", \"split\": \"held_out\"}\n{\"promt\": \"y\"}\n")
            .unwrap();
        let e = TextPromptTask::from_jsonl(&p).unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("\"prompt\""), "{e}");
        std::fs::write(&p, "{\"prompt\": \"x\"}\n").unwrap();
        let e = TextPromptTask::from_jsonl(&p).unwrap_err().to_string();
        assert!(e.contains("held_out"), "{e}");
    }

    #[test]
    fn only_rewards_that_read_free_text_are_accepted() {
        let e = text_reward(&[RewardTerm::named("geneval", 1.0)]).err().unwrap().to_string();
        assert!(e.contains("geneval") && e.contains("http"), "{e}");
        let r = text_reward(&[RewardTerm::named("jpeg_compressibility", 1.0)]).unwrap();
        assert_eq!(r.name(), "jpeg_compressibility");
    }
}
