//! Wall-clock budgets and the tail mean of a loss, for runs under a job time limit.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::error::{CoreError, Result};

/// A wall-clock budget for one invocation of a run (`max_seconds` in every run config).
///
/// A trainer asks [`TimeBudget::exhausted`] after each completed step; once it is, the run
/// checkpoints that step, saves its model (and evaluates, for the RL trainers) and returns,
/// as if `steps` had been reached. So a run under a Slurm or lent-machine time limit ends with
/// a usable model instead of being killed between checkpoints. The clock starts when the
/// budget is made: a resumed invocation has a full budget of its own.
#[derive(Debug, Clone, Copy)]
pub struct TimeBudget {
    start: Instant,
    limit: Option<Duration>,
}

impl TimeBudget {
    /// A budget of `max_seconds` from now; `None` never runs out. `field` names the config key
    /// in the error for a value that is not a positive, finite number of seconds.
    pub fn new(max_seconds: Option<f64>, field: &'static str) -> Result<Self> {
        let limit = match max_seconds {
            None => None,
            Some(s) if s.is_finite() && s > 0.0 => Some(Duration::from_secs_f64(s)),
            Some(s) => {
                return Err(CoreError::Config {
                    field,
                    value: s.to_string(),
                    expected: "a positive, finite number of seconds (omit it for no limit)",
                })
            }
        };
        Ok(Self { start: Instant::now(), limit })
    }

    /// Whether the budget has run out.
    pub fn exhausted(&self) -> bool {
        self.limit.is_some_and(|l| self.start.elapsed() >= l)
    }

    /// Seconds since the budget was made.
    pub fn elapsed_seconds(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    /// Whether a run that has completed `done` of its `total` steps must stop now: the budget
    /// is spent and steps remain.
    pub fn stops_run(&self, done: u64, total: u64) -> bool {
        done < total && self.exhausted()
    }

    /// The line a run prints when it stops early, e.g. `max_seconds reached (600 s) after
    /// iteration 12 of 40; stopping`.
    pub fn stop_line(&self, unit: &str, done: u64, total: u64) -> String {
        format!(
            "max_seconds reached ({} s) after {unit} {done} of {total}; stopping",
            self.elapsed_seconds().round()
        )
    }
}

/// The mean of the last `len` values pushed: a run's final loss over the last 10% of the
/// steps it ran, whether it reached `steps` or stopped early.
#[derive(Debug, Clone)]
pub struct TailMean {
    len: usize,
    values: VecDeque<f64>,
}

impl TailMean {
    /// The tail over the last tenth of `steps` (at least one value).
    pub fn last_tenth_of(steps: u64) -> Self {
        let len = usize::try_from(steps.div_ceil(10)).unwrap_or(usize::MAX).max(1);
        Self { len, values: VecDeque::with_capacity(len.min(1 << 16)) }
    }

    /// Adds a value, dropping the oldest beyond the window.
    pub fn push(&mut self, value: f64) {
        if self.values.len() == self.len {
            self.values.pop_front();
        }
        self.values.push_back(value);
    }

    /// The mean of the window, NaN when nothing was pushed.
    pub fn mean(&self) -> f64 {
        if self.values.is_empty() {
            f64::NAN
        } else {
            self.values.iter().sum::<f64>() / self.values.len() as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_limit_never_runs_out_and_a_tiny_one_does() -> Result<()> {
        assert!(!TimeBudget::new(None, "max_seconds")?.exhausted());
        let b = TimeBudget::new(Some(1e-6), "max_seconds")?;
        std::thread::sleep(Duration::from_millis(2));
        assert!(b.exhausted());
        assert!(b.stops_run(1, 3) && !b.stops_run(3, 3));
        assert!(b.stop_line("step", 1, 3).contains("after step 1 of 3"));
        let long = TimeBudget::new(Some(3600.0), "max_seconds")?;
        assert!(!long.exhausted() && !long.stops_run(1, 3));
        Ok(())
    }

    #[test]
    fn non_positive_or_non_finite_limits_name_the_field() {
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let err = TimeBudget::new(Some(bad), "max_seconds").unwrap_err().to_string();
            assert!(err.contains("`max_seconds`") && err.contains("positive"), "{err}");
        }
    }

    #[test]
    fn tail_mean_keeps_the_last_tenth() {
        let mut t = TailMean::last_tenth_of(30); // window of 3
        assert!(t.mean().is_nan());
        for v in [10.0, 20.0, 1.0, 2.0, 3.0] {
            t.push(v);
        }
        assert_eq!(t.mean(), 2.0);
        let mut one = TailMean::last_tenth_of(0);
        one.push(4.0);
        one.push(5.0);
        assert_eq!(one.mean(), 5.0);
    }
}
