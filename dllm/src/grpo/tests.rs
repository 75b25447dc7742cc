//! Trainer tests on a toy task and a tiny random model: the on-policy check for every
//! recipe and micro-batching, bit-identical resume, a toy reward that rises, bad configs.

use std::path::Path;

use candle_core::Device;
use drift_core::rng::RngKey;
use drift_core::train::{AdamWConfig, OptimConfig, Optimizer, ParamSet, RunSettings};
use drift_samplers::dllm::{DecodeConfig, PositionRule, ProposalConfig};
use drift_samplers::MaskPredictor;

use super::*;
use crate::model::{DiffusionLm, LoadOptions, TinySize};
use crate::tokenizer::{CharTokenizer, Tokenizer, BOS_ID, EOS_ID};

/// Prompts `"q<k>:"`; the reward is the fraction of completion characters equal to `'a'`;
/// "passed" when at least half are.
struct Toy {
    tok: CharTokenizer,
}

impl TextTask for Toy {
    type Item = u64;
    fn train_item(&self, seed: u64, index: u64) -> u64 {
        seed * 1000 + index
    }
    fn eval_items(&self, n: usize) -> Vec<u64> {
        (0..n as u64).map(|k| 10_000 + k).collect()
    }
    fn prompt_ids(&self, item: &u64) -> crate::Result<Vec<u32>> {
        let mut ids = vec![BOS_ID];
        ids.extend(self.tok.encode(&format!("q{}:", item % 7))?);
        Ok(ids)
    }
    fn completion_text(&self, ids: &[u32]) -> crate::Result<String> {
        let end = ids.iter().position(|&t| t == EOS_ID).unwrap_or(ids.len());
        self.tok.decode(&ids[..end], true)
    }
    fn score(&self, _: &[u64], completions: &[String]) -> Vec<TaskScore> {
        completions
            .iter()
            .map(|c| {
                let a = c.chars().filter(|&ch| ch == 'a').count() as f64 / 8.0;
                TaskScore { reward: a, passed: a >= 0.5, failure: None, components: Vec::new() }
            })
            .collect()
    }
}

fn toy() -> Toy {
    Toy { tok: CharTokenizer::ascii() }
}

fn random_base(dir: &Path) {
    let tok = CharTokenizer::ascii();
    DiffusionLm::init(
        TinySize::Nano.spec().llada(tok.vocab_spec()),
        RngKey::new(1),
        &LoadOptions::frozen(),
    )
    .unwrap()
    .with_tokenizer(Tokenizer::Char(tok))
    .save_pretrained(dir)
    .unwrap();
}

fn toy_config(base: &Path, recipe: Recipe) -> DllmGrpoConfig {
    DllmGrpoConfig {
        base: base.to_path_buf(),
        recipe,
        run: RunSettings { steps: 2, eval_every: 0, checkpoint_every: 1, ..Default::default() },
        prompts_per_step: 2,
        group_size: Some(4),
        inner_iterations: Some(1),
        decode: DecodeConfig {
            gen_length: 8,
            block_length: 8,
            steps: 4,
            proposal: ProposalConfig { temperature: 1.0, ..ProposalConfig::default() },
            position: PositionRule::LowConfidence,
            stop_tokens: vec![],
            ..DecodeConfig::default()
        },
        eval_steps: 4,
        micro_batch: 3,
        optim: OptimConfig {
            adamw: AdamWConfig { lr: 3e-3, weight_decay: 0.0, ..AdamWConfig::default() },
            max_grad_norm: Some(1.0),
            ..OptimConfig::default()
        },
        eval_items: 4,
        ..DllmGrpoConfig::default()
    }
}

#[test]
fn first_ratio_is_exactly_one_for_every_recipe_and_micro_batch() {
    let dir = tempfile::tempdir().unwrap();
    random_base(dir.path());
    // Without stop tokens, and with every token a stop (one-token completions, the rest fill).
    let every: Vec<u32> = (0..CharTokenizer::ascii().vocab_size() as u32)
        .filter(|&t| t != CharTokenizer::ascii().mask_id())
        .collect();
    for &recipe in RECIPES {
        for (micro_batch, stops) in [(3, vec![]), (8, vec![]), (3, every.clone())] {
            let mut cfg = DllmGrpoConfig { micro_batch, ..toy_config(dir.path(), recipe) };
            cfg.decode.stop_tokens = stops;
            let rc = cfg.resolved().unwrap();
            let policy = DiffusionLm::from_dir(dir.path(), &LoadOptions::trainable()).unwrap();
            let reference = policy.frozen_copy().unwrap();
            let mut opt =
                Optimizer::new(cfg.optim, ParamSet::all(policy.varmap().unwrap())).unwrap();
            let batch = sample_batch(&policy.detached().unwrap(), &toy(), &rc, 0).unwrap();
            assert_eq!(batch.len(), 8);
            let fill = batch.fill.iter().flatten().filter(|&&f| f).count();
            assert_eq!(fill, if rc.given.decode.stop_tokens.is_empty() { 0 } else { 8 * 7 });
            let (old, rows) = batch_log_probs(&policy, &batch, &rc, 0, 0).unwrap();
            assert_eq!(rows, 8 * rc.parts.estimator.passes_per_row());
            let reference =
                rc.parts.loss.kl.map(|_| batch_log_probs(&reference, &batch, &rc, 0, 0).unwrap().0);
            let r = update(&policy, &batch, Some(&old), reference.as_ref(), &rc, 0, 0, &mut opt)
                .unwrap();
            let d = r.diagnostics;
            assert_eq!(
                (d.ratio_min, d.ratio_max),
                (1.0, 1.0),
                "{recipe:?} micro-batch {micro_batch}"
            );
            assert!(r.step.applied, "{recipe:?}");
            if rc.parts.loss.kl.is_some() {
                assert!(d.kl_loss.abs() < 1e-9, "{recipe:?}: policy = reference before the step");
            }
            // The step moved the policy: the same masks now give another ratio.
            let r2 = update(&policy, &batch, Some(&old), reference.as_ref(), &rc, 0, 0, &mut opt)
                .unwrap();
            assert!(r2.diagnostics.ratio_max > 1.0 || r2.diagnostics.ratio_min < 1.0, "{recipe:?}");
        }
    }
}

/// `greedy_per_group = 1`: the last completion of each group is the prompt's greedy decode, the
/// others the samples the batch holds without it, scored and given advantages like them.
#[test]
fn a_greedy_row_per_group_is_the_prompts_greedy_decode() {
    let dir = tempfile::tempdir().unwrap();
    random_base(dir.path());
    let view = DiffusionLm::from_dir(dir.path(), &LoadOptions::default()).unwrap();
    let texts = |greedy_per_group: usize, temperature: f64| {
        let mut cfg = toy_config(dir.path(), Recipe::CoupledGrpo);
        cfg.greedy_per_group = greedy_per_group;
        cfg.decode.proposal.temperature = temperature;
        let batch = sample_batch(&view, &toy(), &cfg.resolved().unwrap(), 3).unwrap();
        assert_eq!(batch.advantages_host.len(), 8);
        batch.texts
    };
    let (sampled, mixed, greedy) = (texts(0, 1.0), texts(1, 1.0), texts(0, 0.0));
    for r in 0..8 {
        let want = if r % 4 == 3 { &greedy[r] } else { &sampled[r] };
        assert_eq!(&mixed[r], want, "row {r}");
    }
    assert!(sampled[3] != greedy[3] || sampled[7] != greedy[7], "{sampled:?} {greedy:?}");
}

/// On-policy (`μ = 1`) the trainer runs no old pass: the update's own detached values stand
/// in for it. The step must be the one the explicit old pass gives, weight for weight.
#[test]
fn an_on_policy_update_without_an_old_pass_takes_the_same_step() {
    let dir = tempfile::tempdir().unwrap();
    random_base(dir.path());
    for &recipe in RECIPES {
        let cfg = DllmGrpoConfig { micro_batch: 3, ..toy_config(dir.path(), recipe) };
        let rc = cfg.resolved().unwrap();
        let weights_after = |with_old: bool| {
            let policy = DiffusionLm::from_dir(dir.path(), &LoadOptions::trainable()).unwrap();
            let reference = policy.frozen_copy().unwrap();
            let mut opt =
                Optimizer::new(cfg.optim, ParamSet::all(policy.varmap().unwrap())).unwrap();
            let batch = sample_batch(&policy.detached().unwrap(), &toy(), &rc, 0).unwrap();
            let old = with_old.then(|| batch_log_probs(&policy, &batch, &rc, 0, 0).unwrap().0);
            let reference =
                rc.parts.loss.kl.map(|_| batch_log_probs(&reference, &batch, &rc, 0, 0).unwrap().0);
            let r = update(&policy, &batch, old.as_ref(), reference.as_ref(), &rc, 0, 0, &mut opt)
                .unwrap();
            assert!(r.step.applied, "{recipe:?}");
            assert_eq!((r.diagnostics.ratio_min, r.diagnostics.ratio_max), (1.0, 1.0));
            let vars = policy.varmap().unwrap().data().lock().unwrap().clone();
            let mut named: Vec<(String, Vec<f32>)> = vars
                .into_iter()
                .map(|(k, v)| (k, v.as_tensor().flatten_all().unwrap().to_vec1().unwrap()))
                .collect();
            named.sort_by(|a, b| a.0.cmp(&b.0));
            named
        };
        let (explicit, on_policy) = (weights_after(true), weights_after(false));
        let base = DiffusionLm::from_dir(dir.path(), &LoadOptions::trainable()).unwrap();
        let moved = explicit.iter().any(|(k, w)| {
            let b = base.varmap().unwrap().data().lock().unwrap()[k]
                .as_tensor()
                .flatten_all()
                .unwrap()
                .to_vec1::<f32>()
                .unwrap();
            b != *w
        });
        assert!(moved, "{recipe:?}: the step moved no weight");
        assert_eq!(explicit, on_policy, "{recipe:?}");
    }
}

/// The lines of a run's metrics.jsonl without the wall-clock fields.
fn metrics_without_times(run: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(run.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            let o = v.as_object_mut().unwrap();
            o.retain(|k, _| !k.starts_with("time") && k != "time_s");
            v
        })
        .collect()
}

#[test]
fn a_resumed_run_or_one_cut_by_its_time_budget_equals_an_uninterrupted_one() {
    let dir = tempfile::tempdir().unwrap();
    random_base(&dir.path().join("base"));
    let dev = Device::Cpu;
    let mut cfg = toy_config(&dir.path().join("base"), Recipe::CoupledGrpo);
    cfg.run.steps = 3;
    let whole = dir.path().join("whole");
    train_dllm_grpo(&cfg, "", &toy(), &whole, &dev).unwrap();
    let split = dir.path().join("split");
    let mut cfg2 = cfg.clone();
    cfg2.run.steps = 2;
    train_dllm_grpo(&cfg2, "", &toy(), &split, &dev).unwrap();
    let report = train_dllm_grpo(&cfg, "", &toy(), &split, &dev).unwrap();
    assert_eq!(metrics_without_times(&whole), metrics_without_times(&split));
    assert!(report.run.model_dir.join("config.json").exists());
    assert!(report.run.curves.exists());
    // A budget spent before the first iteration ends: the run stops after it, checkpointed,
    // evaluated and saved, and running it again completes it exactly.
    let mut budgeted = cfg.clone();
    budgeted.run.max_seconds = Some(1e-9);
    let cut = dir.path().join("cut");
    let first = train_dllm_grpo(&budgeted, "", &toy(), &cut, &dev).unwrap();
    assert_eq!(first.run.steps, 1);
    assert!(first.run.model_dir.join("model.safetensors").exists());
    assert!(cut.join("summary.json").exists() && cut.join("checkpoints/step-00000001").is_dir());
    assert_eq!(train_dllm_grpo(&cfg, "", &toy(), &cut, &dev).unwrap().run.steps, 3);
    assert_eq!(metrics_without_times(&whole), metrics_without_times(&cut));
    let mut bad = cfg;
    bad.run.max_seconds = Some(-1.0);
    let err = train_dllm_grpo(&bad, "", &toy(), &dir.path().join("bad"), &dev).unwrap_err();
    assert!(err.to_string().contains("max_seconds"), "{err}");
}

#[test]
fn a_refreshing_reference_resumes_exactly_from_a_checkpoint_between_refreshes() {
    let dir = tempfile::tempdir().unwrap();
    random_base(&dir.path().join("base"));
    let dev = Device::Cpu;
    // Coupled-GRPO's k3 KL reads the reference; it is refreshed after iterations 2 and 4.
    let mut cfg = toy_config(&dir.path().join("base"), Recipe::CoupledGrpo);
    cfg.ref_refresh_every = 2;
    cfg.run.steps = 5;
    let whole = dir.path().join("whole");
    train_dllm_grpo(&cfg, "", &toy(), &whole, &dev).unwrap();
    // Cut after iteration 1 (reference = the base) and after 3 (reference = the policy at 2):
    // neither checkpoint falls on a refresh.
    for cut in [1, 3] {
        let split = dir.path().join(format!("split-{cut}"));
        let mut first = cfg.clone();
        first.run.steps = cut;
        train_dllm_grpo(&first, "", &toy(), &split, &dev).unwrap();
        let ckpt = split.join(format!("checkpoints/step-{cut:08}"));
        assert!(ckpt.join("reference.safetensors").exists(), "{}", ckpt.display());
        train_dllm_grpo(&cfg, "", &toy(), &split, &dev).unwrap();
        assert_eq!(metrics_without_times(&whole), metrics_without_times(&split), "cut at {cut}");
    }
    let kl: Vec<f64> =
        metrics_without_times(&whole).iter().filter_map(|l| l["loss/kl"].as_f64()).collect();
    assert!(kl.iter().any(|&k| k != 0.0), "the KL sees the reference: {kl:?}");
}

#[test]
fn toy_reward_rises_under_coupled_grpo() {
    let dir = tempfile::tempdir().unwrap();
    random_base(&dir.path().join("base"));
    let mut cfg = DllmGrpoConfig {
        prompts_per_step: 2,
        group_size: Some(8),
        inner_iterations: Some(2),
        micro_batch: 16,
        ..toy_config(&dir.path().join("base"), Recipe::CoupledGrpo)
    };
    cfg.run.steps = 25;
    cfg.run.checkpoint_every = 100;
    let run = dir.path().join("run");
    train_dllm_grpo(&cfg, "", &toy(), &run, &Device::Cpu).unwrap();
    let rewards = rewards(&run);
    let first: f64 = rewards[..5].iter().sum::<f64>() / 5.0;
    let last: f64 = rewards[rewards.len() - 5..].iter().sum::<f64>() / 5.0;
    assert!(last > first + 0.1, "reward {first} -> {last}: {rewards:?}");
}

/// A run's `reward/mean`, one value per iteration.
fn rewards(run: &Path) -> Vec<f64> {
    std::fs::read_to_string(run.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .filter_map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["reward/mean"].as_f64()
        })
        .collect()
}

/// The mean `reward/mean` of a run's last `k` iterations.
fn late_reward(run: &Path, k: usize) -> f64 {
    let rewards = rewards(run);
    rewards[rewards.len() - k..].iter().sum::<f64>() / k as f64
}

/// The learnability runs' settings: 2 prompts × 8 completions, `μ` 2, stop tokens on, 12
/// iterations, no checkpoints, and the reward shuffled within groups for the null.
fn learnability_config(base: &Path, recipe: Recipe, shuffle: bool) -> DllmGrpoConfig {
    let mut cfg = DllmGrpoConfig {
        prompts_per_step: 2,
        group_size: Some(8),
        inner_iterations: Some(2),
        micro_batch: 16,
        shuffle_rewards: shuffle,
        ..toy_config(base, recipe)
    };
    cfg.decode.stop_tokens = vec![EOS_ID];
    cfg.run.steps = 12;
    cfg.run.checkpoint_every = 100;
    cfg
}

/// The learnability guard of every recipe (docs/algorithms.md §4): with stop tokens on (EOS
/// ends a completion, the rest is fill), the toy reward (the share of `'a'`) climbs clearly
/// above its shuffled-reward null, run at the same settings and seeds, within a few
/// iterations. A flipped advantage sign, a detached log-prob or misaligned masks make the real
/// run no better than, or worse than, the null.
#[test]
fn every_recipe_beats_its_shuffled_reward_null_with_stop_tokens() {
    let dir = tempfile::tempdir().unwrap();
    random_base(&dir.path().join("base"));
    let mut gaps = Vec::new();
    for &recipe in RECIPES {
        let mut late = [0.0; 2];
        for (i, shuffle) in [false, true].into_iter().enumerate() {
            let cfg = learnability_config(&dir.path().join("base"), recipe, shuffle);
            let run = dir.path().join(format!("{recipe:?}-{shuffle}"));
            train_dllm_grpo(&cfg, "", &toy(), &run, &Device::Cpu).unwrap();
            late[i] = late_reward(&run, 4);
        }
        gaps.push((recipe, late[0], late[1]));
    }
    eprintln!("late reward (real, null): {gaps:?}");
    for &(recipe, real, null) in &gaps {
        assert!(real > null + 0.1, "{recipe:?}: real {real:.3} vs null {null:.3}; all: {gaps:?}");
    }
}

/// `trainable = ["q_proj"]`: the query projections move, every other weight is saved as the
/// base's; a string that names no parameter is refused before any work, naming itself.
#[test]
fn only_the_trainable_parameters_move() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base");
    random_base(&base);
    let mut cfg = toy_config(&base, Recipe::CoupledGrpo);
    cfg.trainable = vec!["q_proj".into()];
    let run = dir.path().join("run");
    train_dllm_grpo(&cfg, "", &toy(), &run, &Device::Cpu).unwrap();
    let load = |d: &Path| DiffusionLm::from_dir(d, &LoadOptions::default()).unwrap();
    let (before, after) = (load(&base), load(&run.join("model")));
    let mut moved = Vec::new();
    for ((name, a), (name_b, b)) in before.weights().iter().zip(after.weights()) {
        assert_eq!(name, name_b);
        let diff = (a - b).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
        if name.contains("q_proj") {
            moved.push((name.clone(), diff));
        } else {
            assert_eq!(diff, 0.0, "{name} is not trainable but moved");
        }
    }
    assert!(!moved.is_empty() && moved.iter().all(|(_, d)| *d > 0.0), "{moved:?}");

    cfg.trainable = vec!["q_prj".into()];
    let err = train_dllm_grpo(&cfg, "", &toy(), &dir.path().join("bad"), &Device::Cpu)
        .unwrap_err()
        .to_string();
    assert!(err.contains("trainable") && err.contains("\"q_prj\""), "{err}");
}

#[test]
fn bad_configs_are_named() {
    let base = DllmGrpoConfig::default();
    for (cfg, field) in [
        (DllmGrpoConfig { prompts_per_step: 0, ..base.clone() }, "prompts_per_step"),
        (DllmGrpoConfig { group_size: Some(1), ..base.clone() }, "group_size"),
        (DllmGrpoConfig { inner_iterations: Some(0), ..base.clone() }, "inner_iterations"),
        (DllmGrpoConfig { micro_batch: 0, ..base.clone() }, "micro_batch"),
        // Coupled-GRPO's G is 10: at least one row of each group must be sampled.
        (DllmGrpoConfig { greedy_per_group: 10, ..base.clone() }, "greedy_per_group"),
        (
            DllmGrpoConfig {
                estimator: Some(crate::estimate::EstimatorConfig::ElboMc { draws: 0 }),
                ..base.clone()
            },
            "draws",
        ),
    ] {
        let err = cfg.resolved().unwrap_err().to_string();
        assert!(err.contains(field), "{field}: {err}");
    }
    // Presets as docs/algorithms.md §4 tabulates them.
    let p = Recipe::CoupledGrpo.parts(106);
    assert_eq!((p.inner_iterations, p.group_size), (2, 10));
    let p = Recipe::DiffuGrpo.parts(106);
    assert_eq!((p.inner_iterations, p.group_size), (12, 6));
    let p = Recipe::Espo.parts(106);
    assert_eq!(p.estimator.passes_per_row(), 4);
}

/// A cosine schedule without `total` decays over the run's optimizer steps (`run.steps · μ`),
/// whatever the run's length; an explicit `total` is kept.
#[test]
fn an_omitted_schedule_total_is_the_runs_number_of_updates() {
    use drift_core::train::LrSchedule;
    let mut cfg = DllmGrpoConfig { inner_iterations: Some(2), ..DllmGrpoConfig::default() };
    cfg.run.steps = 30;
    cfg.optim.schedule = LrSchedule::Cosine { warmup: 4, total: 0, min_ratio: 0.1 };
    let resolved = cfg.resolved().unwrap().given.optim.schedule;
    assert_eq!(resolved, LrSchedule::Cosine { warmup: 4, total: 60, min_ratio: 0.1 });
    cfg.optim.schedule = LrSchedule::Cosine { warmup: 4, total: 40, min_ratio: 0.1 };
    assert_eq!(cfg.resolved().unwrap().given.optim.schedule, cfg.optim.schedule);
}

#[test]
fn the_fill_after_a_stop_token_becomes_eos_and_is_never_scored() {
    let dir = tempfile::tempdir().unwrap();
    random_base(dir.path());
    let policy = DiffusionLm::from_dir(dir.path(), &LoadOptions::frozen()).unwrap();
    let mut cfg = toy_config(dir.path(), Recipe::CoupledGrpo);
    // Every token but the mask stops: each completion is its first token, the rest is fill.
    let mask = policy.mask_id();
    cfg.decode.stop_tokens = (0..policy.vocab_size() as u32).filter(|&t| t != mask).collect();
    let rc = cfg.resolved().unwrap();
    let batch = sample_batch(&policy, &toy(), &rc, 0).unwrap();
    let pl = batch.trajectory.prompt_len;
    let decoded = batch.trajectory.tokens.to_vec2::<u32>().unwrap();
    let scored = batch.sequences.to_vec2::<u32>().unwrap();
    for r in 0..batch.len() {
        let completion: Vec<usize> =
            (0..scored[r].len()).filter(|&j| batch.completion[r][j]).collect();
        assert_eq!(completion, vec![pl], "row {r}");
        for j in 0..scored[r].len() {
            assert_eq!(batch.fill[r][j], j > pl, "row {r} col {j}");
            let want = if j > pl { EOS_ID } else { decoded[r][j] };
            assert_eq!(scored[r][j], want, "row {r} col {j}");
        }
    }
}

#[test]
fn micro_batches_accumulate_the_whole_batch_gradient() {
    let dir = tempfile::tempdir().unwrap();
    random_base(dir.path());
    for &recipe in RECIPES {
        let mut norms = Vec::new();
        for micro_batch in [8, 3] {
            let cfg = DllmGrpoConfig { micro_batch, ..toy_config(dir.path(), recipe) };
            let rc = cfg.resolved().unwrap();
            let policy = DiffusionLm::from_dir(dir.path(), &LoadOptions::trainable()).unwrap();
            let mut opt =
                Optimizer::new(cfg.optim, ParamSet::all(policy.varmap().unwrap())).unwrap();
            let mut batch = sample_batch(&policy.detached().unwrap(), &toy(), &rc, 0).unwrap();
            // Completions of 1..=8 tokens, the rest fill: token and row shares differ.
            let pl = batch.trajectory.prompt_len;
            for r in 0..batch.len() {
                let len = [5, 1, 8, 2, 7, 3, 1, 6][r];
                let t = batch.completion[r].len();
                batch.completion[r] = (0..t).map(|j| j >= pl && j < pl + len).collect();
                batch.fill[r] = (0..t).map(|j| j >= pl + len).collect();
            }
            let mask: Vec<Vec<f32>> = batch
                .completion
                .iter()
                .map(|r| r.iter().map(|&c| f32::from(u8::from(c))).collect())
                .collect();
            batch.trajectory.completion_mask =
                candle_core::Tensor::new(mask, &Device::Cpu).unwrap();
            let (old, _) = batch_log_probs(&policy, &batch, &rc, 0, 0).unwrap();
            let reference = rc.parts.loss.kl.map(|_| old.clone());
            let r = update(&policy, &batch, Some(&old), reference.as_ref(), &rc, 0, 0, &mut opt)
                .unwrap();
            norms.push(r.step.grad_norm);
        }
        let (whole, split) = (norms[0], norms[1]);
        assert!(whole > 0.0, "{recipe:?}");
        assert!((whole - split).abs() < 1e-4 * whole, "{recipe:?}: {whole} vs {split}");
    }
}

#[test]
fn shuffled_rewards_are_a_keyed_permutation_within_each_group() {
    let rewards: Vec<f32> = (0..12).map(|i| i as f32).collect();
    let key = RngKey::new(4);
    let mut a = rewards.clone();
    super::rollout::shuffle_within_groups(&mut a, 4, key);
    assert_ne!(a, rewards, "some group moved");
    for (group, orig) in a.chunks(4).zip(rewards.chunks(4)) {
        let mut sorted = group.to_vec();
        sorted.sort_by(f32::total_cmp);
        assert_eq!(sorted, orig, "a permutation of the same group");
    }
    let mut b = rewards.clone();
    super::rollout::shuffle_within_groups(&mut b, 4, key);
    assert_eq!(a, b, "keyed");
}

/// LoRA (`lora = {rank = 2, alpha = 4}`): the toy reward rises above its shuffled-reward null
/// (the learnability guard for adapters: a detached adapter or a wrong scale fails it), only
/// the block projections move, and each moved weight is exactly the base plus
/// `(α/r) B A` with the checkpoint's adapters: an update of rank ≤ 2.
#[test]
fn lora_beats_its_null_and_moves_the_base_by_exactly_its_low_rank_update() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base");
    random_base(&base);
    let lora = crate::model::LoraConfig { rank: 2, alpha: 4.0, ..Default::default() };
    let mut late = [0.0; 2];
    for (i, shuffle) in [false, true].into_iter().enumerate() {
        let mut cfg = learnability_config(&base, Recipe::CoupledGrpo, shuffle);
        cfg.lora = Some(lora.clone());
        cfg.optim.adamw.lr = 1e-2;
        cfg.run.checkpoint_every = 12;
        let run = dir.path().join(format!("lora-{shuffle}"));
        train_dllm_grpo(&cfg, "", &toy(), &run, &Device::Cpu).unwrap();
        late[i] = late_reward(&run, 4);
    }
    eprintln!("LoRA late reward: real {:.3}, null {:.3}", late[0], late[1]);
    assert!(late[0] > late[1] + 0.1, "real {:.3} vs null {:.3}", late[0], late[1]);

    let load = |d: &Path| DiffusionLm::from_dir(d, &LoadOptions::default()).unwrap();
    let (before, after) = (load(&base), load(&dir.path().join("lora-false/model")));
    let ckpt = dir.path().join("lora-false/checkpoints/step-00000012");
    let adapters =
        drift_core::train::Checkpointer::load_tensors(&ckpt, "weights.safetensors", &Device::Cpu)
            .unwrap();
    assert!(adapters.keys().all(|n| crate::model::lora::is_adapter_tensor(n)), "{adapters:?}");
    let mut adapted = 0;
    for ((name, w0), (_, w1)) in before.weights().iter().zip(after.weights()) {
        let layer = name.strip_suffix(".weight").unwrap_or(name);
        let diff = (w1 - w0).unwrap();
        match (
            adapters.get(&format!("{layer}.lora_A.weight")),
            adapters.get(&format!("{layer}.lora_B.weight")),
        ) {
            (Some(a), Some(b)) => {
                let delta = (b.matmul(a).unwrap() * lora.scale()).unwrap();
                let moved = diff.abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
                let err = (diff - delta).unwrap().abs().unwrap().max_all().unwrap();
                let err = err.to_scalar::<f32>().unwrap();
                assert!(
                    moved > 1e-4 && err < 1e-5 * moved.max(1.0),
                    "{name}: moved {moved}, err {err}"
                );
                adapted += 1;
            }
            _ => {
                let moved = diff.abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
                assert_eq!(moved, 0.0, "{name} has no adapter but moved");
            }
        }
    }
    // Nano LLaDA: 7 projections per block, none on the head.
    assert_eq!(adapted, 7 * TinySize::Nano.spec().n_layers, "adapted layers");
}

/// With `optim.ema`, the model the run saves and scores is the EMA of the weights (as Flow-GRPO
/// evaluates), not the last iterate: the saved weights are the last checkpoint's
/// `ema.safetensors`, which differ from its training weights, and the trained evaluation is
/// the saved model's own, completion for completion.
#[test]
fn an_ema_run_saves_and_scores_the_averaged_weights() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base");
    random_base(&base);
    let mut cfg = toy_config(&base, Recipe::CoupledGrpo);
    cfg.run.steps = 4;
    cfg.optim.adamw.lr = 5e-3; // the last iterate's greedy completions then differ from the EMA's
    cfg.eval_items = 16;
    cfg.optim.ema = Some(drift_core::train::EmaConfig { decay: 0.9, every: 1 });
    let run = dir.path().join("run");
    let report = train_dllm_grpo(&cfg, "", &toy(), &run, &Device::Cpu).unwrap();

    let ckpt = run.join("checkpoints/step-00000004");
    let load =
        |file| drift_core::train::Checkpointer::load_tensors(&ckpt, file, &Device::Cpu).unwrap();
    let (ema, last) = (load("ema.safetensors"), load("weights.safetensors"));
    let saved = DiffusionLm::from_dir(run.join("model"), &LoadOptions::default()).unwrap();
    let max_diff = |a: &candle_core::Tensor, b: &candle_core::Tensor| {
        (a - b).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap()
    };
    let mut apart = 0.0f32;
    for (name, w) in saved.weights() {
        assert_eq!(max_diff(w, &ema[name]), 0.0, "{name}: the saved weight is not the EMA");
        apart = apart.max(max_diff(&ema[name], &last[name]));
    }
    assert!(apart > 1e-4, "the EMA equals the last iterate ({apart}): the test shows nothing");

    let items = toy().eval_items(cfg.eval_items);
    let score = |m: &DiffusionLm| {
        evaluate(m, &toy(), &items, &cfg.decode, cfg.eval_steps, 32).unwrap().0.reward_mean
    };
    let last_iterate = score(&saved.frozen_with_weights(last).unwrap());
    assert_eq!(score(&saved), report.trained.main.reward_mean);
    assert_ne!(last_iterate, report.trained.main.reward_mean, "the test shows nothing");
}
