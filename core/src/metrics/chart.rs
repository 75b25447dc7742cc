//! Multi-series line charts as PNG: the plots of the sampler notebooks and `drift plot`
//! (accuracy vs steps per decoding rule, log-probability vs noise level per SDE).

use std::path::Path;

use super::canvas::{Canvas, AXIS, GRID};
use super::plot::tick_label;
use crate::error::{CoreError, Result};
use crate::font::text_width;

/// Line colours, in series order (matplotlib's tab10).
pub const PALETTE: [[u8; 3]; 8] = [
    [31, 119, 180],
    [255, 127, 14],
    [44, 160, 44],
    [214, 39, 40],
    [148, 103, 189],
    [140, 86, 75],
    [227, 119, 194],
    [127, 127, 127],
];

/// One named line: `(x, y)` points drawn in order; non-finite `y` leaves a gap.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// The legend entry.
    pub name: String,
    /// The points.
    pub points: Vec<(f64, f64)>,
}

impl Series {
    /// A series named `name` through `points`.
    pub fn new(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Self { name: name.into(), points }
    }
}

/// A line chart: title, axis labels, series with a legend, 5 ticks per axis.
#[derive(Debug, Clone, PartialEq)]
pub struct LineChart {
    /// Title above the plot area.
    pub title: String,
    /// Label under the x axis.
    pub x_label: String,
    /// Label above the y axis.
    pub y_label: String,
    /// The lines.
    pub series: Vec<Series>,
    /// Width and height in pixels. Default 720 × 400.
    pub size: (u32, u32),
}

const LEFT: i64 = 80;
const RIGHT: i64 = 170;
const TOP: i64 = 34;
const BOTTOM: i64 = 40;

impl LineChart {
    /// An empty chart.
    pub fn new(
        title: impl Into<String>,
        x_label: impl Into<String>,
        y_label: impl Into<String>,
    ) -> Self {
        Self {
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            series: Vec::new(),
            size: (720, 400),
        }
    }

    /// The chart with `series` added.
    #[must_use]
    pub fn with(mut self, series: Series) -> Self {
        self.series.push(series);
        self
    }

    /// The `(min, max)` of the finite values of `f`, padded by 5% (and widened when flat);
    /// an error when no point is finite.
    fn range(&self, f: impl Fn(&(f64, f64)) -> f64) -> Result<(f64, f64)> {
        let vals =
            self.series.iter().flat_map(|s| s.points.iter().map(&f)).filter(|v| v.is_finite());
        let (lo, hi) =
            vals.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| (a.min(v), b.max(v)));
        if !lo.is_finite() {
            return Err(CoreError::Mismatch(format!(
                "chart `{}`: no finite point to plot",
                self.title
            )));
        }
        if hi - lo < 1e-12 {
            let w = 0.5 * lo.abs().max(1.0);
            return Ok((lo - w, hi + w));
        }
        let pad = 0.05 * (hi - lo);
        Ok((lo - pad, hi + pad))
    }

    /// Renders the chart as PNG bytes; an error when no point is finite.
    pub fn to_png(&self) -> Result<Vec<u8>> {
        let (w, h) = self.size;
        let (xr, yr) =
            (self.range(|p| if p.1.is_finite() { p.0 } else { f64::NAN })?, self.range(|p| p.1)?);
        let mut c = Canvas::new(w, h);
        let (x0, x1, y0, y1) = (LEFT, i64::from(w) - RIGHT, TOP, i64::from(h) - BOTTOM);
        let px = |x: f64| x0 + ((x - xr.0) / (xr.1 - xr.0) * (x1 - x0) as f64).round() as i64;
        let py = |y: f64| y1 - ((y - yr.0) / (yr.1 - yr.0) * (y1 - y0) as f64).round() as i64;
        for i in 0..=4 {
            let t = f64::from(i) / 4.0;
            let (yv, xv) = (yr.0 + (yr.1 - yr.0) * t, xr.0 + (xr.1 - xr.0) * t);
            c.line((x0, py(yv)), (x1, py(yv)), GRID, false);
            let label = tick_label(yv);
            c.text(x0 - 6 - text_width(&label, 1) as i64, py(yv) - 3, &label);
            let label = tick_label(xv);
            c.line((px(xv), y1), (px(xv), y1 + 4), AXIS, false);
            c.text(px(xv) - text_width(&label, 1) as i64 / 2, y1 + 8, &label);
        }
        c.line((x0, y0), (x0, y1), AXIS, false);
        c.line((x0, y1), (x1, y1), AXIS, false);
        c.text(x0, 8, &self.title);
        c.text(x0 - 70, y0 - 14, &self.y_label);
        c.text(x1 - text_width(&self.x_label, 1) as i64, y1 + 24, &self.x_label);
        for (k, s) in self.series.iter().enumerate() {
            let rgb = PALETTE[k % PALETTE.len()];
            let mut prev: Option<(i64, i64)> = None;
            for &(x, y) in &s.points {
                if !(x.is_finite() && y.is_finite()) {
                    prev = None;
                    continue;
                }
                let p = (px(x), py(y));
                if let Some(q) = prev {
                    c.line(q, p, rgb, true);
                }
                c.rect((p.0 - 2, p.1 - 2), (5, 5), rgb);
                prev = Some(p);
            }
            let ly = y0 + 14 * k as i64;
            c.rect((x1 + 12, ly), (10, 7), rgb);
            c.text_rgb(x1 + 26, ly, &s.name, AXIS);
        }
        c.png()
    }

    /// Writes the chart to `path` as PNG.
    pub fn save(&self, path: &Path) -> Result<()> {
        let bytes = self.to_png()?;
        std::fs::write(path, bytes).map_err(crate::error::io_err(path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decoded(png: &[u8]) -> image::RgbImage {
        image::load_from_memory(png).unwrap().to_rgb8()
    }

    #[test]
    fn each_series_is_drawn_in_its_colour_at_its_points() {
        let chart = LineChart::new("t", "x", "y")
            .with(Series::new("a", vec![(0.0, 0.0), (1.0, 1.0)]))
            .with(Series::new("b", vec![(0.0, 1.0), (1.0, f64::NAN)]));
        let img = decoded(&chart.to_png().unwrap());
        assert_eq!(img.dimensions(), (720, 400));
        let count = |rgb: [u8; 3]| img.pixels().filter(|p| p.0 == rgb).count();
        // Series a: a line plus two markers and a legend swatch; b: one marker + swatch.
        assert!(count(PALETTE[0]) > 400, "{}", count(PALETTE[0]));
        let b = count(PALETTE[1]);
        assert_eq!(b, 25 + 70, "one 5×5 marker and a 10×7 legend swatch, no line to a NaN");
        // Ranges padded by 5%: x, y in [-0.05, 1.05] over 470 × 326 pixels, so (0, 0) is at
        // (80 + 21, 360 − 15) and (0, 1) at (101, 360 − 311).
        assert_eq!(img.get_pixel(101, 345).0, PALETTE[0], "marker of a's (0, 0)");
        assert_eq!(img.get_pixel(101, 49).0, PALETTE[1], "marker of b's (0, 1)");
        assert_eq!(img.get_pixel(529, 49).0, PALETTE[0], "marker of a's (1, 1)");
    }

    #[test]
    fn a_chart_without_finite_points_is_an_error_naming_it() {
        let chart =
            LineChart::new("empty one", "x", "y").with(Series::new("a", vec![(0.0, f64::NAN)]));
        assert!(chart.to_png().unwrap_err().to_string().contains("empty one"));
    }
}
