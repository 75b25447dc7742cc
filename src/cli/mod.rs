//! The subcommands of the `drift` binary, and its exit-status contract: 0 success, 1 the run
//! failed, 2 bad usage (see [`UsageError`]).

pub mod bench;
pub mod config;
pub mod device;
pub mod dllm;
pub mod flow;
pub mod resume;
pub mod sample;
pub mod sudoku;

use std::path::Path;

/// A problem with what the user asked for, found before any work: an unknown or invalid
/// config key or value, a config file or model folder that does not exist. `drift` exits
/// with status 2 on it (as clap does on a bad flag), and 1 on every other error.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// A usage error when `need` bytes exceed the memory available now (where the system says),
/// naming `what` to lower.
pub fn check_memory(what: &str, need: u64) -> anyhow::Result<()> {
    if let Some(available) = drift::core::alloc::available_memory() {
        if need > available {
            let gib = |b: u64| b as f64 / f64::from(1u32 << 30);
            return Err(usage(format!(
                "{what}: needs at least {:.1} GiB and {:.1} GiB is available; lower it",
                gib(need),
                gib(available)
            )));
        }
    }
    Ok(())
}

/// The line saying `max_seconds` stopped a run before its `planned` steps (counted in `unit`s),
/// when it did.
pub fn print_stopped(run: &drift::core::train::Finished, planned: u64, unit: &str) {
    if run.steps < planned {
        outln!("stopped by max_seconds after {unit} {} of {planned}", run.steps);
    }
}

/// The closing lines of every training command (wall time; where the model, the metrics and
/// the curves are), then the run's divergence check: an error (exit 1) when every update was
/// skipped, after everything has been written.
pub fn print_finished(run: &drift::core::train::Finished) -> anyhow::Result<()> {
    outln!("wall time: {:.1} s", run.seconds);
    outln!("model:   {}", run.model_dir.display());
    outln!("metrics: {}", run.metrics.display());
    outln!("curves:  {}", run.curves.display());
    Ok(run.check_learned()?)
}

/// An [`UsageError`] as an `anyhow::Error`.
pub fn usage(message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(UsageError(message.into()))
}

/// What every training command (`pretrain` and `train`, both families) is given.
pub struct RunCommand<'a> {
    /// The TOML config file (`--config`); none = the defaults.
    pub config: Option<&'a Path>,
    /// The `--set key=value` overrides.
    pub sets: &'a [String],
    /// The run directory (`--out`).
    pub out: &'a Path,
    /// `--force`: resume a run directory made with other settings.
    pub force: bool,
}

impl RunCommand<'_> {
    /// The config (file and overrides laid over `T::default()`) and its final TOML text.
    pub fn load<T: serde::de::DeserializeOwned + serde::Serialize + Default>(
        &self,
    ) -> anyhow::Result<(T, String)> {
        config::load(self.config, self.sets)
    }

    /// Creates the run directory, refuses a resume with other settings (unless `--force`)
    /// and records `text` as its `config.toml`.
    pub fn prepare_run_dir(&self, text: &str) -> anyhow::Result<()> {
        resume::prepare_run_dir(self.out, text, self.force)
    }
}

/// Errors with a [`UsageError`] naming `what` unless `dir` is an existing directory.
pub fn existing_dir(dir: &Path, what: &str) -> anyhow::Result<()> {
    if dir.is_dir() {
        Ok(())
    } else {
        Err(usage(format!("{what} {}: no such directory", dir.display())))
    }
}
