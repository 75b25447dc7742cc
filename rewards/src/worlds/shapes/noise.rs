//! Imperfection models for robustness checks: what a flow model's imperfect samples look like
//! to the verifier (soft edges, pixel noise), applied to rendered images.

use serde::{Deserialize, Serialize};

use super::keyed_rng;
use crate::image::Image;

/// How to degrade an image: an optional blur, then Gaussian noise.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Degradation {
    /// Standard deviation of the per-channel Gaussian noise, in 0–255 units; default 0.
    pub noise_std: f64,
    /// Whether to blur with the separable [1 2 1]/4 kernel first (softens every edge by a
    /// pixel); default false.
    pub blur: bool,
}

impl Default for Degradation {
    fn default() -> Self {
        Self { noise_std: 0.0, blur: false }
    }
}

/// `image` degraded as `how` says, the noise drawn from `seed`.
#[must_use]
pub fn degrade(image: &Image, how: Degradation, seed: u64) -> Image {
    let mut out = if how.blur { blur121(image) } else { image.clone() };
    if how.noise_std > 0.0 {
        let mut rng = keyed_rng(&[seed, 0x006e_6f69_7365]);
        out.map_channels(|_, _, _, v| {
            (f64::from(v) + how.noise_std * rng.normal()).round().clamp(0.0, 255.0) as u8
        });
    }
    out
}

/// The [1 2 1]/4 ⊗ [1 2 1]/4 blur, replicating border pixels.
#[must_use]
pub fn blur121(image: &Image) -> Image {
    let (w, h) = (image.width(), image.height());
    let mut out = image.clone();
    out.map_channels(|x, y, c, _| {
        let mut acc = 0u32;
        for (dy, wy) in [(-1i64, 1u32), (0, 2), (1, 1)] {
            for (dx, wx) in [(-1i64, 1u32), (0, 2), (1, 1)] {
                let sx = (x as i64 + dx).clamp(0, w as i64 - 1) as usize;
                let sy = (y as i64 + dy).clamp(0, h as i64 - 1) as usize;
                acc += wx * wy * u32::from(image.get(sx, sy).map_or(0, |p| p[c]));
            }
        }
        ((acc + 8) / 16) as u8
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blur_keeps_flat_images_and_softens_edges() {
        let flat = Image::filled(5, 5, [10, 20, 30]);
        assert_eq!(blur121(&flat), flat);
        let mut edge = Image::filled(4, 1, [0, 0, 0]);
        edge.set(2, 0, [160, 160, 160]);
        edge.set(3, 0, [160, 160, 160]);
        let b = blur121(&edge);
        assert_eq!(b.get(1, 0), Some([40, 40, 40]));
        assert_eq!(b.get(2, 0), Some([120, 120, 120]));
    }

    #[test]
    fn noise_has_the_requested_spread_and_is_seeded() {
        let img = Image::filled(32, 32, [128, 128, 128]);
        let how = Degradation { noise_std: 20.0, blur: false };
        let a = degrade(&img, how, 1);
        assert_eq!(a, degrade(&img, how, 1));
        assert_ne!(a, degrade(&img, how, 2));
        let n = a.as_raw().len() as f64;
        let var = a.as_raw().iter().map(|&v| (f64::from(v) - 128.0).powi(2)).sum::<f64>() / n;
        assert!((var.sqrt() - 20.0).abs() < 1.5, "std {}", var.sqrt());
        assert_eq!(degrade(&img, Degradation::default(), 5), img);
    }
}
