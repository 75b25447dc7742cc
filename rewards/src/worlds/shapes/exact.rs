//! Flow-GRPO's GenEval *training* score (arXiv 2505.05470; the `evaluate_reward` of its reward
//! server, the `scores` its trainer optimises): every include requirement is scored against the
//! exact count, so an unasked copy of an asked object costs as much as a missing one.
//!
//! GenEval's evaluation rule ([`super::verify`]) accepts "at least one" for a singular clause,
//! and a policy trained on it learns to fill the canvas (BENCHMARKS.md, issue 18). The score
//! Flow-GRPO trains on instead, mapped onto the shapes grammar (a prompt's objects are always
//! different shapes, as GenEval's are different classes):
//!
//! - each object requirement (`N` of a shape, maybe of a colour) adds the term
//!   `1 − |N − n_shape| / N`, `n_shape` the detections of its shape whatever their colour
//!   (unclamped: three circles for "a circle" score −1);
//! - when `n_shape ≠ N` and the requirement names a colour or a position, one more term 0;
//! - else, with a colour, the term `1 − |N − n_colour| / N` over those `N` objects; the
//!   requirement is met only when `n_colour = N`;
//! - a relation "a A rel a B" is the requirement "a B" followed by "a A" positioned against it:
//!   when "a A" is met, one more term, 0 if "a B" was not met, else 1 when A stands in the
//!   relation to B (centroids at least `relation_margin` apart along its axis), else 0;
//! - the score is the mean of the terms.
//!
//! One deliberate difference: on a failed relation the reference appends 0 and then, after its
//! loop, 1 as well (two terms); drift appends the single 0 its logic intends.

use super::grammar::{Clause, Prompt, Spec};
use super::verify::Detection;

/// Flow-GRPO's exact-count GenEval score of `detections` against `prompt` (module docs), in
/// `(−∞, 1]`; 1 iff every object is present exactly as often as asked, in its colour and
/// relation.
#[must_use]
pub fn exact_score(prompt: &Prompt, detections: &[Detection], relation_margin: f32) -> f64 {
    let mut terms = Vec::new();
    for clause in prompt.clauses() {
        match *clause {
            Clause::Count { count, object } => {
                require(&mut terms, detections, count, object, false);
            }
            Clause::Relation { subject, relation, reference } => {
                let target = require(&mut terms, detections, 1, reference, false);
                if let Some(found) = require(&mut terms, detections, 1, subject, true) {
                    let holds = target.is_some_and(|t| {
                        found.iter().all(|a| {
                            t.iter()
                                .all(|b| relation.holds(a.centroid, b.centroid, relation_margin))
                        })
                    });
                    terms.push(if holds { 1.0 } else { 0.0 });
                }
            }
        }
    }
    if terms.is_empty() {
        0.0
    } else {
        terms.iter().sum::<f64>() / terms.len() as f64
    }
}

/// Adds the terms of one requirement (`count` objects of `spec`, `positioned` when a relation
/// will be checked on it) and returns its objects when it is met.
fn require<'a>(
    terms: &mut Vec<f64>,
    detections: &'a [Detection],
    count: u8,
    spec: Spec,
    positioned: bool,
) -> Option<Vec<&'a Detection>> {
    let n = usize::from(count);
    let asked = f64::from(count);
    let of_shape: Vec<&Detection> = detections.iter().filter(|d| d.shape == spec.shape).collect();
    terms.push(1.0 - n.abs_diff(of_shape.len()) as f64 / asked);
    if of_shape.len() != n {
        if spec.colour.is_some() || positioned {
            terms.push(0.0);
        }
        return None;
    }
    if let Some(colour) = spec.colour {
        let right = of_shape.iter().filter(|d| d.colour == colour).count();
        terms.push(1.0 - n.abs_diff(right) as f64 / asked);
        if right != n {
            return None;
        }
    }
    Some(of_shape)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::Image;
    use crate::worlds::shapes::parse::from_text;
    use crate::worlds::shapes::render::render_prompt;
    use crate::worlds::shapes::segment::SegmentOptions;
    use crate::worlds::shapes::verify::detect;

    fn score(prompt: &str, drawn: &str, seed: u64) -> f64 {
        let image: Image = render_prompt(&from_text(drawn).unwrap(), seed);
        let found = detect(&image, &SegmentOptions::default());
        exact_score(&from_text(prompt).unwrap(), &found, 2.0)
    }

    /// Hand-computed: the terms of each case are written out.
    #[test]
    fn counts_are_exact_on_every_requirement() {
        // Exactly what is asked: every term 1.
        assert_eq!(score("a circle", "a circle", 1), 1.0);
        assert_eq!(
            score("a red circle left of a blue square", "a red circle left of a blue square", 3),
            1.0
        );
        // Three circles for "a circle": 1 − |1 − 3| / 1 = −1 (GenEval's evaluation gives 1).
        assert_eq!(score("a circle", "3 circles", 2), -1.0);
        // Two circles for "3 circles": 1 − 1/3.
        assert!((score("3 circles", "2 circles", 4) - 2.0 / 3.0).abs() < 1e-12);
        // "a red circle" drawn blue: count term 1, colour term 1 − |1 − 0| = 0; mean 1/2.
        assert_eq!(score("a red circle", "a blue circle", 5), 0.5);
        // "a red circle" with none drawn: count term 0 plus the colour's 0.
        assert_eq!(score("a red circle", "a blue square", 5), 0.0);
        // Two objects, one missing: terms [1, 0]; colour attribution adds a 0 for the missing
        // one's colour: [1, 1, 0, 0] when the first is right.
        assert_eq!(score("a circle and a square", "a circle", 6), 0.5);
        assert_eq!(score("a red circle and a blue square", "a red circle", 6), 0.5);
    }

    #[test]
    fn a_relation_is_two_requirements_and_a_position_term() {
        // Both present, relation reversed: terms [1 (B), 1 (A), 0 (position)].
        let s = score("a circle left of a square", "a circle right of a square", 7);
        assert!((s - 2.0 / 3.0).abs() < 1e-12, "{s}");
        // The reference missing: B's term 0; A met; position 0 (no target): [0, 1, 0].
        let s = score("a circle left of a square", "a circle", 7);
        assert!((s - 1.0 / 3.0).abs() < 1e-12, "{s}");
        // The subject missing: [1 (B), 0 (A), 0 (its position, unmet)].
        let s = score("a circle left of a square", "a square", 7);
        assert!((s - 1.0 / 3.0).abs() < 1e-12, "{s}");
    }
}
