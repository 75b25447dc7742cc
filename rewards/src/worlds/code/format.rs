//! The format gate of the code reward (DiffuCoder, docs/algorithms.md §10).
//!
//! Rule: 1.0 when the completion has exactly one fenced Python block, at its end, and the
//! block compiles (`compile(src, "solution.py", "exec")` in the sandboxed interpreter, by
//! [`super::harness`]);
//! 0.5 when such a block exists but does not compile; 0.0 otherwise ([`super::extract`]).

use std::sync::Arc;

use super::extract::python_block;
use super::harness::{run_harness, Compiles};
use crate::reward::{Details, Evaluation, Reward, TextSample};
use crate::sandbox::Sandbox;
use crate::RewardError;

/// Score of a well-formed block that compiles.
pub const EXACT: f64 = 1.0;
/// Score of a well-formed block with a syntax error.
pub const SYNTAX_ERROR: f64 = 0.5;

/// The format verdict of one completion.
#[derive(Debug, Clone, PartialEq)]
pub struct FormatVerdict {
    /// 1.0, 0.5 or 0.0 by the module rule.
    pub score: f64,
    /// The extracted code when the structure is right.
    pub code: Option<String>,
    /// Why the score is below 1.0.
    pub reason: Option<String>,
}

/// Applies the module rule to `completion`, compiling the block in `sandbox`.
pub fn check_format(sandbox: &Sandbox, completion: &str) -> Result<FormatVerdict, RewardError> {
    let code = match python_block(completion) {
        Ok(code) => code.to_string(),
        Err(why) => {
            return Ok(FormatVerdict { score: 0.0, code: None, reason: Some(why.to_string()) })
        }
    };
    let (score, reason) = verdict(&run_harness(sandbox, &code, &[], true)?.compiles);
    Ok(FormatVerdict { score, code: Some(code), reason })
}

/// The format score of a block the harness checked, and why it is below 1.0.
pub fn verdict(compiles: &Compiles) -> (f64, Option<String>) {
    match compiles {
        Compiles::Yes => (EXACT, None),
        Compiles::SyntaxError => (SYNTAX_ERROR, Some("syntax error".to_string())),
        Compiles::Unknown(ended) => {
            (SYNTAX_ERROR, Some(format!("syntax check did not finish cleanly: {ended}")))
        }
    }
}

/// The format gate as a reward over any text sample.
#[derive(Debug, Clone)]
pub struct FormatReward {
    sandbox: Arc<Sandbox>,
}

impl FormatReward {
    /// A format reward compiling in `sandbox`.
    pub fn new(sandbox: Arc<Sandbox>) -> Self {
        Self { sandbox }
    }
}

impl<T> Reward<TextSample<T>> for FormatReward {
    fn name(&self) -> &str {
        "code_format"
    }

    fn evaluate(&self, sample: &TextSample<T>) -> Result<Evaluation, RewardError> {
        let v = check_format(&self.sandbox, &sample.completion)?;
        Ok(Evaluation { score: v.score, details: Details { gate: v.reason, ..Details::default() } })
    }
}
