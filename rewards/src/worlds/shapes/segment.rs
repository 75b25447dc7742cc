//! Colour segmentation and connected components: finds the shapes in an image without a
//! learned detector (the role of GenEval's Mask2Former detector, arXiv 2310.11513, in a
//! world where colour alone separates objects from the background).
//!
//! 1. Every pixel gets the nearest palette colour or the background, or no label when it is
//!    farther than `max_colour_distance` from every colour (off-palette noise, colours mixed
//!    between two shapes). Distances are taken to the blend between the background and each
//!    palette colour, so a blurred edge is cut at the halfway blend ([`classify_pixel`]).
//! 2. One clean-up pass: a pixel at least 7 of whose 8 neighbours share one other label takes
//!    that label. This removes isolated noise pixels and one-pixel spurs and fills pin-holes,
//!    while square corners (3 agreeing neighbours) and triangle base corners (2) stay.
//! 3. 8-connected components of each palette colour; components smaller than `min_area`
//!    pixels are dropped as specks.

use serde::{Deserialize, Serialize};

use super::grammar::Colour;
use super::scene::BACKGROUND;
use crate::image::Image;

/// Options of the segmenter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SegmentOptions {
    /// Largest Euclidean RGB distance from a pixel to the nearest background–palette blend at
    /// which it still gets a label; default 80 (about 3.3 standard deviations of 3-channel
    /// pixel noise with σ = 24; the palette colours' blends are far further apart).
    pub max_colour_distance: f32,
    /// Components with fewer pixels are ignored; default 10 (the smallest rendered shape, an
    /// 8-px triangle, has 32).
    pub min_area: usize,
    /// Neighbours (of 8) that must agree on another label to relabel a pixel; default 7
    /// (6 erodes the tips of small triangles, 8 measured no better); 9 disables the clean-up.
    pub relabel_votes: usize,
}

impl Default for SegmentOptions {
    fn default() -> Self {
        Self { max_colour_distance: 80.0, min_area: 10, relabel_votes: 7 }
    }
}

/// A pixel's label: nothing, background, or palette colour `i` of [`Colour::ALL`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Label {
    /// Too far from every reference colour.
    Unknown,
    /// The background.
    Background,
    /// A palette colour.
    Colour(Colour),
}

/// A connected region of one palette colour.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Component {
    /// Its colour.
    pub colour: Colour,
    /// Its pixels as (column, row).
    pub pixels: Vec<(usize, usize)>,
    /// Bounding box `[x0, y0, x1, y1]`, inclusive.
    pub bbox: [usize; 4],
}

impl Component {
    /// Number of pixels.
    #[must_use]
    pub fn area(&self) -> usize {
        self.pixels.len()
    }

    /// Mean (column, row) of the pixel centres.
    #[must_use]
    pub fn centroid(&self) -> (f32, f32) {
        let n = self.pixels.len().max(1) as f32;
        let sx: f32 = self.pixels.iter().map(|&(x, _)| x as f32 + 0.5).sum();
        let sy: f32 = self.pixels.iter().map(|&(_, y)| y as f32 + 0.5).sum();
        (sx / n, sy / n)
    }

    /// Bounding-box width and height.
    #[must_use]
    pub fn extent(&self) -> (usize, usize) {
        (self.bbox[2] - self.bbox[0] + 1, self.bbox[3] - self.bbox[1] + 1)
    }
}

/// Distance from `p` to the segment from `bg` to `c` in RGB space, and the blend weight
/// `α ∈ [0, 1]` of `c` at the nearest point (`p ≈ (1 − α)·bg + α·c`).
fn blend_distance(p: [u8; 3], bg: [u8; 3], c: [u8; 3]) -> (f32, f32) {
    let f = |v: [u8; 3]| v.map(f32::from);
    let (p, bg, c) = (f(p), f(bg), f(c));
    let axis = [c[0] - bg[0], c[1] - bg[1], c[2] - bg[2]];
    let rel = [p[0] - bg[0], p[1] - bg[1], p[2] - bg[2]];
    let len2 = axis.iter().map(|a| a * a).sum::<f32>().max(1.0);
    let alpha = (rel.iter().zip(&axis).map(|(r, a)| r * a).sum::<f32>() / len2).clamp(0.0, 1.0);
    let d2: f32 = rel.iter().zip(&axis).map(|(r, a)| (r - alpha * a).powi(2)).sum();
    (d2.sqrt(), alpha)
}

/// The label of one RGB value (step 1).
///
/// A pixel is matched to the palette colour whose blend segment with the background (the
/// colours a blurred edge between the two can take) passes nearest to it; it takes that colour
/// when it lies at least halfway along the segment, the background otherwise, and no label
/// when even the nearest segment is farther than `max_distance`. On unblurred pixels this is
/// the nearest-palette-colour rule with a distance threshold; on blurred ones it cuts every
/// edge at the 50 % blend, where the unblurred edge was.
#[must_use]
pub fn classify_pixel(rgb: [u8; 3], max_distance: f32) -> Label {
    let best = Colour::ALL
        .into_iter()
        .map(|c| (c, blend_distance(rgb, BACKGROUND, c.rgb())))
        .min_by(|a, b| a.1 .0.total_cmp(&b.1 .0));
    match best {
        Some((_, (d, _))) if d > max_distance => Label::Unknown,
        Some((c, (_, alpha))) if alpha >= 0.5 => Label::Colour(c),
        _ => Label::Background,
    }
}

/// The label map of `image` after steps 1 and 2, row-major.
#[must_use]
pub fn label_map(image: &Image, options: &SegmentOptions) -> Vec<Label> {
    let (w, h) = (image.width(), image.height());
    let raw: Vec<Label> = (0..w * h)
        .map(|i| {
            let rgb = image.get(i % w, i / w).unwrap_or(BACKGROUND);
            classify_pixel(rgb, options.max_colour_distance)
        })
        .collect();
    (0..w * h).map(|i| relabel(&raw, w, h, i % w, i / w, options.relabel_votes)).collect()
}

fn neighbours(w: usize, h: usize, x: usize, y: usize) -> impl Iterator<Item = (usize, usize)> {
    (-1i64..=1)
        .flat_map(|dy| (-1i64..=1).map(move |dx| (dx, dy)))
        .filter(|&d| d != (0, 0))
        .map(move |(dx, dy)| (x as i64 + dx, y as i64 + dy))
        .filter(move |&(nx, ny)| nx >= 0 && ny >= 0 && (nx as usize) < w && (ny as usize) < h)
        .map(|(nx, ny)| (nx as usize, ny as usize))
}

fn relabel(raw: &[Label], w: usize, h: usize, x: usize, y: usize, votes: usize) -> Label {
    let own = raw[y * w + x];
    let mut tally: Vec<(Label, usize)> = Vec::with_capacity(4);
    for (nx, ny) in neighbours(w, h, x, y) {
        let l = raw[ny * w + nx];
        match tally.iter_mut().find(|(t, _)| *t == l) {
            Some((_, n)) => *n += 1,
            None => tally.push((l, 1)),
        }
    }
    tally
        .into_iter()
        .find(|&(l, n)| l != own && l != Label::Unknown && n >= votes)
        .map_or(own, |(l, _)| l)
}

/// The palette-coloured components of `image` of at least `min_area` pixels (step 3), in
/// raster order of their first pixel.
#[must_use]
pub fn components(image: &Image, options: &SegmentOptions) -> Vec<Component> {
    let (w, h) = (image.width(), image.height());
    let labels = label_map(image, options);
    let mut seen = vec![false; w * h];
    let mut out = Vec::new();
    for start in 0..w * h {
        let Label::Colour(colour) = labels[start] else { continue };
        if seen[start] {
            continue;
        }
        seen[start] = true;
        let mut stack = vec![(start % w, start / w)];
        let mut pixels = Vec::new();
        while let Some((x, y)) = stack.pop() {
            pixels.push((x, y));
            for (nx, ny) in neighbours(w, h, x, y) {
                let j = ny * w + nx;
                if !seen[j] && labels[j] == Label::Colour(colour) {
                    seen[j] = true;
                    stack.push((nx, ny));
                }
            }
        }
        if pixels.len() >= options.min_area {
            let bbox = pixels.iter().fold([usize::MAX, usize::MAX, 0, 0], |b, &(x, y)| {
                [b[0].min(x), b[1].min(y), b[2].max(x), b[3].max(y)]
            });
            out.push(Component { colour, pixels, bbox });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pixels_take_the_nearest_reference_colour_within_the_threshold() {
        assert_eq!(classify_pixel([230, 50, 30], 80.0), Label::Colour(Colour::Red));
        assert_eq!(classify_pixel([240, 240, 240], 80.0), Label::Background);
        assert_eq!(classify_pixel([0, 0, 0], 80.0), Label::Unknown);
        // Blends of red and the background: 60 % red is red, 40 % red is background.
        let blend = |a: f32| {
            let (r, b) = (Colour::Red.rgb(), BACKGROUND);
            [0, 1, 2].map(|i| (a * f32::from(r[i]) + (1.0 - a) * f32::from(b[i])).round() as u8)
        };
        assert_eq!(classify_pixel(blend(0.6), 80.0), Label::Colour(Colour::Red));
        assert_eq!(classify_pixel(blend(0.4), 80.0), Label::Background);
        // Halfway between red and blue (two touching shapes): neither.
        assert_eq!(classify_pixel([130, 60, 130], 80.0), Label::Unknown);
    }

    #[test]
    fn finds_components_drops_specks_and_fills_pinholes() {
        let mut img = Image::filled(16, 16, BACKGROUND);
        for y in 2..7 {
            for x in 2..7 {
                img.set(x, y, Colour::Blue.rgb());
            }
        }
        img.set(4, 4, [0, 0, 0]); // a pin-hole inside the square
        img.set(12, 12, Colour::Red.rgb()); // an isolated speck
        for x in 9..15 {
            img.set(x, 2, Colour::Red.rgb()); // a thin red bar, 6 px
            img.set(x, 3, Colour::Red.rgb()); // 12 px in all
        }
        let comps = components(&img, &SegmentOptions::default());
        assert_eq!(comps.len(), 2, "{comps:?}");
        assert_eq!(
            (comps[0].colour, comps[0].area(), comps[0].bbox),
            (Colour::Blue, 25, [2, 2, 6, 6])
        );
        assert_eq!(comps[0].centroid(), (4.5, 4.5));
        assert_eq!(
            (comps[1].colour, comps[1].area(), comps[1].extent()),
            (Colour::Red, 12, (6, 2))
        );
    }

    #[test]
    fn separate_same_colour_shapes_stay_separate() {
        let mut img = Image::filled(12, 6, BACKGROUND);
        for y in 1..5 {
            for x in (1..5).chain(7..11) {
                img.set(x, y, Colour::Green.rgb());
            }
        }
        assert_eq!(components(&img, &SegmentOptions::default()).len(), 2);
    }
}
