//! The masked-diffusion objective: hand-computed value, keyed masks, prompts never masked,
//! micro-batching invariance.

mod common;

use std::cell::RefCell;

use candle_core::{DType, Device, Tensor};
use common::{cases, fixture};
use drift_core::rng::RngKey;
use drift_dllm::model::{DiffusionLm, LoadOptions};
use drift_dllm::pretrain::{
    draw_masks, masked_diffusion_loss, masked_diffusion_loss_with, LossWeighting, MdmObjective,
    DEFAULT_EPS,
};
use drift_samplers::MaskPredictor;

/// A model whose logits are all zero (CE = ln V at every position) and which records the
/// noisy ids it was given.
struct Uniform {
    vocab: usize,
    seen: RefCell<Vec<Vec<u32>>>,
}

impl MaskPredictor for Uniform {
    fn logits(&self, ids: &Tensor, _: Option<&Tensor>) -> candle_core::Result<Tensor> {
        *self.seen.borrow_mut() = ids.to_vec2()?;
        let (b, t) = ids.dims2()?;
        Tensor::zeros((b, t, self.vocab), DType::F32, ids.device())
    }
    fn mask_id(&self) -> u32 {
        99
    }
    fn vocab_size(&self) -> usize {
        self.vocab
    }
}

fn rows(ids: &[Vec<u32>]) -> Tensor {
    Tensor::new(ids.to_vec(), &Device::Cpu).unwrap()
}

#[test]
fn loss_of_a_uniform_model_is_the_hand_computed_value() {
    let model = Uniform { vocab: 50, seen: RefCell::new(vec![]) };
    let ids: Vec<Vec<u32>> = (0..3).map(|r| (0..16).map(|j| (r * 7 + j) % 40).collect()).collect();
    let prompt_lens = [0usize, 5, 9];
    // Row 2 has padding at the last 3 positions (not completion tokens).
    let completion: Vec<Vec<bool>> =
        (0..3).map(|r| (0..16).map(|j| r != 2 || j < 13).collect()).collect();
    let comp_t = Tensor::new(
        completion
            .iter()
            .map(|r| r.iter().map(|&c| u8::from(c)).collect::<Vec<_>>())
            .collect::<Vec<_>>(),
        &Device::Cpu,
    )
    .unwrap();
    let key = RngKey::new(3).step(7).row(100);
    let loss = masked_diffusion_loss(&model, &rows(&ids), &prompt_lens, &comp_t, key).unwrap();

    let draws = draw_masks(key, &prompt_lens, &completion, 16, DEFAULT_EPS).unwrap();
    let ln_v = (50f64).ln();
    let (mut expected, mut expected_flat) = (0.0, 0.0);
    for b in 0..3 {
        let len = (prompt_lens[b]..16).filter(|&j| completion[b][j]).count() as f64;
        let n_masked = draws.masked[b].iter().filter(|&&m| m).count() as f64;
        expected += n_masked * ln_v / f64::from(draws.t[b]) / len / 3.0;
        expected_flat += n_masked * ln_v / len / 3.0;
    }
    let got = f64::from(loss.to_scalar::<f32>().unwrap());
    assert!((got - expected).abs() < 1e-4 * expected.max(1.0), "got {got}, expected {expected}");
    assert!(expected > 0.0, "the draw masked nothing: pick another key");
    // The flat weighting drops each row's 1/t (same keyed masks).
    let flat = masked_diffusion_loss_with(
        &model,
        &rows(&ids),
        &prompt_lens,
        &comp_t,
        None,
        key,
        MdmObjective { eps: DEFAULT_EPS, weighting: LossWeighting::Flat },
    )
    .unwrap();
    let got = f64::from(flat.to_scalar::<f32>().unwrap());
    assert!((got - expected_flat).abs() < 1e-4, "flat: got {got}, expected {expected_flat}");
    assert!((expected_flat - expected).abs() > 1e-3, "t = 1 everywhere: pick another key");

    // The model saw exactly the masked positions replaced by its mask id, prompts intact.
    let seen = model.seen.borrow();
    for b in 0..3 {
        for j in 0..16 {
            let want = if draws.masked[b][j] { 99 } else { ids[b][j] };
            assert_eq!(seen[b][j], want, "row {b} position {j}");
            if j < prompt_lens[b] || !completion[b][j] {
                assert!(!draws.masked[b][j], "prompt or padding masked at {b},{j}");
            }
        }
    }
}

#[test]
fn masks_are_keyed_by_step_and_global_row_and_mask_at_rate_t() {
    let completion = vec![vec![true; 4000]; 3];
    let key = RngKey::new(11).step(2).row(40);
    let a = draw_masks(key, &[0, 0, 0], &completion, 4000, DEFAULT_EPS).unwrap();
    assert_eq!(a, draw_masks(key, &[0, 0, 0], &completion, 4000, DEFAULT_EPS).unwrap());
    // Row 41 alone (a micro-batch starting at global row 41) draws what it drew in the batch.
    let alone = draw_masks(key.row(41), &[0], &completion[..1], 4000, DEFAULT_EPS).unwrap();
    assert_eq!(alone.t[0], a.t[1]);
    assert_eq!(alone.masked[0], a.masked[1]);
    // Another step draws something else.
    assert_ne!(draw_masks(key.step(3), &[0, 0, 0], &completion, 4000, DEFAULT_EPS).unwrap(), a);
    for (t, m) in a.t.iter().zip(&a.masked) {
        assert!((DEFAULT_EPS..1.0).contains(t));
        let rate = m.iter().filter(|&&x| x).count() as f32 / 4000.0;
        assert!((rate - t).abs() < 0.03, "masked fraction {rate} for t = {t}");
    }
}

#[test]
fn the_batch_loss_is_the_mean_of_per_row_losses_whatever_the_micro_batching() {
    let model = DiffusionLm::from_dir(fixture("llada-tiny"), &LoadOptions::frozen()).unwrap();
    let ids = cases("llada-tiny")["input_ids"].to_dtype(DType::U32).unwrap();
    let ones = Tensor::ones((2, 24), DType::U8, &Device::Cpu).unwrap();
    let key = RngKey::new(2).step(4).row(10);
    let both = masked_diffusion_loss(&model, &ids, &[3, 6], &ones, key).unwrap();
    let row = |r: usize, p: usize| {
        let one = Tensor::ones((1, 24), DType::U8, &Device::Cpu).unwrap();
        masked_diffusion_loss(
            &model,
            &ids.narrow(0, r, 1).unwrap(),
            &[p],
            &one,
            key.row(10 + r as u64),
        )
        .unwrap()
        .to_scalar::<f32>()
        .unwrap()
    };
    let mean = (row(0, 3) + row(1, 6)) / 2.0;
    let both = both.to_scalar::<f32>().unwrap();
    assert!((both - mean).abs() < 1e-5 * mean, "batch {both} vs mean of rows {mean}");
}

#[test]
fn bad_arguments_are_named() {
    let model = Uniform { vocab: 8, seen: RefCell::new(vec![]) };
    let ids = rows(&[vec![1, 2, 3]]);
    let ones = Tensor::ones((1, 3), DType::U8, &Device::Cpu).unwrap();
    let err = masked_diffusion_loss(&model, &ids, &[0, 0], &ones, RngKey::new(0)).unwrap_err();
    assert!(err.to_string().contains("prompt_lens"), "{err}");
    let wrong = Tensor::ones((1, 4), DType::U8, &Device::Cpu).unwrap();
    let err = masked_diffusion_loss(&model, &ids, &[0], &wrong, RngKey::new(0)).unwrap_err();
    assert!(err.to_string().contains("completion_mask"), "{err}");
}
