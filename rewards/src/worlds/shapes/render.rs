//! The renderer: lays a prompt out as a [`Scene`] from a seed and paints it, producing correct
//! 32×32 pretraining images for the flow model.
//!
//! Layout: the image is a 2×2 grid of [`CELL`]-pixel cells (aligned with the DiT's 4-px
//! patches) and every object sits in its own cell: a square bounding box of 10–12 px (one
//! more for triangles, which cover half their box), centred in the cell up to
//! [`POSITION_JITTER`] pixels either way and always one pixel inside it, so two objects' boxes
//! are at least [`MIN_GAP`] pixels apart and same-coloured shapes never merge. Count and two-object prompts take distinct
//! random cells; a relation puts its subject in the column (left / right) or row (above /
//! below) the relation names and its reference in the other, the other coordinate of each
//! drawn at random, so the relation holds on pixel centroids by at least 6 px, far above the
//! verifier's margin. A spec without a colour is painted in a random palette colour.
//!
//! Why cells (measured in BENCHMARKS.md, "The shapes world v2"): a 1.3 M DiT trained for an
//! hour on free layouts of up to six 7–11 px objects drew blobs; a cell layout gives each
//! object a few discrete positions the model can learn quickly, while counts, colours, shapes
//! and relations stay exactly as hard to get right together.

use serde::{Deserialize, Serialize};

use super::grammar::{Category, Colour, Object, Prompt, Relation, ShapeKind};
use drift_core::rng::SplitMix64;

use super::keyed_rng;
use super::scene::{Scene, SceneObject, BACKGROUND, IMAGE_SIZE};
use crate::image::Image;

/// Side of a layout cell, in pixels (the image is `GRID × GRID` cells).
pub const CELL: usize = 16;

/// Cells per side of the image.
pub const GRID: usize = IMAGE_SIZE / CELL;

/// Minimum clear pixels between two objects' bounding boxes (each stays one pixel inside its
/// cell).
pub const MIN_GAP: usize = 2;

/// Pixels by which an object may move either way from its cell's centre.
pub const POSITION_JITTER: usize = 1;

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

/// The inclusive range of bounding-box sides of `shape`. Triangles get one pixel more: they
/// cover half their box, and a soft-edged small triangle loses its tips and reads as a circle.
#[must_use]
pub fn size_range(shape: ShapeKind) -> (usize, usize) {
    let extra = usize::from(shape == ShapeKind::Triangle);
    (10 + extra, 12 + extra)
}

/// The cells `(column, row)` of a relation's subject and reference: the subject on the
/// relation's side along its axis, the other coordinate of each drawn at random.
fn relation_cells(relation: Relation, rng: &mut SplitMix64) -> [(usize, usize); 2] {
    let mut free = || rng.below(GRID as u64) as usize;
    let (a, b) = (free(), free());
    match relation {
        Relation::LeftOf => [(0, a), (GRID - 1, b)],
        Relation::RightOf => [(GRID - 1, a), (0, b)],
        Relation::Above => [(a, 0), (b, GRID - 1)],
        Relation::Below => [(a, GRID - 1), (b, 0)],
    }
}

/// Lays `prompt` out at random from `seed` (a pure function of both).
#[must_use]
pub fn layout(prompt: &Prompt, seed: u64, options: &RenderOptions) -> Scene {
    let specs = prompt.objects();
    let mut rng = keyed_rng(&[seed]);
    let mut colour_rng = keyed_rng(&[seed, u64::MAX]);
    let cells: Vec<(usize, usize)> = match prompt.relation() {
        Some(relation) => relation_cells(relation, &mut rng).to_vec(),
        None => {
            let mut all: Vec<(usize, usize)> =
                (0..GRID * GRID).map(|i| (i % GRID, i / GRID)).collect();
            rng.shuffle(&mut all);
            all
        }
    };
    let objects = specs
        .iter()
        .zip(cells)
        .map(|(&spec, (cx, cy))| {
            let (lo, hi) = size_range(spec.shape);
            let size = rng.range_inclusive(lo as i64, hi as i64) as usize;
            let x = cx * CELL + offset(size, &mut rng);
            let y = cy * CELL + offset(size, &mut rng);
            let colour = spec.colour.unwrap_or_else(|| {
                Colour::ALL[colour_rng.below(Colour::ALL.len() as u64) as usize]
            });
            let object = Object::new(colour, spec.shape);
            SceneObject {
                object,
                x,
                y,
                size,
                rgb: jitter(object, options.colour_jitter, &mut colour_rng),
            }
        })
        .collect();
    Scene { background: BACKGROUND, objects }
}

/// Lays out and paints `prompt` from `seed` with default [`RenderOptions`].
///
/// ```
/// use drift_rewards::worlds::shapes::{from_text, render_prompt, verify};
/// let prompt = from_text("a red circle left of a blue square").unwrap();
/// let image = render_prompt(&prompt, 7);
/// assert!(verify(&prompt, &image).strict);
/// ```
#[must_use]
pub fn render_prompt(prompt: &Prompt, seed: u64) -> Image {
    layout(prompt, seed, &RenderOptions::default()).render()
}

/// Training example `index` of a pretraining stream over `prompts`: a prompt drawn
/// category-balanced by the key `(seed, index)` ([`super::split::balanced_prompt`]) and its
/// render from the same key, so a data loader can resume at any index and reproduce every
/// example; `None` when `prompts` is empty.
#[must_use]
pub fn training_example(prompts: &[Prompt], seed: u64, index: u64) -> Option<(Prompt, Image)> {
    let groups = super::split::by_category(prompts);
    training_example_grouped(&groups, seed, index)
}

/// [`training_example`] over prompts already grouped by [`super::split::by_category`] (a
/// data loader groups once, not per example).
#[must_use]
pub fn training_example_grouped(
    groups: &[(Category, Vec<Prompt>)],
    seed: u64,
    index: u64,
) -> Option<(Prompt, Image)> {
    training_example_weighted(groups, &vec![1.0; groups.len()], seed, index)
}

/// [`training_example_grouped`] with the category drawn by weight
/// ([`super::split::weighted_prompt`]: `groups[i]` with probability `weights[i] / Σ w`); equal
/// weights give exactly the balanced stream. `None` when `groups` is empty or the weights are
/// not one finite, non-negative, not all-zero weight per group.
#[must_use]
pub fn training_example_weighted(
    groups: &[(Category, Vec<Prompt>)],
    weights: &[f64],
    seed: u64,
    index: u64,
) -> Option<(Prompt, Image)> {
    let prompt = super::split::weighted_prompt(groups, weights, seed, index)?;
    let mut rng = keyed_rng(&[seed, 0x7072_6574_7261_696e, index]);
    let image = render_prompt(&prompt, rng.next_u64());
    Some((prompt, image))
}

/// The offset of a `size`-px box in its cell: centred, moved by up to [`POSITION_JITTER`]
/// pixels either way, and kept one clear pixel inside the cell.
fn offset(size: usize, rng: &mut SplitMix64) -> usize {
    let centred = ((CELL - size) / 2) as i64;
    let j = POSITION_JITTER as i64;
    (centred + rng.range_inclusive(-j, j)).clamp(1, (CELL - size - 1) as i64) as usize
}

fn jitter(object: Object, amount: u8, rng: &mut SplitMix64) -> [u8; 3] {
    let j = i64::from(amount);
    object.colour.rgb().map(|c| (i64::from(c) + rng.range_inclusive(-j, j)).clamp(0, 255) as u8)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::worlds::shapes::parse::from_text;
    use crate::worlds::shapes::split::all_prompts;

    fn check_scene(prompt: &Prompt, scene: &Scene) {
        let specs = prompt.objects();
        assert_eq!(scene.objects.len(), specs.len());
        for (i, a) in scene.objects.iter().enumerate() {
            assert!(specs[i].matches(a.object), "{prompt}: {a:?}");
            let (cx, cy) = (a.x / CELL, a.y / CELL);
            assert!(a.x > cx * CELL && a.x + a.size < (cx + 1) * CELL, "{prompt}: {a:?}");
            assert!(a.y > cy * CELL && a.y + a.size < (cy + 1) * CELL, "{prompt}: {a:?}");
            for b in &scene.objects[i + 1..] {
                assert!(a.separated(b, MIN_GAP), "{prompt}: {a:?} and {b:?} too close");
            }
        }
        if let Some(relation) = prompt.relation() {
            let (a, b) = (scene.objects[0].centroid(), scene.objects[1].centroid());
            assert!(relation.holds(a, b, 6.0), "{prompt}: {a:?} {b:?}");
        }
    }

    #[test]
    fn layouts_are_valid_for_every_prompt_deterministic_and_vary_with_the_seed() {
        let opts = RenderOptions::default();
        for prompt in all_prompts() {
            for seed in 0..8 {
                check_scene(&prompt, &layout(&prompt, seed, &opts));
            }
        }
        for text in ["4 red squares", "a green circle below a triangle"] {
            let prompt = from_text(text).unwrap();
            assert_eq!(layout(&prompt, 3, &opts), layout(&prompt, 3, &opts));
            assert_ne!(layout(&prompt, 3, &opts), layout(&prompt, 4, &opts));
        }
    }

    #[test]
    fn colourless_specs_take_every_colour_and_relations_use_both_free_coordinates() {
        let opts = RenderOptions::default();
        let circle = from_text("a circle").unwrap();
        let colours: std::collections::HashSet<Colour> =
            (0..64).map(|s| layout(&circle, s, &opts).objects[0].object.colour).collect();
        assert_eq!(colours.len(), 4);
        let left = from_text("a circle left of a square").unwrap();
        let rows: std::collections::HashSet<(usize, usize)> = (0..64)
            .map(|s| {
                let o = layout(&left, s, &opts).objects;
                (o[0].y / CELL, o[1].y / CELL)
            })
            .collect();
        assert_eq!(rows.len(), 4, "subject and reference rows are drawn independently");
    }

    #[test]
    fn training_examples_are_keyed_by_index() {
        let prompts = all_prompts();
        let a = training_example(&prompts, 1, 42).unwrap();
        assert_eq!(Some(a.clone()), training_example(&prompts, 1, 42));
        assert_ne!(Some(a.clone()), training_example(&prompts, 1, 43));
        assert!(crate::worlds::shapes::verify::verify(&a.0, &a.1).strict);
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

    #[test]
    fn weighted_examples_keep_the_balanced_stream_at_equal_weights_and_follow_the_weights() {
        let groups = crate::worlds::shapes::split::by_category(&all_prompts());
        let n = groups.len();
        for index in 0..50 {
            let balanced = training_example_grouped(&groups, 3, index).unwrap();
            let equal = training_example_weighted(&groups, &vec![2.5; n], 3, index).unwrap();
            assert_eq!(balanced.0, equal.0);
            assert_eq!(balanced.1, equal.1, "the render must not depend on the weights");
        }
        // All the weight on the last group: every example is of its category.
        let mut only_last = vec![0.0; n];
        only_last[n - 1] = 1.0;
        let last = groups[n - 1].0;
        for index in 0..200 {
            let (prompt, _) = training_example_weighted(&groups, &only_last, 3, index).unwrap();
            assert_eq!(prompt.category(), last);
        }
        // Weight 3 on one category of six: drawn with probability 3/8, not 1/6.
        let mut heavy = vec![1.0; n];
        heavy[0] = 3.0;
        let first = groups[0].0;
        let hits = (0..4000)
            .filter(|&i| {
                training_example_weighted(&groups, &heavy, 7, i).unwrap().0.category() == first
            })
            .count();
        let share = hits as f64 / 4000.0;
        assert!((share - 3.0 / (n as f64 + 2.0)).abs() < 0.03, "share {share}");
        assert!(training_example_weighted(&groups, &[1.0], 0, 0).is_none(), "one weight per group");
    }
}
