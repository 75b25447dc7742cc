//! `drift pretrain flow` and `drift eval flow` on the shipped shapes world.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use candle_core::{DType, Device, Tensor};
use drift_core::rng::RngKey;
use drift_flow::model::{load_dit_frozen, Dit};
use drift_flow::pretrain_run::{pretrain_flow, PretrainFlowConfig};
use drift_rewards::image::{write_grid, GridOptions, Image};
use drift_rewards::shapes::{self, Prompt, SplitConfig};
use drift_samplers::flow::{sample_ode, Guidance, Schedule, ScheduleConfig};

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
pub fn pretrain(config: Option<&Path>, sets: &[String], out: &Path) -> Result<()> {
    let (cfg, text): (PretrainFlowConfig, String) = super::config::load(config, sets)?;
    check_model_fits_world(&cfg)?;
    let dev = Device::Cpu;
    let split = shapes::split(&SplitConfig::default())?;
    let seed = cfg.seed;
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    std::fs::write(out.join("config.toml"), &text)?;
    let report = pretrain_flow(&cfg, &text, out, &dev, |step, b| {
        shapes_batch(&split.train, seed, step, b, &dev).map_err(|e| {
            drift_flow::FlowModelError::Config {
                field: "data",
                value: e.to_string(),
                expected: "a shapes training batch".into(),
            }
        })
    })?;
    println!("final loss (mean of the last 10% of steps): {:.5}", report.final_loss);
    println!("wall time: {:.1} s", report.seconds);
    println!("model:   {}", report.model_dir.display());
    println!("metrics: {}", report.metrics.display());
    println!("curves:  {}", report.curves.display());
    Ok(())
}

/// The result of an evaluation.
pub struct EvalResult {
    /// Fraction of prompts whose image is strictly correct.
    pub strict: f64,
    /// Mean partial score.
    pub partial: f64,
    /// Samples scored.
    pub samples: usize,
}

/// Samples `prompts` with the ODE at `steps` (CFG `guidance`), scores them, writes a grid.
pub fn evaluate(
    model: &Dit,
    prompts: &[Prompt],
    steps: usize,
    guidance: f64,
    seed: u64,
    grid: Option<&Path>,
) -> Result<EvalResult> {
    let dev = model.device().clone();
    let schedule = Schedule::new(&ScheduleConfig { steps, ..ScheduleConfig::default() })?;
    let (mut strict, mut partial, mut images) = (0usize, 0f64, Vec::new());
    for chunk in prompts.chunks(32) {
        let b = chunk.len();
        let ids: Vec<u32> = chunk.iter().flat_map(shapes::tokenize).collect();
        let ids = Tensor::from_vec(ids, (b, shapes::MAX_TOKENS), &dev)?;
        let rows: Vec<u64> = (images.len() as u64..(images.len() + b) as u64).collect();
        let x = RngKey::new(seed).stream("eval_noise").normal_rows(
            &rows,
            3 * 32 * 32,
            DType::F32,
            &dev,
        )?;
        let x = x.reshape((b, 3, 32, 32))?;
        let null = model.null_prompt(b)?;
        let g = Guidance { uncond: &null, scale: guidance };
        let out = sample_ode(model, &x, &ids, &schedule, (guidance != 1.0).then_some(&g))?;
        let flat = out.flatten_from(1)?.to_vec2::<f32>()?;
        for (prompt, values) in chunk.iter().zip(flat) {
            let image = Image::from_chw_f32(32, 32, &values)?;
            let verdict = shapes::verify(prompt, &image);
            strict += usize::from(verdict.strict);
            partial += verdict.score;
            images.push(image);
        }
    }
    if let Some(path) = grid {
        let n = images.len().min(24);
        let captions: Vec<String> = prompts[..n].iter().map(Prompt::to_text).collect();
        let captions: Vec<&str> = captions.iter().map(String::as_str).collect();
        write_grid(path, &images[..n], &captions, &GridOptions::default())?;
    }
    let n = prompts.len().max(1) as f64;
    Ok(EvalResult { strict: strict as f64 / n, partial: partial / n, samples: prompts.len() })
}

/// `drift eval flow`: held-out strict accuracy of a saved model.
pub fn eval(
    model_dir: &Path,
    steps: usize,
    guidance: f64,
    seed: u64,
    out: Option<PathBuf>,
) -> Result<()> {
    let model = load_dit_frozen(model_dir, &Device::Cpu)?;
    let split = shapes::split(&SplitConfig::default())?;
    let grid = out.map(|d| d.join("eval_grid.png"));
    if let Some(g) = grid.as_ref().and_then(|g| g.parent()) {
        std::fs::create_dir_all(g)?;
    }
    let t0 = std::time::Instant::now();
    let r = evaluate(&model, &split.held_out, steps, guidance, seed, grid.as_deref())?;
    println!(
        "{{\"eval\":\"flow/held_out\",\"samples\":{},\"ode_steps\":{steps},\"cfg\":{guidance},\"strict\":{:.4},\"partial\":{:.4},\"seconds\":{:.1}}}",
        r.samples,
        r.strict,
        r.partial,
        t0.elapsed().as_secs_f64()
    );
    if let Some(g) = grid {
        println!("grid: {}", g.display());
    }
    Ok(())
}
