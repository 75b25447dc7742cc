//! The `Reward` trait and the types every reward returns.
//!
//! A reward is generic over its sample type `S`, so one trait scores text completions (code,
//! math, Countdown, Sudoku: [`TextSample`]) and images (the shapes world: [`ImageSample`], or
//! any type of the image module's own). A reward implements [`Reward::evaluate`] for one
//! sample; batches are scored by [`Reward::evaluate_batch`] (serial, overridable by a reward
//! that batches natively, e.g. on a GPU) or in parallel by [`crate::pool::Pool`]. Either way
//! an error or a panic inside a reward becomes a recorded [`Failure`] with the configured
//! failure score (0 by default), never an abort; the pool also turns a time-out into one.
//!
//! ```
//! use drift_rewards::reward::{Evaluation, Reward, TextSample};
//! use drift_rewards::RewardError;
//!
//! /// 1.0 when the completion is non-empty.
//! struct NonEmpty;
//! impl Reward<TextSample<()>> for NonEmpty {
//!     fn name(&self) -> &str { "non_empty" }
//!     fn evaluate(&self, s: &TextSample<()>) -> Result<Evaluation, RewardError> {
//!         Ok(Evaluation::score(if s.completion.is_empty() { 0.0 } else { 1.0 }))
//!     }
//! }
//! let out = NonEmpty.evaluate_batch(&[TextSample::new((), "x"), TextSample::new((), "")]);
//! assert_eq!(out.iter().map(|o| o.score).collect::<Vec<_>>(), vec![1.0, 0.0]);
//! ```

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::RewardError;

/// A scorer of samples of type `S`.
///
/// Implementations must be `Send + Sync`: the pool calls [`Reward::evaluate`] from several
/// threads at once. `evaluate` returns `Err` for anything that prevents scoring (a sandbox
/// that cannot start, a malformed task); a *wrong answer* is an `Ok` with a low score and the
/// reason in [`Details::gate`].
pub trait Reward<S>: Send + Sync {
    /// A short stable name, used for metrics (`reward/<name>`) and in combined details.
    fn name(&self) -> &str;

    /// Scores one sample.
    fn evaluate(&self, sample: &S) -> Result<Evaluation, RewardError>;

    /// Scores a batch in order, one [`Outcome`] per sample, turning errors and panics into
    /// failures with score [`FailurePolicy::default`] (0). Serial; the default calls
    /// [`guarded`] on each sample. Use [`crate::pool::Pool`] for parallel, timed evaluation.
    fn evaluate_batch(&self, samples: &[S]) -> Vec<Outcome> {
        let policy = FailurePolicy::default();
        samples.iter().map(|s| guarded(self, s, &policy)).collect()
    }
}

/// What a reward computed for one sample.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evaluation {
    /// The score; its range is the reward's own (documented on each reward).
    pub score: f64,
    /// Why the sample got that score.
    pub details: Details,
}

impl Evaluation {
    /// An evaluation with the given score and empty details.
    pub fn score(score: f64) -> Self {
        Self { score, details: Details::default() }
    }

    /// An evaluation with the given score and the gate reason `reason` (see [`Details::gate`]).
    pub fn gated(score: f64, reason: impl Into<String>) -> Self {
        Self { score, details: Details { gate: Some(reason.into()), ..Details::default() } }
    }
}

/// Per-sample diagnostics. Every field is optional so each reward fills what it knows.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Details {
    /// Why a format gate or verifier did not give full credit (`"no fenced python block"`,
    /// `"uses 7 which is not among the given numbers"`); `None` when it did.
    pub gate: Option<String>,
    /// One entry per test case run (code execution), in the order of the task's tests.
    pub tests: Vec<TestResult>,
    /// Sub-scores of a combined reward ([`crate::combine::Weighted`], the code reward).
    pub components: Vec<Component>,
    /// Free-form `(key, value)` notes (`("sandbox", "bwrap")`, `("answer", "42")`).
    pub notes: Vec<(String, String)>,
}

/// The result of running one test case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestResult {
    /// True when the test exited with status 0 within its time limit.
    pub passed: bool,
    /// How it ended: `"exit 0"`, `"exit 1"`, `"timeout"`, `"killed by signal 9"`,
    /// `"output over 65536 bytes"`.
    pub status: String,
    /// The last bytes of its stderr (at most a few hundred), for debugging a failing test.
    pub stderr_tail: String,
    /// Wall time of the run.
    pub elapsed: Duration,
}

/// One part of a combined reward: `score` is the part's own score before weighting.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Component {
    /// The part's [`Reward::name`].
    pub name: String,
    /// Its weight in the sum.
    pub weight: f64,
    /// Its unweighted score.
    pub score: f64,
    /// Its failure, if it failed (then `score` is the failure score).
    pub failure: Option<Failure>,
}

/// The outcome of scoring one sample: the score used for training, the details, the failure
/// if there was one, and how long it took.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// The score: the evaluation's, or [`FailurePolicy::failure_score`] on failure.
    pub score: f64,
    /// The evaluation's details (empty on failure).
    pub details: Details,
    /// Set when the reward errored, panicked or timed out.
    pub failure: Option<Failure>,
    /// Wall time of the evaluation (up to the time-out on a time-out).
    pub elapsed: Duration,
}

impl Outcome {
    /// True when the reward ran to completion.
    pub fn is_ok(&self) -> bool {
        self.failure.is_none()
    }
}

/// Why a reward did not produce a score.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Failure {
    /// Which kind of failure.
    pub kind: FailureKind,
    /// The error's or panic's message, or the time limit that was exceeded.
    pub message: String,
}

/// The kinds of [`Failure`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// `evaluate` returned `Err`.
    Error,
    /// `evaluate` panicked.
    Panic,
    /// `evaluate` did not return within the pool's time limit.
    Timeout,
}

/// What a failed evaluation scores.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FailurePolicy {
    /// Score given to a sample whose reward failed. Default 0.0 (a failure is never rewarded).
    pub failure_score: f64,
}

impl Default for FailurePolicy {
    fn default() -> Self {
        Self { failure_score: 0.0 }
    }
}

impl FailurePolicy {
    /// The outcome recorded for a failure of `kind` with `message` after `elapsed`.
    pub fn fail(&self, kind: FailureKind, message: String, elapsed: Duration) -> Outcome {
        Outcome {
            score: self.failure_score,
            details: Details::default(),
            failure: Some(Failure { kind, message }),
            elapsed,
        }
    }
}

/// Runs `reward.evaluate(sample)`, catching errors and panics into a failed [`Outcome`]
/// scored by `policy`, and timing it. A non-finite score is also recorded as an error: it
/// would poison every advantage in its group.
pub fn guarded<S, R: Reward<S> + ?Sized>(
    reward: &R,
    sample: &S,
    policy: &FailurePolicy,
) -> Outcome {
    let start = Instant::now();
    let result = catch_unwind(AssertUnwindSafe(|| reward.evaluate(sample)));
    let elapsed = start.elapsed();
    match result {
        Ok(Ok(ev)) if ev.score.is_finite() => {
            Outcome { score: ev.score, details: ev.details, failure: None, elapsed }
        }
        Ok(Ok(ev)) => policy.fail(
            FailureKind::Error,
            format!("reward `{}` returned a non-finite score {}", reward.name(), ev.score),
            elapsed,
        ),
        Ok(Err(e)) => policy.fail(FailureKind::Error, e.to_string(), elapsed),
        Err(payload) => policy.fail(FailureKind::Panic, panic_message(payload.as_ref()), elapsed),
    }
}

/// The text of a panic payload (`&str` or `String`), or a placeholder for other payloads.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        format!("panicked: {s}")
    } else if let Some(s) = payload.downcast_ref::<String>() {
        format!("panicked: {s}")
    } else {
        "panicked with a non-string payload".to_string()
    }
}

/// A text completion together with the task it answers (a code item with its tests, a
/// Countdown item, a Sudoku puzzle, a math problem with its answer, or `()`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TextSample<T> {
    /// The task, as the verifier needs it.
    pub task: T,
    /// The model's completion (the generated text only, not the prompt).
    pub completion: String,
}

impl<T> TextSample<T> {
    /// A sample of `task` answered by `completion`.
    pub fn new(task: T, completion: impl Into<String>) -> Self {
        Self { task, completion: completion.into() }
    }
}

/// An RGB image (row-major, 3 bytes per pixel, `rgb.len() == 3 * width * height`) together
/// with the prompt it was generated for; `P` is the prompt's structured form (e.g. the shapes
/// world's parsed clauses) or `String`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImageSample<P> {
    /// The prompt the image was generated for.
    pub prompt: P,
    /// Width in pixels.
    pub width: usize,
    /// Height in pixels.
    pub height: usize,
    /// Pixels, row-major, `[r, g, b]` per pixel.
    pub rgb: Vec<u8>,
}

impl<P> ImageSample<P> {
    /// An image sample; errors when `rgb.len() != 3 * width * height`.
    pub fn new(prompt: P, width: usize, height: usize, rgb: Vec<u8>) -> Result<Self, RewardError> {
        if rgb.len() != 3 * width * height {
            return Err(RewardError::Invalid {
                what: format!("image of {width}×{height} with {} bytes", rgb.len()),
                expected: format!("{} bytes (3 per pixel)", 3 * width * height),
            });
        }
        Ok(Self { prompt, width, height, rgb })
    }

    /// The `[r, g, b]` of pixel `(x, y)`, or `None` outside the image.
    pub fn pixel(&self, x: usize, y: usize) -> Option<[u8; 3]> {
        if x >= self.width || y >= self.height {
            return None;
        }
        let i = 3 * (y * self.width + x);
        Some([self.rgb[i], self.rgb[i + 1], self.rgb[i + 2]])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed(Result<f64, &'static str>);
    impl Reward<u8> for Fixed {
        fn name(&self) -> &str {
            "fixed"
        }
        fn evaluate(&self, s: &u8) -> Result<Evaluation, RewardError> {
            if *s == 0 {
                panic!("boom");
            }
            match self.0 {
                Ok(v) => Ok(Evaluation::score(v)),
                Err(m) => Err(RewardError::Invalid { what: m.into(), expected: "x".into() }),
            }
        }
    }

    #[test]
    fn errors_and_panics_become_failures() {
        let out = Fixed(Err("bad")).evaluate_batch(&[1]);
        assert_eq!(out[0].failure.as_ref().map(|f| f.kind), Some(FailureKind::Error));
        let out = Fixed(Ok(0.7)).evaluate_batch(&[0, 1]);
        assert_eq!(out[0].failure.as_ref().map(|f| f.kind), Some(FailureKind::Panic));
        assert!(out[0].failure.as_ref().unwrap().message.contains("boom"));
        assert_eq!(out[0].score, 0.0);
        assert_eq!(out[1].score, 0.7);
        assert!(out[1].is_ok());
    }

    #[test]
    fn failure_score_is_configurable_and_nan_is_a_failure() {
        let policy = FailurePolicy { failure_score: -1.0 };
        let out = guarded(&Fixed(Ok(f64::NAN)), &1, &policy);
        assert_eq!(out.score, -1.0);
        assert!(out.failure.unwrap().message.contains("non-finite"));
    }

    #[test]
    fn image_sample_checks_its_size() {
        assert!(ImageSample::new((), 2, 2, vec![0; 11]).is_err());
        let img = ImageSample::new((), 2, 1, vec![1, 2, 3, 4, 5, 6]).unwrap();
        assert_eq!(img.pixel(1, 0), Some([4, 5, 6]));
        assert_eq!(img.pixel(2, 0), None);
    }
}
