//! The bf16 (AMX) copy of a model computes its f32 logits up to bf16 rounding, for both
//! architectures and through the fused `q|k|v` and `gate|up` products (the shared tiny
//! checkpoints of `fixtures/`, with their reference logits). Skipped where the CPU has no AMX,
//! where the copy must be refused instead.

mod common;

use candle_core::Tensor;
use common::{cases, fixture, max_diff};
use drift_core::nn::amx;
use drift_dllm::model::{DiffusionLm, LoadOptions};

fn scale(t: &Tensor) -> f32 {
    t.abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap()
}

#[test]
fn a_bf16_copy_computes_the_reference_logits_up_to_bf16_rounding() {
    for name in ["llada-tiny", "dream-tiny"] {
        let model = DiffusionLm::from_dir(fixture(name), &LoadOptions::frozen()).unwrap();
        if !amx::available() {
            assert!(model.with_bf16_matmuls().is_err(), "{name}: no AMX, the copy must be refused");
            continue;
        }
        let fast = model.with_bf16_matmuls().unwrap();
        assert!(fast.bf16_matmuls() && !model.bf16_matmuls());
        let c = cases(name);
        let want = &c["logits"];
        let exact = model.raw_logits(&c["input_ids"], None).unwrap();
        let got = fast.raw_logits(&c["input_ids"], None).unwrap();
        let (err, f32_err, s) = (max_diff(&got, want), max_diff(&exact, want), scale(want));
        println!("{name}: bf16 max |Δlogit| {err:.3e}, f32 {f32_err:.3e}, logit scale {s:.3}");
        // Rounding both factors to 8 mantissa bits moves each product by at most 2⁻⁸
        // relative; through a few layers that is a few per cent of the logits' scale. A
        // wrong column of a fused product would move them by their whole scale.
        assert!(err <= 0.03 * s, "{name}: bf16 logits off by {err} at scale {s}");
        assert!(err > f32_err, "{name}: the bf16 copy must actually round");
    }
}
