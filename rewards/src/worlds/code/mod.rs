//! The code world: natural-language specs → one-line Python functions with assert tests.
//!
//! Items come from the [`templates`] (655 of them, in five families); the held-out split is
//! a set of *templates* ([`crate::worlds::split`] rule on the template key), so held-out
//! items test composition of operations never seen together in training. Item `k` of a
//! split is a pure function of `(seed, split, k)`: its template is drawn uniformly from the
//! split's templates and its tests from random inputs, with expected outputs computed in
//! Rust with Python's semantics.

pub mod execute;
pub mod extract;
pub mod format;
pub mod ops;
pub mod reward;
pub mod templates;
pub mod user;
pub mod value;

use serde::{Deserialize, Serialize};

use crate::worlds::split::{check_percent, split_of, Split, TextItem};
use crate::RewardError;
use drift_core::rng::SplitMix64;
use templates::{all_templates, Template};
use value::Value;

pub use execute::{CodeTask, ExecutionReward};
pub use format::FormatReward;
pub use reward::{CodeReward, CodeRewardConfig};

/// Configuration of the code world.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CodeWorldConfig {
    /// Seed of the split and of the items. Default 0.
    pub seed: u64,
    /// Percentage of templates held out. Default 10.
    pub held_out_percent: u8,
    /// Test cases per item (distinct inputs). Default 5 (DiffuCoder-style unit tests).
    pub tests_per_item: usize,
}

impl Default for CodeWorldConfig {
    fn default() -> Self {
        Self { seed: 0, held_out_percent: 10, tests_per_item: 5 }
    }
}

/// One code task, as written to and read from JSONL.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CodeItem {
    /// Identifier, `code-<split>-<k>` for generated items.
    pub id: String,
    /// The template key (empty for user items).
    #[serde(default)]
    pub template: String,
    /// The spec.
    pub prompt: String,
    /// A reference solution (Python source, no fences).
    pub solution: String,
    /// Test programs appended to the candidate, each `assert f(...) == ...`.
    pub tests: Vec<String>,
}

impl CodeTask for CodeItem {
    fn tests(&self) -> &[String] {
        &self.tests
    }
}

impl TextItem for CodeItem {
    fn id(&self) -> &str {
        &self.id
    }
    fn prompt(&self) -> String {
        self.prompt.clone()
    }
    /// The solution in the one fenced block the format gate expects.
    fn target(&self) -> String {
        format!("```python\n{}```", self.solution)
    }
}

/// The code world: its templates partitioned by split.
#[derive(Debug, Clone)]
pub struct CodeWorld {
    cfg: CodeWorldConfig,
    train: Vec<Template>,
    held_out: Vec<Template>,
}

impl CodeWorld {
    /// Partitions the templates; errors on a bad percentage or zero tests per item.
    pub fn new(cfg: CodeWorldConfig) -> Result<Self, RewardError> {
        check_percent(cfg.held_out_percent)?;
        if cfg.tests_per_item == 0 {
            return Err(RewardError::Config {
                field: "tests_per_item",
                value: "0".into(),
                expected: "at least 1".into(),
            });
        }
        let (mut train, mut held_out) = (Vec::new(), Vec::new());
        for t in all_templates() {
            match split_of(&t.key(), cfg.seed, cfg.held_out_percent) {
                Split::Train => train.push(t),
                Split::HeldOut => held_out.push(t),
            }
        }
        Ok(Self { cfg, train, held_out })
    }

    /// The templates of `split`.
    pub fn templates(&self, split: Split) -> &[Template] {
        match split {
            Split::Train => &self.train,
            Split::HeldOut => &self.held_out,
        }
    }

    /// Item `k` of `split`.
    pub fn item(&self, split: Split, k: u64) -> CodeItem {
        let mut rng = SplitMix64::keyed(&[self.cfg.seed, 0xC0DE, split.tag(), k]);
        let ts = self.templates(split);
        let t = ts[rng.below32(ts.len())];
        let id = format!("code-{}-{k}", if split == Split::Train { "train" } else { "held_out" });
        self.item_of(t, id, &mut rng)
    }

    /// The first `n` items of `split`.
    pub fn items(&self, split: Split, n: usize) -> Vec<CodeItem> {
        (0..n as u64).map(|k| self.item(split, k)).collect()
    }

    /// An item of template `t` with tests drawn from `rng`: distinct inputs where the input
    /// space allows (at most `8 · tests_per_item` draws), and the last input redrawn (at most
    /// 32 times) when every expected output is the same, so a constant function cannot pass.
    pub fn item_of(&self, t: Template, id: String, rng: &mut SplitMix64) -> CodeItem {
        let n = self.cfg.tests_per_item;
        let mut cases: Vec<(Value, Value)> = Vec::new();
        for _ in 0..8 * n {
            let v = t.random_input(rng);
            if cases.iter().all(|(u, _)| *u != v) {
                if let Some(out) = t.eval(&v) {
                    cases.push((v, out));
                }
            }
            if cases.len() == n {
                break;
            }
        }
        for _ in 0..32 {
            let constant = cases.windows(2).all(|w| w[0].1 == w[1].1);
            if !constant || cases.len() < 2 {
                break;
            }
            let v = t.random_input(rng);
            if let Some(out) = t.eval(&v) {
                if cases.iter().all(|(u, _)| *u != v) {
                    *cases.last_mut().expect("two cases") = (v, out);
                }
            }
        }
        let tests = cases
            .iter()
            .map(|(v, out)| format!("assert f({}) == {}", v.python(), out.python()))
            .collect();
        CodeItem { id, template: t.key(), prompt: t.spec(), solution: t.solution(), tests }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_partition_templates_and_items_are_deterministic() {
        let w = CodeWorld::new(CodeWorldConfig::default()).unwrap();
        let (tr, ho) = (w.templates(Split::Train).len(), w.templates(Split::HeldOut).len());
        assert_eq!(tr + ho, 655);
        assert!((30..=110).contains(&ho), "{ho} held out");
        assert_eq!(w.items(Split::Train, 5), w.items(Split::Train, 5));
        let held: Vec<String> = w.templates(Split::HeldOut).iter().map(|t| t.key()).collect();
        for item in w.items(Split::Train, 200) {
            assert!(!held.contains(&item.template));
            assert_eq!(item.tests.len(), 5, "{item:?}");
        }
        let other = CodeWorld::new(CodeWorldConfig { seed: 1, ..Default::default() }).unwrap();
        assert_ne!(w.templates(Split::HeldOut), other.templates(Split::HeldOut));
        assert!(
            CodeWorld::new(CodeWorldConfig { tests_per_item: 0, ..Default::default() }).is_err()
        );
    }
}
