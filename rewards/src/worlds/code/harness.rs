//! One sandboxed interpreter per completion: the format check and every test of the code
//! reward in a single run of [`HARNESS`], each test in a forked child of it.
//!
//! Rule (the same verdicts as one fresh `python3` per program, at a sixth of the starts): the
//! harness compiles the code (`compile(code, "solution.py", "exec")`, the format check), then
//! for each test `t_j` forks a child that runs `code + "\n\n" + t_j + "\n"` as `python3
//! main.py` would (a fresh `__main__` module; exit 0 unless an exception escapes, 1 with its
//! traceback on stderr, or `SystemExit`'s code). Each child has its own process group, killed
//! whole at the per-test wall limit [`Sandbox::timeout`], and the sandbox's per-process limits
//! (CPU time counts from zero in each child); stdout and stderr go to files of its own, and a
//! child writing more than [`Sandbox::output_cap`] bytes fails as `output over the cap`.
//! Every test is read before the first runs, and children never hold the report channel.
//! The whole run is bounded by `(tests + 1) ·` the per-test limit; tests the harness did not
//! report (it was killed, or ran out of time) fail with the harness's own ending.
//!
//! Why: a run's cost is mostly the interpreter's start and the jail's set-up (about 9 ms each
//! here), and a completion has one format check and five tests, so the reward of a training
//! batch spent most of its time starting interpreters.

use std::time::Duration;

use crate::reward::TestResult;
use crate::sandbox::{RunStatus, Sandbox};
use crate::RewardError;

/// The harness's Python source.
pub const HARNESS: &str = include_str!("harness.py");

/// Bytes of stderr kept in each [`TestResult`].
pub const STDERR_TAIL: usize = 300;

/// Whether the code compiled, by the harness's report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Compiles {
    /// `compile` accepted it.
    Yes,
    /// `compile` raised `SyntaxError` or `ValueError`.
    SyntaxError,
    /// The harness ended before reporting; how it ended ([`RunStatus`]'s text).
    Unknown(String),
}

/// What one harness run found.
#[derive(Debug, Clone)]
pub struct HarnessRun {
    /// The format check's verdict.
    pub compiles: Compiles,
    /// One result per test, in order; empty when `gate` was set and the code did not compile.
    pub tests: Vec<TestResult>,
}

/// Runs the format check and `tests` against `code` in one sandboxed interpreter. With
/// `gate`, code that does not compile runs no tests.
pub fn run_harness(
    sandbox: &Sandbox,
    code: &str,
    tests: &[String],
    gate: bool,
) -> Result<HarnessRun, RewardError> {
    let per_test = sandbox.timeout();
    let plan = format!(
        "{} {} {} {} {}\n",
        tests.len(),
        per_test.as_secs_f64(),
        STDERR_TAIL,
        sandbox.output_cap(),
        u8::from(gate)
    );
    let names: Vec<String> = (0..tests.len()).map(|j| format!("t{j}.py")).collect();
    let mut files: Vec<(&str, &str)> =
        vec![("harness.py", HARNESS), ("plan.txt", &plan), ("solution.py", code)];
    files.extend(names.iter().map(String::as_str).zip(tests.iter().map(String::as_str)));
    let within = per_test.saturating_mul(tests.len() as u32 + 1);
    let out = sandbox.run_python_within(&files, "harness.py", within)?;
    Ok(parse_report(&out.stdout, &out.stderr, out.status, tests.len(), gate))
}

/// Reads the harness's report lines (module docs of `harness.py`); what is missing is filled
/// from how the harness itself ended.
fn parse_report(
    stdout: &[u8],
    stderr: &[u8],
    ended: RunStatus,
    n_tests: usize,
    gate: bool,
) -> HarnessRun {
    let text = String::from_utf8_lossy(stdout);
    let mut compiles = None;
    let mut tests: Vec<Option<TestResult>> = vec![None; n_tests];
    for line in text.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        match fields.as_slice() {
            ["F", "ok"] => compiles = Some(Compiles::Yes),
            ["F", "syntax"] => compiles = Some(Compiles::SyntaxError),
            ["T", j, kind, value, secs, hex] => {
                let (Ok(j), Ok(value), Ok(secs)) =
                    (j.parse::<usize>(), value.parse::<i32>(), secs.parse::<f64>())
                else {
                    continue;
                };
                let status = match *kind {
                    "exit" => RunStatus::Exit(value),
                    "signal" => RunStatus::Signal(value),
                    "timeout" => RunStatus::Timeout,
                    "output" => RunStatus::OutputLimit,
                    _ => {
                        if let Some(slot) = tests.get_mut(j) {
                            *slot = Some(not_run("the harness could not fork it", stderr));
                        }
                        continue;
                    }
                };
                if let Some(slot) = tests.get_mut(j) {
                    *slot = Some(TestResult {
                        passed: status == RunStatus::Exit(0),
                        status: status.to_string(),
                        stderr_tail: String::from_utf8_lossy(&from_hex(hex)).into_owned(),
                        elapsed: Duration::from_secs_f64(secs.max(0.0)),
                    });
                }
            }
            _ => {}
        }
    }
    let compiles = compiles.unwrap_or_else(|| Compiles::Unknown(ended.to_string()));
    if gate && compiles != Compiles::Yes {
        return HarnessRun { compiles, tests: Vec::new() };
    }
    let why = format!("not run: the harness ended with {ended}");
    let tests = tests.into_iter().map(|t| t.unwrap_or_else(|| not_run(&why, stderr))).collect();
    HarnessRun { compiles, tests }
}

fn not_run(why: &str, stderr: &[u8]) -> TestResult {
    let from = stderr.len().saturating_sub(STDERR_TAIL);
    TestResult {
        passed: false,
        status: why.to_string(),
        stderr_tail: String::from_utf8_lossy(&stderr[from..]).into_owned(),
        elapsed: Duration::ZERO,
    }
}

/// Bytes of a lowercase hex string (pairs that do not parse are skipped).
fn from_hex(hex: &str) -> Vec<u8> {
    hex.as_bytes()
        .chunks(2)
        .filter_map(|p| std::str::from_utf8(p).ok().and_then(|s| u8::from_str_radix(s, 16).ok()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_becomes_results_and_missing_tests_fail_with_the_harness_ending() {
        let report =
            b"F ok\nT 0 exit 0 0.010000 \nT 2 exit 1 0.020000 417373657274696f6e4572726f72\n";
        let run = parse_report(report, b"", RunStatus::Timeout, 3, true);
        assert_eq!(run.compiles, Compiles::Yes);
        let got: Vec<(bool, &str, &str)> = run
            .tests
            .iter()
            .map(|t| (t.passed, t.status.as_str(), t.stderr_tail.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![
                (true, "exit 0", ""),
                (false, "not run: the harness ended with timeout", ""),
                (false, "exit 1", "AssertionError"),
            ]
        );
        assert_eq!(run.tests[2].elapsed, Duration::from_millis(20));
    }

    #[test]
    fn a_gate_on_a_syntax_error_or_a_silent_harness_runs_nothing() {
        let run = parse_report(b"F syntax\n", b"", RunStatus::Exit(0), 2, true);
        assert_eq!((run.compiles, run.tests.len()), (Compiles::SyntaxError, 0));
        let run = parse_report(b"", b"boom", RunStatus::Signal(9), 2, true);
        assert_eq!(run.compiles, Compiles::Unknown("killed by signal 9".into()));
        assert!(run.tests.is_empty());
        // Without the gate every test is reported, as failed.
        let run =
            parse_report(b"F syntax\nT 1 timeout 0 5.0 \n", b"", RunStatus::Exit(0), 2, false);
        let status: Vec<&str> = run.tests.iter().map(|t| t.status.as_str()).collect();
        assert_eq!(status, vec!["not run: the harness ended with exit 0", "timeout"]);
    }
}
