//! The `drift` command line.

mod cli;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// drift: RL fine-tuning of masked diffusion LMs and flow-matching image models.
///
/// One group-advantage and policy-loss core (GRPO, Dr. GRPO, DAPO, GSPO, ESPO, GDPO, StableDRL,
/// Flow-GRPO) on candle tensors, shared by both model families.
#[derive(Parser, Debug)]
#[command(name = "drift", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

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
    },
    /// Masked-diffusion SFT pretraining of a tiny dLLM on the code world's train split.
    ///
    /// Example: drift pretrain dllm --config examples/configs/pretrain_dllm_code.toml --out runs/dllm-code --set steps=200
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
    },
}

#[derive(Subcommand, Debug)]
enum EvalCmd {
    /// GenEval-style strict accuracy of a DiT sampled with the ODE on the held-out prompts.
    ///
    /// Example: drift eval flow --model examples/checkpoints/flow-shapes --steps 40
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
    },
    /// Held-out pass rate of a dLLM on the code world: greedy low-confidence decoding of the
    /// held-out specs, scored by the sandboxed code reward (all tests pass = a pass).
    ///
    /// Example: drift eval dllm --model examples/checkpoints/dllm-code-v0 --n 256
    Dllm {
        /// Model directory (config.json + model.safetensors + drift_char_tokenizer.json).
        #[arg(long)]
        model: PathBuf,
        /// Held-out items scored (the first N of the held-out split).
        #[arg(long, default_value_t = 256)]
        n: usize,
        /// Completion length (masks after the prompt).
        #[arg(long, default_value_t = cli::dllm::CODE_COMPLETION_LEN)]
        gen_length: usize,
        /// Block length (default: one block of gen_length).
        #[arg(long)]
        block_length: Option<usize>,
        /// Denoising steps in total (default: gen_length, one token per step).
        #[arg(long)]
        steps: Option<usize>,
        /// Rows decoded together.
        #[arg(long, default_value_t = 32)]
        batch: usize,
        /// Split scored: `held_out` (unseen templates) or `train` (the pretraining templates).
        #[arg(long, default_value = "held_out", value_parser = ["held_out", "train"])]
        split: String,
        /// Directory for eval_samples.jsonl and eval_summary.json.
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        None => {
            use clap::CommandFactory;
            Cli::command().print_help()?;
        }
        Some(Command::Presets { completion_len }) => {
            for name in drift::core::loss::PRESETS {
                let cfg = drift::core::loss::PolicyLossConfig::preset(name, completion_len)?;
                println!("{name}: {cfg:?}");
            }
        }
        Some(Command::Pretrain(PretrainCmd::Flow { config, sets, out })) => {
            cli::flow::pretrain(config.as_deref(), &sets, &out)?;
        }
        Some(Command::Pretrain(PretrainCmd::Dllm { config, sets, out })) => {
            cli::dllm::pretrain(config.as_deref(), &sets, &out)?;
        }
        Some(Command::Train(TrainCmd::Flow { config, sets, out })) => {
            cli::flow::train(config.as_deref(), &sets, &out)?;
        }
        Some(Command::Train(TrainCmd::Dllm { config, sets, out })) => {
            cli::dllm::train(config.as_deref(), &sets, &out)?;
        }
        Some(Command::Eval(EvalCmd::Flow { model, steps, cfg, seed, out })) => {
            cli::flow::eval(&model, steps, cfg, seed, out)?;
        }
        Some(Command::Eval(EvalCmd::Dllm {
            model,
            n,
            gen_length,
            block_length,
            steps,
            batch,
            split,
            out,
        })) => {
            let block_length = block_length.unwrap_or(gen_length);
            let steps = steps.unwrap_or(gen_length);
            let split = if split == "train" {
                drift::rewards::worlds::Split::Train
            } else {
                drift::rewards::worlds::Split::HeldOut
            };
            let opts = cli::dllm::EvalOptions { n, gen_length, block_length, steps, batch, split };
            cli::dllm::eval(&model, &opts, out.as_deref())?;
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}
