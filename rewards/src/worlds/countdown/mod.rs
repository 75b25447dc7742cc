//! The Countdown world: reach a target from a few numbers with `+ - * /`, each number used
//! once; every item is solvable by construction.
//!
//! Generation of item `k` of a split: `count` numbers uniform in `1..=max_number`, keyed by
//! `(seed, split, k, attempt)`; two random entries of the pool are repeatedly replaced by a
//! random operation on them whose result is a positive integer (`a − b` needs `a > b`,
//! `a / b` needs `b | a`), until one value remains: the target, with the built expression
//! as the reference solution. The attempt is kept when the target is in `1..=max_target`
//! and the item falls in the requested split by the content rule on `sorted numbers →
//! target`; else the next attempt is drawn.

pub mod verify;

use serde::{Deserialize, Serialize};

use crate::worlds::split::{check_percent, split_of, Split, TextItem};
use crate::RewardError;
use drift_core::rng::SplitMix64;

pub use verify::{Countdown, CountdownReward, CountdownTask};

/// Configuration of the Countdown world.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CountdownConfig {
    /// Numbers per item, 2 to 6. Default 3 (TinyZero uses 3 and 4).
    pub count: usize,
    /// Largest number. Default 20.
    pub max_number: u64,
    /// Largest target. Default 100.
    pub max_target: u64,
    /// Seed. Default 0.
    pub seed: u64,
    /// Percentage of items held out. Default 10.
    pub held_out_percent: u8,
}

impl Default for CountdownConfig {
    fn default() -> Self {
        Self { count: 3, max_number: 20, max_target: 100, seed: 0, held_out_percent: 10 }
    }
}

/// One Countdown item, as written to and read from JSONL.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CountdownItem {
    /// Identifier.
    pub id: String,
    /// The numbers, each to be used once.
    pub numbers: Vec<u64>,
    /// The target.
    pub target: u64,
    /// A reference expression reaching the target.
    pub solution: String,
}

impl CountdownTask for CountdownItem {
    fn numbers(&self) -> &[u64] {
        &self.numbers
    }
    fn target(&self) -> u64 {
        self.target
    }
}

impl TextItem for CountdownItem {
    fn id(&self) -> &str {
        &self.id
    }
    fn prompt(&self) -> String {
        let nums: Vec<String> = self.numbers.iter().map(u64::to_string).collect();
        format!(
            "Using the numbers {}, each once, with + - * / and parentheses, make {}. \
             Answer as <answer>expression</answer>.",
            nums.join(" "),
            self.target
        )
    }
    fn target(&self) -> String {
        format!("<answer>{}</answer>", self.solution)
    }
}

/// The Countdown world.
#[derive(Debug, Clone)]
pub struct CountdownWorld {
    cfg: CountdownConfig,
}

impl CountdownWorld {
    /// Checks the configuration.
    pub fn new(cfg: CountdownConfig) -> Result<Self, RewardError> {
        check_percent(cfg.held_out_percent)?;
        let bad = |field, value: u64, expected: &str| {
            Err(RewardError::Config { field, value: value.to_string(), expected: expected.into() })
        };
        if !(2..=6).contains(&cfg.count) {
            return bad("count", cfg.count as u64, "2 to 6");
        }
        if !(2..=1000).contains(&cfg.max_number) {
            return bad("max_number", cfg.max_number, "2 to 1000");
        }
        if cfg.max_target < 10 {
            return bad("max_target", cfg.max_target, "at least 10");
        }
        Ok(Self { cfg })
    }

    /// Item `k` of `split`.
    pub fn item(&self, split: Split, k: u64) -> CountdownItem {
        let mut attempt = 0u64;
        loop {
            let mut rng = SplitMix64::keyed(&[self.cfg.seed, 0xC0C0, split.tag(), k, attempt]);
            attempt += 1;
            let numbers: Vec<u64> = (0..self.cfg.count)
                .map(|_| 1 + rng.below32(self.cfg.max_number as usize) as u64)
                .collect();
            let Some((target, solution)) = build(&numbers, &mut rng) else { continue };
            if target > self.cfg.max_target {
                continue;
            }
            let mut sorted = numbers.clone();
            sorted.sort_unstable();
            if split_of(&format!("{sorted:?}->{target}"), self.cfg.seed, self.cfg.held_out_percent)
                == split
            {
                let tag = if split == Split::Train { "train" } else { "held_out" };
                return CountdownItem {
                    id: format!("countdown-{tag}-{k}"),
                    numbers,
                    target,
                    solution,
                };
            }
        }
    }

    /// The first `n` items of `split`.
    pub fn items(&self, split: Split, n: usize) -> Vec<CountdownItem> {
        (0..n as u64).map(|k| self.item(split, k)).collect()
    }
}

/// Combines the pool into one positive integer by the module rule; `None` when an attempt
/// gets stuck (no operation gives a positive integer).
fn build(numbers: &[u64], rng: &mut SplitMix64) -> Option<(u64, String)> {
    // Each entry: value and expression text.
    let mut pool: Vec<(u64, String)> = numbers.iter().map(|&n| (n, n.to_string())).collect();
    while pool.len() > 1 {
        let i = rng.below32(pool.len());
        let (a, ea) = pool.swap_remove(i);
        let j = rng.below32(pool.len());
        let (b, eb) = pool.swap_remove(j);
        let mut ops = vec!['+', '*'];
        if a > b {
            ops.push('-');
        }
        if b > 1 && a % b == 0 {
            ops.push('/');
        }
        let op = ops[rng.below32(ops.len())];
        let v = match op {
            '+' => a.checked_add(b)?,
            '*' => a.checked_mul(b)?,
            '-' => a - b,
            _ => a / b,
        };
        pool.push((v, format!("{} {op} {}", paren(&ea), paren(&eb))));
    }
    let (v, e) = pool.pop()?;
    Some((v, e))
}

/// `e` in parentheses unless it is a bare number.
fn paren(e: &str) -> String {
    if e.chars().all(|c| c.is_ascii_digit()) {
        e.to_string()
    } else {
        format!("({e})")
    }
}
