//! `drift pretrain flow`, `drift train flow` and `drift eval flow` on the shipped shapes world.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use candle_core::{Device, Tensor};
use drift_flow::grpo::{
    category_weights, evaluate, shapes_reward, text_reward, train_flow_grpo, train_flow_grpo_with,
    EvalReport, EvalSampling, FlowGrpoConfig, ImageTask, RewardTerm, ShapesTask, TextPromptTask,
};
use drift_flow::model::load_dit_frozen;
use drift_flow::pretrain_run::{pretrain_flow, PretrainFlowConfig};
use drift_rewards::worlds::shapes::{self, Category, Prompt, SplitConfig};

/// `B` training examples of the shapes world's train split, keyed by `(seed, step·B + i)`,
/// their categories drawn by `weights` (one per group of `train`).
fn shapes_batch(
    train: &[(Category, Vec<Prompt>)],
    weights: &[f64],
    seed: u64,
    step: u64,
    b: usize,
    dev: &Device,
) -> Result<(Tensor, Tensor)> {
    let mut pixels = Vec::with_capacity(b * 3 * 32 * 32);
    let mut ids = Vec::with_capacity(b * shapes::MAX_TOKENS);
    for i in 0..b as u64 {
        let (prompt, image) =
            shapes::training_example_weighted(train, weights, seed, step * b as u64 + i)
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
    cfg.validate()?;
    let m = &cfg.model;
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
pub fn pretrain(cmd: &super::RunCommand<'_>, dev: &Device) -> Result<()> {
    let out = cmd.out;
    let (cfg, text): (PretrainFlowConfig, String) = cmd.load()?;
    check_model_fits_world(&cfg).map_err(|e| super::usage(format!("{e:#}")))?;
    super::check_memory(&format!("batch = {}", cfg.batch), cfg.model.training_bytes(cfg.batch))?;
    let split = shapes::split(&SplitConfig::default())?;
    let groups = shapes::by_category(&split.train);
    let weights = category_weights(&groups, &cfg.category_weights)
        .map_err(|e| super::usage(format!("{e:#}")))?;
    let seed = cfg.run.seed;
    cmd.prepare_run_dir(&text)?;
    let report = pretrain_flow(&cfg, &text, out, dev, |step, b| {
        shapes_batch(&groups, &weights, seed, step, b, dev).map_err(|e| {
            drift_flow::FlowModelError::Config {
                field: "data",
                value: e.to_string(),
                expected: "a shapes training batch".into(),
            }
        })
    })?;
    outln!("final loss (mean of the last 10% of steps): {:.5}", report.final_loss);
    super::print_stopped(&report.run, cfg.run.steps, "step");
    super::print_finished(&report.run)
}

/// `drift train flow`: Flow-GRPO on the shapes world; prints base vs trained held-out
/// accuracy and where everything was written.
pub fn train(cmd: &super::RunCommand<'_>, dev: &Device) -> Result<()> {
    let (mut cfg, text): (FlowGrpoConfig, String) = cmd.load()?;
    cfg.validate().map_err(|e| super::usage(e.to_string()))?;
    if !cfg.base.is_dir() {
        // A Hugging Face repo id (an SD3 pipeline) in the local hub cache, read offline.
        if let Ok(dir) = drift_flow::sd3::resolve_base_from_env(&cfg.base) {
            cfg.base = dir;
        }
    }
    super::existing_dir(&cfg.base, "base model `base =`")?;
    if is_sd3_folder(&cfg.base) {
        return train_sd3(cmd, cfg, &text, dev);
    }
    let out = cmd.out;
    let model_cfg = drift_flow::model::load_dit_config(&cfg.base)
        .with_context(|| format!("base model `base = {}`", cfg.base.display()))?;
    check_model_fits_world(&PretrainFlowConfig { model: model_cfg, ..Default::default() })?;
    // The update keeps one micro-batch's activations; the rollout one block's for the batch.
    let rollout = cfg.prompts_per_step.saturating_mul(cfg.group_size);
    super::check_memory(
        &format!("micro_batch = {} / prompts_per_step × group_size = {rollout}", cfg.micro_batch),
        model_cfg
            .training_bytes(cfg.micro_batch)
            .saturating_add(model_cfg.training_bytes(rollout) / model_cfg.depth.max(1) as u64),
    )?;
    let task = task_from(cfg.prompts.as_deref(), cfg.eval_images_per_category)?
        .with_category_weights(&cfg.category_weights)?;
    let reward = shapes_reward(&cfg.rewards)?;
    cmd.prepare_run_dir(&text)?;
    let r = train_flow_grpo(&cfg, &text, &task, reward.as_ref(), out, dev)?;
    print_report(&r, &cfg, reward.name(), out)
}

/// Whether `base` is a diffusers SD3 / SD3.5 folder (a pipeline with `model_index.json`, or a
/// transformer folder whose config names `SD3Transformer2DModel`) rather than a DiT.
fn is_sd3_folder(base: &Path) -> bool {
    if base.join("model_index.json").is_file() {
        return true;
    }
    let dir = drift_flow::sd3::transformer_dir(base).unwrap_or_else(|_| base.to_path_buf());
    std::fs::read_to_string(dir.join("config.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v.get("_class_name").and_then(|c| c.as_str()).map(str::to_string))
        .is_some_and(|c| c == "SD3Transformer2DModel")
}

/// `drift train flow` from an SD3 / SD3.5 folder: LoRA adapters over the frozen base, the
/// free-text prompts of `prompts = FILE` encoded once (by the folder's text encoders into
/// `embeddings/` of the run, or from a given `sd3.embeddings` cache), scored by the configured
/// rewards (`http`, JPEG), the adapter saved in PEFT's layout in `model/`.
fn train_sd3(
    cmd: &super::RunCommand<'_>,
    cfg: FlowGrpoConfig,
    text: &str,
    dev: &Device,
) -> Result<()> {
    use drift_flow::sd3::{load_sd3_lora_models, EmbeddedTask, PromptEmbeddings, Sd3LoraSetup};
    let out = cmd.out;
    let sd3 = cfg.sd3.clone().unwrap_or_default();
    if !cfg.trainable.is_empty() {
        return Err(super::usage(
            "`trainable` selects DiT weights; an SD3 base trains LoRA adapters: set \
             `sd3.lora.target_modules` instead",
        ));
    }
    if !cfg.category_weights.is_empty() {
        return Err(super::usage(
            "`category_weights` applies to the shapes world; an SD3 run draws its prompt file's \
             train lines uniformly",
        ));
    }
    drift_flow::sd3::read_sd3_config(&cfg.base)
        .with_context(|| format!("base model `base = {}`", cfg.base.display()))?;
    let Some(prompts) = cfg.prompts.as_deref() else {
        return Err(super::usage(
            "an SD3 run needs its prompts: `prompts = FILE` (JSONL, `{\"prompt\": …, \
             \"category\": …, \"split\": \"train\" | \"held_out\"}` per line)",
        ));
    };
    let inner = TextPromptTask::from_jsonl(prompts).map_err(|e| super::usage(e.to_string()))?;
    let train_prompts = inner.train_prompts().to_vec();
    let reward = text_reward(&cfg.rewards).map_err(|e| super::usage(e.to_string()))?;
    let dtype = sd3.dtype()?;
    cmd.prepare_run_dir(text)?;
    let cache = match &sd3.embeddings {
        Some(dir) => dir.clone(),
        None => encode_prompts(
            &cfg.base,
            &inner,
            sd3.max_sequence_length,
            &out.join("embeddings"),
            dev,
        )?,
    };
    let embeddings = PromptEmbeddings::load(&cache, dev)
        .with_context(|| format!("the prompt-embedding cache {}", cache.display()))?;
    let null = embeddings.null().clone();
    let task = EmbeddedTask::new(inner, embeddings, &train_prompts)
        .map_err(|e| super::usage(e.to_string()))?;
    let setup = Sd3LoraSetup {
        lora: sd3.lora.clone(),
        init: None,
        null,
        latent_side: sd3.latent_side,
        optim: cfg.optim_over_run(),
        dtype,
        seed: cfg.run.seed,
    };
    let models = load_sd3_lora_models(&cfg.base, setup, dev)
        .with_context(|| format!("base model `base = {}`", cfg.base.display()))?;
    let r = train_flow_grpo_with(models, &cfg, text, &task, reward.as_ref(), out)?;
    print_report(&r, &cfg, reward.name(), out)
}

/// Encodes every prompt of `task` and the empty prompt with the text encoders of the SD3 folder
/// `base` into the cache `dir` (kept when a resumed run finds it complete), in batches of 32.
fn encode_prompts(
    base: &Path,
    task: &TextPromptTask,
    max_sequence_length: usize,
    dir: &Path,
    dev: &Device,
) -> Result<PathBuf> {
    use drift_flow::sd3::{text::Sd3TextEncoders, PromptEmbeddings};
    let mut prompts: Vec<String> = Vec::new();
    for p in task.train_prompts().iter().chain(task.eval_prompts()) {
        if !prompts.contains(&p.text) {
            prompts.push(p.text.clone());
        }
    }
    if let Ok(cached) = PromptEmbeddings::load(dir, dev) {
        if prompts.iter().all(|p| cached.get(p).is_some()) {
            return Ok(dir.to_path_buf());
        }
    }
    let encoders = Sd3TextEncoders::from_dir(base, candle_core::DType::F32, dev).map_err(|e| {
        super::usage(format!(
            "the text encoders of `base = {}` (text_encoder{{,_2,_3}}/ and \
                 tokenizer{{,_2,_3}}/): {e}; or give a prompt-embedding cache as \
                 `sd3.embeddings = DIR`",
            base.display()
        ))
    })?;
    let started = std::time::Instant::now();
    let (mut texts, mut pooled) = (Vec::new(), Vec::new());
    for chunk in prompts.chunks(32) {
        let (t, p) = encoders.encode(chunk, max_sequence_length)?;
        texts.push(t);
        pooled.push(p);
    }
    let (nt, np) = encoders.encode(&[String::new()], max_sequence_length)?;
    let (t, p) = (Tensor::cat(&texts, 0)?, Tensor::cat(&pooled, 0)?);
    PromptEmbeddings::save(dir, &prompts, (&t, &p), (&nt, &np))?;
    outln!(
        "encoded {} prompts and the empty prompt with the folder's text encoders in {:.1} s -> {}",
        prompts.len(),
        started.elapsed().as_secs_f64(),
        dir.display()
    );
    Ok(dir.to_path_buf())
}

/// The end of a run: the per-category table (also `categories.md`), base vs trained held-out
/// accuracy and reward, the reward-hacking checks and where everything was written.
fn print_report(
    r: &drift_flow::grpo::FlowGrpoReport,
    cfg: &FlowGrpoConfig,
    reward_name: &str,
    out: &Path,
) -> Result<()> {
    let pct = |x: Option<f64>| x.map_or("n/a".to_string(), |v| format!("{:.1}%", 100.0 * v));
    super::print_stopped(&r.run, cfg.run.steps, "iteration");
    let table = category_table(&r.base, &r.trained);
    std::fs::write(out.join("categories.md"), &table)?;
    out!("{table}");
    outln!(
        "held-out strict accuracy (mean of categories, {} images, ODE {} steps): base {} -> trained {}",
        r.trained.samples,
        cfg.eval_steps,
        pct(r.base.strict),
        pct(r.trained.strict)
    );
    outln!(
        "held-out reward `{}`: base {:.4} -> trained {:.4}",
        reward_name,
        r.base.reward_mean,
        r.trained.reward_mean
    );
    outln!(
        "reward-hacking checks: JPEG compressibility {:.4} -> {:.4}, diversity {:.4} -> {:.4}, \
         objects per image {:.2} -> {:.2}",
        r.base.jpeg_compressibility,
        r.trained.jpeg_compressibility,
        r.base.diversity.unwrap_or(f64::NAN),
        r.trained.diversity.unwrap_or(f64::NAN),
        r.base.objects_per_image.unwrap_or(f64::NAN),
        r.trained.objects_per_image.unwrap_or(f64::NAN)
    );
    outln!("grids:   {} (before), {} (after)", r.grid_before.display(), r.grid_after.display());
    super::print_finished(&r.run)
}

/// `drift prompts flow`: writes the shapes world's split (seed 0) to `out` as JSONL and says
/// how many prompts each side holds.
pub fn write_prompts(out: &Path) -> Result<()> {
    let split = shapes::split(&SplitConfig::default())?;
    shapes::jsonl::write_split_jsonl(out, &split)?;
    outln!(
        "{}: {} train and {} held-out prompts of the shapes world",
        out.display(),
        split.train.len(),
        split.held_out.len()
    );
    Ok(())
}

/// The task of a run: the shapes world's split, or a JSONL prompt file whose `held_out` lines
/// are evaluated (the world's held-out split when it has none) and whose other lines are
/// trained on.
pub fn task_from(prompts: Option<&Path>, per_category: usize) -> Result<ShapesTask> {
    let Some(path) = prompts else {
        return Ok(ShapesTask::with_eval_images(per_category)?);
    };
    let records = shapes::jsonl::read_jsonl(path).map_err(|e| super::usage(e.to_string()))?;
    let (held, train): (Vec<_>, Vec<_>) = records
        .into_iter()
        .partition(|(_, s)| *s == Some(drift_rewards::worlds::split::Split::HeldOut));
    let train: Vec<Prompt> = train.into_iter().map(|(p, _)| p).collect();
    if train.is_empty() {
        return Err(super::usage(format!(
            "prompt file {}: no training prompts (every line is tagged held_out)",
            path.display()
        )));
    }
    let held: Vec<Prompt> = if held.is_empty() {
        shapes::split(&SplitConfig::default())?.held_out
    } else {
        held.into_iter().map(|(p, _)| p).collect()
    };
    Ok(ShapesTask::from_prompts(&train, &held, per_category)?)
}

/// The per-category table of a base-vs-trained evaluation (GenEval's table), as Markdown.
pub fn category_table(base: &EvalReport, trained: &EvalReport) -> String {
    let pct = |x: Option<f64>| x.map_or("n/a".to_string(), |v| format!("{:.1}", 100.0 * v));
    let mut out = String::from("| category | images | base strict % | trained strict % | change |\n|---|---|---|---|---|\n");
    for b in &base.categories {
        let t = trained.categories.iter().find(|t| t.name == b.name);
        let change = match (b.strict, t.and_then(|t| t.strict)) {
            (Some(x), Some(y)) => format!("{:+.1}", 100.0 * (y - x)),
            _ => "n/a".into(),
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {change} |\n",
            b.name,
            b.samples,
            pct(b.strict),
            pct(t.and_then(|t| t.strict))
        ));
    }
    let change = match (base.strict, trained.strict) {
        (Some(x), Some(y)) => format!("{:+.1}", 100.0 * (y - x)),
        _ => "n/a".into(),
    };
    out.push_str(&format!(
        "| **overall** (mean of categories) | {} | {} | {} | {change} |\n",
        base.samples,
        pct(base.strict),
        pct(trained.strict)
    ));
    out
}

/// `drift eval flow`: strict accuracy of a saved model on the held-out split or a prompt
/// file, overall and per category.
pub fn eval(
    model_dir: &Path,
    sampling: &EvalSampling,
    prompts: Option<&Path>,
    per_category: usize,
    out: Option<PathBuf>,
    dev: &Device,
) -> Result<()> {
    if per_category == 0 {
        return Err(super::usage("--per-category must be at least 1"));
    }
    let task = match prompts {
        None => ShapesTask::with_eval_images(per_category)?,
        Some(path) => {
            let records =
                shapes::jsonl::read_jsonl(path).map_err(|e| super::usage(e.to_string()))?;
            let all: Vec<Prompt> = records.into_iter().map(|(p, _)| p).collect();
            if all.is_empty() {
                return Err(super::usage(format!("prompt file {}: no prompts", path.display())));
            }
            ShapesTask::from_prompts(&all, &all, per_category)?
        }
    };
    super::existing_dir(model_dir, "--model")?;
    let model = load_dit_frozen(model_dir, dev)?;
    let grid = out.map(|d| d.join("eval_grid.png"));
    if let Some(g) = grid.as_ref().and_then(|g| g.parent()) {
        std::fs::create_dir_all(g)?;
    }
    let t0 = std::time::Instant::now();
    let reward = shapes_reward(&[RewardTerm::named("geneval", 1.0)])?;
    let r =
        evaluate(&model, &task, reward.as_ref(), task.eval_prompts(), sampling, grid.as_deref())?;
    for c in &r.categories {
        outln!(
            "{{\"category\":\"{}\",\"samples\":{},\"strict\":{:.4},\"partial\":{:.4}}}",
            c.name,
            c.samples,
            c.strict.unwrap_or(f64::NAN),
            c.reward_mean
        );
    }
    outln!(
        "{{\"eval\":\"flow/{}\",\"samples\":{},\"ode_steps\":{},\"cfg\":{},\"strict\":{:.4},\"partial\":{:.4},\"objects_per_image\":{:.3},\"seconds\":{:.1}}}",
        if prompts.is_some() { "prompts" } else { "held_out" },
        r.samples,
        sampling.steps,
        sampling.guidance,
        r.strict.unwrap_or(f64::NAN),
        r.reward_mean,
        r.objects_per_image.unwrap_or(f64::NAN),
        t0.elapsed().as_secs_f64()
    );
    if let Some(g) = grid {
        outln!("grid: {}", g.display());
    }
    Ok(())
}
