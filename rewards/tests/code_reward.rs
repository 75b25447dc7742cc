//! The code reward's rule: format gate 1.0 / 0.5 / 0.0, pass fraction, gating, weights.

use std::sync::Arc;

use drift_rewards::pool::{Pool, PoolConfig};
use drift_rewards::reward::{Reward, TextSample};
use drift_rewards::sandbox::{Sandbox, SandboxConfig};
use drift_rewards::worlds::code::{CodeReward, CodeRewardConfig, ExecutionReward, FormatReward};

fn sandbox() -> Arc<Sandbox> {
    Arc::new(Sandbox::new(&SandboxConfig { timeout_s: 2.0, ..SandboxConfig::default() }).unwrap())
}

fn tests() -> Vec<String> {
    ["assert f(0) == 0", "assert f(1) == 2", "assert f(2) == 4", "assert f(5) == 11"]
        .map(String::from)
        .to_vec()
}

fn sample(completion: &str) -> TextSample<Vec<String>> {
    TextSample::new(tests(), completion)
}

const DOUBLE: &str = "```python\ndef f(x):\n    return 2 * x\n```";

#[test]
fn format_gate_scores() {
    let r = FormatReward::new(sandbox());
    let score = |c: &str| r.evaluate(&sample(c)).unwrap();
    assert_eq!(score(DOUBLE).score, 1.0);
    let bad = score("```python\ndef f(x) return\n```");
    assert_eq!(bad.score, 0.5);
    assert_eq!(bad.details.gate.as_deref(), Some("syntax error"));
    assert_eq!(score("def f(x):\n    return 2 * x").score, 0.0);
    assert_eq!(score(&format!("{DOUBLE}\nHope this helps")).score, 0.0);
}

#[test]
fn execution_is_the_pass_fraction() {
    let r = ExecutionReward::new(sandbox());
    let ev = r.evaluate(&sample(DOUBLE)).unwrap();
    assert_eq!(ev.score, 0.75, "{:?}", ev.details.tests);
    let passed: Vec<bool> = ev.details.tests.iter().map(|t| t.passed).collect();
    assert_eq!(passed, vec![true, true, true, false]);
    assert!(ev.details.tests[3].stderr_tail.contains("AssertionError"));
}

#[test]
fn combined_weights_and_gating() {
    let sb = sandbox();
    let r = CodeReward::with_sandbox(&CodeRewardConfig::default(), Arc::clone(&sb)).unwrap();
    let ev = r.evaluate(&sample(DOUBLE)).unwrap();
    assert!((ev.score - (0.5 + 2.0 * 0.75)).abs() < 1e-12);
    // A syntax error gets 0.5 · 0.5 and no execution at all.
    let ev = r.evaluate(&sample("```python\ndef f(x) return\n```")).unwrap();
    assert_eq!(ev.score, 0.25);
    assert!(ev.details.tests.is_empty());
    let cfg = CodeRewardConfig { format_weight: 1.0, execution_weight: 0.0, ..Default::default() };
    let r = CodeReward::with_sandbox(&cfg, sb).unwrap();
    assert_eq!(r.evaluate(&sample(DOUBLE)).unwrap().score, 1.0);
}

#[test]
fn pool_scores_a_batch_in_order() {
    let reward: Arc<dyn Reward<TextSample<Vec<String>>>> =
        Arc::new(CodeReward::with_sandbox(&CodeRewardConfig::default(), sandbox()).unwrap());
    let pool = Pool::new(&PoolConfig { threads: 4, ..PoolConfig::default() }).unwrap();
    let good = "```python\ndef f(x):\n    return 2 * x + (x == 5)\n```";
    let batch: Vec<_> = (0..8).map(|i| sample(if i % 2 == 0 { good } else { "nope" })).collect();
    let scores: Vec<f64> = pool.evaluate(&reward, batch).iter().map(|o| o.score).collect();
    assert_eq!(scores, vec![2.5, 0.0, 2.5, 0.0, 2.5, 0.0, 2.5, 0.0]);
}

#[test]
fn config_is_checked() {
    let bad = SandboxConfig { timeout_s: 0.0, ..SandboxConfig::default() };
    assert!(Sandbox::new(&bad).unwrap_err().to_string().contains("timeout_s"));
    let cfg: CodeRewardConfig =
        serde_json::from_str(r#"{"format_weight": 1.0, "sandbox": {"timeout_s": 2.0}}"#).unwrap();
    assert_eq!((cfg.format_weight, cfg.execution_weight, cfg.sandbox.timeout_s), (1.0, 2.0, 2.0));
    let err = serde_json::from_str::<CodeRewardConfig>(r#"{"fromat_weight": 1.0}"#).unwrap_err();
    assert!(err.to_string().contains("fromat_weight"));
}
