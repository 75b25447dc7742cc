//! Weighted combination of rewards (docs/algorithms.md §10: "several rewards combine as a weighted
//! sum").
//!
//! Rule: `score = Σ_i w_i · s_i`, where `s_i` is part `i`'s score, or the failure score when
//! part `i` failed. A failing part never fails the sum: it is recorded in the part's
//! [`Component::failure`] and the others still count.

use std::sync::Arc;

use crate::reward::{guarded, Component, Details, Evaluation, FailurePolicy, Reward};
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
        let mut details = Details::default();
        let mut score = 0.0;
        for (weight, part) in &self.parts {
            let out = guarded(part.as_ref(), sample, &self.policy);
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
        Ok(Evaluation { score, details })
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
}
