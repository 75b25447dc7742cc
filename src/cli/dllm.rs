//! `drift pretrain dllm` and `drift eval dllm` on the shipped code world.
//!
//! **Corpus format** (shared by pretraining, evaluation and the RL trainer's rollouts, so a
//! model sees at test time exactly what it was trained on): the prompt is the item's spec
//! followed by a newline, the completion is the item's target, its reference solution in one
//! fenced Python block (`CodeItem::target`), both through drift's ASCII character tokenizer;
//! rows are laid out as `drift_dllm::pretrain_run` documents (`[PAD…] BOS prompt |
//! completion EOS…`). The world is the code world with its default configuration (seed 0,
//! 10% of templates held out), the split every shipped model and evaluation uses.

use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use candle_core::Device;
use drift_core::rng::RngKey;
use drift_dllm::grpo::{train_dllm_grpo, CodeTask, DllmGrpoConfig};
use drift_dllm::model::{DiffusionLm, LoadOptions};
use drift_dllm::pretrain_run::{pretrain_dllm, PretrainDllmConfig, SftExample};
use drift_dllm::tokenizer::{CharTokenizer, Tokenizer, BOS_ID, CHAR_TOKENIZER_FILE, PAD_ID};
use drift_dllm::DllmError;
use drift_rewards::code::{CodeReward, CodeRewardConfig};
use drift_rewards::pool::{Pool, PoolConfig};
use drift_rewards::reward::TextSample;
use drift_rewards::worlds::code::{CodeItem, CodeWorld, CodeWorldConfig};
use drift_rewards::worlds::{Split, TextItem};
use drift_samplers::dllm::{
    decode, DecodeBatch, DecodeConfig, Padding, PositionRule, ProposalConfig,
};

/// The prompt text of a code item in the corpus format.
pub fn prompt_text(item: &CodeItem) -> String {
    // One definition of the corpus format, shared with the RL trainer's task.
    CodeTask::prompt_text(item)
}

/// The code world every shipped dLLM uses (default configuration).
pub fn code_world() -> Result<CodeWorld> {
    Ok(CodeWorld::new(CodeWorldConfig::default())?)
}

/// One training example of the corpus format.
fn example(tok: &CharTokenizer, item: &CodeItem) -> Result<SftExample, DllmError> {
    Ok(SftExample {
        prompt: tok.encode(&prompt_text(item))?,
        completion: tok.encode(&item.target())?,
    })
}

/// The longest target (in tokens) over every template of both splits, with the template.
fn longest_target(world: &CodeWorld, tok: &CharTokenizer) -> Result<(usize, String)> {
    let mut best = (0, String::new());
    for split in [Split::Train, Split::HeldOut] {
        for (k, &t) in world.templates(split).iter().enumerate() {
            let item = world.item_of(t, format!("probe-{k}"), &mut seeded(k as u64));
            let n = tok.encode(&item.target())?.len();
            if n > best.0 {
                best = (n, item.template);
            }
        }
    }
    Ok(best)
}

fn seeded(k: u64) -> drift_rewards::worlds::rng::SplitMix64 {
    drift_rewards::worlds::rng::SplitMix64::keyed(&[k])
}

/// Runs masked-diffusion SFT pretraining on the code world's train split.
pub fn pretrain(config: Option<&Path>, sets: &[String], out: &Path) -> Result<()> {
    let (cfg, text): (PretrainDllmConfig, String) = super::config::load(config, sets)?;
    cfg.validate().map_err(|e| super::usage(e.to_string()))?;
    let world = code_world()?;
    let tok = CharTokenizer::ascii();
    let (longest, template) = longest_target(&world, &tok)?;
    if longest > cfg.completion_len {
        return Err(super::usage(format!(
            "completion_len = {} is shorter than the longest code-world target ({longest} tokens, \
             template {template}); set completion_len >= {longest}",
            cfg.completion_len
        )));
    }
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    std::fs::write(out.join("config.toml"), &text)?;
    let report = pretrain_dllm(&cfg, &text, out, &Device::Cpu, &tok, |step, b| {
        (0..b as u64)
            .map(|i| example(&tok, &world.item(Split::Train, step * b as u64 + i)))
            .collect()
    })?;
    println!("parameters: {}", report.parameters);
    println!("final loss (mean of the last 10% of steps): {:.5}", report.final_loss);
    println!("throughput: {:.0} tokens/s", report.tokens_per_s);
    println!("wall time: {:.1} s", report.seconds);
    println!("model:   {}", report.model_dir.display());
    println!("metrics: {}", report.metrics.display());
    println!("curves:  {}", report.curves.display());
    Ok(())
}

/// `drift train dllm`: a dLLM RL recipe on the code world from a base model.
pub fn train(config: Option<&Path>, sets: &[String], out: &Path) -> Result<()> {
    let (cfg, text): (DllmGrpoConfig, String) = super::config::load(config, sets)?;
    let rc = cfg.resolved().map_err(|e| super::usage(e.to_string()))?;
    if !cfg.base.join("config.json").exists() {
        return Err(super::usage(format!(
            "base model `base = {}` has no config.json (train one with `drift pretrain dllm`)",
            cfg.base.display()
        )));
    }
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    std::fs::write(out.join("config.toml"), &text)?;
    let task = CodeTask::new()?;
    let r = train_dllm_grpo(&cfg, &text, &task, out, &Device::Cpu)?;
    println!(
        "recipe {:?}: estimator {:?}, mu {}, G {}",
        cfg.recipe, rc.parts.estimator, rc.parts.inner_iterations, rc.parts.group_size
    );
    println!(
        "held-out pass rate ({} items, greedy, {} steps): base {:.1}% -> trained {:.1}%",
        r.trained.items,
        cfg.eval_steps,
        100.0 * r.base.pass_rate,
        100.0 * r.trained.pass_rate
    );
    println!(
        "held-out reward: base {:.4} -> trained {:.4}",
        r.base.reward_mean, r.trained.reward_mean
    );
    println!("wall time: {:.1} s", r.seconds);
    println!("metrics: {}", r.metrics.display());
    println!("curves:  {}", r.curves.display());
    println!("model:   {}", r.model_dir.display());
    Ok(())
}

/// The completion region of the shipped code corpus: the longest code-world target (105
/// tokens, `string/novowels/doublechars`) plus one EOS.
pub const CODE_COMPLETION_LEN: usize = 106;

/// How `drift eval dllm` decodes.
#[derive(Debug, Clone, Copy)]
pub struct EvalOptions {
    /// Items scored (the first `n` of `split`).
    pub n: usize,
    /// Completion length (the canvas of masks after the prompt).
    pub gen_length: usize,
    /// Block length (semi-autoregressive blocks; `gen_length` = one block).
    pub block_length: usize,
    /// Denoising steps in total.
    pub steps: usize,
    /// Rows decoded together.
    pub batch: usize,
    /// The split scored: held-out templates (the RL target) or the train templates (what
    /// pretraining saw, a check of fit before generalisation).
    pub split: Split,
}

/// One decoded, scored held-out item.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Scored {
    /// The item id.
    pub id: String,
    /// Its template.
    pub template: String,
    /// The decoded completion.
    pub completion: String,
    /// The combined code reward (format 0.5 + execution 2.0).
    pub reward: f64,
    /// Fraction of tests passed.
    pub execution: f64,
    /// Format score (1 = one well-formed, compiling block).
    pub format: f64,
    /// Every test passed.
    pub passed: bool,
}

/// Greedy low-confidence decoding of `prompts` (token ids, no specials) with `model`: the
/// samplers' `decode` with temperature 0 and LLaDA's quota (`steps / blocks` per block), on
/// the training row layout `[PAD…] BOS prompt [MASK; gen_length]`. Returns the completions.
pub fn greedy_decode(
    model: &DiffusionLm,
    prompts: &[Vec<u32>],
    opts: &EvalOptions,
) -> Result<Vec<Vec<u32>>> {
    let cfg = DecodeConfig {
        gen_length: opts.gen_length,
        block_length: opts.block_length,
        steps: opts.steps,
        proposal: ProposalConfig::default(),
        position: PositionRule::LowConfidence,
        ..DecodeConfig::default()
    };
    let with_bos: Vec<Vec<u32>> = prompts
        .iter()
        .map(|p| std::iter::once(BOS_ID).chain(p.iter().copied()).collect())
        .collect();
    let batch = DecodeBatch {
        prompts: &with_bos,
        group_size: 1,
        pad_id: PAD_ID,
        padding: Padding::Visible,
        first_row: 0,
    };
    let traj = decode(model, &cfg, &batch, RngKey::new(0), model.device())?;
    let p = traj.prompt_len;
    Ok(traj.tokens.to_vec2::<u32>()?.into_iter().map(|r| r[p..].to_vec()).collect())
}

/// Decodes the first `opts.n` items of `opts.split` with `model` and scores them with the code
/// reward (format gate + sandboxed tests).
pub fn evaluate(model: &DiffusionLm, opts: &EvalOptions) -> Result<Vec<Scored>> {
    let tok = match model.tokenizer() {
        Some(Tokenizer::Char(t)) => t.clone(),
        _ => bail!("the model has no drift character tokenizer ({CHAR_TOKENIZER_FILE})"),
    };
    let items = code_world()?.items(opts.split, opts.n);
    let reward = Arc::new(CodeReward::new(&CodeRewardConfig::default())?);
    let pool = Pool::new(&PoolConfig::default())?;
    let mut out = Vec::with_capacity(items.len());
    for chunk in items.chunks(opts.batch.max(1)) {
        let prompts =
            chunk.iter().map(|i| tok.encode(&prompt_text(i))).collect::<Result<Vec<_>, _>>()?;
        let completions = greedy_decode(model, &prompts, opts)?;
        let texts =
            completions.iter().map(|ids| tok.decode(ids, true)).collect::<Result<Vec<_>, _>>()?;
        out.extend(score(&reward, &pool, chunk, texts));
    }
    Ok(out)
}

/// Scores `completions[i]` as the answer to `items[i]` with the code reward.
pub fn score(
    reward: &Arc<CodeReward>,
    pool: &Pool,
    items: &[CodeItem],
    completions: Vec<String>,
) -> Vec<Scored> {
    let samples: Vec<TextSample<CodeItem>> =
        items.iter().zip(completions).map(|(item, c)| TextSample::new(item.clone(), c)).collect();
    let outcomes = pool.evaluate(reward, samples.clone());
    samples
        .into_iter()
        .zip(outcomes)
        .map(|(s, o)| {
            let part = |name: &str| {
                o.details.components.iter().find(|c| c.name == name).map_or(0.0, |c| c.score)
            };
            let (format, execution) = (part("code_format"), part("code_execution"));
            Scored {
                id: s.task.id.clone(),
                template: s.task.template.clone(),
                completion: s.completion,
                reward: o.score,
                execution,
                format,
                passed: o.is_ok() && format == 1.0 && execution == 1.0,
            }
        })
        .collect()
}

/// `held_out` or `train`.
pub fn split_name(split: Split) -> &'static str {
    match split {
        Split::Train => "train",
        Split::HeldOut => "held_out",
    }
}

/// `drift eval dllm`: held-out pass rate of a saved model on the code world.
pub fn eval(model_dir: &Path, opts: &EvalOptions, out: Option<&Path>) -> Result<()> {
    let model = DiffusionLm::from_dir(model_dir, &LoadOptions::frozen())?;
    let t0 = std::time::Instant::now();
    let scored = evaluate(&model, opts)?;
    let n = scored.len().max(1) as f64;
    let mean = |f: fn(&Scored) -> f64| scored.iter().map(f).sum::<f64>() / n;
    let pass = mean(|s| f64::from(u8::from(s.passed)));
    let summary = serde_json::json!({
        "eval": format!("dllm/code/{}", split_name(opts.split)),
        "model": model_dir.display().to_string(),
        "samples": scored.len(),
        "gen_length": opts.gen_length,
        "block_length": opts.block_length,
        "steps": opts.steps,
        "pass_rate": pass,
        "mean_execution": mean(|s| s.execution),
        "format_rate": mean(|s| f64::from(u8::from(s.format == 1.0))),
        "mean_reward": mean(|s| s.reward),
        "seconds": (t0.elapsed().as_secs_f64() * 10.0).round() / 10.0,
    });
    println!("{summary}");
    if let Some(dir) = out {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let mut lines = String::new();
        for s in &scored {
            lines.push_str(&serde_json::to_string(s)?);
            lines.push('\n');
        }
        std::fs::write(dir.join("eval_samples.jsonl"), lines)?;
        std::fs::write(dir.join("eval_summary.json"), format!("{summary}\n"))?;
        println!("samples: {}", dir.join("eval_samples.jsonl").display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_targets_pass_and_a_wrong_body_fails_through_the_eval_scoring() {
        let world = code_world().unwrap();
        let items = world.items(Split::HeldOut, 4);
        let reward = Arc::new(CodeReward::new(&CodeRewardConfig::default()).unwrap());
        let pool = Pool::new(&PoolConfig::default()).unwrap();
        let good: Vec<String> = items.iter().map(TextItem::target).collect();
        assert!(score(&reward, &pool, &items, good).iter().all(|s| s.passed && s.format == 1.0));
        let bad = vec!["```python\ndef f(x):\n    return None\n```".to_string(); 4];
        let scored = score(&reward, &pool, &items, bad);
        assert!(scored.iter().all(|s| !s.passed && s.format == 1.0), "{scored:?}");
        let tok = CharTokenizer::ascii();
        let longest = longest_target(&world, &tok).unwrap().0;
        assert_eq!(CODE_COMPLETION_LEN, longest + 1);
    }
}
