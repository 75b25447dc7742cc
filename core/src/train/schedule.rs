//! Learning-rate schedules.

use serde::{Deserialize, Serialize};

use crate::error::{CoreError, Result};

/// A learning-rate schedule: the factor applied to the base learning rate at optimizer step `s`
/// (0-based count of applied updates).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum LrSchedule {
    /// Factor 1 (Flow-GRPO, most GRPO recipes).
    #[default]
    Constant,
    /// Linear warm-up from 0 over `warmup` steps, then 1: `min(1, (s+1)/warmup)`.
    ConstantWithWarmup {
        /// Warm-up steps.
        warmup: u64,
    },
    /// Warm-up, then linear decay to 0 at `total`: `(total − s)/(total − warmup)`.
    Linear {
        /// Warm-up steps.
        warmup: u64,
        /// The step at which the factor reaches 0. Omitted (0): the run's length in optimizer
        /// steps, filled by the trainers that know it ([`LrSchedule::over_run`]).
        #[serde(default)]
        total: u64,
    },
    /// Warm-up, then cosine decay to `min_ratio` at `total`:
    /// `min_ratio + (1 − min_ratio)·½(1 + cos(π p))`, `p = (s − warmup)/(total − warmup)`
    /// (Loshchilov & Hutter, arXiv 1608.03983).
    Cosine {
        /// Warm-up steps.
        warmup: u64,
        /// The step at which the factor reaches `min_ratio`. Omitted (0): the run's length in
        /// optimizer steps, filled by the trainers that know it ([`LrSchedule::over_run`]).
        #[serde(default)]
        total: u64,
        /// The floor, as a fraction of the base rate.
        min_ratio: f64,
    },
}

impl LrSchedule {
    /// The multiplier of the base rate at step `s`.
    pub fn factor(&self, s: u64) -> f64 {
        let warm = |w: u64| if w == 0 { 1.0 } else { ((s + 1) as f64 / w as f64).min(1.0) };
        match *self {
            LrSchedule::Constant => 1.0,
            LrSchedule::ConstantWithWarmup { warmup } => warm(warmup),
            LrSchedule::Linear { warmup, total } => {
                if s < warmup {
                    warm(warmup)
                } else {
                    let span = total.saturating_sub(warmup).max(1) as f64;
                    (total.saturating_sub(s) as f64 / span).clamp(0.0, 1.0)
                }
            }
            LrSchedule::Cosine { warmup, total, min_ratio } => {
                if s < warmup {
                    warm(warmup)
                } else {
                    let span = total.saturating_sub(warmup).max(1) as f64;
                    let p = ((s - warmup) as f64 / span).min(1.0);
                    min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + (std::f64::consts::PI * p).cos())
                }
            }
        }
    }

    /// The schedule with an omitted `total` (0) set to `updates`, the run's length in optimizer
    /// steps, so a decay ends with the run whatever its length; an explicit `total` is kept. A
    /// run no longer than the warm-up gets `warmup + 1`: all its updates warm up.
    #[must_use]
    pub fn over_run(self, updates: u64) -> Self {
        match self {
            LrSchedule::Linear { warmup, total: 0 } => {
                LrSchedule::Linear { warmup, total: updates.max(warmup + 1) }
            }
            LrSchedule::Cosine { warmup, total: 0, min_ratio } => {
                LrSchedule::Cosine { warmup, total: updates.max(warmup + 1), min_ratio }
            }
            other => other,
        }
    }

    /// Checks the schedule's fields.
    pub fn validate(&self) -> Result<()> {
        match *self {
            LrSchedule::Linear { total: 0, .. } | LrSchedule::Cosine { total: 0, .. } => {
                Err(CoreError::Config {
                    field: "schedule.total",
                    value: "0 (omitted)".into(),
                    expected: "a step count greater than schedule.warmup (the trainers fill an \
                               omitted total with the run's number of updates)",
                })
            }
            LrSchedule::Linear { warmup, total } | LrSchedule::Cosine { warmup, total, .. }
                if total <= warmup =>
            {
                Err(CoreError::Config {
                    field: "schedule.total",
                    value: total.to_string(),
                    expected: "a step count greater than schedule.warmup",
                })
            }
            LrSchedule::Cosine { min_ratio, .. } if !(0.0..=1.0).contains(&min_ratio) => {
                Err(CoreError::Config {
                    field: "schedule.min_ratio",
                    value: min_ratio.to_string(),
                    expected: "a fraction in [0, 1]",
                })
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn factors_by_hand() {
        assert_eq!(LrSchedule::Constant.factor(1000), 1.0);
        let w = LrSchedule::ConstantWithWarmup { warmup: 4 };
        assert_eq!([w.factor(0), w.factor(1), w.factor(3), w.factor(9)], [0.25, 0.5, 1.0, 1.0]);
        let l = LrSchedule::Linear { warmup: 2, total: 10 };
        assert_eq!(
            [l.factor(0), l.factor(2), l.factor(6), l.factor(10), l.factor(20)],
            [0.5, 1.0, 0.5, 0.0, 0.0]
        );
        let c = LrSchedule::Cosine { warmup: 0, total: 10, min_ratio: 0.1 };
        assert!((c.factor(0) - 1.0).abs() < 1e-12);
        assert!((c.factor(5) - 0.55).abs() < 1e-12);
        assert!((c.factor(10) - 0.1).abs() < 1e-12);
        assert!((c.factor(50) - 0.1).abs() < 1e-12);
    }

    #[test]
    fn an_omitted_total_becomes_the_runs_length_and_an_explicit_one_stays() {
        let c: LrSchedule =
            serde_json::from_str(r#"{"kind":"cosine","warmup":2,"min_ratio":0.1}"#).unwrap();
        assert_eq!(c, LrSchedule::Cosine { warmup: 2, total: 0, min_ratio: 0.1 });
        assert!(c.validate().unwrap_err().to_string().contains("schedule.total"));
        let run = c.over_run(12);
        assert_eq!(run, LrSchedule::Cosine { warmup: 2, total: 12, min_ratio: 0.1 });
        assert!((run.factor(12) - 0.1).abs() < 1e-12 && (run.factor(7) - 0.55).abs() < 1e-12);
        let l = LrSchedule::Linear { warmup: 0, total: 0 }.over_run(8);
        assert_eq!(l.factor(4), 0.5);
        // A run shorter than the warm-up: valid, and every update warms up.
        let short = c.over_run(1);
        assert_eq!(short, LrSchedule::Cosine { warmup: 2, total: 3, min_ratio: 0.1 });
        assert!(short.validate().is_ok() && short.factor(0) == 0.5);
        let explicit = LrSchedule::Cosine { warmup: 2, total: 30, min_ratio: 0.1 };
        assert_eq!(explicit.over_run(12), explicit);
        assert_eq!(LrSchedule::Constant.over_run(12), LrSchedule::Constant);
    }

    #[test]
    fn bad_schedule_is_named() {
        let err = LrSchedule::Linear { warmup: 5, total: 5 }.validate().unwrap_err();
        assert!(err.to_string().contains("schedule.total"));
    }
}
