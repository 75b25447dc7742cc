//! The error type of drift-core.

/// Everything that can go wrong in drift-core.
///
/// Every variant names the argument or field at fault and what was expected, so a message
/// read in a training log points at the cause without a debugger.
#[derive(Debug, thiserror::Error)]
pub enum CoreError {
    /// A tensor operation failed inside candle.
    #[error("tensor operation failed: {0}")]
    Candle(#[from] candle_core::Error),

    /// A tensor argument has the wrong shape.
    #[error("`{name}` has shape {got:?}, expected {expected}")]
    Shape {
        /// The argument at fault.
        name: &'static str,
        /// The shape it has.
        got: Vec<usize>,
        /// What it should have been, in words (`"[N]"`, `"the shape of lp_new"`).
        expected: String,
    },

    /// A group id is not below the declared number of groups.
    #[error("group id {id} at sample {index} is out of range: there are {num_groups} groups")]
    GroupId {
        /// The offending id.
        id: u64,
        /// Its position in the batch.
        index: usize,
        /// The declared number of groups.
        num_groups: usize,
    },

    /// A leave-one-out baseline was asked of a group with a single sample.
    #[error(
        "group {group} has a single sample, so its leave-one-out baseline is undefined; \
         use `singleton = \"zero\"` to give such samples a zero advantage"
    )]
    SingletonGroup {
        /// The group with one sample.
        group: usize,
    },

    /// A configuration value is out of its domain.
    #[error("invalid value for `{field}`: {value} ({expected})")]
    Config {
        /// The field at fault, as written in the TOML file.
        field: &'static str,
        /// The value given.
        value: String,
        /// What was expected.
        expected: &'static str,
    },

    /// A checkpoint that cannot be written or read back as it was written.
    #[error("checkpoint {path}: {reason}")]
    Checkpoint {
        /// The checkpoint directory or file.
        path: std::path::PathBuf,
        /// What is wrong with it.
        reason: String,
    },

    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },

    /// Loss inputs that do not fit together (for example a precomputed KL with a log-prob KL
    /// estimator).
    #[error("{0}")]
    Mismatch(String),

    /// A run that trained nothing: every update was skipped for non-finite values.
    #[error("the run diverged: {0}")]
    Diverged(String),
}

/// Result alias of drift-core.
pub type Result<T> = std::result::Result<T, CoreError>;

/// Checks that `t` has exactly `dims`, naming `name` in the error.
pub(crate) fn expect_dims(
    t: &candle_core::Tensor,
    name: &'static str,
    dims: &[usize],
) -> Result<()> {
    if t.dims() != dims {
        return Err(CoreError::Shape {
            name,
            got: t.dims().to_vec(),
            expected: format!("{dims:?}"),
        });
    }
    Ok(())
}

/// Attaches a path to an I/O error.
pub(crate) fn io_err(
    path: impl Into<std::path::PathBuf>,
) -> impl FnOnce(std::io::Error) -> CoreError {
    let path = path.into();
    move |source| CoreError::Io { path, source }
}
