//! The error type of the image utilities.

use std::path::PathBuf;

/// Everything that can go wrong building, encoding or writing images.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// A pixel buffer does not have the length its dimensions imply.
    #[error("image buffer has {got} bytes, expected {expected} for {width}x{height} RGB")]
    Size {
        /// Bytes given.
        got: usize,
        /// Bytes expected (`width * height * 3`).
        expected: usize,
        /// Declared width.
        width: usize,
        /// Declared height.
        height: usize,
    },

    /// An argument is outside its valid range.
    #[error("`{name}` = {value} is invalid: expected {expected}")]
    Argument {
        /// The argument at fault.
        name: &'static str,
        /// Its value, printed.
        value: String,
        /// What it should have been, in words.
        expected: &'static str,
    },

    /// The `image` crate failed to encode.
    #[error("{format} encoding failed: {source}")]
    Encode {
        /// The format being written ("JPEG", "PNG").
        format: &'static str,
        /// The encoder's error.
        source: ::image::ImageError,
    },

    /// A file could not be written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file at fault.
        path: PathBuf,
        /// The underlying I/O error.
        source: std::io::Error,
    },
}

impl From<ImageError> for crate::RewardError {
    /// File errors keep their kind, bad arguments become config errors, the rest invalid
    /// inputs.
    fn from(e: ImageError) -> Self {
        match e {
            ImageError::Io { path, source } => crate::RewardError::Io { path, source },
            ImageError::Argument { name, value, expected } => {
                crate::RewardError::Config { field: name, value, expected: expected.to_string() }
            }
            other @ (ImageError::Size { .. } | ImageError::Encode { .. }) => {
                crate::RewardError::Invalid {
                    what: format!("image ({other})"),
                    expected: "an RGB8 image the encoder accepts".to_string(),
                }
            }
        }
    }
}
