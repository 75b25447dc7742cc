//! Errors of the flow samplers.

/// What can go wrong while building a schedule or integrating a flow.
#[derive(Debug, thiserror::Error)]
pub enum FlowError {
    /// A tensor operation failed inside candle (or inside the model).
    #[error("tensor operation failed: {0}")]
    Candle(#[from] candle_core::Error),
    /// An error of drift-core (keyed noise draws).
    #[error(transparent)]
    Core(#[from] drift_core::CoreError),
    /// A configuration value is out of its domain.
    #[error("invalid value for `{field}`: {value} ({expected})")]
    Config {
        /// The field at fault.
        field: &'static str,
        /// The value given.
        value: String,
        /// What was expected.
        expected: &'static str,
    },
    /// A step index past the schedule.
    #[error("step {step} is past the schedule's {steps} steps")]
    Step {
        /// The index asked for.
        step: usize,
        /// The schedule's number of steps.
        steps: usize,
    },
}

/// Result alias of the flow samplers.
pub type Result<T> = std::result::Result<T, FlowError>;
