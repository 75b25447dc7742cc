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
        Some(Command::Eval(EvalCmd::Flow { model, steps, cfg, seed, out })) => {
            cli::flow::eval(&model, steps, cfg, seed, out)?;
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
