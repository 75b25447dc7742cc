//! Parallel evaluation of a reward over a batch on a bounded set of threads, with a wall-time
//! limit per sample.
//!
//! Rule: sample `i` is scored by `guarded(reward, &samples[i])` on one of at most
//! [`PoolConfig::threads`] busy workers; if it has not returned [`PoolConfig::timeout_s`]
//! seconds after it started, its outcome is a [`FailureKind::Timeout`] failure with score
//! [`FailurePolicy::failure_score`], the stuck worker is abandoned (its result, if it ever
//! comes, is dropped) and a fresh worker takes its place, so one hung reward costs one
//! sample, never the batch. Rust cannot kill a thread: rewards that run subprocesses (code
//! execution) enforce their own, stricter limits and kill the process; this limit is the
//! last line of defence.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::reward::{guarded, FailureKind, FailurePolicy, Outcome, Reward};
use crate::RewardError;

/// Configuration of a [`Pool`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PoolConfig {
    /// Worker threads. Default 0 = `std::thread::available_parallelism()`.
    pub threads: usize,
    /// Wall-time limit per sample, in seconds; 0 disables it. Default 60 (the code reward's
    /// own per-test limit is 5 s, so this only fires on a reward that hangs).
    pub timeout_s: f64,
    /// Score of a failed sample. Default 0.0.
    pub failure_score: f64,
}

impl Default for PoolConfig {
    fn default() -> Self {
        Self { threads: 0, timeout_s: 60.0, failure_score: 0.0 }
    }
}

/// A bounded evaluator: see the module documentation for the rule.
#[derive(Debug, Clone)]
pub struct Pool {
    threads: usize,
    timeout: Option<Duration>,
    policy: FailurePolicy,
}

/// Shared state of one batch's workers.
struct Batch<S> {
    samples: Arc<[S]>,
    next: AtomicUsize,
    /// When each sample started, so the supervisor can time it out.
    started: Mutex<Vec<Option<Instant>>>,
}

impl Pool {
    /// A pool from its configuration; errors on a negative or non-finite time-out.
    pub fn new(cfg: &PoolConfig) -> Result<Self, RewardError> {
        if !(cfg.timeout_s >= 0.0 && cfg.timeout_s.is_finite()) {
            return Err(RewardError::Config {
                field: "timeout_s",
                value: cfg.timeout_s.to_string(),
                expected: "a finite number of seconds ≥ 0".into(),
            });
        }
        let threads = if cfg.threads == 0 {
            thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
        } else {
            cfg.threads
        };
        let timeout = (cfg.timeout_s > 0.0).then(|| Duration::from_secs_f64(cfg.timeout_s));
        Ok(Self { threads, timeout, policy: FailurePolicy { failure_score: cfg.failure_score } })
    }

    /// The number of worker threads.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Scores every sample, one [`Outcome`] per sample in order.
    pub fn evaluate<S, R>(&self, reward: &Arc<R>, samples: impl Into<Arc<[S]>>) -> Vec<Outcome>
    where
        S: Send + Sync + 'static,
        R: Reward<S> + ?Sized + 'static,
    {
        let samples: Arc<[S]> = samples.into();
        let n = samples.len();
        let batch = Arc::new(Batch {
            samples,
            next: AtomicUsize::new(0),
            started: Mutex::new(vec![None; n]),
        });
        let (tx, rx) = channel::<(usize, Outcome)>();
        let mut abandon: Vec<Arc<AtomicBool>> = Vec::new();
        for _ in 0..self.threads.min(n) {
            abandon.push(self.spawn_worker(reward, &batch, &tx));
        }
        let mut out: Vec<Option<Outcome>> = vec![None; n];
        let mut done = 0;
        while done < n {
            let wait = self.next_deadline(&batch, &out);
            match rx.recv_timeout(wait) {
                Ok((i, o)) if out[i].is_none() => {
                    out[i] = Some(o);
                    done += 1;
                }
                Ok(_) | Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            for i in self.expired(&batch, &out) {
                let limit = self.timeout.unwrap_or_default();
                let msg =
                    format!("reward `{}` exceeded {:.3} s", reward.name(), limit.as_secs_f64());
                out[i] = Some(self.policy.fail(FailureKind::Timeout, msg, limit));
                done += 1;
                // The worker on `i` is stuck: replace it so the rest of the batch proceeds.
                abandon.push(self.spawn_worker(reward, &batch, &tx));
            }
        }
        for flag in abandon {
            flag.store(true, Ordering::Relaxed);
        }
        out.into_iter()
            .map(|o| {
                o.unwrap_or_else(|| {
                    self.policy.fail(FailureKind::Panic, "worker died".into(), Duration::ZERO)
                })
            })
            .collect()
    }

    fn spawn_worker<S, R>(
        &self,
        reward: &Arc<R>,
        batch: &Arc<Batch<S>>,
        tx: &Sender<(usize, Outcome)>,
    ) -> Arc<AtomicBool>
    where
        S: Send + Sync + 'static,
        R: Reward<S> + ?Sized + 'static,
    {
        let (reward, batch, tx) = (Arc::clone(reward), Arc::clone(batch), tx.clone());
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let policy = self.policy;
        thread::spawn(move || loop {
            if flag.load(Ordering::Relaxed) {
                return;
            }
            let i = batch.next.fetch_add(1, Ordering::Relaxed);
            if i >= batch.samples.len() {
                return;
            }
            if let Ok(mut s) = batch.started.lock() {
                s[i] = Some(Instant::now());
            }
            let outcome = guarded(reward.as_ref(), &batch.samples[i], &policy);
            if tx.send((i, outcome)).is_err() {
                return;
            }
        });
        stop
    }

    /// How long the supervisor may sleep before the earliest running sample expires.
    fn next_deadline<S>(&self, batch: &Batch<S>, out: &[Option<Outcome>]) -> Duration {
        let Some(limit) = self.timeout else { return Duration::from_secs(3600) };
        let started = batch.started.lock().map(|s| s.clone()).unwrap_or_default();
        let now = Instant::now();
        started
            .iter()
            .zip(out)
            .filter_map(|(s, o)| if o.is_none() { *s } else { None })
            .map(|s| (s + limit).saturating_duration_since(now))
            .min()
            .unwrap_or(limit)
            .max(Duration::from_millis(1))
    }

    /// Samples still running past their limit.
    fn expired<S>(&self, batch: &Batch<S>, out: &[Option<Outcome>]) -> Vec<usize> {
        let Some(limit) = self.timeout else { return Vec::new() };
        let started = batch.started.lock().map(|s| s.clone()).unwrap_or_default();
        started
            .iter()
            .zip(out)
            .enumerate()
            .filter_map(|(i, (s, o))| match (s, o) {
                (Some(s), None) if s.elapsed() >= limit => Some(i),
                _ => None,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reward::Evaluation;

    /// Sleeps `ms` milliseconds, panics on 1, errors on 2, else scores the value / 10.
    struct Sleepy;
    impl Reward<u64> for Sleepy {
        fn name(&self) -> &str {
            "sleepy"
        }
        fn evaluate(&self, s: &u64) -> Result<Evaluation, RewardError> {
            match *s {
                1 => panic!("one"),
                2 => Err(RewardError::Invalid { what: "2".into(), expected: "not 2".into() }),
                ms if ms >= 1000 => {
                    thread::sleep(Duration::from_millis(ms));
                    Ok(Evaluation::score(1.0))
                }
                v => Ok(Evaluation::score(v as f64 / 10.0)),
            }
        }
    }

    #[test]
    fn failures_are_recorded_in_place_and_the_batch_completes() {
        // A 1 s limit: far above what the fast samples take even on a loaded machine (a 0.3 s
        // limit timed fast samples out when three training jobs shared the 2 cores), far below
        // the 5 s sleepers.
        let pool =
            Pool::new(&PoolConfig { threads: 2, timeout_s: 1.0, failure_score: -0.5 }).unwrap();
        let reward: Arc<Sleepy> = Arc::new(Sleepy);
        let start = Instant::now();
        let out = pool.evaluate(&reward, vec![5u64, 1, 2, 5000, 5000, 3, 4]);
        assert!(start.elapsed() < Duration::from_secs(4), "took {:?}", start.elapsed());
        let scores: Vec<f64> = out.iter().map(|o| o.score).collect();
        assert_eq!(scores, vec![0.5, -0.5, -0.5, -0.5, -0.5, 0.3, 0.4]);
        let kinds: Vec<Option<FailureKind>> =
            out.iter().map(|o| o.failure.as_ref().map(|f| f.kind)).collect();
        assert_eq!(kinds[1], Some(FailureKind::Panic));
        assert_eq!(kinds[2], Some(FailureKind::Error));
        assert_eq!(kinds[3], Some(FailureKind::Timeout));
        assert_eq!(kinds[4], Some(FailureKind::Timeout));
    }

    #[test]
    fn works_through_a_trait_object_and_rejects_bad_config() {
        let reward: Arc<dyn Reward<u64>> = Arc::new(Sleepy);
        let pool = Pool::new(&PoolConfig { threads: 3, ..PoolConfig::default() }).unwrap();
        let out = pool.evaluate(&reward, (3..10).collect::<Vec<u64>>());
        assert_eq!(out.len(), 7);
        assert_eq!(out[6].score, 0.9);
        assert!(pool.evaluate(&reward, Vec::<u64>::new()).is_empty());
        let bad = PoolConfig { timeout_s: -1.0, ..PoolConfig::default() };
        assert!(Pool::new(&bad).unwrap_err().to_string().contains("timeout_s"));
    }
}
