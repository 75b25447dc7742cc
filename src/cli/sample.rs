//! `drift sample dllm` and `drift sample flow`: draw samples from a saved model and print them
//! as JSON lines (a dLLM's completions; a DiT's verifier verdicts, with a captioned grid PNG).

use std::path::Path;

use anyhow::{Context, Result};
use candle_core::Device;
use drift::core::rng::RngKey;
use drift::dllm::model::{DiffusionLm, LoadOptions};
use drift::dllm::sas::SasOrderPolicy;
use drift::dllm::tokenizer::{BOS_ID, EOS_ID, PAD_ID};
use drift::flow::grpo::rollout::initial_noise;
use drift::flow::grpo::task::tensor_to_images;
use drift::flow::grpo::{ImageTask, ShapesTask};
use drift::flow::model::load_dit_frozen;
use drift::rewards::image::{write_grid, GridOptions};
use drift::rewards::worlds::shapes::{verify, Prompt};
use drift::samplers::dllm::{
    decode, decode_with_policy, DecodeBatch, DecodeConfig, OrderPolicy, PositionRule,
    ProposalConfig,
};
use drift::samplers::flow::{
    rollout_sde, Guidance, RolloutConfig, Schedule, ScheduleConfig, StepKind,
};
use serde_json::json;

use super::usage;

/// The position rule named `name` (`low_confidence`, `margin`, `entropy`, `random`,
/// `threshold` or `dream_threshold` with `tau`, `origin`).
pub fn position_rule(name: &str, tau: f64) -> Result<PositionRule> {
    Ok(match name {
        "low_confidence" => PositionRule::LowConfidence,
        "margin" => PositionRule::Margin,
        "entropy" => PositionRule::Entropy,
        "random" => PositionRule::Random,
        "origin" => PositionRule::Origin { eps: 1e-3 },
        "threshold" => PositionRule::Threshold { tau },
        "dream_threshold" => PositionRule::DreamThreshold { tau },
        other => {
            return Err(usage(format!(
                "--rule {other:?}: expected low_confidence, margin, entropy, random, threshold, \
                 dream_threshold or origin"
            )))
        }
    })
}

/// The SAS order policy saved in `dir` (`drift train sas`'s `OUT/model`), loaded before any
/// decoding; a missing folder or a bad file is a usage error naming `--order-policy`.
pub fn load_order_policy(dir: &Path, dev: &Device) -> Result<SasOrderPolicy> {
    super::existing_dir(dir, "--order-policy")?;
    SasOrderPolicy::load(dir, dev)
        .map_err(|e| usage(format!("--order-policy {}: {e}", dir.display())))
}

/// How `drift sample dllm` decodes.
#[derive(Debug, Clone)]
pub struct DllmSampling {
    /// Completion length.
    pub gen_length: usize,
    /// Block length.
    pub block_length: usize,
    /// Steps in total.
    pub steps: usize,
    /// The position rule.
    pub rule: PositionRule,
    /// Token temperature (0 = greedy).
    pub temperature: f64,
    /// Samples per prompt.
    pub n: usize,
    /// Seed of the sampling noise.
    pub seed: u64,
    /// A trained order policy folder choosing the positions in place of `rule`.
    pub order_policy: Option<std::path::PathBuf>,
    /// Sample the policy's choices (keyed by `seed`) instead of taking its top scores.
    pub sample_order: bool,
    /// Run the linear layers in bf16 on AMX tiles (`--matmul bf16`).
    pub bf16_matmuls: bool,
}

/// Decodes `n` completions of each prompt (drift's corpus format `BOS prompt\n`) and prints
/// one JSON line per completion.
pub fn dllm(model_dir: &Path, prompts: &[String], s: &DllmSampling, dev: &Device) -> Result<()> {
    super::existing_dir(model_dir, "--model")?;
    let policy = s.order_policy.as_deref().map(|d| load_order_policy(d, dev)).transpose()?;
    if policy.is_some() && !s.rule.uses_quota() {
        return Err(usage(
            "--order-policy chooses the positions of a quota rule: expected --rule \
             low_confidence, margin, entropy or random"
                .to_string(),
        ));
    }
    let load = LoadOptions { device: dev.clone(), ..LoadOptions::frozen() };
    let model = super::dllm::with_matmul(DiffusionLm::from_dir(model_dir, &load)?, s.bf16_matmuls)?;
    let Some(tok) = model.tokenizer().cloned() else {
        anyhow::bail!("{}: no tokenizer to encode the prompt", model_dir.display());
    };
    let mut ids = Vec::new();
    for p in prompts {
        let mut row = vec![BOS_ID];
        row.extend(
            tok.encode(&format!("{p}\n")).map_err(|e| usage(format!("--prompt {p:?}: {e}")))?,
        );
        ids.push(row);
    }
    let longest = ids.iter().map(Vec::len).max().unwrap_or(0);
    super::dllm::check_decode_fits(
        model.config(),
        "--gen-length / --n",
        longest,
        s.gen_length,
        ids.len().saturating_mul(s.n),
    )?;
    let cfg = DecodeConfig {
        gen_length: s.gen_length,
        block_length: s.block_length,
        steps: s.steps,
        proposal: ProposalConfig { temperature: s.temperature, ..ProposalConfig::default() },
        position: s.rule,
        ..DecodeConfig::default()
    };
    // Every decoding value (temperature, steps, block length) is checked before the model runs.
    let mc = model.config();
    cfg.validate(mc.logit_width(), mc.mask_id()).map_err(|e| usage(e.to_string()))?;
    let batch = DecodeBatch {
        prompts: &ids,
        group_size: s.n,
        pad_id: PAD_ID,
        padding: model.config().padding(),
        first_row: 0,
        greedy_per_group: 0,
    };
    let key = RngKey::new(s.seed);
    let greedy = policy.as_ref().map(SasOrderPolicy::greedy);
    let order: Option<&dyn OrderPolicy> = match (&policy, &greedy) {
        (Some(p), _) if s.sample_order => Some(p),
        (_, Some(g)) => Some(g),
        _ => None,
    };
    let traj = match order {
        Some(p) => decode_with_policy(&model, &cfg, &batch, key, model.device(), p)?,
        None => decode(&model, &cfg, &batch, key, model.device())?,
    };
    let p = traj.prompt_len;
    for (r, row) in traj.tokens.to_vec2::<u32>()?.iter().enumerate() {
        let comp = &row[p..];
        let end = comp.iter().position(|&t| t == EOS_ID).unwrap_or(comp.len());
        let text = tok.decode(&comp[..end], true)?;
        let line = json!({
            "prompt": prompts[r / s.n], "sample": r % s.n, "completion": text,
            "evaluations": traj.evaluations,
        });
        outln!("{line}");
    }
    Ok(())
}

/// How `drift sample flow` samples.
#[derive(Debug, Clone)]
pub struct FlowSampling {
    /// Images per prompt.
    pub n: usize,
    /// Denoising steps.
    pub steps: usize,
    /// The transition (ODE or an SDE).
    pub step: StepKind,
    /// CFG scale (1 = none).
    pub guidance: f64,
    /// Seed of the initial noise and the SDE noise.
    pub seed: u64,
}

/// The transition named `name` at noise level `level`.
pub fn step_kind(name: &str, level: f64) -> Result<StepKind> {
    let step = match name {
        "ode" => StepKind::Ode,
        "flow_grpo" => StepKind::FlowGrpo { noise_level: level },
        "dance" => StepKind::Dance { eta: level },
        "cps" => StepKind::Cps { noise_level: level },
        other => {
            return Err(usage(format!(
                "--sampler {other:?}: expected ode, flow_grpo, dance or cps"
            )))
        }
    };
    step.validate().map_err(|e| usage(format!("--noise {level}: {e}")))?;
    Ok(step)
}

/// Samples `n` images of each prompt (shapes-world grammar), prints each image's verifier
/// verdict as a JSON line and writes a captioned grid to `out`.
pub fn flow(
    model_dir: &Path,
    prompts: &[String],
    s: &FlowSampling,
    out: &Path,
    dev: &Device,
) -> Result<()> {
    super::existing_dir(model_dir, "--model")?;
    let parsed = prompts
        .iter()
        .map(|p| Prompt::try_from(p.clone()).map_err(|e| usage(format!("--prompt {p:?}: {e}"))))
        .collect::<Result<Vec<_>>>()?;
    let model = load_dit_frozen(model_dir, dev)?;
    let images = parsed.len().saturating_mul(s.n);
    let mc = model.config();
    super::check_memory(
        &format!("--n {} × {} prompts", s.n, parsed.len()),
        mc.training_bytes(images) / mc.depth.max(1) as u64,
    )?;
    let task = ShapesTask::new()?;
    let repeated: Vec<Prompt> =
        parsed.iter().flat_map(|p| std::iter::repeat_n(p.clone(), s.n)).collect();
    let rows: Vec<u64> = (0..repeated.len() as u64).collect();
    let mc = *model.config();
    let key = RngKey::new(s.seed).stream("drift_sample");
    let x = initial_noise(key, &rows, (mc.channels, mc.image_size, mc.image_size), dev)?;
    let cond = task.encode(&repeated, dev)?;
    let schedule = Schedule::new(&ScheduleConfig { steps: s.steps, ..ScheduleConfig::default() })
        .map_err(|e| usage(format!("--steps {}: {e}", s.steps)))?;
    let null = model.null_prompt(repeated.len())?;
    let g = Guidance { uncond: &null, scale: s.guidance };
    let cfg = RolloutConfig { step: s.step, ..RolloutConfig::default() };
    let guidance = (s.guidance != 1.0).then_some(&g);
    let rollout = rollout_sde(&model, &x, &cond, &schedule, &cfg, guidance, key, &rows)?;
    let images = tensor_to_images(rollout.images())?;
    let mut captions = Vec::new();
    for (i, (p, im)) in repeated.iter().zip(&images).enumerate() {
        let v = verify(p, im);
        outln!(
            "{}",
            json!({"prompt": p.to_text(), "sample": i % s.n, "strict": v.strict, "score": v.score})
        );
        captions.push(format!("{} {}", if v.strict { "ok" } else { "x" }, p.to_text()));
    }
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let caps: Vec<&str> = captions.iter().map(String::as_str).collect();
    write_grid(
        out,
        &images,
        &caps,
        &GridOptions { columns: s.n.clamp(1, 8), ..GridOptions::default() },
    )?;
    outln!("grid: {}", out.display());
    Ok(())
}
