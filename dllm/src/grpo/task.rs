//! What the dLLM trainer trains on: prompts, held-out items and a scorer of completions.

use std::sync::Arc;

use drift_core::rng::SplitMix64;
use drift_rewards::pool::{Pool, PoolConfig};
use drift_rewards::reward::TextSample;
use drift_rewards::sandbox::SandboxConfig;
use drift_rewards::worlds::code::{CodeItem, CodeSplit, CodeWorld, CodeWorldConfig};
use drift_rewards::worlds::code::{CodeReward, CodeRewardConfig};
use drift_rewards::worlds::{Split, TextItem};

use crate::error::{DllmError, Result};
use crate::tokenizer::{CharTokenizer, Tokenizer, BOS_ID, EOS_ID};

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
    /// The first `n` held-out items: the set the run's headline evaluation scores.
    fn eval_items(&self, n: usize) -> Vec<Self::Item>;
    /// Further held-out sets reported beside [`TextTask::eval_items`], by name (the first
    /// `n` items of each); none by default.
    fn extra_eval_sets(&self, n: usize) -> Vec<(&'static str, Vec<Self::Item>)> {
        let _ = n;
        Vec::new()
    }
    /// The prompt token ids the model is given (specials included, e.g. BOS).
    fn prompt_ids(&self, item: &Self::Item) -> Result<Vec<u32>>;
    /// The decoded text of completion token ids (up to the first EOS).
    fn completion_text(&self, ids: &[u32]) -> Result<String>;
    /// Scores `completions[i]` (text) as the answer to `items[i]`.
    fn score(&self, items: &[Self::Item], completions: &[String]) -> Vec<TaskScore>;
}

/// The shipped code world (spec → one-line Python function in a fenced block, rewarded by
/// running its tests in the sandbox) in drift's corpus format: prompt `BOS spec\n`,
/// completion the fenced solution then EOS, through the model's tokenizer (the ASCII
/// character tokenizer until [`CodeTask::with_tokenizer`]) — exactly what `drift pretrain
/// dllm` trains on. Its train stream is the world's train split; it evaluates on the
/// held-out items (new constants of trained shapes) and reports the held-out templates
/// (unseen shapes) beside them.
pub struct CodeTask {
    world: CodeWorld,
    tokenizer: Tokenizer,
    reward: Arc<CodeReward>,
    pool: Pool,
    /// A user's problems ([`CodeTask::from_file`]), replacing the world's items when set.
    user: Option<UserProblems>,
}

/// A user's code problems, split for training and evaluation.
struct UserProblems {
    /// Every problem, in file order.
    all: Vec<CodeItem>,
    train: Vec<CodeItem>,
    held_out: Vec<CodeItem>,
}

impl CodeTask {
    /// The code world with its default configuration (seed 0, 10% of templates held out)
    /// and the default code reward (format 0.5 + execution 2.0, in the default sandbox) on the
    /// default worker pool.
    pub fn new() -> Result<Self> {
        Self::with_sandbox(&SandboxConfig::default())
    }

    /// [`CodeTask::new`] with the code reward's programs run in `sandbox` (its `mode`: drift's
    /// namespace jail, bwrap, or, only when asked, resource limits alone).
    pub fn with_sandbox(sandbox: &SandboxConfig) -> Result<Self> {
        let err = |e: drift_rewards::RewardError| DllmError::Config {
            key: "task",
            value: "code".into(),
            expected: format!("a working code world and sandbox: {e}"),
        };
        Ok(Self {
            world: CodeWorld::new(CodeWorldConfig::default()).map_err(err)?,
            tokenizer: Tokenizer::Char(CharTokenizer::ascii()),
            reward: Arc::new(
                CodeReward::new(&CodeRewardConfig {
                    sandbox: sandbox.clone(),
                    ..CodeRewardConfig::default()
                })
                .map_err(err)?,
            ),
            pool: Pool::new(&PoolConfig::default()).map_err(err)?,
            user: None,
        })
    }

    /// A user's problems from a JSONL file (`drift_rewards::worlds::code::user`: one
    /// `{"prompt": …, "tests": [...]}` per line, optional `"split"`), scored by the same
    /// sandboxed code reward. Lines tagged `held_out` are evaluated and the others trained on;
    /// a file without tagged lines is both trained on and evaluated (say so in a report).
    /// Errors name the file and line of a malformed problem, or the problem whose prompt the
    /// character tokenizer cannot encode. Programs run in `sandbox`.
    pub fn from_file(path: &std::path::Path, sandbox: &SandboxConfig) -> Result<Self> {
        let bad =
            |value: String, expected: String| DllmError::Config { key: "data", value, expected };
        let records = drift_rewards::worlds::code::user::read_code_jsonl(path)
            .map_err(|e| bad(path.display().to_string(), format!("a code-problem file: {e}")))?;
        let mut task = Self::with_sandbox(sandbox)?;
        for (item, _) in &records {
            task.tokenizer.encode(&Self::prompt_text(item)).map_err(|e| {
                bad(
                    format!("{}: problem `{}`", path.display(), item.id),
                    format!("a prompt the model's tokenizer can encode: {e}"),
                )
            })?;
        }
        let all: Vec<CodeItem> = records.iter().map(|(i, _)| i.clone()).collect();
        let (held_out, train): (Vec<_>, Vec<_>) =
            records.into_iter().partition(|(_, s)| *s == Some(Split::HeldOut));
        let train: Vec<CodeItem> = train.into_iter().map(|(i, _)| i).collect();
        let held_out: Vec<CodeItem> = held_out.into_iter().map(|(i, _)| i).collect();
        let (train, held_out) = match (train.is_empty(), held_out.is_empty()) {
            (true, _) => (held_out.clone(), held_out),
            (false, true) => (train.clone(), train),
            (false, false) => (train, held_out),
        };
        task.user = Some(UserProblems { all, train, held_out });
        Ok(task)
    }

    /// The task with prompts encoded and completions decoded by `tokenizer` (the model's);
    /// errors when a `tokenizer.json` does not declare drift's special ids, or when a user
    /// problem's prompt cannot be encoded.
    pub fn with_tokenizer(mut self, tokenizer: Tokenizer) -> Result<Self> {
        tokenizer.vocab_spec()?;
        self.tokenizer = tokenizer;
        for item in self.user_items() {
            self.tokenizer.encode(&Self::prompt_text(item)).map_err(|e| DllmError::Config {
                key: "data",
                value: format!("problem `{}`", item.id),
                expected: format!("a prompt the model's tokenizer can encode: {e}"),
            })?;
        }
        Ok(self)
    }

    /// The task's tokenizer.
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// Whether the task's problems come from a user's file.
    pub fn is_user_data(&self) -> bool {
        self.user.is_some()
    }

    /// Every problem of the user's file in file order (empty for the code world).
    pub fn user_items(&self) -> &[CodeItem] {
        self.user.as_ref().map_or(&[], |u| &u.all)
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
        if let Some(user) = &self.user {
            // Uniform over the user's training problems, keyed by (seed, index).
            let mut rng = SplitMix64::keyed(&[seed, 0x7573_6572, index]);
            return user.train[rng.below32(user.train.len())].clone();
        }
        // The world's train stream is keyed by the index; the run's seed offsets it.
        self.world.item(Split::Train, seed.wrapping_mul(1_000_003).wrapping_add(index))
    }

    /// The first `n` held-out items: for the world, its held-out items (new constants of
    /// trained shapes); for a user's file, its held-out problems (at most `n`).
    fn eval_items(&self, n: usize) -> Vec<CodeItem> {
        match &self.user {
            Some(user) => user.held_out.iter().take(n).cloned().collect(),
            None => self.world.items(CodeSplit::HeldOutItems, n),
        }
    }

    /// For the world, its held-out templates (shapes never trained on); none for a user's
    /// file.
    fn extra_eval_sets(&self, n: usize) -> Vec<(&'static str, Vec<CodeItem>)> {
        match &self.user {
            Some(_) => Vec::new(),
            None => vec![(
                CodeSplit::HeldOutTemplates.name(),
                self.world.items(CodeSplit::HeldOutTemplates, n),
            )],
        }
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
        // Runs start from the sandbox's fork server, forked while the trainer was small, so the
        // memory the trainer keeps for its next update neither slows them nor is handed back.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_users_file_trains_on_its_train_lines_and_evaluates_its_held_out_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mine.jsonl");
        let line = |p: &str, split: &str| {
            format!("{{\"prompt\": \"{p}\", \"tests\": [\"assert f(1) == 1\"]{split}}}\n")
        };
        let held = ", \"split\": \"held_out\"";
        let text = [line("a", ""), line("b", held), line("c", ""), line("d", held)].concat();
        std::fs::write(&path, text).unwrap();
        let task = CodeTask::from_file(&path, &SandboxConfig::default()).unwrap();
        assert!(task.is_user_data());
        let drawn: std::collections::BTreeSet<String> =
            (0..64).map(|i| task.train_item(3, i).prompt).collect();
        assert_eq!(drawn.into_iter().collect::<Vec<_>>(), vec!["a", "c"]);
        let eval: Vec<String> = task.eval_items(10).into_iter().map(|i| i.prompt).collect();
        assert_eq!(eval, vec!["b", "d"]);
        assert_eq!(task.eval_items(1).len(), 1);
        // Untagged only: trained on and evaluated whole.
        std::fs::write(&path, line("a", "")).unwrap();
        let task = CodeTask::from_file(&path, &SandboxConfig::default()).unwrap();
        assert_eq!(task.eval_items(5).len(), 1);
        assert_eq!(task.train_item(0, 0).prompt, "a");
        // A prompt the character tokenizer cannot encode is named before any work.
        std::fs::write(&path, line("x ≥ 1", "")).unwrap();
        let err = CodeTask::from_file(&path, &SandboxConfig::default()).err().unwrap().to_string();
        assert!(err.contains("line-1") && err.contains("tokenizer"), "{err}");
    }
}
