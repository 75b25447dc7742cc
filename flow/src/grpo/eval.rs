//! Held-out evaluation of a flow policy: ODE samples at `N_eval` steps, the run's reward, the
//! task's strict accuracy, JPEG compressibility and a diversity measure (the reward-hacking
//! checks), and a captioned grid.

use std::path::Path;
use std::time::Instant;

use candle_core::DType;
use drift_core::rng::RngKey;
use drift_rewards::image::{jpeg_compressibility, write_grid, GridOptions, Image};
use drift_samplers::flow::{sample_ode, Guidance, Schedule, ScheduleConfig};
use serde::{Deserialize, Serialize};

use super::task::{image_samples, tensor_to_images, ImageReward, ImageTask};
use crate::error::{FlowModelError, Result};
use crate::policy::FlowPolicy;

/// One category's row of an evaluation (GenEval's per-task table).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CategoryScore {
    /// The category's name (`counting`, `position`, …).
    pub name: String,
    /// Images of the category evaluated.
    pub samples: usize,
    /// Mean reward over them.
    pub reward_mean: f64,
    /// Fraction strictly correct (`None` when the task has no strict check).
    pub strict: Option<f64>,
}

/// What an evaluation measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalReport {
    /// Prompts evaluated (one image each).
    pub samples: usize,
    /// Mean reward of the run's reward.
    pub reward_mean: f64,
    /// Fraction strictly correct (`None` when the task has no strict check): the mean over
    /// categories of their strict accuracy when the task has categories (GenEval's overall
    /// score), else over images.
    pub strict: Option<f64>,
    /// Per-category rows, in the order categories first appear; empty when the task has no
    /// categories.
    #[serde(default)]
    pub categories: Vec<CategoryScore>,
    /// Mean JPEG compressibility `−kB/500` (DDPO) of the images.
    pub jpeg_compressibility: f64,
    /// Mean number of objects the task's detector finds per image, mentioned by the prompt or
    /// not (`None` without a detector): a policy that learns to draw more of everything to pass
    /// "at least one" clauses shows here.
    #[serde(default)]
    pub objects_per_image: Option<f64>,
    /// Mean pairwise RMS distance (pixels in `[0, 1]`) between images of the same prompt from
    /// different noise, when measured.
    pub diversity: Option<f64>,
    /// Wall time of the evaluation.
    pub seconds: f64,
}

/// How an evaluation samples.
#[derive(Debug, Clone, Copy)]
pub struct EvalSampling {
    /// ODE steps.
    pub steps: usize,
    /// CFG scale (1 = none).
    pub guidance: f64,
    /// Seed of the initial noise (fixed across a run, so evaluations compare like with like).
    pub seed: u64,
    /// Images per forward pass.
    pub batch: usize,
}

/// ODE samples of `prompts`, noise row `first_row + i` for prompt `i` under `seed`.
pub fn sample_prompts<M: FlowPolicy, T: ImageTask>(
    model: &M,
    task: &T,
    prompts: &[T::Prompt],
    s: &EvalSampling,
    first_row: u64,
) -> Result<Vec<Image>> {
    let dev = model.device().clone();
    let schedule = Schedule::new(&ScheduleConfig { steps: s.steps, ..ScheduleConfig::default() })?;
    let (c, h, w) = model.latent_shape();
    let mut images = Vec::with_capacity(prompts.len());
    for chunk in prompts.chunks(s.batch.max(1)) {
        let b = chunk.len();
        let rows: Vec<u64> = (0..b as u64).map(|i| first_row + (images.len() as u64) + i).collect();
        let elems = c * h * w;
        let x =
            RngKey::new(s.seed).stream("eval_noise").normal_rows(&rows, elems, DType::F32, &dev)?;
        let x = x.reshape((b, c, h, w))?;
        let cond = task.encode(chunk, &dev)?;
        let null = model.null_cond(b)?;
        let g = Guidance { uncond: &null, scale: s.guidance };
        let out = sample_ode(model, &x, &cond, &schedule, (s.guidance != 1.0).then_some(&g))?;
        images.extend(tensor_to_images(&model.decode(&out)?)?);
    }
    Ok(images)
}

/// RMS distance between two images' pixels in `[0, 1]`: `√(mean((a − b)²))`.
pub fn rms_distance(a: &Image, b: &Image) -> f64 {
    let sq: f64 = a
        .as_raw()
        .iter()
        .zip(b.as_raw())
        .map(|(&x, &y)| ((f64::from(x) - f64::from(y)) / 255.0).powi(2))
        .sum();
    (sq / a.as_raw().len().max(1) as f64).sqrt()
}

/// Mean pairwise RMS pixel distance between `k` samples (different noise) of each of
/// `prompts`: 0 when the model has collapsed to one image per prompt.
pub fn diversity<M: FlowPolicy, T: ImageTask>(
    model: &M,
    task: &T,
    prompts: &[T::Prompt],
    k: usize,
    s: &EvalSampling,
) -> Result<f64> {
    if k < 2 || prompts.is_empty() {
        return Err(FlowModelError::Config {
            field: "diversity_samples / diversity_prompts",
            value: format!("{k} samples of {} prompts", prompts.len()),
            expected: "at least 2 samples of at least 1 prompt".into(),
        });
    }
    let repeated: Vec<T::Prompt> =
        prompts.iter().flat_map(|p| std::iter::repeat_n(p.clone(), k)).collect();
    let images = sample_prompts(model, task, &repeated, s, 1 << 40)?;
    Ok(mean_pairwise_distance(&images, k))
}

/// Mean [`rms_distance`] over the pairs within each consecutive group of `k` images (the
/// samples of one prompt); 0 when no group has two images.
pub fn mean_pairwise_distance(images: &[Image], k: usize) -> f64 {
    let (mut total, mut pairs) = (0.0, 0usize);
    for group in images.chunks(k.max(1)) {
        for i in 0..group.len() {
            for j in i + 1..group.len() {
                total += rms_distance(&group[i], &group[j]);
                pairs += 1;
            }
        }
    }
    total / pairs.max(1) as f64
}

/// Per-category rows of an evaluation: the images whose category is known, grouped by it in
/// order of first appearance (empty when no image has a category).
pub fn category_scores(
    names: &[Option<&'static str>],
    rewards: &[f64],
    checks: &[Option<bool>],
) -> Vec<CategoryScore> {
    let mut order: Vec<&'static str> = Vec::new();
    for name in names.iter().flatten() {
        if !order.contains(name) {
            order.push(name);
        }
    }
    order
        .into_iter()
        .map(|name| {
            let rows: Vec<usize> = (0..names.len()).filter(|&i| names[i] == Some(name)).collect();
            let k = rows.len() as f64;
            let strict = rows
                .iter()
                .all(|&i| checks[i].is_some())
                .then(|| rows.iter().filter(|&&i| checks[i] == Some(true)).count() as f64 / k);
            CategoryScore {
                name: name.to_string(),
                samples: rows.len(),
                reward_mean: rows.iter().map(|&i| rewards[i]).sum::<f64>() / k,
                strict,
            }
        })
        .collect()
}

/// Evaluates `model` on `prompts`: reward mean, strict accuracy, JPEG compressibility, and a
/// grid of the first 24 images with their captions at `grid` when given.
pub fn evaluate<M: FlowPolicy, T: ImageTask>(
    model: &M,
    task: &T,
    reward: &ImageReward<T::Prompt>,
    prompts: &[T::Prompt],
    s: &EvalSampling,
    grid: Option<&Path>,
) -> Result<EvalReport> {
    let start = Instant::now();
    let images = sample_prompts(model, task, prompts, s, 0)?;
    let outcomes = reward.evaluate_batch(&image_samples(prompts, &images)?);
    let n = prompts.len().max(1) as f64;
    let rewards: Vec<f64> = outcomes.iter().map(|o| o.score).collect();
    let reward_mean = rewards.iter().sum::<f64>() / n;
    let checks: Vec<Option<bool>> =
        prompts.iter().zip(&images).map(|(p, im)| task.strict(p, im)).collect();
    let names: Vec<Option<&'static str>> = prompts.iter().map(|p| task.category(p)).collect();
    let categories = category_scores(&names, &rewards, &checks);
    let strict = checks.iter().all(Option::is_some).then(|| {
        if categories.is_empty() {
            checks.iter().filter(|c| **c == Some(true)).count() as f64 / n
        } else {
            let s: f64 = categories.iter().filter_map(|c| c.strict).sum();
            s / categories.len() as f64
        }
    });
    let mut jpeg = 0.0;
    for im in &images {
        jpeg += jpeg_compressibility(im).map_err(|e| FlowModelError::Config {
            field: "images",
            value: e.to_string(),
            expected: "an image the JPEG encoder accepts".into(),
        })?;
    }
    let objects: Option<Vec<usize>> = images.iter().map(|im| task.objects(im)).collect();
    let objects_per_image = objects.map(|o| o.iter().sum::<usize>() as f64 / n);
    if let Some(path) = grid {
        // 24 images spread over the (category-ordered) list, so every category shows.
        let m = images.len().min(24);
        let picks: Vec<usize> = (0..m).map(|i| i * images.len() / m).collect();
        let captions: Vec<String> = picks.iter().map(|&i| task.caption(&prompts[i])).collect();
        let captions: Vec<&str> = captions.iter().map(String::as_str).collect();
        let shown: Vec<Image> = picks.iter().map(|&i| images[i].clone()).collect();
        write_grid(path, &shown, &captions, &GridOptions::default()).map_err(|e| {
            FlowModelError::File { path: path.to_path_buf(), reason: e.to_string() }
        })?;
    }
    Ok(EvalReport {
        samples: prompts.len(),
        reward_mean,
        strict,
        categories,
        jpeg_compressibility: jpeg / n,
        objects_per_image,
        diversity: None,
        seconds: start.elapsed().as_secs_f64(),
    })
}
