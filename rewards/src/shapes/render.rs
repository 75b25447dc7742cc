//! The renderer: lays a prompt out as a [`Scene`] from a seed and paints it, producing correct
//! 32×32 pretraining images for the flow model.
//!
//! Layout rules: every object gets a square bounding box of 7–11 px (smaller when the prompt
//! asks for more objects, one more for triangles), one pixel clear of the border and [`MIN_GAP`] pixels clear of every
//! other box, so same-coloured shapes never merge; a relation holds on pixel centroids with
//! [`RENDER_MARGIN`] to spare, well above the verifier's margin, so an imperfect copy of a
//! rendered image still satisfies it. Random placement is tried first; when a crowded prompt
//! defeats it, a jittered 3×3 cell layout is used, so every grammatical prompt renders.

use serde::{Deserialize, Serialize};

use super::grammar::{Clause, Object, Prompt, Relation, ShapeKind};
use super::rng::SplitMix64;
use super::scene::{Scene, SceneObject, BACKGROUND, IMAGE_SIZE};
use crate::image::Image;

/// Minimum clear pixels between two objects' bounding boxes.
pub const MIN_GAP: usize = 2;

/// How far (in pixels, along the relation's axis) the renderer places a relation's subject
/// beyond its reference's centroid.
pub const RENDER_MARGIN: f32 = 6.0;

/// Random layouts tried before the cell layout.
const ATTEMPTS: u64 = 64;

/// Positions tried per object within one layout attempt.
const TRIES_PER_OBJECT: usize = 60;

/// Options of the renderer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RenderOptions {
    /// Maximum per-channel colour jitter added to each object's palette colour (uniform in
    /// `−j..=j`); default 12, enough to vary the data while staying nearest to its palette
    /// colour by a wide margin.
    pub colour_jitter: u8,
}

impl Default for RenderOptions {
    fn default() -> Self {
        Self { colour_jitter: 12 }
    }
}

/// The inclusive range of bounding-box sides of `shape` in a prompt of `n` objects.
/// Triangles get one pixel more: they cover half their box, and below 8 px a soft-edged
/// triangle loses its tips and reads as a circle.
fn size_range(shape: ShapeKind, n: usize) -> (usize, usize) {
    let extra = usize::from(shape == ShapeKind::Triangle);
    let (lo, hi) = match n {
        0..=2 => (8, 10),
        3..=4 => (7, 9),
        _ => (7, 8),
    };
    (lo + extra, hi + extra)
}

/// Lays `prompt` out at random from `seed` (a pure function of both).
#[must_use]
pub fn layout(prompt: &Prompt, seed: u64, options: &RenderOptions) -> Scene {
    let objects = prompt.objects();
    let relation = prompt.clauses().iter().find_map(|c| match *c {
        Clause::Relation { relation, .. } => Some(relation),
        Clause::Count { .. } => None,
    });
    let mut colour_rng = SplitMix64::keyed(&[seed, u64::MAX]);
    let placed = (0..ATTEMPTS)
        .find_map(|attempt| {
            let mut rng = SplitMix64::keyed(&[seed, attempt]);
            random_boxes(&objects, relation, &mut rng)
        })
        .unwrap_or_else(|| cell_boxes(&objects, relation, &mut SplitMix64::keyed(&[seed])));
    let objects = objects
        .iter()
        .zip(placed)
        .map(|(&object, (x, y, size))| SceneObject {
            object,
            x,
            y,
            size,
            rgb: jitter(object, options.colour_jitter, &mut colour_rng),
        })
        .collect();
    Scene { background: BACKGROUND, objects }
}

/// Lays out and paints `prompt` from `seed` with default [`RenderOptions`].
///
/// ```
/// use drift_rewards::shapes::{from_text, render_prompt, verify};
/// let prompt = from_text("a red circle left of a blue square").unwrap();
/// let image = render_prompt(&prompt, 7);
/// assert!(verify(&prompt, &image).strict);
/// ```
#[must_use]
pub fn render_prompt(prompt: &Prompt, seed: u64) -> Image {
    layout(prompt, seed, &RenderOptions::default()).render()
}

/// Training example `index` of a pretraining stream over `prompts`: a prompt drawn uniformly
/// by the key `(seed, index)` and its render from the same key, so a data loader can resume
/// at any index and reproduce every example; `None` when `prompts` is empty.
#[must_use]
pub fn training_example(prompts: &[Prompt], seed: u64, index: u64) -> Option<(Prompt, Image)> {
    if prompts.is_empty() {
        return None;
    }
    let mut rng = SplitMix64::keyed(&[seed, 0x7072_6574_7261_696e, index]);
    let prompt = prompts[rng.below(prompts.len() as u64) as usize].clone();
    let image = render_prompt(&prompt, rng.next_u64());
    Some((prompt, image))
}

fn jitter(object: Object, amount: u8, rng: &mut SplitMix64) -> [u8; 3] {
    let j = i64::from(amount);
    object.colour.rgb().map(|c| (i64::from(c) + rng.range_inclusive(-j, j)).clamp(0, 255) as u8)
}

fn boxed(object: Object, (x, y, size): (usize, usize, usize)) -> SceneObject {
    SceneObject { object, x, y, size, rgb: object.colour.rgb() }
}

fn relation_holds(objects: &[Object], boxes: &[(usize, usize, usize)], rel: Relation) -> bool {
    let [a, b] = [0, 1].map(|i| boxed(objects[i], boxes[i]).centroid());
    rel.holds(a, b, RENDER_MARGIN)
}

/// One attempt at random, non-overlapping boxes; `None` when an object found no room.
fn random_boxes(
    objects: &[Object],
    relation: Option<Relation>,
    rng: &mut SplitMix64,
) -> Option<Vec<(usize, usize, usize)>> {
    let mut boxes: Vec<(usize, usize, usize)> = Vec::with_capacity(objects.len());
    for (i, &object) in objects.iter().enumerate() {
        let (lo, hi) = size_range(object.shape, objects.len());
        let found = (0..TRIES_PER_OBJECT).find_map(|_| {
            let size = rng.range_inclusive(lo as i64, hi as i64) as usize;
            let max = (IMAGE_SIZE - 1 - size) as i64;
            let b =
                (rng.range_inclusive(1, max) as usize, rng.range_inclusive(1, max) as usize, size);
            let candidate = boxed(object, b);
            let clear = boxes
                .iter()
                .zip(objects)
                .all(|(&o, &obj)| candidate.separated(&boxed(obj, o), MIN_GAP));
            let related = match relation {
                Some(rel) if i == 1 => relation_holds(objects, &[boxes[0], b], rel),
                _ => true,
            };
            (clear && related).then_some(b)
        })?;
        boxes.push(found);
    }
    Some(boxes)
}

/// The fallback: objects in distinct cells of a 3×3 grid of 10-px cells (a relation's two
/// objects in cells on opposite sides of the middle), jittered within the cell.
fn cell_boxes(
    objects: &[Object],
    relation: Option<Relation>,
    rng: &mut SplitMix64,
) -> Vec<(usize, usize, usize)> {
    let cells: Vec<(usize, usize)> = match relation {
        Some(Relation::LeftOf) => vec![(0, 1), (2, 1)],
        Some(Relation::RightOf) => vec![(2, 1), (0, 1)],
        Some(Relation::Above) => vec![(1, 0), (1, 2)],
        Some(Relation::Below) => vec![(1, 2), (1, 0)],
        None => {
            let mut all: Vec<(usize, usize)> = (0..9).map(|i| (i % 3, i / 3)).collect();
            rng.shuffle(&mut all);
            all
        }
    };
    cells
        .into_iter()
        .zip(objects)
        .map(|((cx, cy), object)| {
            let size = size_range(object.shape, 9).0;
            let slack = 10 - size - MIN_GAP; // keeps neighbouring cells MIN_GAP apart
            let jx = rng.range_inclusive(0, slack as i64) as usize;
            let jy = rng.range_inclusive(0, slack as i64) as usize;
            (1 + cx * 10 + jx, 1 + cy * 10 + jy, size)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shapes::parse::from_text;

    fn check_scene(prompt: &Prompt, scene: &Scene) {
        assert_eq!(scene.objects.len(), prompt.objects().len());
        for (i, a) in scene.objects.iter().enumerate() {
            assert!(a.x >= 1 && a.y >= 1, "{prompt}: touches the border");
            assert!(a.x + a.size < IMAGE_SIZE && a.y + a.size < IMAGE_SIZE, "{prompt}");
            for b in &scene.objects[i + 1..] {
                assert!(a.separated(b, MIN_GAP), "{prompt}: {a:?} and {b:?} too close");
            }
        }
        if let [Clause::Relation { relation, .. }] = prompt.clauses() {
            let (a, b) = (scene.objects[0].centroid(), scene.objects[1].centroid());
            assert!(relation.holds(a, b, RENDER_MARGIN), "{prompt}: {a:?} {b:?}");
        }
    }

    #[test]
    fn layouts_are_valid_deterministic_and_vary_with_the_seed() {
        let opts = RenderOptions::default();
        for text in ["4 red squares and 2 blue circles", "a green circle below a red triangle"] {
            let prompt = from_text(text).unwrap();
            for seed in 0..50 {
                check_scene(&prompt, &layout(&prompt, seed, &opts));
            }
            assert_eq!(layout(&prompt, 3, &opts), layout(&prompt, 3, &opts));
            assert_ne!(layout(&prompt, 3, &opts), layout(&prompt, 4, &opts));
        }
    }

    #[test]
    fn cell_fallback_is_valid_for_every_relation_and_six_objects() {
        let mut rng = SplitMix64::new(1);
        for text in [
            "a red circle left of a blue square",
            "a red circle right of a blue square",
            "a red circle above a blue square",
            "a red circle below a blue square",
            "3 red circles and 3 yellow triangles",
        ] {
            let prompt = from_text(text).unwrap();
            let objects = prompt.objects();
            let relation = prompt.clauses().iter().find_map(|c| match *c {
                Clause::Relation { relation, .. } => Some(relation),
                Clause::Count { .. } => None,
            });
            let boxes = cell_boxes(&objects, relation, &mut rng);
            let objs = objects.iter().zip(boxes).map(|(&o, b)| boxed(o, b)).collect();
            check_scene(&prompt, &Scene { background: BACKGROUND, objects: objs });
        }
    }

    #[test]
    fn training_examples_are_keyed_by_index() {
        let prompts = crate::shapes::split::all_prompts();
        let a = training_example(&prompts, 1, 42).unwrap();
        assert_eq!(Some(a.clone()), training_example(&prompts, 1, 42));
        assert_ne!(Some(a.clone()), training_example(&prompts, 1, 43));
        assert!(crate::shapes::verify::verify(&a.0, &a.1).strict);
        assert!(training_example(&[], 1, 0).is_none());
    }

    #[test]
    fn colour_jitter_stays_within_bounds() {
        let prompt = from_text("4 yellow circles").unwrap();
        let opts = RenderOptions { colour_jitter: 12 };
        for seed in 0..20 {
            for obj in layout(&prompt, seed, &opts).objects {
                let base = obj.object.colour.rgb();
                for (got, want) in obj.rgb.iter().zip(base) {
                    assert!((i32::from(*got) - i32::from(want)).abs() <= 12);
                }
            }
        }
        let flat = layout(&prompt, 0, &RenderOptions { colour_jitter: 0 });
        assert!(flat.objects.iter().all(|o| o.rgb == o.object.colour.rgb()));
    }
}
