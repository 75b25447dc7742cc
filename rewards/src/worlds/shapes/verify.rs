//! The GenEval-style verifier (Ghosh et al., arXiv 2310.11513, as used for Flow-GRPO's
//! composition reward, arXiv 2505.05470): finds the objects in an image and scores a prompt's
//! clauses against them.
//!
//! Scoring (docs/algorithms.md §10) follows GenEval's evaluator, which looks up the detections
//! of a clause's *class* (here its shape), ranks them by detector confidence and checks colour
//! and position only on the most confident ones ("Color and position will only be evaluated on
//! the most confidently predicted objects"). drift's detections carry no confidence; the rank is
//! by area, largest first (ties in scan order). For a clause asking `N` objects of a shape, maybe
//! of a colour, with `n` detections of that shape and `k` of its `min(N, n)` largest in the
//! asked colour (all of them when no colour is named):
//! - a singular clause ("a circle", "a red circle") is an *include* requirement: score 1 iff
//!   `n ≥ 1` and the largest object of its shape has its colour (`k = 1`), else 0. Extra objects
//!   of the shape do not lower it, but a larger one in another colour does;
//! - a counting clause (`N ≥ 2`, "3 circles", "3 red circles") is an include plus GenEval's
//!   *exclude* of `N + 1` objects of its shape, i.e. exactly `N`, with partial credit
//!   `max(0, 1 − ((N − k) + max(0, n − N)) / N)`, which is `1 − |N − n| / N` without a colour;
//! - a relation "a A rel a B" counts as three clauses: "a A", "a B" (scored as singular clauses)
//!   and the relation itself, 1 when both are met and the largest A and the largest B stand in
//!   the relation by at least `relation_margin` pixels between centroids, else 0;
//! - the score is the mean over clauses; the strict score is 1 iff every clause scores 1.
//!
//! As in GenEval, objects of shapes the prompt does not mention do not lower the score; they are
//! listed in the details.

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
    /// Matching objects found, of its shape and (when it names one) its colour; for a relation
    /// 1 if it holds, else 0.
    pub found: usize,
    /// Objects of its shape found in any colour (GenEval's class count; for a relation 0).
    pub of_shape: usize,
    /// Of the `min(expected, of_shape)` largest objects of its shape, how many have its colour
    /// (all of them when it names none; for a relation 0).
    pub in_colour: usize,
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
                let subject_verdict = count_verdict(&detections, 1, subject);
                let reference_verdict = count_verdict(&detections, 1, reference);
                // Both met: the largest object of each shape exists and carries its colour.
                let holds = subject_verdict.score == 1.0
                    && reference_verdict.score == 1.0
                    && match (
                        ranked(&detections, subject.shape).first(),
                        ranked(&detections, reference.shape).first(),
                    ) {
                        (Some(a), Some(b)) => {
                            relation.holds(a.centroid, b.centroid, options.relation_margin)
                        }
                        _ => false,
                    };
                clauses.extend([subject_verdict, reference_verdict]);
                clauses.push(ClauseVerdict {
                    clause: clause.text(),
                    expected: 1,
                    found: usize::from(holds),
                    of_shape: 0,
                    in_colour: 0,
                    score: if holds { 1.0 } else { 0.0 },
                });
            }
        }
    }
    let score = clauses.iter().map(|c| c.score).sum::<f64>() / clauses.len().max(1) as f64;
    let strict = clauses.iter().all(|c| c.score == 1.0);
    Verdict { score, strict, clauses, detections }
}

/// The detections of `shape`, largest first; equal areas keep scan order. Area stands in for
/// the detector confidence GenEval ranks by.
fn ranked(detections: &[Detection], shape: ShapeKind) -> Vec<&Detection> {
    let mut of_shape: Vec<&Detection> = detections.iter().filter(|d| d.shape == shape).collect();
    of_shape.sort_by_key(|d| std::cmp::Reverse(d.area));
    of_shape
}

/// A count clause's verdict under GenEval's include / exclude rule (module docs): the
/// `expected` largest objects of its shape must carry its colour, a singular clause accepts
/// more objects of the shape, and a counting one asks exactly `expected`.
fn count_verdict(detections: &[Detection], expected: usize, object: Spec) -> ClauseVerdict {
    let of_shape = ranked(detections, object.shape);
    let in_colour = of_shape
        .iter()
        .take(expected)
        .filter(|d| object.colour.is_none_or(|c| c == d.colour))
        .count();
    let miss = if expected <= 1 {
        if in_colour >= 1 {
            0.0
        } else {
            1.0
        }
    } else {
        (expected - in_colour + of_shape.len().saturating_sub(expected)) as f64 / expected as f64
    };
    ClauseVerdict {
        clause: Clause::Count { count: expected as u8, object }.text(),
        expected,
        found: detections.iter().filter(|d| object.matches(d.object())).count(),
        of_shape: of_shape.len(),
        in_colour,
        score: (1.0 - miss).max(0.0),
    }
}
