//! [`Scene`]: the renderer's description of an image — which object is painted where — and
//! the rasterisation of the three shapes.
//!
//! A scene is what the renderer decides before drawing, so tests can perturb it (remove or
//! recolour one object) and check that the verifier notices.

use serde::Serialize;

use super::grammar::{Colour, Object, ShapeKind};
use crate::image::Image;

/// The side of every image of the shapes world, in pixels.
pub const IMAGE_SIZE: usize = 32;

/// The plain background colour of rendered images (an off-white, far from every palette
/// colour).
pub const BACKGROUND: [u8; 3] = [245, 245, 240];

/// Whether the pixel at (`col`, `row`) of a `size`-pixel bounding box belongs to `shape`.
///
/// Pixels are sampled at their centres: a circle of radius `size/2` about the box centre; an
/// upright isosceles triangle with its apex at the top middle and its base along the bottom
/// edge; a square filling the box.
#[must_use]
pub fn covers(shape: ShapeKind, size: usize, col: usize, row: usize) -> bool {
    if col >= size || row >= size {
        return false;
    }
    let s = size as f32;
    let (px, py) = (col as f32 + 0.5, row as f32 + 0.5);
    match shape {
        ShapeKind::Square => true,
        ShapeKind::Circle => {
            let (dx, dy) = (px - s / 2.0, py - s / 2.0);
            dx * dx + dy * dy <= s * s / 4.0
        }
        ShapeKind::Triangle => (px - s / 2.0).abs() <= py / 2.0,
    }
}

/// One painted object: its kind, bounding box and the exact colour used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SceneObject {
    /// The kind of object.
    pub object: Object,
    /// Left column of the bounding box.
    pub x: usize,
    /// Top row of the bounding box.
    pub y: usize,
    /// Side of the (square) bounding box, in pixels.
    pub size: usize,
    /// The painted colour (the palette colour plus jitter).
    pub rgb: [u8; 3],
}

impl SceneObject {
    /// The image pixels this object paints, as (column, row).
    #[must_use]
    pub fn pixels(&self) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        for row in 0..self.size {
            for col in 0..self.size {
                if covers(self.object.shape, self.size, col, row) {
                    out.push((self.x + col, self.y + row));
                }
            }
        }
        out
    }

    /// The centroid (mean column, mean row, at pixel centres) of the painted pixels — the
    /// same statistic the verifier measures, so relations are laid out on what is checked.
    #[must_use]
    pub fn centroid(&self) -> (f32, f32) {
        let px = self.pixels();
        let n = px.len().max(1) as f32;
        let sx: f32 = px.iter().map(|&(x, _)| x as f32 + 0.5).sum();
        let sy: f32 = px.iter().map(|&(_, y)| y as f32 + 0.5).sum();
        (sx / n, sy / n)
    }

    /// Whether the two bounding boxes are at least `gap` pixels apart along some axis.
    #[must_use]
    pub fn separated(&self, other: &SceneObject, gap: usize) -> bool {
        self.x + self.size + gap <= other.x
            || other.x + other.size + gap <= self.x
            || self.y + self.size + gap <= other.y
            || other.y + other.size + gap <= self.y
    }
}

/// A laid-out image: a background and the objects painted over it, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Scene {
    /// The background colour.
    pub background: [u8; 3],
    /// The painted objects.
    pub objects: Vec<SceneObject>,
}

impl Scene {
    /// Paints the scene into a new [`IMAGE_SIZE`]² image (pixels outside are clipped).
    #[must_use]
    pub fn render(&self) -> Image {
        let mut img = Image::filled(IMAGE_SIZE, IMAGE_SIZE, self.background);
        for obj in &self.objects {
            for (x, y) in obj.pixels() {
                img.set(x, y, obj.rgb);
            }
        }
        img
    }

    /// The scene with object `index` removed (unchanged if there is no such object).
    #[must_use]
    pub fn without(&self, index: usize) -> Scene {
        let mut out = self.clone();
        if index < out.objects.len() {
            out.objects.remove(index);
        }
        out
    }

    /// The scene with object `index` painted in `colour`'s palette value instead (unchanged
    /// if there is no such object).
    #[must_use]
    pub fn recoloured(&self, index: usize, colour: Colour) -> Scene {
        let mut out = self.clone();
        if let Some(obj) = out.objects.get_mut(index) {
            obj.object.colour = colour;
            obj.rgb = colour.rgb();
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fill(shape: ShapeKind, size: usize) -> f32 {
        let n = (0..size * size).filter(|i| covers(shape, size, i % size, i / size)).count();
        n as f32 / (size * size) as f32
    }

    #[test]
    fn masks_have_the_expected_fill_ratios() {
        for size in 7..=10 {
            assert_eq!(fill(ShapeKind::Square, size), 1.0);
            let c = fill(ShapeKind::Circle, size);
            assert!((0.72..=0.88).contains(&c), "circle {size}: {c}");
            let t = fill(ShapeKind::Triangle, size);
            assert!((0.4..=0.6).contains(&t), "triangle {size}: {t}");
        }
        assert!(!covers(ShapeKind::Square, 4, 4, 0));
    }

    #[test]
    fn render_and_perturb() {
        let obj = SceneObject {
            object: Object::new(Colour::Red, ShapeKind::Square),
            x: 2,
            y: 3,
            size: 4,
            rgb: [200, 0, 0],
        };
        let scene = Scene { background: BACKGROUND, objects: vec![obj.clone()] };
        let img = scene.render();
        assert_eq!(img.get(2, 3), Some([200, 0, 0]));
        assert_eq!(img.get(6, 3), Some(BACKGROUND));
        assert_eq!(obj.centroid(), (4.0, 5.0));
        assert!(scene.without(0).objects.is_empty());
        assert_eq!(scene.without(7), scene);
        let blue = scene.recoloured(0, Colour::Blue);
        assert_eq!(blue.render().get(3, 4), Some(Colour::Blue.rgb()));
        let far = SceneObject { x: 8, ..obj.clone() };
        assert!(obj.separated(&far, 2) && !obj.separated(&far, 3));
    }
}
