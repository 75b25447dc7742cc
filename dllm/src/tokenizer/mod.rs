//! Tokenizers: a Hugging Face `tokenizer.json` (through the tokenizers crate) for downloaded
//! checkpoints and for drift's shipped models (a byte-level BPE trained by [`bpe`]), and
//! drift's character-level tokenizer, kept for unit tests and the older shipped models.
//!
//! **Character tokenizer file format** ([`CHAR_TOKENIZER_FILE`], a small JSON file of drift's
//! own, saved next to config.json):
//! ```json
//! {"format": "drift-char-tokenizer", "version": 1,
//!  "special": {"pad": 0, "mask": 1, "bos": 2, "eos": 3},
//!  "symbols": ["\n", " ", "!", …]}
//! ```
//! Ids `0..4` are the special tokens in that order; symbol `k` has id `4 + k`. Every symbol is
//! one Unicode scalar value; text is encoded character by character with no normalisation.

pub mod bpe;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{DllmError, Result};
use crate::model::save::write_atomic;
use crate::model::VocabSpec;

/// File name of a Hugging Face tokenizer.
pub const HF_TOKENIZER_FILE: &str = "tokenizer.json";
/// File name of drift's character tokenizer.
pub const CHAR_TOKENIZER_FILE: &str = "drift_char_tokenizer.json";
/// The `format` tag of a character tokenizer file.
const FORMAT: &str = "drift-char-tokenizer";

/// Id of the padding token.
pub const PAD_ID: u32 = 0;
/// Id of the mask token.
pub const MASK_ID: u32 = 1;
/// Id of the beginning-of-sequence token.
pub const BOS_ID: u32 = 2;
/// Id of the end-of-sequence token.
pub const EOS_ID: u32 = 3;
/// Number of special tokens before the symbols.
pub const NUM_SPECIAL: u32 = 4;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Special {
    pad: u32,
    mask: u32,
    bos: u32,
    eos: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct CharFile {
    format: String,
    version: u32,
    special: Special,
    symbols: Vec<char>,
}

/// A character-level tokenizer: one id per character, with pad, mask, bos and eos specials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CharTokenizer {
    symbols: Vec<char>,
    index: HashMap<char, u32>,
}

impl CharTokenizer {
    /// A tokenizer over `symbols` (in id order after the specials); duplicates are an error.
    pub fn new(symbols: impl IntoIterator<Item = char>) -> Result<Self> {
        let symbols: Vec<char> = symbols.into_iter().collect();
        let mut index = HashMap::with_capacity(symbols.len());
        for (k, &ch) in symbols.iter().enumerate() {
            if index.insert(ch, NUM_SPECIAL + k as u32).is_some() {
                return Err(DllmError::Config {
                    key: "symbols",
                    value: format!("{ch:?}"),
                    expected: "each symbol listed once".into(),
                });
            }
        }
        Ok(Self { symbols, index })
    }

    /// Newline plus printable ASCII (`' '..='~'`): 96 symbols, 100 ids.
    pub fn ascii() -> Self {
        let symbols: Vec<char> = std::iter::once('\n').chain(' '..='~').collect();
        let index = symbols.iter().enumerate().map(|(k, &c)| (c, NUM_SPECIAL + k as u32)).collect();
        Self { symbols, index }
    }

    /// Number of ids (specials + symbols).
    pub fn vocab_size(&self) -> usize {
        NUM_SPECIAL as usize + self.symbols.len()
    }

    /// The mask id.
    pub fn mask_id(&self) -> u32 {
        MASK_ID
    }

    /// Vocabulary size and special ids, for writing a model config.
    pub fn vocab_spec(&self) -> VocabSpec {
        drift_vocab_spec(self.vocab_size())
    }

    /// The ids of `text`, one per character; an unknown character is an error naming it.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        text.char_indices()
            .map(|(position, ch)| {
                self.index.get(&ch).copied().ok_or(DllmError::UnknownSymbol { ch, position })
            })
            .collect()
    }

    /// The text of `ids`; special tokens are dropped when `skip_special`, else written as
    /// `<pad>`, `<mask>`, `<bos>`, `<eos>`.
    pub fn decode(&self, ids: &[u32], skip_special: bool) -> Result<String> {
        let mut out = String::with_capacity(ids.len());
        for &id in ids {
            if id < NUM_SPECIAL {
                if !skip_special {
                    out.push_str(["<pad>", "<mask>", "<bos>", "<eos>"][id as usize]);
                }
                continue;
            }
            let ch = self
                .symbols
                .get((id - NUM_SPECIAL) as usize)
                .ok_or(DllmError::TokenId { id, vocab_size: self.vocab_size() })?;
            out.push(*ch);
        }
        Ok(out)
    }

    /// Writes the tokenizer as JSON (format in the module docs).
    pub fn save(&self, path: &Path) -> Result<()> {
        let file = CharFile {
            format: FORMAT.into(),
            version: 1,
            special: Special { pad: PAD_ID, mask: MASK_ID, bos: BOS_ID, eos: EOS_ID },
            symbols: self.symbols.clone(),
        };
        let text = serde_json::to_string_pretty(&file).map_err(DllmError::json(path))?;
        std::fs::write(path, text).map_err(DllmError::io(path))
    }

    /// Reads a file written by [`CharTokenizer::save`].
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(DllmError::io(path))?;
        let file: CharFile = serde_json::from_str(&text).map_err(DllmError::json(path))?;
        let expected = Special { pad: PAD_ID, mask: MASK_ID, bos: BOS_ID, eos: EOS_ID };
        if file.format != FORMAT || file.version != 1 || file.special != expected {
            return Err(DllmError::Json {
                path: path.into(),
                message: format!(
                    "expected format {FORMAT:?} version 1 with special ids pad 0, mask 1, bos 2, \
                     eos 3; got {:?} version {} {:?}",
                    file.format, file.version, file.special
                ),
            });
        }
        Self::new(file.symbols)
    }
}

/// `vocab_size` ids with drift's special ids (pad 0, mask 1, bos 2, eos 3).
fn drift_vocab_spec(vocab_size: usize) -> VocabSpec {
    VocabSpec { vocab_size, mask_id: MASK_ID, pad_id: PAD_ID, bos_id: BOS_ID, eos_id: EOS_ID }
}

/// Either kind of tokenizer.
#[derive(Debug, Clone)]
pub enum Tokenizer {
    /// A Hugging Face `tokenizer.json`.
    Hf(Box<tokenizers::Tokenizer>),
    /// drift's character tokenizer.
    Char(CharTokenizer),
}

impl Tokenizer {
    /// Loads `path`: drift's character tokenizer when the file is named
    /// [`CHAR_TOKENIZER_FILE`], otherwise a Hugging Face `tokenizer.json`.
    pub fn from_file(path: &Path) -> Result<Self> {
        if path.file_name().is_some_and(|f| f == CHAR_TOKENIZER_FILE) {
            return Ok(Tokenizer::Char(CharTokenizer::load(path)?));
        }
        let tok = tokenizers::Tokenizer::from_file(path)
            .map_err(|e| DllmError::Tokenizer { path: path.into(), message: e.to_string() })?;
        Ok(Tokenizer::Hf(Box::new(tok)))
    }

    /// Number of ids (the logits' width a model needs), special tokens included.
    pub fn vocab_size(&self) -> usize {
        match self {
            Tokenizer::Char(t) => t.vocab_size(),
            Tokenizer::Hf(t) => t.get_vocab_size(true),
        }
    }

    /// Vocabulary size and drift's special ids (pad 0, mask 1, bos 2, eos 3), for writing a
    /// model config; errors when a `tokenizer.json` declares other special ids
    /// ([`bpe::check_specials`]).
    pub fn vocab_spec(&self) -> Result<VocabSpec> {
        if let Tokenizer::Hf(t) = self {
            bpe::check_specials(t, "tokenizer.json")?;
        }
        Ok(drift_vocab_spec(self.vocab_size()))
    }

    /// Token ids of `text` (no special tokens added).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        match self {
            Tokenizer::Char(t) => t.encode(text),
            Tokenizer::Hf(t) => Ok(t
                .encode(text, false)
                .map_err(|e| DllmError::Tokenizer {
                    path: "<in memory>".into(),
                    message: e.to_string(),
                })?
                .get_ids()
                .to_vec()),
        }
    }

    /// Text of `ids`, dropping special tokens when `skip_special`.
    pub fn decode(&self, ids: &[u32], skip_special: bool) -> Result<String> {
        match self {
            Tokenizer::Char(t) => t.decode(ids, skip_special),
            Tokenizer::Hf(t) => t.decode(ids, skip_special).map_err(|e| DllmError::Tokenizer {
                path: "<in memory>".into(),
                message: e.to_string(),
            }),
        }
    }

    /// Writes the tokenizer into checkpoint folder `dir` under its file name, returning the
    /// path.
    pub fn save_in_dir(&self, dir: &Path) -> Result<PathBuf> {
        let name = match self {
            Tokenizer::Char(_) => CHAR_TOKENIZER_FILE,
            Tokenizer::Hf(_) => HF_TOKENIZER_FILE,
        };
        write_atomic(dir, name, |p| match self {
            Tokenizer::Char(t) => t.save(p),
            Tokenizer::Hf(t) => t
                .save(p, true)
                .map_err(|e| DllmError::Tokenizer { path: p.into(), message: e.to_string() }),
        })?;
        Ok(dir.join(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_decode_round_trip_and_errors_name_the_culprit() {
        let tok = CharTokenizer::ascii();
        assert_eq!(tok.vocab_size(), 100);
        let ids = tok.encode("def f(x):\n  return x+1").unwrap();
        assert_eq!(ids[0], NUM_SPECIAL + 1 + (b'd' - b' ') as u32);
        assert_eq!(tok.decode(&ids, true).unwrap(), "def f(x):\n  return x+1");
        let err = tok.encode("ok é").unwrap_err().to_string();
        assert!(err.contains("'é'") && err.contains("byte 3"), "{err}");
        let err = tok.decode(&[100], true).unwrap_err().to_string();
        assert!(err.contains("100") && err.contains("100 entries"), "{err}");
        assert_eq!(tok.decode(&[BOS_ID, 5, MASK_ID, EOS_ID], false).unwrap(), "<bos> <mask><eos>");
        assert!(CharTokenizer::new("abca".chars()).unwrap_err().to_string().contains("'a'"));
    }

    #[test]
    fn char_tokenizer_file_round_trips_through_the_generic_loader() {
        let dir = tempfile::tempdir().unwrap();
        let tok = CharTokenizer::new("0123456789+-*/= ".chars()).unwrap();
        let path = Tokenizer::Char(tok.clone()).save_in_dir(dir.path()).unwrap();
        match Tokenizer::from_file(&path).unwrap() {
            Tokenizer::Char(back) => assert_eq!(back, tok),
            Tokenizer::Hf(_) => panic!("the character tokenizer file loaded as tokenizer.json"),
        }
        std::fs::write(&path, r#"{"format":"other","version":1,"special":{"pad":0,"mask":1,"bos":2,"eos":3},"symbols":[]}"#).unwrap();
        assert!(CharTokenizer::load(&path).unwrap_err().to_string().contains("\"other\""));
    }
}
