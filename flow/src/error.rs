//! The error type of drift-flow.

/// What can go wrong in drift-flow.
#[derive(Debug, thiserror::Error)]
pub enum FlowModelError {
    /// A tensor operation failed inside candle.
    #[error("tensor operation failed: {0}")]
    Candle(#[from] candle_core::Error),
    /// An error of drift-core (RNG, optimizer, checkpoints).
    #[error(transparent)]
    Core(#[from] drift_core::CoreError),
    /// An error of the flow samplers.
    #[error(transparent)]
    Sampler(#[from] drift_samplers::flow::FlowError),
    /// A configuration value out of its domain.
    #[error("invalid value for `{field}`: {value} ({expected})")]
    Config {
        /// The field at fault.
        field: &'static str,
        /// The value given.
        value: String,
        /// What was expected.
        expected: String,
    },
    /// A file that cannot be read or parsed.
    #[error("{path}: {reason}")]
    File {
        /// The file.
        path: std::path::PathBuf,
        /// What is wrong.
        reason: String,
    },
}

/// A [`FlowModelError::File`] naming `path` and what is wrong with it.
pub(crate) fn file_err(path: &std::path::Path, reason: impl ToString) -> FlowModelError {
    FlowModelError::File { path: path.to_path_buf(), reason: reason.to_string() }
}

/// Result alias of drift-flow.
pub type Result<T> = std::result::Result<T, FlowModelError>;
