//! Integration tests of the training plumbing (issue: optimizer, clipping, schedules, EMA,
//! checkpoints with exact resume, metrics), on a small linear regression model.

use std::path::Path;

use candle_core::{DType, Device, Tensor};
use candle_nn::{Init, VarMap};
use drift_core::metrics::{plot_metrics, read_metrics, MetricsWriter};
use drift_core::rng::RngKey;
use drift_core::train::{
    verify, AdamWConfig, CheckpointMeta, Checkpointer, EmaConfig, Grads, LrSchedule, OptimConfig,
    Optimizer, ParamSet, Resumed, Run, RunSettings, SkipReason,
};

const DIM: usize = 8;
const BATCH: usize = 32;

/// `y = x·w* + 0.5` with `w*_j = (j − 3.5)/4`, `x` drawn under the step's key.
fn data(seed: u64, step: u64, rows: std::ops::Range<u64>) -> (Tensor, Tensor) {
    let dev = Device::Cpu;
    let rows: Vec<u64> = rows.collect();
    let key = RngKey::new(seed).stream("regression").step(step);
    let x = key.normal_rows(&rows, DIM, DType::F32, &dev).unwrap();
    let w: Vec<f32> = (0..DIM).map(|j| (j as f32 - 3.5) / 4.0).collect();
    let w = Tensor::from_vec(w, (DIM, 1), &dev).unwrap();
    let y = (x.matmul(&w).unwrap() + 0.5).unwrap();
    (x, y)
}

struct Model {
    varmap: VarMap,
    w: Tensor,
    b: Tensor,
}

fn model() -> Model {
    let varmap = VarMap::new();
    // Deterministic initial values (VarMap's random init would make runs differ).
    let w = varmap.get((DIM, 1), "w", Init::Const(0.1), DType::F32, &Device::Cpu).unwrap();
    let b = varmap.get(1, "b", Init::Const(0.0), DType::F32, &Device::Cpu).unwrap();
    Model { varmap, w, b }
}

fn mse(m: &Model, x: &Tensor, y: &Tensor) -> Tensor {
    let pred = x.matmul(&m.w).unwrap().broadcast_add(&m.b).unwrap();
    pred.sub(y).unwrap().sqr().unwrap().mean_all().unwrap()
}

fn optim_cfg() -> OptimConfig {
    OptimConfig {
        adamw: AdamWConfig { lr: 0.05, weight_decay: 1e-3, ..AdamWConfig::default() },
        schedule: LrSchedule::Cosine { warmup: 2, total: 100, min_ratio: 0.1 },
        max_grad_norm: Some(1.0),
        ema: Some(EmaConfig { decay: 0.9, every: 2 }),
        max_weight_growth: 2.0,
    }
}

/// Trains `steps` steps from `start`, returning the optimizer.
fn train(m: &Model, opt: &mut Optimizer, start: u64, steps: u64, seed: u64) -> Vec<f64> {
    let mut losses = Vec::new();
    for step in start..start + steps {
        let (x, y) = data(seed, step, 0..BATCH as u64);
        let loss = mse(m, &x, &y);
        let grads = Grads::from_store(&loss.backward().unwrap(), opt.params(), 1.0).unwrap();
        let value = f64::from(loss.to_scalar::<f32>().unwrap());
        let report = opt.step(value, grads).unwrap();
        assert!(report.applied);
        losses.push(value);
    }
    losses
}

fn values(m: &Model, opt: &Optimizer) -> Vec<Vec<f32>> {
    let mut out =
        vec![m.w.flatten_all().unwrap().to_vec1::<f32>().unwrap(), m.b.to_vec1::<f32>().unwrap()];
    let ema = opt.ema().unwrap().weights();
    let mut names: Vec<&String> = ema.keys().collect();
    names.sort();
    for n in names {
        out.push(ema[n].flatten_all().unwrap().to_vec1::<f32>().unwrap());
    }
    let moments = opt.adamw().state_tensors().unwrap();
    let mut names: Vec<&String> = moments.keys().collect();
    names.sort();
    for n in names {
        let t = moments[n].to_dtype(DType::F32).unwrap();
        out.push(t.flatten_all().unwrap().to_vec1::<f32>().unwrap());
    }
    out
}

fn meta(step: u64, cursor: u64) -> CheckpointMeta {
    CheckpointMeta {
        step,
        seed: 7,
        config: "lr = 0.05".into(),
        metrics_cursor: cursor,
        extra: serde_json::Value::Null,
        optimizer_step: 0,
        skipped_steps: 0,
    }
}

#[test]
fn resume_is_bit_identical_to_an_uninterrupted_run() {
    let dir = tempfile::tempdir().unwrap();
    // Straight: 6 steps.
    let a = model();
    let mut opt_a = Optimizer::new(optim_cfg(), ParamSet::all(&a.varmap)).unwrap();
    train(&a, &mut opt_a, 0, 6, 7);
    // Interrupted: 3 steps, checkpoint, a fresh model and optimizer, load, 3 more.
    let b = model();
    let mut opt_b = Optimizer::new(optim_cfg(), ParamSet::all(&b.varmap)).unwrap();
    train(&b, &mut opt_b, 0, 3, 7);
    let ckpt = Checkpointer::new(dir.path(), 3).unwrap();
    let saved = ckpt.save(&opt_b, &meta(3, 0)).unwrap();
    drop((b, opt_b));
    let c = model();
    let mut opt_c = Optimizer::new(optim_cfg(), ParamSet::all(&c.varmap)).unwrap();
    let restored = Checkpointer::load(&saved, &mut opt_c).unwrap();
    assert_eq!(restored.step, 3);
    assert_eq!(opt_c.step_count(), 3, "the schedule position is restored");
    train(&c, &mut opt_c, restored.step, 3, restored.seed);
    assert_eq!(values(&a, &opt_a), values(&c, &opt_c), "weights, EMA and moments bit for bit");
}

#[test]
fn four_micro_batches_equal_one_batch_of_four_times_the_size() {
    let m = model();
    let params = ParamSet::all(&m.varmap);
    let (x, y) = data(1, 0, 0..4 * BATCH as u64);
    let full = Grads::from_store(&mse(&m, &x, &y).backward().unwrap(), &params, 1.0).unwrap();
    let mut acc = Grads::default();
    for k in 0..4u64 {
        // Each micro-batch's mean loss weighs 1/4 of the batch mean.
        let (x, y) = data(1, 0, k * BATCH as u64..(k + 1) * BATCH as u64);
        let g = Grads::from_store(&mse(&m, &x, &y).backward().unwrap(), &params, 0.25).unwrap();
        acc.accumulate(g).unwrap();
    }
    for (name, g) in full.iter() {
        let diff = g.sub(acc.get(name).unwrap()).unwrap().abs().unwrap();
        let max = diff.flatten_all().unwrap().max(0).unwrap().to_scalar::<f32>().unwrap();
        assert!(max < 1e-6, "{name}: max diff {max}");
    }
}

#[test]
fn clipping_scales_to_the_configured_norm_and_reports_the_pre_clip_norm() {
    let dev = Device::Cpu;
    let mut map = std::collections::BTreeMap::new();
    map.insert("a".to_string(), Tensor::new(&[3.0f32, 0.0], &dev).unwrap());
    map.insert("b".to_string(), Tensor::new(&[[4.0f32]], &dev).unwrap());
    let mut g = Grads::from_map(map.clone());
    let pre = g.clip_global_norm(0.5).unwrap();
    assert!((pre - 5.0).abs() < 1e-6);
    assert!((g.global_norm().unwrap() - 0.5).abs() < 1e-6);
    let a = g.get("a").unwrap().to_vec1::<f32>().unwrap();
    assert!((a[0] - 0.3).abs() < 1e-6, "direction kept: 3·0.5/5");
    // Under the threshold nothing changes.
    let mut g = Grads::from_map(map);
    g.clip_global_norm(10.0).unwrap();
    assert_eq!(g.get("a").unwrap().to_vec1::<f32>().unwrap(), vec![3.0, 0.0]);
}

#[test]
fn a_nan_step_leaves_everything_unchanged_and_the_next_step_works() {
    let m = model();
    let mut opt = Optimizer::new(optim_cfg(), ParamSet::all(&m.varmap)).unwrap();
    train(&m, &mut opt, 0, 2, 3);
    let before = values(&m, &opt);
    // A NaN gradient (a poisoned input row).
    let (x, y) = data(3, 2, 0..BATCH as u64);
    let x = x.slice_assign(&[0..1, 0..1], &Tensor::new(&[[f32::NAN]], &Device::Cpu).unwrap());
    let loss = mse(&m, &x.unwrap(), &y);
    let grads = Grads::from_store(&loss.backward().unwrap(), opt.params(), 1.0).unwrap();
    let report = opt.step(0.0, grads).unwrap();
    assert_eq!(report.skipped, Some(SkipReason::NonFiniteGradient));
    // A NaN loss value.
    let (x, y) = data(3, 2, 0..BATCH as u64);
    let grads = Grads::from_store(&mse(&m, &x, &y).backward().unwrap(), opt.params(), 1.0);
    let report = opt.step(f64::NAN, grads.unwrap()).unwrap();
    assert_eq!(report.skipped, Some(SkipReason::NonFiniteLoss));
    assert_eq!(values(&m, &opt), before, "weights, EMA and moments untouched");
    assert_eq!((opt.step_count(), opt.skipped_count()), (2, 2));
    let losses = train(&m, &mut opt, 2, 1, 3);
    assert!(losses[0].is_finite());
    assert_ne!(values(&m, &opt), before);
}

#[test]
fn a_step_that_blows_the_weights_up_is_rejected_like_a_nan_step() {
    let m = model();
    // lr 1e30: one finite gradient would put every weight near 1e30 (and the square sums past
    // f32's range), the case a misconfigured run applied once and then exited 0.
    let cfg = OptimConfig { adamw: AdamWConfig { lr: 1e30, ..optim_cfg().adamw }, ..optim_cfg() };
    let mut opt = Optimizer::new(cfg, ParamSet::all(&m.varmap)).unwrap();
    let before = values(&m, &opt);
    let (x, y) = data(3, 0, 0..BATCH as u64);
    let loss = mse(&m, &x, &y);
    let value = f64::from(loss.to_scalar::<f32>().unwrap());
    let grads = Grads::from_store(&loss.backward().unwrap(), opt.params(), 1.0).unwrap();
    let report = opt.step(value, grads).unwrap();
    assert_eq!(report.skipped, Some(SkipReason::WeightBlowUp));
    assert!(report.grad_norm.is_finite());
    assert_eq!(values(&m, &opt), before, "weights, EMA and moments untouched");
    assert_eq!((opt.step_count(), opt.skipped_count()), (0, 1));
    // Adam's first step moves every weight by exactly lr: at a constant lr 0.5 the 0.1 weights
    // become 0.6 or −0.4 (the norm grows at least 4×), past the default factor 2; inf turns
    // the check off.
    for (growth, applied) in [(2.0, false), (f64::INFINITY, true)] {
        let adamw = AdamWConfig { lr: 0.5, ..optim_cfg().adamw };
        let schedule = LrSchedule::Constant;
        let cfg = OptimConfig { max_weight_growth: growth, adamw, schedule, ..optim_cfg() };
        let mut opt = Optimizer::new(cfg, ParamSet::all(&m.varmap)).unwrap();
        let (x, y) = data(3, 0, 0..BATCH as u64);
        let (_, report) = opt.minimize(&mse(&m, &x, &y)).unwrap();
        assert_eq!(report.applied, applied, "max_weight_growth {growth}");
    }
    let bad = OptimConfig { max_weight_growth: 1.0, ..optim_cfg() };
    let err = Optimizer::new(bad, ParamSet::all(&m.varmap)).unwrap_err().to_string();
    assert!(err.contains("optim.max_weight_growth"), "{err}");
}

#[test]
fn truncated_or_tampered_checkpoints_are_refused_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let m = model();
    let mut opt = Optimizer::new(optim_cfg(), ParamSet::all(&m.varmap)).unwrap();
    train(&m, &mut opt, 0, 1, 1);
    let ckpt = Checkpointer::new(dir.path(), 5).unwrap();
    let good = ckpt.save(&opt, &meta(1, 0)).unwrap();
    verify(&good).unwrap();
    // Tampered: one byte of the weights flipped.
    let tampered = ckpt.save(&opt, &meta(2, 0)).unwrap();
    let path = tampered.join("weights.safetensors");
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01;
    std::fs::write(&path, bytes).unwrap();
    let msg = Checkpointer::load(&tampered, &mut opt).unwrap_err().to_string();
    assert!(msg.contains("weights.safetensors") && msg.contains("tampered"), "{msg}");
    // Truncated optimizer state.
    let truncated = ckpt.save(&opt, &meta(3, 0)).unwrap();
    let path = truncated.join("optimizer.safetensors");
    let len = std::fs::metadata(&path).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(len / 2).unwrap();
    let msg = verify(&truncated).unwrap_err().to_string();
    assert!(msg.contains("optimizer.safetensors") && msg.contains("truncated"), "{msg}");
    // The newest valid one is found, and the rejected ones are reported.
    let (latest, rejected) = ckpt.latest_valid().unwrap();
    assert_eq!(latest.unwrap(), good);
    assert_eq!(rejected.len(), 2);
}

#[test]
fn keep_last_prunes_old_checkpoints() {
    let dir = tempfile::tempdir().unwrap();
    let m = model();
    let opt = Optimizer::new(optim_cfg(), ParamSet::all(&m.varmap)).unwrap();
    let ckpt = Checkpointer::new(dir.path(), 2).unwrap();
    for s in 1..=4 {
        ckpt.save(&opt, &meta(s, 0)).unwrap();
    }
    let steps: Vec<u64> = ckpt.list().unwrap().into_iter().map(|(s, _)| s).collect();
    assert_eq!(steps, vec![3, 4]);
}

/// The child side of the kill test: saves large checkpoints in a loop until killed.
#[test]
fn child_process_saving_checkpoints_forever() {
    let Ok(dir) = std::env::var("DRIFT_TEST_CKPT_CHILD_DIR") else { return };
    let varmap = VarMap::new();
    varmap.get((2048, 2048), "big", Init::Const(0.5), DType::F32, &Device::Cpu).unwrap();
    let opt = Optimizer::new(OptimConfig::default(), ParamSet::all(&varmap)).unwrap();
    let ckpt = Checkpointer::new(&dir, 2).unwrap();
    for step in 1.. {
        ckpt.save(&opt, &meta(step, 0)).unwrap();
        std::fs::write(Path::new(&dir).join("progress"), step.to_string()).unwrap();
    }
}

#[test]
fn kill_during_save_leaves_the_previous_checkpoint_loadable() {
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    for delay_ms in [0u64, 37, 91] {
        let mut child = std::process::Command::new(&exe)
            .args(["--exact", "child_process_saving_checkpoints_forever", "--nocapture"])
            .env("DRIFT_TEST_CKPT_CHILD_DIR", dir.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Wait for at least one complete checkpoint, then kill mid-way through a later save.
        let progress = dir.path().join("progress");
        let t0 = std::time::Instant::now();
        while !progress.exists() {
            assert!(t0.elapsed().as_secs() < 60, "the child never saved");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let ckpt = Checkpointer::new(dir.path(), 2).unwrap();
        let (latest, rejected) = ckpt.latest_valid().unwrap();
        assert!(rejected.is_empty(), "every listed checkpoint is complete: {rejected:?}");
        let latest = latest.expect("a checkpoint survives");
        let varmap = VarMap::new();
        varmap.get((2048, 2048), "big", Init::Const(0.0), DType::F32, &Device::Cpu).unwrap();
        let mut opt = Optimizer::new(OptimConfig::default(), ParamSet::all(&varmap)).unwrap();
        Checkpointer::load(&latest, &mut opt).unwrap();
        let big = &varmap.data().lock().unwrap()["big"];
        let v = big.as_tensor().mean_all().unwrap().to_scalar::<f32>().unwrap();
        assert_eq!(v, 0.5);
        std::fs::remove_file(&progress).unwrap();
    }
}

#[test]
fn end_to_end_regression_reaches_target_loss_with_jsonl_and_png() {
    let dir = tempfile::tempdir().unwrap();
    let m = model();
    let cfg = OptimConfig {
        adamw: AdamWConfig { lr: 0.05, weight_decay: 0.0, ..AdamWConfig::default() },
        schedule: LrSchedule::Cosine { warmup: 5, total: 300, min_ratio: 0.1 },
        max_grad_norm: Some(1.0),
        ema: Some(EmaConfig { decay: 0.9, every: 1 }),
        max_weight_growth: 2.0,
    };
    let mut opt = Optimizer::new(cfg, ParamSet::all(&m.varmap)).unwrap();
    let mut log = MetricsWriter::create(dir.path().join("metrics.jsonl")).unwrap();
    let mut last = f64::INFINITY;
    for step in 0..300u64 {
        let (x, y) = data(11, step, 0..BATCH as u64);
        let loss = mse(&m, &x, &y);
        let value = f64::from(loss.to_scalar::<f32>().unwrap());
        let grads = Grads::from_store(&loss.backward().unwrap(), opt.params(), 1.0).unwrap();
        let r = opt.step(value, grads).unwrap();
        log.log(step, &[("loss/total", value), ("grad/norm", r.grad_norm), ("lr", r.lr)]).unwrap();
        last = value;
    }
    // The initial loss is ≈ Σ(w* − 0.1)² + 0.25 ≈ 1.7; the target is 1e-3.
    assert!(last < 1e-3, "final loss {last}");
    let ema_loss = {
        let (x, y) = data(11, 999, 0..BATCH as u64);
        let ema = opt.ema().unwrap();
        let l = ema.with_weights(opt.params(), || mse(&m, &x, &y)).unwrap();
        f64::from(l.to_scalar::<f32>().unwrap())
    };
    assert!(ema_loss < 1e-2, "EMA weights evaluate well too: {ema_loss}");
    let rows = read_metrics(log.path()).unwrap();
    assert_eq!(rows.len(), 300);
    assert!(rows[0].contains_key("loss/total") && rows[0].contains_key("grad/norm"));
    let png = dir.path().join("curves.png");
    let plotted = plot_metrics(log.path(), &[], &png).unwrap();
    assert_eq!(plotted, vec!["grad/norm", "loss/total", "lr"], "in name order");
    if let Ok(keep) = std::env::var("DRIFT_KEEP_PLOT") {
        std::fs::copy(&png, keep).unwrap();
    }
    let img = image::open(&png).unwrap().to_rgb8();
    assert_eq!(img.width(), 900);
    // Something besides the white background and grey axes was drawn: the curve colour.
    assert!(img.pixels().any(|p| p.0 == [31, 119, 180]));
    let err = plot_metrics(log.path(), &["reward/mean"], &png).unwrap_err().to_string();
    assert!(err.contains("reward/mean"), "{err}");
}

#[test]
fn plot_refuses_more_panels_than_fit_and_draws_the_most_that_do() {
    use drift_core::metrics::MAX_PANELS;
    let dir = tempfile::tempdir().unwrap();
    let line = |n: usize| {
        let fields: Vec<String> = (0..n).map(|k| format!("\"m{k:04}\":{k}")).collect();
        format!("{{\"step\":0,{}}}\n{{\"step\":1,{}}}\n", fields.join(","), fields.join(","))
    };
    let png = dir.path().join("c.png");
    let many = dir.path().join("many.jsonl");
    std::fs::write(&many, line(20_000)).unwrap();
    let err = plot_metrics(&many, &[], &png).unwrap_err().to_string();
    assert!(err.contains("20000 metrics") && err.contains("--keys"), "{err}");
    assert!(!png.exists(), "nothing is written when the plot is refused");
    let fits = dir.path().join("fits.jsonl");
    std::fs::write(&fits, line(MAX_PANELS)).unwrap();
    assert_eq!(plot_metrics(&fits, &[], &png).unwrap().len(), MAX_PANELS);
    let img = image::open(&png).unwrap().to_rgb8();
    assert_eq!(img.height() as usize, 240 * MAX_PANELS);
}

#[test]
fn metrics_resume_truncates_to_the_checkpoint_cursor() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.jsonl");
    let mut w = MetricsWriter::create(&path).unwrap();
    w.log(0, &[("a", 1.0)]).unwrap();
    let cursor = w.cursor();
    w.log(1, &[("a", f64::NAN)]).unwrap(); // logged after the checkpoint, then the run died
    drop(w);
    let mut w = MetricsWriter::open(&path, Some(cursor)).unwrap();
    w.log(1, &[("a", 2.0)]).unwrap();
    let rows = read_metrics(&path).unwrap();
    let steps: Vec<u64> = rows.iter().map(|r| r["step"].as_u64().unwrap()).collect();
    assert_eq!(steps, vec![0, 1]);
    assert_eq!(rows[1]["a"].as_f64(), Some(2.0));
    assert!(MetricsWriter::open(&path, Some(10_000)).is_err());
}

/// Runs the regression on the run skeleton in `dir` up to `steps`, the way every trainer's
/// loop is written; returns how it started.
fn skeleton_run(dir: &Path, m: &Model, steps: u64, max_seconds: Option<f64>) -> (Resumed, u64) {
    let settings = RunSettings {
        steps,
        seed: 7,
        checkpoint_every: 4,
        keep_last: 2,
        max_seconds,
        eval_every: 2,
    };
    let mut opt = Optimizer::new(optim_cfg(), ParamSet::all(&m.varmap)).unwrap();
    let (mut run, resumed) =
        Run::open(dir, settings, "lr = 0.05", "test", "step", &mut opt).unwrap();
    run.set_extra(serde_json::json!({"base": 0.25}));
    for step in run.steps() {
        let loss = train(m, &mut opt, step, 1, 7)[0];
        run.log(step + 1, &[("loss", loss)]).unwrap();
        let end = run.end_of(step);
        // Intermediate evaluations every 2 steps, never at the last one.
        assert_eq!(end.eval_due, !end.last && (step + 1) % 2 == 0, "step {step}");
        if end.eval_due {
            run.log(step + 1, &[("eval", 1.0)]).unwrap();
        }
        if run.close_step(step, end, &opt, &[("loss", loss)]).unwrap().is_break() {
            break;
        }
    }
    let reached = run.step();
    let finished = run.finish(&["loss"]).unwrap();
    assert_eq!(finished.steps, reached);
    assert!(finished.curves.exists());
    (resumed, reached)
}

#[test]
fn the_run_skeleton_resumes_bit_identically_and_stops_on_its_budget() {
    let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = model();
    let (resumed, reached) = skeleton_run(a_dir.path(), &a, 7, None);
    assert!(matches!(resumed, Resumed::Fresh));
    assert_eq!(reached, 7);
    // Interrupted at 3 (the last step is checkpointed although 3 is not a multiple of 4),
    // then resumed to 7 by a fresh process with fresh weights.
    skeleton_run(b_dir.path(), &model(), 3, None);
    let b = model();
    let (resumed, reached) = skeleton_run(b_dir.path(), &b, 7, None);
    match resumed {
        Resumed::From { meta, .. } => {
            assert_eq!((meta.step, meta.seed), (3, 7));
            assert_eq!(meta.extra, serde_json::json!({"base": 0.25}));
        }
        Resumed::Fresh => panic!("the second invocation did not resume"),
    }
    assert_eq!(reached, 7);
    let weights = |m: &Model| {
        (m.w.flatten_all().unwrap().to_vec1::<f32>().unwrap(), m.b.to_vec1::<f32>().unwrap())
    };
    assert_eq!(weights(&a), weights(&b));
    let strip = |dir: &Path| -> Vec<(u64, Option<f64>, Option<f64>)> {
        read_metrics(&dir.join("metrics.jsonl"))
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["step"].as_u64().unwrap(),
                    r.get("loss").and_then(|v| v.as_f64()),
                    r.get("eval").and_then(|v| v.as_f64()),
                )
            })
            .collect()
    };
    assert_eq!(strip(a_dir.path()), strip(b_dir.path()));
    assert_eq!(strip(a_dir.path()).len(), 7 + 3, "7 steps and evaluations after 2, 4, 6");
    // A deleted metrics file does not make the run unresumable: a fresh one starts.
    std::fs::remove_file(b_dir.path().join("metrics.jsonl")).unwrap();
    let (resumed, reached) = skeleton_run(b_dir.path(), &model(), 9, None);
    assert!(matches!(resumed, Resumed::From { .. }) && reached == 9);
    assert_eq!(strip(b_dir.path()).first().map(|r| r.0), Some(8));
    // A spent budget stops the run after its first step, checkpointed.
    let c_dir = tempfile::tempdir().unwrap();
    let (_, reached) = skeleton_run(c_dir.path(), &model(), 7, Some(1e-9));
    assert_eq!(reached, 1);
    let ckpt = Checkpointer::new(c_dir.path().join("checkpoints"), 2).unwrap();
    assert_eq!(ckpt.list().unwrap().iter().map(|(s, _)| *s).collect::<Vec<_>>(), [1]);
}

#[test]
fn a_run_whose_every_update_is_skipped_reports_that_it_diverged() {
    let dir = tempfile::tempdir().unwrap();
    let m = model();
    let settings = RunSettings {
        steps: 3,
        seed: 7,
        checkpoint_every: 1,
        keep_last: 1,
        max_seconds: None,
        eval_every: 0,
    };
    let mut opt = Optimizer::new(optim_cfg(), ParamSet::all(&m.varmap)).unwrap();
    let (mut run, _) =
        Run::open(dir.path(), settings, "lr = 0.05", "test", "step", &mut opt).unwrap();
    for step in run.steps() {
        let loss = (m.w.sum_all().unwrap() * f64::NAN).unwrap();
        let (_, report) = opt.minimize(&loss).unwrap();
        assert!(!report.applied);
        run.log(step + 1, &[("loss", 1.0)]).unwrap();
        let end = run.end_of(step);
        if run.close_step(step, end, &opt, &[]).unwrap().is_break() {
            break;
        }
    }
    let finished = run.finish(&["loss"]).unwrap();
    assert_eq!((finished.updates_applied, finished.updates_skipped), (0, 3));
    let err = finished.check_learned().unwrap_err().to_string();
    assert!(err.contains("diverged") && err.contains("3 skipped"), "{err}");
    // One applied update, or none attempted (every advantage zero), is not a divergence.
    let applied_one = drift_core::train::Finished { updates_applied: 1, ..finished.clone() };
    applied_one.check_learned().unwrap();
    let none = drift_core::train::Finished { updates_skipped: 0, ..finished };
    none.check_learned().unwrap();
}
