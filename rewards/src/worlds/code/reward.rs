//! The combined code reward: `format_weight · format + execution_weight · execution`, with
//! execution run only when the format score is exactly 1.0 (DiffuCoder, docs/algorithms.md §10:
//! weights 0.5 and 2.0, so the range is [0, 2.5]).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::execute::{pass_fraction, CodeTask};
use super::extract::python_block;
use super::format::verdict;
use super::harness::run_harness;
use crate::reward::{Component, Details, Evaluation, Reward, TextSample};
use crate::sandbox::{Sandbox, SandboxConfig};
use crate::RewardError;

/// Configuration of [`CodeReward`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CodeRewardConfig {
    /// Weight of the format gate. Default 0.5 (DiffuCoder).
    pub format_weight: f64,
    /// Weight of the pass fraction. Default 2.0 (DiffuCoder).
    pub execution_weight: f64,
    /// The sandbox.
    pub sandbox: SandboxConfig,
}

impl Default for CodeRewardConfig {
    fn default() -> Self {
        Self { format_weight: 0.5, execution_weight: 2.0, sandbox: SandboxConfig::default() }
    }
}

/// The combined code reward by the module rule.
#[derive(Debug, Clone)]
pub struct CodeReward {
    format_weight: f64,
    execution_weight: f64,
    sandbox: Arc<Sandbox>,
}

impl CodeReward {
    /// Builds the sandbox (probing bwrap) and the reward; errors on non-finite weights.
    pub fn new(cfg: &CodeRewardConfig) -> Result<Self, RewardError> {
        let sandbox = Arc::new(Sandbox::new(&cfg.sandbox)?);
        Self::with_sandbox(cfg, sandbox)
    }

    /// The reward over an existing sandbox (its `cfg.sandbox` is ignored).
    pub fn with_sandbox(
        cfg: &CodeRewardConfig,
        sandbox: Arc<Sandbox>,
    ) -> Result<Self, RewardError> {
        for (field, w) in
            [("format_weight", cfg.format_weight), ("execution_weight", cfg.execution_weight)]
        {
            if !w.is_finite() {
                return Err(RewardError::Config {
                    field,
                    value: w.to_string(),
                    expected: "a finite number".into(),
                });
            }
        }
        Ok(Self {
            format_weight: cfg.format_weight,
            execution_weight: cfg.execution_weight,
            sandbox,
        })
    }

    /// The sandbox the reward runs in (for its [`Sandbox::mode`]).
    pub fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }
}

impl<T: CodeTask> Reward<TextSample<T>> for CodeReward {
    fn name(&self) -> &str {
        "code"
    }

    fn evaluate(&self, sample: &TextSample<T>) -> Result<Evaluation, RewardError> {
        // One sandboxed run checks the format and, when it compiles, runs every test.
        let (format_score, gate, tests) = match python_block(&sample.completion) {
            Err(why) => (0.0, Some(why.to_string()), Vec::new()),
            Ok(code) => {
                let run = run_harness(&self.sandbox, code, sample.task.tests(), true)?;
                let (score, reason) = verdict(&run.compiles);
                (score, reason, run.tests)
            }
        };
        let execution = pass_fraction(&tests);
        let component = |name: &str, weight, score| Component {
            name: name.into(),
            weight,
            score,
            failure: None,
        };
        let details = Details {
            gate,
            tests,
            components: vec![
                component("code_format", self.format_weight, format_score),
                component("code_execution", self.execution_weight, execution),
            ],
            notes: vec![("sandbox".into(), self.sandbox.mode().to_string())],
        };
        let score = self.format_weight * format_score + self.execution_weight * execution;
        Ok(Evaluation { score, details })
    }
}
