//! What the sampler notebooks (`examples/notebooks/`) and their cargo examples call: the
//! studies themselves (decoding orders, Sudoku orders, SDE noise sweeps, advantage shapes) and the types that
//! show their results inline in evcxr (a [`Png`] and a [`Table`] print themselves through
//! evcxr's display protocol).
//!
//! A notebook cell stays thin: it builds inputs, calls one function here and displays the
//! returned table or picture. The same functions run under `cargo run --example …`, so a
//! failure points at library code.

pub mod advantages;
pub mod decoding;
mod display;
pub mod flow_sde;
pub mod sudoku;

pub use display::{colormap, Png, Table};

/// Errors of the notebook studies: those of the crates they call, plus bad arguments.
#[derive(Debug, thiserror::Error)]
pub enum StudyError {
    /// A tensor operation failed.
    #[error(transparent)]
    Candle(#[from] candle_core::Error),
    /// The core (advantages, losses, plots) refused.
    #[error(transparent)]
    Core(#[from] drift_core::CoreError),
    /// A dLLM model or task call failed.
    #[error(transparent)]
    Dllm(#[from] drift_dllm::DllmError),
    /// A dLLM decoding call failed.
    #[error(transparent)]
    Decode(#[from] drift_samplers::dllm::DecodeError),
    /// A flow model or task call failed.
    #[error(transparent)]
    Flow(#[from] drift_flow::FlowModelError),
    /// A flow sampler call failed.
    #[error(transparent)]
    FlowSampler(#[from] drift_samplers::flow::FlowError),
    /// A reward or image call failed.
    #[error(transparent)]
    Reward(#[from] drift_rewards::RewardError),
    /// An image operation failed.
    #[error(transparent)]
    Image(#[from] drift_rewards::image::ImageError),
    /// A file could not be written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// An argument out of range.
    #[error("{name} = {value}: expected {expected}")]
    Argument {
        /// The argument.
        name: &'static str,
        /// Its value.
        value: String,
        /// What was expected.
        expected: String,
    },
}

/// Result alias of the notebook studies.
pub type Result<T> = std::result::Result<T, StudyError>;
