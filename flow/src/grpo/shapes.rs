//! The shipped shapes world as a Flow-GRPO task, and its rewards by name.

use std::collections::BTreeMap;
use std::sync::Arc;

use candle_core::{Device, Tensor};
use drift_rewards::combine::Weighted;
use drift_rewards::http::{HttpReward, HttpRewardConfig};
use drift_rewards::image::{Image, JpegCompressibility, JpegIncompressibility};
use drift_rewards::reward::{ImageSample, Reward};
use drift_rewards::worlds::shapes::{
    self, Category, Prompt, ShapesReward, ShapesScore, SplitConfig,
};
use serde::{Deserialize, Serialize};

use super::task::{ImageReward, ImageTask};
use crate::error::{FlowModelError, Result};

/// The shapes world as a task: training prompts drawn category-balanced (a GenEval category
/// uniformly, then a prompt of it) or by category weights ([`ShapesTask::with_category_weights`]),
/// and a held-out list that scores every category on about the same number of images
/// ([`shapes::eval_list`]).
#[derive(Debug, Clone)]
pub struct ShapesTask {
    train: Vec<(Category, Vec<Prompt>)>,
    /// The draw weight of each `train` group (all 1: balanced).
    weights: Vec<f64>,
    held_out: Vec<Prompt>,
}

/// Images per category of the held-out evaluation by default: every held-out prompt at least
/// once, each category on at least 48 images.
pub const EVAL_IMAGES_PER_CATEGORY: usize = 48;

impl ShapesTask {
    /// The default split of the shapes world, evaluated on at least
    /// [`EVAL_IMAGES_PER_CATEGORY`] images per category.
    pub fn new() -> Result<Self> {
        Self::with_eval_images(EVAL_IMAGES_PER_CATEGORY)
    }

    /// The default split of the shapes world, evaluated on at least `per_category` images per
    /// category.
    pub fn with_eval_images(per_category: usize) -> Result<Self> {
        let split = shapes::split(&SplitConfig::default()).map_err(|e| FlowModelError::Config {
            field: "shapes split",
            value: e.to_string(),
            expected: "the shapes world's default split".into(),
        })?;
        Self::from_prompts(&split.train, &split.held_out, per_category)
    }

    /// Every prompt the task trains on.
    #[must_use]
    pub fn train_prompts(&self) -> Vec<Prompt> {
        self.train.iter().flat_map(|(_, p)| p.iter().cloned()).collect()
    }

    /// A task over given prompt sets (a user's JSONL file): trains on `train`, evaluates on
    /// `held_out` repeated to at least `per_category` images per category.
    pub fn from_prompts(
        train: &[Prompt],
        held_out: &[Prompt],
        per_category: usize,
    ) -> Result<Self> {
        if train.is_empty() || held_out.is_empty() {
            return Err(FlowModelError::Config {
                field: "prompts",
                value: format!("{} train and {} held-out prompts", train.len(), held_out.len()),
                expected: "at least one prompt of each".into(),
            });
        }
        let train = shapes::by_category(train);
        Ok(Self {
            weights: vec![1.0; train.len()],
            train,
            held_out: shapes::eval_list(held_out, per_category),
        })
    }

    /// The task with training prompts drawn by category weight: category `c` with probability
    /// `w_c / Σ w` over the categories that have training prompts, a category not in
    /// `weights` weighing 1 (so an empty map keeps the balanced draw). Errors name an unknown
    /// category, a negative or non-finite weight, or weights that leave nothing to draw.
    pub fn with_category_weights(mut self, weights: &BTreeMap<String, f64>) -> Result<Self> {
        self.weights = category_weights(&self.train, weights)?;
        Ok(self)
    }

    /// The training prompts, grouped by category.
    pub fn train_groups(&self) -> &[(Category, Vec<Prompt>)] {
        &self.train
    }
}

/// The draw weight of each of `groups` (from [`shapes::by_category`]) under the named
/// `weights` (`{ position = 2, color_attr = 2 }`): a category not named weighs 1, so an empty
/// map gives equal weights, the balanced draw. Used by the RL task's `category_weights` and
/// by pretraining's (`PretrainFlowConfig::category_weights`). Errors name an unknown category,
/// a negative or non-finite weight, or weights that leave nothing to draw.
pub fn category_weights(
    groups: &[(Category, Vec<Prompt>)],
    weights: &BTreeMap<String, f64>,
) -> Result<Vec<f64>> {
    let bad = |value: String, expected: String| FlowModelError::Config {
        field: "category_weights",
        value,
        expected,
    };
    for (name, &w) in weights {
        if Category::from_name(name).is_none() {
            let known: Vec<_> = Category::ALL.iter().map(|c| c.name()).collect();
            return Err(bad(name.clone(), format!("a category: {}", known.join(", "))));
        }
        if !(w.is_finite() && w >= 0.0) {
            return Err(bad(format!("{name} = {w}"), "a finite weight >= 0".into()));
        }
    }
    let drawn: Vec<f64> =
        groups.iter().map(|(c, _)| weights.get(c.name()).copied().unwrap_or(1.0)).collect();
    if drawn.iter().all(|w| *w == 0.0) {
        return Err(bad(
            format!("{weights:?}"),
            "a positive weight on at least one category with training prompts".into(),
        ));
    }
    Ok(drawn)
}

impl ImageTask for ShapesTask {
    type Prompt = Prompt;

    fn train_prompt(&self, seed: u64, index: u64) -> Prompt {
        // `from_prompts` refuses an empty training set and `with_category_weights` all-zero
        // weights, so a prompt always exists.
        shapes::weighted_prompt(&self.train, &self.weights, seed, index)
            .unwrap_or_else(|| self.held_out[0].clone())
    }

    fn eval_prompts(&self) -> &[Prompt] {
        &self.held_out
    }

    fn encode(&self, prompts: &[Prompt], device: &Device) -> Result<Tensor> {
        let ids: Vec<u32> = prompts.iter().flat_map(shapes::tokenize).collect();
        Ok(Tensor::from_vec(ids, (prompts.len(), shapes::MAX_TOKENS), device)?)
    }

    fn caption(&self, prompt: &Prompt) -> String {
        prompt.to_text()
    }

    fn strict(&self, prompt: &Prompt, image: &Image) -> Option<bool> {
        Some(shapes::verify(prompt, image).strict)
    }

    fn category(&self, prompt: &Prompt) -> Option<&'static str> {
        Some(prompt.category().name())
    }

    fn objects(&self, image: &Image) -> Option<usize> {
        Some(shapes::verify::detect(image, &shapes::VerifyOptions::default().segment).len())
    }
}

/// One term of a run's reward: a reward by name and its weight.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RewardTerm {
    /// `geneval` (the GenEval-style partial score: the fraction of clauses satisfied),
    /// `geneval_strict` (1 when every clause holds), `geneval_exact` (Flow-GRPO's training
    /// score: exact counts on every requirement), `jpeg_compressibility` or
    /// `jpeg_incompressibility` (DDPO's `∓ kB / 500`), or `http` (a scoring service, with
    /// its `http` table).
    pub name: String,
    /// Its weight in the sum. Default 1.
    #[serde(default = "one")]
    pub weight: f64,
    /// The scoring service of an `http` term: `{ url = "http://127.0.0.1:18085/score" }`
    /// plus optional `timeout_s`, `retries`, `backoff_s`, `batch_size`
    /// ([`drift_rewards::http::HttpRewardConfig`]); only for `http`. Default none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpRewardConfig>,
}

impl RewardTerm {
    /// The term `name` at `weight`, without a service.
    pub fn named(name: impl Into<String>, weight: f64) -> Self {
        Self { name: name.into(), weight, http: None }
    }
}

fn one() -> f64 {
    1.0
}

/// The rewards [`shapes_reward`] knows.
pub const SHAPES_REWARDS: &[&str] = &[
    "geneval",
    "geneval_strict",
    "geneval_exact",
    "unrequested_objects",
    "jpeg_compressibility",
    "jpeg_incompressibility",
    "http",
];

/// The scoring-service client of an `http` term, naming a missing or bad `http` table.
pub(crate) fn http_reward(term: &RewardTerm) -> Result<HttpReward> {
    let Some(cfg) = &term.http else {
        return Err(FlowModelError::Config {
            field: "rewards.http",
            value: "missing".into(),
            expected: "a table with the service's url, e.g. http = { url = \
                       \"http://127.0.0.1:18085/score\" }"
                .into(),
        });
    };
    HttpReward::new(cfg.clone()).map_err(|e| FlowModelError::Config {
        field: "rewards.http",
        value: e.to_string(),
        expected: "a valid scoring-service configuration".into(),
    })
}

fn named(term: &RewardTerm) -> Result<Arc<ImageReward<Prompt>>> {
    let name = term.name.as_str();
    if term.http.is_some() && name != "http" {
        return Err(FlowModelError::Config {
            field: "rewards.http",
            value: format!("given for `{name}`"),
            expected: "an http table only on a term named \"http\"".into(),
        });
    }
    Ok(match name {
        "http" => Arc::new(http_reward(term)?),
        "geneval" => Arc::new(ShapesReward { score: ShapesScore::Partial, ..Default::default() }),
        "geneval_strict" => {
            Arc::new(ShapesReward { score: ShapesScore::Strict, ..Default::default() })
        }
        "geneval_exact" => {
            Arc::new(ShapesReward { score: ShapesScore::Exact, ..Default::default() })
        }
        "unrequested_objects" => {
            Arc::new(ShapesReward { score: ShapesScore::Unrequested, ..Default::default() })
        }
        "jpeg_compressibility" => Arc::new(JpegCompressibility),
        "jpeg_incompressibility" => Arc::new(JpegIncompressibility),
        other => {
            return Err(FlowModelError::Config {
                field: "rewards.name",
                value: other.to_string(),
                expected: format!("one of {}", SHAPES_REWARDS.join(", ")),
            })
        }
    })
}

/// The reward of `terms`: the named reward itself for one term of weight 1, else their
/// weighted sum `Σ wᵢ rᵢ` (a failing term scores 0 and is recorded).
pub fn shapes_reward(terms: &[RewardTerm]) -> Result<Arc<ImageReward<Prompt>>> {
    weighted_reward(terms, named)
}

/// The reward of `terms` with each term built by `named`: the term itself for one term of
/// weight 1, else the weighted sum `Σ wᵢ rᵢ`.
pub(crate) fn weighted_reward<P: Send + Sync + 'static>(
    terms: &[RewardTerm],
    named: impl Fn(&RewardTerm) -> Result<Arc<ImageReward<P>>>,
) -> Result<Arc<ImageReward<P>>> {
    match terms {
        [] => Err(FlowModelError::Config {
            field: "rewards",
            value: "[]".into(),
            expected: "at least one reward term".into(),
        }),
        [t] if t.weight == 1.0 => named(t),
        _ => {
            let name = terms.iter().map(|t| format!("{}*{}", t.weight, t.name)).collect::<Vec<_>>();
            let mut sum = Weighted::<ImageSample<P>>::new(name.join("+"));
            for t in terms {
                sum = sum.with(t.weight, named(t)?).map_err(|e| FlowModelError::Config {
                    field: "rewards.weight",
                    value: e.to_string(),
                    expected: "a finite weight".into(),
                })?;
            }
            Ok(Arc::new(sum) as Arc<dyn Reward<ImageSample<P>>>)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_counts_every_detection_mentioned_or_not() {
        let task = ShapesTask::with_eval_images(1).unwrap();
        let opts = shapes::RenderOptions::default();
        for (text, n) in [("3 red circles", 3), ("a circle and a square", 2), ("4 squares", 4)] {
            let p = shapes::from_text(text).unwrap();
            let image = shapes::layout(&p, 7, &opts).render();
            assert_eq!(task.objects(&image), Some(n), "{text}");
        }
        let blank = Image::filled(32, 32, shapes::scene::BACKGROUND);
        assert_eq!(task.objects(&blank), Some(0));
    }

    #[test]
    fn category_weights_steer_the_training_draws_and_bad_weights_are_named() {
        let weights = |pairs: &[(&str, f64)]| {
            pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect::<BTreeMap<_, _>>()
        };
        let task = ShapesTask::with_eval_images(1).unwrap();
        let balanced = task.clone().with_category_weights(&BTreeMap::new()).unwrap();
        for i in 0..20 {
            assert_eq!(balanced.train_prompt(1, i), task.train_prompt(1, i));
        }
        let all_zero: Vec<_> = Category::ALL.iter().map(|c| (c.name(), 0.0)).collect();
        let mut only_position = all_zero.clone();
        only_position[4].1 = 1.0;
        let steered = task.clone().with_category_weights(&weights(&only_position)).unwrap();
        for i in 0..50 {
            assert_eq!(steered.train_prompt(1, i).category(), Category::Position);
        }
        let err = |pairs: &[(&str, f64)]| {
            task.clone().with_category_weights(&weights(pairs)).unwrap_err().to_string()
        };
        assert!(err(&[("positions", 1.0)]).contains("positions"), "{}", err(&[("positions", 1.0)]));
        assert!(err(&[("counting", -1.0)]).contains("counting = -1"));
        assert!(err(&[("counting", f64::NAN)]).contains("finite"));
        assert!(err(&all_zero).contains("positive weight"));
    }
}
