//! Flow-GRPO tests on a tiny random DiT and a toy task whose reward is the image brightness.

use std::path::Path;

use candle_core::{DType, Device, Tensor};
use candle_nn::{VarBuilder, VarMap};
use drift_core::rng::RngKey;
use drift_core::train::{Optimizer, ParamSet, RunSettings};
use drift_rewards::image::Image;
use drift_rewards::reward::{Evaluation, ImageSample, Reward};
use drift_rewards::RewardError;
use drift_samplers::flow::Schedule;

use super::*;
use crate::model::{save_dit, Dit, DitConfig};

/// Prompts are token-id vectors; the task has no strict check but "bright" prompts.
pub(crate) struct ToyTask {
    eval: Vec<Vec<u32>>,
}

impl ToyTask {
    pub(crate) fn new() -> Self {
        Self { eval: (0..4).map(|i| vec![2 + i, 3, 0, 0, 0, 0, 0, 0]).collect() }
    }
}

impl ImageTask for ToyTask {
    type Prompt = Vec<u32>;
    fn train_prompt(&self, seed: u64, index: u64) -> Vec<u32> {
        let r = RngKey::new(seed).stream("toy").step(index).permutation_vec(8);
        vec![2 + r[0] % 6, 3 + r[1] % 6, 0, 0, 0, 0, 0, 0]
    }
    fn eval_prompts(&self) -> &[Vec<u32>] {
        &self.eval
    }
    fn encode(&self, prompts: &[Vec<u32>], device: &Device) -> crate::Result<Tensor> {
        let flat: Vec<u32> = prompts.iter().flatten().copied().collect();
        Ok(Tensor::from_vec(flat, (prompts.len(), 8), device)?)
    }
    fn caption(&self, p: &Vec<u32>) -> String {
        format!("{p:?}")
    }
    fn strict(&self, _: &Vec<u32>, image: &Image) -> Option<bool> {
        Some(Brightness::of(image.as_raw()) > 0.5)
    }
}

/// Mean pixel value in [0, 1]: every sample gets a distinct score.
pub(crate) struct Brightness;

impl Brightness {
    fn of(rgb: &[u8]) -> f64 {
        rgb.iter().map(|&v| f64::from(v)).sum::<f64>() / (255.0 * rgb.len() as f64)
    }
}

impl Reward<ImageSample<Vec<u32>>> for Brightness {
    fn name(&self) -> &str {
        "brightness"
    }
    fn evaluate(&self, s: &ImageSample<Vec<u32>>) -> Result<Evaluation, RewardError> {
        Ok(Evaluation::score(Self::of(&s.rgb)))
    }
}

/// A tiny DiT with every weight random (not adaLN-Zero), saved as a base model.
pub(crate) fn random_base(dir: &Path) -> DitConfig {
    let cfg = DitConfig { image_size: 16, ..DitConfig::test_tiny() };
    let varmap = VarMap::new();
    let _ = Dit::new(cfg, VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu)).unwrap();
    let mut weights = std::collections::HashMap::new();
    // Names in sorted order: the VarMap's hash order differs between maps, and the base must
    // be the same model every time it is built.
    let data = varmap.data().lock().unwrap();
    let mut names: Vec<&String> = data.keys().collect();
    names.sort();
    for (i, (name, var)) in names.into_iter().map(|n| (n, &data[n])).enumerate() {
        let noise =
            RngKey::new(7).row(i as u64).normal(var.shape(), DType::F32, &Device::Cpu).unwrap();
        weights.insert(name.clone(), (noise * 0.05).unwrap());
    }
    save_dit(dir, &cfg, &weights).unwrap();
    cfg
}

pub(crate) fn toy_config(base: &Path) -> FlowGrpoConfig {
    let mut cfg = FlowGrpoConfig {
        base: base.to_path_buf(),
        run: RunSettings { steps: 2, eval_every: 1, checkpoint_every: 1, ..Default::default() },
        prompts_per_step: 2,
        group_size: 4,
        eval_steps: 4,
        micro_batch: 3,
        eval_prompts: 2,
        diversity_prompts: 2,
        diversity_samples: 2,
        ..FlowGrpoConfig::default()
    };
    cfg.schedule.steps = 4;
    cfg
}

/// A fresh trainable policy with its optimizer, the frozen reference, the schedule and
/// iteration 0's rollout batch of `cfg`, all from the base model in `dir`.
struct Fresh {
    policy: Dit,
    reference: Dit,
    opt: Optimizer,
    schedule: Schedule,
    batch: RolloutBatch<Vec<u32>>,
}

fn fresh(dir: &Path, cfg: &FlowGrpoConfig) -> Fresh {
    let dev = Device::Cpu;
    let (policy, varmap) = crate::model::load_dit_trainable(dir, &dev).unwrap();
    let reference = crate::model::load_dit_frozen(dir, &dev).unwrap();
    let opt = Optimizer::new(cfg.optim, ParamSet::all(&varmap)).unwrap();
    let schedule = Schedule::new(&cfg.schedule).unwrap();
    let batch = sample_batch(&policy, &ToyTask::new(), &Brightness, cfg, &schedule, 0).unwrap();
    Fresh { policy, reference, opt, schedule, batch }
}

#[test]
fn first_update_is_exactly_on_policy() {
    let dir = tempfile::tempdir().unwrap();
    random_base(dir.path());
    for (micro_batch, updates) in [(3, 1), (8, 1), (2, 2)] {
        let cfg =
            FlowGrpoConfig { micro_batch, updates_per_batch: updates, ..toy_config(dir.path()) };
        let Fresh { policy, reference, mut opt, schedule, batch } = fresh(dir.path(), &cfg);
        assert!(
            batch.advantages_host.iter().all(|&a| a != 0.0),
            "distinct rewards: no masked sample"
        );
        let rows: Vec<usize> = (0..batch.len() / updates).collect();
        let r = update(&policy, &reference, &batch, &rows, &cfg, &schedule, &mut opt).unwrap();
        assert!(r.step.applied);
        assert_eq!(r.diagnostics.ratio_min, 1.0, "micro-batch {micro_batch}");
        assert_eq!(r.diagnostics.ratio_max, 1.0, "micro-batch {micro_batch}");
        assert_eq!(r.diagnostics.clip_frac, 0.0);
        // Policy = reference before the first step; the frozen reference runs candle's fused
        // kernels, the tracked policy their differentiable composition: equal to rounding.
        assert!(r.diagnostics.kl_loss < 1e-12, "kl {}", r.diagnostics.kl_loss);
        // 3 trained transitions of 4 (⌊4·0.99⌋) for every kept sample.
        assert_eq!(r.diagnostics.actions, (rows.len() * 3) as f64);
        // The weights moved, and the second update is off-policy.
        let r2 = update(&policy, &reference, &batch, &rows, &cfg, &schedule, &mut opt).unwrap();
        assert!(r2.diagnostics.ratio_max > 1.0 || r2.diagnostics.ratio_min < 1.0);
        assert!(r2.diagnostics.kl_loss > 0.0);
    }
}

#[test]
fn stacked_steps_give_the_same_update_to_rounding() {
    let dir = tempfile::tempdir().unwrap();
    random_base(dir.path());
    let mut out = Vec::new();
    for stack_steps in [false, true] {
        let cfg = FlowGrpoConfig { micro_batch: 4, stack_steps, ..toy_config(dir.path()) };
        let Fresh { policy, reference, mut opt, schedule, batch } = fresh(dir.path(), &cfg);
        let rows: Vec<usize> = (0..batch.len()).collect();
        let r = update(&policy, &reference, &batch, &rows, &cfg, &schedule, &mut opt).unwrap();
        // 3 trained steps: one pass per step, or one pass for all three (× policy, reference).
        let chunks = batch.len().div_ceil(4);
        assert_eq!(r.cost.forward_calls, chunks * if stack_steps { 1 } else { 3 } * 2);
        assert_eq!(r.cost.image_evaluations, batch.len() * 3 * 2);
        assert!((r.diagnostics.ratio_min - 1.0).abs() < 1e-5, "{stack_steps}");
        assert!((r.diagnostics.ratio_max - 1.0).abs() < 1e-5, "{stack_steps}");
        // A second update sees the moved weights: compare the policies through it.
        let r2 = update(&policy, &reference, &batch, &rows, &cfg, &schedule, &mut opt).unwrap();
        out.push((r.step.grad_norm, r2.diagnostics.ratio_mean, r2.diagnostics.kl_loss));
    }
    let ((g0, m0, k0), (g1, m1, k1)) = (out[0], out[1]);
    assert!(g0 > 0.0 && (g0 - g1).abs() <= 1e-4 * g0, "grad norm {g0} vs {g1}");
    assert!((m0 - m1).abs() < 1e-5, "second-update ratio mean {m0} vs {m1}");
    assert!(k0 > 0.0 && (k0 - k1).abs() <= 1e-3 * k0, "second-update kl {k0} vs {k1}");
}

#[test]
fn without_a_kl_term_the_reference_is_skipped_and_the_update_equals_beta_zero() {
    let dir = tempfile::tempdir().unwrap();
    random_base(dir.path());
    let mut out = Vec::new();
    for kl in [true, false] {
        let mut cfg = FlowGrpoConfig { micro_batch: 4, ..toy_config(dir.path()) };
        cfg.loss.kl = if kl {
            cfg.loss.kl.map(|k| drift_core::loss::KlPenalty { beta: 0.0, ..k })
        } else {
            None
        };
        let Fresh { policy, reference, mut opt, schedule, batch } = fresh(dir.path(), &cfg);
        let rows: Vec<usize> = (0..batch.len()).collect();
        let r = update(&policy, &reference, &batch, &rows, &cfg, &schedule, &mut opt).unwrap();
        let models = if kl { 2 } else { 1 };
        assert_eq!(r.cost.image_evaluations, batch.len() * 3 * models);
        let r2 = update(&policy, &reference, &batch, &rows, &cfg, &schedule, &mut opt).unwrap();
        out.push((r.step.grad_norm, r2.diagnostics.ratio_mean));
    }
    let ((g0, m0), (g1, m1)) = (out[0], out[1]);
    assert!(g0 > 0.0 && (g0 - g1).abs() <= 1e-6 * g0, "grad norm {g0} vs {g1}");
    assert!((m0 - m1).abs() < 1e-7, "second-update ratio mean {m0} vs {m1}");
}

#[test]
fn zero_advantage_samples_never_reach_the_loss() {
    let dir = tempfile::tempdir().unwrap();
    random_base(dir.path());
    let dev = Device::Cpu;
    let cfg = toy_config(dir.path());
    let (policy, varmap) = crate::model::load_dit_trainable(dir.path(), &dev).unwrap();
    let reference = crate::model::load_dit_frozen(dir.path(), &dev).unwrap();
    let mut opt = Optimizer::new(cfg.optim, ParamSet::all(&varmap)).unwrap();
    let schedule = Schedule::new(&cfg.schedule).unwrap();
    let mut batch =
        sample_batch(&reference, &ToyTask::new(), &Brightness, &cfg, &schedule, 0).unwrap();
    // The first group's advantages are zero (as for equal rewards); the rest unchanged.
    let mut adv = batch.advantages_host.clone();
    adv[..4].iter_mut().for_each(|a| *a = 0.0);
    batch.advantages = Tensor::new(adv.as_slice(), &dev).unwrap();
    batch.advantages_host = adv;
    let rows: Vec<usize> = (0..batch.len()).collect();
    let r = update(&policy, &reference, &batch, &rows, &cfg, &schedule, &mut opt).unwrap();
    assert_eq!(r.diagnostics.actions, 4.0 * 3.0, "only the second group's 4 samples × 3 steps");
    // All masked: no optimizer step at all, weights untouched.
    let before = opt.params().snapshot().unwrap();
    batch.advantages = batch.advantages.zeros_like().unwrap();
    batch.advantages_host = vec![0.0; batch.len()];
    let r = update(&policy, &reference, &batch, &rows, &cfg, &schedule, &mut opt).unwrap();
    assert!(!r.step.applied);
    for (name, t) in opt.params().snapshot().unwrap() {
        let d = (t - &before[&name])
            .unwrap()
            .abs()
            .unwrap()
            .max_all()
            .unwrap()
            .to_scalar::<f32>()
            .unwrap();
        assert_eq!(d, 0.0, "{name} moved");
    }
}

/// Every tensor of the two runs' saved models is bit-identical.
fn assert_same_weights(a: &FlowGrpoReport, b: &FlowGrpoReport) {
    let load = |r: &FlowGrpoReport| {
        candle_core::safetensors::load(r.run.model_dir.join("model.safetensors"), &Device::Cpu)
            .unwrap()
    };
    let (wa, wb) = (load(a), load(b));
    for (name, t) in &wa {
        let d =
            (t - &wb[name]).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
        assert_eq!(d, 0.0, "{name} differs from the uninterrupted run");
    }
}

#[test]
fn a_resumed_run_or_one_cut_by_its_time_budget_equals_an_uninterrupted_one() {
    let base = tempfile::tempdir().unwrap();
    random_base(base.path());
    let task = ToyTask::new();
    let mut cfg3 = toy_config(base.path());
    cfg3.run.steps = 3;
    let whole = tempfile::tempdir().unwrap();
    let a = train_flow_grpo(&cfg3, "", &task, &Brightness, whole.path(), &Device::Cpu).unwrap();
    let split = tempfile::tempdir().unwrap();
    let mut cfg2 = cfg3.clone();
    cfg2.run.steps = 2;
    train_flow_grpo(&cfg2, "", &task, &Brightness, split.path(), &Device::Cpu).unwrap();
    // Resume from an older checkpoint than the newest log lines (as after a kill between a
    // log line and its checkpoint): iteration 2 is run again and logged once.
    std::fs::remove_dir_all(split.path().join("checkpoints/step-00000002")).unwrap();
    let b = train_flow_grpo(&cfg3, "", &task, &Brightness, split.path(), &Device::Cpu).unwrap();
    let steps_logged = |dir: &Path| -> Vec<u64> {
        drift_core::metrics::read_metrics(&dir.join("prompts.jsonl"))
            .unwrap()
            .iter()
            .map(|r| r["step"].as_u64().unwrap())
            .collect()
    };
    assert_eq!(steps_logged(split.path()), steps_logged(whole.path()));
    assert_eq!(steps_logged(whole.path()).len(), 3 * 2, "3 iterations of 2 prompts");
    // The resumed run reads its base evaluation back from the checkpoint (JSON).
    assert!((a.base.reward_mean - b.base.reward_mean).abs() < 1e-12);
    assert_eq!(a.base.strict, b.base.strict);
    assert_eq!(a.base.samples, b.base.samples);
    assert_same_weights(&a, &b);
    // A budget spent before the first iteration ends: the run stops after it, checkpointed,
    // evaluated and saved, and running it again completes it exactly.
    let cut = tempfile::tempdir().unwrap();
    let mut budgeted = cfg3.clone();
    budgeted.run.max_seconds = Some(1e-9);
    let first =
        train_flow_grpo(&budgeted, "", &task, &Brightness, cut.path(), &Device::Cpu).unwrap();
    assert_eq!(first.run.steps, 1);
    assert!(first.run.model_dir.join("model.safetensors").exists() && first.grid_after.exists());
    assert!(cut.path().join("checkpoints/step-00000001").is_dir());
    let c = train_flow_grpo(&cfg3, "", &task, &Brightness, cut.path(), &Device::Cpu).unwrap();
    assert_eq!((a.run.steps, c.run.steps), (3, 3));
    assert_same_weights(&a, &c);
    // The iteration lines agree exactly (timings aside): none lost or repeated by the resume.
    let iterations = |p: &Path| -> Vec<Vec<(String, String)>> {
        let rows = drift_core::metrics::read_metrics(p).unwrap();
        rows.into_iter()
            .filter(|r| r.contains_key("reward/mean"))
            .map(|r| {
                r.into_iter()
                    .filter(|(k, _)| !k.starts_with("time"))
                    .map(|(k, v)| (k, v.to_string()))
                    .collect()
            })
            .collect()
    };
    let (ia, ib) = (iterations(&a.run.metrics), iterations(&b.run.metrics));
    assert_eq!(ia.len(), 3);
    assert_eq!(ia, ib);
    assert!(whole.path().join("curves.png").exists());
    assert!(a.grid_before.exists() && a.grid_after.exists());
    assert!(a.base.diversity.unwrap() > 0.0);
}

/// Brightness negated: the same reward with its direction flipped, which flips the sign of
/// every advantage.
pub(crate) struct Darkness;

impl Reward<ImageSample<Vec<u32>>> for Darkness {
    fn name(&self) -> &str {
        "darkness"
    }
    fn evaluate(&self, s: &ImageSample<Vec<u32>>) -> Result<Evaluation, RewardError> {
        Ok(Evaluation::score(-Brightness::of(&s.rgb)))
    }
}

/// Held-out mean brightness before and after 8 Flow-GRPO iterations on the tiny random DiT
/// with `reward` (optionally shuffled within groups: the null control).
fn learn_brightness(reward: &ImageReward<Vec<u32>>, shuffle_rewards: bool) -> (f64, f64) {
    let base = tempfile::tempdir().unwrap();
    random_base(base.path());
    let mut cfg = FlowGrpoConfig {
        prompts_per_step: 2,
        group_size: 6,
        micro_batch: 12,
        shuffle_rewards,
        ..toy_config(base.path())
    };
    cfg.run.steps = 8;
    cfg.run.eval_every = 100;
    cfg.optim.adamw.lr = 3e-3;
    cfg.optim.ema = None;
    cfg.loss.kl = None;
    cfg.loss.surrogate = drift_core::loss::Surrogate::PpoClip { eps_low: 0.2, eps_high: 0.2 };
    let run = tempfile::tempdir().unwrap();
    let r = train_flow_grpo(&cfg, "", &ToyTask::new(), reward, run.path(), &Device::Cpu).unwrap();
    let bright = |e: &EvalReport| e.reward_mean.abs();
    (bright(&r.base), bright(&r.trained))
}

/// The learnability guard: a trivially learnable reward (mean brightness) rises clearly above
/// its shuffled-reward null within 8 iterations, and falls when its direction is flipped. A
/// sign, detach or alignment bug between samples, advantages and log-probs breaks the first
/// assertion (checked by flipping the advantage's sign in `update`).
#[test]
fn brightness_is_learned_above_its_shuffled_null_and_unlearned_when_flipped() {
    let (base, real) = learn_brightness(&Brightness, false);
    let (null_base, null) = learn_brightness(&Brightness, true);
    let (_, flipped) = learn_brightness(&Darkness, false);
    assert!((base - null_base).abs() < 1e-6, "same base and noise: {base} vs {null_base}");
    assert!(
        real > null + 0.02 && real > base + 0.02,
        "brightness: base {base:.4}, real {real:.4}, shuffled null {null:.4}"
    );
    assert!(flipped < base - 0.02, "flipped reward: base {base:.4} → {flipped:.4}");
}

#[test]
fn the_sd35_preset_is_flow_grpos_geneval_recipe_and_validates() {
    let c = FlowGrpoConfig::flow_grpo_sd35();
    c.validate().unwrap();
    assert_eq!((c.prompts_per_step, c.group_size, c.updates_per_batch), (48, 24, 2));
    assert_eq!(c.advantage.scale, drift_core::advantage::Scale::BatchStd);
    assert_eq!((c.guidance, c.optim.adamw.lr, c.rollout.window), (4.5, 3e-4, None));
    let d = FlowGrpoConfig::default();
    d.validate().unwrap();
    assert_eq!(d.rollout.window, Some(drift_samplers::flow::Window { start: 0, len: 3 }));
}

#[test]
fn category_rows_and_the_overall_mean_over_categories() {
    let names = [Some("a"), Some("b"), Some("a"), Some("a"), None];
    let rewards = [1.0, 0.5, 0.0, 0.5, 9.0];
    let checks = [Some(true), Some(false), Some(false), Some(true), Some(true)];
    let rows = category_scores(&names, &rewards, &checks);
    assert_eq!(rows.len(), 2);
    assert_eq!((rows[0].name.as_str(), rows[0].samples), ("a", 3));
    assert!((rows[0].strict.unwrap() - 2.0 / 3.0).abs() < 1e-12);
    assert!((rows[0].reward_mean - 0.5).abs() < 1e-12);
    assert_eq!((rows[1].name.as_str(), rows[1].samples, rows[1].strict), ("b", 1, Some(0.0)));
    assert!(category_scores(&[None, None], &[1.0, 0.0], &[None, None]).is_empty());
}

#[test]
fn bad_configs_are_named() {
    let base = FlowGrpoConfig::default();
    let mut cps = base.clone();
    cps.rollout.step = drift_samplers::flow::StepKind::Cps { noise_level: 0.7 };
    assert!(cps.loss.kl.is_some());
    let cases: Vec<(FlowGrpoConfig, &str)> = vec![
        (FlowGrpoConfig { group_size: 1, ..base.clone() }, "group_size"),
        (FlowGrpoConfig { train_fraction: 0.0, ..base.clone() }, "train_fraction"),
        (
            FlowGrpoConfig {
                rollout: drift_samplers::flow::RolloutConfig {
                    step: drift_samplers::flow::StepKind::Ode,
                    ..Default::default()
                },
                ..base.clone()
            },
            "rollout.step",
        ),
        (FlowGrpoConfig { updates_per_batch: 0, ..base.clone() }, "updates_per_batch"),
        (cps.clone(), "kl_std"),
    ];
    for (cfg, field) in cases {
        let e = cfg.validate().unwrap_err().to_string();
        assert!(e.contains(field), "{e}");
    }
    // CPS has no σ_t: its KL needs the transition std, or no KL at all.
    FlowGrpoConfig { kl_std: super::config::KlStd::Transition, ..cps.clone() }.validate().unwrap();
    let mut no_kl = cps;
    no_kl.loss.kl = None;
    no_kl.validate().unwrap();
    let e = shapes_reward(&[RewardTerm::named("clip", 1.0)]).err().unwrap().to_string();
    assert!(e.contains("rewards.name") && e.contains("geneval"), "{e}");
}

#[test]
fn a_schedule_without_total_decays_over_the_runs_optimizer_steps() {
    use drift_core::train::LrSchedule;
    let mut cfg = FlowGrpoConfig { inner_epochs: 2, updates_per_batch: 3, ..Default::default() };
    cfg.run.steps = 5;
    cfg.optim.schedule = LrSchedule::Cosine { warmup: 2, total: 0, min_ratio: 0.1 };
    cfg.validate().unwrap();
    assert_eq!(cfg.updates(), 30);
    let filled = LrSchedule::Cosine { warmup: 2, total: 30, min_ratio: 0.1 };
    assert_eq!(cfg.optim_over_run().schedule, filled);
    // An explicit total is the user's.
    cfg.optim.schedule = LrSchedule::Linear { warmup: 0, total: 7 };
    assert_eq!(cfg.optim_over_run().schedule, cfg.optim.schedule);
}

/// `trainable = ["attn"]`: the attention projections move, every other weight stays the base's
/// (up to the EMA's rounding); a string that matches no parameter is refused by name.
#[test]
fn only_the_trainable_parameters_move() {
    let base = tempfile::tempdir().unwrap();
    random_base(base.path());
    let mut cfg = toy_config(base.path());
    cfg.trainable = vec!["attn".into()];
    let out = tempfile::tempdir().unwrap();
    let r =
        train_flow_grpo(&cfg, "", &ToyTask::new(), &Brightness, out.path(), &Device::Cpu).unwrap();
    let load = |p: &Path| candle_core::safetensors::load(p.join("model.safetensors"), &Device::Cpu);
    let (before, after) = (load(base.path()).unwrap(), load(&r.run.model_dir).unwrap());
    let (mut moved, mut kept) = (0, 0);
    for (name, t) in &before {
        let other = after.get(name).unwrap_or_else(|| panic!("{name} not in {:?}", after.keys()));
        let d = (t - other).unwrap().abs().unwrap().max_all().unwrap();
        let d = d.to_scalar::<f32>().unwrap();
        if name.contains("attn") {
            assert!(d > 1e-6, "{name} did not move ({d})");
            moved += 1;
        } else {
            assert!(d < 1e-6, "{name} moved by {d}");
            kept += 1;
        }
    }
    assert!(moved > 0 && kept > moved, "{moved} moved, {kept} kept");
    let mut bad = toy_config(base.path());
    bad.trainable = vec!["atn".into()];
    let err = train_flow_grpo(&bad, "", &ToyTask::new(), &Brightness, out.path(), &Device::Cpu)
        .expect_err("an unknown name is refused");
    assert!(err.to_string().contains("trainable") && err.to_string().contains("\"atn\""), "{err}");
}
