//! The `drift` command line.

/// `println!` that ignores a closed stdout: `drift presets | head -1` ends quietly, and a
/// trainer whose stdout is closed keeps going and saves everything it produces (`println!`
/// panics on a broken pipe).
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// `print!` that ignores a closed stdout (see `outln!`).
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout(), $($arg)*);
    }};
}

mod cli;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// drift: RL fine-tuning of masked diffusion LMs and flow-matching image models.
///
/// One group-advantage and policy-loss core (GRPO, Dr. GRPO, DAPO, GSPO, ESPO, GDPO, StableDRL,
/// Flow-GRPO) on candle tensors, shared by both model families.
#[derive(Parser, Debug)]
#[command(name = "drift", version, about, long_about = None, after_help = AFTER_HELP)]
struct Cli {
    /// Where tensors live: cpu, cuda (GPU 0) or cuda:N. CUDA needs a build with
    /// `--features cuda`.
    #[arg(long, global = true, default_value = "cpu")]
    device: String,
    #[command(subcommand)]
    command: Option<Command>,
}

const AFTER_HELP: &str = "\
Examples:
  drift train flow                                   # the main job: Flow-GRPO on the shapes world
  drift train dllm --set recipe=espo --set steps=20  # a dLLM recipe on the code world
  drift sample dllm --model examples/checkpoints/dllm-code-v5 --prompt 'Write a Python function f(xs) that returns the sum of the even numbers in xs.'
  drift sample flow --model examples/checkpoints/flow-shapes-v2 --prompt 'a red circle left of a square' --out grid.png
  drift plot runs/flow-grpo/metrics.jsonl --keys reward/mean,clip/frac --out curves.png
  drift prompts flow --out shapes.jsonl              # the shapes world's prompts and split, to edit
  drift bench flow
  drift bench branch                                 # Flow-GRPO vs BranchGRPO: evaluations and time per iteration

Configs are TOML files; `--set key.path=value` overrides any field (values parsed as TOML).
Progress bars are drawn only when stderr is a terminal; otherwise (logs, CI, pipes) progress is
one plain line every 5% of the run. NO_COLOR turns the bar's colours off.
DRIFT_KEEP_FREED_MEMORY=0 leaves glibc's malloc at its defaults (by default drift keeps freed
memory for reuse: fewer page faults, resident memory stays at its peak).

Exit status: 0 success; 1 the run failed (I/O, a model error, a diverged loss); 2 bad usage
(an unknown flag or subcommand, a missing or invalid config file, an unknown config key, an
invalid value, a model folder that does not exist).";

#[derive(Subcommand, Debug)]
enum Command {
    /// Pretrain a model on a shipped world.
    #[command(subcommand)]
    Pretrain(PretrainCmd),
    /// RL fine-tuning of a pretrained model (Flow-GRPO, dLLM recipes).
    #[command(subcommand)]
    Train(TrainCmd),
    /// Evaluate a saved model on a shipped world's held-out split.
    #[command(subcommand)]
    Eval(EvalCmd),
    /// Sample from a saved model: a dLLM's completions or a DiT's images.
    #[command(subcommand)]
    Sample(SampleCmd),
    /// Plot metrics of a run's metrics.jsonl as PNG curves (one panel per metric).
    ///
    /// Example: drift plot runs/flow-grpo/metrics.jsonl --keys reward/mean,clip/frac --out c.png
    Plot {
        /// The JSONL metrics file (one object per line with a `step`).
        metrics: PathBuf,
        /// Comma-separated metric names (default: every numeric metric).
        #[arg(long, value_delimiter = ',')]
        keys: Vec<String>,
        /// Output PNG.
        #[arg(long, default_value = "curves.png")]
        out: PathBuf,
    },
    /// Throughput of the shipped models on this machine, one JSON line per case.
    ///
    /// Cases: matmul (f32 1024³ reference; 4096³ on a GPU), rng (one Flow-GRPO rollout
    /// step's keyed noise, 64 × 3072 normals), dllm (shipped code dLLM forward and
    /// forward+backward, 16 × 200 tokens), decode_cache (a random 50 M LLaDA decoding 128
    /// tokens at batch 1 with no cache and Fast-dLLM's prefix and dual caches; saves the model
    /// to runs/bench/llada-small-50m for benches/peer/decode_cache.py), flow (shipped DiT, 32
    /// images, 10-step ODE and SDE),
    /// branch (one RL iteration, rollout + update, of Flow-GRPO and the BranchGRPO presets,
    /// 16 prompts × 8 images: model evaluations and wall time), sd3 (one Flow-GRPO
    /// iteration of a random SD3.5 MMDiT with LoRA and VAE, group 8 at 512² with r 32 and
    /// bf16 on a GPU, a small config on the CPU unless DRIFT_BENCH_SD3=sd35-medium: wall time
    /// and peak host memory).
    /// Run from the repository root. Example: drift bench dllm flow --iters 5
    Bench {
        /// Cases to run (default: all).
        cases: Vec<String>,
        /// Timed repetitions per case (the median is reported).
        #[arg(long, default_value_t = 3)]
        iters: usize,
    },
    /// Write a shipped world's prompt set as a JSONL file to edit and train or evaluate on.
    #[command(subcommand)]
    Prompts(PromptsCmd),
    /// List the named policy-loss presets and their settings.
    Presets {
        /// Completion length used by the presets that need one (espo, gdpo, dr_grpo).
        #[arg(long, default_value_t = 256)]
        completion_len: usize,
    },
}

#[derive(Subcommand, Debug)]
enum TrainCmd {
    /// Flow-GRPO on the shapes world from the shipped base DiT (the main job).
    ///
    /// Prints base vs trained held-out strict accuracy and the paths of the metrics, curves and
    /// before/after grids. Resumes from the run directory's newest checkpoint.
    ///
    /// Example: drift train flow --config examples/configs/flow_grpo_shapes.toml --set seed=1
    Flow {
        /// TOML config (every field optional; defaults documented in drift_flow::grpo::config).
        #[arg(long)]
        config: Option<PathBuf>,
        /// Override a config value, e.g. `--set optim.adamw.lr=1e-4` (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
        /// Run directory (metrics.jsonl, prompts.jsonl, curves.png, eval/, checkpoints/, model/).
        #[arg(long, default_value = "runs/flow-grpo")]
        out: PathBuf,
        /// Resume a run directory whose checkpoint was made with other settings (refused
        /// otherwise, with the list of differences; steps, max_seconds, checkpoint_every,
        /// keep_last and eval_every may always change).
        #[arg(long)]
        force: bool,
    },
    /// dLLM RL on the code world from the shipped base dLLM: coupled-GRPO by default, or
    /// diffu_grpo, espo, gdpo, stable_drl (`--set recipe=espo`).
    ///
    /// Prints base vs trained held-out pass rate and the paths of the metrics and curves.
    /// Resumes from the run directory's newest checkpoint.
    ///
    /// Example: drift train dllm --set recipe=gdpo --set steps=20 --out runs/gdpo
    Dllm {
        /// TOML config (every field optional; defaults in drift_dllm::grpo::config; fields
        /// left unset take the recipe's values).
        #[arg(long)]
        config: Option<PathBuf>,
        /// Override a config value, e.g. `--set inner_iterations=4` (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
        /// Run directory (metrics.jsonl, curves.png, checkpoints/, model/, summary.json).
        #[arg(long, default_value = "runs/dllm-grpo")]
        out: PathBuf,
        /// Resume a run directory whose checkpoint was made with other settings (refused
        /// otherwise, with the list of differences; steps, max_seconds, checkpoint_every,
        /// keep_last and eval_every may always change).
        #[arg(long)]
        force: bool,
    },
    /// SAS: a learned decoding order for the frozen Sudoku dLLM, trained by GRPO over orderings
    /// (reward: the puzzle reward plus the committed tokens' log-likelihood).
    ///
    /// Prints the heuristic order's, the untrained and the trained policy's held-out solve
    /// rate; the policy is saved in OUT/model (load it with `drift eval sudoku --order-policy`).
    ///
    /// Example: drift train sas --set run.steps=30 --out runs/sas
    Sas {
        /// TOML config (every field optional; defaults in drift_dllm::sas::config).
        #[arg(long)]
        config: Option<PathBuf>,
        /// Override a config value, e.g. `--set dense_weight=0.5` (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
        /// Run directory (metrics.jsonl, curves.png, checkpoints/, model/, summary.json).
        #[arg(long, default_value = "runs/sas")]
        out: PathBuf,
        /// Resume a run directory whose checkpoint was made with other settings.
        #[arg(long)]
        force: bool,
    },
}

/// The dLLM decoding canvas, shared by `eval dllm` and `sample dllm`.
#[derive(clap::Args, Debug)]
struct CanvasArgs {
    /// Completion length (masks after the prompt). Default: the model's code completion
    /// region, the longest code-world target in its tokens plus one (106 for the character
    /// models, 38 for dllm-code-v4 and v5).
    #[arg(long)]
    gen_length: Option<usize>,
    /// Block length (default: one block of gen_length).
    #[arg(long)]
    block_length: Option<usize>,
    /// Denoising steps in total (default: gen_length, one token per step).
    #[arg(long)]
    steps: Option<usize>,
    /// Precision of the linear layers' products: f32, or bf16 on the AMX tiles of Intel Xeon
    /// CPUs of the 4th generation and later (both factors rounded to bf16, sums in f32, as
    /// PyTorch's bfloat16 inference; several times faster, and greedy decoding may differ
    /// from f32's at near-ties). Refused where the CPU has no AMX.
    #[arg(long, default_value = "f32", value_parser = ["f32", "bf16"])]
    matmul: String,
}

impl CanvasArgs {
    /// `(gen_length, block_length, steps)` with the defaults filled in for the model in
    /// `model_dir`.
    fn resolve(&self, model_dir: &std::path::Path) -> anyhow::Result<(usize, usize, usize)> {
        let l = match self.gen_length {
            Some(l) => l,
            None => cli::dllm::model_completion_len(model_dir)?,
        };
        Ok((l, self.block_length.unwrap_or(l), self.steps.unwrap_or(l)))
    }
}

#[derive(Subcommand, Debug)]
enum SampleCmd {
    /// Decode completions of prompts with a saved dLLM; one JSON line per completion.
    ///
    /// The prompt is given in drift's corpus format (`BOS prompt\n`), as pretraining saw it.
    ///
    /// Example: drift sample dllm --model examples/checkpoints/dllm-code-v5 --prompt 'Write a Python function f(xs) that returns the sum of the even numbers in xs.' --n 2 --temperature 0.7
    Dllm {
        /// Model directory (config.json + model.safetensors + tokenizer.json or drift_char_tokenizer.json).
        #[arg(long)]
        model: PathBuf,
        /// A prompt (repeatable).
        #[arg(long, required = true)]
        prompt: Vec<String>,
        #[command(flatten)]
        canvas: CanvasArgs,
        /// Position rule: low_confidence, margin, entropy, random, threshold, origin.
        #[arg(long, default_value = "low_confidence")]
        rule: String,
        /// Confidence threshold of the threshold rule.
        #[arg(long, default_value_t = 0.9)]
        tau: f64,
        /// Token temperature (0 = greedy).
        #[arg(long, default_value_t = 0.0)]
        temperature: f64,
        /// Completions per prompt.
        #[arg(long, default_value_t = 1)]
        n: usize,
        /// Seed of the sampling noise.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// A trained SAS order policy folder (`drift train sas`'s OUT/model): it chooses the
        /// positions in place of --rule (greedy unless --sample-order).
        #[arg(long)]
        order_policy: Option<PathBuf>,
        /// Sample the order policy's choices (Gumbel-top-k, keyed by --seed) instead of taking
        /// its top scores.
        #[arg(long, requires = "order_policy")]
        sample_order: bool,
    },
    /// Sample images of shapes-world prompts with a saved DiT; prints each image's verifier
    /// verdict as a JSON line and writes a captioned grid.
    ///
    /// Example: drift sample flow --model examples/checkpoints/flow-shapes-v2 --prompt 'a red circle left of a square' --n 4 --sampler flow_grpo --noise 0.7 --out grid.png
    Flow {
        /// Model directory (config.json + model.safetensors).
        #[arg(long)]
        model: PathBuf,
        /// A prompt in the shapes grammar (repeatable).
        #[arg(long, required = true)]
        prompt: Vec<String>,
        /// Images per prompt.
        #[arg(long, default_value_t = 4)]
        n: usize,
        /// Denoising steps.
        #[arg(long, default_value_t = 40)]
        steps: usize,
        /// Sampler: ode, flow_grpo, dance, cps.
        #[arg(long, default_value = "ode")]
        sampler: String,
        /// Noise level of the SDE sampler (a, or η for dance).
        #[arg(long, default_value_t = 0.7)]
        noise: f64,
        /// Classifier-free guidance scale (1 = none).
        #[arg(long, default_value_t = 1.0)]
        cfg: f64,
        /// Seed of the noise.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Output grid PNG.
        #[arg(long, default_value = "samples.png")]
        out: PathBuf,
    },
}

#[derive(Subcommand, Debug)]
enum PretrainCmd {
    /// Flow-matching pretraining of the small DiT on the shapes world.
    ///
    /// Example: drift pretrain flow --config examples/configs/pretrain_flow.toml --out runs/flow --set steps=200
    Flow {
        /// TOML config (every field optional; defaults documented in drift_flow::pretrain_run).
        #[arg(long)]
        config: Option<PathBuf>,
        /// Override a config value, e.g. `--set optim.adamw.lr=1e-3` (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
        /// Run directory (metrics.jsonl, curves.png, checkpoints/, model/). Resumes if present.
        #[arg(long, default_value = "runs/pretrain-flow")]
        out: PathBuf,
        /// Resume a run directory whose checkpoint was made with other settings (refused
        /// otherwise, with the list of differences; steps, max_seconds, checkpoint_every,
        /// keep_last and eval_every may always change).
        #[arg(long)]
        force: bool,
    },
    /// Masked-diffusion SFT pretraining of a tiny dLLM on the code world's train split.
    ///
    /// Example: drift pretrain dllm --config examples/configs/pretrain_dllm_code_v5.toml --out runs/dllm-code --set run.steps=200
    Dllm {
        /// TOML config (every field optional; defaults documented in drift_dllm::pretrain_run).
        #[arg(long)]
        config: Option<PathBuf>,
        /// Override a config value, e.g. `--set optim.adamw.lr=1e-3` (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
        /// Run directory (metrics.jsonl, curves.png, checkpoints/, model/). Resumes if present.
        #[arg(long, default_value = "runs/pretrain-dllm")]
        out: PathBuf,
        /// Resume a run directory whose checkpoint was made with other settings (refused
        /// otherwise, with the list of differences; steps, max_seconds, checkpoint_every,
        /// keep_last and eval_every may always change).
        #[arg(long)]
        force: bool,
    },
}

#[derive(Subcommand, Debug)]
enum PromptsCmd {
    /// The shapes world's prompts with their train / held-out split (seed 0, the split every
    /// shipped run uses), one `{"prompt": …, "category": …, "split": …}` per line. Edit it and
    /// pass it back with `drift train flow --set prompts=FILE` or `drift eval flow --prompts
    /// FILE`.
    ///
    /// Example: drift prompts flow --out shapes.jsonl
    Flow {
        /// Output JSONL file.
        #[arg(long, default_value = "shapes_prompts.jsonl")]
        out: PathBuf,
    },
}

#[derive(Subcommand, Debug)]
enum EvalCmd {
    /// GenEval-style strict accuracy of a DiT sampled with the ODE on the held-out prompts (or
    /// a JSONL prompt file), overall and per category.
    ///
    /// Example: drift eval flow --model examples/checkpoints/flow-shapes-v2 --steps 40
    Flow {
        /// Model directory (config.json + model.safetensors).
        #[arg(long)]
        model: PathBuf,
        /// ODE steps.
        #[arg(long, default_value_t = 40)]
        steps: usize,
        /// Classifier-free guidance scale (1 = none).
        #[arg(long, default_value_t = 1.0)]
        cfg: f64,
        /// Seed of the initial noise.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Directory for the image grid.
        #[arg(long)]
        out: Option<PathBuf>,
        /// A JSONL prompt file (`{"prompt": "3 red circles", "category": "counting"}` per line)
        /// to score instead of the world's held-out split.
        #[arg(long)]
        prompts: Option<PathBuf>,
        /// Images per category: each category's prompts repeated to at least this many.
        #[arg(long, default_value_t = 48)]
        per_category: usize,
    },
    /// Held-out pass rate of a dLLM on the code world: greedy low-confidence decoding of the
    /// held-out specs, scored by the sandboxed code reward (all tests pass = a pass).
    ///
    /// Example: drift eval dllm --model examples/checkpoints/dllm-code-v5 --n 64 --split held_out_templates
    Dllm {
        /// Model directory (config.json + model.safetensors + tokenizer.json or drift_char_tokenizer.json).
        #[arg(long)]
        model: PathBuf,
        /// Items scored (the first N of --split).
        #[arg(long, default_value_t = 256)]
        n: usize,
        #[command(flatten)]
        canvas: CanvasArgs,
        /// Rows decoded together.
        #[arg(long, default_value_t = 32)]
        batch: usize,
        /// Split scored: `held_out_items` (new constants of trained shapes),
        /// `held_out_templates` (shapes never trained on) or `train` (the pretraining
        /// templates).
        #[arg(long, default_value = "held_out_items", value_parser = ["held_out_items", "held_out_templates", "train"])]
        split: String,
        /// Score your own problems instead of the code world: a JSONL file with one
        /// {"prompt": …, "tests": [...]} per line (every line is scored, up to --n).
        #[arg(long)]
        data: Option<PathBuf>,
        /// Where the tests run: `auto` (drift's namespace jail, else bubblewrap, else refused),
        /// `namespaces`, `bwrap`, or `limits` (resource limits only: no filesystem or network
        /// jail).
        #[arg(long, default_value = "auto", value_parser = ["auto", "namespaces", "bwrap", "limits"])]
        sandbox: String,
        /// Also sample each item this many times at --temperature and report the unbiased
        /// pass@k (Chen et al. 2021) for every k of --k up to it; 0 = greedy pass@1 only.
        #[arg(long, default_value_t = 0)]
        samples: usize,
        /// Proposal temperature of the pass@k samples (the rollout's default).
        #[arg(long, default_value_t = 1.0)]
        temperature: f64,
        /// The k of pass@k, comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "1,5,10")]
        k: Vec<usize>,
        /// Directory for eval_samples.jsonl and eval_summary.json.
        #[arg(long)]
        out: Option<PathBuf>,
        /// A trained SAS order policy folder (`drift train sas`'s OUT/model): it chooses the
        /// positions, greedily, in place of low-confidence remasking.
        #[arg(long)]
        order_policy: Option<PathBuf>,
    },
    /// Held-out solve rate and cell accuracy of a Sudoku dLLM under one position rule (the
    /// order in which cells are committed), one JSON line per seed.
    ///
    /// Example: drift eval sudoku --model examples/checkpoints/dllm-sudoku4-v1 --rule margin
    Sudoku {
        /// Model directory (config.json + model.safetensors + tokenizer.json).
        #[arg(long)]
        model: PathBuf,
        /// Held-out puzzles scored (the first N).
        #[arg(long, default_value_t = 256)]
        n: usize,
        /// Board side: 4 or 9.
        #[arg(long, default_value_t = 4)]
        size: usize,
        /// Clues per puzzle: 5 by default (the RL tasks' setting; the shipped 4x4 base was
        /// pretrained on 8-clue puzzles); 0 = the world's default (8 for 4x4, 36 for 9x9).
        #[arg(long, default_value_t = 5)]
        clues: usize,
        /// Position rule: low_confidence, margin, entropy, random.
        #[arg(long, default_value = "low_confidence")]
        rule: String,
        /// Denoising steps (default: one token per step).
        #[arg(long)]
        steps: Option<usize>,
        /// Token temperature (0 = greedy).
        #[arg(long, default_value_t = 0.0)]
        temperature: f64,
        /// Seeds of the decode, comma-separated (the random rule and sampled tokens differ by
        /// seed).
        #[arg(long, value_delimiter = ',', default_value = "0")]
        seeds: Vec<u64>,
        /// Rows decoded together.
        #[arg(long, default_value_t = 64)]
        batch: usize,
        /// A trained SAS order policy folder (`drift train sas`'s OUT/model): it chooses the
        /// positions in place of --rule (greedy).
        #[arg(long)]
        order_policy: Option<PathBuf>,
        /// Sample the order policy's choices (Gumbel-top-k, keyed by --seeds) instead of taking
        /// its top scores.
        #[arg(long, requires = "order_policy")]
        sample_order: bool,
    },
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let dev = &cli::device::parse(&cli.device)?;
    match cli.command {
        None => {
            use clap::CommandFactory;
            Cli::command().print_help()?;
        }
        Some(Command::Sample(cmd)) => sample(cmd, dev)?,
        Some(Command::Plot { metrics, keys, out }) => {
            if !metrics.is_file() {
                return Err(cli::usage(format!("{}: no such metrics file", metrics.display())));
            }
            let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
            let plotted =
                drift::core::metrics::plot_metrics(&metrics, &keys, &out).map_err(|e| match e {
                    // A key the file lacks, or too many to draw: the command line is at fault.
                    drift::core::CoreError::Mismatch(m) => cli::usage(m),
                    other => other.into(),
                })?;
            outln!("{} ({})", out.display(), plotted.join(", "));
        }
        Some(Command::Bench { cases, iters }) => cli::bench::run(&cases, iters, dev)?,
        Some(Command::Presets { completion_len }) => {
            for name in drift::core::loss::PRESETS {
                let cfg = drift::core::loss::PolicyLossConfig::preset(name, completion_len)?;
                outln!("{name}: {cfg:?}");
            }
        }
        Some(Command::Prompts(PromptsCmd::Flow { out })) => cli::flow::write_prompts(&out)?,
        Some(Command::Pretrain(PretrainCmd::Flow { config, sets, out, force })) => {
            cli::flow::pretrain(&run_command(&config, &sets, &out, force), dev)?;
        }
        Some(Command::Pretrain(PretrainCmd::Dllm { config, sets, out, force })) => {
            cli::dllm::pretrain(&run_command(&config, &sets, &out, force), dev)?;
        }
        Some(Command::Train(TrainCmd::Flow { config, sets, out, force })) => {
            cli::flow::train(&run_command(&config, &sets, &out, force), dev)?;
        }
        Some(Command::Train(TrainCmd::Dllm { config, sets, out, force })) => {
            cli::dllm::train(&run_command(&config, &sets, &out, force), dev)?;
        }
        Some(Command::Train(TrainCmd::Sas { config, sets, out, force })) => {
            cli::sudoku::train_sas(&run_command(&config, &sets, &out, force), dev)?;
        }
        Some(Command::Eval(EvalCmd::Flow {
            model,
            steps,
            cfg,
            seed,
            out,
            prompts,
            per_category,
        })) => {
            let sampling = drift_flow::grpo::EvalSampling { steps, guidance: cfg, seed, batch: 32 };
            cli::flow::eval(&model, &sampling, prompts.as_deref(), per_category, out, dev)?;
        }
        Some(Command::Eval(EvalCmd::Dllm {
            model,
            n,
            canvas,
            batch,
            split,
            data,
            sandbox,
            samples,
            temperature,
            k,
            out,
            order_policy,
        })) => {
            let mode = serde_json::from_value(serde_json::Value::String(sandbox.clone()))
                .map_err(|e| cli::usage(format!("--sandbox {sandbox:?}: {e}")))?;
            let sandbox = drift::rewards::sandbox::SandboxConfig {
                mode,
                ..drift::rewards::sandbox::SandboxConfig::default()
            };
            cli::existing_dir(&model, "--model")?;
            let (gen_length, block_length, steps) = canvas.resolve(&model)?;
            use drift::rewards::worlds::code::CodeSplit;
            let split =
                CodeSplit::ALL.into_iter().find(|s| s.name() == split).ok_or_else(|| {
                    cli::usage(format!(
                        "--split {split:?}: expected held_out_items, held_out_templates or train"
                    ))
                })?;
            if !(temperature.is_finite() && temperature >= 0.0) {
                return Err(cli::usage(format!("--temperature {temperature}: expected >= 0")));
            }
            let pass_at = cli::dllm::PassAtK { samples, temperature, k };
            let opts = cli::dllm::EvalOptions {
                n,
                gen_length,
                block_length,
                steps,
                batch,
                split,
                data,
                sandbox,
                pass_at,
                order_policy,
                bf16_matmuls: canvas.matmul == "bf16",
            };
            cli::dllm::eval(&model, &opts, out.as_deref(), dev)?;
        }
        Some(Command::Eval(EvalCmd::Sudoku {
            model,
            n,
            size,
            clues,
            rule,
            steps,
            temperature,
            seeds,
            batch,
            order_policy,
            sample_order,
        })) => {
            cli::existing_dir(&model, "--model")?;
            let position = cli::sample::position_rule(&rule, 0.9)?;
            if !position.uses_quota() {
                return Err(cli::usage(format!(
                    "--rule {rule}: expected low_confidence, margin, entropy or random"
                )));
            }
            if !(temperature.is_finite() && temperature >= 0.0) {
                return Err(cli::usage(format!("--temperature {temperature}: expected >= 0")));
            }
            let world = drift::dllm::grpo::SudokuTaskConfig {
                size,
                clues,
                ..drift::dllm::grpo::SudokuTaskConfig::default()
            };
            let opts = cli::sudoku::SudokuEvalOptions {
                n,
                world,
                steps,
                position,
                seeds,
                temperature,
                batch,
                order_policy,
                sample_order,
            };
            cli::sudoku::eval(&model, &opts, dev)?;
        }
    }
    Ok(())
}

fn sample(cmd: SampleCmd, dev: &candle_core::Device) -> anyhow::Result<()> {
    match cmd {
        SampleCmd::Dllm {
            model,
            prompt,
            canvas,
            rule,
            tau,
            temperature,
            n,
            seed,
            order_policy,
            sample_order,
        } => {
            cli::existing_dir(&model, "--model")?;
            let (gen_length, block_length, steps) = canvas.resolve(&model)?;
            let s = cli::sample::DllmSampling {
                gen_length,
                block_length,
                steps,
                rule: cli::sample::position_rule(&rule, tau)?,
                temperature,
                n: n.max(1),
                seed,
                order_policy,
                sample_order,
                bf16_matmuls: canvas.matmul == "bf16",
            };
            cli::sample::dllm(&model, &prompt, &s, dev)
        }
        SampleCmd::Flow { model, prompt, n, steps, sampler, noise, cfg, seed, out } => {
            let step = cli::sample::step_kind(&sampler, noise)?;
            let s = cli::sample::FlowSampling { n: n.max(1), steps, step, guidance: cfg, seed };
            cli::sample::flow(&model, &prompt, &s, &out, dev)
        }
    }
}

/// The arguments every training command shares, borrowed for its handler.
fn run_command<'a>(
    config: &'a Option<PathBuf>,
    sets: &'a [String],
    out: &'a std::path::Path,
    force: bool,
) -> cli::RunCommand<'a> {
    cli::RunCommand { config: config.as_deref(), sets, out, force }
}

fn main() -> ExitCode {
    if std::env::var_os("DRIFT_KEEP_FREED_MEMORY").is_none_or(|v| v != "0") {
        drift_core::alloc::keep_freed_memory();
    }
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            let usage = e.chain().any(|c| c.downcast_ref::<cli::UsageError>().is_some());
            ExitCode::from(if usage { 2 } else { 1 })
        }
    }
}
