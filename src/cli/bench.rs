//! `drift bench`: throughput of the shipped models on this machine, one JSON line per case
//! (the same measurements as `cargo bench`, without building the bench profile).

use std::path::Path;

use anyhow::Result;
use candle_core::{DType, Device, Tensor};
use drift::core::bench::{matmul_gflops, median_seconds};
use drift::core::rng::RngKey;
use drift::dllm::model::{DiffusionLm, LoadOptions};
use drift::flow::grpo::{ImageTask, ShapesTask};
use drift::flow::model::{load_dit_frozen, load_dit_trainable};
use drift::flow::pretrain::{flow_matching_loss, FlowMatchingConfig};
use drift::samplers::flow::{rollout_sde, sample_ode, RolloutConfig, Schedule, ScheduleConfig};
use serde_json::json;

/// The cases `drift bench` knows.
pub const CASES: &[&str] = &["matmul", "rng", "dllm", "decode_cache", "flow", "branch", "sd3"];

/// Runs `cases` (all when empty) with `iters` timed repetitions each on `dev` (each timed run
/// ends with a device synchronisation, so GPU times include the queued kernels).
pub fn run(cases: &[String], iters: usize, dev: &Device) -> Result<()> {
    let all: Vec<String> = CASES.iter().map(|c| c.to_string()).collect();
    let cases = if cases.is_empty() { &all } else { cases };
    for c in cases {
        match c.as_str() {
            "matmul" => matmul(dev)?,
            "rng" => rng(iters, dev)?,
            "dllm" => dllm(iters, dev)?,
            "flow" => flow(iters, dev)?,
            "branch" => branch(iters, dev)?,
            "sd3" => sd3(iters, dev)?,
            "decode_cache" => decode_cache(iters, dev)?,
            other => {
                return Err(super::usage(format!(
                    "unknown bench case {other:?}: expected one of {CASES:?}"
                )))
            }
        }
    }
    Ok(())
}

fn matmul(dev: &Device) -> Result<()> {
    let n = if dev.is_cpu() { 1024 } else { 4096 };
    let gflops = matmul_gflops(n, dev)?;
    let device = format!("{:?}", dev.location());
    outln!(
        "{}",
        json!({"case": "matmul", "n": n, "dtype": "f32", "gflops": gflops, "device": device})
    );
    if dev.is_cpu() && drift::core::nn::amx::available() {
        matmul_bf16_amx()?;
    }
    Ok(())
}

/// `x Wᵀ` through [`drift::core::nn::amx`]'s bf16 tiles at the 1024³ size and at the shapes of
/// batch-1 dual-cache decoding on the 50 M model (a 32-token block through a 512 → 2048 and a
/// 2048 → 512 projection), beside candle's f32 product of the same shape.
fn matmul_bf16_amx() -> Result<()> {
    use drift::core::nn::amx::PackedBf16;
    let dev = Device::Cpu;
    for (m, k, n) in [(1024, 1024, 1024), (32, 512, 2048), (32, 2048, 512), (192, 512, 2048)] {
        let x = Tensor::randn(0f32, 1.0, (m, k), &dev)?;
        let w = Tensor::randn(0f32, 1.0, (n, k), &dev)?;
        let packed = PackedBf16::pack(&w)?;
        let xs = x.flatten_all()?.to_vec1::<f32>()?;
        let reps = (2e10 / (2 * m * k * n) as f64).ceil() as usize;
        let bf16 = median_seconds(5, || -> Result<()> {
            for _ in 0..reps {
                std::hint::black_box(packed.matmul(&xs, m)?);
            }
            Ok(())
        }) / reps as f64;
        let wt = w.t()?;
        let f32s = median_seconds(5, || -> Result<()> {
            for _ in 0..reps {
                std::hint::black_box(x.matmul(&wt)?);
            }
            Ok(())
        }) / reps as f64;
        let flops = (2 * m * k * n) as f64;
        outln!(
            "{}",
            json!({"case": "matmul", "m": m, "k": k, "n": n, "dtype": "bf16 (AMX)",
                   "gflops": flops / bf16 / 1e9, "f32_gflops": flops / f32s / 1e9,
                   "threads": candle_core::utils::get_num_threads()})
        );
    }
    Ok(())
}

/// The keyed noise of one Flow-GRPO rollout step: 64 rows (8 prompts × 8 images) × 3 072
/// standard normals, drawn on the host and uploaded to `dev` as f32.
fn rng(iters: usize, dev: &Device) -> Result<()> {
    let (rows, cols) = (64, 3 * 32 * 32);
    let ids: Vec<u64> = (0..rows as u64).collect();
    let key = RngKey::new(0).stream("bench_noise");
    let secs = median_seconds(iters.max(5), || -> Result<()> {
        key.normal_rows(&ids, cols, DType::F32, dev)?;
        Ok(dev.synchronize()?)
    });
    let n = rows * cols;
    let line = json!({
        "case": "rng", "draw": "normal_rows", "rows": rows, "cols": cols, "seconds": secs,
        "normals_per_s": n as f64 / secs, "threads": candle_core::utils::get_num_threads(),
    });
    outln!("{line}");
    Ok(())
}

/// The shipped code dLLM: one frozen forward over 16 rows × 200 positions (a rollout step)
/// and one tracked forward + backward (a training micro-batch).
fn dllm(iters: usize, dev: &Device) -> Result<()> {
    let dir = Path::new("examples/checkpoints/dllm-code-v3");
    super::existing_dir(dir, "the shipped dLLM")?;
    let (b, t) = (16, 200);
    let ids = (RngKey::new(3).uniform((b, t), DType::F32, dev)? * 90.0)?
        .floor()?
        .affine(1.0, 4.0)?
        .to_dtype(DType::U32)?;
    for tracked in [false, true] {
        let opts = if tracked { LoadOptions::trainable() } else { LoadOptions::frozen() };
        let opts = LoadOptions { device: dev.clone(), ..opts };
        let model = DiffusionLm::from_dir(dir, &opts)?;
        let secs = median_seconds(iters, || -> Result<()> {
            let logits = model.raw_logits(&ids, None)?;
            if tracked {
                logits.sqr()?.mean_all()?.backward()?;
            }
            Ok(dev.synchronize()?)
        });
        let line = json!({
            "case": "dllm", "model": dir.display().to_string(), "params": model.num_parameters(),
            "mode": if tracked { "forward+backward" } else { "forward" },
            "batch": b, "seq_len": t, "seconds": secs, "tokens_per_s": (b * t) as f64 / secs,
        });
        outln!("{line}");
    }
    Ok(())
}

/// The shipped shapes DiT: 32 images with the 10-step ODE and the 10-step Flow-GRPO SDE.
fn flow(iters: usize, dev: &Device) -> Result<()> {
    let dir = Path::new("examples/checkpoints/flow-shapes-v2");
    super::existing_dir(dir, "the shipped DiT")?;
    let model = load_dit_frozen(dir, dev)?;
    let task = ShapesTask::new()?;
    let prompts = &task.eval_prompts()[..32];
    let cond = task.encode(prompts, dev)?;
    let mc = *model.config();
    let x = Tensor::randn(0f32, 1.0, (32, mc.channels, mc.image_size, mc.image_size), dev)?;
    let schedule = Schedule::new(&ScheduleConfig::default())?;
    let rows: Vec<u64> = (0..32).collect();
    let ode = median_seconds(iters, || -> Result<()> {
        sample_ode(&model, &x, &cond, &schedule, None)?;
        Ok(dev.synchronize()?)
    });
    let cfg = RolloutConfig::default();
    let sde = median_seconds(iters, || -> Result<()> {
        rollout_sde(&model, &x, &cond, &schedule, &cfg, None, RngKey::new(0), &rows)?;
        Ok(dev.synchronize()?)
    });
    for (sampler, secs) in [("ode", ode), ("flow_grpo_sde", sde)] {
        let line = json!({
            "case": "flow", "model": dir.display().to_string(), "sampler": sampler, "steps": 10,
            "batch": 32, "seconds": secs, "images_per_s": 32.0 / secs,
            "model_evals_per_s": 320.0 / secs,
        });
        outln!("{line}");
    }
    flow_train_step(dir, iters, dev)
}

/// One pretraining step's forward and backward of the flow-matching loss (batch 64, the
/// shipped `pretrain_flow.toml`), the optimizer step excluded.
fn flow_train_step(dir: &Path, iters: usize, dev: &Device) -> Result<()> {
    let (model, _varmap) = load_dit_trainable(dir, dev)?;
    let task = ShapesTask::new()?;
    let b = 64;
    let prompts: Vec<_> = task.eval_prompts().iter().cycle().take(b).cloned().collect();
    let ids = task.encode(&prompts, dev)?;
    let mc = *model.config();
    let x0 = Tensor::randn(0f32, 1.0, (b, mc.channels, mc.image_size, mc.image_size), dev)?;
    let rows: Vec<u64> = (0..b as u64).collect();
    let fm = FlowMatchingConfig::default();
    let secs = median_seconds(iters, || -> Result<()> {
        flow_matching_loss(&model, &x0, &ids, &fm, RngKey::new(0), &rows)?.backward()?;
        Ok(dev.synchronize()?)
    });
    let line = json!({
        "case": "flow", "model": dir.display().to_string(), "mode": "train_step",
        "batch": b, "seconds": secs, "images_per_s": b as f64 / secs,
    });
    outln!("{line}");
    Ok(())
}

/// One RL iteration (rollout with the GenEval-style reward, then one update) of Flow-GRPO and of
/// the BranchGRPO presets from the shipped DiT, 16 prompts × 8 final images each: model
/// evaluations (one model pass over one image at one step; policy and reference counted),
/// trained actions and the median wall time over `iters` iterations after one warm-up, with the
/// speed-up over Flow-GRPO with the SDE on every step (the paper's baseline).
fn branch(iters: usize, dev: &Device) -> Result<()> {
    use drift::core::train::{Optimizer, ParamSet};
    use drift::flow::branch::{sample_tree_batch, update_edges};
    use drift::flow::grpo::{sample_batch, shapes_reward, update, FlowGrpoConfig};
    use std::time::Instant;
    let presets = [
        ("flow_grpo_all_steps", FlowGrpoConfig::flow_grpo_all_steps()),
        ("flow_grpo (default: SDE on steps 0-2)", FlowGrpoConfig::default()),
        ("branch_grpo", FlowGrpoConfig::branch_grpo()),
        ("branch_grpo_pruned", FlowGrpoConfig::branch_grpo_pruned()),
        ("branch_grpo_mix", FlowGrpoConfig::branch_grpo_mix()),
    ];
    let task = ShapesTask::new()?;
    let mut baseline = None;
    for (name, cfg) in presets {
        super::existing_dir(&cfg.base, "the shipped DiT")?;
        let reward = shapes_reward(&cfg.rewards)?;
        let reference = load_dit_frozen(&cfg.base, dev)?;
        let schedule = Schedule::new(&cfg.schedule)?;
        let mut runs = Vec::new();
        let mut counts = (0, 0, 0);
        for rep in 0..=iters.max(1) {
            // Every repetition starts from the base weights: the same batch, masks and work.
            let (policy, varmap) = load_dit_trainable(&cfg.base, dev)?;
            let mut opt = Optimizer::new(cfg.optim, ParamSet::all(&varmap))?;
            let start = Instant::now();
            let (rollout_evals, r) = match &cfg.branch {
                None => {
                    let b = sample_batch(&policy, &task, reward.as_ref(), &cfg, &schedule, 0)?;
                    let rollout_s = start.elapsed().as_secs_f64();
                    let rows: Vec<usize> = (0..b.len()).collect();
                    let r = update(&policy, &reference, &b, &rows, &cfg, &schedule, &mut opt)?;
                    // One model pass per image per step (twice under guidance).
                    let per_call = if cfg.guidance != 1.0 { 2 } else { 1 };
                    (b.len() * cfg.schedule.steps * per_call, (rollout_s, r))
                }
                Some(branch) => {
                    let b = sample_tree_batch(
                        &policy,
                        &task,
                        reward.as_ref(),
                        &cfg,
                        branch,
                        &schedule,
                        0,
                    )?;
                    let rollout_s = start.elapsed().as_secs_f64();
                    let r =
                        update_edges(&policy, &reference, &b, &b.kept, &cfg, &schedule, &mut opt)?;
                    (b.tree.evaluations, (rollout_s, r))
                }
            };
            dev.synchronize()?;
            let total = start.elapsed().as_secs_f64();
            let (rollout_s, report) = r;
            counts =
                (rollout_evals, report.cost.image_evaluations, report.diagnostics.actions as usize);
            if rep > 0 {
                runs.push((total, rollout_s));
            }
        }
        runs.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (secs, rollout_s) = runs[runs.len() / 2];
        let base = *baseline.get_or_insert(secs);
        let line = json!({
            "case": "branch", "preset": name, "prompts": cfg.prompts_per_step,
            "images_per_prompt": cfg.group_size,
            "tree": cfg.branch.as_ref().map(|b| b.shape()),
            "rollout_model_evals": counts.0, "update_model_evals": counts.1,
            "trained_actions": counts.2, "rollout_s": rollout_s, "update_s": secs - rollout_s,
            "seconds": secs, "speedup_vs_flow_grpo_all_steps": base / secs,
            "threads": candle_core::utils::get_num_threads(),
        });
        outln!("{line}");
    }
    Ok(())
}

/// Peak resident memory of this process in bytes (Linux `VmHWM`), if readable.
fn peak_rss_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb = s.lines().find(|l| l.starts_with("VmHWM:"))?.split_whitespace().nth(1)?;
    kb.parse::<u64>().ok().map(|k| k * 1024)
}

/// One Flow-GRPO iteration of a randomly initialised SD3.5 MMDiT with LoRA (flow_grpo's
/// setup): rollouts of `G` images for one prompt with CFG through the VAE, the JPEG reward,
/// then one update over the trained steps with the adapters only. On a GPU (or with
/// `DRIFT_BENCH_SD3=sd35-medium`) the full SD3.5-Medium config at 512² (latent 64), LoRA r 32,
/// group 8, text 333 tokens, bf16 on CUDA; on the CPU by default a small config of the same
/// layout. No weights are read: the base and the VAE are random.
fn sd3(iters: usize, dev: &Device) -> Result<()> {
    use candle_nn::{VarBuilder, VarMap};
    use drift::core::train::detached_view;
    use drift::flow::grpo::{sample_batch, text_reward, update, FlowGrpoConfig, RewardTerm};
    use drift::flow::grpo::{TextPrompt, TextPromptTask};
    use drift::flow::sd3::{
        sd3_lora_models, EmbeddedTask, LoraConfig, ProjLoader, PromptEmbeddings, Sd3Config,
        Sd3LoraSetup, Sd3Transformer, Sd3Vae, VaeConfig,
    };
    use std::time::Instant;
    let full = !dev.is_cpu() || std::env::var("DRIFT_BENCH_SD3").as_deref() == Ok("sd35-medium");
    let (cfg, vae_cfg, latent, group, text_len, rank) = if full {
        (Sd3Config::sd35_medium(), VaeConfig::default(), 64, 8, 333, 32)
    } else {
        let small = Sd3Config {
            num_layers: 4,
            num_attention_heads: 4,
            attention_head_dim: 32,
            caption_projection_dim: 128,
            joint_attention_dim: 256,
            pooled_projection_dim: 64,
            pos_embed_max_size: 32,
            sample_size: 32,
            dual_attention_layers: vec![0, 1],
            qk_norm: Some("rms_norm".into()),
            ..Sd3Config::default()
        };
        let vae = VaeConfig {
            block_out_channels: vec![32, 64],
            norm_num_groups: 8,
            ..VaeConfig::default()
        };
        (small, vae, 16, 4, 32, 8)
    };
    let dtype = if dev.is_cuda() { DType::BF16 } else { DType::F32 };
    // Random base weights as plain tensors (the VarMap only draws them).
    let base = {
        let vm = VarMap::new();
        Sd3Transformer::new(
            cfg.clone(),
            VarBuilder::from_varmap(&vm, dtype, dev),
            &ProjLoader::plain(),
        )?;
        detached_view(&vm)
    };
    let vae = {
        let vm = VarMap::new();
        let v = Sd3Vae::new(vae_cfg, VarBuilder::from_varmap(&vm, dtype, dev))?;
        std::sync::Arc::new(v)
    };
    let prompt = |t: &str| TextPrompt { text: t.into(), category: None };
    let task = TextPromptTask::new(
        vec![prompt("a photo of a red bench")],
        vec![prompt("a photo of two cats")],
    )?;
    let key = RngKey::new(0);
    let names: Vec<String> =
        task.train_prompts().iter().chain(task.eval_prompts()).map(|p| p.text.clone()).collect();
    let (j, p) = (cfg.joint_attention_dim, cfg.pooled_projection_dim);
    let emb = PromptEmbeddings::from_tensors(
        &names,
        (
            &key.stream("t").normal((names.len(), text_len, j), DType::F32, dev)?,
            &key.stream("p").normal((names.len(), p), DType::F32, dev)?,
        ),
        (
            &key.stream("nt").normal((1, text_len, j), DType::F32, dev)?,
            &key.stream("np").normal((1, p), DType::F32, dev)?,
        ),
    )?;
    let null = emb.null().clone();
    let train = task.train_prompts().to_vec();
    let task = EmbeddedTask::new(task, emb, &train)?;
    let mut fcfg = FlowGrpoConfig::flow_grpo_sd35();
    fcfg.prompts_per_step = 1;
    fcfg.group_size = group;
    fcfg.micro_batch = if full { 2 } else { group };
    fcfg.rewards = vec![RewardTerm::named("jpeg_compressibility", 1.0)];
    let reward = text_reward(&fcfg.rewards)?;
    let schedule = Schedule::new(&fcfg.schedule)?;
    let mut runs = Vec::new();
    let mut evals = (0, 0);
    for rep in 0..=iters.max(1) {
        let setup = Sd3LoraSetup {
            lora: LoraConfig { rank, alpha: 2.0 * rank as f64, ..LoraConfig::default() },
            init: None,
            null: null.clone(),
            latent_side: latent,
            optim: fcfg.optim_over_run(),
            dtype,
            seed: 0,
        };
        let mut m = sd3_lora_models(cfg.clone(), base.clone(), Some(vae.clone()), setup, dev)?;
        let start = Instant::now();
        let b = sample_batch(&m.policy, &task, reward.as_ref(), &fcfg, &schedule, 0)?;
        dev.synchronize()?;
        let rollout_s = start.elapsed().as_secs_f64();
        let rows: Vec<usize> = (0..b.len()).collect();
        let r = update(&m.policy, &m.reference, &b, &rows, &fcfg, &schedule, &mut m.opt)?;
        dev.synchronize()?;
        evals = (b.rollout.evaluations, r.cost.image_evaluations);
        if rep > 0 {
            runs.push((start.elapsed().as_secs_f64(), rollout_s));
        }
    }
    runs.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (secs, rollout_s) = runs[runs.len() / 2];
    let line = json!({
        "case": "sd3", "config": if full { "sd35-medium" } else { "small" },
        "layers": cfg.num_layers, "width": cfg.width(), "latent": latent,
        "image_side": latent * 8, "group": group, "text_tokens": text_len, "lora_rank": rank,
        "dtype": format!("{dtype:?}"), "micro_batch": fcfg.micro_batch,
        "rollout_calls": evals.0, "update_image_evals": evals.1,
        "rollout_s": rollout_s, "update_s": secs - rollout_s, "seconds": secs,
        "peak_rss_bytes": peak_rss_bytes(),
        "threads": candle_core::utils::get_num_threads(),
    });
    outln!("{line}");
    Ok(())
}

/// Semi-AR decoding of one prompt on a random LLaDA and a random Dream of the `small-50m` size
/// (d 512, 12 layers, the ASCII vocabulary): prompt 64, gen 128, block 32, 128 steps, greedy
/// low-confidence, with no cache and with Fast-dLLM's prefix and dual caches (drift's,
/// `DecodeConfig.kv_cache`; Dream's cached decoding commits each block's first position at its
/// recording pass, as Fast-dLLM's Dream block decoder does): median wall time, forward passes,
/// and the speed-up over no cache. The LLaDA checkpoint is saved to
/// `runs/bench/llada-small-50m` so `benches/peer/decode_cache.py` times Fast-dLLM's own code
/// on it, line for line.
fn decode_cache(iters: usize, dev: &Device) -> Result<()> {
    use drift::dllm::model::TinySize;
    use drift::dllm::tokenizer::CharTokenizer;
    let tok = CharTokenizer::ascii();
    let spec = TinySize::Small50M.spec();
    let opts = LoadOptions { device: dev.clone(), ..LoadOptions::frozen() };
    let llada = DiffusionLm::init(spec.llada(tok.vocab_spec()), RngKey::new(1), &opts)?;
    // The same checkpoint for the PyTorch peer (`benches/peer/decode_cache.py`).
    let saved = Path::new("runs/bench/llada-small-50m");
    if !saved.join("model.safetensors").is_file() {
        llada.save_pretrained(saved)?;
    }
    decode_cache_modes("random llada small-50m", &llada, iters, dev)?;
    drop(llada);
    let dream = DiffusionLm::init(spec.dream(tok.vocab_spec()), RngKey::new(1), &opts)?;
    decode_cache_modes("random dream small-50m", &dream, iters, dev)
}

/// [`decode_cache`]'s three modes on one model, one JSON line each; where the CPU has AMX,
/// the same three again with the linear layers in bf16 ([`DiffusionLm::with_bf16_matmuls`]),
/// each line saying how many generated tokens equal the f32 decode's.
fn decode_cache_modes(name: &str, model: &DiffusionLm, iters: usize, dev: &Device) -> Result<()> {
    use drift::samplers::dllm::{decode, DecodeBatch, DecodeConfig, KvCacheMode};
    let prompt: Vec<u32> = (0..64u32).map(|i| 4 + (i * 7) % 90).collect();
    let prompts = vec![prompt];
    let batch = DecodeBatch::new(&prompts, 1, 0);
    let bf16 = if dev.is_cpu() && drift::core::nn::amx::available() {
        Some(model.with_bf16_matmuls()?)
    } else {
        None
    };
    let mut plain = None;
    let mut f32_tokens = Vec::new();
    for (matmul, m) in std::iter::once(("f32", model)).chain(bf16.as_ref().map(|m| ("bf16", m))) {
        for (i, mode) in
            [KvCacheMode::None, KvCacheMode::Prefix, KvCacheMode::Dual].into_iter().enumerate()
        {
            let dc = DecodeConfig {
                gen_length: 128,
                block_length: 32,
                steps: 128,
                kv_cache: mode,
                ..DecodeConfig::default()
            };
            // One checked run first: the timed closure's errors would go unseen.
            let first = decode(m, &dc, &batch, RngKey::new(0), dev)?;
            let tokens = first.tokens.flatten_all()?.to_vec1::<u32>()?;
            let mut evals = first.evaluations;
            let secs = median_seconds(iters, || -> Result<()> {
                evals = decode(m, &dc, &batch, RngKey::new(0), dev)?.evaluations;
                Ok(dev.synchronize()?)
            });
            let base = *plain.get_or_insert(secs);
            let mut line = json!({
                "case": "decode_cache", "model": name, "params": model.num_parameters(),
                "matmul": matmul, "kv_cache": format!("{mode:?}").to_lowercase(), "batch": 1,
                "prompt": 64, "gen": 128, "block": 32, "steps": 128, "forward_passes": evals,
                "seconds": secs, "speedup_vs_no_cache_f32": base / secs,
                "threads": candle_core::utils::get_num_threads(), "tokens": &tokens[64..],
            });
            if matmul == "f32" {
                f32_tokens.push(tokens);
            } else if let Some(f) = f32_tokens.get(i) {
                let same = tokens[64..].iter().zip(&f[64..]).filter(|(a, b)| a == b);
                line["tokens_equal_to_f32"] = json!(same.count());
            }
            outln!("{line}");
        }
    }
    Ok(())
}
