//! The execution reward (DiffuCoder, docs/algorithms.md §10).
//!
//! Rule: each test case `t_j` of the task runs as its own program `code + "\n\n" + t_j` in its
//! own process (a child forked by one sandboxed `python3` per completion, [`super::harness`])
//! with the wall limit (default 5 s); the score is the fraction of programs that exit with
//! status 0. The code is the completion's single final fenced Python
//! block; a completion without one ([`super::extract`]) scores 0 without running anything.

use std::sync::Arc;

use super::extract::python_block;
use super::harness::run_harness;
use crate::reward::{Details, Evaluation, Reward, TestResult, TextSample};
use crate::sandbox::Sandbox;
use crate::RewardError;

/// A task whose answers are checked by running test cases: each test is Python source
/// (typically `assert f(...) == ...`) appended to the candidate code.
pub trait CodeTask: Send + Sync {
    /// The test cases, one program suffix each.
    fn tests(&self) -> &[String];
}

impl CodeTask for Vec<String> {
    fn tests(&self) -> &[String] {
        self
    }
}

/// Runs every test of `tests` against `code` (module rule), all in one sandboxed interpreter
/// that forks a child per test ([`super::harness`]).
pub fn run_tests(
    sandbox: &Sandbox,
    code: &str,
    tests: &[String],
) -> Result<Vec<TestResult>, RewardError> {
    Ok(run_harness(sandbox, code, tests, false)?.tests)
}

/// The fraction of `results` that passed (0 for no tests).
pub fn pass_fraction(results: &[TestResult]) -> f64 {
    if results.is_empty() {
        return 0.0;
    }
    results.iter().filter(|r| r.passed).count() as f64 / results.len() as f64
}

/// The execution reward by the module rule.
#[derive(Debug, Clone)]
pub struct ExecutionReward {
    sandbox: Arc<Sandbox>,
}

impl ExecutionReward {
    /// An execution reward running in `sandbox`.
    pub fn new(sandbox: Arc<Sandbox>) -> Self {
        Self { sandbox }
    }
}

impl<T: CodeTask> Reward<TextSample<T>> for ExecutionReward {
    fn name(&self) -> &str {
        "code_execution"
    }

    fn evaluate(&self, sample: &TextSample<T>) -> Result<Evaluation, RewardError> {
        let code = match python_block(&sample.completion) {
            Ok(code) => code,
            Err(why) => return Ok(Evaluation::gated(0.0, why.to_string())),
        };
        let tests = run_tests(&self.sandbox, code, sample.task.tests())?;
        let details = Details {
            notes: vec![("sandbox".into(), self.sandbox.mode().to_string())],
            ..Details::default()
        };
        Ok(Evaluation { score: pass_fraction(&tests), details: Details { tests, ..details } })
    }
}
