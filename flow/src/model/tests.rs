//! DiT tests: every parameter is reached by the gradient, tracked and untracked paths agree.

use candle_core::{DType, Device, Tensor};
use candle_nn::{VarBuilder, VarMap};
use drift_core::rng::RngKey;
use drift_core::train::{detached_view, AdamWConfig, Grads, OptimConfig, Optimizer, ParamSet};

use super::*;
use crate::pretrain::{flow_matching_loss, FlowMatchingConfig};

/// A fresh model whose every weight is moved off its initialisation by `N(0, 0.05²)` noise
/// keyed by `seed`, so the zero-initialised layers do not hide a path.
fn perturbed(cfg: DitConfig, seed: u64) -> (VarMap, Dit) {
    let vm = VarMap::new();
    let model = Dit::new(cfg, VarBuilder::from_varmap(&vm, DType::F32, &Device::Cpu)).unwrap();
    for (name, var) in ParamSet::all(&vm).iter() {
        let noise =
            RngKey::new(seed).stream(name).normal(var.shape(), DType::F32, &Device::Cpu).unwrap();
        var.set(&(var.as_tensor() + (noise * 0.05).unwrap()).unwrap()).unwrap();
    }
    (vm, model)
}

fn batch(cfg: &DitConfig, b: usize) -> (Tensor, Tensor) {
    let dev = Device::Cpu;
    let x0 =
        RngKey::new(1).normal((b, 3, cfg.image_size, cfg.image_size), DType::F32, &dev).unwrap();
    let ids: Vec<u32> = (0..b * cfg.text_len)
        .map(|i| if i % cfg.text_len < 5 { 1 + (i as u32 % 7) } else { 0 })
        .collect();
    (x0, Tensor::from_vec(ids, (b, cfg.text_len), &dev).unwrap())
}

#[test]
fn every_parameter_receives_a_finite_nonzero_gradient() {
    every_parameter_is_reached(DitConfig::test_tiny());
}

#[test]
fn every_prompt_encoder_parameter_receives_a_finite_nonzero_gradient() {
    every_parameter_is_reached(DitConfig { text_layers: 2, ..DitConfig::test_tiny() });
}

fn every_parameter_is_reached(cfg: DitConfig) {
    let vm = VarMap::new();
    let model = Dit::new(cfg, VarBuilder::from_varmap(&vm, DType::F32, &Device::Cpu)).unwrap();
    let params = ParamSet::all(&vm);
    let mut opt = Optimizer::new(
        OptimConfig {
            adamw: AdamWConfig { lr: 1e-2, ..AdamWConfig::default() },
            ..OptimConfig::default()
        },
        params.clone(),
    )
    .unwrap();
    let (x0, ids) = batch(&cfg, 4);
    let fm = FlowMatchingConfig { prompt_dropout: 0.0, ..FlowMatchingConfig::default() };
    // adaLN-Zero starts every block as the identity (zero gates), so the gradient reaches the
    // gated weights only after the first updates: take two steps, then check all of them.
    let mut grads = Grads::default();
    for step in 0..3 {
        let loss =
            flow_matching_loss(&model, &x0, &ids, &fm, RngKey::new(2).step(step), &[0, 1, 2, 3])
                .unwrap();
        grads = Grads::from_store(&loss.backward().unwrap(), &params, 1.0).unwrap();
        if step < 2 {
            let value = f64::from(loss.to_scalar::<f32>().unwrap());
            assert!(opt.step(value, grads.clone()).unwrap().applied);
        }
    }
    assert_eq!(grads.len(), params.len(), "every parameter has a gradient");
    let encoder = grads.iter().filter(|(name, _)| name.starts_with("text.blocks.")).count();
    assert_eq!(encoder, 4 * 2 * cfg.text_layers, "weights and biases of 4 linears per layer");
    for (name, g) in grads.iter() {
        let n = g.sqr().unwrap().sum_all().unwrap().to_scalar::<f32>().unwrap();
        assert!(n.is_finite() && n > 0.0, "{name}: squared gradient norm {n}");
    }
}

#[test]
fn tracked_and_detached_forwards_agree() {
    let cfg = DitConfig::test_tiny();
    // Move the zero-initialised layers off zero so the comparison covers every path.
    let (vm, model) = perturbed(cfg, 3);
    let view =
        Dit::new(cfg, VarBuilder::from_tensors(detached_view(&vm), DType::F32, &Device::Cpu))
            .unwrap();
    let (x0, ids) = batch(&cfg, 3);
    let sigma = Tensor::new(&[0.2f32, 0.5, 0.9], &Device::Cpu).unwrap();
    let a = model.forward(&x0, &sigma, &ids).unwrap();
    let b = view.forward(&x0, &sigma, &ids).unwrap();
    assert!(a.track_op() && !b.track_op());
    let diff = (a - b)
        .unwrap()
        .abs()
        .unwrap()
        .flatten_all()
        .unwrap()
        .max(0)
        .unwrap()
        .to_scalar::<f32>()
        .unwrap();
    assert!(diff < 1e-5, "max diff {diff}");
    // The null prompt changes the output (the prompt is used).
    let null = view.forward(&x0, &sigma, &view.null_prompt(3).unwrap()).unwrap();
    let gap = (null - view.forward(&x0, &sigma, &ids).unwrap())
        .unwrap()
        .abs()
        .unwrap()
        .mean_all()
        .unwrap();
    assert!(gap.to_scalar::<f32>().unwrap() > 1e-4);
}

#[test]
fn bad_config_is_named() {
    let cfg = DitConfig { patch: 5, ..DitConfig::test_tiny() };
    let vm = VarMap::new();
    let err = Dit::new(cfg, VarBuilder::from_varmap(&vm, DType::F32, &Device::Cpu)).unwrap_err();
    assert!(err.to_string().contains("model.patch"), "{err}");
}

#[test]
fn the_null_prompt_stays_finite_through_the_prompt_encoder() {
    // An all-padding prompt masks every key of the encoder's attention: the softmax must fall
    // back to a uniform average, not a NaN.
    let cfg = DitConfig { text_layers: 2, ..DitConfig::test_tiny() };
    let (_vm, model) = perturbed(cfg, 5);
    let (x0, ids) = batch(&cfg, 2);
    let sigma = Tensor::new(&[0.3f32, 0.7], &Device::Cpu).unwrap();
    let null = model.forward(&x0, &sigma, &model.null_prompt(2).unwrap()).unwrap();
    let sum = null.abs().unwrap().sum_all().unwrap().to_scalar::<f32>().unwrap();
    assert!(sum.is_finite() && sum > 0.0, "{sum}");
    // Swapping two prompt words changes the velocity (the encoder sees order).
    let v = model.forward(&x0, &sigma, &ids).unwrap();
    let mut swapped = ids.to_vec2::<u32>().unwrap();
    for row in &mut swapped {
        row.swap(0, 1);
    }
    let swapped = Tensor::new(swapped, &Device::Cpu).unwrap();
    let gap = (model.forward(&x0, &sigma, &swapped).unwrap() - v)
        .unwrap()
        .abs()
        .unwrap()
        .mean_all()
        .unwrap()
        .to_scalar::<f32>()
        .unwrap();
    assert!(gap > 1e-5, "{gap}");
}
