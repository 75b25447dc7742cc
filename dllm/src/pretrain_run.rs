//! The masked-diffusion SFT pretraining run: padded prompt/completion batches, the
//! [`pretrain`](crate::pretrain) objective, drift-core's optimizer, checkpoints and metrics,
//! and a saved model in the Hugging Face layout [`DiffusionLm::from_dir`] loads.
//!
//! **Row layout** (the same at training and decoding time, so a model trained here decodes
//! with a plain `prompt ‖ [MASK; completion_len]` canvas):
//!
//! ```text
//! [PAD … PAD] [BOS] prompt ids | completion ids [EOS … EOS]
//! ←── left padding to the batch's longest prompt ──→ ←─ completion_len ─→
//! ```
//!
//! Everything left of `|` is the prompt (never masked, never scored); the completion region
//! is the completion followed by EOS up to [`PretrainDllmConfig::completion_len`] tokens, all
//! of it scored (LLaDA's SFT: the model learns to end by filling the rest with EOS). No
//! attention mask is used: the padding is visible as ordinary tokens, as it is when decoding.

use std::path::{Path, PathBuf};
use std::time::Instant;

use candle_core::{Device, Tensor};
use drift_core::rng::RngKey;
use drift_core::train::{Finished, OptimConfig, Optimizer, ParamSet, Run, RunSettings, TailMean};
use serde::{Deserialize, Serialize};

use drift_samplers::dllm::Padding;

use crate::error::{DllmError, Result};
use crate::grpo::sudoku_task::{SudokuTaskConfig, TextWorld};
use crate::model::{DiffusionLm, LoadOptions, ModelConfig, TinySpec, VocabSpec};
use crate::pretrain::{masked_diffusion_loss_with, LossWeighting, MdmObjective};
use crate::tokenizer::bpe::BpeConfig;
use crate::tokenizer::{Tokenizer, BOS_ID, EOS_ID, PAD_ID};

/// Which architecture a freshly initialised model has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ArchitectureChoice {
    /// LLaDA (no shift, no biases).
    Llada,
    /// Dream (Qwen2 layout, shifted logits, q/k/v biases).
    Dream,
}

/// The shape of the model trained from scratch. Defaults are the `micro` size of
/// [`TinySize`](crate::model::TinySize) (about 2.7 M parameters with a 100-symbol vocabulary).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TinyModelConfig {
    /// Architecture. Default `llada`.
    pub architecture: ArchitectureChoice,
    /// Hidden size. Default 256.
    pub d_model: usize,
    /// Blocks. Default 4.
    pub n_layers: usize,
    /// Query heads. Default 4.
    pub n_heads: usize,
    /// Key/value heads (GQA when fewer than `n_heads`). Default 4.
    pub n_kv_heads: usize,
    /// SwiGLU width. Default 512.
    pub mlp_hidden: usize,
    /// Longest sequence written into config.json. Default 512.
    pub max_seq_len: usize,
}

impl Default for TinyModelConfig {
    fn default() -> Self {
        Self {
            architecture: ArchitectureChoice::Llada,
            d_model: 256,
            n_layers: 4,
            n_heads: 4,
            n_kv_heads: 4,
            mlp_hidden: 512,
            max_seq_len: 512,
        }
    }
}

impl TinyModelConfig {
    /// The Hugging Face config of this shape for `vocab`.
    pub fn model_config(&self, vocab: VocabSpec) -> ModelConfig {
        let spec = TinySpec {
            d_model: self.d_model,
            n_layers: self.n_layers,
            n_heads: self.n_heads,
            n_kv_heads: self.n_kv_heads,
            mlp_hidden: self.mlp_hidden,
            max_seq_len: self.max_seq_len,
        };
        match self.architecture {
            ArchitectureChoice::Llada => spec.llada(vocab),
            ArchitectureChoice::Dream => spec.dream(vocab),
        }
    }
}

/// Everything a dLLM pretraining run reads from its TOML file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PretrainDllmConfig {
    /// The model trained from scratch.
    pub model: TinyModelConfig,
    /// Optimizer, schedule, clipping, EMA.
    pub optim: OptimConfig,
    /// Rows per step. Default 32.
    pub batch: usize,
    /// Tokens of the completion region (completion + EOS fill); a longer completion is an
    /// error. Default 96.
    pub completion_len: usize,
    /// Lower bound ε of the masking ratio `t ~ U(ε, 1)`. Default 1e-3 (LLaDA).
    pub mask_eps: f32,
    /// How masked tokens are weighted: `"inverse_t"` (LLaDA's `1/t`, the default) or
    /// `"flat"` ([`LossWeighting`]).
    pub weighting: LossWeighting,
    /// How the left padding of shorter prompts is shown to the model: `"masked"` (hidden by
    /// the attention mask, so a row's output does not depend on its batch neighbours and one
    /// prompt alone decodes as in training; the default) or `"visible"` (seen as ordinary
    /// tokens, how `dllm-code-v0`…`v4` were trained). Saved as config.json's
    /// `"drift_padding"`, which every decode and evaluation of the model follows.
    pub padding: Padding,
    /// Length, seed (initialisation, data, masks), checkpoints and budget: `[run]`. Defaults:
    /// 2000 optimizer steps, seed 0, a checkpoint every 250 steps, 2 kept, no time limit.
    pub run: RunSettings,
    /// A saved model folder whose weights start the run instead of a fresh initialisation
    /// (continued pretraining with a fresh optimizer and schedule); its config.json must equal
    /// the `[model]` shape. Default none.
    pub init_from: Option<PathBuf>,
    /// The tokenizer built for the corpus (by the caller, e.g. `drift pretrain dllm`, on the
    /// training texts): a byte-level BPE (`[tokenizer.bpe]`, [`BpeConfig`]) or drift's ASCII
    /// character tokenizer (`tokenizer = "char"`, what the shipped `dllm-code-v0`…`v3` were
    /// trained with). Default BPE with 512 ids.
    pub tokenizer: TokenizerKind,
    /// The corpus: the train split of `"code"` (the default) or `"sudoku"` (`[sudoku]`).
    pub world: TextWorld,
    /// The Sudoku world when `world = "sudoku"` (size, clues, seed, held-out share; the
    /// solved bonus is the RL reward's and unused here).
    pub sudoku: SudokuTaskConfig,
}

/// Which tokenizer a pretraining run builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum TokenizerKind {
    /// drift's ASCII character tokenizer (100 ids).
    Char,
    /// A byte-level BPE trained on the corpus.
    Bpe(BpeConfig),
}

impl Default for TokenizerKind {
    fn default() -> Self {
        Self::Bpe(BpeConfig::default())
    }
}

impl Default for PretrainDllmConfig {
    fn default() -> Self {
        Self {
            model: TinyModelConfig::default(),
            optim: OptimConfig::default(),
            batch: 32,
            completion_len: 96,
            mask_eps: crate::pretrain::DEFAULT_EPS,
            weighting: LossWeighting::default(),
            padding: Padding::Masked,
            run: RunSettings { steps: 2000, checkpoint_every: 250, ..RunSettings::default() },
            init_from: None,
            tokenizer: TokenizerKind::default(),
            world: TextWorld::Code,
            sudoku: SudokuTaskConfig::default(),
        }
    }
}

impl PretrainDllmConfig {
    /// Checks the values that serde cannot, naming the field at fault.
    pub fn validate(&self) -> Result<()> {
        let bad = |key: &'static str, value: String, expected: &str| {
            Err(DllmError::Config { key, value, expected: expected.into() })
        };
        self.run.validate()?;
        self.optim.over_run(self.run.steps).validate()?;
        if self.batch == 0 {
            return bad("batch", "0".into(), "at least 1");
        }
        if self.completion_len == 0 {
            return bad("completion_len", "0".into(), "at least 1");
        }
        if !(self.mask_eps > 0.0 && self.mask_eps < 1.0) {
            return bad("mask_eps", self.mask_eps.to_string(), "in (0, 1)");
        }
        Ok(())
    }
}

/// One supervised example: prompt and completion token ids (no specials; the batcher adds
/// BOS, EOS fill and padding).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SftExample {
    /// The prompt's ids.
    pub prompt: Vec<u32>,
    /// The completion's ids.
    pub completion: Vec<u32>,
}

/// A padded batch in the module's row layout.
#[derive(Debug, Clone)]
pub struct SftBatch {
    /// `[B, P + completion_len]` u32 token ids.
    pub ids: Tensor,
    /// `P` for every row (left padding + BOS + prompt): the first completion position.
    pub prompt_lens: Vec<usize>,
    /// `[B, P + completion_len]` u8: 1 on the completion region.
    pub completion_mask: Tensor,
    /// `[B, P + completion_len]` u8: 0 on left padding, 1 elsewhere.
    pub attention_mask: Tensor,
}

/// The prompt part of a row: `[PAD; width − 1 − len] BOS prompt`, `width ≥ 1 + len`.
pub fn left_padded_prompt(prompt: &[u32], width: usize) -> Vec<u32> {
    let pad = width.saturating_sub(prompt.len() + 1);
    let mut row = vec![PAD_ID; pad];
    row.push(BOS_ID);
    row.extend_from_slice(prompt);
    row
}

/// The completion region: `completion` then EOS up to `len`; errors when it does not fit.
pub fn eos_filled(completion: &[u32], len: usize) -> Result<Vec<u32>> {
    if completion.len() > len {
        return Err(DllmError::Input {
            name: "completion",
            got: format!("{} tokens", completion.len()),
            expected: format!("at most completion_len = {len}"),
        });
    }
    let mut row = completion.to_vec();
    row.resize(len, EOS_ID);
    Ok(row)
}

impl SftBatch {
    /// Pads `examples` into the module's row layout with a completion region of
    /// `completion_len` tokens.
    pub fn new(examples: &[SftExample], completion_len: usize, device: &Device) -> Result<Self> {
        let p = 1 + examples.iter().map(|e| e.prompt.len()).max().unwrap_or(0);
        let t = p + completion_len;
        let (mut ids, mut comp, mut att) = (Vec::with_capacity(examples.len() * t), vec![], vec![]);
        for e in examples {
            ids.extend(left_padded_prompt(&e.prompt, p));
            ids.extend(eos_filled(&e.completion, completion_len)?);
            comp.extend((0..t).map(|j| u8::from(j >= p)));
            att.extend((0..t).map(|j| u8::from(j + 1 + e.prompt.len() >= p)));
        }
        let b = examples.len();
        Ok(Self {
            ids: Tensor::from_vec(ids, (b, t), device)?,
            prompt_lens: vec![p; b],
            completion_mask: Tensor::from_vec(comp, (b, t), device)?,
            attention_mask: Tensor::from_vec(att, (b, t), device)?,
        })
    }

    /// Tokens in the batch (`B · T`).
    pub fn tokens(&self) -> usize {
        self.ids.elem_count()
    }
}

/// What a finished run reports.
#[derive(Debug, Clone)]
pub struct PretrainDllmReport {
    /// Mean loss over the last 10% of `steps` (of this invocation; NaN when none ran).
    pub final_loss: f64,
    /// Parameters of the model.
    pub parameters: usize,
    /// Training throughput of this invocation, tokens (`B · T`, padding included) per second.
    pub tokens_per_s: f64,
    /// The step reached, wall time (of the whole invocation), `metrics.jsonl` and
    /// `curves.png`.
    pub run: Finished,
}

/// The model a run starts from: `cfg.init_from`'s weights (trainable) when set, after
/// checking its config equals `model_cfg`; otherwise a fresh initialisation under `key`.
fn initial_model(
    cfg: &PretrainDllmConfig,
    model_cfg: ModelConfig,
    key: RngKey,
    opts: &LoadOptions,
) -> Result<DiffusionLm> {
    let Some(dir) = &cfg.init_from else {
        return DiffusionLm::init(model_cfg, key.stream("init"), opts);
    };
    let model = DiffusionLm::from_dir(dir, opts)?;
    if *model.config() != model_cfg {
        return Err(DllmError::Config {
            key: "init_from",
            value: dir.display().to_string(),
            expected: format!("a model whose config.json matches [model]: {model_cfg:?}"),
        });
    }
    Ok(model)
}

/// Trains a masked diffusion LM from scratch with the SFT objective on
/// `data(step, batch) → batch examples` (a pure function of the step, so a resumed run sees
/// the same data), logging `loss/total`, `grad/norm`, `lr` and `perf/tokens_per_s` per step
/// to `run_dir/metrics.jsonl`, checkpointing into `run_dir/checkpoints` (resuming from the
/// newest valid one), and saving the final model with `tokenizer` into `run_dir/model`.
pub fn pretrain_dllm(
    cfg: &PretrainDllmConfig,
    config_text: &str,
    run_dir: &Path,
    device: &Device,
    tokenizer: &Tokenizer,
    mut data: impl FnMut(u64, usize) -> Result<Vec<SftExample>>,
) -> Result<PretrainDllmReport> {
    cfg.validate()?;
    let start = Instant::now();
    let key = RngKey::new(cfg.run.seed);
    let opts = LoadOptions { device: device.clone(), ..LoadOptions::trainable() };
    let model_cfg = cfg.model.model_config(tokenizer.vocab_spec()?).with_padding(cfg.padding);
    let model = initial_model(cfg, model_cfg, key, &opts)?.with_tokenizer(tokenizer.clone());
    let varmap = model.varmap().ok_or(DllmError::Config {
        key: "model",
        value: "frozen".into(),
        expected: "trainable weights".into(),
    })?;
    let mut opt = Optimizer::new(cfg.optim.over_run(cfg.run.steps), ParamSet::all(varmap))?;
    let (mut run, _) = Run::open(run_dir, cfg.run, config_text, "pretrain dllm", "step", &mut opt)?;
    let (mut tail, mut tokens) = (TailMean::last_tenth_of(cfg.run.steps), 0usize);
    let train_start = Instant::now();
    for step in run.steps() {
        let t0 = Instant::now();
        let batch = SftBatch::new(&data(step, cfg.batch)?, cfg.completion_len, device)?;
        let loss = masked_diffusion_loss_with(
            &model,
            &batch.ids,
            &batch.prompt_lens,
            &batch.completion_mask,
            (cfg.padding == Padding::Masked).then_some(&batch.attention_mask),
            key.stream("mask").step(step),
            MdmObjective { eps: cfg.mask_eps, weighting: cfg.weighting },
        )?;
        let (value, report) = opt.minimize(&loss)?;
        if let Some(reason) = report.skipped {
            run.println(&format!("step {step}: skipped ({reason:?})"));
        }
        tokens += batch.tokens();
        let tps = batch.tokens() as f64 / t0.elapsed().as_secs_f64().max(1e-9);
        run.log(
            step,
            &[
                ("loss/total", value),
                ("grad/norm", report.grad_norm),
                ("lr", report.lr),
                ("perf/tokens_per_s", tps),
            ],
        )?;
        tail.push(value);
        let end = run.end_of(step);
        if run.close_step(step, end, &opt, &[("loss", value), ("tok/s", tps)])?.is_break() {
            break;
        }
    }
    let train_seconds = train_start.elapsed().as_secs_f64();
    let model_dir = run.model_dir();
    match opt.ema() {
        Some(ema) => ema.with_weights(opt.params(), || model.save_pretrained(&model_dir))??,
        None => model.save_pretrained(&model_dir)?,
    }
    let finished = run.finish(&["loss/total", "grad/norm"])?;
    let final_loss = tail.mean();
    Ok(PretrainDllmReport {
        final_loss,
        parameters: model.num_parameters(),
        tokens_per_s: tokens as f64 / train_seconds.max(1e-9),
        run: Finished { seconds: start.elapsed().as_secs_f64(), ..finished },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn examples() -> Vec<SftExample> {
        vec![
            SftExample { prompt: vec![10, 11, 12], completion: vec![20, 21] },
            SftExample { prompt: vec![13], completion: vec![22, 23, 24] },
        ]
    }

    #[test]
    fn batches_left_pad_prompts_and_fill_completions_with_eos() {
        let b = SftBatch::new(&examples(), 4, &Device::Cpu).unwrap();
        let ids = b.ids.to_vec2::<u32>().unwrap();
        assert_eq!(ids[0], [BOS_ID, 10, 11, 12, 20, 21, EOS_ID, EOS_ID]);
        assert_eq!(ids[1], [PAD_ID, PAD_ID, BOS_ID, 13, 22, 23, 24, EOS_ID]);
        assert_eq!(b.prompt_lens, [4, 4]);
        let comp = b.completion_mask.to_vec2::<u8>().unwrap();
        assert_eq!(comp[1], [0, 0, 0, 0, 1, 1, 1, 1]);
        let att = b.attention_mask.to_vec2::<u8>().unwrap();
        assert_eq!(att[0], [1; 8]);
        assert_eq!(att[1], [0, 0, 1, 1, 1, 1, 1, 1]);
        let err = SftBatch::new(&examples(), 2, &Device::Cpu).unwrap_err().to_string();
        assert!(err.contains("completion_len = 2"), "{err}");
    }

    #[test]
    fn with_masked_padding_a_row_decodes_as_it_would_alone() {
        use candle_core::IndexOp;
        let tok = crate::tokenizer::CharTokenizer::ascii();
        let cfg = crate::model::TinySize::Nano.spec().llada(tok.vocab_spec());
        let model = DiffusionLm::init(cfg, RngKey::new(5), &LoadOptions::frozen()).unwrap();
        let both = SftBatch::new(&examples(), 4, &Device::Cpu).unwrap();
        let alone = SftBatch::new(&examples()[1..], 4, &Device::Cpu).unwrap();
        let logits = |b: &SftBatch, att: bool| {
            model.position_logits(&b.ids, att.then_some(&b.attention_mask)).unwrap()
        };
        let solo = logits(&alone, false).i(0).unwrap();
        // Row 1 has two padding columns in the pair: its real columns 2..8 are `alone`'s 0..6.
        let gap = |att| {
            let row = logits(&both, att).i((1, 2..8)).unwrap();
            (row - &solo).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap()
        };
        assert!(gap(true) < 1e-4, "masked padding changed the row by {}", gap(true));
        assert!(gap(false) > 1e-3, "visible padding should change it (else the test is blind)");
    }

    #[test]
    fn a_short_run_lowers_the_loss_saves_a_loadable_model_and_resumes() {
        let dir = tempfile::tempdir().unwrap();
        let tok = crate::tokenizer::CharTokenizer::new("abcdef=".chars()).unwrap();
        let cfg = PretrainDllmConfig {
            model: TinyModelConfig {
                d_model: 32,
                n_layers: 1,
                n_heads: 2,
                n_kv_heads: 2,
                mlp_hidden: 64,
                ..TinyModelConfig::default()
            },
            optim: OptimConfig {
                adamw: drift_core::train::AdamWConfig { lr: 3e-3, ..Default::default() },
                ..Default::default()
            },
            batch: 8,
            completion_len: 4,
            run: RunSettings { steps: 40, checkpoint_every: 20, ..RunSettings::default() },
            ..PretrainDllmConfig::default()
        };
        // "x=" → "x" repeated: learnable from the prompt.
        let data = |step: u64, b: usize| {
            Ok((0..b)
                .map(|i| {
                    let c = tok.encode(["a", "b", "c"][(step as usize + i) % 3]).unwrap();
                    let mut prompt = c.clone();
                    prompt.extend(tok.encode("=").unwrap());
                    SftExample { prompt, completion: [c.clone(), c].concat() }
                })
                .collect())
        };
        let half = PretrainDllmConfig { run: RunSettings { steps: 20, ..cfg.run }, ..cfg.clone() };
        let t = Tokenizer::Char(tok.clone());
        pretrain_dllm(&half, "", dir.path(), &Device::Cpu, &t, data).unwrap();
        let r = pretrain_dllm(&cfg, "", dir.path(), &Device::Cpu, &t, data).unwrap();
        let rows = drift_core::metrics::read_metrics(&r.run.metrics).unwrap();
        assert_eq!(rows.len(), 40, "the resumed run continues the metrics file");
        let mean = |r: std::ops::Range<usize>| {
            r.clone().map(|i| rows[i]["loss/total"].as_f64().unwrap()).sum::<f64>() / r.len() as f64
        };
        assert!(mean(30..40) < mean(0..10), "{} -> {}", mean(0..10), mean(30..40));
        let back = DiffusionLm::from_dir(&r.run.model_dir, &LoadOptions::frozen()).unwrap();
        assert!(matches!(back.tokenizer(), Some(Tokenizer::Char(t)) if *t == tok));
        assert_eq!(back.config().padding(), Padding::Masked, "the saved config says how");
        assert_eq!(back.num_parameters(), r.parameters);
    }
}
