//! The parser of the shapes grammar: text to [`Prompt`], accepting exactly the language of
//! [`super::grammar`] (words separated by whitespace, lower case).

use super::error::{Result, ShapesError};
use super::grammar::{Clause, Colour, Prompt, Relation, ShapeKind, Spec, MAX_COUNT};
use super::vocab::{known_words, token_id};

/// Parses a prompt of the shapes grammar.
///
/// Every word is first checked against the vocabulary, so a typo is reported as
/// [`ShapesError::UnknownWord`] naming it; known words in a wrong order are a
/// [`ShapesError::Grammar`] error saying what was expected at which word; a grammatical
/// prompt that breaks a structural rule (same object twice, too many objects) is
/// [`ShapesError::InvalidPrompt`].
///
/// ```
/// use drift_rewards::worlds::shapes::from_text;
/// let p = from_text("a blue square left of a green triangle").unwrap();
/// assert_eq!(p.to_text(), "a blue square left of a green triangle");
/// assert!(from_text("3 purple circles").unwrap_err().to_string().contains("purple"));
/// ```
pub fn from_text(text: &str) -> Result<Prompt> {
    let words: Vec<&str> = text.split_whitespace().collect();
    for (i, word) in words.iter().enumerate() {
        if token_id(word).is_none() {
            return Err(ShapesError::UnknownWord {
                word: (*word).to_string(),
                position: i + 1,
                prompt: text.to_string(),
                known: known_words(),
            });
        }
    }
    let mut parser = Parser { text, words: &words, pos: 0 };
    let clauses = parser.prompt()?;
    Prompt::new(clauses)
}

struct Parser<'a> {
    text: &'a str,
    words: &'a [&'a str],
    pos: usize,
}

impl Parser<'_> {
    fn error(&self, expected: &str) -> ShapesError {
        let found = match self.words.get(self.pos) {
            Some(w) => format!("`{w}` at word {}", self.pos + 1),
            None => "the end of the prompt".to_string(),
        };
        ShapesError::Grammar {
            prompt: self.text.to_string(),
            message: format!("expected {expected}, found {found}"),
        }
    }

    fn peek(&self) -> Option<&str> {
        self.words.get(self.pos).copied()
    }

    fn prompt(&mut self) -> Result<Vec<Clause>> {
        let clauses = if self.peek() == Some("a") {
            let first = self.single_object()?;
            if self.pos == self.words.len() {
                vec![Clause::Count { count: 1, object: first }]
            } else if self.peek() == Some("and") {
                self.pos += 1;
                let second = self.single_object()?;
                vec![
                    Clause::Count { count: 1, object: first },
                    Clause::Count { count: 1, object: second },
                ]
            } else {
                let relation = self.relation()?;
                let reference = self.single_object()?;
                vec![Clause::Relation { subject: first, relation, reference }]
            }
        } else {
            vec![self.count()?]
        };
        if self.pos < self.words.len() {
            return Err(self.error("the end of the prompt"));
        }
        Ok(clauses)
    }

    fn count(&mut self) -> Result<Clause> {
        let count = self
            .peek()
            .and_then(|w| w.parse::<u8>().ok())
            .filter(|n| (2..=MAX_COUNT).contains(n))
            .ok_or_else(|| self.error("`a` or a count 2-4"))?;
        self.pos += 1;
        let colour = self.colour();
        match ShapeKind::from_word(self.peek().unwrap_or("")) {
            Some((shape, true)) => {
                self.pos += 1;
                Ok(Clause::Count { count, object: Spec { colour, shape } })
            }
            _ => Err(self.error(&format!("a colour or a plural shape noun after count {count}"))),
        }
    }

    fn relation(&mut self) -> Result<Relation> {
        let relation = Relation::ALL
            .into_iter()
            .find(|r| {
                let w = r.words();
                self.words.get(self.pos..self.pos + w.len()) == Some(w)
            })
            .ok_or_else(|| {
                self.error("`and`, a relation (`left of`, `right of`, `above`, `below`) or the end of the prompt")
            })?;
        self.pos += relation.words().len();
        Ok(relation)
    }

    fn single_object(&mut self) -> Result<Spec> {
        if self.peek() != Some("a") {
            return Err(self.error("`a`"));
        }
        self.pos += 1;
        let colour = self.colour();
        match ShapeKind::from_word(self.peek().unwrap_or("")) {
            Some((shape, false)) => {
                self.pos += 1;
                Ok(Spec { colour, shape })
            }
            _ => Err(self.error("a colour or a singular shape noun")),
        }
    }

    /// An optional colour word.
    fn colour(&mut self) -> Option<Colour> {
        let colour = Colour::from_word(self.peek().unwrap_or(""))?;
        self.pos += 1;
        Some(colour)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_form() {
        for text in [
            "a circle",
            "a yellow triangle",
            "3 circles",
            "4 red squares",
            "a circle and a square",
            "a green triangle and a red square",
            "a blue square left of a green triangle",
            "a circle above a square",
            "a yellow triangle right of a blue circle",
            "a green square below a yellow circle",
        ] {
            assert_eq!(from_text(text).unwrap().to_text(), text);
        }
        // Whitespace is not significant.
        assert_eq!(from_text("  3  red\tcircles ").unwrap().to_text(), "3 red circles");
    }

    #[test]
    fn unknown_words_are_named() {
        let err = from_text("3 red hexagons").unwrap_err();
        assert!(
            matches!(&err, ShapesError::UnknownWord { word, position: 3, .. } if word == "hexagons")
        );
        assert!(err.to_string().contains("`hexagons`"), "{err}");
        let err = from_text("3 Red circles").unwrap_err();
        assert!(err.to_string().contains("`Red`"), "{err}");
        assert!(from_text("5 red circles").unwrap_err().to_string().contains("`5`"));
        assert!(from_text("1 red circle").unwrap_err().to_string().contains("`1`"));
    }

    #[test]
    fn ungrammatical_orders_say_what_was_expected() {
        let cases = [
            ("", "`a` or a count"),
            ("red 3 circles", "`a` or a count"),
            ("3 red circle", "a plural shape noun"),
            ("a red circles", "a singular shape noun"),
            ("a red circle left a blue square", "a relation"),
            ("a red circles above a blue square", "a singular shape noun"),
            ("a red circle above 2 blue squares", "`a`"),
            ("a red circle and", "`a`"),
            ("3 red circles and a blue square", "the end of the prompt"),
            ("a red circle and a blue square and a green triangle", "the end of the prompt"),
        ];
        for (text, expected) in cases {
            let err = from_text(text).unwrap_err();
            assert!(err.to_string().contains(expected), "{text:?}: {err}");
        }
        assert!(matches!(
            from_text("a red circle and a blue circle"),
            Err(ShapesError::InvalidPrompt(_))
        ));
        assert!(matches!(from_text("a circle above a circle"), Err(ShapesError::InvalidPrompt(_))));
    }
}
