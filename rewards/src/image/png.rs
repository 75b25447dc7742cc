//! PNG output of [`Image`]s (lossless, for grids and inspection).

use std::io::Write;
use std::path::Path;

use ::image::codecs::png::PngEncoder;
use ::image::{ExtendedColorType, ImageEncoder};

use super::buffer::Image;
use super::error::ImageError;

/// `image` encoded as an 8-bit RGB PNG.
pub fn encode_png(image: &Image) -> Result<Vec<u8>, ImageError> {
    let dim = |name, v: usize| {
        u32::try_from(v).map_err(|_| ImageError::Argument {
            name,
            value: v.to_string(),
            expected: "a dimension below 2^32",
        })
    };
    let (w, h) = (dim("width", image.width())?, dim("height", image.height())?);
    let mut bytes = Vec::new();
    PngEncoder::new(&mut bytes)
        .write_image(image.as_raw(), w, h, ExtendedColorType::Rgb8)
        .map_err(|source| ImageError::Encode { format: "PNG", source })?;
    Ok(bytes)
}

/// Writes `image` to `path` as PNG, through a temporary file renamed into place so a reader
/// never sees a half-written image.
pub fn write_png(path: &Path, image: &Image) -> Result<(), ImageError> {
    let bytes = encode_png(image)?;
    let io = |source| ImageError::Io { path: path.to_path_buf(), source };
    let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
    tmp_name.push(".tmp");
    let tmp = path.with_file_name(tmp_name);
    let mut file = std::fs::File::create(&tmp).map_err(io)?;
    file.write_all(&bytes).map_err(io)?;
    drop(file);
    std::fs::rename(&tmp, path).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn png_round_trips_through_the_decoder() {
        let mut img = Image::filled(5, 3, [10, 20, 30]);
        img.set(4, 2, [255, 0, 128]);
        let bytes = encode_png(&img).unwrap();
        assert_eq!(&bytes[1..4], b"PNG");
        let back = ::image::load_from_memory(&bytes).unwrap().to_rgb8();
        assert_eq!((back.width(), back.height()), (5, 3));
        assert_eq!(back.as_raw().as_slice(), img.as_raw());
    }

    #[test]
    fn unwritable_path_is_an_error_naming_it() {
        let img = Image::filled(2, 2, [0, 0, 0]);
        let err = write_png(Path::new("/nonexistent-dir/x.png"), &img).unwrap_err().to_string();
        assert!(err.contains("/nonexistent-dir/x.png"), "{err}");
    }
}
