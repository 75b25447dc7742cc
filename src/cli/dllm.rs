//! `drift pretrain dllm` and `drift eval dllm` on the shipped code world.
//!
//! **Corpus format** (shared by pretraining, evaluation and the RL trainer's rollouts, so a
//! model sees at test time exactly what it was trained on): the prompt is the item's spec
//! followed by a newline, the completion is the item's target, its reference solution in one
//! fenced Python block (`CodeItem::target`), both through drift's ASCII character tokenizer;
//! rows are laid out as `drift_dllm::pretrain_run` documents (`[PAD…] BOS prompt |
//! completion EOS…`). The world is the code world with its default configuration (seed 0,
//! 10% of templates held out), the split every shipped model and evaluation uses.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use candle_core::Device;
use drift_dllm::grpo::TextTask;
use drift_dllm::grpo::{
    decode_and_score_ordered, pass_at_k, sample_pass_counts, train_dllm_grpo, CodeTask,
    DllmGrpoConfig, DllmGrpoReport, ResolvedConfig, TaskScore, TextWorld,
};
use drift_dllm::model::{DiffusionLm, LoadOptions, ModelConfig};
use drift_dllm::pretrain_run::{
    pretrain_dllm, PretrainDllmConfig, PretrainDllmReport, SftExample, TokenizerKind,
};
use drift_dllm::sas::SasOrderPolicy;
use drift_dllm::tokenizer::bpe::train_bpe;
use drift_dllm::tokenizer::{CharTokenizer, Tokenizer, CHAR_TOKENIZER_FILE, HF_TOKENIZER_FILE};
use drift_dllm::DllmError;
use drift_rewards::sandbox::SandboxConfig;
use drift_rewards::worlds::code::{CodeItem, CodeSplit, CodeWorld, CodeWorldConfig};
use drift_rewards::worlds::{Split, TextItem};
use drift_samplers::dllm::{DecodeConfig, OrderPolicy, PositionRule, ProposalConfig};

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
fn example(tok: &Tokenizer, item: &CodeItem) -> Result<SftExample, DllmError> {
    Ok(SftExample {
        prompt: tok.encode(&prompt_text(item))?,
        completion: tok.encode(&item.target())?,
    })
}

/// The longest target (in tokens) over every template of every split, with the template.
fn longest_target(world: &CodeWorld, tok: &Tokenizer) -> Result<(usize, String)> {
    let mut best = (0, String::new());
    for split in CodeSplit::ALL {
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

/// The texts a BPE tokenizer is trained on: the prompt and the target of every train
/// template, in template order (the held-out splits' texts are never seen).
fn tokenizer_corpus(world: &CodeWorld) -> Vec<String> {
    world
        .templates(CodeSplit::Train)
        .iter()
        .enumerate()
        .flat_map(|(k, &t)| {
            let item = world.item_of(t, format!("corpus-{k}"), &mut seeded(k as u64));
            [prompt_text(&item), item.target()]
        })
        .collect()
}

/// The tokenizer `kind` for the code corpus: drift's ASCII characters, or a BPE trained on
/// [`tokenizer_corpus`].
fn corpus_tokenizer(world: &CodeWorld, kind: TokenizerKind) -> Result<Tokenizer> {
    Ok(match kind {
        TokenizerKind::Char => Tokenizer::Char(CharTokenizer::ascii()),
        TokenizerKind::Bpe(cfg) => Tokenizer::Hf(Box::new(
            train_bpe(&tokenizer_corpus(world), &cfg).map_err(|e| super::usage(e.to_string()))?,
        )),
    })
}

fn seeded(k: u64) -> drift_core::rng::SplitMix64 {
    drift_core::rng::SplitMix64::keyed(&[k])
}

/// Runs masked-diffusion SFT pretraining on the code world's train split.
pub fn pretrain(cmd: &super::RunCommand<'_>, dev: &Device) -> Result<()> {
    let out = cmd.out;
    let (cfg, text): (PretrainDllmConfig, String) = cmd.load()?;
    cfg.validate().map_err(|e| super::usage(e.to_string()))?;
    if cfg.world == TextWorld::Sudoku {
        return super::sudoku::pretrain(cmd, &cfg, &text, dev);
    }
    let world = code_world()?;
    let tok = corpus_tokenizer(&world, cfg.tokenizer)?;
    let (longest, template) = longest_target(&world, &tok)?;
    if longest > cfg.completion_len {
        return Err(super::usage(format!(
            "completion_len = {} is shorter than the longest code-world target ({longest} tokens, \
             template {template}); set completion_len >= {longest}",
            cfg.completion_len
        )));
    }
    cmd.prepare_run_dir(&text)?;
    let report = pretrain_dllm(&cfg, &text, out, dev, &tok, |step, b| {
        (0..b as u64)
            .map(|i| example(&tok, &world.item(Split::Train, step * b as u64 + i)))
            .collect()
    })?;
    print_pretrain_report(&report, cfg.run.steps)
}

/// Prints a finished dLLM pretraining run: parameters, final loss, where it stopped and its
/// throughput.
pub fn print_pretrain_report(report: &PretrainDllmReport, planned: u64) -> Result<()> {
    outln!("parameters: {}", report.parameters);
    outln!("final loss (mean of the last 10% of steps): {:.5}", report.final_loss);
    super::print_stopped(&report.run, planned, "step");
    outln!("throughput: {:.0} tokens/s", report.tokens_per_s);
    super::print_finished(&report.run)
}

/// `drift train dllm`: a dLLM RL recipe on the code world from a base model.
pub fn train(cmd: &super::RunCommand<'_>, dev: &Device) -> Result<()> {
    let out = cmd.out;
    let (cfg, text): (DllmGrpoConfig, String) = cmd.load()?;
    let rc = cfg.resolved().map_err(|e| super::usage(e.to_string()))?;
    if !cfg.base.join("config.json").exists() {
        return Err(super::usage(format!(
            "base model `base = {}` has no config.json (train one with `drift pretrain dllm`)",
            cfg.base.display()
        )));
    }
    if cfg.world == TextWorld::Sudoku {
        if cfg.data.is_some() {
            return Err(super::usage(
                "data = FILE is a code-problem file; it cannot be used with world = \"sudoku\"",
            ));
        }
        return super::sudoku::train(cmd, &cfg, &text, dev);
    }
    let task = match &cfg.data {
        Some(path) => user_task(path, &cfg.sandbox)?,
        None => CodeTask::with_sandbox(&cfg.sandbox).map_err(|e| super::usage(e.to_string()))?,
    };
    let task = task
        .with_tokenizer(base_tokenizer(&cfg.base)?)
        .map_err(|e| super::usage(format!("base model `base = {}`: {e}", cfg.base.display())))?;
    let model_cfg = ModelConfig::from_file(&cfg.base.join("config.json"))
        .map_err(|e| super::usage(format!("base model `base = {}`: {e}", cfg.base.display())))?;
    let mut probe = task.eval_items(cfg.eval_items);
    probe.extend((0..256).map(|i| task.train_item(cfg.run.seed, i)));
    check_decode_fits(
        &model_cfg,
        "decode.gen_length / prompts_per_step × group_size",
        longest_prompt(&task, &probe)?,
        cfg.decode.gen_length,
        cfg.prompts_per_step.saturating_mul(rc.parts.group_size),
    )?;
    cmd.prepare_run_dir(&text)?;
    let r = train_dllm_grpo(&cfg, &text, &task, out, dev)?;
    let headline = if task.is_user_data() { "held-out" } else { "held-out items" };
    print_rl_report(&cfg, &rc, &r, headline);
    super::print_finished(&r.run)
}

/// Prints a finished dLLM RL run: the recipe, where it stopped, and base → trained pass
/// rates of the headline held-out set (`headline`) and of the task's further sets.
pub fn print_rl_report(
    cfg: &DllmGrpoConfig,
    rc: &ResolvedConfig,
    r: &DllmGrpoReport,
    headline: &str,
) {
    outln!(
        "recipe {:?}: estimator {:?}, mu {}, G {}",
        cfg.recipe,
        rc.parts.estimator,
        rc.parts.inner_iterations,
        rc.parts.group_size
    );
    super::print_stopped(&r.run, cfg.run.steps, "iteration");
    let sets = std::iter::once((headline, &r.base.main, &r.trained.main)).chain(
        r.base.extra.iter().zip(&r.trained.extra).map(|((n, b), (_, t))| (n.as_str(), b, t)),
    );
    for (name, b, t) in sets {
        outln!(
            "{name} pass rate ({} items, greedy, {} steps): base {:.1}% -> trained {:.1}% \
             (reward {:.4} -> {:.4})",
            t.items,
            cfg.eval_steps,
            100.0 * b.pass_rate,
            100.0 * t.pass_rate,
            b.reward_mean,
            t.reward_mean
        );
    }
}

/// The tokenizer saved in model folder `dir` (`tokenizer.json` or drift's character
/// tokenizer file): the one the code task must encode prompts with.
pub fn base_tokenizer(dir: &Path) -> Result<Tokenizer> {
    for name in [HF_TOKENIZER_FILE, CHAR_TOKENIZER_FILE] {
        let path = dir.join(name);
        if path.is_file() {
            return Tokenizer::from_file(&path).map_err(|e| super::usage(e.to_string()));
        }
    }
    Err(super::usage(format!(
        "model folder {} has neither {HF_TOKENIZER_FILE} nor {CHAR_TOKENIZER_FILE}: the \
         code world's prompts are encoded with the model's own tokenizer (pretrain a base with \
         `drift pretrain dllm`)",
        dir.display()
    )))
}

/// Refuses, before any work, a decode the model cannot take or this machine cannot hold:
/// `prompt_len + gen_length` tokens beyond the checkpoint's declared maximum sequence length,
/// or `rows` rows whose one forward pass needs more than the memory available now
/// ([`ModelConfig::forward_bytes`], a lower estimate). `what` names the setting to change.
pub fn check_decode_fits(
    cfg: &ModelConfig,
    what: &str,
    prompt_len: usize,
    gen_length: usize,
    rows: usize,
) -> Result<()> {
    let seq = prompt_len.saturating_add(gen_length);
    let max = cfg.max_sequence_length();
    if seq > max {
        return Err(super::usage(format!(
            "{what}: a prompt of {prompt_len} tokens and a completion of {gen_length} make \
             {seq} tokens, beyond the model's maximum sequence length {max}"
        )));
    }
    if let Some(available) = drift_core::alloc::available_memory() {
        let need = cfg.forward_bytes(rows, seq);
        if need > available {
            let gib = |b: u64| b as f64 / f64::from(1u32 << 30);
            return Err(super::usage(format!(
                "{what}: {rows} rows of {seq} tokens need at least {:.1} GiB for one forward \
                 pass and {:.1} GiB is available; decode fewer rows at once",
                gib(need),
                gib(available)
            )));
        }
    }
    Ok(())
}

/// The longest prompt, in tokens, among `items` of `task`.
fn longest_prompt(task: &CodeTask, items: &[CodeItem]) -> Result<usize> {
    let mut longest = 0;
    for item in items {
        longest = longest.max(task.prompt_ids(item)?.len());
    }
    Ok(longest)
}

/// The code task over a user's problem file; a bad file is a usage error naming its line.
fn user_task(path: &Path, sandbox: &SandboxConfig) -> Result<CodeTask> {
    if !path.is_file() {
        return Err(super::usage(format!("data file {}: no such file", path.display())));
    }
    CodeTask::from_file(path, sandbox).map_err(|e| super::usage(e.to_string()))
}

/// The completion region of the code corpus for the model in `dir`: the longest code-world
/// target in the model's tokens plus one EOS (106 for the character models, 38 for
/// the BPE of `dllm-code-v4` and `v5`): what `drift eval dllm` and `drift sample dllm` decode by
/// default.
pub fn model_completion_len(dir: &Path) -> Result<usize> {
    Ok(longest_target(&code_world()?, &base_tokenizer(dir)?)?.0 + 1)
}

/// How `drift eval dllm` decodes.
#[derive(Debug, Clone)]
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
    /// The split scored: held-out items (new constants of trained shapes, the RL target),
    /// held-out templates (unseen shapes) or the train templates (what pretraining saw, a
    /// check of fit before generalisation).
    pub split: CodeSplit,
    /// A user's problem file scored instead of the code world (every line, up to `n`).
    pub data: Option<PathBuf>,
    /// Where the tests run (`--sandbox`: the mode; the other values are the defaults).
    pub sandbox: SandboxConfig,
    /// The sampled pass@k measurement (off when `samples` is 0).
    pub pass_at: PassAtK,
    /// A trained order policy folder (`drift train sas`) choosing the positions, greedily, in
    /// place of low-confidence remasking, for the greedy pass@1 and the pass@k samples.
    pub order_policy: Option<PathBuf>,
    /// Run the linear layers in bf16 on AMX tiles (`--matmul bf16`,
    /// [`DiffusionLm::with_bf16_matmuls`]).
    pub bf16_matmuls: bool,
}

/// `model` with its linear layers in bf16 on AMX tiles when `bf16` (`--matmul bf16`), else
/// unchanged; the error names the flag where the CPU cannot.
pub fn with_matmul(model: DiffusionLm, bf16: bool) -> Result<DiffusionLm> {
    if !bf16 {
        return Ok(model);
    }
    model.with_bf16_matmuls().map_err(|e| super::usage(format!("--matmul bf16: {e}")))
}

/// How `drift eval dllm` measures pass@k: `samples` decodes per item at `temperature`, the
/// unbiased estimate for each `k ≤ samples`.
#[derive(Debug, Clone)]
pub struct PassAtK {
    /// Samples per item (0 = none).
    pub samples: usize,
    /// Proposal temperature.
    pub temperature: f64,
    /// The k reported.
    pub k: Vec<usize>,
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

impl Scored {
    /// `completion` of `item` with its task score.
    pub fn new(item: &CodeItem, completion: String, s: &TaskScore) -> Self {
        let part = |name: &str| s.components.iter().find(|c| c.0 == name).map_or(0.0, |c| c.1);
        Self {
            id: item.id.clone(),
            template: item.template.clone(),
            completion,
            reward: s.reward,
            execution: part("code_execution"),
            format: part("code_format"),
            passed: s.passed,
        }
    }
}

/// Decodes `items` greedily with `cfg` (low-confidence remasking from [`eval_setup`];
/// `drift_dllm::grpo::decode_and_score`, the trainer's evaluation) in batches of `batch` and
/// scores them with the code reward (format gate + sandboxed tests).
fn score_greedy(
    model: &DiffusionLm,
    task: &CodeTask,
    items: &[CodeItem],
    cfg: &DecodeConfig,
    batch: usize,
    order: Option<&dyn OrderPolicy>,
) -> Result<Vec<Scored>> {
    let cfg = DecodeConfig {
        proposal: ProposalConfig { temperature: 0.0, ..cfg.proposal },
        ..cfg.clone()
    };
    let batches = decode_and_score_ordered(model, task, items, &cfg, batch, 0, order)?;
    let scored = batches.into_iter().flat_map(|b| b.completions.into_iter().zip(b.scores));
    Ok(items.iter().zip(scored).map(|(item, (c, s))| Scored::new(item, c, &s)).collect())
}

/// The unbiased pass@k of `opts.pass_at` over `items`: each decoded `samples` times with
/// `greedy`'s decoding at the given temperature (seed 0), as `{"k": pass@k}` for every `k` up
/// to `samples`; `None` when `samples` is 0.
fn pass_at_k_report(
    model: &DiffusionLm,
    task: &CodeTask,
    items: &[CodeItem],
    greedy: &DecodeConfig,
    opts: &EvalOptions,
    order: Option<&dyn OrderPolicy>,
) -> Result<Option<serde_json::Value>> {
    let p = &opts.pass_at;
    if p.samples == 0 {
        return Ok(None);
    }
    let mut cfg = greedy.clone();
    cfg.proposal.temperature = p.temperature;
    let counts = sample_pass_counts(model, task, items, &cfg, (p.samples, opts.batch, 0), order)?;
    let mut out = serde_json::Map::new();
    for &k in p.k.iter().filter(|&&k| k >= 1 && k <= p.samples) {
        let sum: f64 = counts.iter().filter_map(|&c| pass_at_k(p.samples, c, k)).sum();
        out.insert(k.to_string(), serde_json::json!(sum / counts.len().max(1) as f64));
    }
    Ok(Some(serde_json::Value::Object(out)))
}

/// The task, the items and the (greedy, low-confidence) decoding of `drift eval dllm`, after
/// the checks that refuse a model or a size that cannot work.
fn eval_setup(
    model: &DiffusionLm,
    opts: &EvalOptions,
) -> Result<(CodeTask, Vec<CodeItem>, DecodeConfig)> {
    let Some(tok) = model.tokenizer().cloned() else {
        bail!("the model has no tokenizer ({HF_TOKENIZER_FILE} or {CHAR_TOKENIZER_FILE})");
    };
    let task = match &opts.data {
        Some(path) => user_task(path, &opts.sandbox)?,
        None => CodeTask::with_sandbox(&opts.sandbox).map_err(|e| super::usage(e.to_string()))?,
    };
    let task = task.with_tokenizer(tok).map_err(|e| super::usage(e.to_string()))?;
    let items = match &opts.data {
        Some(_) => task.user_items().iter().take(opts.n).cloned().collect(),
        None => task.world().items(opts.split, opts.n),
    };
    let cfg = DecodeConfig {
        gen_length: opts.gen_length,
        block_length: opts.block_length,
        steps: opts.steps,
        position: PositionRule::LowConfidence,
        ..DecodeConfig::default()
    };
    check_decode_fits(
        model.config(),
        "--gen-length / --batch",
        longest_prompt(&task, &items)?,
        opts.gen_length,
        opts.batch.min(items.len()),
    )?;
    Ok((task, items, cfg))
}

/// The distinct templates among `scored` and how many of them have at least one passing item.
/// Items of one template share the shape of their solution, so the pass rate moves in whole
/// templates: these two numbers say how coarse it is.
pub fn template_coverage(scored: &[Scored]) -> (usize, usize) {
    let mut passed: std::collections::BTreeMap<&str, bool> = std::collections::BTreeMap::new();
    for s in scored {
        *passed.entry(s.template.as_str()).or_default() |= s.passed;
    }
    (passed.len(), passed.values().filter(|&&p| p).count())
}

/// `drift eval dllm`: held-out pass rate of a saved model on the code world.
pub fn eval(model_dir: &Path, opts: &EvalOptions, out: Option<&Path>, dev: &Device) -> Result<()> {
    let policy = opts
        .order_policy
        .as_deref()
        .map(|d| super::sample::load_order_policy(d, dev))
        .transpose()?;
    let load = LoadOptions { device: dev.clone(), ..LoadOptions::frozen() };
    let model = with_matmul(DiffusionLm::from_dir(model_dir, &load)?, opts.bf16_matmuls)?;
    let t0 = std::time::Instant::now();
    let (task, items, cfg) = eval_setup(&model, opts)?;
    let greedy = policy.as_ref().map(SasOrderPolicy::greedy);
    let order = greedy.as_ref().map(|g| g as &dyn OrderPolicy);
    let scored = score_greedy(&model, &task, &items, &cfg, opts.batch, order)?;
    let pass_at = pass_at_k_report(&model, &task, &items, &cfg, opts, order)?;
    let n = scored.len().max(1) as f64;
    let mean = |f: fn(&Scored) -> f64| scored.iter().map(f).sum::<f64>() / n;
    let pass = mean(|s| f64::from(u8::from(s.passed)));
    let (templates, templates_passed) = template_coverage(&scored);
    let summary = serde_json::json!({
        "eval": match &opts.data {
            Some(path) => format!("dllm/data/{}", path.display()),
            None => format!("dllm/code/{}", opts.split.name()),
        },
        "model": model_dir.display().to_string(),
        "samples": scored.len(),
        "gen_length": opts.gen_length,
        "block_length": opts.block_length,
        "steps": opts.steps,
        "position": match &opts.order_policy {
            Some(dir) => serde_json::json!(format!("sas:{}", dir.display())),
            None => serde_json::json!(cfg.position),
        },
        "pass_rate": pass,
        "templates": templates,
        "templates_passed": templates_passed,
        "mean_execution": mean(|s| s.execution),
        "format_rate": mean(|s| f64::from(u8::from(s.format == 1.0))),
        "mean_reward": mean(|s| s.reward),
        "pass_at_k": pass_at,
        "pass_at_k_samples": opts.pass_at.samples,
        "pass_at_k_temperature": opts.pass_at.temperature,
        "seconds": (t0.elapsed().as_secs_f64() * 10.0).round() / 10.0,
    });
    outln!("{summary}");
    if let Some(dir) = out {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let mut lines = String::new();
        for s in &scored {
            lines.push_str(&serde_json::to_string(s)?);
            lines.push('\n');
        }
        std::fs::write(dir.join("eval_samples.jsonl"), lines)?;
        std::fs::write(dir.join("eval_summary.json"), format!("{summary}\n"))?;
        outln!("samples: {}", dir.join("eval_samples.jsonl").display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_coverage_counts_templates_with_a_pass() {
        let item = |template: &str, passed: bool| Scored {
            id: String::new(),
            template: template.into(),
            completion: String::new(),
            reward: 0.0,
            execution: 0.0,
            format: 0.0,
            passed,
        };
        let scored = [item("a", false), item("b", true), item("a", true), item("c", false)];
        assert_eq!(template_coverage(&scored), (3, 2));
        assert_eq!(template_coverage(&[]), (0, 0));
    }

    #[test]
    fn reference_targets_pass_and_a_wrong_body_fails_through_the_eval_scoring() {
        let world = code_world().unwrap();
        let items = world.items(Split::HeldOut, 4);
        let task = CodeTask::new().unwrap();
        let scored = |texts: Vec<String>| -> Vec<Scored> {
            let scores = task.score(&items, &texts);
            items.iter().zip(texts).zip(&scores).map(|((i, c), s)| Scored::new(i, c, s)).collect()
        };
        let good: Vec<String> = items.iter().map(TextItem::target).collect();
        assert!(scored(good).iter().all(|s| s.passed && s.format == 1.0 && s.execution == 1.0));
        let bad = vec!["```python\ndef f(x):\n    return None\n```".to_string(); 4];
        let bad = scored(bad);
        assert!(bad.iter().all(|s| !s.passed && s.format == 1.0 && s.execution == 0.0), "{bad:?}");
        let tok = Tokenizer::Char(CharTokenizer::ascii());
        let longest = longest_target(&world, &tok).unwrap().0;
        // The character models' completion region, 106, is this plus one EOS.
        assert_eq!(longest, 105);
    }
}
