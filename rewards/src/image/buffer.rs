//! [`Image`]: a plain RGB8 pixel buffer, the currency of every image reward.

use super::error::ImageError;

/// The most pixels an image built from computed sizes may have (2^26, a 8192×8192 sheet).
pub const MAX_PIXELS: usize = 1 << 26;

fn checked_side(side: usize, factor: usize) -> Result<usize, ImageError> {
    side.checked_mul(factor).ok_or(ImageError::Argument {
        name: "upscale factor",
        value: factor.to_string(),
        expected: "a factor that keeps the image size representable",
    })
}

/// An RGB image with 8 bits per channel, stored row-major as `H × W × 3` bytes — the layout a
/// flow model's sample has after `(x + 1) * 127.5` and a permute to HWC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    width: usize,
    height: usize,
    data: Vec<u8>,
}

impl Image {
    /// A `width × height` image filled with `rgb`.
    #[must_use]
    pub fn filled(width: usize, height: usize, rgb: [u8; 3]) -> Self {
        let data = rgb.iter().copied().cycle().take(width * height * 3).collect();
        Self { width, height, data }
    }

    /// An image over an existing `H × W × 3` buffer; fails naming both lengths when `data`
    /// does not hold exactly `width * height * 3` bytes.
    pub fn from_raw(width: usize, height: usize, data: Vec<u8>) -> Result<Self, ImageError> {
        let expected = width.checked_mul(height).and_then(|n| n.checked_mul(3));
        match expected {
            Some(e) if e == data.len() => Ok(Self { width, height, data }),
            _ => Err(ImageError::Size {
                got: data.len(),
                expected: expected.unwrap_or(usize::MAX),
                width,
                height,
            }),
        }
    }

    /// Width in pixels.
    #[must_use]
    pub fn width(&self) -> usize {
        self.width
    }

    /// Height in pixels.
    #[must_use]
    pub fn height(&self) -> usize {
        self.height
    }

    /// The `H × W × 3` bytes.
    #[must_use]
    pub fn as_raw(&self) -> &[u8] {
        &self.data
    }

    /// The buffer, consuming the image.
    #[must_use]
    pub fn into_raw(self) -> Vec<u8> {
        self.data
    }

    /// The pixel at column `x`, row `y`, or `None` outside the image.
    #[must_use]
    pub fn get(&self, x: usize, y: usize) -> Option<[u8; 3]> {
        let i = self.index(x, y)?;
        Some([self.data[i], self.data[i + 1], self.data[i + 2]])
    }

    /// Sets the pixel at column `x`, row `y`; does nothing outside the image (drawing code
    /// clips for free).
    pub fn set(&mut self, x: usize, y: usize, rgb: [u8; 3]) {
        if let Some(i) = self.index(x, y) {
            self.data[i..i + 3].copy_from_slice(&rgb);
        }
    }

    /// Draws `text` in `rgb` with its top-left corner at (`x`, `y`) in drift's 5×7 font
    /// ([`drift_core::font`]), each font pixel a `scale`×`scale` block; pixels falling outside
    /// the image are clipped.
    pub fn draw_text(&mut self, x: usize, y: usize, text: &str, rgb: [u8; 3], scale: usize) {
        drift_core::font::draw_text(x as i64, y as i64, text, scale, |px, py| {
            if let (Ok(px), Ok(py)) = (usize::try_from(px), usize::try_from(py)) {
                self.set(px, py, rgb);
            }
        });
    }

    /// Applies `f` to every channel value (e.g. a noise model), given the pixel coordinates
    /// and channel index.
    pub fn map_channels(&mut self, mut f: impl FnMut(usize, usize, usize, u8) -> u8) {
        for (i, v) in self.data.iter_mut().enumerate() {
            let (pixel, c) = (i / 3, i % 3);
            *v = f(pixel % self.width, pixel / self.width, c, *v);
        }
    }

    /// Copies `src` with its top-left corner at (`x`, `y`), clipping what falls outside.
    pub fn blit(&mut self, src: &Image, x: usize, y: usize) {
        for sy in 0..src.height {
            for sx in 0..src.width {
                if let Some(p) = src.get(sx, sy) {
                    self.set(x + sx, y + sy, p);
                }
            }
        }
    }

    /// The image magnified by an integer `factor` (nearest neighbour), for viewing 32×32
    /// samples in a grid; `factor` 0 is treated as 1. Fails when the result would exceed
    /// [`MAX_PIXELS`].
    pub fn upscale(&self, factor: usize) -> Result<Image, ImageError> {
        let f = factor.max(1);
        let (w, h) = (checked_side(self.width, f)?, checked_side(self.height, f)?);
        let mut out = Image::canvas(w, h, [0, 0, 0])?;
        for y in 0..out.height {
            for x in 0..out.width {
                if let Some(p) = self.get(x / f, y / f) {
                    out.set(x, y, p);
                }
            }
        }
        Ok(out)
    }

    /// Like [`Image::filled`], but fails instead of allocating more than [`MAX_PIXELS`]
    /// pixels, for sizes computed from user input.
    pub fn canvas(width: usize, height: usize, rgb: [u8; 3]) -> Result<Image, ImageError> {
        match width.checked_mul(height) {
            Some(n) if n <= MAX_PIXELS => Ok(Image::filled(width, height, rgb)),
            _ => Err(ImageError::Argument {
                name: "image size",
                value: format!("{width}x{height}"),
                expected: "at most 2^26 pixels",
            }),
        }
    }

    /// The image as `3 × H × W` floats in `[−1, 1]` (`v / 127.5 − 1`), the channel-first
    /// layout and range a flow model is trained on.
    #[must_use]
    pub fn to_chw_f32(&self) -> Vec<f32> {
        let plane = self.width * self.height;
        let mut out = vec![0.0; 3 * plane];
        for (i, &v) in self.data.iter().enumerate() {
            out[(i % 3) * plane + i / 3] = f32::from(v) / 127.5 - 1.0;
        }
        out
    }

    /// The image of `3 × height × width` channel-first floats in `[−1, 1]` (a flow model's
    /// sample): `round((x + 1) · 127.5)`, clamped to `0..=255`; NaN becomes 0. Fails naming
    /// both lengths when `values` does not hold `3 · width · height` floats.
    pub fn from_chw_f32(width: usize, height: usize, values: &[f32]) -> Result<Self, ImageError> {
        let plane = width.saturating_mul(height);
        if plane.checked_mul(3) != Some(values.len()) {
            return Err(ImageError::Size {
                got: values.len(),
                expected: plane.saturating_mul(3),
                width,
                height,
            });
        }
        let data = (0..3 * plane)
            .map(|i| {
                let v = values[(i % 3) * plane + i / 3];
                ((v + 1.0) * 127.5).round().clamp(0.0, 255.0) as u8
            })
            .collect();
        Ok(Self { width, height, data })
    }

    fn index(&self, x: usize, y: usize) -> Option<usize> {
        (x < self.width && y < self.height).then(|| (y * self.width + x) * 3)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_layout_is_row_major_hwc() {
        let mut img = Image::filled(3, 2, [1, 2, 3]);
        img.set(2, 1, [9, 8, 7]);
        assert_eq!(&img.as_raw()[15..18], &[9, 8, 7]);
        assert_eq!(img.get(2, 1), Some([9, 8, 7]));
        assert_eq!(img.get(3, 0), None);
        img.set(5, 5, [0, 0, 0]); // clipped, no panic
        let back = Image::from_raw(3, 2, img.clone().into_raw()).unwrap();
        assert_eq!(back, img);
    }

    #[test]
    fn wrong_buffer_length_is_an_error() {
        let err = Image::from_raw(32, 32, vec![0; 100]).unwrap_err().to_string();
        assert!(err.contains("100") && err.contains("3072"), "{err}");
        assert!(Image::from_raw(usize::MAX, 2, vec![]).is_err());
    }

    #[test]
    fn float_conversions_are_channel_first_and_invert() {
        let mut img = Image::filled(2, 1, [0, 255, 51]);
        img.set(1, 0, [255, 0, 102]);
        let f = img.to_chw_f32();
        assert_eq!(f.len(), 6);
        // Plane r = [0, 255], plane g = [255, 0], plane b = [51, 102].
        assert_eq!(&f[..4], &[-1.0, 1.0, 1.0, -1.0]);
        assert!((f[4] - (51.0 / 127.5 - 1.0)).abs() < 1e-6);
        assert_eq!(Image::from_chw_f32(2, 1, &f).unwrap(), img);
        let clamped = Image::from_chw_f32(1, 1, &[3.0, -7.0, f32::NAN]).unwrap();
        assert_eq!(clamped.get(0, 0), Some([255, 0, 0]));
        assert!(Image::from_chw_f32(2, 2, &f).unwrap_err().to_string().contains("12"));
    }

    #[test]
    fn upscale_and_blit() {
        let mut img = Image::filled(2, 1, [0, 0, 0]);
        img.set(1, 0, [255, 0, 0]);
        let big = img.upscale(3).unwrap();
        assert!(img.upscale(usize::MAX).is_err());
        assert!(img.upscale(1 << 14).is_err());
        assert!(Image::canvas(1 << 20, 1 << 20, [0; 3]).is_err());
        assert_eq!((big.width(), big.height()), (6, 3));
        assert_eq!(big.get(3, 2), Some([255, 0, 0]));
        assert_eq!(big.get(2, 2), Some([0, 0, 0]));
        let mut canvas = Image::filled(7, 4, [5, 5, 5]);
        canvas.blit(&big, 2, 2);
        assert_eq!(canvas.get(5, 3), Some([255, 0, 0]));
        assert_eq!(canvas.get(3, 3), Some([0, 0, 0]));
        assert_eq!(canvas.get(1, 1), Some([5, 5, 5]));
    }
}
