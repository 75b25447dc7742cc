//! PNG line plots of a metrics file: one panel per metric against `step`.

use std::path::Path;

use super::canvas::{Canvas, AXIS, GRID, LINE};
use super::jsonl::read_metrics;
use crate::error::{CoreError, Result};
use crate::font::text_width;

const W: u32 = 900;
const PANEL_H: u32 = 240;
const MARGIN_L: u32 = 90;
const MARGIN_R: u32 = 20;
const MARGIN_T: u32 = 28;
const MARGIN_B: u32 = 34;

/// The most panels one PNG holds (a 900 × 15 360 image); more metrics must be chosen by name.
pub const MAX_PANELS: usize = 64;

pub(crate) fn tick_label(v: f64) -> String {
    let a = v.abs();
    if a != 0.0 && !(1e-3..1e5).contains(&a) {
        format!("{v:.2e}")
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

/// One metric's points `(step, value)`; non-finite or missing values are gaps.
fn series(rows: &[super::MetricsRow], key: &str) -> Vec<(f64, Option<f64>)> {
    rows.iter()
        .filter_map(|r| {
            let step = r.get("step")?.as_f64()?;
            let v = r.get(key)?;
            Some((step, v.as_f64().filter(|x| x.is_finite())))
        })
        .collect()
}

fn panel(c: &mut Canvas, top: u32, key: &str, pts: &[(f64, Option<f64>)]) {
    let (x0, x1) = (MARGIN_L as i64, (W - MARGIN_R) as i64);
    let (y0, y1) = ((top + MARGIN_T) as i64, (top + PANEL_H - MARGIN_B) as i64);
    let finite: Vec<f64> = pts.iter().filter_map(|p| p.1).collect();
    let (mut lo, mut hi) =
        finite.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| (a.min(v), b.max(v)));
    if !lo.is_finite() {
        (lo, hi) = (0.0, 1.0);
    } else if hi - lo < 1e-12 {
        (lo, hi) = (lo - 0.5 * lo.abs().max(1.0), hi + 0.5 * hi.abs().max(1.0));
    } else {
        let pad = 0.05 * (hi - lo);
        (lo, hi) = (lo - pad, hi + pad);
    }
    let (smin, smax) =
        pts.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| (a.min(p.0), b.max(p.0)));
    let (smin, smax) = if smax > smin { (smin, smax) } else { (smin - 1.0, smin + 1.0) };
    let px = |s: f64| x0 + ((s - smin) / (smax - smin) * (x1 - x0) as f64).round() as i64;
    let py = |v: f64| y1 - ((v - lo) / (hi - lo) * (y1 - y0) as f64).round() as i64;
    for i in 0..=4 {
        let v = lo + (hi - lo) * f64::from(i) / 4.0;
        let y = py(v);
        c.line((x0, y), (x1, y), GRID, false);
        let label = tick_label(v);
        c.text(x0 - 6 - text_width(&label, 1) as i64, y - 3, &label);
    }
    for i in 0..=4 {
        let s = smin + (smax - smin) * f64::from(i) / 4.0;
        let label = format!("{}", s.round() as i64);
        let x = px(s);
        c.line((x, y1), (x, y1 + 4), AXIS, false);
        c.text(x - text_width(&label, 1) as i64 / 2, y1 + 8, &label);
    }
    c.line((x0, y0), (x0, y1), AXIS, false);
    c.line((x0, y1), (x1, y1), AXIS, false);
    c.text(x0, (top + 8) as i64, key);
    c.text(x1 - text_width("step", 1) as i64, y1 + 20, "step");
    let mut prev: Option<(i64, i64)> = None;
    for &(s, v) in pts {
        match v {
            Some(v) => {
                let p = (px(s), py(v));
                match prev {
                    Some(q) => c.line(q, p, LINE, true),
                    None => c.dot(p.0, p.1, LINE),
                }
                prev = Some(p);
            }
            None => prev = None,
        }
    }
}

/// Writes a PNG with one panel per metric of `keys` (every numeric metric but `step` and
/// `time_s` when `keys` is empty, in name order), read from the JSONL metrics file `metrics`. Returns the
/// metrics plotted. More than [`MAX_PANELS`] metrics is an error that says how many there are
/// and to choose some by name.
pub fn plot_metrics(metrics: &Path, keys: &[&str], out: &Path) -> Result<Vec<String>> {
    let rows = read_metrics(metrics)?;
    let mut names: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
    if names.is_empty() {
        for r in &rows {
            for (k, v) in r {
                if k != "step" && k != "time_s" && v.is_number() && !names.contains(k) {
                    names.push(k.clone());
                }
            }
        }
    }
    if let Some(missing) = names.iter().find(|k| series(&rows, k).is_empty()) {
        return Err(CoreError::Mismatch(format!(
            "{}: no metric named `{missing}` in any line",
            metrics.display()
        )));
    }
    if names.len() > MAX_PANELS {
        return Err(CoreError::Mismatch(format!(
            "{}: {} metrics to plot, at most {MAX_PANELS} fit one image; choose them by name \
             (drift plot --keys a,b,…)",
            metrics.display(),
            names.len()
        )));
    }
    let h = PANEL_H * names.len().max(1) as u32;
    let mut c = Canvas::new(W, h);
    for (i, key) in names.iter().enumerate() {
        panel(&mut c, i as u32 * PANEL_H, key, &series(&rows, key));
    }
    c.save(out)?;
    Ok(names)
}
