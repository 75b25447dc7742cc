//! The prompt space of the shapes world, its fixed train / held-out split, and
//! category-balanced prompt draws.
//!
//! The space ([`all_prompts`]) holds 450 prompts in GenEval's six categories (arXiv
//! 2310.11513):
//! - `single_object`: 3 ("a circle");
//! - `colors`: 12 ("a red circle");
//! - `counting`: 45 (counts 2–4 × 3 shapes × no colour or one of 4: "3 circles", "3 red
//!   circles");
//! - `two_object`: 6 (ordered pairs of different shapes: "a circle and a square");
//! - `color_attr`: 72 (ordered shape pairs × ordered pairs of different colours: "a red circle
//!   and a blue square");
//! - `position`: 312 (ordered shape pairs × 4 relations × no colours or two different colours:
//!   "a circle left of a square", "a red circle left of a blue square").
//!
//! The held-out split measures compositional generalisation, as GenEval's held-out
//! compositions do: within each category the seed holds out a fixed fraction of the prompts
//! (at least one, never all). Every word, shape, colour and count still occurs in training, so
//! a held-out prompt is new only as a combination.

use serde::{Deserialize, Serialize};

use super::error::{Result, ShapesError};
use super::grammar::{Category, Clause, Colour, Prompt, Relation, ShapeKind, Spec, MAX_COUNT};
use super::keyed_rng;

/// How to split the prompt space.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SplitConfig {
    /// Seed of the split; default 0 (the shipped split).
    pub seed: u64,
    /// Fraction of each category's prompts held out, rounded to the nearest whole prompt and
    /// kept within `1..=n−1`; default 0.25.
    pub held_out_fraction: f64,
}

impl Default for SplitConfig {
    fn default() -> Self {
        Self { seed: 0, held_out_fraction: 0.25 }
    }
}

/// A train / held-out partition of the prompt space.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PromptSplit {
    /// Prompts to train on, in [`all_prompts`] order.
    pub train: Vec<Prompt>,
    /// Prompts never trained on, in [`all_prompts`] order.
    pub held_out: Vec<Prompt>,
}

fn prompt(clauses: Vec<Clause>) -> Option<Prompt> {
    // Every clause list built below satisfies the grammar; `ok()` keeps this panic-free.
    Prompt::new(clauses).ok()
}

/// Ordered pairs of different shapes.
fn shape_pairs() -> Vec<(ShapeKind, ShapeKind)> {
    let mut out = Vec::new();
    for a in ShapeKind::ALL {
        out.extend(ShapeKind::ALL.into_iter().filter(|&b| b != a).map(|b| (a, b)));
    }
    out
}

/// Ordered pairs of different colours.
fn colour_pairs() -> Vec<(Colour, Colour)> {
    let mut out = Vec::new();
    for a in Colour::ALL {
        out.extend(Colour::ALL.into_iter().filter(|&b| b != a).map(|b| (a, b)));
    }
    out
}

/// The prompts of one category, in canonical order.
#[must_use]
pub fn category_prompts(category: Category) -> Vec<Prompt> {
    let one = |object| Clause::Count { count: 1, object };
    let mut out = Vec::new();
    match category {
        Category::SingleObject => {
            out.extend(ShapeKind::ALL.into_iter().filter_map(|s| prompt(vec![one(Spec::any(s))])));
        }
        Category::Colors => {
            for c in Colour::ALL {
                out.extend(
                    ShapeKind::ALL
                        .into_iter()
                        .filter_map(|s| prompt(vec![one(Spec::coloured(c, s))])),
                );
            }
        }
        Category::Counting => {
            let colours = std::iter::once(None).chain(Colour::ALL.into_iter().map(Some));
            for colour in colours {
                for shape in ShapeKind::ALL {
                    for count in 2..=MAX_COUNT {
                        out.extend(prompt(vec![Clause::Count {
                            count,
                            object: Spec { colour, shape },
                        }]));
                    }
                }
            }
        }
        Category::TwoObject => {
            for (a, b) in shape_pairs() {
                out.extend(prompt(vec![one(Spec::any(a)), one(Spec::any(b))]));
            }
        }
        Category::ColorAttr => {
            for (a, b) in shape_pairs() {
                for (ca, cb) in colour_pairs() {
                    out.extend(prompt(vec![
                        one(Spec::coloured(ca, a)),
                        one(Spec::coloured(cb, b)),
                    ]));
                }
            }
        }
        Category::Position => {
            let colours = std::iter::once((None, None))
                .chain(colour_pairs().into_iter().map(|(a, b)| (Some(a), Some(b))));
            for (ca, cb) in colours {
                for (a, b) in shape_pairs() {
                    for relation in Relation::ALL {
                        out.extend(prompt(vec![Clause::Relation {
                            subject: Spec { colour: ca, shape: a },
                            relation,
                            reference: Spec { colour: cb, shape: b },
                        }]));
                    }
                }
            }
        }
    }
    out
}

/// Every prompt of the world, category by category in [`Category::ALL`] order.
#[must_use]
pub fn all_prompts() -> Vec<Prompt> {
    Category::ALL.into_iter().flat_map(category_prompts).collect()
}

/// Splits the prompt space as `config` says (a pure function of the config).
pub fn split(config: &SplitConfig) -> Result<PromptSplit> {
    let f = config.held_out_fraction;
    if !(f > 0.0 && f < 1.0) {
        return Err(ShapesError::InvalidPrompt(format!(
            "split `held_out_fraction` = {f}, expected a fraction strictly between 0 and 1"
        )));
    }
    let mut train = Vec::new();
    let mut held_out = Vec::new();
    for (k, category) in Category::ALL.into_iter().enumerate() {
        let prompts = category_prompts(category);
        let n = prompts.len();
        let held = ((f * n as f64).round() as usize).clamp(1, n - 1);
        let mut order: Vec<usize> = (0..n).collect();
        keyed_rng(&[config.seed, 0x0073_706c_6974, k as u64]).shuffle(&mut order);
        let mut is_held = vec![false; n];
        for &i in &order[..held] {
            is_held[i] = true;
        }
        for (p, h) in prompts.into_iter().zip(is_held) {
            if h {
                held_out.push(p);
            } else {
                train.push(p);
            }
        }
    }
    Ok(PromptSplit { train, held_out })
}

/// `prompts` grouped by category, in [`Category::ALL`] order, categories without a prompt
/// left out.
#[must_use]
pub fn by_category(prompts: &[Prompt]) -> Vec<(Category, Vec<Prompt>)> {
    Category::ALL
        .into_iter()
        .map(|c| (c, prompts.iter().filter(|p| p.category() == c).cloned().collect::<Vec<_>>()))
        .filter(|(_, ps)| !ps.is_empty())
        .collect()
}

/// Draw `index` of a category-balanced stream over `groups` (from [`by_category`]): a
/// category uniformly, then a prompt uniformly within it, both keyed by `(seed, index)`, so
/// the six categories are trained on equally however many prompts each holds (GenEval scores
/// the mean over categories). `None` when `groups` is empty.
#[must_use]
pub fn balanced_prompt(
    groups: &[(Category, Vec<Prompt>)],
    seed: u64,
    index: u64,
) -> Option<Prompt> {
    if groups.is_empty() {
        return None;
    }
    let mut rng = keyed_rng(&[seed, 0x6261_6c61_6e63, index]);
    let (_, prompts) = &groups[rng.below(groups.len() as u64) as usize];
    Some(prompts[rng.below(prompts.len() as u64) as usize].clone())
}

/// Draw `index` of a category-weighted stream over `groups` (from [`by_category`]): category
/// `c` with probability `w_c / Σ w`, then a prompt uniformly within it, both keyed by
/// `(seed, index)`. `weights[i]` weighs `groups[i]`; equal weights give exactly the stream of
/// [`balanced_prompt`]. `None` when `groups` is empty, when the lengths differ, or when no
/// weight is positive and finite (callers validate weights before drawing).
#[must_use]
pub fn weighted_prompt(
    groups: &[(Category, Vec<Prompt>)],
    weights: &[f64],
    seed: u64,
    index: u64,
) -> Option<Prompt> {
    if weights.len() != groups.len() || weights.iter().any(|w| !w.is_finite() || *w < 0.0) {
        return None;
    }
    let total: f64 = weights.iter().sum();
    if !(total > 0.0 && total.is_finite()) {
        return None;
    }
    if weights.windows(2).all(|w| w[0] == w[1]) {
        return balanced_prompt(groups, seed, index);
    }
    let mut rng = keyed_rng(&[seed, 0x6261_6c61_6e63, index]);
    let u = rng.uniform() * total;
    // The first category whose cumulative weight passes u; the last positive one takes any
    // rounding remainder.
    let mut cumulative = 0.0;
    let mut pick = weights.iter().rposition(|w| *w > 0.0)?;
    for (i, w) in weights.iter().enumerate() {
        cumulative += w;
        if *w > 0.0 && u < cumulative {
            pick = i;
            break;
        }
    }
    let (_, prompts) = &groups[pick];
    Some(prompts[rng.below(prompts.len() as u64) as usize].clone())
}

/// The evaluation list of `prompts`: each category's prompts repeated in order until the
/// category has at least `per_category` images (every prompt equally often), so every
/// category is scored on about the same number of images and every prompt at least once.
#[must_use]
pub fn eval_list(prompts: &[Prompt], per_category: usize) -> Vec<Prompt> {
    let mut out = Vec::new();
    for (_, ps) in by_category(prompts) {
        let rounds = per_category.div_ceil(ps.len()).max(1);
        for _ in 0..rounds {
            out.extend(ps.iter().cloned());
        }
    }
    out
}

/// `n` prompts drawn uniformly with replacement from `prompts` by `seed` (a training batch's
/// prompts); empty when `prompts` is.
#[must_use]
pub fn sample_prompts(prompts: &[Prompt], n: usize, seed: u64) -> Vec<Prompt> {
    if prompts.is_empty() {
        return Vec::new();
    }
    let mut rng = keyed_rng(&[seed, 0x7361_6d70_6c65]);
    (0..n).map(|_| prompts[rng.below(prompts.len() as u64) as usize].clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::worlds::shapes::vocab::{tokenize, MAX_TOKENS, PAD_ID};
    use std::collections::HashSet;

    #[test]
    fn the_space_has_the_documented_size_and_no_duplicates() {
        let sizes: Vec<usize> = Category::ALL.iter().map(|&c| category_prompts(c).len()).collect();
        assert_eq!(sizes, vec![3, 6, 45, 12, 312, 72]);
        let all = all_prompts();
        assert_eq!(all.len(), 450);
        let texts: HashSet<String> = all.iter().map(Prompt::to_text).collect();
        assert_eq!(texts.len(), all.len());
        for c in Category::ALL {
            assert!(category_prompts(c).iter().all(|p| p.category() == c), "{c}");
        }
        for p in &all {
            let ids = tokenize(p);
            assert_eq!(ids.len(), MAX_TOKENS);
            let words = p.to_text().split_whitespace().count();
            assert!(words <= MAX_TOKENS, "{p}");
            assert!(ids[..words].iter().all(|&i| i != PAD_ID), "{p}");
            assert!(ids[words..].iter().all(|&i| i == PAD_ID), "{p}");
        }
    }

    #[test]
    fn every_prompt_round_trips_through_text_and_tokens() {
        for p in all_prompts() {
            let text = p.to_text();
            assert_eq!(crate::worlds::shapes::parse::from_text(&text).unwrap(), p, "{text}");
            let back = crate::worlds::shapes::vocab::detokenize(&tokenize(&p)).unwrap();
            assert_eq!(back, text);
        }
    }

    #[test]
    fn split_is_a_deterministic_per_category_partition_keyed_by_seed() {
        let a = split(&SplitConfig::default()).unwrap();
        assert_eq!(a, split(&SplitConfig::default()).unwrap());
        assert_eq!(a.train.len() + a.held_out.len(), all_prompts().len());
        let train: HashSet<&Prompt> = a.train.iter().collect();
        assert!(a.held_out.iter().all(|p| !train.contains(p)));
        let held: Vec<usize> = by_category(&a.held_out).iter().map(|(_, p)| p.len()).collect();
        // round(0.25 n) per category, at least 1: 3→1, 6→2 (1.5 rounds up), 45→11, 12→3,
        // 312→78, 72→18.
        assert_eq!(held, vec![1, 2, 11, 3, 78, 18]);
        assert_eq!(by_category(&a.train).len(), 6);
        let b = split(&SplitConfig { seed: 1, ..SplitConfig::default() }).unwrap();
        assert_ne!(a.held_out, b.held_out);
        for bad in [0.0, 1.0, f64::NAN] {
            let err = split(&SplitConfig { held_out_fraction: bad, ..SplitConfig::default() });
            assert!(err.unwrap_err().to_string().contains("held_out_fraction"));
        }
    }

    #[test]
    fn training_still_sees_every_word() {
        let s = split(&SplitConfig::default()).unwrap();
        let texts: Vec<String> = s.train.iter().map(Prompt::to_text).collect();
        let words: HashSet<&str> = texts.iter().flat_map(|t| t.split_whitespace()).collect();
        for w in &crate::worlds::shapes::vocab::VOCABULARY[1..] {
            assert!(words.contains(w), "`{w}` never occurs in training");
        }
    }

    #[test]
    fn balanced_draws_cover_categories_equally_and_eval_lists_fill_each_category() {
        let s = split(&SplitConfig::default()).unwrap();
        let groups = by_category(&s.train);
        let mut counts = [0usize; 6];
        for i in 0..6000 {
            let p = balanced_prompt(&groups, 3, i).unwrap();
            assert!(s.train.contains(&p));
            counts[Category::ALL.iter().position(|&c| c == p.category()).unwrap()] += 1;
        }
        assert!(counts.iter().all(|&n| (850..=1150).contains(&n)), "{counts:?}");
        assert_eq!(balanced_prompt(&groups, 3, 7), balanced_prompt(&groups, 3, 7));
        assert!(balanced_prompt(&[], 3, 7).is_none());
        let list = eval_list(&s.held_out, 48);
        let sizes: Vec<usize> = by_category(&list).iter().map(|(_, p)| p.len()).collect();
        // 1×48, 2×24, 11×5, 3×16, 78×1, 18×3.
        assert_eq!(sizes, vec![48, 48, 55, 48, 78, 54]);
        assert!(s.held_out.iter().all(|p| list.contains(p)));
    }

    #[test]
    fn weighted_draws_follow_the_weights_and_equal_weights_are_the_balanced_stream() {
        let groups = by_category(&all_prompts());
        let n = groups.len();
        for i in 0..50 {
            assert_eq!(
                weighted_prompt(&groups, &vec![2.0; n], 3, i),
                balanced_prompt(&groups, 3, i)
            );
        }
        // Weights 0, 1, 0, 0, 3, 0 over the six categories: only two categories are drawn,
        // in the ratio 1 : 3.
        let mut weights = vec![0.0; n];
        weights[1] = 1.0;
        weights[4] = 3.0;
        let draws = 4000;
        let mut counts = vec![0usize; n];
        for i in 0..draws {
            let p = weighted_prompt(&groups, &weights, 5, i).unwrap();
            counts[groups.iter().position(|(c, _)| *c == p.category()).unwrap()] += 1;
        }
        assert_eq!(counts.iter().sum::<usize>(), draws as usize);
        assert_eq!(counts[0] + counts[2] + counts[3] + counts[5], 0, "{counts:?}");
        let share = counts[4] as f64 / draws as f64;
        assert!((share - 0.75).abs() < 0.03, "{counts:?}");
        assert!(weighted_prompt(&groups, &vec![0.0; n], 5, 0).is_none());
        assert!(weighted_prompt(&groups, &[1.0], 5, 0).is_none());
        assert!(weighted_prompt(&groups, &vec![-1.0; n], 5, 0).is_none());
    }

    #[test]
    fn sampling_is_seeded_and_total() {
        let all = all_prompts();
        assert_eq!(sample_prompts(&all, 5, 1), sample_prompts(&all, 5, 1));
        assert_ne!(sample_prompts(&all, 5, 1), sample_prompts(&all, 5, 2));
        assert!(sample_prompts(&[], 5, 1).is_empty());
    }
}
