//! `drift pretrain flow`, `drift train flow` and `drift eval flow` on the shipped shapes world.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use candle_core::{Device, Tensor};
use drift_flow::grpo::{
    evaluate, shapes_reward, train_flow_grpo, EvalSampling, FlowGrpoConfig, ImageTask, RewardTerm,
    ShapesTask,
};
use drift_flow::model::load_dit_frozen;
use drift_flow::pretrain_run::{pretrain_flow, PretrainFlowConfig};
use drift_rewards::shapes::{self, Prompt, SplitConfig};

/// `B` training examples of the shapes world's train split, keyed by `(seed, step·B + i)`.
fn shapes_batch(
    train: &[Prompt],
    seed: u64,
    step: u64,
    b: usize,
    dev: &Device,
) -> Result<(Tensor, Tensor)> {
    let mut pixels = Vec::with_capacity(b * 3 * 32 * 32);
    let mut ids = Vec::with_capacity(b * shapes::MAX_TOKENS);
    for i in 0..b as u64 {
        let (prompt, image) = shapes::training_example(train, seed, step * b as u64 + i)
            .context("the shapes train split is empty")?;
        pixels.extend(image.to_chw_f32());
        ids.extend(shapes::tokenize(&prompt));
    }
    Ok((
        Tensor::from_vec(pixels, (b, 3, 32, 32), dev)?,
        Tensor::from_vec(ids, (b, shapes::MAX_TOKENS), dev)?,
    ))
}

fn check_model_fits_world(cfg: &PretrainFlowConfig) -> Result<()> {
    let m = &cfg.model;
    m.validate()?;
    if m.text_vocab < shapes::VOCAB_SIZE
        || m.text_len != shapes::MAX_TOKENS
        || m.image_size != 32
        || m.channels != 3
    {
        bail!(
            "model does not fit the shapes world: need model.text_vocab >= {}, model.text_len = {}, \
             model.image_size = 32, model.channels = 3 (got {}, {}, {}, {})",
            shapes::VOCAB_SIZE,
            shapes::MAX_TOKENS,
            m.text_vocab,
            m.text_len,
            m.image_size,
            m.channels
        );
    }
    Ok(())
}

/// Runs flow-matching pretraining on the shapes world.
pub fn pretrain(config: Option<&Path>, sets: &[String], out: &Path, dev: &Device) -> Result<()> {
    let (cfg, text): (PretrainFlowConfig, String) = super::config::load(config, sets)?;
    check_model_fits_world(&cfg).map_err(|e| super::usage(format!("{e:#}")))?;
    let split = shapes::split(&SplitConfig::default())?;
    let seed = cfg.seed;
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    std::fs::write(out.join("config.toml"), &text)?;
    let report = pretrain_flow(&cfg, &text, out, dev, |step, b| {
        shapes_batch(&split.train, seed, step, b, dev).map_err(|e| {
            drift_flow::FlowModelError::Config {
                field: "data",
                value: e.to_string(),
                expected: "a shapes training batch".into(),
            }
        })
    })?;
    println!("final loss (mean of the last 10% of steps): {:.5}", report.final_loss);
    if report.steps < cfg.steps {
        println!("stopped by max_seconds after step {} of {}", report.steps, cfg.steps);
    }
    println!("wall time: {:.1} s", report.seconds);
    println!("model:   {}", report.model_dir.display());
    println!("metrics: {}", report.metrics.display());
    println!("curves:  {}", report.curves.display());
    Ok(())
}

/// `drift train flow`: Flow-GRPO on the shapes world; prints base vs trained held-out
/// accuracy and where everything was written.
pub fn train(config: Option<&Path>, sets: &[String], out: &Path, dev: &Device) -> Result<()> {
    let (cfg, text): (FlowGrpoConfig, String) = super::config::load(config, sets)?;
    cfg.validate().map_err(|e| super::usage(e.to_string()))?;
    super::existing_dir(&cfg.base, "base model `base =`")?;
    let model_cfg = drift_flow::model::load_dit_config(&cfg.base)
        .with_context(|| format!("base model `base = {}`", cfg.base.display()))?;
    check_model_fits_world(&PretrainFlowConfig { model: model_cfg, ..Default::default() })?;
    let task = ShapesTask::new()?;
    let reward = shapes_reward(&cfg.rewards)?;
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    std::fs::write(out.join("config.toml"), &text)?;
    let r = train_flow_grpo(&cfg, &text, &task, reward.as_ref(), out, dev)?;
    let pct = |x: Option<f64>| x.map_or("n/a".to_string(), |v| format!("{:.1}%", 100.0 * v));
    if r.steps < cfg.steps {
        println!("stopped by max_seconds after iteration {} of {}", r.steps, cfg.steps);
    }
    println!(
        "held-out strict accuracy ({} prompts, ODE {} steps): base {} -> trained {}",
        r.trained.samples,
        cfg.eval_steps,
        pct(r.base.strict),
        pct(r.trained.strict)
    );
    println!(
        "held-out reward `{}`: base {:.4} -> trained {:.4}",
        reward.name(),
        r.base.reward_mean,
        r.trained.reward_mean
    );
    println!(
        "reward-hacking checks: JPEG compressibility {:.4} -> {:.4}, diversity {:.4} -> {:.4}",
        r.base.jpeg_compressibility,
        r.trained.jpeg_compressibility,
        r.base.diversity.unwrap_or(f64::NAN),
        r.trained.diversity.unwrap_or(f64::NAN)
    );
    println!("wall time: {:.1} s", r.seconds);
    println!("metrics: {}", r.metrics.display());
    println!("curves:  {}", r.curves.display());
    println!("grids:   {} (before), {} (after)", r.grid_before.display(), r.grid_after.display());
    println!("model:   {}", r.model_dir.display());
    Ok(())
}

/// `drift eval flow`: held-out strict accuracy of a saved model.
pub fn eval(
    model_dir: &Path,
    steps: usize,
    guidance: f64,
    seed: u64,
    out: Option<PathBuf>,
    dev: &Device,
) -> Result<()> {
    super::existing_dir(model_dir, "--model")?;
    let model = load_dit_frozen(model_dir, dev)?;
    let grid = out.map(|d| d.join("eval_grid.png"));
    if let Some(g) = grid.as_ref().and_then(|g| g.parent()) {
        std::fs::create_dir_all(g)?;
    }
    let t0 = std::time::Instant::now();
    let task = ShapesTask::new()?;
    let reward = shapes_reward(&[RewardTerm { name: "geneval".into(), weight: 1.0 }])?;
    let sampling = EvalSampling { steps, guidance, seed, batch: 32 };
    let prompts = task.eval_prompts();
    let r = evaluate(&model, &task, reward.as_ref(), prompts, &sampling, grid.as_deref())?;
    println!(
        "{{\"eval\":\"flow/held_out\",\"samples\":{},\"ode_steps\":{steps},\"cfg\":{guidance},\"strict\":{:.4},\"partial\":{:.4},\"seconds\":{:.1}}}",
        r.samples,
        r.strict.unwrap_or(f64::NAN),
        r.reward_mean,
        t0.elapsed().as_secs_f64()
    );
    if let Some(g) = grid {
        println!("grid: {}", g.display());
    }
    Ok(())
}
