//! The error type of the shapes world.

use std::path::PathBuf;

/// Everything that can go wrong in the shapes world: parsing prompts, validating their
/// structure, reading prompt sets and checking images handed to the verifier.
///
/// Every message names the word, file, line or value at fault and what was expected.
#[derive(Debug, thiserror::Error)]
pub enum ShapesError {
    /// A prompt contains a word outside the shapes vocabulary.
    #[error(
        "unknown word `{word}` at position {position} in prompt {prompt:?}; known words: {known}"
    )]
    UnknownWord {
        /// The offending word.
        word: String,
        /// Its 1-based position among the prompt's words.
        position: usize,
        /// The whole prompt.
        prompt: String,
        /// The vocabulary, comma-separated.
        known: String,
    },

    /// A prompt uses known words in an order the grammar does not allow.
    #[error("prompt {prompt:?} does not follow the shapes grammar: {message}")]
    Grammar {
        /// The whole prompt.
        prompt: String,
        /// What was expected where, in words.
        message: String,
    },

    /// A structured prompt breaks a rule of the world (distinct objects, object budget, counts).
    #[error("invalid shapes prompt: {0}")]
    InvalidPrompt(String),

    /// An image handed to the shapes world is malformed.
    #[error(transparent)]
    Image(#[from] crate::image::ImageError),

    /// A prompt-set file could not be read or written.
    #[error("prompt file {}: {source}", path.display())]
    Io {
        /// The file at fault.
        path: PathBuf,
        /// The underlying I/O error.
        source: std::io::Error,
    },

    /// A line of a prompt-set JSONL file is malformed.
    #[error("prompt file {}, line {line}: {message}", path.display())]
    Jsonl {
        /// The file at fault.
        path: PathBuf,
        /// The 1-based line number.
        line: usize,
        /// What is wrong with it.
        message: String,
    },
}

/// The result type of the shapes world.
pub type Result<T> = std::result::Result<T, ShapesError>;

impl From<ShapesError> for crate::RewardError {
    /// File errors keep their kind; prompt and image errors become
    /// [`crate::RewardError::Invalid`] with the shapes message.
    fn from(e: ShapesError) -> Self {
        match e {
            ShapesError::Io { path, source } => crate::RewardError::Io { path, source },
            ShapesError::Jsonl { path, line, message } => {
                crate::RewardError::Jsonl { path, line, message }
            }
            ShapesError::Image(e) => e.into(),
            other => crate::RewardError::Invalid {
                what: format!("shapes prompt ({other})"),
                expected: "a prompt of the shapes grammar".to_string(),
            },
        }
    }
}
