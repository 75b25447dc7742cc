//! What the dLLM trainer trains on: prompts, held-out items and a scorer of completions.

use std::sync::Arc;

use drift_rewards::code::{CodeReward, CodeRewardConfig};
use drift_rewards::pool::{Pool, PoolConfig};
use drift_rewards::reward::TextSample;
use drift_rewards::worlds::code::{CodeItem, CodeWorld, CodeWorldConfig};
use drift_rewards::worlds::{Split, TextItem};

use crate::error::{DllmError, Result};
use crate::tokenizer::{CharTokenizer, BOS_ID, EOS_ID};

/// One scored completion.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TaskScore {
    /// The reward the trainer optimises.
    pub reward: f64,
    /// Whether the completion solves the item (the pass rate counts these).
    pub passed: bool,
    /// Why the reward failed, when it did (a crash, a timeout): contained, scored 0.
    pub failure: Option<String>,
    /// The reward's named parts (for the code reward `code_format` and `code_execution`,
    /// each in `[0, 1]`); empty when the task's reward has none.
    pub components: Vec<(String, f64)>,
}

/// A text task for dLLM RL: train prompts keyed by `(seed, index)`, a fixed held-out split and
/// a scorer.
pub trait TextTask {
    /// One item (a prompt with what its scorer needs).
    type Item: Clone;
    /// Train item `index` of the stream under `seed` (a pure function, so a resumed run sees
    /// the same prompts).
    fn train_item(&self, seed: u64, index: u64) -> Self::Item;
    /// The first `n` held-out items.
    fn eval_items(&self, n: usize) -> Vec<Self::Item>;
    /// The prompt token ids the model is given (specials included, e.g. BOS).
    fn prompt_ids(&self, item: &Self::Item) -> Result<Vec<u32>>;
    /// The decoded text of completion token ids (up to the first EOS).
    fn completion_text(&self, ids: &[u32]) -> Result<String>;
    /// Scores `completions[i]` (text) as the answer to `items[i]`.
    fn score(&self, items: &[Self::Item], completions: &[String]) -> Vec<TaskScore>;
}

/// The shipped code world (spec → one-line Python function in a fenced block, rewarded by
/// running its tests in the sandbox) in drift's corpus format: prompt `BOS spec\n`,
/// completion the fenced solution then EOS, through the ASCII character tokenizer — exactly
/// what `drift pretrain dllm` trains on.
pub struct CodeTask {
    world: CodeWorld,
    tokenizer: CharTokenizer,
    reward: Arc<CodeReward>,
    pool: Pool,
}

impl CodeTask {
    /// The code world with its default configuration (seed 0, 10% of templates held out)
    /// and the default code reward (format 0.5 + execution 2.0) on the default worker pool.
    pub fn new() -> Result<Self> {
        let err = |e: drift_rewards::RewardError| DllmError::Config {
            key: "task",
            value: "code".into(),
            expected: format!("a working code world and sandbox: {e}"),
        };
        Ok(Self {
            world: CodeWorld::new(CodeWorldConfig::default()).map_err(err)?,
            tokenizer: CharTokenizer::ascii(),
            reward: Arc::new(CodeReward::new(&CodeRewardConfig::default()).map_err(err)?),
            pool: Pool::new(&PoolConfig::default()).map_err(err)?,
        })
    }

    /// The prompt text of an item: its spec and a newline.
    pub fn prompt_text(item: &CodeItem) -> String {
        format!("{}\n", item.prompt())
    }

    /// The world.
    pub fn world(&self) -> &CodeWorld {
        &self.world
    }
}

impl TextTask for CodeTask {
    type Item = CodeItem;

    fn train_item(&self, seed: u64, index: u64) -> CodeItem {
        // The world's train stream is keyed by the index; the run's seed offsets it.
        self.world.item(Split::Train, seed.wrapping_mul(1_000_003).wrapping_add(index))
    }

    fn eval_items(&self, n: usize) -> Vec<CodeItem> {
        self.world.items(Split::HeldOut, n)
    }

    fn prompt_ids(&self, item: &CodeItem) -> Result<Vec<u32>> {
        let mut ids = vec![BOS_ID];
        ids.extend(self.tokenizer.encode(&Self::prompt_text(item))?);
        Ok(ids)
    }

    fn completion_text(&self, ids: &[u32]) -> Result<String> {
        let end = ids.iter().position(|&t| t == EOS_ID).unwrap_or(ids.len());
        self.tokenizer.decode(&ids[..end], true)
    }

    fn score(&self, items: &[CodeItem], completions: &[String]) -> Vec<TaskScore> {
        let samples: Vec<TextSample<CodeItem>> = items
            .iter()
            .zip(completions)
            .map(|(item, c)| TextSample::new(item.clone(), c.clone()))
            .collect();
        let outcomes = self.pool.evaluate(&self.reward, samples);
        outcomes
            .into_iter()
            .map(|o| {
                let part = |name: &str| {
                    o.details.components.iter().find(|c| c.name == name).map_or(0.0, |c| c.score)
                };
                let passed =
                    o.is_ok() && part("code_format") == 1.0 && part("code_execution") == 1.0;
                TaskScore {
                    reward: o.score,
                    passed,
                    failure: o.failure.as_ref().map(|f| format!("{f:?}")),
                    components: o
                        .details
                        .components
                        .iter()
                        .map(|c| (c.name.to_string(), c.score))
                        .collect(),
                }
            })
            .collect()
    }
}
