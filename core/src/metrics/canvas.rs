//! The pixel canvas the PNG plots draw on: RGB buffer, dots, Bresenham lines, 5×7 text.

use std::path::Path;

use crate::error::{io_err, CoreError, Result};
use crate::font::draw_text;

pub(crate) const BG: [u8; 3] = [255, 255, 255];
pub(crate) const AXIS: [u8; 3] = [60, 60, 60];
pub(crate) const GRID: [u8; 3] = [228, 228, 228];
pub(crate) const LINE: [u8; 3] = [31, 119, 180];

/// An RGB pixel buffer with lines, dots and 5×7 text.
pub(crate) struct Canvas {
    pub(crate) buf: Vec<u8>,
    pub(crate) w: u32,
    pub(crate) h: u32,
}

impl Canvas {
    pub(crate) fn new(w: u32, h: u32) -> Self {
        Self { buf: BG.repeat(w as usize * h as usize), w, h }
    }

    pub(crate) fn dot(&mut self, x: i64, y: i64, rgb: [u8; 3]) {
        if x >= 0 && y >= 0 && x < i64::from(self.w) && y < i64::from(self.h) {
            let o = (y as usize * self.w as usize + x as usize) * 3;
            self.buf[o..o + 3].copy_from_slice(&rgb);
        }
    }

    /// Bresenham's line, 2 px thick.
    pub(crate) fn line(
        &mut self,
        (x0, y0): (i64, i64),
        (x1, y1): (i64, i64),
        rgb: [u8; 3],
        thick: bool,
    ) {
        let (dx, dy) = ((x1 - x0).abs(), -(y1 - y0).abs());
        let (sx, sy) = (if x0 < x1 { 1 } else { -1 }, if y0 < y1 { 1 } else { -1 });
        let (mut x, mut y, mut err) = (x0, y0, dx + dy);
        loop {
            self.dot(x, y, rgb);
            if thick {
                self.dot(x, y + 1, rgb);
            }
            if x == x1 && y == y1 {
                break;
            }
            let e2 = 2 * err;
            if e2 >= dy {
                err += dy;
                x += sx;
            }
            if e2 <= dx {
                err += dx;
                y += sy;
            }
        }
    }

    pub(crate) fn text(&mut self, x: i64, y: i64, s: &str) {
        self.text_rgb(x, y, s, AXIS);
    }

    pub(crate) fn text_rgb(&mut self, x: i64, y: i64, s: &str, rgb: [u8; 3]) {
        let (w, h) = (i64::from(self.w), i64::from(self.h));
        let buf = &mut self.buf;
        draw_text(x, y, s, 1, |px, py| {
            if px >= 0 && py >= 0 && px < w && py < h {
                let o = (py * w + px) as usize * 3;
                buf[o..o + 3].copy_from_slice(&rgb);
            }
        });
    }
}

impl Canvas {
    /// A filled rectangle `[x, x + w) × [y, y + h)`, clipped to the canvas.
    pub(crate) fn rect(&mut self, (x, y): (i64, i64), (w, h): (i64, i64), rgb: [u8; 3]) {
        for yy in y..y + h {
            for xx in x..x + w {
                self.dot(xx, yy, rgb);
            }
        }
    }

    /// The canvas as PNG bytes.
    pub(crate) fn png(self) -> Result<Vec<u8>> {
        let img = image::RgbImage::from_raw(self.w, self.h, self.buf)
            .ok_or_else(|| CoreError::Mismatch("canvas buffer does not match its size".into()))?;
        let mut out = std::io::Cursor::new(Vec::new());
        img.write_to(&mut out, image::ImageFormat::Png)
            .map_err(|e| CoreError::Mismatch(format!("PNG encoding failed: {e}")))?;
        Ok(out.into_inner())
    }

    /// Writes the canvas to `path` as PNG.
    pub(crate) fn save(self, path: &Path) -> Result<()> {
        let bytes = self.png()?;
        std::fs::write(path, bytes).map_err(io_err(path))
    }
}
