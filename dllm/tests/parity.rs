//! Parity of both architectures with logits computed by the original Python code
//! (`fixtures/`, NVlabs/Fast-dLLM at 24cc59e), within `max |Δlogit| ≤ 1e-5`.

mod common;

use candle_core::{DType, IndexOp, Tensor};
use common::{cases, fixture, max_diff};
use drift_dllm::model::{shift_logits, Architecture, DiffusionLm, LoadOptions};
use drift_samplers::MaskPredictor;

const TOL: f32 = 1e-5;

fn load(name: &str) -> DiffusionLm {
    DiffusionLm::from_dir(fixture(name), &LoadOptions::frozen()).expect("fixture checkpoint loads")
}

#[test]
fn llada_logits_match_the_reference() {
    let model = load("llada-tiny");
    assert_eq!(model.config().architecture(), Architecture::Llada);
    let c = cases("llada-tiny");
    let logits = model.raw_logits(&c["input_ids"], None).unwrap();
    let diff = max_diff(&logits, &c["logits"]);
    println!("llada-tiny max |Δlogit| = {diff:.3e}");
    assert!(diff <= TOL, "llada-tiny max |Δlogit| = {diff:e}");
    // LLaDA has no shift: the MaskPredictor logits are the raw ones, ids given as u32.
    let ids_u32 = c["input_ids"].to_dtype(DType::U32).unwrap();
    assert_eq!(max_diff(&model.logits(&ids_u32, None).unwrap(), &logits), 0.0);
    assert_eq!(model.mask_id(), 126);
    assert_eq!(model.vocab_size(), 128);
}

#[test]
fn dream_logits_match_the_reference() {
    let model = load("dream-tiny");
    assert_eq!(model.config().architecture(), Architecture::Dream);
    let c = cases("dream-tiny");
    let logits = model.raw_logits(&c["input_ids"], None).unwrap();
    let diff = max_diff(&logits, &c["logits"]);
    println!("dream-tiny max |Δlogit| = {diff:.3e}");
    assert!(diff <= TOL, "dream-tiny max |Δlogit| = {diff:e}");
}

#[test]
fn dream_padded_logits_match_the_reference_at_every_position() {
    let model = load("dream-tiny");
    let c = cases("dream-tiny");
    let mask = &c["attention_mask_padded"];
    let logits = model.raw_logits(&c["input_ids_padded"], Some(mask)).unwrap();
    let expected = &c["logits_padded"];
    // Real positions (what the fixture README asks for) ...
    let real = mask.to_dtype(DType::F32).unwrap().unsqueeze(2).unwrap();
    let real_diff =
        max_diff(&logits.broadcast_mul(&real).unwrap(), &expected.broadcast_mul(&real).unwrap());
    // ... and all 48, since pads follow torch's zero-attention-output rule.
    let all_diff = max_diff(&logits, expected);
    println!("dream-tiny padded max |Δlogit|: real positions {real_diff:.3e}, all {all_diff:.3e}");
    assert!(real_diff <= TOL && all_diff <= TOL, "real {real_diff:e}, all {all_diff:e}");
    // Row 0 has no padding: a mask of ones changes nothing.
    let unpadded = model.raw_logits(&c["input_ids"], None).unwrap();
    assert!(max_diff(&logits.i(0).unwrap(), &unpadded.i(0).unwrap()) <= 1e-6);
    // Ignoring the mask is a detectable mistake (README: 0.143 at real positions).
    let unmasked = model.raw_logits(&c["input_ids_padded"], None).unwrap();
    let wrong = max_diff(
        &unmasked.i(1).unwrap().narrow(0, 4, 20).unwrap(),
        &expected.i(1).unwrap().narrow(0, 4, 20).unwrap(),
    );
    assert!(wrong > 1e-2, "the padding mask had no effect ({wrong:e})");
}

#[test]
fn dream_wrapper_shifts_logits_right_by_one() {
    let model = load("dream-tiny");
    let c = cases("dream-tiny");
    let ids = c["input_ids"].to_dtype(DType::U32).unwrap();
    let raw = model.raw_logits(&ids, None).unwrap();
    let shifted = model.logits(&ids, None).unwrap();
    let t = raw.dim(1).unwrap();
    // shifted[:, 0] = raw[:, 0]; shifted[:, i] = raw[:, i - 1] for i ≥ 1.
    assert_eq!(max_diff(&shifted.narrow(1, 0, 1).unwrap(), &raw.narrow(1, 0, 1).unwrap()), 0.0);
    assert_eq!(
        max_diff(&shifted.narrow(1, 1, t - 1).unwrap(), &raw.narrow(1, 0, t - 1).unwrap()),
        0.0
    );
    // The reference's own formulation, cat([raw[:, :1], raw[:, :-1]]), against the stored logits.
    let reference: &Tensor = &c["logits"];
    let expected = Tensor::cat(
        &[reference.narrow(1, 0, 1).unwrap(), reference.narrow(1, 0, t - 1).unwrap()],
        1,
    )
    .unwrap();
    assert!(max_diff(&shifted, &expected) <= TOL);
    assert_eq!(max_diff(&shift_logits(&raw).unwrap(), &shifted), 0.0);
    // And the shift is not the identity on this input.
    assert!(max_diff(&shifted, &raw) > 1e-2);
}
