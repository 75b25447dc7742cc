//! Captioned image grids (the before/after sample sheets of a training run): images are
//! magnified, laid out row-major in a fixed number of columns, and each gets its caption,
//! word-wrapped, in the built-in 5×7 font underneath.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::buffer::{Image, MAX_PIXELS};
use super::error::ImageError;
use super::png::write_png;
use drift_core::font::{ADVANCE, GLYPH_HEIGHT};

/// Layout of a grid.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GridOptions {
    /// Images per row; default 4.
    pub columns: usize,
    /// Integer magnification of each image (nearest neighbour); default 4, so a 32×32 sample
    /// becomes 128×128 and a caption line holds 21 characters.
    pub scale: usize,
    /// Pixels of margin around and between cells; default 6.
    pub padding: usize,
    /// Sheet colour; default white.
    pub background: [u8; 3],
    /// Caption colour; default black.
    pub text: [u8; 3],
}

impl Default for GridOptions {
    fn default() -> Self {
        Self { columns: 4, scale: 4, padding: 6, background: [255; 3], text: [0; 3] }
    }
}

/// Pixels between caption lines.
const LINE_GAP: usize = 2;

/// The pixel sizes of a grid sheet, computed with checked arithmetic so the drawing code that
/// uses them cannot overflow.
struct Sheet {
    cell_w: usize,
    cell_img_h: usize,
    cell_h: usize,
    cols: usize,
    sheet_w: usize,
    sheet_h: usize,
}

impl Sheet {
    /// Sizes for `n ≥ 1` images of at most `max` (width, height) with `lines` caption lines;
    /// `None` when a size overflows or the sheet exceeds [`MAX_PIXELS`].
    fn new(n: usize, max: (usize, usize), lines: usize, o: &GridOptions) -> Option<Sheet> {
        let pad = o.padding;
        let cell_w = max.0.checked_mul(o.scale)?;
        let cell_img_h = max.1.checked_mul(o.scale)?;
        let caption_h = lines.checked_mul(GLYPH_HEIGHT + LINE_GAP)?;
        let cell_h = cell_img_h.checked_add(pad / 2)?.checked_add(caption_h)?;
        let cols = o.columns.min(n).max(1);
        let side = |k: usize, cell: usize| k.checked_mul(cell.checked_add(pad)?)?.checked_add(pad);
        let sheet_w = side(cols, cell_w)?;
        let sheet_h = side(n.div_ceil(cols), cell_h)?;
        (sheet_w.checked_mul(sheet_h)? <= MAX_PIXELS).then_some(Sheet {
            cell_w,
            cell_img_h,
            cell_h,
            cols,
            sheet_w,
            sheet_h,
        })
    }
}

/// `text` broken into lines of at most `width` characters at spaces (a word longer than a line
/// is split); always at least one line.
#[must_use]
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let width = width.max(1);
    let mut lines = vec![String::new()];
    for word in text.split_whitespace() {
        let chars: Vec<char> = word.chars().collect();
        for piece in chars.chunks(width) {
            let piece: String = piece.iter().collect();
            let last = lines.last_mut().map_or(0, |l| l.chars().count());
            if last > 0 && last + 1 + piece.chars().count() <= width {
                if let Some(l) = lines.last_mut() {
                    l.push(' ');
                    l.push_str(&piece);
                }
            } else if last == 0 {
                if let Some(l) = lines.last_mut() {
                    l.push_str(&piece);
                }
            } else {
                lines.push(piece);
            }
        }
    }
    lines
}

/// The grid of `images` with `captions[i]` under image `i`.
///
/// Fails when the two lists differ in length, when there are no images, or when `columns` or
/// `scale` is 0. Images of different sizes are placed in cells sized for the largest.
pub fn grid(
    images: &[Image],
    captions: &[&str],
    options: &GridOptions,
) -> Result<Image, ImageError> {
    let arg = |name, value: usize, expected| ImageError::Argument {
        name,
        value: value.to_string(),
        expected,
    };
    if images.is_empty() {
        return Err(arg("images.len()", 0, "at least one image"));
    }
    if captions.len() != images.len() {
        return Err(arg("captions.len()", captions.len(), "one caption per image"));
    }
    if options.columns == 0 || options.scale == 0 {
        let (name, v) = if options.columns == 0 { ("columns", 0) } else { ("scale", 0) };
        return Err(arg(name, v, "a positive integer"));
    }
    let max_w = images.iter().map(Image::width).max().unwrap_or(0);
    let max_h = images.iter().map(Image::height).max().unwrap_or(0);
    let chars_per_line = max_w.saturating_mul(options.scale).saturating_add(1) / ADVANCE;
    let wrapped: Vec<Vec<String>> = captions.iter().map(|c| wrap(c, chars_per_line)).collect();
    let lines = wrapped.iter().map(Vec::len).max().unwrap_or(1);
    let Sheet { cell_w, cell_img_h, cell_h, cols, sheet_w, sheet_h } =
        Sheet::new(images.len(), (max_w, max_h), lines, options).ok_or_else(|| {
            arg("scale", options.scale, "a scale and padding that fit 2^26 pixels")
        })?;
    let (pad, scale) = (options.padding, options.scale);
    let mut sheet = Image::canvas(sheet_w, sheet_h, options.background)?;
    for (i, (image, lines)) in images.iter().zip(&wrapped).enumerate() {
        let x = pad + (i % cols) * (cell_w + pad);
        let y = pad + (i / cols) * (cell_h + pad);
        sheet.blit(&image.upscale(scale)?, x, y);
        for (l, line) in lines.iter().enumerate() {
            let ty = y + cell_img_h + pad / 2 + l * (GLYPH_HEIGHT + LINE_GAP);
            sheet.draw_text(x, ty, line, options.text, 1);
        }
    }
    Ok(sheet)
}

/// Builds the grid of `images` and `captions` (see [`grid`]) and writes it to `path` as PNG.
pub fn write_grid(
    path: &Path,
    images: &[Image],
    captions: &[&str],
    options: &GridOptions,
) -> Result<(), ImageError> {
    write_png(path, &grid(images, captions, options)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_at_spaces_and_splits_long_words() {
        assert_eq!(
            wrap("2 green triangles and 1 red square", 21),
            ["2 green triangles and", "1 red square"]
        );
        assert_eq!(wrap("abcdefgh", 3), ["abc", "def", "gh"]);
        assert_eq!(wrap("", 5), [""]);
        assert_eq!(wrap("a b", 0), ["a", "b"]);
    }

    #[test]
    fn lays_out_cells_and_captions() {
        let red = Image::filled(32, 32, [255, 0, 0]);
        let blue = Image::filled(32, 32, [0, 0, 255]);
        let opts = GridOptions { columns: 2, ..GridOptions::default() };
        let sheet =
            grid(&[red.clone(), blue.clone(), red], &["3 red circles", "x", "y"], &opts).unwrap();
        // 2 columns of 128 px plus 3 paddings; 2 rows of (128 + 3 + 9) plus 3 paddings.
        assert_eq!((sheet.width(), sheet.height()), (2 * 128 + 18, 2 * 140 + 18));
        assert_eq!(sheet.get(6, 6), Some([255, 0, 0]));
        assert_eq!(sheet.get(6 + 128 + 6, 6), Some([0, 0, 255]));
        assert_eq!(sheet.get(5, 6), Some([255, 255, 255]));
        // Some caption pixels are black under the first image, none under the blue one's
        // right half (its caption is one character).
        let caption_rows = 6 + 128 + 3..6 + 128 + 3 + GLYPH_HEIGHT;
        let dark = |x0: usize, x1: usize| {
            caption_rows
                .clone()
                .flat_map(|y| (x0..x1).map(move |x| (x, y)))
                .filter(|&(x, y)| sheet.get(x, y) == Some([0, 0, 0]))
                .count()
        };
        assert!(dark(6, 6 + 128) > 20);
        assert_eq!(dark(140 + 10, 140 + 128), 0);
    }

    #[test]
    fn bad_arguments_are_errors() {
        let img = Image::filled(8, 8, [0; 3]);
        let opts = GridOptions::default();
        assert!(grid(&[], &[], &opts).is_err());
        assert!(grid(std::slice::from_ref(&img), &[], &opts)
            .unwrap_err()
            .to_string()
            .contains("captions"));
        let huge = GridOptions { scale: usize::MAX / 2, ..GridOptions::default() };
        assert!(grid(std::slice::from_ref(&img), &["a"], &huge).is_err());
        let big = GridOptions { scale: 2_000, ..GridOptions::default() };
        assert!(grid(std::slice::from_ref(&img), &["a"], &big).is_err());
        let wide = GridOptions { padding: usize::MAX, ..GridOptions::default() };
        assert!(grid(std::slice::from_ref(&img), &["a"], &wide).is_err());
        let zero = GridOptions { columns: 0, ..GridOptions::default() };
        assert!(grid(&[img], &["a"], &zero).unwrap_err().to_string().contains("columns"));
    }

    #[test]
    fn write_grid_produces_a_decodable_png() {
        let dir = std::env::temp_dir().join(format!("drift-grid-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("grid.png");
        let imgs = vec![Image::filled(32, 32, [9, 99, 199]); 5];
        let opts = GridOptions { columns: 3, ..GridOptions::default() };
        write_grid(&path, &imgs, &["a"; 5], &opts).unwrap();
        let back = ::image::open(&path).unwrap().to_rgb8();
        std::fs::remove_dir_all(&dir).unwrap();
        let want = grid(&imgs, &["a"; 5], &opts).unwrap();
        assert_eq!((back.width() as usize, back.height() as usize), (want.width(), want.height()));
        assert_eq!(back.as_raw().as_slice(), want.as_raw());
    }
}
