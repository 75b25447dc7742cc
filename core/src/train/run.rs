//! The run skeleton every training loop shares: a run directory with its checkpoints, metrics
//! file, wall-clock budget and progress line; resume from the newest valid checkpoint; the
//! end-of-step bookkeeping (evaluation due, checkpoint, budget stop); and the finish.
//!
//! A loop reads top to bottom (docs/architecture.md §3):
//!
//! ```text
//! let (mut run, resumed) = Run::open(dir, settings, config_text, &mut opt)?;
//! for step in run.steps() {
//!     …rollout → reward → advantages → update; run.log(step + 1, &values)?;
//!     let end = run.end_of(step);
//!     if end.eval_due { …evaluate; run.log(step + 1, &eval)?; }
//!     if run.close_step(step, end, &opt, &figures)?.is_break() { break; }
//! }
//! let finished = run.finish(&curve_keys)?;
//! ```
//!
//! Nothing here knows a model family: the trainer owns its models, its update and its
//! evaluation; the run owns only files, clock and step counting.

use std::ops::{ControlFlow, Range};
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::budget::TimeBudget;
use super::checkpoint::{CheckpointMeta, Checkpointer};
use super::optimizer::Optimizer;
use crate::error::{io_err, Result};
use crate::metrics::{plot_metrics, MetricsWriter, Progress};

/// The `[run]` table every run config carries: how long the run is, its seed, and when it
/// checkpoints, evaluates and stops. Each trainer's config sets its own defaults (documented
/// there); [`RunSettings::default`] is what a table written from scratch starts from.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RunSettings {
    /// Steps (optimizer steps for pretraining, rollout iterations for RL) the run ends at.
    /// Default 100.
    pub steps: u64,
    /// Seed of every draw (initialisation, data, noise, masks); stored in each checkpoint.
    /// Default 0.
    pub seed: u64,
    /// Checkpoint every this many steps; the last step is always saved. Default 100.
    pub checkpoint_every: u64,
    /// Checkpoints kept on disk. Default 2.
    pub keep_last: usize,
    /// Wall-clock budget of one invocation in seconds: the run stops after the step during
    /// which it runs out, with that step checkpointed and the model saved (and, for the RL
    /// trainers, evaluated), as if `steps` had been reached; a later invocation resumes.
    /// Default none (no limit).
    pub max_seconds: Option<f64>,
    /// Intermediate evaluation every this many steps (0 = none; never at the last step, which
    /// the trainer evaluates in full). Default 0.
    pub eval_every: u64,
}

impl Default for RunSettings {
    fn default() -> Self {
        Self {
            steps: 100,
            seed: 0,
            checkpoint_every: 100,
            keep_last: 2,
            max_seconds: None,
            eval_every: 0,
        }
    }
}

/// The keys of [`RunSettings`], which configs written before the `[run]` table held at their
/// top level (`steps = 40` for `[run] steps = 40`); the command line still accepts them there.
pub const RUN_KEYS: [&str; 6] =
    ["steps", "seed", "checkpoint_every", "keep_last", "max_seconds", "eval_every"];

impl RunSettings {
    /// Checks the values before any work: `steps` and `checkpoint_every` at least 1 and
    /// `max_seconds` a positive, finite number of seconds when set.
    pub fn validate(&self) -> Result<()> {
        for (field, value) in [("steps", self.steps), ("checkpoint_every", self.checkpoint_every)] {
            if value == 0 {
                return Err(crate::error::CoreError::Config {
                    field,
                    value: "0".into(),
                    expected: "at least 1",
                });
            }
        }
        TimeBudget::new(self.max_seconds, "max_seconds").map(|_| ())
    }
}

/// How a run started.
#[derive(Debug, Clone)]
pub enum Resumed {
    /// No valid checkpoint: the run starts at step 0.
    Fresh,
    /// From this checkpoint, whose weights and optimizer state are loaded.
    From {
        /// The checkpoint directory.
        dir: PathBuf,
        /// Its metadata (step, trainer state in `extra`).
        meta: CheckpointMeta,
    },
}

/// What is due at the end of a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepEnd {
    /// The run ends after this step (`steps` reached or the budget spent).
    pub last: bool,
    /// The budget is spent with steps remaining.
    pub out_of_time: bool,
    /// An intermediate evaluation is due (`eval_every` divides the step; not the last).
    pub eval_due: bool,
}

/// What every finished run reports (flattened into each trainer's report and `summary.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finished {
    /// The folder the run's final model was saved to (`<run>/model`, [`Run::model_dir`]).
    #[serde(default)]
    pub model_dir: PathBuf,
    /// The step the run ended at: `steps`, or fewer when `max_seconds` ran out.
    #[serde(default)]
    pub steps: u64,
    /// Wall time of this invocation, seconds.
    pub seconds: f64,
    /// The metrics file.
    pub metrics: PathBuf,
    /// Its curves (`curves.png`).
    pub curves: PathBuf,
    /// Optimizer updates applied over the whole run (resumed ones included).
    #[serde(default)]
    pub updates_applied: u64,
    /// Updates skipped for a non-finite loss or gradient over the whole run.
    #[serde(default)]
    pub updates_skipped: u64,
}

impl Finished {
    /// An error when the run diverged: at least one update was attempted and every one was
    /// skipped (non-finite values, or a weight blow-up), so the saved model is the one the run
    /// started from. The binary turns it into
    /// exit status 1 after everything else has been written.
    pub fn check_learned(&self) -> Result<()> {
        if self.updates_applied == 0 && self.updates_skipped > 0 {
            return Err(crate::error::CoreError::Diverged(format!(
                "every update of the run was skipped ({} skipped, 0 applied: a non-finite loss \
                 or gradient, or a step past optim.max_weight_growth): the saved model is the \
                 one the run started from; lower the learning rate or check the reward",
                self.updates_skipped
            )));
        }
        Ok(())
    }
}

/// One training run in a directory: `checkpoints/`, `metrics.jsonl`, `curves.png`.
#[derive(Debug)]
pub struct Run {
    settings: RunSettings,
    config_text: String,
    dir: PathBuf,
    unit: &'static str,
    checkpointer: Checkpointer,
    log: MetricsWriter,
    budget: TimeBudget,
    progress: Progress,
    start: Instant,
    first: u64,
    last: u64,
    /// The optimizer's applied and skipped update counts at the last closed step.
    updates: (u64, u64),
    extra: serde_json::Value,
    /// Trainer tensors saved with every checkpoint (file name, tensors).
    extra_tensors: Vec<(String, std::collections::HashMap<String, candle_core::Tensor>)>,
}

impl Run {
    /// Opens the run in `dir` (created if missing): resumes from the newest valid checkpoint
    /// into `opt` (warning about each rejected one), truncating the metrics file at its cursor,
    /// or starts a fresh metrics file. `label` names the progress line, `unit` the step in
    /// messages ("step", "iteration").
    pub fn open(
        dir: &Path,
        settings: RunSettings,
        config_text: &str,
        label: &str,
        unit: &'static str,
        opt: &mut Optimizer,
    ) -> Result<(Self, Resumed)> {
        let start = Instant::now();
        let budget = TimeBudget::new(settings.max_seconds, "max_seconds")?;
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        let checkpointer = Checkpointer::new(dir.join("checkpoints"), settings.keep_last)?;
        let (latest, rejected) = checkpointer.latest_valid()?;
        for (d, err) in &rejected {
            eprintln!("warning: skipping checkpoint {}: {err}", d.display());
        }
        let metrics = dir.join("metrics.jsonl");
        let (first, log, resumed) = match latest {
            Some(d) => {
                let meta = Checkpointer::load(&d, opt)?;
                eprintln!("resuming from {} ({unit} {})", d.display(), meta.step);
                let log = if metrics.exists() {
                    MetricsWriter::open(&metrics, Some(meta.metrics_cursor))?
                } else {
                    // The weights and optimizer state are intact: go on, with a fresh log.
                    eprintln!(
                        "warning: {} is missing; a new one starts at {unit} {} (earlier lines \
                         are lost)",
                        metrics.display(),
                        meta.step
                    );
                    MetricsWriter::create(&metrics)?
                };
                (meta.step, log, Resumed::From { dir: d, meta })
            }
            None => (0, MetricsWriter::create(&metrics)?, Resumed::Fresh),
        };
        let run = Self {
            settings,
            config_text: config_text.to_string(),
            dir: dir.to_path_buf(),
            unit,
            checkpointer,
            log,
            budget,
            progress: Progress::new(settings.steps, label),
            start,
            first,
            last: first,
            updates: (0, 0),
            extra: serde_json::Value::Null,
            extra_tensors: Vec::new(),
        };
        Ok((run, resumed))
    }

    /// The steps this invocation runs: from the resumed step to `steps`.
    pub fn steps(&self) -> Range<u64> {
        self.first..self.settings.steps
    }

    /// Where every trainer saves its final model: `<run>/model`.
    pub fn model_dir(&self) -> PathBuf {
        self.dir.join("model")
    }

    /// The run directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Tensors saved as file `name` of every later checkpoint (e.g. a refreshed reference
    /// policy), replacing earlier ones of that name; read back on resume with
    /// [`crate::train::Checkpointer::load_tensors`]. The tensors are held as given, so pass
    /// snapshots that later updates do not change.
    pub fn set_extra_tensors(
        &mut self,
        name: &str,
        tensors: std::collections::HashMap<String, candle_core::Tensor>,
    ) {
        self.extra_tensors.retain(|(n, _)| n != name);
        self.extra_tensors.push((name.to_string(), tensors));
    }

    /// The trainer state stored in every checkpoint's `extra` (e.g. the base evaluation).
    pub fn set_extra(&mut self, extra: serde_json::Value) {
        self.extra = extra;
    }

    /// Appends one metrics line at `step`.
    pub fn log(&mut self, step: u64, values: &[(&str, f64)]) -> Result<()> {
        self.log.log(step, values)
    }

    /// Prints a line above the progress display.
    pub fn println(&self, line: &str) {
        self.progress.println(line);
    }

    /// What is due after step `step` (0-based) has run.
    pub fn end_of(&self, step: u64) -> StepEnd {
        let done = step + 1;
        let out_of_time = self.budget.stops_run(done, self.settings.steps);
        let last = done == self.settings.steps || out_of_time;
        let every = self.settings.eval_every;
        StepEnd { last, out_of_time, eval_due: !last && every > 0 && done % every == 0 }
    }

    /// Closes step `step`: shows `figures` on the progress line, checkpoints `opt` when due
    /// (every `checkpoint_every` steps and at the last one) and says whether to go on.
    pub fn close_step(
        &mut self,
        step: u64,
        end: StepEnd,
        opt: &Optimizer,
        figures: &[(&str, f64)],
    ) -> Result<ControlFlow<()>> {
        let done = step + 1;
        self.last = done;
        self.updates = (opt.step_count(), opt.skipped_count());
        self.progress.update(done, figures);
        if end.last || done % self.settings.checkpoint_every.max(1) == 0 {
            let meta = CheckpointMeta {
                step: done,
                seed: self.settings.seed,
                config: self.config_text.clone(),
                metrics_cursor: self.log.cursor(),
                extra: self.extra.clone(),
                optimizer_step: 0,
                skipped_steps: 0,
            };
            self.checkpointer.save_with(opt, &meta, &self.extra_tensors)?;
        }
        if end.out_of_time {
            self.progress.println(&self.budget.stop_line(self.unit, done, self.settings.steps));
        }
        Ok(if end.last { ControlFlow::Break(()) } else { ControlFlow::Continue(()) })
    }

    /// The step the run has reached.
    pub fn step(&self) -> u64 {
        self.last
    }

    /// Ends the progress display and draws `curve_keys` of the metrics into `curves.png`.
    pub fn finish(self, curve_keys: &[&str]) -> Result<Finished> {
        self.progress.finish();
        let metrics = self.log.path().to_path_buf();
        let curves = self.dir.join("curves.png");
        plot_metrics(&metrics, curve_keys, &curves)?;
        Ok(Finished {
            model_dir: self.model_dir(),
            steps: self.last,
            seconds: self.start.elapsed().as_secs_f64(),
            metrics,
            curves,
            updates_applied: self.updates.0,
            updates_skipped: self.updates.1,
        })
    }
}

/// Writes `value` as pretty JSON to `path` (a run's `summary.json`, a base evaluation).
pub fn write_json(path: &Path, value: &impl Serialize) -> Result<()> {
    let text = serde_json::to_string_pretty(value).map_err(|e| crate::error::CoreError::Io {
        path: path.to_path_buf(),
        source: std::io::Error::other(e.to_string()),
    })?;
    std::fs::write(path, text).map_err(io_err(path))
}
