//! Training a byte-level BPE tokenizer (the `tokenizers` crate, GPT-2's byte-level scheme as
//! LLaDA's, Dream's and DiffuCoder's tokenizers use) on a corpus, saved as a Hugging Face
//! `tokenizer.json` so drift's own models load through the path real checkpoints take.
//!
//! The four special tokens take ids 0–3 in drift's order (pad, mask, bos, eos), declared as
//! `added_tokens` with `special: true` like the released checkpoints declare theirs; they
//! are never produced by the byte-level pre-tokenizer from plain text, so a prompt cannot
//! smuggle one in. Every byte is in the initial alphabet, so any text encodes.
//!
//! Training is deterministic: the trainer breaks count ties by token id, and the alphabet is
//! sorted, so the same corpus and size give the same `tokenizer.json` in every process (a
//! test trains twice and compares the files).

use serde::{Deserialize, Serialize};
use tokenizers::models::bpe::{BpeTrainerBuilder, BPE};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::{AddedToken, TokenizerBuilder};

use super::{BOS_ID, EOS_ID, MASK_ID, PAD_ID};
use crate::error::{DllmError, Result};

/// The special tokens' text, in id order (pad, mask, bos, eos). The mask and the
/// start/end names are LLaDA's.
pub const SPECIAL_TOKENS: [&str; 4] =
    ["<|pad|>", "<|mdm_mask|>", "<|startoftext|>", "<|endoftext|>"];

/// How a BPE tokenizer is trained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BpeConfig {
    /// Vocabulary size: 4 specials, the 256 byte symbols, then merges. Default 512.
    pub vocab_size: usize,
    /// A pair is merged only if it occurs at least this often. Default 2.
    pub min_frequency: u64,
    /// Split every digit into its own pre-token before the byte-level split (as LLaMA's and
    /// Qwen2's tokenizers do), so no merge spans two digits: one token per Sudoku cell.
    /// Default false (the code models' tokenizers).
    pub individual_digits: bool,
}

impl Default for BpeConfig {
    fn default() -> Self {
        Self { vocab_size: 512, min_frequency: 2, individual_digits: false }
    }
}

fn err(e: impl ToString) -> DllmError {
    DllmError::Tokenizer { path: "<bpe training>".into(), message: e.to_string() }
}

/// Trains a byte-level BPE tokenizer on `texts` (module docs). Errors name a vocabulary
/// smaller than the specials plus the byte alphabet.
pub fn train_bpe(texts: &[String], cfg: &BpeConfig) -> Result<tokenizers::Tokenizer> {
    let floor = SPECIAL_TOKENS.len() + 256;
    if cfg.vocab_size <= floor {
        return Err(DllmError::Config {
            key: "tokenizer.vocab_size",
            value: cfg.vocab_size.to_string(),
            expected: format!("more than {floor} (4 specials + 256 bytes)"),
        });
    }
    let specials = SPECIAL_TOKENS.iter().map(|t| AddedToken::from(t.to_string(), true)).collect();
    let mut trainer = BpeTrainerBuilder::new()
        .vocab_size(cfg.vocab_size)
        .min_frequency(cfg.min_frequency)
        .special_tokens(specials)
        .initial_alphabet(ByteLevel::alphabet().into_iter().collect())
        .show_progress(false)
        .build();
    let mut tok = TokenizerBuilder::new()
        .with_model(BPE::default())
        .with_normalizer(None::<tokenizers::NormalizerWrapper>)
        .with_pre_tokenizer(Some(pre_tokenizer(cfg)))
        .with_post_processor(None::<tokenizers::PostProcessorWrapper>)
        .with_decoder(Some(ByteLevel::default()))
        .build()
        .map_err(err)?;
    tok.train(&mut trainer, texts.iter()).map_err(err)?;
    // Through JSON into the crate's type-erased tokenizer, the type every loaded checkpoint has.
    let json = tok.to_string(false).map_err(err)?;
    let tok: tokenizers::Tokenizer = json.parse().map_err(err)?;
    check_specials(&tok, "<bpe training>")?;
    Ok(tok)
}

/// GPT-2's byte-level split, after a split into single digits when asked.
fn pre_tokenizer(cfg: &BpeConfig) -> PreTokenizerWrapper {
    let bytes = ByteLevel::default().add_prefix_space(false);
    if cfg.individual_digits {
        Sequence::new(vec![Digits::new(true).into(), bytes.into()]).into()
    } else {
        bytes.into()
    }
}

/// Checks that `tok` declares drift's special tokens at drift's ids (pad 0, mask 1, bos 2,
/// eos 3), the ids the samplers and trainers write; `path` names the file in the error.
pub fn check_specials(tok: &tokenizers::Tokenizer, path: &str) -> Result<()> {
    for (name, id) in SPECIAL_TOKENS.iter().zip([PAD_ID, MASK_ID, BOS_ID, EOS_ID]) {
        if tok.token_to_id(name) != Some(id) {
            return Err(DllmError::Tokenizer {
                path: path.into(),
                message: format!(
                    "special token {name} must have id {id} (drift's pad, mask, bos, eos are \
                     0-3); found {:?}",
                    tok.token_to_id(name)
                ),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn corpus() -> Vec<String> {
        (0..40)
            .map(|k| {
                format!("def f(xs):\n    return sum(x + {} for x in xs if x > {})\n", k % 7, k % 5)
            })
            .collect()
    }

    #[test]
    fn trained_tokenizer_round_trips_compresses_and_is_deterministic() {
        let cfg = BpeConfig { vocab_size: 300, min_frequency: 2, individual_digits: false };
        let tok = train_bpe(&corpus(), &cfg).unwrap();
        // Merges stop at the size, or earlier when no pair occurs twice.
        let n = tok.get_vocab_size(true);
        assert!((280..=300).contains(&n), "{n}");
        let text = "def f(xs):\n    return sum(x + 3 for x in xs if x > 2)\n";
        let ids = tok.encode(text, false).unwrap().get_ids().to_vec();
        // Merges shorten the text well below one id per byte; it decodes back exactly.
        assert!(ids.len() * 2 < text.len(), "{} ids for {} bytes", ids.len(), text.len());
        assert_eq!(tok.decode(&ids, true).unwrap(), text);
        // Unseen bytes still encode (the byte alphabet) and round-trip.
        let odd = "é ~ {}\t";
        let odd_ids = tok.encode(odd, false).unwrap().get_ids().to_vec();
        assert_eq!(tok.decode(&odd_ids, true).unwrap(), odd);
        // Special ids are drift's; their text in a prompt is not read as the special token
        // by the pre-tokenizer-free path, and they are skipped when decoding.
        assert_eq!(tok.token_to_id("<|mdm_mask|>"), Some(MASK_ID));
        assert_eq!(tok.decode(&[BOS_ID, ids[0], EOS_ID, PAD_ID], true).unwrap(), "def");
        // A second training (new hash seeds) writes the same file.
        let again = train_bpe(&corpus(), &cfg).unwrap();
        assert_eq!(tok.to_string(false).unwrap(), again.to_string(false).unwrap());
    }

    #[test]
    fn individual_digits_give_one_token_per_digit_and_round_trip() {
        let grids: Vec<String> =
            (0..60).map(|k| format!("<answer>\n{}\n1234\n3412\n</answer>", 4321 + k % 3)).collect();
        let split = BpeConfig { vocab_size: 400, individual_digits: true, ..BpeConfig::default() };
        let tok = train_bpe(&grids, &split).unwrap();
        let text = "<answer>\n1234\n3412\n</answer>";
        let enc = tok.encode(text, false).unwrap();
        let digit_tokens: Vec<&String> =
            enc.get_tokens().iter().filter(|t| t.chars().any(|c| c.is_ascii_digit())).collect();
        assert_eq!(digit_tokens.len(), 8, "{:?}", enc.get_tokens());
        assert!(digit_tokens.iter().all(|t| t.len() == 1));
        assert_eq!(tok.decode(enc.get_ids(), true).unwrap(), text);
        // Without the split, the repeated rows merge into multi-digit tokens.
        let merged = train_bpe(&grids, &BpeConfig { individual_digits: false, ..split }).unwrap();
        let n = merged.encode(text, false).unwrap().get_ids().len();
        assert!(n < enc.get_ids().len(), "{n} vs {}", enc.get_ids().len());
    }

    #[test]
    fn bad_sizes_and_foreign_specials_are_named() {
        let e = train_bpe(
            &corpus(),
            &BpeConfig { vocab_size: 200, min_frequency: 2, individual_digits: false },
        );
        assert!(e.unwrap_err().to_string().contains("tokenizer.vocab_size"));
        let tok = train_bpe(&corpus(), &BpeConfig::default()).unwrap();
        let json = tok.to_string(false).unwrap().replace("<|mdm_mask|>", "<mask>");
        let foreign: tokenizers::Tokenizer = json.parse().unwrap();
        let e = check_specials(&foreign, "x/tokenizer.json").unwrap_err().to_string();
        assert!(e.contains("x/tokenizer.json") && e.contains("<|mdm_mask|>"), "{e}");
    }
}
