//! Acceptance tests of the shapes world: the verifier against the renderer — clean,
//! perturbed through the renderer's scene, and degraded by blur and noise.

use super::grammar::{Clause, Colour, Object, Prompt};
use super::noise::{degrade, Degradation};
use super::parse::from_text;
use super::render::{layout, RenderOptions};
use super::scene::Scene;
use super::split::eval_list;
use super::split::{all_prompts, sample_prompts, split, SplitConfig};
use super::verify::verify;
use crate::image::Image;

/// Renders of `prompts` with `seeds` seeds each, degraded by `how`, that the verifier does not
/// pass strictly, and the total number of renders.
fn strict_failures(prompts: &[Prompt], seeds: u64, how: Degradation) -> (Vec<String>, usize) {
    let opts = RenderOptions::default();
    let mut failures = Vec::new();
    for (i, p) in prompts.iter().enumerate() {
        for seed in 0..seeds {
            let key = seed * 10_007 + i as u64;
            let image = degrade(&layout(p, key, &opts).render(), how, key);
            let v = verify(p, &image);
            if !v.strict {
                let found: Vec<String> = v
                    .detections
                    .iter()
                    .map(|d| format!("{:?} {:?} {:?}", d.colour, d.shape, d.features))
                    .collect();
                failures.push(format!("{p} (seed {key}): {found:?}"));
            }
        }
    }
    (failures, prompts.len() * seeds as usize)
}

#[test]
fn every_held_out_prompt_verifies_strictly_on_renders() {
    let s = split(&SplitConfig::default()).unwrap();
    assert_eq!(s.held_out.len(), 113);
    let (failures, total) = strict_failures(&s.held_out, 8, Degradation::default());
    assert_eq!(total, 904);
    assert!(failures.is_empty(), "{} of {total} failed: {:#?}", failures.len(), &failures[..]);
}

#[test]
fn train_prompts_verify_strictly_on_renders() {
    let s = split(&SplitConfig::default()).unwrap();
    let sample = sample_prompts(&s.train, 300, 17);
    let (failures, total) = strict_failures(&sample, 4, Degradation::default());
    assert!(failures.is_empty(), "{} of {total} failed: {failures:#?}", failures.len());
    // And the whole space twice, so no corner of the grammar is left unrendered.
    let (failures, _) = strict_failures(&all_prompts(), 2, Degradation::default());
    assert!(failures.is_empty(), "{failures:#?}");
}

/// The exact GenEval score of a render of `prompt` from which the object painted as `missing`
/// is gone (`is_subject`: it was a relation's subject).
fn score_without(prompt: &Prompt, missing: Object, is_subject: bool) -> f64 {
    let mut scores = Vec::new();
    for clause in prompt.clauses() {
        match *clause {
            Clause::Count { count, object } => {
                let n = f64::from(count);
                scores.push(if object.matches(missing) { 1.0 - 1.0 / n } else { 1.0 });
            }
            Clause::Relation { .. } => {
                // Subject count, reference count, relation.
                scores.extend(if is_subject { [0.0, 1.0, 0.0] } else { [1.0, 0.0, 0.0] });
            }
        }
    }
    scores.iter().sum::<f64>() / scores.len() as f64
}

#[test]
fn removing_any_object_or_recolouring_a_coloured_one_breaks_strictness() {
    let s = split(&SplitConfig::default()).unwrap();
    let mut prompts = eval_list(&s.held_out, 16);
    prompts.extend(eval_list(&s.train, 16));
    let opts = RenderOptions::default();
    let (mut checked, mut colourless) = (0, 0);
    for (i, p) in prompts.iter().enumerate() {
        let specs = p.objects();
        for seed in [i as u64, 1_000 + i as u64] {
            let scene = layout(p, seed, &opts);
            for (j, obj) in scene.objects.iter().enumerate() {
                let removed = verify(p, &scene.without(j).render());
                assert!(!removed.strict, "{p}: removing {j} still strict");
                let want = score_without(p, obj.object, j == 0);
                assert!((removed.score - want).abs() < 1e-9, "{p}: {} != {want}", removed.score);
                let other = Colour::ALL[(obj.object.colour as usize + 1 + j % 3) % 4];
                let recoloured = verify(p, &scene.recoloured(j, other).render());
                if specs[j].colour.is_some() {
                    assert!(!recoloured.strict && recoloured.score < 1.0, "{p}: recolouring {j}");
                } else {
                    // A spec without a colour accepts the shape in any colour.
                    assert!(recoloured.strict, "{p}: recolouring colourless {j}");
                    colourless += 1;
                }
                checked += 2;
            }
        }
    }
    assert!(checked > 1_500 && colourless > 200, "{checked} {colourless}");
}

#[test]
fn a_blank_image_scores_zero_and_details_say_why() {
    let blank = Image::filled(32, 32, super::scene::BACKGROUND);
    for p in sample_prompts(&all_prompts(), 50, 3) {
        let v = verify(&p, &blank);
        assert_eq!((v.score, v.strict), (0.0, false), "{p}");
        assert!(v.detections.is_empty());
        assert!(v.clauses.iter().all(|c| c.found == 0));
    }
    let p = from_text("a green triangle and a red square").unwrap();
    let v = verify(&p, &layout(&p, 3, &RenderOptions::default()).without(0).render());
    assert_eq!(v.clauses[0].clause, "a green triangle");
    assert_eq!((v.clauses[0].expected, v.clauses[0].found, v.clauses[0].score), (1, 0, 0.0));
    assert_eq!(v.score, 0.5);
    let p = from_text("4 blue circles").unwrap();
    let v = verify(&p, &layout(&p, 3, &RenderOptions::default()).without(2).render());
    assert_eq!((v.clauses[0].expected, v.clauses[0].found, v.score), (4, 3, 0.75));
}

#[test]
fn the_verifier_is_robust_to_noise_and_blur() {
    let s = split(&SplitConfig::default()).unwrap();
    // (noise σ in 0–255 units, blur, minimum strict accuracy required)
    let levels = [
        (8.0, false, 1.0),
        (16.0, false, 1.0),
        (24.0, false, 0.995),
        (32.0, false, 0.99),
        (0.0, true, 1.0),
        (8.0, true, 0.998),
        (16.0, true, 0.99),
        (24.0, true, 0.95),
    ];
    for (noise_std, blur, min_accuracy) in levels {
        let prompts = eval_list(&s.held_out, 16);
        let (failures, total) = strict_failures(&prompts, 2, Degradation { noise_std, blur });
        let accuracy = 1.0 - failures.len() as f64 / total as f64;
        println!(
            "noise σ {noise_std:>4}, blur {blur:>5}: strict accuracy {accuracy:.4} of {total}"
        );
        assert!(
            accuracy >= min_accuracy,
            "σ {noise_std}, blur {blur}: {accuracy} < {min_accuracy}; e.g. {:?}",
            failures.first()
        );
    }
}

#[test]
fn singular_clauses_need_at_least_one_match_and_counts_exactly_n_as_in_geneval() {
    let opts = RenderOptions::default();
    let three = from_text("3 red circles").unwrap();
    let image = layout(&three, 5, &opts).render();
    // GenEval's include requirement: a singular clause holds with extra matching objects.
    let v = verify(&from_text("a circle").unwrap(), &image);
    assert_eq!((v.clauses[0].found, v.score, v.strict), (3, 1.0, true));
    assert!(verify(&from_text("a red circle").unwrap(), &image).strict);
    // A counting clause adds GenEval's exclude of N + 1: exactly N, partial 1 − |N − found|/N.
    let v = verify(&from_text("2 circles").unwrap(), &image);
    assert_eq!((v.clauses[0].found, v.score, v.strict), (3, 0.5, false));
    let v = verify(&from_text("4 red circles").unwrap(), &image);
    assert_eq!((v.score, v.strict), (0.75, false));
    // Objects no clause mentions never lower the score.
    let pair = from_text("a red circle and a blue square").unwrap();
    let image = layout(&pair, 9, &opts).render();
    assert!(verify(&from_text("a blue square").unwrap(), &image).strict);
    assert_eq!(verify(&from_text("a green square").unwrap(), &image).score, 0.0);
}

/// `scene` with one more copy of its object `j`: `size` pixels, in `colour`, at the first
/// place scanned from the top left that keeps 2 pixels from every object.
fn with_extra(scene: &Scene, j: usize, size: usize, colour: Colour) -> Scene {
    let mut extra = scene.objects[j].clone();
    extra.size = size;
    extra.object = Object::new(colour, extra.object.shape);
    extra.rgb = colour.rgb();
    let mut out = scene.clone();
    for (y, x) in (0..=32 - size).flat_map(|y| (0..=32 - size).map(move |x| (y, x))) {
        extra.x = x;
        extra.y = y;
        if scene.objects.iter().all(|o| o.separated(&extra, 2)) {
            out.objects.push(extra);
            return out;
        }
    }
    panic!("no room for a {size}-pixel object in {scene:?}");
}

#[test]
fn colour_and_position_are_judged_on_the_largest_objects_of_a_shape_as_in_geneval() {
    let opts = RenderOptions::default();
    // A large blue circle beside a small red one: GenEval checks the colour of the most
    // confident circle only, so "a red circle" fails although a red circle is there.
    let mut two = layout(&from_text("2 circles").unwrap(), 1, &opts);
    two.objects[0].size = 11;
    two.objects[1].size = 7;
    let two = two.recoloured(0, Colour::Blue).recoloured(1, Colour::Red);
    let image = two.render();
    let v = verify(&from_text("a red circle").unwrap(), &image);
    let c = &v.clauses[0];
    assert_eq!((c.found, c.of_shape, c.in_colour, v.score, v.strict), (1, 2, 0, 0.0, false));
    assert!(verify(&from_text("a blue circle").unwrap(), &image).strict);
    assert!(verify(&from_text("a circle").unwrap(), &image).strict);
    // Sizes swapped, the red circle is the one judged.
    let mut swapped = two.clone();
    swapped.objects[0].size = 7;
    swapped.objects[1].size = 11;
    assert!(verify(&from_text("a red circle").unwrap(), &swapped.render()).strict);

    // Counting excludes N + 1 objects of the shape whatever their colour: three red circles
    // and a smaller blue one miss "3 red circles" by the extra circle, 1 − 1/3.
    let mut four = layout(&from_text("4 red circles").unwrap(), 2, &opts);
    four.objects[3].size = 7;
    let four = four.recoloured(3, Colour::Blue).render();
    let v = verify(&from_text("3 red circles").unwrap(), &four);
    let c = &v.clauses[0];
    assert_eq!((c.found, c.of_shape, c.in_colour, v.strict), (3, 4, 3, false));
    assert!((v.score - 2.0 / 3.0).abs() < 1e-12, "{}", v.score);

    // A relation's subject is the largest object of its shape: a larger green circle beside
    // the scene fails "a red circle" and with it the relation; the square's clause holds.
    let p = from_text("a red circle left of a blue square").unwrap();
    let scene = layout(&p, 3, &opts);
    assert!(verify(&p, &scene.render()).strict);
    let bigger = scene.objects[0].size + 2;
    let v = verify(&p, &with_extra(&scene, 0, bigger, Colour::Green).render());
    let scores: Vec<f64> = v.clauses.iter().map(|c| c.score).collect();
    assert_eq!(scores, [0.0, 1.0, 0.0]);
    // A smaller extra circle changes nothing.
    let smaller = scene.objects[0].size - 2;
    assert!(verify(&p, &with_extra(&scene, 0, smaller, Colour::Green).render()).strict);
}
