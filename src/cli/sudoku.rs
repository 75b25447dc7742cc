//! The Sudoku world for dLLMs (`world = "sudoku"` in `drift pretrain dllm` and `drift train
//! dllm`, and `drift eval sudoku`).
//!
//! **Corpus format** (pretraining, evaluation and RL rollouts alike): the prompt is
//! `Solve this 4x4 sudoku (. is empty):\n` and the puzzle's rows, the completion
//! `<answer>\n` + the solution's rows + `\n</answer>` (drift-rewards' `SudokuItem`), rows laid
//! out as `drift_dllm::pretrain_run` documents. The tokenizer is a byte-level BPE trained on
//! the train split's texts with every digit its own token, so each cell is one position the
//! decoder (and an order policy) commits on its own.

use std::path::Path;

use anyhow::Result;
use candle_core::Device;
use drift_dllm::grpo::{
    train_dllm_grpo, DllmGrpoConfig, SudokuTaskConfig, SudokuTextTask, TextTask,
};
use drift_dllm::model::{DiffusionLm, LoadOptions, ModelConfig};
use drift_dllm::pretrain_run::{pretrain_dllm, PretrainDllmConfig, SftExample, TokenizerKind};
use drift_dllm::sas::{evaluate_order, OrderEval, SasConfig};
use drift_dllm::tokenizer::bpe::train_bpe;
use drift_dllm::tokenizer::{CharTokenizer, Tokenizer};
use drift_rewards::worlds::sudoku::{SudokuItem, SudokuWorld};
use drift_rewards::worlds::{Split, TextItem};
use drift_samplers::dllm::OrderPolicy;
use drift_samplers::dllm::{DecodeConfig, PositionRule};

/// Train items whose texts train the BPE tokenizer.
const TOKENIZER_ITEMS: u64 = 2000;

/// Items (of each split) probed for the longest target.
const PROBE_ITEMS: u64 = 512;

fn world(cfg: &SudokuTaskConfig) -> Result<SudokuWorld> {
    cfg.world().map_err(|e| super::usage(e.to_string()))
}

/// The tokenizer `kind` for the Sudoku corpus: drift's ASCII characters, or a BPE trained
/// on the prompts and targets of the first train items, digits always split.
fn corpus_tokenizer(world: &SudokuWorld, kind: TokenizerKind) -> Result<Tokenizer> {
    Ok(match kind {
        TokenizerKind::Char => Tokenizer::Char(CharTokenizer::ascii()),
        TokenizerKind::Bpe(mut bpe) => {
            bpe.individual_digits = true;
            let texts: Vec<String> = (0..TOKENIZER_ITEMS)
                .map(|k| world.item(Split::Train, k))
                .flat_map(|i| [i.prompt(), i.target()])
                .collect();
            let tok = train_bpe(&texts, &bpe).map_err(|e| super::usage(e.to_string()))?;
            Tokenizer::Hf(Box::new(tok))
        }
    })
}

/// The longest target in tokens over the first items of both splits.
fn longest_target(world: &SudokuWorld, tok: &Tokenizer) -> Result<usize> {
    let mut longest = 0;
    for split in [Split::Train, Split::HeldOut] {
        for k in 0..PROBE_ITEMS {
            longest = longest.max(tok.encode(&world.item(split, k).target())?.len());
        }
    }
    Ok(longest)
}

/// Refuses, before any work, a canvas of `gen_length` tokens shorter than a Sudoku answer
/// with its EOS in the task's tokenizer.
fn check_answer_fits(task: &SudokuTextTask, gen_length: usize) -> Result<()> {
    let need = longest_target(task.world(), task.tokenizer())? + 1;
    if gen_length < need {
        return Err(super::usage(format!(
            "decode.gen_length = {gen_length} is shorter than a Sudoku answer with its EOS \
             ({need} tokens of this model's tokenizer)"
        )));
    }
    Ok(())
}

fn example(tok: &Tokenizer, item: &SudokuItem) -> drift_dllm::Result<SftExample> {
    Ok(SftExample { prompt: tok.encode(&item.prompt())?, completion: tok.encode(&item.target())? })
}

/// `drift pretrain dllm` with `world = "sudoku"`: masked-diffusion SFT on the Sudoku train
/// split (puzzle → solution).
pub fn pretrain(
    cmd: &super::RunCommand<'_>,
    cfg: &PretrainDllmConfig,
    text: &str,
    dev: &Device,
) -> Result<()> {
    let world = world(&cfg.sudoku)?;
    let tok = corpus_tokenizer(&world, cfg.tokenizer)?;
    let longest = longest_target(&world, &tok)?;
    if longest > cfg.completion_len {
        return Err(super::usage(format!(
            "completion_len = {} is shorter than the longest Sudoku target ({longest} tokens); \
             set completion_len >= {longest}",
            cfg.completion_len
        )));
    }
    cmd.prepare_run_dir(text)?;
    let report = pretrain_dllm(cfg, text, cmd.out, dev, &tok, |step, b| {
        (0..b as u64)
            .map(|i| example(&tok, &world.item(Split::Train, step * b as u64 + i)))
            .collect()
    })?;
    super::dllm::print_pretrain_report(&report, cfg.run.steps)
}

/// `drift train dllm` with `world = "sudoku"`: a dLLM RL recipe on the Sudoku world from a
/// Sudoku base model.
pub fn train(
    cmd: &super::RunCommand<'_>,
    cfg: &DllmGrpoConfig,
    text: &str,
    dev: &Device,
) -> Result<()> {
    let rc = cfg.resolved().map_err(|e| super::usage(e.to_string()))?;
    let task = SudokuTextTask::new(&cfg.sudoku, super::dllm::base_tokenizer(&cfg.base)?)
        .map_err(|e| super::usage(e.to_string()))?;
    let model_cfg = ModelConfig::from_file(&cfg.base.join("config.json"))
        .map_err(|e| super::usage(format!("base model `base = {}`: {e}", cfg.base.display())))?;
    check_answer_fits(&task, cfg.decode.gen_length)?;
    let mut probe = task.eval_items(cfg.eval_items);
    probe.extend((0..256).map(|i| task.train_item(cfg.run.seed, i)));
    let mut longest = 0;
    for item in &probe {
        longest = longest.max(task.prompt_ids(item)?.len());
    }
    super::dllm::check_decode_fits(
        &model_cfg,
        "decode.gen_length / prompts_per_step × group_size",
        longest,
        cfg.decode.gen_length,
        cfg.prompts_per_step.saturating_mul(rc.parts.group_size),
    )?;
    cmd.prepare_run_dir(text)?;
    let r = train_dllm_grpo(cfg, text, &task, cmd.out, dev)?;
    super::dllm::print_rl_report(cfg, &rc, &r, "held-out puzzles");
    super::print_finished(&r.run)
}

/// How `drift eval sudoku` decodes.
#[derive(Debug, Clone)]
pub struct SudokuEvalOptions {
    /// Held-out puzzles scored (the first `n`).
    pub n: usize,
    /// The world (size, clues, seed, held-out share).
    pub world: SudokuTaskConfig,
    /// Denoising steps (default: one token per step).
    pub steps: Option<usize>,
    /// The position rule (low-confidence, margin, entropy, random).
    pub position: PositionRule,
    /// Seeds of the decode (the random rule and sampled proposals differ by seed; greedy
    /// deterministic rules give the same result for every seed).
    pub seeds: Vec<u64>,
    /// Proposal temperature (0 = greedy).
    pub temperature: f64,
    /// Rows decoded together.
    pub batch: usize,
    /// A trained SAS order policy folder, in place of `position`.
    pub order_policy: Option<std::path::PathBuf>,
    /// Sample the policy's choices (keyed by the seed) instead of its greedy top scores.
    pub sample_order: bool,
}

/// `drift eval sudoku`: held-out solve rate and cell accuracy of a Sudoku model under one
/// position rule, for each seed, as one JSON line each.
pub fn eval(model_dir: &Path, opts: &SudokuEvalOptions, dev: &Device) -> Result<()> {
    let policy = opts
        .order_policy
        .as_deref()
        .map(|d| super::sample::load_order_policy(d, dev))
        .transpose()?;
    let load = LoadOptions { device: dev.clone(), ..LoadOptions::frozen() };
    let model = DiffusionLm::from_dir(model_dir, &load)?;
    let task = SudokuTextTask::new(&opts.world, super::dllm::base_tokenizer(model_dir)?)
        .map_err(|e| super::usage(e.to_string()))?;
    let gen_length = longest_target(task.world(), task.tokenizer())? + 1;
    let items = task.eval_items(opts.n);
    let mut longest = 0;
    for item in &items {
        longest = longest.max(task.prompt_ids(item)?.len());
    }
    super::dllm::check_decode_fits(
        model.config(),
        "--batch",
        longest,
        gen_length,
        opts.batch.min(items.len()),
    )?;
    let greedy = policy.as_ref().map(|p| p.greedy());
    for &seed in &opts.seeds {
        let t0 = std::time::Instant::now();
        let mut cfg = DecodeConfig {
            gen_length,
            block_length: gen_length,
            steps: opts.steps.unwrap_or(gen_length),
            position: opts.position,
            stop_tokens: vec![drift_dllm::tokenizer::EOS_ID],
            ..DecodeConfig::default()
        };
        cfg.proposal.temperature = opts.temperature;
        let order = match (&policy, &greedy) {
            (Some(p), _) if opts.sample_order => Some(p as &dyn OrderPolicy),
            (_, Some(g)) => Some(g as &dyn OrderPolicy),
            _ => None,
        };
        let r = evaluate_order(&model, &task, &items, &cfg, order, opts.batch, seed)?;
        let summary = serde_json::json!({
            "eval": format!("dllm/sudoku{}/held_out", opts.world.size),
            "model": model_dir.display().to_string(),
            "position": match &opts.order_policy {
                Some(dir) if opts.sample_order => {
                    serde_json::json!(format!("sas-sampled:{}", dir.display()))
                }
                Some(dir) => serde_json::json!(format!("sas:{}", dir.display())),
                None => serde_json::json!(opts.position),
            },
            "seed": seed,
            "temperature": opts.temperature,
            "puzzles": r.puzzles,
            "solve_rate": r.solve_rate,
            "cell_accuracy": r.cell_accuracy,
            "gen_length": gen_length,
            "steps": cfg.steps,
            "seconds": (t0.elapsed().as_secs_f64() * 10.0).round() / 10.0,
        });
        outln!("{summary}");
    }
    Ok(())
}

/// `drift train sas`: an order policy for the frozen Sudoku model (drift_dllm::sas).
pub fn train_sas(cmd: &super::RunCommand<'_>, dev: &Device) -> Result<()> {
    let (cfg, text): (SasConfig, String) = cmd.load()?;
    cfg.validate().map_err(|e| super::usage(e.to_string()))?;
    if !cfg.base.join("config.json").exists() {
        return Err(super::usage(format!(
            "base model `base = {}` has no config.json (pretrain one with `drift pretrain dllm \
             --config examples/configs/pretrain_dllm_sudoku4.toml`)",
            cfg.base.display()
        )));
    }
    let tok = super::dllm::base_tokenizer(&cfg.base)?;
    let task = SudokuTextTask::new(&cfg.sudoku, tok).map_err(|e| super::usage(e.to_string()))?;
    check_answer_fits(&task, cfg.decode.gen_length)?;
    cmd.prepare_run_dir(&text)?;
    let r = drift_dllm::sas::train_sas(&cfg, &text, cmd.out, dev)?;
    super::print_stopped(&r.run, cfg.run.steps, "iteration");
    let line = |name: &str, e: &OrderEval| {
        outln!(
            "{name}: solve rate {:.1}%, cell accuracy {:.1}% ({} held-out puzzles)",
            100.0 * e.solve_rate,
            100.0 * e.cell_accuracy,
            e.puzzles
        )
    };
    line(&format!("heuristic ({:?})", cfg.decode.position), &r.heuristic);
    line("untrained policy", &r.base);
    line("trained policy", &r.trained);
    super::print_finished(&r.run)
}
