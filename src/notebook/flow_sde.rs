//! SDE exploration for a flow model (notebook 2): the same initial noise sampled with the
//! Flow-GRPO SDE, DanceGRPO's SDE and CPS at several noise levels and step counts, with the
//! mean transition log-probability, the diversity of each prompt's samples and the
//! GenEval-style scores of the shapes world, and image grids to look at.
//!
//! A higher noise level spreads each transition (lower log-density per element), which is
//! what gives GRPO different samples to compare; too much noise leaves the data manifold and
//! the images, and their scores, degrade. Fewer steps (denoising reduction) make each
//! transition coarser.

use std::time::Instant;

use drift_core::metrics::{LineChart, Series};
use drift_core::rng::RngKey;
use drift_flow::grpo::rollout::initial_noise;
use drift_flow::grpo::task::tensor_to_images;
use drift_flow::grpo::{mean_pairwise_distance, ImageTask, ShapesTask};
use drift_flow::model::Dit;
use drift_rewards::image::{grid, GridOptions, Image};
use drift_rewards::worlds::shapes::{verify, Prompt};
use drift_samplers::flow::{
    rollout_sde, LogProbReduce, RolloutConfig, Schedule, ScheduleConfig, StepKind,
};

use super::display::{Png, Table};
use super::{Result, StudyError};

/// The sampler's name: `ode`, `flow_grpo`, `dance`, `cps`.
pub fn step_name(step: &StepKind) -> &'static str {
    match step {
        StepKind::Ode => "ode",
        StepKind::FlowGrpo { .. } => "flow_grpo",
        StepKind::Dance { .. } => "dance",
        StepKind::Cps { .. } => "cps",
    }
}

/// The sampler's noise level: `a` (Flow-GRPO, CPS), `η` (DanceGRPO), 0 (ODE).
pub fn step_level(step: &StepKind) -> f64 {
    match *step {
        StepKind::Ode => 0.0,
        StepKind::FlowGrpo { noise_level } | StepKind::Cps { noise_level } => noise_level,
        StepKind::Dance { eta } => eta,
    }
}

/// One sampler setting: the transition and the number of steps.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SdeSetting {
    /// The transition.
    pub step: StepKind,
    /// Denoising steps (the SD3 shift-3 schedule).
    pub steps: usize,
}

impl SdeSetting {
    /// `name(level)×steps`, e.g. `flow_grpo(0.7)×10`.
    pub fn label(&self) -> String {
        format!("{}({})x{}", step_name(&self.step), step_level(&self.step), self.steps)
    }
}

/// The noise-level sweep of the notebook: each of the three SDEs at three levels, 10 steps.
pub fn level_settings() -> Vec<SdeSetting> {
    let mut out = vec![SdeSetting { step: StepKind::Ode, steps: 10 }];
    for a in [0.3, 0.7, 1.2] {
        out.push(SdeSetting { step: StepKind::FlowGrpo { noise_level: a }, steps: 10 });
    }
    for eta in [0.1, 0.3, 0.6] {
        out.push(SdeSetting { step: StepKind::Dance { eta }, steps: 10 });
    }
    for a in [0.3, 0.6, 0.9] {
        out.push(SdeSetting { step: StepKind::Cps { noise_level: a }, steps: 10 });
    }
    out
}

/// The step-count sweep of the notebook: Flow-GRPO's SDE at `a = 0.7` over 4 to 40 steps.
pub fn steps_settings() -> Vec<SdeSetting> {
    [4, 10, 20, 40]
        .into_iter()
        .map(|steps| SdeSetting { step: StepKind::FlowGrpo { noise_level: 0.7 }, steps })
        .collect()
}

/// What one setting produced.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SdeRow {
    /// [`SdeSetting::label`].
    pub label: String,
    /// [`step_name`].
    pub sampler: String,
    /// [`step_level`].
    pub level: f64,
    /// Denoising steps.
    pub steps: usize,
    /// Mean over samples and stochastic steps (those with a positive std) of
    /// `log p(x_{i+1} | x_i)` (per-element mean, as Flow-GRPO's ratios); NaN for the ODE.
    pub log_prob: f64,
    /// Mean pairwise RMS pixel distance between samples of the same prompt.
    pub diversity: f64,
    /// Fraction strictly correct (GenEval strict).
    pub strict: f64,
    /// Mean GenEval partial score.
    pub partial: f64,
    /// Wall time.
    pub seconds: f64,
}

/// A sweep's rows and, per setting, its images (prompt-major: `samples` per prompt).
#[derive(Debug, Clone)]
pub struct SdeSweep {
    /// One row per setting.
    pub rows: Vec<SdeRow>,
    /// The images of each setting.
    pub images: Vec<Vec<Image>>,
    /// Samples per prompt.
    pub samples: usize,
}

/// Samples `samples` images of each of `prompts` under every setting from the same initial
/// noise (rows keyed by `seed`), and measures each setting.
pub fn sde_sweep(
    model: &Dit,
    task: &ShapesTask,
    prompts: &[Prompt],
    samples: usize,
    settings: &[SdeSetting],
    seed: u64,
) -> Result<SdeSweep> {
    if prompts.is_empty() || samples < 2 || settings.is_empty() {
        return Err(StudyError::Argument {
            name: "prompts / samples / settings",
            value: format!("{} / {samples} / {}", prompts.len(), settings.len()),
            expected: "at least 1 prompt, 2 samples per prompt and 1 setting".into(),
        });
    }
    let dev = model.device().clone();
    let mc = *model.config();
    let repeated: Vec<Prompt> =
        prompts.iter().flat_map(|p| std::iter::repeat_n(p.clone(), samples)).collect();
    let rows: Vec<u64> = (0..repeated.len() as u64).collect();
    let key = RngKey::new(seed).stream("notebook/sde_sweep");
    let x = initial_noise(key, &rows, (mc.channels, mc.image_size, mc.image_size), &dev)?;
    let cond = task.encode(&repeated, &dev)?;
    let mut out = SdeSweep { rows: Vec::new(), images: Vec::new(), samples };
    for s in settings {
        let t0 = Instant::now();
        let schedule =
            Schedule::new(&ScheduleConfig { steps: s.steps, ..ScheduleConfig::default() })?;
        let cfg = RolloutConfig { step: s.step, log_prob: LogProbReduce::Mean, window: None };
        let rollout = rollout_sde(model, &x, &cond, &schedule, &cfg, None, key, &rows)?;
        let lp = rollout.log_probs.to_vec2::<f32>()?;
        // Steps with a density: stochastic with a positive std (CPS's last step, σ' = 0, is
        // deterministic).
        let dense: Vec<bool> =
            rollout.stochastic.iter().zip(&rollout.std).map(|(&st, &sd)| st && sd > 0.0).collect();
        let stochastic: Vec<f64> = lp
            .iter()
            .flat_map(|r| r.iter().zip(&dense).filter(|(_, &d)| d).map(|(v, _)| f64::from(*v)))
            .collect();
        let log_prob = if stochastic.is_empty() {
            f64::NAN
        } else {
            stochastic.iter().sum::<f64>() / stochastic.len() as f64
        };
        let images = tensor_to_images(rollout.images())?;
        let verdicts: Vec<_> = repeated.iter().zip(&images).map(|(p, im)| verify(p, im)).collect();
        let n = verdicts.len() as f64;
        out.rows.push(SdeRow {
            label: s.label(),
            sampler: step_name(&s.step).into(),
            level: step_level(&s.step),
            steps: s.steps,
            log_prob,
            diversity: mean_pairwise_distance(&images, samples),
            strict: verdicts.iter().filter(|v| v.strict).count() as f64 / n,
            partial: verdicts.iter().map(|v| v.score).sum::<f64>() / n,
            seconds: t0.elapsed().as_secs_f64(),
        });
        out.images.push(images);
    }
    Ok(out)
}

/// The sweep as a table.
pub fn sweep_table(sweep: &SdeSweep) -> Result<Table> {
    let mut t = Table::new(
        format!("SDE samplers, {} samples per prompt, shared initial noise", sweep.samples),
        &["setting", "log p / elem", "diversity", "strict", "partial", "seconds"],
    );
    for r in &sweep.rows {
        t.push(vec![
            r.label.clone(),
            format!("{:.4}", r.log_prob),
            format!("{:.4}", r.diversity),
            format!("{:.3}", r.strict),
            format!("{:.3}", r.partial),
            format!("{:.2}", r.seconds),
        ])?;
    }
    Ok(t)
}

/// `metric` (`log_prob`, `diversity`, `strict` or `partial`) against the noise level (or,
/// with `x = "steps"`, the step count), one line per sampler; the ODE's rows are left out of
/// level charts.
pub fn sweep_chart(sweep: &SdeSweep, metric: &str, x: &str) -> Result<LineChart> {
    let arg = |name: &'static str, value: &str, expected: &str| StudyError::Argument {
        name,
        value: value.into(),
        expected: expected.into(),
    };
    let value = |r: &SdeRow| match metric {
        "log_prob" => Ok(r.log_prob),
        "diversity" => Ok(r.diversity),
        "strict" => Ok(r.strict),
        "partial" => Ok(r.partial),
        m => Err(arg("metric", m, "log_prob, diversity, strict or partial")),
    };
    let by_steps = match x {
        "level" => false,
        "steps" => true,
        other => return Err(arg("x", other, "level or steps")),
    };
    let mut chart = LineChart::new(format!("{metric} vs {x}"), x, metric);
    let mut names: Vec<String> = Vec::new();
    for r in sweep.rows.iter().filter(|r| by_steps || r.sampler != "ode") {
        let name = if by_steps { format!("{}({})", r.sampler, r.level) } else { r.sampler.clone() };
        if !names.contains(&name) {
            names.push(name);
        }
    }
    for name in names {
        let mut pts = Vec::new();
        for r in &sweep.rows {
            let key =
                if by_steps { format!("{}({})", r.sampler, r.level) } else { r.sampler.clone() };
            if key == name && (by_steps || r.sampler != "ode") {
                pts.push((if by_steps { r.steps as f64 } else { r.level }, value(r)?));
            }
        }
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        chart = chart.with(Series::new(name, pts));
    }
    Ok(chart)
}

/// A grid with one row per setting: the samples of prompt `prompt` (its index in the sweep's
/// prompts), the setting's label under the first.
pub fn sweep_grid(sweep: &SdeSweep, prompt: usize) -> Result<Png> {
    let k = sweep.samples;
    let (mut images, mut captions) = (Vec::new(), Vec::new());
    for (row, imgs) in sweep.rows.iter().zip(&sweep.images) {
        let chunk = imgs.get(prompt * k..(prompt + 1) * k).ok_or_else(|| StudyError::Argument {
            name: "prompt",
            value: prompt.to_string(),
            expected: format!("below {}", imgs.len() / k),
        })?;
        for (j, im) in chunk.iter().enumerate() {
            images.push(im.clone());
            captions.push(if j == 0 { row.label.clone() } else { String::new() });
        }
    }
    let caps: Vec<&str> = captions.iter().map(String::as_str).collect();
    let opts = GridOptions { columns: k, scale: 3, ..GridOptions::default() };
    Png::from_image(&grid(&images, &caps, &opts)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{DType, Device};
    use candle_nn::{VarBuilder, VarMap};
    use drift_flow::model::DitConfig;

    fn random_dit() -> Dit {
        let cfg = DitConfig { image_size: 16, ..DitConfig::test_tiny() };
        let varmap = VarMap::new();
        let dit =
            Dit::new(cfg, VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu)).unwrap();
        for (i, (_, var)) in varmap.data().lock().unwrap().iter().enumerate() {
            let noise = RngKey::new(3).row(i as u64).normal(var.shape(), DType::F32, &Device::Cpu);
            var.set(&(noise.unwrap() * 0.05).unwrap()).unwrap();
        }
        dit
    }

    #[test]
    fn a_zero_noise_sde_reproduces_the_ode_and_noise_moves_the_samples() {
        let (dit, task) = (random_dit(), ShapesTask::new().unwrap());
        let prompts = task.eval_prompts()[..2].to_vec();
        let settings = [
            SdeSetting { step: StepKind::Ode, steps: 4 },
            SdeSetting { step: StepKind::FlowGrpo { noise_level: 0.0 }, steps: 4 },
            SdeSetting { step: StepKind::FlowGrpo { noise_level: 1.0 }, steps: 4 },
        ];
        let s = sde_sweep(&dit, &task, &prompts, 2, &settings, 0).unwrap();
        assert!(s.rows[0].log_prob.is_nan(), "the ODE has no transition density");
        assert_eq!(s.images[0], s.images[1], "a = 0 is exactly the Euler step");
        assert!(s.rows[1].log_prob.is_nan(), "a = 0 is deterministic: no trained transition");
        assert_ne!(s.images[2], s.images[0], "a = 1 moves the samples off the ODE path");
        assert!(s.rows[2].log_prob.is_finite() && s.rows[2].log_prob < 0.0, "{:?}", s.rows);
        let t = sweep_table(&s).unwrap();
        assert_eq!(t.cell(2, "setting"), Some("flow_grpo(1)x4"));
        let chart = sweep_chart(&s, "diversity", "level").unwrap();
        assert_eq!(chart.series.len(), 1, "the ODE is left out of level charts");
        assert_eq!(
            chart.series[0].points,
            vec![(0.0, s.rows[1].diversity), (1.0, s.rows[2].diversity)]
        );
        assert!(sweep_chart(&s, "nope", "level").is_err());
        assert!(sweep_grid(&s, 1).is_ok() && sweep_grid(&s, 2).is_err());
    }
}
