//! JPEG (in)compressibility as [`Reward`]s over image samples (DDPO, arXiv 2305.13301;
//! Flow-GRPO, arXiv 2505.05470). The prompt is ignored: these are prompt-free image rules.

use super::buffer::Image;
use super::jpeg::{jpeg_size, JPEG_QUALITY};
use crate::reward::{Details, Evaluation, ImageSample, Reward};
use crate::RewardError;

/// `−(JPEG size at quality 95 in kB) / 500`: rewards simple, flat images.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JpegCompressibility;

/// `+(JPEG size at quality 95 in kB) / 500`: rewards detailed, busy images.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JpegIncompressibility;

/// The file size in bytes and the evaluation with score `sign · kB / 500`.
fn evaluate_sign<P>(sample: &ImageSample<P>, sign: f64) -> Result<Evaluation, RewardError> {
    let image = Image::from_raw(sample.width, sample.height, sample.rgb.clone())?;
    let bytes = jpeg_size(&image, JPEG_QUALITY)?;
    let details = Details {
        notes: vec![("jpeg_bytes".to_string(), bytes.to_string())],
        ..Details::default()
    };
    Ok(Evaluation { score: sign * (bytes as f64 / 1000.0) / 500.0, details })
}

impl<P: Send + Sync> Reward<ImageSample<P>> for JpegCompressibility {
    fn name(&self) -> &str {
        "jpeg_compressibility"
    }

    fn evaluate(&self, sample: &ImageSample<P>) -> Result<Evaluation, RewardError> {
        evaluate_sign(sample, -1.0)
    }
}

impl<P: Send + Sync> Reward<ImageSample<P>> for JpegIncompressibility {
    fn name(&self) -> &str {
        "jpeg_incompressibility"
    }

    fn evaluate(&self, sample: &ImageSample<P>) -> Result<Evaluation, RewardError> {
        evaluate_sign(sample, 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::jpeg::jpeg_compressibility;
    use drift_core::rng::SplitMix64;

    #[test]
    fn rewards_match_the_jpeg_rule_and_order_flat_above_noise() {
        let flat = Image::filled(32, 32, [200, 30, 30]);
        let mut rng = SplitMix64::new(9);
        let mut noisy = flat.clone();
        noisy.map_channels(|_, _, _, _| (rng.next_u64() >> 56) as u8);
        let samples: Vec<ImageSample<()>> = [&flat, &noisy]
            .iter()
            .map(|i| ImageSample::new((), 32, 32, i.as_raw().to_vec()).unwrap())
            .collect();
        let c = JpegCompressibility.evaluate_batch(&samples);
        let i = JpegIncompressibility.evaluate_batch(&samples);
        assert!(c[0].score > c[1].score && i[1].score > i[0].score);
        assert_eq!(c[0].score, jpeg_compressibility(&flat).unwrap());
        assert_eq!(i[1].score, -c[1].score);
        let bytes: f64 = c[1].details.notes[0].1.parse().unwrap();
        assert!((c[1].score + bytes / 1000.0 / 500.0).abs() < 1e-15);
    }

    #[test]
    fn an_empty_image_is_a_recorded_failure() {
        let empty = ImageSample::new((), 0, 0, Vec::new()).unwrap();
        let out = JpegCompressibility.evaluate_batch(&[empty]);
        assert!(out[0].failure.is_some());
        assert_eq!(out[0].score, 0.0);
    }
}
