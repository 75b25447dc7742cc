//! JPEG compressibility, the rule-based reward of DDPO (Black et al., arXiv 2305.13301) and
//! Flow-GRPO (Liu et al., arXiv 2505.05470): an image's JPEG size at quality 95 measures its
//! detail, so rewarding a small file drives the model towards flat, simple images and
//! rewarding a large one towards busy, detailed ones.
//!
//! Sizes come from the `image` crate's baseline encoder; they differ from PIL's by encoder
//! details (Huffman tables, chroma subsampling), so absolute values are comparable across
//! drift runs, not to the papers' numbers.

use ::image::codecs::jpeg::JpegEncoder;
use ::image::ExtendedColorType;

use super::buffer::Image;
use super::error::ImageError;

/// The JPEG quality of the reference reward (both papers save at quality 95).
pub const JPEG_QUALITY: u8 = 95;

/// The scale of the reward: kilobytes are divided by 500 (Flow-GRPO's `jpeg_compressibility`).
const KB_SCALE: f64 = 500.0;

fn dims(image: &Image) -> Result<(u32, u32), ImageError> {
    let conv = |name, v: usize| {
        u32::try_from(v).map_err(|_| ImageError::Argument {
            name,
            value: v.to_string(),
            expected: "a dimension below 2^32",
        })
    };
    Ok((conv("width", image.width())?, conv("height", image.height())?))
}

/// The size in bytes of `image` encoded as a baseline JPEG at `quality` (1..=100).
pub fn jpeg_size(image: &Image, quality: u8) -> Result<usize, ImageError> {
    if !(1..=100).contains(&quality) {
        return Err(ImageError::Argument {
            name: "quality",
            value: quality.to_string(),
            expected: "a JPEG quality in 1..=100",
        });
    }
    let (w, h) = dims(image)?;
    let mut bytes = Vec::new();
    JpegEncoder::new_with_quality(&mut bytes, quality)
        .encode(image.as_raw(), w, h, ExtendedColorType::Rgb8)
        .map_err(|source| ImageError::Encode { format: "JPEG", source })?;
    Ok(bytes.len())
}

/// JPEG compressibility: `−(size of the quality-95 JPEG in kB) / 500`, kB = 1000 bytes
/// (Flow-GRPO's `jpeg_compressibility`; DDPO's, up to the 1/500 scale). Higher is simpler.
pub fn jpeg_compressibility(image: &Image) -> Result<f64, ImageError> {
    Ok(-(jpeg_size(image, JPEG_QUALITY)? as f64 / 1000.0) / KB_SCALE)
}

/// JPEG incompressibility: the negative of [`jpeg_compressibility`],
/// `(size in kB) / 500`. Higher is more detailed. (DDPO and Flow-GRPO return the raw kB here;
/// the same 1/500 scale as compressibility is used so the two are exact opposites.)
pub fn jpeg_incompressibility(image: &Image) -> Result<f64, ImageError> {
    Ok(-jpeg_compressibility(image)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use drift_core::rng::SplitMix64;

    fn noise(w: usize, h: usize, seed: u64) -> Image {
        let mut rng = SplitMix64::new(seed);
        let mut img = Image::filled(w, h, [0, 0, 0]);
        img.map_channels(|_, _, _, _| (rng.next_u64() >> 56) as u8);
        img
    }

    #[test]
    fn flat_images_are_more_compressible_than_noise() {
        let flat = Image::filled(32, 32, [120, 60, 200]);
        let noisy = noise(32, 32, 1);
        let (sf, sn) = (jpeg_size(&flat, 95).unwrap(), jpeg_size(&noisy, 95).unwrap());
        // Every JPEG carries a few hundred bytes of headers and tables; noise needs far more.
        assert!(sf > 100 && sn > 2 * sf, "flat {sf} B, noise {sn} B");
        let (cf, cn) =
            (jpeg_compressibility(&flat).unwrap(), jpeg_compressibility(&noisy).unwrap());
        assert!(cf > cn);
        assert!((cf - (-(sf as f64) / 1000.0 / 500.0)).abs() < 1e-12);
        assert_eq!(jpeg_incompressibility(&noisy).unwrap(), -cn);
        // Lower quality, smaller file.
        assert!(jpeg_size(&noisy, 30).unwrap() < sn);
    }

    #[test]
    fn bad_arguments_are_errors() {
        let img = Image::filled(4, 4, [0, 0, 0]);
        assert!(jpeg_size(&img, 0).unwrap_err().to_string().contains("quality"));
        assert!(jpeg_size(&img, 101).is_err());
        // An empty image cannot be encoded: the encoder's error is passed on, not a panic.
        assert!(jpeg_size(&Image::filled(0, 0, [0, 0, 0]), 95).is_err());
    }
}
