//! Reward throughput: code rewards per second for a batch of 64 samples × 5 tests, in each
//! sandbox mode available here (bwrap and the namespace jail when they work, and limits only),
//! plus the Countdown
//! and Sudoku verifiers. One JSON line per case on stdout.
//!
//! Run: `cargo bench -p drift-rewards`.

use std::sync::Arc;
use std::time::Instant;

use drift_rewards::pool::{Pool, PoolConfig};
use drift_rewards::reward::{Reward, TextSample};
use drift_rewards::sandbox::{Sandbox, SandboxConfig, SandboxMode};
use drift_rewards::worlds::code::{CodeItem, CodeWorld, CodeWorldConfig};
use drift_rewards::worlds::code::{CodeReward, CodeRewardConfig};
use drift_rewards::worlds::countdown::CountdownReward;
use drift_rewards::worlds::countdown::{CountdownConfig, CountdownWorld};
use drift_rewards::worlds::sudoku::SudokuReward;
use drift_rewards::worlds::sudoku::{SudokuConfig, SudokuWorld};
use drift_rewards::worlds::{Split, TextItem};

const SAMPLES: usize = 64;
const REPEATS: usize = 3;

fn main() -> Result<(), drift_rewards::RewardError> {
    let world = CodeWorld::new(CodeWorldConfig::default())?;
    let items = world.items(Split::Train, SAMPLES);
    let tests: usize = items.iter().map(|i| i.tests.len()).sum();
    let batch: Vec<TextSample<CodeItem>> =
        items.iter().map(|i| TextSample::new(i.clone(), i.target())).collect();
    let pool = Pool::new(&PoolConfig::default())?;
    for mode in [SandboxMode::Bwrap, SandboxMode::Namespaces, SandboxMode::Limits] {
        let sandbox = match Sandbox::new(&SandboxConfig { mode, ..SandboxConfig::default() }) {
            Ok(sandbox) => sandbox,
            Err(e) => {
                println!(
                    "{}",
                    serde_json::json!({"bench": "code_reward", "mode": format!("{mode:?}"), "skipped": e.to_string()})
                );
                continue;
            }
        };
        let active = sandbox.mode().to_string();
        let reward: Arc<dyn Reward<TextSample<CodeItem>>> =
            Arc::new(CodeReward::with_sandbox(&CodeRewardConfig::default(), Arc::new(sandbox))?);
        let mut times = Vec::new();
        for _ in 0..REPEATS {
            let start = Instant::now();
            let out = pool.evaluate(&reward, batch.clone());
            times.push(start.elapsed().as_secs_f64());
            let full = out.iter().filter(|o| o.score == 2.5).count();
            assert_eq!(full, SAMPLES, "reference solutions must score 2.5");
        }
        let best = times.iter().cloned().fold(f64::INFINITY, f64::min);
        let mean = times.iter().sum::<f64>() / times.len() as f64;
        println!(
            "{}",
            serde_json::json!({
                "bench": "code_reward", "mode": active, "samples": SAMPLES, "tests": tests,
                "threads": pool.threads(), "best_s": best, "mean_s": mean,
                "samples_per_s": SAMPLES as f64 / best,
                "programs_per_s": (tests + SAMPLES) as f64 / best,
            })
        );
    }
    bench_resident(&pool, &batch)?;
    bench_verifier(
        "countdown",
        CountdownReward,
        CountdownWorld::new(CountdownConfig::default())?.items(Split::Train, 1000),
    );
    bench_verifier(
        "sudoku4",
        SudokuReward,
        SudokuWorld::new(SudokuConfig::default())?.items(Split::Train, 1000),
    );
    Ok(())
}

/// The code reward while the caller holds `DRIFT_BENCH_RESIDENT_GB` (default 3, a dLLM trainer
/// at its update's peak) of touched memory, with runs started from the sandbox's fork server
/// and by forking the caller: the sandbox is made first, as the trainer makes it before loading
/// its models.
fn bench_resident(
    pool: &Pool,
    batch: &[TextSample<CodeItem>],
) -> Result<(), drift_rewards::RewardError> {
    let gb: usize =
        std::env::var("DRIFT_BENCH_RESIDENT_GB").ok().and_then(|v| v.parse().ok()).unwrap_or(3);
    let mut rewards = Vec::new();
    for fork_server in [true, false] {
        let sandbox = Sandbox::new(&SandboxConfig { fork_server, ..SandboxConfig::default() })?;
        let active = sandbox.mode().to_string();
        let reward: Arc<dyn Reward<TextSample<CodeItem>>> =
            Arc::new(CodeReward::with_sandbox(&CodeRewardConfig::default(), Arc::new(sandbox))?);
        rewards.push((fork_server, active, reward));
    }
    let held: Vec<u8> = vec![1u8; gb << 30];
    for (fork_server, active, reward) in rewards {
        let mut times = Vec::new();
        for _ in 0..REPEATS {
            let start = Instant::now();
            let out = pool.evaluate(&reward, batch.to_vec());
            times.push(start.elapsed().as_secs_f64());
            assert!(out.iter().all(|o| o.score == 2.5), "reference solutions must score 2.5");
        }
        let best = times.iter().cloned().fold(f64::INFINITY, f64::min);
        println!(
            "{}",
            serde_json::json!({
                "bench": "code_reward_resident", "resident_gb": gb, "fork_server": fork_server,
                "mode": active, "samples": batch.len(), "best_s": best,
                "mean_s": times.iter().sum::<f64>() / times.len() as f64,
            })
        );
    }
    assert_eq!(held[held.len() / 2], 1);
    Ok(())
}

/// Scores each item's target serially, 10 rounds.
fn bench_verifier<T: Clone + TextItem, R: Reward<TextSample<T>>>(
    name: &str,
    reward: R,
    items: Vec<T>,
) {
    let batch: Vec<TextSample<T>> =
        items.iter().map(|i| TextSample::new(i.clone(), i.target())).collect();
    let start = Instant::now();
    let mut total = 0.0;
    for _ in 0..10 {
        total += reward.evaluate_batch(&batch).iter().map(|o| o.score).sum::<f64>();
    }
    let secs = start.elapsed().as_secs_f64();
    assert_eq!(total, 10.0 * batch.len() as f64);
    println!(
        "{}",
        serde_json::json!({"bench": name, "samples": 10 * batch.len(), "seconds": secs, "samples_per_s": 10.0 * batch.len() as f64 / secs})
    );
}
