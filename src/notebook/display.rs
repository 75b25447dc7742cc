//! Inline display in evcxr: a type with an `evcxr_display(&self)` method that prints
//! `EVCXR_BEGIN_CONTENT <mime>\n<payload>\nEVCXR_END_CONTENT` is shown by the kernel as that
//! MIME type (evcxr_jupyter's display protocol). [`Png`] shows as an image, [`Table`] as
//! aligned text.

use std::fmt;
use std::path::Path;

use base64::Engine;
use drift_core::metrics::LineChart;
use drift_rewards::image::{encode_png, Image};

use super::{Result, StudyError};

/// The evcxr display block of `payload` as `mime`.
fn display_block(mime: &str, payload: &str) -> String {
    format!("EVCXR_BEGIN_CONTENT {mime}\n{payload}\nEVCXR_END_CONTENT")
}

/// A PNG picture: shown inline by evcxr, saved with [`Png::save`].
#[derive(Clone, PartialEq, Eq)]
pub struct Png {
    /// The encoded PNG file.
    pub bytes: Vec<u8>,
}

impl fmt::Debug for Png {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Png({} bytes)", self.bytes.len())
    }
}

impl Png {
    /// The PNG encoding of `image`.
    pub fn from_image(image: &Image) -> Result<Self> {
        Ok(Self { bytes: encode_png(image)? })
    }

    /// The rendered `chart`.
    pub fn from_chart(chart: &LineChart) -> Result<Self> {
        Ok(Self { bytes: chart.to_png()? })
    }

    /// Writes the PNG to `path`.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        std::fs::write(path, &self.bytes)
            .map_err(|source| StudyError::Io { path: path.to_path_buf(), source })
    }

    /// The evcxr display block: `image/png` with the base64 of the file.
    pub fn display_text(&self) -> String {
        display_block("image/png", &base64::engine::general_purpose::STANDARD.encode(&self.bytes))
    }

    /// Shows the picture inline in an evcxr notebook (called by the kernel on a cell's value).
    pub fn evcxr_display(&self) {
        println!("{}", self.display_text());
    }
}

/// A text table: a title, a header row and rows of cells, printed with aligned columns.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Table {
    /// The line above the table.
    pub title: String,
    /// Column names.
    pub header: Vec<String>,
    /// The rows, each as many cells as `header`.
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// An empty table with `header`.
    pub fn new(title: impl Into<String>, header: &[&str]) -> Self {
        Self {
            title: title.into(),
            header: header.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Appends a row; an error when its length differs from the header's.
    pub fn push(&mut self, row: Vec<String>) -> Result<()> {
        if row.len() != self.header.len() {
            return Err(StudyError::Argument {
                name: "row",
                value: format!("{} cells", row.len()),
                expected: format!(
                    "{} cells, one per column of {:?}",
                    self.header.len(),
                    self.header
                ),
            });
        }
        self.rows.push(row);
        Ok(())
    }

    /// The cell at `(row, column name)`, if both exist.
    pub fn cell(&self, row: usize, column: &str) -> Option<&str> {
        let c = self.header.iter().position(|h| h == column)?;
        self.rows.get(row).map(|r| r[c].as_str())
    }

    /// The evcxr display block: `text/plain` with the aligned table.
    pub fn display_text(&self) -> String {
        display_block("text/plain", &self.to_string())
    }

    /// Shows the table inline in an evcxr notebook.
    pub fn evcxr_display(&self) {
        println!("{}", self.display_text());
    }
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let width = |c: usize| {
            self.rows
                .iter()
                .map(|r| r[c].chars().count())
                .chain([self.header[c].chars().count()])
                .max()
                .unwrap_or(0)
        };
        let widths: Vec<usize> = (0..self.header.len()).map(width).collect();
        let line = |cells: &[String]| {
            cells
                .iter()
                .zip(&widths)
                .map(|(c, w)| format!("{c:>w$}"))
                .collect::<Vec<_>>()
                .join("  ")
        };
        if !self.title.is_empty() {
            writeln!(f, "{}", self.title)?;
        }
        writeln!(f, "{}", line(&self.header))?;
        writeln!(f, "{}", widths.iter().map(|w| "-".repeat(*w)).collect::<Vec<_>>().join("  "))?;
        for r in &self.rows {
            writeln!(f, "{}", line(r))?;
        }
        Ok(())
    }
}

/// Viridis-like colour of `t ∈ [0, 1]` (dark blue → green → yellow), linear between five
/// anchors of matplotlib's viridis; `t` is clamped.
pub fn colormap(t: f64) -> [u8; 3] {
    const ANCHORS: [[f64; 3]; 5] = [
        [68.0, 1.0, 84.0],
        [59.0, 82.0, 139.0],
        [33.0, 145.0, 140.0],
        [94.0, 201.0, 98.0],
        [253.0, 231.0, 37.0],
    ];
    let x = if t.is_finite() { t.clamp(0.0, 1.0) * 4.0 } else { 0.0 };
    let i = (x.floor() as usize).min(3);
    let f = x - i as f64;
    let mut out = [0u8; 3];
    for (c, o) in out.iter_mut().enumerate() {
        *o = (ANCHORS[i][c] + f * (ANCHORS[i + 1][c] - ANCHORS[i][c])).round() as u8;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_png_displays_as_its_base64_between_evcxr_markers() {
        let png = Png::from_image(&Image::filled(3, 2, [10, 20, 30])).unwrap();
        let text = png.display_text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0], "EVCXR_BEGIN_CONTENT image/png");
        assert_eq!(lines[2], "EVCXR_END_CONTENT");
        let back = base64::engine::general_purpose::STANDARD.decode(lines[1]).unwrap();
        assert_eq!(back, png.bytes);
        assert_eq!(&back[1..4], b"PNG");
    }

    #[test]
    fn tables_align_columns_and_refuse_ragged_rows() {
        let mut t = Table::new("scores", &["rule", "pass"]);
        t.push(vec!["low_confidence".into(), "0.5".into()]).unwrap();
        t.push(vec!["random".into(), "0.25".into()]).unwrap();
        assert!(t.push(vec!["x".into()]).unwrap_err().to_string().contains("2 cells"));
        let s = t.to_string();
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines[0], "scores");
        assert_eq!(lines[1], "          rule  pass");
        assert_eq!(lines[3], "low_confidence   0.5");
        assert_eq!(lines[4], "        random  0.25");
        assert_eq!(t.cell(1, "pass"), Some("0.25"));
        assert!(t.display_text().starts_with("EVCXR_BEGIN_CONTENT text/plain\nscores\n"));
    }

    #[test]
    fn the_colormap_runs_from_viridis_purple_to_yellow() {
        assert_eq!(colormap(0.0), [68, 1, 84]);
        assert_eq!(colormap(1.0), [253, 231, 37]);
        assert_eq!(colormap(0.5), [33, 145, 140]);
        assert_eq!(colormap(0.125), [64, 42, 112]);
        assert_eq!(colormap(f64::NAN), colormap(0.0));
    }
}
