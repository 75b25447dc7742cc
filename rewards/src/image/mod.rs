//! Image utilities and rule-based image rewards: the [`Image`] buffer, JPEG
//! (in)compressibility (DDPO, arXiv 2305.13301; Flow-GRPO, arXiv 2505.05470), PNG output and
//! captioned image grids drawn in drift's 5×7 bitmap font (`drift_core::font`).

pub mod buffer;
pub mod error;
pub mod grid;
pub mod jpeg;
pub mod png;
pub mod reward;

pub use buffer::Image;
pub use error::ImageError;
pub use grid::{grid, write_grid, GridOptions};
pub use jpeg::{jpeg_compressibility, jpeg_incompressibility, jpeg_size, JPEG_QUALITY};
pub use png::{encode_png, write_png};
pub use reward::{JpegCompressibility, JpegIncompressibility};
