//! The console progress line: an indicatif bar on a terminal, plain periodic lines otherwise.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A progress display for `total` steps showing a few key figures.
///
/// On a terminal it is a live bar; when stderr is not a terminal (logs, CI) it prints one plain
/// line every `every` steps instead of redrawing, so logs stay readable. `NO_COLOR` turns
/// colours off.
#[derive(Debug)]
pub struct Progress {
    bar: Option<ProgressBar>,
    total: u64,
    every: u64,
}

impl Progress {
    /// A progress display for `total` steps.
    pub fn new(total: u64, label: &str) -> Self {
        let every = (total / 20).max(1);
        if !std::io::stderr().is_terminal() {
            return Self { bar: None, total, every };
        }
        let colour = std::env::var_os("NO_COLOR").is_none();
        let template = if colour {
            "{prefix} [{bar:30.cyan/blue}] {pos}/{len} {elapsed_precise}<{eta_precise} {msg}"
        } else {
            "{prefix} [{bar:30}] {pos}/{len} {elapsed_precise}<{eta_precise} {msg}"
        };
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
        let style = ProgressStyle::with_template(template)
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
        bar.set_style(style);
        bar.set_prefix(label.to_string());
        Self { bar: Some(bar), total, every }
    }

    /// Marks step `step` (1-based) done with figures such as `[("reward", 0.41)]`.
    pub fn update(&self, step: u64, figures: &[(&str, f64)]) {
        let msg = figures.iter().map(|(k, v)| format!("{k} {v:.4}")).collect::<Vec<_>>().join(" ");
        match &self.bar {
            Some(bar) => {
                bar.set_position(step);
                bar.set_message(msg);
            }
            None if step % self.every == 0 || step == self.total => {
                eprintln!("step {step}/{}: {msg}", self.total);
            }
            None => {}
        }
    }

    /// Prints a line above the bar (or plainly).
    pub fn println(&self, line: &str) {
        match &self.bar {
            Some(bar) => bar.println(line),
            None => eprintln!("{line}"),
        }
    }

    /// Ends the display.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish();
        }
    }
}
