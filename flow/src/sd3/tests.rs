//! Parity with diffusers 0.42.1 on the tiny random SD3 / SD3.5 checkpoints of
//! `fixtures/sd3-tiny` (forward output and autograd gradients, fixtures/README.md).

use std::collections::HashMap;
use std::path::PathBuf;

use candle_core::{DType, Device, Tensor, Var};
use candle_nn::{VarBuilder, VarMap};

use super::*;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/sd3-tiny")).join(name)
}

fn case(name: &str) -> HashMap<String, Tensor> {
    candle_core::safetensors::load(fixture(name).join("case.safetensors"), &Device::Cpu).unwrap()
}

/// `max |a − b| / max |b|`.
fn rel_err(a: &Tensor, b: &Tensor) -> f32 {
    let diff = (a - b).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
    let scale = b.abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
    diff / scale.max(1e-12)
}

fn frozen(name: &str) -> Sd3Transformer {
    let dir = fixture(name);
    let cfg = read_sd3_config(&dir).unwrap();
    let w = read_sd3_weights(&dir, DType::F32, &Device::Cpu).unwrap();
    Sd3Transformer::new(
        cfg,
        VarBuilder::from_tensors(w, DType::F32, &Device::Cpu),
        &ProjLoader::plain(),
    )
    .unwrap()
}

fn run(model: &Sd3Transformer, c: &HashMap<String, Tensor>, x: &Tensor) -> Tensor {
    model.forward(x, &c["encoder_hidden_states"], &c["pooled_projections"], &c["timestep"]).unwrap()
}

#[test]
fn forward_matches_diffusers_for_sd3_and_sd35() {
    for name in ["sd3-medium-tiny", "sd35-medium-tiny"] {
        let c = case(name);
        let out = run(&frozen(name), &c, &c["hidden_states"]);
        let err = rel_err(&out, &c["output"]);
        // Measured 2.6e-7 (SD3) and 2.9e-7 (SD3.5); the issue asks 1e-4.
        assert!(err < 1e-5, "{name}: relative error {err}");
    }
}

#[test]
fn the_position_grid_is_diffusers_stored_buffer() {
    let dir = fixture("sd35-medium-tiny");
    let cfg = read_sd3_config(&dir).unwrap();
    let w = read_sd3_weights(&dir, DType::F32, &Device::Cpu).unwrap();
    let ours = sincos_2d(
        cfg.width(),
        cfg.pos_embed_max_size,
        cfg.sample_size / cfg.patch_size,
        &Device::Cpu,
    )
    .unwrap();
    let stored = w["pos_embed.pos_embed"].squeeze(0).unwrap();
    assert!(rel_err(&ours, &stored) < 1e-6, "{}", rel_err(&ours, &stored));
}

/// Every weight a `Var`, the input a `Var`: `d (output · R).sum()` against torch autograd for
/// the input and each listed parameter (a path with a fused, graph-cutting kernel would give a
/// zero or wrong gradient here).
#[test]
fn gradients_match_torch_autograd() {
    let cases: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("cases.json")).unwrap()).unwrap();
    for name in ["sd3-medium-tiny", "sd35-medium-tiny"] {
        let dir = fixture(name);
        let cfg = read_sd3_config(&dir).unwrap();
        let weights = read_sd3_weights(&dir, DType::F32, &Device::Cpu).unwrap();
        let varmap = VarMap::new();
        let model = Sd3Transformer::new(
            cfg,
            VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu),
            &ProjLoader::plain(),
        )
        .unwrap();
        for (n, var) in varmap.data().lock().unwrap().iter() {
            var.set(&weights[n]).unwrap();
        }
        let c = case(name);
        let x = Var::from_tensor(&c["hidden_states"]).unwrap();
        let out = run(&model, &c, x.as_tensor());
        let loss = (out * &c["R"]).unwrap().sum_all().unwrap();
        let expected_loss = cases[name]["loss"].as_f64().unwrap() as f32;
        let l = loss.to_scalar::<f32>().unwrap();
        assert!(
            (l - expected_loss).abs() < 1e-4 * expected_loss.abs().max(1.0),
            "{name}: loss {l} vs {expected_loss}"
        );
        let grads = loss.backward().unwrap();
        let gx = grads.get(x.as_tensor()).expect("a gradient for the input");
        let err = rel_err(gx, &c["grad.hidden_states"]);
        assert!(err < 1e-4, "{name}: input gradient, relative error {err}");
        let data = varmap.data().lock().unwrap();
        for p in cases[name]["grad_params"].as_array().unwrap() {
            let p = p.as_str().unwrap();
            let g = grads
                .get(data[p].as_tensor())
                .unwrap_or_else(|| panic!("{name}: no gradient for {p}"));
            let err = rel_err(g, &c[&format!("grad.{p}")]);
            assert!(err < 1e-4, "{name}: gradient of {p}, relative error {err}");
        }
    }
}

#[test]
fn vae_decode_matches_diffusers() {
    let c = case("sd3-vae-tiny");
    let vae = Sd3Vae::from_dir(&fixture("sd3-vae-tiny"), DType::F32, &Device::Cpu).unwrap();
    let image = vae.decode(&c["latents"]).unwrap();
    assert_eq!(image.dims(), c["image"].dims());
    let err = rel_err(&image, &c["image"]);
    assert!(err < 1e-4, "relative error {err}");
}

/// A repo id resolves, offline, to its snapshot in the hub cache (whose files are symlinks to
/// blobs in real caches); an absent repo names the id and the cache.
#[test]
fn a_repo_id_resolves_to_its_snapshot_in_the_hub_cache() {
    let cache_dir = tempfile::tempdir().unwrap();
    let repo = cache_dir.path().join("models--drift-test--sd35-tiny");
    let snapshot = repo.join("snapshots").join("0123abcd");
    std::fs::create_dir_all(snapshot.join("transformer")).unwrap();
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    std::fs::write(repo.join("refs").join("main"), "0123abcd").unwrap();
    std::fs::write(snapshot.join("model_index.json"), "{}").unwrap();
    for f in ["config.json", "diffusion_pytorch_model.safetensors"] {
        std::os::unix::fs::symlink(
            fixture("sd35-medium-tiny").join(f),
            snapshot.join("transformer").join(f),
        )
        .unwrap();
    }
    let cache = hf_hub::Cache::new(cache_dir.path().to_path_buf());
    let dir = resolve_base(std::path::Path::new("drift-test/sd35-tiny"), &cache).unwrap();
    assert_eq!(dir, snapshot);
    assert_eq!(read_sd3_config(&dir).unwrap().dual_attention_layers, vec![0]);
    let err = resolve_base(std::path::Path::new("nobody/absent"), &cache).unwrap_err().to_string();
    assert!(
        err.contains("nobody/absent") && err.contains(&cache_dir.path().display().to_string()),
        "{err}"
    );
}
