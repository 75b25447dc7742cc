//! Shape classification of a segmented component from three bounding-box features.
//!
//! - `fill`: area over bounding-box area — square 1, circle π/4 ≈ 0.785, triangle 1/2;
//! - `corners`: filled fraction of the four k×k corner blocks of the box (k = ¼ of the shorter
//!   side, at least 1) — square 1, circle and triangle ≈ ¼;
//! - `top`: share of the pixels lying above the box's middle row — ½ for the vertically
//!   symmetric circle and square, ¼ for the apex-up triangle.
//!
//! A component is given the shape whose ideal feature vector is nearest (weighted Euclidean
//! distance, `top` counted twice since its spread is half the others'). The ideal vectors are
//! those of continuous shapes, so the rule does not depend on the renderer's rasterisation.

use serde::Serialize;

use super::grammar::ShapeKind;
use super::segment::Component;

/// The geometric features of a component.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Features {
    /// Area over bounding-box area.
    pub fill: f32,
    /// Filled fraction of the four corner blocks of the bounding box.
    pub corners: f32,
    /// Fraction of the pixels above the box's horizontal midline (half of a middle row counts
    /// on each side).
    pub top: f32,
}

/// The ideal features of each shape: (shape, fill, corners, top).
const PROTOTYPES: [(ShapeKind, f32, f32, f32); 3] = [
    (ShapeKind::Square, 1.0, 1.0, 0.5),
    (ShapeKind::Circle, std::f32::consts::FRAC_PI_4, 0.2, 0.5),
    (ShapeKind::Triangle, 0.5, 0.25, 0.25),
];

/// The features of `component`.
#[must_use]
pub fn features(component: &Component) -> Features {
    let (w, h) = component.extent();
    let [x0, y0, x1, y1] = component.bbox;
    let area = component.area().max(1) as f32;
    let k = (w.min(h) / 4).max(1);
    let in_corner = |x: usize, y: usize| {
        (x < x0 + k || x + k > x1) && (y < y0 + k || y + k > y1)
    };
    let corner_pixels = component.pixels.iter().filter(|&&(x, y)| in_corner(x, y)).count();
    let mid2 = y0 + y1; // twice the midline row, to stay in integers
    let top2: usize = component
        .pixels
        .iter()
        .map(|&(_, y)| match (2 * y).cmp(&mid2) {
            std::cmp::Ordering::Less => 2,
            std::cmp::Ordering::Equal => 1,
            std::cmp::Ordering::Greater => 0,
        })
        .sum();
    Features {
        fill: area / (w * h) as f32,
        corners: corner_pixels as f32 / (4 * k * k) as f32,
        top: top2 as f32 / (2.0 * area),
    }
}

/// The shape whose prototype is nearest to `f`.
#[must_use]
pub fn classify(f: &Features) -> ShapeKind {
    let dist = |&(_, fill, corners, top): &(ShapeKind, f32, f32, f32)| {
        (f.fill - fill).powi(2) + (f.corners - corners).powi(2) + (2.0 * (f.top - top)).powi(2)
    };
    PROTOTYPES
        .iter()
        .min_by(|a, b| dist(a).total_cmp(&dist(b)))
        .map_or(ShapeKind::Circle, |p| p.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shapes::grammar::Colour;
    use crate::shapes::scene::covers;

    fn component(shape: ShapeKind, size: usize) -> Component {
        let pixels: Vec<(usize, usize)> = (0..size * size)
            .map(|i| (i % size + 3, i / size + 3))
            .filter(|&(x, y)| covers(shape, size, x - 3, y - 3))
            .collect();
        let bbox = pixels.iter().fold([usize::MAX, usize::MAX, 0, 0], |b, &(x, y)| {
            [b[0].min(x), b[1].min(y), b[2].max(x), b[3].max(y)]
        });
        Component { colour: Colour::Red, pixels, bbox }
    }

    #[test]
    fn rendered_masks_classify_as_themselves_at_every_size() {
        for size in 5..=16 {
            for shape in ShapeKind::ALL {
                let f = features(&component(shape, size));
                assert_eq!(classify(&f), shape, "{shape:?} at {size}px: {f:?}");
            }
        }
    }

    #[test]
    fn square_features_are_exact() {
        let f = features(&component(ShapeKind::Square, 8));
        assert_eq!(f, Features { fill: 1.0, corners: 1.0, top: 0.5 });
    }
}
