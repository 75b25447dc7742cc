//! The error type of drift-dllm.

use std::path::PathBuf;

/// Everything that can go wrong in drift-dllm.
///
/// Every variant names the file, key or tensor at fault and what was expected, so a message
/// read in a training log points at the cause without a debugger.
#[derive(Debug, thiserror::Error)]
pub enum DllmError {
    /// A tensor operation failed inside candle.
    #[error("tensor operation failed: {0}")]
    Candle(#[from] candle_core::Error),

    /// Decoding failed (a bad decode config or prompt).
    #[error(transparent)]
    Decode(#[from] drift_samplers::dllm::DecodeError),

    /// A drift-core kernel or random draw failed.
    #[error(transparent)]
    Core(#[from] drift_core::CoreError),

    /// A file could not be read or written.
    #[error("cannot access {path}: {source}")]
    Io {
        /// The file or folder at fault.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },

    /// A JSON file (config.json, a shard index, a tokenizer file) is not what was expected.
    #[error("cannot parse {path}: {message}")]
    Json {
        /// The file at fault.
        path: PathBuf,
        /// What serde reported, with the line and column.
        message: String,
    },

    /// config.json names an architecture drift does not implement.
    #[error(
        "unknown architecture in {path}: model_type {model_type:?}, architectures {architectures:?}; \
         expected model_type \"llada\" (LLaDAModelLM) or \"Dream\" (DreamModel, also DiffuCoder)"
    )]
    UnknownArchitecture {
        /// The config file.
        path: PathBuf,
        /// Its `model_type`, if any.
        model_type: Option<String>,
        /// Its `architectures`, if any.
        architectures: Vec<String>,
    },

    /// A configuration value that is valid for the original code but not implemented here, or
    /// one that is out of its domain.
    #[error("config key `{key}` = {value}: {expected}")]
    Config {
        /// The key, as written in config.json.
        key: &'static str,
        /// The value found.
        value: String,
        /// What is supported or expected.
        expected: String,
    },

    /// A file a checkpoint needs is absent.
    #[error("no {file} in {dir}")]
    MissingFile {
        /// The folder searched.
        dir: PathBuf,
        /// The file (or kind of file) that is missing.
        file: String,
    },

    /// A checkpoint lacks a tensor the architecture needs.
    #[error("tensor `{tensor}` (shape {expected:?}) is missing from {source_files}")]
    MissingTensor {
        /// The full tensor name.
        tensor: String,
        /// The shape the model expected.
        expected: Vec<usize>,
        /// The weight file(s) searched.
        source_files: String,
    },

    /// A checkpoint tensor has a different shape from the one the config implies.
    #[error("tensor `{tensor}` in {source_files} has shape {got:?}, expected {expected:?}")]
    WrongShape {
        /// The full tensor name.
        tensor: String,
        /// The shape the model expected from config.json.
        expected: Vec<usize>,
        /// The shape stored in the file.
        got: Vec<usize>,
        /// The weight file(s) holding it.
        source_files: String,
    },

    /// A Hugging Face repository (or one of its files) is not in the local hub cache. drift
    /// never downloads.
    #[error(
        "`{file}` of `{repo_id}` (revision {revision}) is not in the Hugging Face cache at {cache}; \
         drift does not download: fetch it first (e.g. `huggingface-cli download {repo_id}`) or \
         set HF_HOME"
    )]
    NotInCache {
        /// The repository id, `owner/name`.
        repo_id: String,
        /// The revision looked up.
        revision: String,
        /// The file looked up.
        file: String,
        /// The hub cache folder searched.
        cache: PathBuf,
    },

    /// tokenizer.json could not be loaded or used.
    #[error("tokenizer {path}: {message}")]
    Tokenizer {
        /// The tokenizer file (or `<in memory>`).
        path: PathBuf,
        /// What the tokenizers crate reported.
        message: String,
    },

    /// Text holds a character the character-level vocabulary does not have.
    #[error("character {ch:?} at byte {position} is not in the vocabulary")]
    UnknownSymbol {
        /// The character.
        ch: char,
        /// Its byte offset in the text.
        position: usize,
    },

    /// A token id is not below the vocabulary size.
    #[error("token id {id} is out of range: the vocabulary has {vocab_size} entries")]
    TokenId {
        /// The id.
        id: u32,
        /// The vocabulary size.
        vocab_size: usize,
    },

    /// A tensor or slice argument has the wrong shape or dtype.
    #[error("`{name}` is {got}, expected {expected}")]
    Input {
        /// The argument at fault.
        name: &'static str,
        /// What it is (shape, length or dtype).
        got: String,
        /// What it should have been.
        expected: String,
    },
}

impl DllmError {
    /// Converts into a candle error for trait methods that return `candle_core::Result`
    /// (a candle error is passed through unchanged, anything else keeps its message).
    pub fn into_candle(self) -> candle_core::Error {
        match self {
            DllmError::Candle(e) => e,
            other => candle_core::Error::wrap(other),
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| DllmError::Io { path, source }
    }

    pub(crate) fn json(path: impl Into<PathBuf>) -> impl FnOnce(serde_json::Error) -> Self {
        let path = path.into();
        move |e| DllmError::Json { path, message: e.to_string() }
    }
}

/// Result alias of drift-dllm.
pub type Result<T> = std::result::Result<T, DllmError>;
