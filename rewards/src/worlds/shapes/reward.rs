//! The shapes verifier as a [`Reward`] over image samples: GenEval partial credit or strict
//! correctness (arXiv 2310.11513), the composition reward of Flow-GRPO (arXiv 2505.05470).

use serde::{Deserialize, Serialize};

use super::exact::exact_score;
use super::grammar::Prompt;
use super::parse::from_text;
use super::verify::{verify_with, Verdict, VerifyOptions};
use crate::image::Image;
use crate::reward::{Component, Details, Evaluation, ImageSample, Reward};
use crate::RewardError;

/// Which of the verifier's scores the reward returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ShapesScore {
    /// The mean clause score in `[0, 1]` (GenEval partial credit); the default, since it gives
    /// a group of samples graded rather than all-or-nothing advantages.
    #[default]
    Partial,
    /// 1 when every clause holds exactly, else 0 (GenEval's strict correctness).
    Strict,
    /// A reward-hacking guard, not a GenEval score: `−min(extra, 4)/4`, `extra` the objects
    /// found beyond the number the prompt asks for (its clause counts; 2 for a relation), 4 the
    /// cells of the canvas. GenEval's "at least one" rule lets a policy fill every cell to
    /// raise its odds; this term prices each unasked object. Named `unrequested_objects`.
    Unrequested,
    /// Flow-GRPO's training score ([`super::exact`]): partial credit with exact counts on every
    /// requirement, so an unasked copy of an asked shape costs like a missing one; in
    /// `(−∞, 1]`. Named `geneval_exact`.
    Exact,
}

/// The GenEval-style shapes reward: verifies each image against its prompt.
///
/// Details: `gate` names the first clause not fully satisfied; `components` holds one entry
/// per clause (name = the clause's text, weight = 1 / number of clauses, score = its credit);
/// `notes` record `strict`, `partial` and every object found (`found`), so a training log
/// shows what the model drew.
///
/// ```
/// use drift_rewards::reward::{ImageSample, Reward};
/// use drift_rewards::worlds::shapes::{render_prompt, Prompt, ShapesReward};
///
/// let prompt = Prompt::from_text("a green triangle and a red square").unwrap();
/// let image = render_prompt(&prompt, 0);
/// let sample = ImageSample::new(prompt, 32, 32, image.into_raw()).unwrap();
/// let out = ShapesReward::default().evaluate_batch(&[sample]);
/// assert_eq!(out[0].score, 1.0);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ShapesReward {
    /// Which score to return; default partial.
    pub score: ShapesScore,
    /// Segmentation and relation settings of the verifier.
    pub verify: VerifyOptions,
}

impl ShapesReward {
    /// Scores `image` against `prompt`.
    #[must_use]
    pub fn evaluate_image(&self, prompt: &Prompt, image: &Image) -> Evaluation {
        let verdict = verify_with(prompt, image, &self.verify);
        let score = match self.score {
            ShapesScore::Partial => verdict.score,
            ShapesScore::Strict => f64::from(u8::from(verdict.strict)),
            ShapesScore::Exact => {
                exact_score(prompt, &verdict.detections, self.verify.relation_margin)
            }
            ShapesScore::Unrequested => {
                let extra = verdict.detections.len().saturating_sub(prompt.object_count());
                -(extra.min(4) as f64) / 4.0
            }
        };
        Evaluation { score, details: details(&verdict) }
    }
}

fn details(v: &Verdict) -> Details {
    let weight = 1.0 / v.clauses.len().max(1) as f64;
    let components = v
        .clauses
        .iter()
        .map(|c| Component { name: c.clause.clone(), weight, score: c.score, failure: None })
        .collect();
    let gate = v.clauses.iter().find(|c| c.score < 1.0).map(|c| {
        let gate = format!("{}: expected {}, found {}", c.clause, c.expected, c.found);
        if c.of_shape == c.found {
            gate
        } else {
            // GenEval's rule: the largest objects of the shape carry the colour.
            let largest = c.expected.min(c.of_shape);
            format!(
                "{gate} ({} of its shape; {} of the {largest} largest in its colour)",
                c.of_shape, c.in_colour
            )
        }
    });
    let found: Vec<String> = v
        .detections
        .iter()
        .map(|d| {
            let (x, y) = d.centroid;
            format!("{} at ({x:.1}, {y:.1}), {} px", d.object().text(), d.area)
        })
        .collect();
    let notes = vec![
        ("strict".to_string(), v.strict.to_string()),
        ("partial".to_string(), format!("{:.4}", v.score)),
        ("found".to_string(), found.join("; ")),
    ];
    Details { gate, tests: Vec::new(), components, notes }
}

fn image_of<P>(sample: &ImageSample<P>) -> Result<Image, RewardError> {
    Ok(Image::from_raw(sample.width, sample.height, sample.rgb.clone())?)
}

impl Reward<ImageSample<Prompt>> for ShapesReward {
    fn name(&self) -> &str {
        match self.score {
            ShapesScore::Partial => "geneval",
            ShapesScore::Strict => "geneval_strict",
            ShapesScore::Unrequested => "unrequested_objects",
            ShapesScore::Exact => "geneval_exact",
        }
    }

    fn evaluate(&self, sample: &ImageSample<Prompt>) -> Result<Evaluation, RewardError> {
        Ok(self.evaluate_image(&sample.prompt, &image_of(sample)?))
    }
}

/// Prompts given as text are parsed first; a prompt outside the grammar is an error (a
/// recorded failure), not a zero score, since no image could have satisfied it.
impl Reward<ImageSample<String>> for ShapesReward {
    fn name(&self) -> &str {
        <Self as Reward<ImageSample<Prompt>>>::name(self)
    }

    fn evaluate(&self, sample: &ImageSample<String>) -> Result<Evaluation, RewardError> {
        let prompt = from_text(&sample.prompt)?;
        Ok(self.evaluate_image(&prompt, &image_of(sample)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::worlds::shapes::render::render_prompt;

    fn sample<P: Clone>(prompt: P, image: &Image) -> ImageSample<P> {
        ImageSample::new(prompt, image.width(), image.height(), image.as_raw().to_vec()).unwrap()
    }

    #[test]
    fn scores_partial_and_strict_with_details() {
        let prompt = from_text("a circle left of a blue square").unwrap();
        let two = from_text("a red circle left of a blue square").unwrap();
        let image = render_prompt(&two, 4);
        let three = from_text("3 red circles").unwrap();
        let image3 = render_prompt(&from_text("2 red circles").unwrap(), 4);
        let partial = ShapesReward::default();
        let strict = ShapesReward { score: ShapesScore::Strict, ..ShapesReward::default() };
        let out = partial
            .evaluate_batch(&[sample(prompt.clone(), &image), sample(three.clone(), &image3)]);
        // A colourless spec is met by the red circle.
        assert_eq!(out[0].score, 1.0);
        assert!((out[1].score - (1.0 - 1.0 / 3.0)).abs() < 1e-12);
        let d = &out[1].details;
        assert_eq!(d.gate.as_deref(), Some("3 red circles: expected 3, found 2"));
        assert_eq!(d.components.len(), 1);
        assert!(d.notes.iter().any(|(k, v)| k == "found" && v.matches("red circle").count() == 2));
        assert_eq!(out[0].details.components.len(), 3);
        assert_eq!(strict.evaluate_batch(&[sample(three, &image3)])[0].score, 0.0);
        assert_eq!(strict.evaluate_batch(&[sample(prompt, &image)])[0].score, 1.0);
        assert_eq!(<ShapesReward as Reward<ImageSample<Prompt>>>::name(&strict), "geneval_strict");
    }

    /// `−extra/4`: a render of exactly what is asked scores 0; three circles for "a circle"
    /// score −2/4; a relation asks for two objects.
    #[test]
    fn unrequested_objects_price_each_object_beyond_the_prompt() {
        let guard = ShapesReward { score: ShapesScore::Unrequested, ..ShapesReward::default() };
        let one = from_text("a circle").unwrap();
        let three = render_prompt(&from_text("3 circles").unwrap(), 2);
        let rel = from_text("a red circle left of a blue square").unwrap();
        let out = guard.evaluate_batch(&[
            sample(one.clone(), &render_prompt(&one, 1)),
            sample(one, &three),
            sample(rel.clone(), &render_prompt(&rel, 3)),
        ]);
        let scores: Vec<f64> = out.iter().map(|e| e.score).collect();
        assert_eq!(scores, vec![0.0, -0.5, 0.0]);
        assert_eq!(rel.object_count(), 2);
        assert_eq!(
            <ShapesReward as Reward<ImageSample<Prompt>>>::name(&guard),
            "unrequested_objects"
        );
    }

    #[test]
    fn text_prompts_are_parsed_and_bad_ones_fail_loudly() {
        let image = render_prompt(&from_text("a red circle above a green square").unwrap(), 1);
        let ok = sample("a red circle above a green square".to_string(), &image);
        let bad = sample("a red hexagon above a green square".to_string(), &image);
        let out = ShapesReward::default().evaluate_batch(&[ok, bad]);
        assert_eq!(out[0].score, 1.0);
        let failure = out[1].failure.as_ref().expect("an unknown word is a failure");
        assert!(failure.message.contains("`hexagon`"), "{}", failure.message);
    }
}
