//! Errors of the dLLM decoder.

/// Everything that can go wrong while validating a decoding config or decoding a batch.
///
/// Every variant names the field or argument at fault and what was expected.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// A tensor operation failed inside candle (or inside the model).
    #[error("tensor operation failed: {0}")]
    Candle(#[from] candle_core::Error),
    /// An error of drift-core (keyed noise draws).
    #[error(transparent)]
    Core(#[from] drift_core::CoreError),
    /// A configuration value is out of its domain.
    #[error("invalid value for `{field}`: {value} ({expected})")]
    Config {
        /// The field at fault, as written in the TOML file.
        field: &'static str,
        /// The value given.
        value: String,
        /// What was expected.
        expected: String,
    },
    /// An argument of `decode` (prompts, row ids) does not fit.
    #[error("`{name}` is {got}, expected {expected}")]
    Input {
        /// The argument at fault.
        name: &'static str,
        /// What it is.
        got: String,
        /// What it should have been.
        expected: String,
    },
    /// An order policy returned a decision that breaks its contract.
    #[error("order policy at block {block}, step {step}: {reason}")]
    Policy {
        /// The block being decoded.
        block: usize,
        /// The step within the block.
        step: usize,
        /// What is wrong with the decision.
        reason: String,
    },
}

/// Result alias of the dLLM decoder.
pub type Result<T> = std::result::Result<T, DecodeError>;

pub(crate) fn config_err(
    field: &'static str,
    value: impl std::fmt::Display,
    expected: impl Into<String>,
) -> DecodeError {
    DecodeError::Config { field, value: value.to_string(), expected: expected.into() }
}
