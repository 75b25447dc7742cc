//! The prompt space of the shapes world and its fixed train / held-out split.
//!
//! The space ([`all_prompts`]) holds 1,434 prompts: 48 single counts (4 counts × 12 objects),
//! 858 two-clause counts (66 object pairs × the 13 count pairs with at most 6 objects) and
//! 528 relations (132 ordered object pairs × 4 relations).
//!
//! The held-out split measures compositional generalisation, as GenEval's held-out
//! compositions do: the seed picks `held_out_counts` objects, each with one count, and
//! `held_out_pairs` unordered object pairs. A prompt is held out when one of its count clauses
//! is a held-out (count, object) or its two objects form a held-out pair. Every word, every
//! object and every count still occurs in training, so a held-out prompt is new only as a
//! combination.

use serde::{Deserialize, Serialize};

use super::error::{Result, ShapesError};
use super::grammar::{Clause, Object, Prompt, Relation, MAX_COUNT, MAX_OBJECTS};
use super::rng::SplitMix64;

/// How to split the prompt space.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SplitConfig {
    /// Seed of the split; default 0 (the shipped split).
    pub seed: u64,
    /// Objects (of 12) that get one held-out count each; default 6.
    pub held_out_counts: usize,
    /// Unordered object pairs (of 66) held out; default 8.
    pub held_out_pairs: usize,
}

impl Default for SplitConfig {
    fn default() -> Self {
        Self { seed: 0, held_out_counts: 6, held_out_pairs: 8 }
    }
}

/// A train / held-out partition of the prompt space and the combinations that define it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PromptSplit {
    /// Prompts to train on, in [`all_prompts`] order.
    pub train: Vec<Prompt>,
    /// Prompts never trained on, in [`all_prompts`] order.
    pub held_out: Vec<Prompt>,
    /// The held-out (count, object) combinations.
    pub held_out_counts: Vec<(u8, Object)>,
    /// The held-out unordered object pairs, each as (earlier, later) in [`Object::all`].
    pub held_out_pairs: Vec<(Object, Object)>,
}

fn unordered_pairs() -> Vec<(Object, Object)> {
    let objects = Object::all();
    let mut out = Vec::new();
    for (i, &a) in objects.iter().enumerate() {
        out.extend(objects[i + 1..].iter().map(|&b| (a, b)));
    }
    out
}

fn prompt(clauses: Vec<Clause>) -> Option<Prompt> {
    // Every clause list built below satisfies the grammar; `ok()` keeps this panic-free.
    Prompt::new(clauses).ok()
}

/// Every prompt of the grammar with its clauses in canonical order (single counts, then
/// two-clause counts with the earlier object of [`Object::all`] first, then relations).
#[must_use]
pub fn all_prompts() -> Vec<Prompt> {
    let counts = 1..=MAX_COUNT;
    let mut out = Vec::new();
    for object in Object::all() {
        out.extend(
            counts.clone().filter_map(|count| prompt(vec![Clause::Count { count, object }])),
        );
    }
    for (a, b) in unordered_pairs() {
        for n in counts.clone() {
            for m in counts.clone().filter(|m| n + m <= MAX_OBJECTS) {
                let clauses = vec![
                    Clause::Count { count: n, object: a },
                    Clause::Count { count: m, object: b },
                ];
                out.extend(prompt(clauses));
            }
        }
    }
    for subject in Object::all() {
        for reference in Object::all().into_iter().filter(|&r| r != subject) {
            for relation in Relation::ALL {
                out.extend(prompt(vec![Clause::Relation { subject, relation, reference }]));
            }
        }
    }
    out
}

/// Splits the prompt space as `config` says (a pure function of the config).
pub fn split(config: &SplitConfig) -> Result<PromptSplit> {
    let objects = Object::all();
    let mut pairs = unordered_pairs();
    let too_many = |name: &str, got: usize, max: usize| {
        ShapesError::InvalidPrompt(format!("split `{name}` = {got}, expected at most {max}"))
    };
    if config.held_out_counts > objects.len() {
        return Err(too_many("held_out_counts", config.held_out_counts, objects.len()));
    }
    if config.held_out_pairs > pairs.len() {
        return Err(too_many("held_out_pairs", config.held_out_pairs, pairs.len()));
    }
    let mut rng = SplitMix64::keyed(&[config.seed, 0x0073_706c_6974]);
    let mut chosen = objects;
    rng.shuffle(&mut chosen);
    let mut held_out_counts: Vec<(u8, Object)> = chosen[..config.held_out_counts]
        .iter()
        .map(|&o| (rng.range_inclusive(1, i64::from(MAX_COUNT)) as u8, o))
        .collect();
    held_out_counts.sort();
    rng.shuffle(&mut pairs);
    let mut held_out_pairs = pairs[..config.held_out_pairs].to_vec();
    held_out_pairs.sort();
    let is_held_out = |p: &Prompt| {
        let objs: Vec<Object> = p
            .clauses()
            .iter()
            .flat_map(|c| match *c {
                Clause::Count { object, .. } => vec![object],
                Clause::Relation { subject, reference, .. } => vec![subject, reference],
            })
            .collect();
        let count_hit = p.clauses().iter().any(|c| {
            matches!(*c, Clause::Count { count, object } if held_out_counts.contains(&(count, object)))
        });
        let pair_hit = match objs[..] {
            [a, b] => held_out_pairs.contains(&(a.min(b), a.max(b))),
            _ => false,
        };
        count_hit || pair_hit
    };
    let (held_out, train) = all_prompts().into_iter().partition(is_held_out);
    Ok(PromptSplit { train, held_out, held_out_counts, held_out_pairs })
}

/// `n` prompts drawn uniformly with replacement from `prompts` by `seed` (a training batch's
/// prompts); empty when `prompts` is.
#[must_use]
pub fn sample_prompts(prompts: &[Prompt], n: usize, seed: u64) -> Vec<Prompt> {
    if prompts.is_empty() {
        return Vec::new();
    }
    let mut rng = SplitMix64::keyed(&[seed, 0x7361_6d70_6c65]);
    (0..n).map(|_| prompts[rng.below(prompts.len() as u64) as usize].clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shapes::vocab::{tokenize, MAX_TOKENS, PAD_ID};
    use std::collections::HashSet;

    #[test]
    fn the_space_has_the_documented_size_and_no_duplicates() {
        let all = all_prompts();
        assert_eq!(all.len(), 48 + 66 * 13 + 132 * 4);
        let texts: HashSet<String> = all.iter().map(Prompt::to_text).collect();
        assert_eq!(texts.len(), all.len());
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
            assert_eq!(crate::shapes::parse::from_text(&text).unwrap(), p, "{text}");
            let back = crate::shapes::vocab::detokenize(&tokenize(&p)).unwrap();
            assert_eq!(back, text);
        }
    }

    #[test]
    fn split_is_a_deterministic_partition_keyed_by_seed() {
        let a = split(&SplitConfig::default()).unwrap();
        assert_eq!(a, split(&SplitConfig::default()).unwrap());
        assert_eq!(a.train.len() + a.held_out.len(), all_prompts().len());
        let train: HashSet<&Prompt> = a.train.iter().collect();
        assert!(a.held_out.iter().all(|p| !train.contains(p)));
        assert_eq!(a.held_out_counts.len(), 6);
        assert_eq!(a.held_out_pairs.len(), 8);
        let b = split(&SplitConfig { seed: 1, ..SplitConfig::default() }).unwrap();
        assert_ne!(a.held_out, b.held_out);
        assert!(split(&SplitConfig { held_out_pairs: 67, ..SplitConfig::default() }).is_err());
    }

    #[test]
    fn training_still_sees_every_word_and_object() {
        let s = split(&SplitConfig::default()).unwrap();
        let texts: Vec<String> = s.train.iter().map(Prompt::to_text).collect();
        let words: HashSet<&str> = texts.iter().flat_map(|t| t.split_whitespace()).collect();
        for w in &crate::shapes::vocab::VOCABULARY[1..] {
            assert!(words.contains(w), "`{w}` never occurs in training");
        }
        for (count, object) in &s.held_out_counts {
            let seen = s.train.iter().any(|p| p.clauses().iter().any(|c| matches!(*c, Clause::Count { count: n, object: o } if o == *object && n != *count)));
            assert!(seen, "{object:?} never trained with another count");
        }
        let single: Prompt = s
            .held_out
            .iter()
            .find(|p| p.clauses().len() == 1 && matches!(p.clauses()[0], Clause::Count { .. }))
            .cloned()
            .unwrap();
        assert!(!s.train.contains(&single));
    }

    #[test]
    fn sampling_is_seeded_and_total() {
        let all = all_prompts();
        assert_eq!(sample_prompts(&all, 5, 1), sample_prompts(&all, 5, 1));
        assert_ne!(sample_prompts(&all, 5, 1), sample_prompts(&all, 5, 2));
        assert!(sample_prompts(&[], 5, 1).is_empty());
    }
}
