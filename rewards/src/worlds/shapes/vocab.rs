//! The word vocabulary of the shapes grammar and a fixed-length tokenizer for text encoders.
//!
//! A text-conditioned flow model embeds a prompt word by word: [`tokenize`] maps every word of
//! [`Prompt::to_text`] to its index in [`VOCABULARY`] and pads to [`MAX_TOKENS`] with
//! [`PAD_ID`]. Every prompt of the grammar fits: the longest ("a blue square left of a green
//! triangle") has 8 words.

use super::error::{Result, ShapesError};
use super::grammar::Prompt;

/// Every word of the grammar, indexed by token id; id 0 is the padding token `<pad>`.
pub const VOCABULARY: [&str; 21] = [
    "<pad>",
    "a",
    "2",
    "3",
    "4",
    "red",
    "green",
    "blue",
    "yellow",
    "circle",
    "circles",
    "square",
    "squares",
    "triangle",
    "triangles",
    "and",
    "left",
    "right",
    "of",
    "above",
    "below",
];

/// The number of token ids (the embedding table size of a text encoder), padding included.
pub const VOCAB_SIZE: usize = VOCABULARY.len();

/// The token id of the padding token `<pad>`.
pub const PAD_ID: u32 = 0;

/// The fixed length of every token sequence [`tokenize`] returns.
pub const MAX_TOKENS: usize = 8;

/// The token id of `word`, if it is in the vocabulary (padding excluded).
#[must_use]
pub fn token_id(word: &str) -> Option<u32> {
    VOCABULARY.iter().skip(1).position(|w| *w == word).map(|i| i as u32 + 1)
}

/// The vocabulary's words (without `<pad>`), comma-separated, for error messages.
#[must_use]
pub fn known_words() -> String {
    VOCABULARY[1..].join(", ")
}

/// The token ids of `prompt`'s words, right-padded with [`PAD_ID`] to [`MAX_TOKENS`].
#[must_use]
pub fn tokenize(prompt: &Prompt) -> Vec<u32> {
    let text = prompt.to_text();
    let mut ids: Vec<u32> = text.split_whitespace().filter_map(token_id).collect();
    // Grammar prompts never exceed MAX_TOKENS words (checked by a test over the whole space).
    ids.truncate(MAX_TOKENS);
    ids.resize(MAX_TOKENS, PAD_ID);
    ids
}

/// The token ids of a prompt given as text: the text is parsed first, so unknown words and
/// ungrammatical prompts are errors rather than silently dropped tokens.
pub fn tokenize_text(text: &str) -> Result<Vec<u32>> {
    let prompt: Prompt = super::parse::from_text(text)?;
    Ok(tokenize(&prompt))
}

/// The text of a token sequence (padding dropped); an id outside the vocabulary is an error
/// naming it.
pub fn detokenize(ids: &[u32]) -> Result<String> {
    let mut words = Vec::new();
    for (i, &id) in ids.iter().enumerate() {
        match VOCABULARY.get(id as usize) {
            Some(_) if id == PAD_ID => {}
            Some(w) => words.push(*w),
            None => {
                return Err(ShapesError::InvalidPrompt(format!(
                    "token id {id} at position {} is outside the vocabulary of {} words",
                    i + 1,
                    VOCABULARY.len()
                )))
            }
        }
    }
    Ok(words.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_vocabulary_indices() {
        assert_eq!(token_id("a"), Some(1));
        assert_eq!(token_id("below"), Some(20));
        assert_eq!(token_id("1"), None);
        assert_eq!(token_id("<pad>"), None);
        assert_eq!(token_id("purple"), None);
        let ids = tokenize_text("a green triangle and a red square").unwrap();
        assert_eq!(ids, vec![1, 6, 13, 15, 1, 5, 11, PAD_ID]);
        assert_eq!(detokenize(&ids).unwrap(), "a green triangle and a red square");
        assert_eq!(tokenize_text("3 circles").unwrap(), vec![3, 10, 0, 0, 0, 0, 0, 0]);
        assert!(detokenize(&[99]).unwrap_err().to_string().contains("99"));
        assert!(tokenize_text("3 purple circles").is_err());
    }
}
