//! Training-path checks: every trainable parameter of both architectures gets a finite,
//! non-zero gradient from the pretraining loss, and the tracked (training) and detached
//! (inference, fused-kernel) forwards agree.

mod common;

use candle_core::{DType, Device, Tensor};
use common::{cases, fixture, max_diff};
use drift_core::rng::RngKey;
use drift_dllm::model::{DiffusionLm, LoadOptions, TinySpec, VocabSpec};
use drift_dllm::pretrain::masked_diffusion_loss;

fn check_every_var_gets_a_gradient(model: &DiffusionLm, ids: &Tensor, expected_vars: usize) {
    let (b, t) = ids.dims2().unwrap();
    let prompt_lens: Vec<usize> = (0..b).map(|r| r * 3).collect();
    let completion = Tensor::ones((b, t), DType::U8, &Device::Cpu).unwrap();
    let key = RngKey::new(5).step(1);
    let loss = masked_diffusion_loss(model, ids, &prompt_lens, &completion, key).unwrap();
    let value = loss.to_scalar::<f32>().unwrap();
    assert!(value.is_finite() && value > 0.0, "loss {value}");
    let grads = loss.backward().unwrap();

    let vars = model.varmap().expect("trainable model").data().lock().unwrap().clone();
    assert_eq!(vars.len(), expected_vars, "every checkpoint tensor should be a Var");
    let mut names: Vec<&String> = vars.keys().collect();
    names.sort();
    for name in names {
        let g =
            grads.get(vars[name].as_tensor()).unwrap_or_else(|| panic!("no gradient for {name}"));
        let g: Vec<f32> = g.flatten_all().unwrap().to_vec1().unwrap();
        assert!(g.iter().all(|x| x.is_finite()), "non-finite gradient for {name}");
        let norm: f32 = g.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!(norm > 0.0, "zero gradient for {name}");
    }
}

#[test]
fn every_llada_parameter_gets_a_finite_nonzero_gradient() {
    let model = DiffusionLm::from_dir(fixture("llada-tiny"), &LoadOptions::trainable()).unwrap();
    let ids = cases("llada-tiny")["input_ids"].to_dtype(DType::U32).unwrap();
    check_every_var_gets_a_gradient(&model, &ids, 2 + 2 * 9 + 1);
}

#[test]
fn every_dream_parameter_gets_a_finite_nonzero_gradient() {
    let model = DiffusionLm::from_dir(fixture("dream-tiny"), &LoadOptions::trainable()).unwrap();
    let ids = cases("dream-tiny")["input_ids"].to_dtype(DType::U32).unwrap();
    check_every_var_gets_a_gradient(&model, &ids, 3 + 2 * 12);
}

fn tiny_gqa() -> TinySpec {
    TinySpec {
        d_model: 32,
        n_layers: 2,
        n_heads: 4,
        n_kv_heads: 2,
        mlp_hidden: 48,
        max_seq_len: 16,
    }
}

const VOCAB: VocabSpec = VocabSpec { vocab_size: 20, mask_id: 1, pad_id: 0, bos_id: 2, eos_id: 3 };

#[test]
fn freshly_initialised_gqa_models_train_every_parameter() {
    let ids = RngKey::new(9).uniform((3, 10), DType::F32, &Device::Cpu).unwrap();
    let ids = (ids * 16.0)
        .unwrap()
        .floor()
        .unwrap()
        .affine(1.0, 4.0)
        .unwrap()
        .to_dtype(DType::U32)
        .unwrap();
    for cfg in [tiny_gqa().llada(VOCAB), tiny_gqa().dream(VOCAB)] {
        let model = DiffusionLm::init(cfg, RngKey::new(1), &LoadOptions::trainable()).unwrap();
        let n = model.weights().len();
        check_every_var_gets_a_gradient(&model, &ids, n);
    }
}

#[test]
fn tracked_and_detached_forwards_agree() {
    for name in ["llada-tiny", "dream-tiny"] {
        let trainable = DiffusionLm::from_dir(fixture(name), &LoadOptions::trainable()).unwrap();
        let detached = trainable.detached().unwrap();
        assert!(detached.varmap().is_none());
        let c = cases(name);
        let ids = &c["input_ids"];
        let tracked = trainable.raw_logits(ids, None).unwrap();
        let plain = detached.raw_logits(ids, None).unwrap();
        let diff = max_diff(&tracked, &plain);
        println!("{name}: tracked vs detached max |Δlogit| = {diff:.3e}");
        assert!(diff <= 1e-5, "{name}: {diff:e}");
        // The detached view has no graph to any Var ...
        assert!(!plain.track_op());
        assert!(tracked.track_op());
        // ... yet shares storage: an in-place update of a Var is seen by the view.
        let vars = trainable.varmap().unwrap().all_vars();
        for v in &vars {
            v.set(&(v.as_tensor() * 1.5).unwrap()).unwrap();
        }
        let updated_tracked = trainable.raw_logits(ids, None).unwrap();
        let updated_plain = detached.raw_logits(ids, None).unwrap();
        assert!(max_diff(&updated_plain, &plain) > 1e-3, "{name}: the view missed the update");
        assert!(max_diff(&updated_plain, &updated_tracked) <= 1e-4);
    }
}

#[test]
fn padded_attention_masks_also_agree_between_paths() {
    let trainable =
        DiffusionLm::from_dir(fixture("dream-tiny"), &LoadOptions::trainable()).unwrap();
    let c = cases("dream-tiny");
    let (ids, mask) = (&c["input_ids_padded"], &c["attention_mask_padded"]);
    let a = trainable.raw_logits(ids, Some(mask)).unwrap();
    let b = trainable.detached().unwrap().raw_logits(ids, Some(mask)).unwrap();
    assert!(max_diff(&a, &b) <= 1e-5);
    assert!(max_diff(&a, &c["logits_padded"]) <= 1e-5);
}

#[test]
fn a_few_sgd_steps_on_the_objective_lower_it() {
    use candle_nn::Optimizer;
    let tok = drift_dllm::tokenizer::CharTokenizer::ascii();
    let text = ["abcabcabcabc", "xyzxyzxyzxyz", "abcabcabcabc", "xyzxyzxyzxyz"];
    let ids: Vec<Vec<u32>> = text.iter().map(|s| tok.encode(s).unwrap()).collect();
    let ids = Tensor::new(ids, &Device::Cpu).unwrap();
    let ones = Tensor::ones(ids.dims(), DType::U8, &Device::Cpu).unwrap();
    let cfg = tiny_gqa().dream(tok.vocab_spec());
    let model = DiffusionLm::init(cfg, RngKey::new(8), &LoadOptions::trainable()).unwrap();
    let mut sgd = candle_nn::SGD::new(model.varmap().unwrap().all_vars(), 0.5).unwrap();
    // The same key every step: the same masks, so the values are comparable.
    let key = RngKey::new(1);
    let loss = |m: &DiffusionLm| masked_diffusion_loss(m, &ids, &[0; 4], &ones, key).unwrap();
    let before = loss(&model).to_scalar::<f32>().unwrap();
    for _ in 0..30 {
        sgd.backward_step(&loss(&model)).unwrap();
    }
    let after = loss(&model).to_scalar::<f32>().unwrap();
    assert!(after < 0.7 * before, "loss {before} -> {after}");
}
