//! The math final-answer verifier.
//!
//! Rule: the prediction is the content of the last `\boxed{…}` (braces balanced) in the
//! completion, else its last number. Both it and the reference are normalised (spaces,
//! thousands commas, `$`, `\!`, `\left`/`\right` and a trailing `.` removed; `\frac{a}{b}` and
//! `\dfrac{a}{b}` become `a/b`; a trailing `%` is dropped). When both parse as numbers
//! (integers, decimals, fractions `a/b`, a leading `-`), they match when
//! `|p − r| ≤ 1e-6 · max(1, |r|)`; otherwise when the normalised strings are equal.
//! Score 1.0 on a match, else 0.0.

use serde::{Deserialize, Serialize};

use crate::reward::{Evaluation, Reward, TextSample};
use crate::RewardError;

/// Relative tolerance of the numeric comparison.
pub const TOLERANCE: f64 = 1e-6;

/// A math problem with a reference final answer.
pub trait MathTask: Send + Sync {
    /// The reference answer (`"3/4"`, `"1,024"`, `"\\frac{1}{2}"`, `"x+1"`).
    fn answer(&self) -> &str;
}

/// A plain math problem.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MathProblem {
    /// The question text.
    pub question: String,
    /// The reference answer.
    pub answer: String,
}

impl MathTask for MathProblem {
    fn answer(&self) -> &str {
        &self.answer
    }
}

/// The content of the last `\boxed{…}`, with nested braces.
pub fn last_boxed(text: &str) -> Option<&str> {
    let start = text.rfind("\\boxed{")? + "\\boxed{".len();
    let mut depth = 1usize;
    for (i, c) in text[start..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(&text[start..start + i]);
                }
            }
            _ => {}
        }
    }
    None
}

/// The last number in `text`: digits with optional `,` groups, `.` decimals, `/` fraction
/// and a leading `-`.
pub fn last_number(text: &str) -> Option<&str> {
    let bytes = text.as_bytes();
    let mut end = None;
    for i in (0..bytes.len()).rev() {
        if bytes[i].is_ascii_digit() {
            end = Some(i + 1);
            break;
        }
    }
    let end = end?;
    let mut start = end;
    while start > 0 {
        let c = bytes[start - 1];
        let inner =
            matches!(c, b',' | b'.' | b'/') && start >= 2 && bytes[start - 2].is_ascii_digit();
        if c.is_ascii_digit() || inner {
            start -= 1;
        } else {
            break;
        }
    }
    if start > 0 && bytes[start - 1] == b'-' {
        start -= 1;
    }
    Some(&text[start..end])
}

/// The normalised form of an answer string (module rule).
pub fn normalize(answer: &str) -> String {
    let mut s: String = answer.chars().filter(|c| !c.is_whitespace()).collect();
    for junk in ["$", "\\!", "\\left", "\\right", "\\,"] {
        s = s.replace(junk, "");
    }
    for frac in ["\\dfrac", "\\tfrac", "\\frac"] {
        while let Some(pos) = s.find(&format!("{frac}{{")) {
            let Some(rewritten) = rewrite_frac(&s[pos + frac.len()..]) else { break };
            s = format!("{}{}", &s[..pos], rewritten);
        }
    }
    let s = s.trim_end_matches('.').trim_end_matches('%').to_string();
    if s.chars().all(|c| c.is_ascii_digit() || matches!(c, ',' | '.' | '-' | '/')) {
        s.replace(',', "")
    } else {
        s
    }
}

/// `{a}{b}rest` → `a/brest`.
fn rewrite_frac(s: &str) -> Option<String> {
    let (a, rest) = braced(s)?;
    let (b, rest) = braced(rest)?;
    Some(format!("{a}/{b}{rest}"))
}

/// Splits `{inner}rest` into `(inner, rest)`.
fn braced(s: &str) -> Option<(&str, &str)> {
    let s = s.strip_prefix('{')?;
    let mut depth = 1usize;
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some((&s[..i], &s[i + 1..]));
                }
            }
            _ => {}
        }
    }
    None
}

/// The value of a normalised numeric answer (`-3`, `2.5`, `3/4`).
pub fn numeric(s: &str) -> Option<f64> {
    match s.split_once('/') {
        Some((a, b)) => {
            let (a, b): (f64, f64) = (a.parse().ok()?, b.parse().ok()?);
            (b != 0.0).then(|| a / b)
        }
        None => s.parse::<f64>().ok().filter(|v| v.is_finite()),
    }
}

/// True when `prediction` matches `reference` by the module rule.
pub fn answers_match(prediction: &str, reference: &str) -> bool {
    let (p, r) = (normalize(prediction), normalize(reference));
    match (numeric(&p), numeric(&r)) {
        (Some(p), Some(r)) => (p - r).abs() <= TOLERANCE * r.abs().max(1.0),
        _ => !p.is_empty() && p == r,
    }
}

/// The prediction extracted from `completion` by the module rule.
pub fn extract(completion: &str) -> Option<&str> {
    last_boxed(completion).or_else(|| last_number(completion))
}

/// The math reward by the module rule.
#[derive(Debug, Clone, Copy, Default)]
pub struct MathReward;

impl<T: MathTask> Reward<TextSample<T>> for MathReward {
    fn name(&self) -> &str {
        "math"
    }

    fn evaluate(&self, s: &TextSample<T>) -> Result<Evaluation, RewardError> {
        let Some(pred) = extract(&s.completion) else {
            return Ok(Evaluation::gated(0.0, "no \\boxed{} answer and no number"));
        };
        let ok = answers_match(pred, s.task.answer());
        let mut ev = if ok {
            Evaluation::score(1.0)
        } else {
            Evaluation::gated(0.0, format!("answer `{pred}` ≠ reference `{}`", s.task.answer()))
        };
        ev.details.notes.push(("answer".into(), pred.to_string()));
        Ok(ev)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extraction() {
        assert_eq!(last_boxed("so \\boxed{1} or \\boxed{\\frac{3}{4}}."), Some("\\frac{3}{4}"));
        assert_eq!(last_number("we get 1,024 apples, then -3/4 pies."), Some("-3/4"));
        assert_eq!(last_number("total 1,024."), Some("1,024"));
        assert_eq!(last_number("no digits"), None);
        assert_eq!(extract("x = 5 so \\boxed{7}"), Some("7"));
    }

    #[test]
    fn matching() {
        assert!(answers_match("1,024", "1024"));
        assert!(answers_match("\\frac{3}{4}", "0.75"));
        assert!(answers_match("$3/4$", "\\dfrac{3}{4}"));
        assert!(answers_match("0.3333333", "1/3"));
        assert!(!answers_match("0.33", "1/3"));
        assert!(answers_match("50%", "50"));
        assert!(answers_match("x + 1", "x+1"));
        assert!(!answers_match("", ""));
        assert!(!answers_match("2", "3"));
    }

    #[test]
    fn reward_over_text_samples() {
        let task = MathProblem { question: "3/4 of 8?".into(), answer: "6".into() };
        let out = MathReward.evaluate_batch(&[
            TextSample::new(task.clone(), "3/4 of 8 is \\boxed{6}"),
            TextSample::new(task.clone(), "it is 5"),
            TextSample::new(task, "no idea"),
        ]);
        assert_eq!(out.iter().map(|o| o.score).collect::<Vec<_>>(), vec![1.0, 0.0, 0.0]);
        assert_eq!(out[1].details.notes, vec![("answer".to_string(), "5".to_string())]);
        assert!(out[2].details.gate.is_some());
    }
}
