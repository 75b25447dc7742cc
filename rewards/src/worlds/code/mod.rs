//! The code world: natural-language specs → one-line Python functions with assert tests.
//!
//! Items come from the [`templates`] (3 232 of them in 534 shapes, in five families). There
//! are three splits ([`CodeSplit`]), each a set of templates:
//! - **held-out templates**: every template of the held-out *shapes* ([`crate::worlds::split`]
//!   rule on the shape key, `held_out_percent`), so these items test composition of
//!   operations never seen together in training;
//! - **held-out items**: templates of training shapes whose constants were never trained on
//!   (the same rule on the template key under another salt, `held_out_items_percent`, among
//!   shapes with at least two templates): a new spec of a known shape, e.g. "greater than 6"
//!   where training saw the shape with 1 to 5 — the split RL on the train stream should move;
//! - **train**: the rest.
//!
//! Item `k` of a split is a pure function of `(seed, split, k)`: its template is drawn
//! uniformly from the split's templates and its tests from random inputs, with expected
//! outputs computed in Rust with Python's semantics.

pub mod execute;
pub mod extract;
pub mod format;
pub mod harness;
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
    /// Percentage of template shapes held out (the held-out-templates split). Default 10.
    pub held_out_percent: u8,
    /// Percentage of the templates of training shapes (with at least two templates) held out
    /// as the held-out-items split. Default 10.
    pub held_out_items_percent: u8,
    /// Test cases per item (distinct inputs). Default 5 (DiffuCoder-style unit tests).
    pub tests_per_item: usize,
}

impl Default for CodeWorldConfig {
    fn default() -> Self {
        Self { seed: 0, held_out_percent: 10, held_out_items_percent: 10, tests_per_item: 5 }
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

/// A split of the code world (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CodeSplit {
    /// Training templates.
    Train,
    /// New templates (constants) of training shapes.
    HeldOutItems,
    /// Every template of the held-out shapes.
    HeldOutTemplates,
}

impl CodeSplit {
    /// Every split.
    pub const ALL: [CodeSplit; 3] = [Self::Train, Self::HeldOutItems, Self::HeldOutTemplates];

    /// The split's name: `train`, `held_out_items` or `held_out_templates`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Train => "train",
            Self::HeldOutItems => "held_out_items",
            Self::HeldOutTemplates => "held_out_templates",
        }
    }

    fn tag(self) -> u64 {
        match self {
            Self::Train => Split::Train.tag(),
            Self::HeldOutItems => 3,
            Self::HeldOutTemplates => Split::HeldOut.tag(),
        }
    }
}

/// The generic train / held-out pair: held-out means held-out templates.
impl From<Split> for CodeSplit {
    fn from(s: Split) -> Self {
        match s {
            Split::Train => Self::Train,
            Split::HeldOut => Self::HeldOutTemplates,
        }
    }
}

/// Salt of the held-out-items rule, so it is independent of the shapes' rule.
const ITEM_SALT: u64 = 0x17E5;

/// The code world: its templates partitioned by split.
#[derive(Debug, Clone)]
pub struct CodeWorld {
    cfg: CodeWorldConfig,
    train: Vec<Template>,
    held_out_items: Vec<Template>,
    held_out: Vec<Template>,
}

impl CodeWorld {
    /// Partitions the templates; errors on a bad percentage or zero tests per item.
    pub fn new(cfg: CodeWorldConfig) -> Result<Self, RewardError> {
        check_percent(cfg.held_out_percent)?;
        check_percent(cfg.held_out_items_percent)?;
        if cfg.tests_per_item == 0 {
            return Err(RewardError::Config {
                field: "tests_per_item",
                value: "0".into(),
                expected: "at least 1".into(),
            });
        }
        let all = all_templates();
        let mut per_shape = std::collections::HashMap::<String, usize>::new();
        for t in &all {
            *per_shape.entry(t.shape_key()).or_default() += 1;
        }
        let (mut train, mut held_out_items, mut held_out) = (Vec::new(), Vec::new(), Vec::new());
        for t in all {
            let shape = t.shape_key();
            if split_of(&shape, cfg.seed, cfg.held_out_percent) == Split::HeldOut {
                held_out.push(t);
            } else if per_shape[&shape] >= 2
                && split_of(&t.key(), cfg.seed ^ ITEM_SALT, cfg.held_out_items_percent)
                    == Split::HeldOut
            {
                held_out_items.push(t);
            } else {
                train.push(t);
            }
        }
        Ok(Self { cfg, train, held_out_items, held_out })
    }

    /// The templates of `split` (a [`CodeSplit`], or a [`Split`]: held-out = templates).
    pub fn templates(&self, split: impl Into<CodeSplit>) -> &[Template] {
        match split.into() {
            CodeSplit::Train => &self.train,
            CodeSplit::HeldOutItems => &self.held_out_items,
            CodeSplit::HeldOutTemplates => &self.held_out,
        }
    }

    /// Item `k` of `split`, with id `code-<split>-<k>`.
    pub fn item(&self, split: impl Into<CodeSplit>, k: u64) -> CodeItem {
        let split = split.into();
        let mut rng = SplitMix64::keyed(&[self.cfg.seed, 0xC0DE, split.tag(), k]);
        let ts = self.templates(split);
        let t = ts[rng.below32(ts.len())];
        self.item_of(t, format!("code-{}-{k}", split.name()), &mut rng)
    }

    /// The first `n` items of `split`.
    pub fn items(&self, split: impl Into<CodeSplit>, n: usize) -> Vec<CodeItem> {
        let split = split.into();
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
        let hi = w.templates(CodeSplit::HeldOutItems).len();
        assert_eq!(tr + hi + ho, 3232);
        assert!((150..=550).contains(&ho), "{ho} held out templates");
        assert!((150..=450).contains(&hi), "{hi} held out items");
        // Held-out items are new templates of training shapes: their shapes are trained on,
        // their keys (constants) never are.
        let train_shapes: std::collections::HashSet<String> =
            w.templates(Split::Train).iter().map(|t| t.shape_key()).collect();
        let train_keys: std::collections::HashSet<String> =
            w.templates(Split::Train).iter().map(|t| t.key()).collect();
        for t in w.templates(CodeSplit::HeldOutItems) {
            assert!(train_shapes.contains(&t.shape_key()), "{}", t.key());
            assert!(!train_keys.contains(&t.key()), "{}", t.key());
        }
        for t in w.templates(Split::HeldOut) {
            assert!(!train_shapes.contains(&t.shape_key()), "{}", t.key());
        }
        assert_eq!(w.item(CodeSplit::HeldOutItems, 7).id, "code-held_out_items-7");
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
