//! The prompt grammar of the shapes world: colours, shapes, counts and two-object relations.
//!
//! ```text
//! prompt   := count ( "and" count )?          -- one or two count clauses
//!           | "a" object relation "a" object  -- one two-object relation
//! count    := N colour noun                   -- N in 1..=4; noun singular iff N = 1
//! object   := colour shape                    -- singular shape noun
//! relation := "left of" | "right of" | "above" | "below"
//! colour   := "red" | "green" | "blue" | "yellow"
//! shape    := "circle" | "square" | "triangle"   (plural: add "s")
//! ```
//!
//! The clauses are those of GenEval's counting, colour and position tasks (Ghosh et al.,
//! arXiv 2310.11513), reduced to a world a 32×32 renderer and verifier can decide exactly.
//! The two objects of a prompt are always distinct (colour, shape) pairs, so every clause
//! refers to one unambiguous kind of object.

use serde::{Deserialize, Serialize};

use super::error::{Result, ShapesError};

/// The largest count a count clause may ask for.
pub const MAX_COUNT: u8 = 4;

/// The most objects a whole prompt may ask for (two count clauses together), so every
/// prompt has a non-overlapping layout in 32×32 with shapes of 7–11 px.
pub const MAX_OBJECTS: u8 = 6;

/// A colour of the shapes world.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Colour {
    /// Red, palette (220, 40, 40).
    Red,
    /// Green, palette (40, 170, 60).
    Green,
    /// Blue, palette (40, 80, 220).
    Blue,
    /// Yellow, palette (235, 200, 30).
    Yellow,
}

impl Colour {
    /// Every colour, in vocabulary order.
    pub const ALL: [Colour; 4] = [Colour::Red, Colour::Green, Colour::Blue, Colour::Yellow];

    /// The colour's word.
    #[must_use]
    pub fn word(self) -> &'static str {
        match self {
            Colour::Red => "red",
            Colour::Green => "green",
            Colour::Blue => "blue",
            Colour::Yellow => "yellow",
        }
    }

    /// The canonical RGB value the renderer paints and the segmenter matches against.
    #[must_use]
    pub fn rgb(self) -> [u8; 3] {
        match self {
            Colour::Red => [220, 40, 40],
            Colour::Green => [40, 170, 60],
            Colour::Blue => [40, 80, 220],
            Colour::Yellow => [235, 200, 30],
        }
    }

    /// The colour named by `word`, if any.
    #[must_use]
    pub fn from_word(word: &str) -> Option<Colour> {
        Colour::ALL.into_iter().find(|c| c.word() == word)
    }
}

/// A shape of the shapes world.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ShapeKind {
    /// A filled disc (bounding-box fill ratio π/4).
    Circle,
    /// A filled axis-aligned square (fill ratio 1).
    Square,
    /// A filled upright isosceles triangle, apex up (fill ratio 1/2).
    Triangle,
}

impl ShapeKind {
    /// Every shape, in vocabulary order.
    pub const ALL: [ShapeKind; 3] = [ShapeKind::Circle, ShapeKind::Square, ShapeKind::Triangle];

    /// The singular noun.
    #[must_use]
    pub fn singular(self) -> &'static str {
        match self {
            ShapeKind::Circle => "circle",
            ShapeKind::Square => "square",
            ShapeKind::Triangle => "triangle",
        }
    }

    /// The plural noun.
    #[must_use]
    pub fn plural(self) -> &'static str {
        match self {
            ShapeKind::Circle => "circles",
            ShapeKind::Square => "squares",
            ShapeKind::Triangle => "triangles",
        }
    }

    /// The noun for `count` objects (singular iff `count == 1`).
    #[must_use]
    pub fn noun(self, count: u8) -> &'static str {
        if count == 1 {
            self.singular()
        } else {
            self.plural()
        }
    }

    /// The shape named by `word` and whether the word is plural.
    #[must_use]
    pub fn from_word(word: &str) -> Option<(ShapeKind, bool)> {
        ShapeKind::ALL.into_iter().find_map(|s| {
            if s.singular() == word {
                Some((s, false))
            } else if s.plural() == word {
                Some((s, true))
            } else {
                None
            }
        })
    }
}

/// A kind of object: a colour and a shape ("red circle").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Object {
    /// Its colour.
    pub colour: Colour,
    /// Its shape.
    pub shape: ShapeKind,
}

impl Object {
    /// The object of `colour` and `shape`.
    #[must_use]
    pub fn new(colour: Colour, shape: ShapeKind) -> Self {
        Self { colour, shape }
    }

    /// Every object of the world, colour-major (12 of them).
    #[must_use]
    pub fn all() -> Vec<Object> {
        Colour::ALL
            .into_iter()
            .flat_map(|c| ShapeKind::ALL.into_iter().map(move |s| Object::new(c, s)))
            .collect()
    }

    /// "red circle".
    #[must_use]
    pub fn text(self) -> String {
        format!("{} {}", self.colour.word(), self.shape.singular())
    }
}

/// A spatial relation between two objects, judged on centroids in image coordinates
/// (x grows to the right, y grows downwards), as in GenEval's position task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Relation {
    /// Subject centroid x smaller than the reference's by a margin.
    LeftOf,
    /// Subject centroid x larger than the reference's by a margin.
    RightOf,
    /// Subject centroid y smaller than the reference's by a margin.
    Above,
    /// Subject centroid y larger than the reference's by a margin.
    Below,
}

impl Relation {
    /// Every relation, in vocabulary order.
    pub const ALL: [Relation; 4] =
        [Relation::LeftOf, Relation::RightOf, Relation::Above, Relation::Below];

    /// The relation's words ("left of" is two words).
    #[must_use]
    pub fn words(self) -> &'static [&'static str] {
        match self {
            Relation::LeftOf => &["left", "of"],
            Relation::RightOf => &["right", "of"],
            Relation::Above => &["above"],
            Relation::Below => &["below"],
        }
    }

    /// Whether a subject at centroid `subject` stands in this relation to a reference at
    /// `reference`, with at least `margin` pixels to spare along the relation's axis.
    #[must_use]
    pub fn holds(self, subject: (f32, f32), reference: (f32, f32), margin: f32) -> bool {
        match self {
            Relation::LeftOf => subject.0 + margin <= reference.0,
            Relation::RightOf => subject.0 >= reference.0 + margin,
            Relation::Above => subject.1 + margin <= reference.1,
            Relation::Below => subject.1 >= reference.1 + margin,
        }
    }
}

/// One clause of a prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Clause {
    /// "`count` `object`s": exactly `count` objects of this kind.
    Count {
        /// How many, 1..=4.
        count: u8,
        /// Of which kind.
        object: Object,
    },
    /// "a `subject` `relation` a `reference`": one of each, standing in the relation.
    Relation {
        /// The object the relation is about.
        subject: Object,
        /// The relation.
        relation: Relation,
        /// The object it is relative to.
        reference: Object,
    },
}

impl Clause {
    /// The clause's text in the grammar.
    #[must_use]
    pub fn text(&self) -> String {
        match *self {
            Clause::Count { count, object } => {
                format!("{count} {} {}", object.colour.word(), object.shape.noun(count))
            }
            Clause::Relation { subject, relation, reference } => {
                format!(
                    "a {} {} a {}",
                    subject.text(),
                    relation.words().join(" "),
                    reference.text()
                )
            }
        }
    }
}

/// A prompt of the shapes world: one or two count clauses, or one relation clause.
///
/// Constructed only through [`Prompt::new`] (or the parser), which enforces the grammar's
/// structural rules, so every `Prompt` has a text, a layout and a verifier verdict.
///
/// Serialises as its text and deserialises by parsing it, so a `Prompt` in a config, a JSONL
/// record or an [`crate::reward::ImageSample`] is always grammatical.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub struct Prompt {
    clauses: Vec<Clause>,
}

impl Prompt {
    /// A prompt from its clauses, checked against the grammar: either one or two count
    /// clauses (counts 1..=4, distinct objects, at most [`MAX_OBJECTS`] objects in all) or
    /// exactly one relation clause between two distinct objects.
    pub fn new(clauses: Vec<Clause>) -> Result<Self> {
        validate(&clauses)?;
        Ok(Self { clauses })
    }

    /// Parses `text` (see [`super::parse::from_text`]: exactly the grammar, errors naming
    /// the unknown word or what was expected where).
    pub fn from_text(text: &str) -> Result<Self> {
        super::parse::from_text(text)
    }

    /// The prompt's clauses, in text order.
    #[must_use]
    pub fn clauses(&self) -> &[Clause] {
        &self.clauses
    }

    /// The prompt as text in the grammar (the parser's exact inverse).
    #[must_use]
    pub fn to_text(&self) -> String {
        self.clauses.iter().map(Clause::text).collect::<Vec<_>>().join(" and ")
    }

    /// The objects an image of this prompt must contain, one entry per object instance,
    /// in clause order (a relation contributes its subject then its reference).
    #[must_use]
    pub fn objects(&self) -> Vec<Object> {
        let mut out = Vec::new();
        for clause in &self.clauses {
            match *clause {
                Clause::Count { count, object } => {
                    out.extend(std::iter::repeat_n(object, usize::from(count)));
                }
                Clause::Relation { subject, reference, .. } => out.extend([subject, reference]),
            }
        }
        out
    }
}

impl From<Prompt> for String {
    fn from(p: Prompt) -> String {
        p.to_text()
    }
}

impl TryFrom<String> for Prompt {
    type Error = ShapesError;
    fn try_from(text: String) -> Result<Prompt> {
        super::parse::from_text(&text)
    }
}

impl std::str::FromStr for Prompt {
    type Err = ShapesError;
    /// Parses a prompt of the grammar (see [`super::parse::from_text`]).
    fn from_str(text: &str) -> Result<Prompt> {
        super::parse::from_text(text)
    }
}

impl std::fmt::Display for Prompt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_text())
    }
}

fn validate(clauses: &[Clause]) -> Result<()> {
    let invalid = |m: String| Err(ShapesError::InvalidPrompt(m));
    if let [Clause::Relation { subject, reference, .. }] = clauses {
        if subject == reference {
            let o = subject.text();
            return invalid(format!("a relation needs two different objects, got `{o}` twice"));
        }
        return Ok(());
    }
    let counts: Option<Vec<(u8, Object)>> = clauses
        .iter()
        .map(|c| match *c {
            Clause::Count { count, object } => Some((count, object)),
            Clause::Relation { .. } => None,
        })
        .collect();
    let counts = match counts {
        Some(counts) if (1..=2).contains(&counts.len()) => counts,
        _ => {
            let texts: Vec<String> = clauses.iter().map(Clause::text).collect();
            return invalid(format!(
                "expected one or two count clauses or a single relation clause, got {} clauses \
                 ({})",
                clauses.len(),
                texts.join(" | ")
            ));
        }
    };
    if let Some((n, o)) = counts.iter().find(|(n, _)| !(1..=MAX_COUNT).contains(n)) {
        return invalid(format!("count {n} for `{}` is outside 1..={MAX_COUNT}", o.text()));
    }
    if let [(_, a), (_, b)] = counts[..] {
        if a == b {
            return invalid(format!("`{}` appears in two count clauses", a.text()));
        }
    }
    let total: u8 = counts.iter().map(|(n, _)| n).sum();
    if total > MAX_OBJECTS {
        return invalid(format!(
            "the prompt asks for {total} objects, at most {MAX_OBJECTS} fit a 32x32 image"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const RED_CIRCLE: Object = Object { colour: Colour::Red, shape: ShapeKind::Circle };
    const BLUE_SQUARE: Object = Object { colour: Colour::Blue, shape: ShapeKind::Square };

    #[test]
    fn texts_follow_the_grammar() {
        let p = Prompt::new(vec![Clause::Count { count: 3, object: RED_CIRCLE }]).unwrap();
        assert_eq!(p.to_text(), "3 red circles");
        let p = Prompt::new(vec![
            Clause::Count { count: 2, object: RED_CIRCLE },
            Clause::Count { count: 1, object: BLUE_SQUARE },
        ])
        .unwrap();
        assert_eq!(p.to_text(), "2 red circles and 1 blue square");
        assert_eq!(p.objects(), vec![RED_CIRCLE, RED_CIRCLE, BLUE_SQUARE]);
        let p = Prompt::new(vec![Clause::Relation {
            subject: BLUE_SQUARE,
            relation: Relation::LeftOf,
            reference: RED_CIRCLE,
        }])
        .unwrap();
        assert_eq!(p.to_text(), "a blue square left of a red circle");
    }

    #[test]
    fn structural_rules_are_enforced() {
        let count = |count, object| Clause::Count { count, object };
        assert!(Prompt::new(vec![]).is_err());
        assert!(Prompt::new(vec![count(0, RED_CIRCLE)]).is_err());
        assert!(Prompt::new(vec![count(5, RED_CIRCLE)]).is_err());
        assert!(Prompt::new(vec![count(1, RED_CIRCLE), count(2, RED_CIRCLE)]).is_err());
        assert!(Prompt::new(vec![count(4, RED_CIRCLE), count(3, BLUE_SQUARE)]).is_err());
        assert!(Prompt::new(vec![count(4, RED_CIRCLE), count(2, BLUE_SQUARE)]).is_ok());
        let rel = |s, r| Clause::Relation { subject: s, relation: Relation::Above, reference: r };
        assert!(Prompt::new(vec![rel(RED_CIRCLE, RED_CIRCLE)]).is_err());
        assert!(Prompt::new(vec![rel(RED_CIRCLE, BLUE_SQUARE), count(1, RED_CIRCLE)]).is_err());
        let err = Prompt::new(vec![count(1, RED_CIRCLE); 3]).unwrap_err().to_string();
        assert!(err.contains("3 clauses"), "{err}");
    }

    #[test]
    fn serde_goes_through_the_text() {
        let p = Prompt::from_text("2 red circles and 1 blue square").unwrap();
        let json = serde_json::to_string(&p).unwrap();
        assert_eq!(json, "\"2 red circles and 1 blue square\"");
        assert_eq!(serde_json::from_str::<Prompt>(&json).unwrap(), p);
        let err = serde_json::from_str::<Prompt>("\"2 red circle\"").unwrap_err().to_string();
        assert!(err.contains("plural"), "{err}");
        assert_eq!("3 red circles".parse::<Prompt>().unwrap().to_text(), "3 red circles");
    }

    #[test]
    fn relations_use_image_coordinates_and_margin() {
        assert!(Relation::LeftOf.holds((5.0, 9.0), (10.0, 0.0), 3.0));
        assert!(!Relation::LeftOf.holds((8.0, 9.0), (10.0, 0.0), 3.0));
        assert!(Relation::RightOf.holds((14.0, 0.0), (10.0, 0.0), 3.0));
        assert!(Relation::Above.holds((0.0, 2.0), (0.0, 20.0), 3.0));
        assert!(!Relation::Below.holds((0.0, 2.0), (0.0, 20.0), 3.0));
        assert!(Relation::Below.holds((0.0, 24.0), (0.0, 20.0), 3.0));
    }
}
