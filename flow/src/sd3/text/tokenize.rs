//! SD3's tokenizers: CLIP's byte-level BPE (from the folder's `tokenizer.json`, or built from
//! `vocab.json` + `merges.txt` as transformers' `CLIPTokenizerFast` converts them) and T5's
//! (`tokenizer.json`), padded and truncated as diffusers' `encode_prompt` asks.

use std::path::Path;

use tokenizers::models::bpe::BPE;
use tokenizers::normalizers::{Lowercase, Replace, Sequence as NormSeq, NFC};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::sequence::Sequence as PreSeq;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::{
    AddedToken, NormalizerWrapper, PreTokenizerWrapper, SplitDelimiterBehavior, Tokenizer,
};

use crate::error::{file_err, FlowModelError, Result};

/// CLIP's pre-tokenisation pattern (transformers' `CLIPTokenizer.pat`).
const CLIP_PATTERN: &str =
    r"<\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+";

/// A tokenizer with its fixed-length framing: `[bos] content [eos]` truncated to `max_len`,
/// padded with `pad` (CLIP); or `content [eos]` (T5, whose post-processor appends it).
pub struct PromptTokenizer {
    inner: Tokenizer,
    bos: Option<u32>,
    eos: u32,
    pad: u32,
}

fn token_id(tok: &Tokenizer, token: &str, path: &Path) -> Result<u32> {
    tok.token_to_id(token)
        .ok_or_else(|| file_err(path, format!("no token {token:?} in the vocabulary")))
}

/// The `pad_token` of a folder's `special_tokens_map.json` / `tokenizer_config.json`, if set.
fn pad_token(dir: &Path) -> Option<String> {
    ["special_tokens_map.json", "tokenizer_config.json"].iter().find_map(|f| {
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join(f)).ok()?).ok()?;
        match v.get("pad_token")? {
            serde_json::Value::String(s) => Some(s.clone()),
            serde_json::Value::Object(o) => o.get("content")?.as_str().map(str::to_string),
            _ => None,
        }
    })
}

impl PromptTokenizer {
    /// CLIP's tokenizer from `dir` (`tokenizer/` or `tokenizer_2/`): `tokenizer.json` when
    /// present, else `vocab.json` + `merges.txt` with CLIP's normaliser (NFC, whitespace runs
    /// to one space, lower case), pattern split, byte-level mapping and `</w>` word ends. The
    /// pad token is the folder's (`<|endoftext|>` for CLIP-L, `!` for SD3's CLIP-G).
    pub fn clip(dir: &Path) -> Result<Self> {
        let json = dir.join("tokenizer.json");
        let inner = if json.is_file() {
            Tokenizer::from_file(&json).map_err(|e| file_err(&json, e))?
        } else {
            let (vocab, merges) = (dir.join("vocab.json"), dir.join("merges.txt"));
            let bpe = BPE::from_file(&vocab.to_string_lossy(), &merges.to_string_lossy())
                .end_of_word_suffix("</w>".into())
                .unk_token("<|endoftext|>".into())
                .build()
                .map_err(|e| file_err(&vocab, e))?;
            let mut tok = Tokenizer::new(bpe);
            let space = Replace::new(
                tokenizers::normalizers::replace::ReplacePattern::Regex(r"\s+".into()),
                " ",
            )
            .map_err(|e| file_err(&vocab, e))?;
            tok.with_normalizer(Some(NormalizerWrapper::Sequence(NormSeq::new(vec![
                NormalizerWrapper::NFC(NFC),
                NormalizerWrapper::Replace(space),
                NormalizerWrapper::Lowercase(Lowercase),
            ]))))
            .map_err(|e| file_err(&vocab, e))?;
            let split = Split::new(
                SplitPattern::Regex(CLIP_PATTERN.into()),
                SplitDelimiterBehavior::Removed,
                true,
            )
            .map_err(|e| file_err(&vocab, e))?;
            tok.with_pre_tokenizer(Some(PreTokenizerWrapper::Sequence(PreSeq::new(vec![
                PreTokenizerWrapper::Split(split),
                PreTokenizerWrapper::ByteLevel(ByteLevel::new(false, true, true)),
            ]))));
            tok
        };
        let mut inner = inner;
        let pad_text = pad_token(dir).unwrap_or_else(|| "<|endoftext|>".into());
        // transformers registers the special tokens (the pad token too: `!` for SD3's CLIP-G)
        // as added tokens, matched whole in the text before BPE.
        let specials: Vec<AddedToken> = ["<|startoftext|>", "<|endoftext|>", pad_text.as_str()]
            .iter()
            .map(|t| AddedToken::from(t.to_string(), true))
            .collect();
        inner.add_special_tokens(specials).map_err(|e| file_err(dir, e))?;
        let bos = token_id(&inner, "<|startoftext|>", dir)?;
        let eos = token_id(&inner, "<|endoftext|>", dir)?;
        let pad = token_id(&inner, &pad_text, dir)?;
        Ok(Self { inner, bos: Some(bos), eos, pad })
    }

    /// T5's tokenizer from `dir/tokenizer.json` (`tokenizer_3/`), padding with `<pad>`.
    pub fn t5(dir: &Path) -> Result<Self> {
        let json = dir.join("tokenizer.json");
        let inner = Tokenizer::from_file(&json).map_err(|e| file_err(&json, e))?;
        let eos = token_id(&inner, "</s>", dir)?;
        let pad = token_id(&inner, &pad_token(dir).unwrap_or_else(|| "<pad>".into()), dir)?;
        Ok(Self { inner, bos: None, eos, pad })
    }

    /// The ids of `text`, framed and padded to exactly `max_len`.
    pub fn encode(&self, text: &str, max_len: usize) -> Result<Vec<u32>> {
        let enc = self.inner.encode(text, false).map_err(|e| FlowModelError::Config {
            field: "prompt",
            value: format!("{text:?}: {e}"),
            expected: "text the tokenizer accepts".into(),
        })?;
        let mut content: Vec<u32> = enc.get_ids().to_vec();
        // The T5 post-processor's `</s>` is added below, as for CLIP's `[eos]`.
        let frame = usize::from(self.bos.is_some()) + 1;
        content.truncate(max_len.saturating_sub(frame));
        let mut ids = Vec::with_capacity(max_len);
        ids.extend(self.bos);
        ids.extend(content);
        ids.push(self.eos);
        ids.resize(max_len, self.pad);
        Ok(ids)
    }
}
