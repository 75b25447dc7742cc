//! The Countdown verifier (TinyZero / docs/algorithms.md §10).
//!
//! Rule: the candidate equation is the content of the last `<answer>…</answer>` if present,
//! else the last run of equation characters (digits, `+ - * / ( ) =`, spaces) in the text
//! that parses as an expression with at least two numbers ([`crate::verifiers::expr`]); when it has `=`,
//! the side with the most numbers is the expression. Score 1.0 when that expression uses
//! exactly the given numbers, each once (as a multiset), and evaluates exactly (rational
//! arithmetic) to the target; 0.1 when an answer tag or a parsable equation is present but
//! wrong; 0.0 otherwise.

use serde::{Deserialize, Serialize};

use crate::reward::{Details, Evaluation, Reward, TextSample};
use crate::verifiers::expr::{parse, Parsed};
use crate::verifiers::tags::last_answer;
use crate::RewardError;

/// Score of a correct equation.
pub const CORRECT: f64 = 1.0;
/// Score of a well-formed but wrong answer.
pub const FORMAT_ONLY: f64 = 0.1;

/// A Countdown problem: reach `target` from `numbers`.
pub trait CountdownTask: Send + Sync {
    /// The numbers, each to be used exactly once.
    fn numbers(&self) -> &[u64];
    /// The target value.
    fn target(&self) -> u64;
}

/// A plain Countdown problem.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Countdown {
    /// The numbers.
    pub numbers: Vec<u64>,
    /// The target.
    pub target: u64,
}

impl CountdownTask for Countdown {
    fn numbers(&self) -> &[u64] {
        &self.numbers
    }
    fn target(&self) -> u64 {
        self.target
    }
}

/// Picks the side of `line` around `=` with the most numbers and parses it.
fn parse_equation(line: &str) -> Result<Parsed, String> {
    let mut best: Option<Parsed> = None;
    let mut first_err = None;
    for side in line.split('=') {
        match parse(side) {
            Ok(p) if best.as_ref().is_none_or(|b| p.numbers.len() > b.numbers.len()) => {
                best = Some(p)
            }
            Ok(_) => {}
            Err(e) => first_err = first_err.or(Some(e)),
        }
    }
    best.ok_or_else(|| first_err.unwrap_or_else(|| "empty".into()))
}

/// The verdict of one completion: the score by the module rule and the reason it is not 1.
pub fn verify(numbers: &[u64], target: u64, completion: &str) -> (f64, Option<String>) {
    let tagged = last_answer(completion);
    let parsed = match tagged {
        Some(body) => parse_equation(body.trim()),
        None => completion
            .split(|c: char| !(c.is_ascii_digit() || "+-*/()= ".contains(c)))
            .rev()
            .filter(|run| !run.trim().is_empty())
            .find_map(|run| parse_equation(run.trim()).ok().filter(|p| p.numbers.len() >= 2))
            .ok_or_else(|| "no <answer> tag and no parsable equation".to_string()),
    };
    let p = match parsed {
        Ok(p) => p,
        Err(e) if tagged.is_some() => {
            return (FORMAT_ONLY, Some(format!("answer does not parse: {e}")))
        }
        Err(e) => return (0.0, Some(e)),
    };
    let (mut used, mut given) = (p.numbers.clone(), numbers.to_vec());
    used.sort_unstable();
    given.sort_unstable();
    if used != given {
        return (
            FORMAT_ONLY,
            Some(format!("uses {:?}, expected each of {:?} exactly once", p.numbers, numbers)),
        );
    }
    match p.value {
        Some(v) if v.as_integer() == Some(target as i128) => (CORRECT, None),
        Some(v) => (FORMAT_ONLY, Some(format!("evaluates to {v}, expected {target}"))),
        None => (FORMAT_ONLY, Some("division by zero".into())),
    }
}

/// The Countdown reward by the module rule.
#[derive(Debug, Clone, Copy, Default)]
pub struct CountdownReward;

impl<T: CountdownTask> Reward<TextSample<T>> for CountdownReward {
    fn name(&self) -> &str {
        "countdown"
    }

    fn evaluate(&self, s: &TextSample<T>) -> Result<Evaluation, RewardError> {
        let (score, gate) = verify(s.task.numbers(), s.task.target(), &s.completion);
        Ok(Evaluation { score, details: Details { gate, ..Details::default() } })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores() {
        let n = [3, 5, 2];
        assert_eq!(verify(&n, 16, "<answer>(3 + 5) * 2</answer>").0, 1.0);
        assert_eq!(verify(&n, 16, "so (5+3)*2 = 16").0, 1.0);
        assert_eq!(verify(&n, 16, "<answer>16 = 2*(5+3)</answer>").0, 1.0);
        assert_eq!(verify(&n, 16, "<answer>(3 + 5) * 3</answer>").0, 0.1);
        assert_eq!(verify(&n, 16, "<answer>(3 + 5) * 2 * 1</answer>").0, 0.1);
        assert_eq!(verify(&n, 16, "<answer>8 * 2</answer>").0, 0.1);
        assert_eq!(verify(&n, 16, "<answer>I give up</answer>").0, 0.1);
        assert_eq!(verify(&n, 16, "I give up").0, 0.0);
        assert_eq!(verify(&n, 16, "maybe 3 + 5 + 2.").0, 0.1);
        assert_eq!(verify(&[6, 4, 2], 3, "<answer>6 / 4 * 2</answer>").0, 1.0);
        assert_eq!(verify(&[6, 3, 3], 6, "<answer>6 / (3 - 3)</answer>").0, 0.1);
    }
}
