//! The `drift` command line.

use clap::Parser;

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

#[derive(clap::Subcommand, Debug)]
enum Command {
    /// List the named policy-loss presets and their settings.
    Presets {
        /// Completion length used by the presets that need one (espo, gdpo, dr_grpo).
        #[arg(long, default_value_t = 256)]
        completion_len: usize,
    },
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
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
    }
    Ok(())
}
