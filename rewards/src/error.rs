//! The error type of drift-rewards.

use std::path::PathBuf;

/// Everything that can go wrong in drift-rewards.
///
/// Every variant names the file, field or value at fault and what was expected. A wrong
/// *answer* is never an error (it is a low score); these are for inputs and environments that
/// prevent scoring.
#[derive(Debug, thiserror::Error)]
pub enum RewardError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },

    /// A line of a JSONL file did not parse into the expected schema.
    #[error("{path}:{line}: {message}")]
    Jsonl {
        /// The file.
        path: PathBuf,
        /// The 1-based line number.
        line: usize,
        /// What was wrong (serde's message names the field).
        message: String,
    },

    /// A configuration value is out of its domain.
    #[error("invalid value for `{field}`: {value} (expected {expected})")]
    Config {
        /// The field, as written in the TOML file.
        field: &'static str,
        /// The value given.
        value: String,
        /// What was expected.
        expected: String,
    },

    /// An input (a sample, a task, an item) is malformed.
    #[error("invalid {what}: expected {expected}")]
    Invalid {
        /// What was given.
        what: String,
        /// What was expected.
        expected: String,
    },

    /// A sandboxed subprocess could not be started or supervised.
    #[error("sandbox: {context}: {source}")]
    Sandbox {
        /// What was being done (`"spawn python3"`, `"create temp dir /tmp/…"`).
        context: String,
        /// The underlying error.
        source: std::io::Error,
    },
}
