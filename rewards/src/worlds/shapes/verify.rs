//! The GenEval-style verifier (Ghosh et al., arXiv 2310.11513, as used for Flow-GRPO's
//! composition reward, arXiv 2505.05470): finds the objects in an image and scores a prompt's
//! clauses against them.
//!
//! Scoring (docs/algorithms.md §10):
//! - a count clause scores against `found`, the number of detected objects of its shape (and of
//!   its colour, when it names one). As in GenEval's metadata, a singular clause ("a red
//!   circle") is an *include* requirement, satisfied by at least one match (score 1 if
//!   `found ≥ 1`, else 0), while a counting clause ("3 circles", N ≥ 2) is an include plus an
//!   *exclude* of N + 1, i.e. exactly N, with partial credit `max(0, 1 − |N − found| / N)`;
//! - a relation "a A rel a B" counts as three clauses: "a A", "a B" (scored as counts) and the
//!   relation itself, 1 when the largest detected A and the largest detected B stand in the
//!   relation by at least `relation_margin` pixels between centroids, else 0;
//! - the score is the mean over clauses; the strict score is 1 iff every clause scores 1.
//!
//! As in GenEval, objects the prompt does not mention do not lower the score; they are listed
//! in the details.

use serde::{Deserialize, Serialize};

use super::classify::{classify, features, Features};
use super::grammar::{Clause, Colour, Object, Prompt, ShapeKind, Spec};
use super::segment::{components, SegmentOptions};
use crate::image::Image;

/// Options of the verifier.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct VerifyOptions {
    /// How pixels are grouped into objects.
    pub segment: SegmentOptions,
    /// Pixels by which centroids must differ along a relation's axis; default 2 (the renderer
    /// places them 6 apart).
    pub relation_margin: f32,
}

impl Default for VerifyOptions {
    fn default() -> Self {
        Self { segment: SegmentOptions::default(), relation_margin: 2.0 }
    }
}

/// One object found in an image.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Detection {
    /// Its colour.
    pub colour: Colour,
    /// Its classified shape.
    pub shape: ShapeKind,
    /// Pixels.
    pub area: usize,
    /// Centroid (column, row).
    pub centroid: (f32, f32),
    /// Bounding box `[x0, y0, x1, y1]`, inclusive.
    pub bbox: [usize; 4],
    /// The features the shape was classified from.
    pub features: Features,
}

impl Detection {
    /// The kind of object detected.
    #[must_use]
    pub fn object(&self) -> Object {
        Object::new(self.colour, self.shape)
    }
}

/// The verdict on one clause.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClauseVerdict {
    /// The clause, as text ("3 red circles", "a circle left of a blue square").
    pub clause: String,
    /// Objects asked for (1 for a relation).
    pub expected: usize,
    /// Matching objects found (for a relation: 1 if it holds, else 0).
    pub found: usize,
    /// The clause's score in `[0, 1]`.
    pub score: f64,
}

/// The verifier's verdict on one image.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    /// Mean clause score in `[0, 1]` (GenEval partial credit).
    pub score: f64,
    /// Whether every clause is exactly satisfied (GenEval's strict correctness).
    pub strict: bool,
    /// Per-clause verdicts.
    pub clauses: Vec<ClauseVerdict>,
    /// Every object found, mentioned by the prompt or not.
    pub detections: Vec<Detection>,
}

/// The objects found in `image`.
#[must_use]
pub fn detect(image: &Image, options: &SegmentOptions) -> Vec<Detection> {
    components(image, options)
        .into_iter()
        .map(|c| {
            let f = features(&c);
            Detection {
                colour: c.colour,
                shape: classify(&f),
                area: c.area(),
                centroid: c.centroid(),
                bbox: c.bbox,
                features: f,
            }
        })
        .collect()
}

/// Verifies `image` against `prompt` with default [`VerifyOptions`].
#[must_use]
pub fn verify(prompt: &Prompt, image: &Image) -> Verdict {
    verify_with(prompt, image, &VerifyOptions::default())
}

/// Verifies `image` against `prompt`.
#[must_use]
pub fn verify_with(prompt: &Prompt, image: &Image, options: &VerifyOptions) -> Verdict {
    let detections = detect(image, &options.segment);
    let mut clauses = Vec::new();
    for clause in prompt.clauses() {
        match *clause {
            Clause::Count { count, object } => {
                clauses.push(count_verdict(&detections, usize::from(count), object));
            }
            Clause::Relation { subject, relation, reference } => {
                clauses.push(count_verdict(&detections, 1, subject));
                clauses.push(count_verdict(&detections, 1, reference));
                let largest = |s: Spec| {
                    detections.iter().filter(|d| s.matches(d.object())).max_by_key(|d| d.area)
                };
                let holds = match (largest(subject), largest(reference)) {
                    (Some(a), Some(b)) => {
                        relation.holds(a.centroid, b.centroid, options.relation_margin)
                    }
                    _ => false,
                };
                clauses.push(ClauseVerdict {
                    clause: clause.text(),
                    expected: 1,
                    found: usize::from(holds),
                    score: if holds { 1.0 } else { 0.0 },
                });
            }
        }
    }
    let score = clauses.iter().map(|c| c.score).sum::<f64>() / clauses.len().max(1) as f64;
    let strict = clauses.iter().all(|c| c.score == 1.0);
    Verdict { score, strict, clauses, detections }
}

/// A count clause's verdict: at least one match for a singular clause, exactly `expected` for a
/// counting one (GenEval's include / exclude requirements).
fn count_verdict(detections: &[Detection], expected: usize, object: Spec) -> ClauseVerdict {
    let found = detections.iter().filter(|d| object.matches(d.object())).count();
    let miss = if expected <= 1 {
        if found >= 1 {
            0.0
        } else {
            1.0
        }
    } else {
        expected.abs_diff(found) as f64 / expected as f64
    };
    ClauseVerdict {
        clause: Clause::Count { count: expected as u8, object }.text(),
        expected,
        found,
        score: (1.0 - miss).max(0.0),
    }
}
