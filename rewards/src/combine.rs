//! Weighted combination of rewards (docs/algorithms.md §10: "several rewards combine as a weighted
//! sum").
//!
//! Rule: `score = Σ_i w_i · s_i`, where `s_i` is part `i`'s score, or the failure score when
//! part `i` failed. A failing part never fails the sum: it is recorded in the part's
//! [`Component::failure`] and the others still count.

use std::sync::Arc;
use std::time::Instant;

use crate::reward::{guarded, Component, Details, Evaluation, FailurePolicy, Outcome, Reward};
use crate::RewardError;

/// A weighted sum of rewards over the same sample type.
pub struct Weighted<S> {
    name: String,
    parts: Vec<(f64, Arc<dyn Reward<S>>)>,
    policy: FailurePolicy,
}

impl<S> Weighted<S> {
    /// An empty sum named `name`; add parts with [`Weighted::with`].
    pub fn new(name: impl Into<String>) -> Self {
        Self { name: name.into(), parts: Vec::new(), policy: FailurePolicy::default() }
    }

    /// Adds `reward` with weight `weight`; errors on a non-finite weight.
    pub fn with(mut self, weight: f64, reward: Arc<dyn Reward<S>>) -> Result<Self, RewardError> {
        if !weight.is_finite() {
            return Err(RewardError::Config {
                field: "weight",
                value: format!("{weight} for `{}`", reward.name()),
                expected: "a finite number".into(),
            });
        }
        self.parts.push((weight, reward));
        Ok(self)
    }

    /// Sets the score a failing part contributes (before weighting). Default 0.0.
    pub fn with_failure_score(mut self, score: f64) -> Self {
        self.policy.failure_score = score;
        self
    }
}

impl<S> Reward<S> for Weighted<S> {
    fn name(&self) -> &str {
        &self.name
    }

    fn evaluate(&self, sample: &S) -> Result<Evaluation, RewardError> {
        let parts = self.parts.iter().map(|(_, p)| guarded(p.as_ref(), sample, &self.policy));
        Ok(self.combine(parts))
    }

    /// Each part scores the whole batch through its own `evaluate_batch` (so a part that
    /// batches natively, such as [`crate::http::HttpReward`], sends one request, not one per
    /// sample); then each sample's parts combine as in [`Reward::evaluate`]. The sum itself
    /// never fails: a failing part is recorded in its component.
    fn evaluate_batch(&self, samples: &[S]) -> Vec<Outcome> {
        let start = Instant::now();
        let mut per_part: Vec<std::vec::IntoIter<Outcome>> =
            self.parts.iter().map(|(_, p)| p.evaluate_batch(samples).into_iter()).collect();
        let elapsed = start.elapsed();
        (0..samples.len())
            .map(|_| {
                let parts = per_part.iter_mut().map(|outs| {
                    let mut out = outs.next().expect("one outcome per sample");
                    if out.failure.is_some() {
                        out.score = self.policy.failure_score;
                    }
                    out
                });
                let ev = self.combine(parts);
                Outcome { score: ev.score, details: ev.details, failure: None, elapsed }
            })
            .collect()
    }
}

impl<S> Weighted<S> {
    /// `Σ wᵢ · outᵢ.score` over the parts' outcomes, in part order, with each part recorded
    /// as a component (its failure included) and its tests, notes and first gate kept.
    fn combine(&self, outcomes: impl Iterator<Item = Outcome>) -> Evaluation {
        let mut details = Details::default();
        let mut score = 0.0;
        for ((weight, part), out) in self.parts.iter().zip(outcomes) {
            score += weight * out.score;
            details.tests.extend(out.details.tests);
            details.notes.extend(out.details.notes);
            if details.gate.is_none() {
                details.gate = out.details.gate;
            }
            details.components.push(Component {
                name: part.name().to_string(),
                weight: *weight,
                score: out.score,
                failure: out.failure,
            });
        }
        Evaluation { score, details }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Const(&'static str, f64);
    impl Reward<()> for Const {
        fn name(&self) -> &str {
            self.0
        }
        fn evaluate(&self, _: &()) -> Result<Evaluation, RewardError> {
            if self.1 < 0.0 {
                return Err(RewardError::Invalid { what: "x".into(), expected: "y".into() });
            }
            Ok(Evaluation::score(self.1))
        }
    }

    #[test]
    fn weighted_sum_with_a_failing_part() {
        let sum = Weighted::new("sum")
            .with(0.5, Arc::new(Const("a", 1.0)))
            .unwrap()
            .with(2.0, Arc::new(Const("b", 0.25)))
            .unwrap()
            .with(3.0, Arc::new(Const("bad", -1.0)))
            .unwrap()
            .with_failure_score(0.1);
        let ev = sum.evaluate(&()).unwrap();
        assert!((ev.score - (0.5 + 0.5 + 0.3)).abs() < 1e-12, "{}", ev.score);
        let names: Vec<&str> = ev.details.components.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, vec!["a", "b", "bad"]);
        assert!(ev.details.components[2].failure.is_some());
        assert!(Weighted::<()>::new("x").with(f64::NAN, Arc::new(Const("a", 1.0))).is_err());
    }

    /// A part that scores `x / 10` and counts how often its batch entry point is called.
    struct Batching(std::sync::atomic::AtomicUsize);
    impl Reward<u32> for Batching {
        fn name(&self) -> &str {
            "batching"
        }
        fn evaluate(&self, x: &u32) -> Result<Evaluation, RewardError> {
            if *x == 3 {
                return Err(RewardError::Invalid { what: "3".into(), expected: "not 3".into() });
            }
            Ok(Evaluation::score(f64::from(*x) / 10.0))
        }
        fn evaluate_batch(&self, xs: &[u32]) -> Vec<crate::reward::Outcome> {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let policy = FailurePolicy::default();
            xs.iter().map(|x| guarded(self, x, &policy)).collect()
        }
    }
    struct Double;
    impl Reward<u32> for Double {
        fn name(&self) -> &str {
            "double"
        }
        fn evaluate(&self, x: &u32) -> Result<Evaluation, RewardError> {
            Ok(Evaluation::score(2.0 * f64::from(*x)))
        }
    }

    #[test]
    fn a_batch_sends_each_part_the_whole_batch_and_equals_the_per_sample_sums() {
        let part = Arc::new(Batching(std::sync::atomic::AtomicUsize::new(0)));
        let sum = Weighted::new("sum")
            .with(2.0, part.clone())
            .unwrap()
            .with(0.5, Arc::new(Double))
            .unwrap()
            .with_failure_score(-1.0);
        let xs = [1u32, 2, 3, 4];
        let batch = sum.evaluate_batch(&xs);
        assert_eq!(part.0.load(std::sync::atomic::Ordering::SeqCst), 1);
        for (x, out) in xs.iter().zip(&batch) {
            let one = sum.evaluate(x).unwrap();
            assert_eq!(out.score, one.score, "{x}");
            assert_eq!(out.details.components, one.details.components, "{x}");
            assert!(out.is_ok());
        }
        // 3 fails in the batching part: −1 (the failure score) × 2 + 0.5 × 6.
        assert_eq!(batch[2].score, -2.0 + 3.0);
        assert!(batch[2].details.components[0].failure.is_some());
        assert_eq!(batch[0].score, 2.0 * 0.1 + 0.5 * 2.0);
    }
}
