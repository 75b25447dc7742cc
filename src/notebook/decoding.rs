//! Decoding-order study for a dLLM (notebook 1): greedy decoding of a text task's items under
//! each position rule (low-confidence, margin, entropy, random, Fast-dLLM's threshold τ) at
//! several step budgets, scored by the task; and a picture of the order in which a row's
//! positions were committed.
//!
//! Fewer steps commit more tokens per model evaluation (LLaDA's quota `L / steps` per step),
//! so accuracy against evaluations is the speed–quality trade-off of each rule.

use std::time::Instant;

use drift_core::font::has_glyph;
use drift_core::metrics::{LineChart, Series};
use drift_dllm::grpo::{decode_and_score, TaskScore, TextTask};
use drift_dllm::model::DiffusionLm;
use drift_rewards::image::Image;
use drift_samplers::dllm::{DecodeConfig, PositionRule, Trajectory};

use super::display::{colormap, Png, Table};
use super::{Result, StudyError};

/// The rule's short name: `low_confidence`, `margin`, `entropy`, `random`, `origin`,
/// `threshold(τ)`.
pub fn rule_name(rule: &PositionRule) -> String {
    match rule {
        PositionRule::LowConfidence => "low_confidence".into(),
        PositionRule::Random => "random".into(),
        PositionRule::Margin => "margin".into(),
        PositionRule::Entropy => "entropy".into(),
        PositionRule::Origin { .. } => "origin".into(),
        PositionRule::Threshold { tau } => format!("threshold({tau})"),
        PositionRule::DreamThreshold { tau } => format!("dream_threshold({tau})"),
    }
}

/// The rules the notebook compares: the four quota rules and the threshold rule at τ = 0.9
/// (Fast-dLLM's default) and τ = 0.5.
pub fn default_rules() -> Vec<PositionRule> {
    vec![
        PositionRule::LowConfidence,
        PositionRule::Margin,
        PositionRule::Entropy,
        PositionRule::Random,
        PositionRule::Threshold { tau: 0.9 },
        PositionRule::Threshold { tau: 0.5 },
    ]
}

/// What one decoding setting produced over a set of items.
#[derive(Debug, Clone)]
pub struct DecodeRun {
    /// One trajectory per batch of rows.
    pub trajectories: Vec<Trajectory>,
    /// The completions' text, item order.
    pub completions: Vec<String>,
    /// Their scores, item order.
    pub scores: Vec<TaskScore>,
    /// Model evaluations per batch, averaged over batches.
    pub evaluations: f64,
    /// Wall time.
    pub seconds: f64,
}

impl DecodeRun {
    /// Fraction of items solved.
    pub fn pass_rate(&self) -> f64 {
        let n = self.scores.len().max(1) as f64;
        self.scores.iter().filter(|s| s.passed).count() as f64 / n
    }

    /// Mean reward.
    pub fn reward_mean(&self) -> f64 {
        let n = self.scores.len().max(1) as f64;
        self.scores.iter().map(|s| s.reward).sum::<f64>() / n
    }
}

/// Decodes `items` greedily (temperature 0) with `cfg`, `batch` rows at a time, and scores
/// each completion with the task (`drift_dllm::grpo::decode_and_score`, the trainer's eval).
pub fn decode_items<T: TextTask>(
    model: &DiffusionLm,
    task: &T,
    items: &[T::Item],
    cfg: &DecodeConfig,
    batch: usize,
) -> Result<DecodeRun> {
    let t0 = Instant::now();
    let (mut trajectories, mut completions, mut scores) = (Vec::new(), Vec::new(), Vec::new());
    for b in decode_and_score(model, task, items, cfg, batch)? {
        trajectories.push(b.trajectory);
        completions.extend(b.completions);
        scores.extend(b.scores);
    }
    let evaluations = trajectories.iter().map(|t| t.evaluations as f64).sum::<f64>()
        / trajectories.len().max(1) as f64;
    Ok(DecodeRun {
        trajectories,
        completions,
        scores,
        evaluations,
        seconds: t0.elapsed().as_secs_f64(),
    })
}

/// One point of a sweep.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SweepRow {
    /// [`rule_name`] of the rule.
    pub rule: String,
    /// Steps asked for (the threshold rule decides its own: 0).
    pub steps: usize,
    /// Model evaluations per batch actually made.
    pub evaluations: f64,
    /// Fraction of items solved.
    pub pass_rate: f64,
    /// Mean reward.
    pub reward_mean: f64,
    /// Wall time of the point.
    pub seconds: f64,
}

/// Decodes `items` under every rule of `rules` at every step budget of `steps` (once for the
/// threshold rule, which sets its own), with the rest of `base` (completion length, blocks).
pub fn steps_sweep<T: TextTask>(
    model: &DiffusionLm,
    task: &T,
    items: &[T::Item],
    rules: &[PositionRule],
    steps: &[usize],
    base: &DecodeConfig,
    batch: usize,
) -> Result<Vec<SweepRow>> {
    if steps.is_empty() || rules.is_empty() || items.is_empty() {
        return Err(StudyError::Argument {
            name: "rules / steps / items",
            value: format!("{} / {} / {}", rules.len(), steps.len(), items.len()),
            expected: "at least one of each".into(),
        });
    }
    let mut rows = Vec::new();
    for rule in rules {
        let budgets: Vec<usize> =
            if matches!(rule, PositionRule::Threshold { .. }) { vec![0] } else { steps.to_vec() };
        for s in budgets {
            let cfg = DecodeConfig { position: *rule, steps: s.max(1), ..base.clone() };
            let run = decode_items(model, task, items, &cfg, batch)?;
            rows.push(SweepRow {
                rule: rule_name(rule),
                steps: s,
                evaluations: run.evaluations,
                pass_rate: run.pass_rate(),
                reward_mean: run.reward_mean(),
                seconds: run.seconds,
            });
        }
    }
    Ok(rows)
}

/// The sweep as a table.
pub fn sweep_table(rows: &[SweepRow]) -> Result<Table> {
    let mut t = Table::new(
        "greedy decoding per position rule and step budget",
        &["rule", "steps", "evaluations", "pass rate", "mean reward", "seconds"],
    );
    for r in rows {
        t.push(vec![
            r.rule.clone(),
            if r.steps == 0 { "auto".into() } else { r.steps.to_string() },
            format!("{:.1}", r.evaluations),
            format!("{:.3}", r.pass_rate),
            format!("{:.3}", r.reward_mean),
            format!("{:.1}", r.seconds),
        ])?;
    }
    Ok(t)
}

/// `metric` (`"pass_rate"` or `"reward_mean"`) against model evaluations, one line per rule.
pub fn sweep_chart(rows: &[SweepRow], metric: &str) -> Result<LineChart> {
    let value = |r: &SweepRow| match metric {
        "pass_rate" => Ok(r.pass_rate),
        "reward_mean" => Ok(r.reward_mean),
        other => Err(StudyError::Argument {
            name: "metric",
            value: other.into(),
            expected: "pass_rate or reward_mean".into(),
        }),
    };
    let mut chart = LineChart::new(
        format!("{metric} vs model evaluations per position rule"),
        "model evaluations",
        metric,
    );
    let mut names: Vec<&str> = Vec::new();
    for r in rows {
        if !names.contains(&r.rule.as_str()) {
            names.push(&r.rule);
        }
    }
    for name in names {
        let mut pts = Vec::new();
        for r in rows.iter().filter(|r| r.rule == name) {
            pts.push((r.evaluations, value(r)?));
        }
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        chart = chart.with(Series::new(name, pts));
    }
    Ok(chart)
}

/// Pixels of one token cell of the commit-order picture.
const CELL: (usize, usize) = (8, 11);

/// The order in which the completion positions of `rows` of `traj` were committed: one cell
/// per position, its colour the commit step (dark = early, yellow = late, grey = never), with
/// the committed character drawn on it; `per_line` cells per line of the picture.
pub fn commit_order_picture<T: TextTask>(
    task: &T,
    traj: &Trajectory,
    rows: &[usize],
    per_line: usize,
) -> Result<Png> {
    let p = traj.prompt_len;
    let steps = traj.commit_step.to_vec2::<i64>()?;
    let tokens = traj.tokens.to_vec2::<u32>()?;
    let bad = rows.iter().find(|&&r| r >= steps.len());
    if rows.is_empty() || per_line == 0 || bad.is_some() {
        return Err(StudyError::Argument {
            name: "rows / per_line",
            value: format!("{rows:?} / {per_line}"),
            expected: format!("rows below {} and per_line ≥ 1", steps.len()),
        });
    }
    let len = steps[0].len() - p;
    let lines = len.div_ceil(per_line);
    let last = steps.iter().flat_map(|r| r[p..].iter().copied()).max().unwrap_or(0).max(1);
    let (w, h) = (per_line * CELL.0 + 4, rows.len() * (lines * CELL.1 + 6) + 4);
    let mut img = Image::filled(w, h, [255, 255, 255]);
    for (k, &r) in rows.iter().enumerate() {
        for j in 0..len {
            let (x, y) = (
                2 + (j % per_line) * CELL.0,
                2 + k * (lines * CELL.1 + 6) + (j / per_line) * CELL.1,
            );
            let step = steps[r][p + j];
            let bg = if step >= 0 { colormap(step as f64 / last as f64) } else { [200, 200, 200] };
            for yy in y..y + CELL.1 - 1 {
                for xx in x..x + CELL.0 - 1 {
                    img.set(xx, yy, bg);
                }
            }
            let text = task.completion_text(&tokens[r][p + j..=p + j])?;
            let c = text.chars().next().filter(|&c| c != ' ' && has_glyph(c));
            if let Some(c) = c {
                let light = u32::from(bg[0]) + u32::from(bg[1]) + u32::from(bg[2]) > 380;
                let ink = if light { [0, 0, 0] } else { [255, 255, 255] };
                img.draw_text(x + 1, y + 2, &c.to_string(), ink, 1);
            }
        }
    }
    Png::from_image(&img.upscale(2)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use drift_core::rng::RngKey;
    use drift_dllm::grpo::CodeTask;
    use drift_dllm::model::{LoadOptions, TinySize};
    use drift_dllm::tokenizer::{CharTokenizer, Tokenizer};

    #[test]
    fn quota_rules_spend_their_budget_and_the_picture_colours_commit_order() {
        let tok = CharTokenizer::ascii();
        let model = DiffusionLm::init(
            TinySize::Nano.spec().llada(tok.vocab_spec()),
            RngKey::new(1),
            &LoadOptions::frozen(),
        )
        .unwrap()
        .with_tokenizer(Tokenizer::Char(tok));
        let task = CodeTask::new().unwrap();
        let items = task.eval_items(3);
        let base = DecodeConfig { gen_length: 8, block_length: 8, ..DecodeConfig::default() };
        let rules = [PositionRule::LowConfidence, PositionRule::Threshold { tau: 0.9 }];
        let rows = steps_sweep(&model, &task, &items, &rules, &[2, 8], &base, 2).unwrap();
        assert_eq!(rows.len(), 3, "{rows:?}");
        assert_eq!((rows[0].evaluations, rows[1].evaluations), (2.0, 8.0));
        assert_eq!(rows[2].rule, "threshold(0.9)");
        assert!(rows[2].evaluations >= 1.0 && rows[2].evaluations <= 8.0);
        let chart = sweep_chart(&rows, "reward_mean").unwrap();
        assert_eq!(chart.series.len(), 2);
        assert_eq!(sweep_table(&rows).unwrap().cell(2, "steps"), Some("auto"));

        // One token per step: position j committed at step s gets colour s/7.
        let cfg = DecodeConfig { steps: 8, ..base };
        let run = decode_items(&model, &task, &items[..1], &cfg, 1).unwrap();
        let traj = &run.trajectories[0];
        let steps = traj.commit_step.to_vec2::<i64>().unwrap();
        let p = traj.prompt_len;
        let png = commit_order_picture(&task, traj, &[0], 8).unwrap();
        let img = image_of(&png);
        for j in 0..8 {
            // Cell j's top-left pixel (doubled by the upscale) is its background colour.
            let px = img.get((2 + j * CELL.0) * 2, 2 * 2).unwrap();
            assert_eq!(px, colormap(steps[0][p + j] as f64 / 7.0), "position {j}");
        }
        assert!(commit_order_picture(&task, traj, &[1], 8).is_err());
    }

    fn image_of(png: &Png) -> Image {
        let img = image::load_from_memory(&png.bytes).unwrap().to_rgb8();
        let (w, h) = img.dimensions();
        Image::from_raw(w as usize, h as usize, img.into_raw()).unwrap()
    }
}
