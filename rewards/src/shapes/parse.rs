//! The parser of the shapes grammar: text to [`Prompt`], accepting exactly the language of
//! [`super::grammar`] (words separated by whitespace, lower case).

use super::error::{Result, ShapesError};
use super::grammar::{Clause, Colour, Object, Prompt, Relation, ShapeKind, MAX_COUNT};
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
/// use drift_rewards::shapes::from_text;
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
            vec![self.relation()?]
        } else {
            let mut clauses = vec![self.count()?];
            if self.peek() == Some("and") {
                self.pos += 1;
                clauses.push(self.count()?);
            }
            clauses
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
            .filter(|n| (1..=MAX_COUNT).contains(n))
            .ok_or_else(|| self.error("a count 1-4 or `a`"))?;
        self.pos += 1;
        let colour = self.colour()?;
        let (shape, plural) = ShapeKind::from_word(self.peek().unwrap_or(""))
            .ok_or_else(|| self.error("a shape noun"))?;
        if plural != (count > 1) {
            let want = if count > 1 { "a plural noun" } else { "a singular noun" };
            return Err(self.error(&format!("{want} after count {count}")));
        }
        self.pos += 1;
        Ok(Clause::Count { count, object: Object::new(colour, shape) })
    }

    fn relation(&mut self) -> Result<Clause> {
        let subject = self.single_object()?;
        let relation = Relation::ALL
            .into_iter()
            .find(|r| {
                let w = r.words();
                self.words.get(self.pos..self.pos + w.len()) == Some(w)
            })
            .ok_or_else(|| self.error("a relation (`left of`, `right of`, `above`, `below`)"))?;
        self.pos += relation.words().len();
        let reference = self.single_object()?;
        Ok(Clause::Relation { subject, relation, reference })
    }

    fn single_object(&mut self) -> Result<Object> {
        if self.peek() != Some("a") {
            return Err(self.error("`a`"));
        }
        self.pos += 1;
        let colour = self.colour()?;
        match ShapeKind::from_word(self.peek().unwrap_or("")) {
            Some((shape, false)) => {
                self.pos += 1;
                Ok(Object::new(colour, shape))
            }
            _ => Err(self.error("a singular shape noun")),
        }
    }

    fn colour(&mut self) -> Result<Colour> {
        let colour = Colour::from_word(self.peek().unwrap_or(""))
            .ok_or_else(|| self.error("a colour (red, green, blue, yellow)"))?;
        self.pos += 1;
        Ok(colour)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_form() {
        for text in [
            "3 red circles",
            "1 yellow triangle",
            "2 green triangles and 1 red square",
            "a blue square left of a green triangle",
            "a red circle above a red square",
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
    }

    #[test]
    fn ungrammatical_orders_say_what_was_expected() {
        let cases = [
            ("", "end of the prompt"),
            ("red 3 circles", "a count"),
            ("3 circles", "a colour"),
            ("3 red circle", "a plural noun"),
            ("1 red circles", "a singular noun"),
            ("a red circle", "a relation"),
            ("a red circle left a blue square", "a relation"),
            ("a red circles above a blue square", "a singular shape noun"),
            ("a red circle above 1 blue square", "`a`"),
            ("3 red circles and", "a count"),
            ("3 red circles 2 blue squares", "the end of the prompt"),
            ("1 red circle and 1 blue square and 1 green square", "the end of the prompt"),
        ];
        for (text, expected) in cases {
            let err = from_text(text).unwrap_err();
            assert!(err.to_string().contains(expected), "{text:?}: {err}");
        }
        assert!(matches!(
            from_text("1 red circle and 2 red circles"),
            Err(ShapesError::InvalidPrompt(_))
        ));
        assert!(matches!(
            from_text("4 red circles and 4 blue squares"),
            Err(ShapesError::InvalidPrompt(_))
        ));
    }
}
