//! Flow-GRPO on a LoRA'd tiny SD3.5 (the `fixtures/sd3-tiny` transformer and VAE as one
//! diffusers pipeline folder) through the same trainer as the DiT.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use drift_core::rng::RngKey;
use drift_rewards::image::Image;
use drift_samplers::flow::VelocityField;

use super::*;
use crate::grpo::tests::{toy_config, Brightness, ToyTask};
use crate::grpo::{train_flow_grpo_with, FlowGrpoConfig, ImageTask};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/sd3-tiny")).join(name)
}

/// A pipeline folder: `transformer/` (SD3.5 layout, MMDiT-X block 0, QK RMS-norm) and, when
/// `with_vae`, `vae/`.
fn tiny_pipeline(dir: &Path, with_vae: bool) {
    let parts = [("transformer", "sd35-medium-tiny"), ("vae", "sd3-vae-tiny")];
    for (sub, from) in &parts[..if with_vae { 2 } else { 1 }] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
        for f in ["config.json", "diffusion_pytorch_model.safetensors"] {
            std::fs::copy(fixture(from).join(f), dir.join(sub).join(f)).unwrap();
        }
    }
}

/// The toy task's prompts with a fixed random embedding per prompt (the prompt-embedding
/// cache a real run fills from CLIP and T5): text `[7, 32]`, pooled `[24]`, packed.
struct EmbeddedToy(ToyTask);

fn embed(ids: &[u32], dev: &Device) -> Tensor {
    let key = RngKey::new(11).stream("embed").step(u64::from(ids[0]) * 16 + u64::from(ids[1]));
    let text = key.stream("text").normal((1, 7, 32), DType::F32, dev).unwrap();
    let pooled = key.stream("pooled").normal((1, 24), DType::F32, dev).unwrap();
    pack_cond(&text, &pooled).unwrap()
}

impl ImageTask for EmbeddedToy {
    type Prompt = Vec<u32>;
    fn train_prompt(&self, seed: u64, index: u64) -> Vec<u32> {
        self.0.train_prompt(seed, index)
    }
    fn eval_prompts(&self) -> &[Vec<u32>] {
        self.0.eval_prompts()
    }
    fn encode(&self, prompts: &[Vec<u32>], device: &Device) -> crate::Result<Tensor> {
        let rows: Vec<Tensor> = prompts.iter().map(|p| embed(p, device)).collect();
        Ok(Tensor::cat(&rows, 0)?)
    }
    fn caption(&self, p: &Vec<u32>) -> String {
        self.0.caption(p)
    }
    fn strict(&self, p: &Vec<u32>, image: &Image) -> Option<bool> {
        self.0.strict(p, image)
    }
}

fn setup<'a>(init: Option<&'a HashMap<String, Tensor>>, cfg: &FlowGrpoConfig) -> Sd3LoraSetup<'a> {
    Sd3LoraSetup {
        lora: LoraConfig { rank: 4, alpha: 8.0, ..LoraConfig::default() },
        init,
        null: embed(&[0, 0], &Device::Cpu),
        latent_side: 8,
        optim: cfg.optim,
        dtype: DType::F32,
        seed: cfg.run.seed,
    }
}

fn sd3_config(base: &Path) -> FlowGrpoConfig {
    let mut cfg = toy_config(base);
    cfg.guidance = 2.0;
    cfg.optim.adamw.lr = 1e-3;
    cfg.optim.ema = None;
    cfg
}

fn metrics(run: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(run.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|v: &serde_json::Value| v.get("reward/mean").is_some())
        .collect()
}

/// The whole loop (rollouts with CFG through the VAE, rewards, updates, evaluation, saving) on
/// the LoRA'd tiny SD3.5. The adapters start at `B = 0`, so the policy is the reference: the
/// first update's ratio is exactly 1 and its KL exactly 0. The adapter is saved under PEFT's
/// names and loads back into a policy that computes the same velocity.
#[test]
fn lora_sd35_runs_flow_grpo_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("sd35");
    tiny_pipeline(&base, true);
    let cfg = sd3_config(&base);
    let models = load_sd3_lora_models(&base, setup(None, &cfg), &Device::Cpu).unwrap();
    // 2 blocks × the 8 joint-attention projections, minus `to_add_out` in the last block.
    assert_eq!(models.opt.params().len(), 2 * 15);
    let run = dir.path().join("run");
    let task = EmbeddedToy(ToyTask::new());
    let report = train_flow_grpo_with(models, &cfg, "", &task, &Brightness, &run).unwrap();
    assert_eq!(report.run.steps, 2);
    let m = metrics(&run);
    assert_eq!(m.len(), 2);
    assert_eq!(m[0]["ratio/first_update_max_dev"].as_f64(), Some(0.0), "{}", m[0]);
    assert_eq!(m[0]["loss/kl"].as_f64(), Some(0.0), "{}", m[0]);
    assert!(m[1]["loss/kl"].as_f64().unwrap() > 0.0, "the adapter moved: {}", m[1]);

    let model_dir = run.join("model");
    let raw = candle_core::safetensors::load(model_dir.join(ADAPTER_FILE), &Device::Cpu).unwrap();
    assert!(raw.contains_key("base_model.model.transformer_blocks.0.attn.to_q.lora_A.weight"));
    assert!(raw.contains_key("base_model.model.transformer_blocks.1.attn.add_v_proj.lora_B.weight"));
    let (lora, weights) = load_lora(&model_dir, &Device::Cpu).unwrap();
    assert_eq!((lora.rank, lora.alpha), (4, 8.0));
    for (name, t) in &weights {
        let saved = &raw[&format!("base_model.model.{name}")];
        assert_eq!(
            t.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
            saved.flatten_all().unwrap().to_vec1::<f32>().unwrap()
        );
    }
    // Reloaded, the adapter changes the velocity (B ≠ 0 after training), and saving it again
    // writes the same bytes' values.
    let reloaded = load_sd3_lora_models(&base, setup(Some(&weights), &cfg), &Device::Cpu).unwrap();
    let x = RngKey::new(3).normal((2, 16, 8, 8), DType::F32, &Device::Cpu).unwrap();
    let sigma = Tensor::new(&[0.7f32, 0.3], &Device::Cpu).unwrap();
    let cond = task.encode(&task.eval_prompts()[..2], &Device::Cpu).unwrap();
    let v_policy = reloaded.view.velocity(&x, &sigma, &cond).unwrap();
    let v_ref = reloaded.reference.velocity(&x, &sigma, &cond).unwrap();
    let moved =
        (&v_policy - &v_ref).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
    assert!(moved > 0.0);
    let again = dir.path().join("again");
    (reloaded.save)(&again, &reloaded.opt).unwrap();
    let (_, w2) = load_lora(&again, &Device::Cpu).unwrap();
    for (name, t) in &weights {
        assert_eq!(
            t.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
            w2[name].flatten_all().unwrap().to_vec1::<f32>().unwrap(),
            "{name}"
        );
    }
}

/// A target list that names no layer is refused before any work.
#[test]
fn a_lora_target_that_matches_nothing_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    tiny_pipeline(dir.path(), false);
    let cfg = sd3_config(dir.path());
    let mut s = setup(None, &cfg);
    s.lora.target_modules = vec!["attn.to_qq".into()];
    let err = load_sd3_lora_models(dir.path(), s, &Device::Cpu).err().unwrap().to_string();
    assert!(err.contains("target_modules") && err.contains("to_qq"), "{err}");
}

/// Held-out mean brightness of the images (the latents' first three channels, `tanh`-squashed:
/// the fixture's random VAE decodes every latent to nearly the same brightness) before and
/// after 16 Flow-GRPO iterations of the LoRA'd tiny SD3.5 with `reward` (optionally shuffled within groups: the null control).
fn learn_brightness(
    reward: &crate::grpo::ImageReward<Vec<u32>>,
    shuffle_rewards: bool,
) -> (f64, f64) {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("sd35");
    tiny_pipeline(&base, false);
    let mut cfg = FlowGrpoConfig {
        prompts_per_step: 2,
        group_size: 6,
        micro_batch: 12,
        shuffle_rewards,
        ..sd3_config(&base)
    };
    cfg.run.steps = 16;
    cfg.run.eval_every = 100;
    cfg.optim.adamw.lr = 2e-2;
    cfg.optim.adamw.eps = 1e-8;
    cfg.loss.kl = None;
    cfg.loss.surrogate = drift_core::loss::Surrogate::PpoClip { eps_low: 0.2, eps_high: 0.2 };
    // The toy reward is the images' global brightness, which the attention adapters of a random
    // 2-block model barely reach (seeds 0–3: real − null 0.001–0.010); the output projection's
    // and final modulation's adapters reach it directly.
    let mut s = setup(None, &cfg);
    s.lora.target_modules.extend(["proj_out".to_string(), "norm_out.linear".into()]);
    let models = load_sd3_lora_models(&base, s, &Device::Cpu).unwrap();
    let task = EmbeddedToy(ToyTask::new());
    let r = train_flow_grpo_with(models, &cfg, "", &task, reward, &dir.path().join("run")).unwrap();
    (r.base.reward_mean.abs(), r.trained.reward_mean.abs())
}

/// The learnability guard of the LoRA path: only the adapters train, through the MMDiT and
/// CFG. Mean brightness rises above its shuffled-reward null within 16 iterations and
/// falls when the reward's direction is flipped (measured at seeds 0–3, lr 2e-2: real − null
/// 0.036–0.091, flipped − base −0.026 to −0.132).
#[test]
fn lora_learns_brightness_above_its_shuffled_null_and_unlearns_it_when_flipped() {
    let (base, real) = learn_brightness(&Brightness, false);
    let (null_base, null) = learn_brightness(&Brightness, true);
    let (_, flipped) = learn_brightness(&crate::grpo::tests::Darkness, false);
    assert!((base - null_base).abs() < 1e-6, "same base and noise: {base} vs {null_base}");
    assert!(
        real > null + 0.02 && real > base + 0.02,
        "brightness: base {base:.4}, real {real:.4}, shuffled null {null:.4}, flipped {flipped:.4}"
    );
    assert!(flipped < base - 0.02, "flipped reward: base {base:.4} → {flipped:.4}");
}

/// The GPU path's dtype plumbing, run on the CPU: with the base in bf16 (adapters f32, latents
/// and conditioning f32) the velocity is the f32 model's within bf16 rounding, and comes back in
/// f32.
#[test]
fn a_bf16_base_gives_the_f32_velocity_within_bf16_rounding() {
    let dir = tempfile::tempdir().unwrap();
    tiny_pipeline(dir.path(), false);
    let cfg = sd3_config(dir.path());
    let velocity = |dtype: DType| {
        let s = Sd3LoraSetup { dtype, ..setup(None, &cfg) };
        let m = load_sd3_lora_models(dir.path(), s, &Device::Cpu).unwrap();
        let x = RngKey::new(3).normal((2, 16, 8, 8), DType::F32, &Device::Cpu).unwrap();
        let sigma = Tensor::new(&[0.7f32, 0.3], &Device::Cpu).unwrap();
        let task = EmbeddedToy(ToyTask::new());
        let cond = task.encode(&task.eval_prompts()[..2], &Device::Cpu).unwrap();
        m.policy.velocity(&x, &sigma, &cond).unwrap()
    };
    let (full, half) = (velocity(DType::F32), velocity(DType::BF16));
    assert_eq!(half.dtype(), DType::F32);
    let diff =
        (&full - &half).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
    let scale = full.abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
    assert!(diff > 0.0 && diff < 0.05 * scale, "bf16 vs f32: max diff {diff}, scale {scale}");
    // And a bf16 base trains: the f32 adapters get gradients through the bf16 layers.
    let s = Sd3LoraSetup { dtype: DType::BF16, ..setup(None, &cfg) };
    let m = load_sd3_lora_models(dir.path(), s, &Device::Cpu).unwrap();
    let run = dir.path().join("run");
    let task = EmbeddedToy(ToyTask::new());
    train_flow_grpo_with(m, &cfg, "", &task, &Brightness, &run).unwrap();
    let last = metrics(&run).pop().unwrap();
    assert!(last["grad/norm"].as_f64().unwrap() > 0.0, "{last}");
}
