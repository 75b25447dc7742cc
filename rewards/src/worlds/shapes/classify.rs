//! Shape classification of a segmented component from three bounding-box features.
//!
//! - `fill`: area over bounding-box area — square 1, circle π/4 ≈ 0.785, triangle 1/2;
//! - `corners`: filled fraction of the four k×k corner blocks of the box (k ≈ ¼ of the
//!   shorter side, at least 1) — square 1, circle and triangle about ¼;
//! - `taper`: `1 − (pixels in the top third of rows) / (pixels in the bottom third)` — 0 for
//!   the vertically symmetric circle and square, 0.8 for the apex-up triangle (row widths
//!   grow linearly, so the thirds hold 1/9 and 5/9 of its area).
//!
//! A component is given the shape whose ideal feature vector is nearest (Euclidean distance).
//! The ideal vectors are those of the continuous shapes, so the rule does not depend on the
//! renderer's rasterisation. Blur rounds a small triangle's three tips off, which raises its
//! fill towards a circle's; its taper survives, which is why taper is one of the features.
//! Below 7 px the shapes are not distinguishable (a 6-px circle fills 89 % of its box).

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
    /// One minus the ratio of the top third's pixels to the bottom third's, in `[−∞, 1]`.
    pub taper: f32,
}

/// The ideal features of each shape: (shape, fill, corners, taper).
const PROTOTYPES: [(ShapeKind, f32, f32, f32); 3] = [
    (ShapeKind::Square, 1.0, 1.0, 0.0),
    (ShapeKind::Circle, std::f32::consts::FRAC_PI_4, 0.2, 0.0),
    (ShapeKind::Triangle, 0.5, 0.25, 0.8),
];

/// The features of `component`.
#[must_use]
pub fn features(component: &Component) -> Features {
    let (w, h) = component.extent();
    let [x0, y0, x1, y1] = component.bbox;
    let area = component.area().max(1) as f32;
    let k = ((w.min(h) + 2) / 4).max(1);
    let in_corner = |x: usize, y: usize| (x < x0 + k || x + k > x1) && (y < y0 + k || y + k > y1);
    let corner_pixels = component.pixels.iter().filter(|&&(x, y)| in_corner(x, y)).count();
    let band = (h / 3).max(1);
    let top = component.pixels.iter().filter(|&&(_, y)| y < y0 + band).count() as f32;
    let bottom = component.pixels.iter().filter(|&&(_, y)| y + band > y1).count() as f32;
    Features {
        fill: area / (w * h) as f32,
        corners: corner_pixels as f32 / (4 * k * k) as f32,
        taper: 1.0 - top / bottom.max(1.0),
    }
}

/// The shape whose prototype is nearest to `f`.
#[must_use]
pub fn classify(f: &Features) -> ShapeKind {
    let dist = |&(_, fill, corners, taper): &(ShapeKind, f32, f32, f32)| {
        (f.fill - fill).powi(2) + (f.corners - corners).powi(2) + (f.taper - taper).powi(2)
    };
    PROTOTYPES.iter().min_by(|a, b| dist(a).total_cmp(&dist(b))).map_or(ShapeKind::Circle, |p| p.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::worlds::shapes::grammar::Colour;
    use crate::worlds::shapes::scene::covers;

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
        for size in 7..=16 {
            for shape in ShapeKind::ALL {
                let f = features(&component(shape, size));
                assert_eq!(classify(&f), shape, "{shape:?} at {size}px: {f:?}");
            }
        }
    }

    #[test]
    fn square_features_are_exact() {
        let f = features(&component(ShapeKind::Square, 8));
        assert_eq!(f, Features { fill: 1.0, corners: 1.0, taper: 0.0 });
    }
}
