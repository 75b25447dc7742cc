//! The prompt grammar of the shapes world: GenEval's six task categories (Ghosh et al.,
//! arXiv 2310.11513) over three shapes and four colours.
//!
//! ```text
//! prompt   := "a" spec                          -- single_object (no colour) / colors
//!           | N colour? plural                  -- counting, N in 2..=4
//!           | "a" spec "and" "a" spec           -- two_object (no colours) / color_attr
//!           | "a" spec relation "a" spec        -- position
//! spec     := colour? shape                     -- singular shape noun
//! relation := "left of" | "right of" | "above" | "below"
//! colour   := "red" | "green" | "blue" | "yellow"
//! shape    := "circle" | "square" | "triangle"   (plural: add "s")
//! ```
//!
//! A spec without a colour is satisfied by an object of that shape in any colour, as GenEval's
//! "a photo of a dog" is by a dog of any colour. The two objects of a two-object or relation
//! prompt are always different shapes, so every clause refers to one unambiguous kind of
//! object. The [`Category`] of a prompt follows from its form.

use serde::{Deserialize, Serialize};

use super::error::{Result, ShapesError};

/// The largest count a count clause may ask for.
pub const MAX_COUNT: u8 = 4;

/// The most objects a prompt may ask for: one per cell of the renderer's 2×2 layout.
pub const MAX_OBJECTS: u8 = 4;

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

/// What a prompt asks for: a shape, in a given colour or in any colour ("red circle",
/// "circle").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Spec {
    /// The colour asked for; `None` accepts any colour.
    pub colour: Option<Colour>,
    /// The shape asked for.
    pub shape: ShapeKind,
}

impl Spec {
    /// A `shape` of any colour.
    #[must_use]
    pub fn any(shape: ShapeKind) -> Self {
        Self { colour: None, shape }
    }

    /// A `shape` in `colour`.
    #[must_use]
    pub fn coloured(colour: Colour, shape: ShapeKind) -> Self {
        Self { colour: Some(colour), shape }
    }

    /// Whether a concrete object satisfies the spec: the same shape, and the same colour
    /// when the spec names one.
    #[must_use]
    pub fn matches(self, object: Object) -> bool {
        self.shape == object.shape && self.colour.is_none_or(|c| c == object.colour)
    }

    /// The words for `count` objects of this spec: "red circle", "circles".
    #[must_use]
    pub fn words(self, count: u8) -> String {
        match self.colour {
            Some(c) => format!("{} {}", c.word(), self.shape.noun(count)),
            None => self.shape.noun(count).to_string(),
        }
    }

    /// "red circle" or "circle".
    #[must_use]
    pub fn text(self) -> String {
        self.words(1)
    }

    /// Every spec of the world: the 3 colourless shapes, then the 12 coloured objects.
    #[must_use]
    pub fn all() -> Vec<Spec> {
        let mut out: Vec<Spec> = ShapeKind::ALL.into_iter().map(Spec::any).collect();
        out.extend(Object::all().into_iter().map(|o| Spec::coloured(o.colour, o.shape)));
        out
    }
}

impl From<Object> for Spec {
    fn from(o: Object) -> Self {
        Spec::coloured(o.colour, o.shape)
    }
}

/// GenEval's six task categories, decided by a prompt's form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    /// "a circle": one object, any colour.
    SingleObject,
    /// "a circle and a square": two objects of different shapes, any colours.
    TwoObject,
    /// "3 circles", "3 red circles": exactly N objects.
    Counting,
    /// "a red circle": one object of a given colour.
    Colors,
    /// "a circle left of a square": two objects in a spatial relation.
    Position,
    /// "a red circle and a blue square": two objects, each bound to its colour.
    ColorAttr,
}

impl Category {
    /// Every category, in GenEval's table order.
    pub const ALL: [Category; 6] = [
        Category::SingleObject,
        Category::TwoObject,
        Category::Counting,
        Category::Colors,
        Category::Position,
        Category::ColorAttr,
    ];

    /// GenEval's name of the category (`single_object`, `two_object`, `counting`, `colors`,
    /// `position`, `color_attr`), as in JSONL prompt files.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Category::SingleObject => "single_object",
            Category::TwoObject => "two_object",
            Category::Counting => "counting",
            Category::Colors => "colors",
            Category::Position => "position",
            Category::ColorAttr => "color_attr",
        }
    }

    /// The category called `name` (see [`Category::name`]).
    #[must_use]
    pub fn from_name(name: &str) -> Option<Category> {
        Category::ALL.into_iter().find(|c| c.name() == name)
    }
}

impl std::fmt::Display for Category {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One clause of a prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Clause {
    /// "a `spec`" or "`count` `spec`s": at least one object matching the spec when `count` is 1
    /// (GenEval's include requirement), exactly `count` when it is 2–4 (include plus exclude).
    Count {
        /// How many, 1..=4.
        count: u8,
        /// Of which kind.
        object: Spec,
    },
    /// "a `subject` `relation` a `reference`": one of each, standing in the relation.
    Relation {
        /// The object the relation is about.
        subject: Spec,
        /// The relation.
        relation: Relation,
        /// The object it is relative to.
        reference: Spec,
    },
}

impl Clause {
    /// The clause's text in the grammar.
    #[must_use]
    pub fn text(&self) -> String {
        match *self {
            Clause::Count { count: 1, object } => format!("a {}", object.text()),
            Clause::Count { count, object } => format!("{count} {}", object.words(count)),
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

/// A prompt of the shapes world in one of the grammar's four forms.
///
/// Constructed only through [`Prompt::new`] (or the parser), which enforces the grammar's
/// structural rules, so every `Prompt` has a text, a category, a layout and a verifier
/// verdict.
///
/// Serialises as its text and deserialises by parsing it, so a `Prompt` in a config, a JSONL
/// record or an [`crate::reward::ImageSample`] is always grammatical.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub struct Prompt {
    clauses: Vec<Clause>,
}

impl Prompt {
    /// A prompt from its clauses, checked against the grammar: one count clause (count
    /// 1..=[`MAX_COUNT`]); two count clauses of one object each, of different shapes; or one
    /// relation between objects of different shapes.
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

    /// The number of objects the prompt asks for: the sum of its clauses' counts, 2 for a
    /// relation ("a circle left of a square").
    #[must_use]
    pub fn object_count(&self) -> usize {
        self.clauses
            .iter()
            .map(|c| match c {
                Clause::Count { count, .. } => usize::from(*count),
                Clause::Relation { .. } => 2,
            })
            .sum()
    }

    /// The prompt as text in the grammar (the parser's exact inverse).
    #[must_use]
    pub fn to_text(&self) -> String {
        self.clauses.iter().map(Clause::text).collect::<Vec<_>>().join(" and ")
    }

    /// The GenEval category of the prompt: a relation is `position`; two objects are
    /// `color_attr` when either has a colour, else `two_object`; one clause of count ≥ 2 is
    /// `counting`; one object is `colors` with a colour, else `single_object`.
    #[must_use]
    pub fn category(&self) -> Category {
        match self.clauses[..] {
            [Clause::Relation { .. }] => Category::Position,
            [Clause::Count { object: a, .. }, Clause::Count { object: b, .. }] => {
                if a.colour.is_some() || b.colour.is_some() {
                    Category::ColorAttr
                } else {
                    Category::TwoObject
                }
            }
            [Clause::Count { count, .. }] if count >= 2 => Category::Counting,
            [Clause::Count { object, .. }] if object.colour.is_some() => Category::Colors,
            _ => Category::SingleObject,
        }
    }

    /// The relation the prompt asks for, if it is a position prompt.
    #[must_use]
    pub fn relation(&self) -> Option<Relation> {
        self.clauses.iter().find_map(|c| match *c {
            Clause::Relation { relation, .. } => Some(relation),
            Clause::Count { .. } => None,
        })
    }

    /// The objects an image of this prompt must contain, one entry per object instance,
    /// in clause order (a relation contributes its subject then its reference).
    #[must_use]
    pub fn objects(&self) -> Vec<Spec> {
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
    let texts = || clauses.iter().map(Clause::text).collect::<Vec<_>>().join(" | ");
    match *clauses {
        [Clause::Relation { subject, reference, .. }]
        | [Clause::Count { count: 1, object: subject }, Clause::Count { count: 1, object: reference }] =>
        {
            if subject.shape == reference.shape {
                let s = subject.shape.singular();
                return invalid(format!(
                    "the two objects of `{}` must be different shapes, got `{s}` twice",
                    texts()
                ));
            }
            Ok(())
        }
        [Clause::Count { count, object }] => {
            if !(1..=MAX_COUNT).contains(&count) {
                return invalid(format!(
                    "count {count} for `{}` is outside 1..={MAX_COUNT}",
                    object.text()
                ));
            }
            Ok(())
        }
        _ => invalid(format!(
            "expected one count clause, two single objects joined by `and`, or one relation, \
             got {} clauses ({})",
            clauses.len(),
            texts()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RED_CIRCLE: Spec = Spec { colour: Some(Colour::Red), shape: ShapeKind::Circle };
    const BLUE_SQUARE: Spec = Spec { colour: Some(Colour::Blue), shape: ShapeKind::Square };
    const CIRCLE: Spec = Spec { colour: None, shape: ShapeKind::Circle };
    const SQUARE: Spec = Spec { colour: None, shape: ShapeKind::Square };

    fn count(count: u8, object: Spec) -> Clause {
        Clause::Count { count, object }
    }

    fn rel(subject: Spec, reference: Spec) -> Clause {
        Clause::Relation { subject, relation: Relation::LeftOf, reference }
    }

    #[test]
    fn texts_and_categories_follow_the_grammar() {
        let cases = [
            (vec![count(1, CIRCLE)], "a circle", Category::SingleObject),
            (vec![count(1, RED_CIRCLE)], "a red circle", Category::Colors),
            (vec![count(3, CIRCLE)], "3 circles", Category::Counting),
            (vec![count(3, RED_CIRCLE)], "3 red circles", Category::Counting),
            (
                vec![count(1, CIRCLE), count(1, SQUARE)],
                "a circle and a square",
                Category::TwoObject,
            ),
            (
                vec![count(1, RED_CIRCLE), count(1, BLUE_SQUARE)],
                "a red circle and a blue square",
                Category::ColorAttr,
            ),
            (vec![rel(CIRCLE, SQUARE)], "a circle left of a square", Category::Position),
            (
                vec![rel(BLUE_SQUARE, RED_CIRCLE)],
                "a blue square left of a red circle",
                Category::Position,
            ),
        ];
        for (clauses, text, category) in cases {
            let p = Prompt::new(clauses).unwrap();
            assert_eq!(p.to_text(), text);
            assert_eq!(p.category(), category, "{text}");
        }
        let p = Prompt::new(vec![count(3, RED_CIRCLE)]).unwrap();
        assert_eq!(p.objects(), vec![RED_CIRCLE; 3]);
        let p = Prompt::new(vec![rel(BLUE_SQUARE, RED_CIRCLE)]).unwrap();
        assert_eq!(p.objects(), vec![BLUE_SQUARE, RED_CIRCLE]);
        assert_eq!(p.relation(), Some(Relation::LeftOf));
    }

    #[test]
    fn specs_match_any_colour_only_when_none_is_named() {
        let red = Object::new(Colour::Red, ShapeKind::Circle);
        let blue = Object::new(Colour::Blue, ShapeKind::Circle);
        assert!(CIRCLE.matches(red) && CIRCLE.matches(blue));
        assert!(RED_CIRCLE.matches(red) && !RED_CIRCLE.matches(blue));
        assert!(!SQUARE.matches(red));
        assert_eq!(Spec::all().len(), 15);
        for c in Category::ALL {
            assert_eq!(Category::from_name(c.name()), Some(c));
        }
        assert_eq!(serde_json::to_string(&Category::ColorAttr).unwrap(), "\"color_attr\"");
    }

    #[test]
    fn structural_rules_are_enforced() {
        assert!(Prompt::new(vec![]).is_err());
        assert!(Prompt::new(vec![count(0, RED_CIRCLE)]).is_err());
        assert!(Prompt::new(vec![count(5, RED_CIRCLE)]).is_err());
        assert!(Prompt::new(vec![count(4, RED_CIRCLE)]).is_ok());
        assert!(Prompt::new(vec![count(2, RED_CIRCLE), count(1, BLUE_SQUARE)]).is_err());
        let err = Prompt::new(vec![count(1, RED_CIRCLE), count(1, CIRCLE)]).unwrap_err();
        assert!(err.to_string().contains("different shapes"), "{err}");
        assert!(Prompt::new(vec![rel(RED_CIRCLE, CIRCLE)]).is_err());
        assert!(Prompt::new(vec![rel(RED_CIRCLE, BLUE_SQUARE), count(1, RED_CIRCLE)]).is_err());
        let err = Prompt::new(vec![count(1, RED_CIRCLE); 3]).unwrap_err().to_string();
        assert!(err.contains("3 clauses"), "{err}");
    }

    #[test]
    fn serde_goes_through_the_text() {
        let p = Prompt::from_text("a red circle and a blue square").unwrap();
        let json = serde_json::to_string(&p).unwrap();
        assert_eq!(json, "\"a red circle and a blue square\"");
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
