//! The primitive operations the code-world templates are composed of. Each has an English
//! phrase, a Python expression and a Rust evaluation with Python's semantics (e.g. `%` is
//! floored: `-3 % 2 == 1`).

/// A predicate on an int `x`, written as a phrase over a collection noun.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Filter {
    /// Every element.
    All,
    /// `x % 2 == 0`.
    Even,
    /// `x % 2 == 1`.
    Odd,
    /// `x > 0`.
    Positive,
    /// `x < 0`.
    Negative,
    /// `x != 0`.
    Nonzero,
    /// `x > 3`.
    Above3,
    /// `x < 5`.
    Below5,
    /// `x % 3 == 0`.
    Mult3,
}

impl Filter {
    /// Every filter.
    pub const ALL: [Filter; 9] = [
        Self::All,
        Self::Even,
        Self::Odd,
        Self::Positive,
        Self::Negative,
        Self::Nonzero,
        Self::Above3,
        Self::Below5,
        Self::Mult3,
    ];

    /// The template key part.
    pub fn key(self) -> &'static str {
        match self {
            Self::All => "all",
            Self::Even => "even",
            Self::Odd => "odd",
            Self::Positive => "positive",
            Self::Negative => "negative",
            Self::Nonzero => "nonzero",
            Self::Above3 => "above3",
            Self::Below5 => "below5",
            Self::Mult3 => "mult3",
        }
    }

    /// The noun phrase for the selected elements of a collection described by `loc`
    /// (`"in xs"`, `"from 1 to n"`).
    pub fn phrase(self, loc: &str) -> String {
        let adj = |a: &str| format!("the {a} numbers {loc}");
        match self {
            Self::All => format!("the numbers {loc}"),
            Self::Even => adj("even"),
            Self::Odd => adj("odd"),
            Self::Positive => adj("positive"),
            Self::Negative => adj("negative"),
            Self::Nonzero => adj("nonzero"),
            Self::Above3 => format!("the numbers {loc} greater than 3"),
            Self::Below5 => format!("the numbers {loc} less than 5"),
            Self::Mult3 => format!("the multiples of 3 {loc}"),
        }
    }

    /// The Python condition on `x`, or `None` for no condition.
    pub fn python(self) -> Option<&'static str> {
        match self {
            Self::All => None,
            Self::Even => Some("x % 2 == 0"),
            Self::Odd => Some("x % 2 == 1"),
            Self::Positive => Some("x > 0"),
            Self::Negative => Some("x < 0"),
            Self::Nonzero => Some("x != 0"),
            Self::Above3 => Some("x > 3"),
            Self::Below5 => Some("x < 5"),
            Self::Mult3 => Some("x % 3 == 0"),
        }
    }

    /// Whether `x` is selected.
    pub fn keep(self, x: i64) -> bool {
        match self {
            Self::All => true,
            Self::Even => x.rem_euclid(2) == 0,
            Self::Odd => x.rem_euclid(2) == 1,
            Self::Positive => x > 0,
            Self::Negative => x < 0,
            Self::Nonzero => x != 0,
            Self::Above3 => x > 3,
            Self::Below5 => x < 5,
            Self::Mult3 => x.rem_euclid(3) == 0,
        }
    }
}

/// A map on an int `x`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Map {
    /// `x`.
    Id,
    /// `x * x`.
    Square,
    /// `2 * x`.
    Double,
    /// `3 * x`.
    Triple,
    /// `-x`.
    Negate,
    /// `abs(x)`.
    Abs,
    /// `x + 1`.
    Succ,
    /// `x - 1`.
    Pred,
}

impl Map {
    /// Every map.
    pub const ALL: [Map; 8] = [
        Self::Id,
        Self::Square,
        Self::Double,
        Self::Triple,
        Self::Negate,
        Self::Abs,
        Self::Succ,
        Self::Pred,
    ];

    /// The template key part.
    pub fn key(self) -> &'static str {
        match self {
            Self::Id => "id",
            Self::Square => "square",
            Self::Double => "double",
            Self::Triple => "triple",
            Self::Negate => "negate",
            Self::Abs => "abs",
            Self::Succ => "succ",
            Self::Pred => "pred",
        }
    }

    /// The noun phrase for the mapped values of `noun`.
    pub fn phrase(self, noun: &str) -> String {
        let of = |w: &str| format!("the {w} of {noun}");
        match self {
            Self::Id => noun.to_string(),
            Self::Square => of("squares"),
            Self::Double => of("doubles"),
            Self::Triple => of("triples"),
            Self::Negate => of("negations"),
            Self::Abs => of("absolute values"),
            Self::Succ => format!("{noun}, each plus one,"),
            Self::Pred => format!("{noun}, each minus one,"),
        }
    }

    /// The Python expression in `x`.
    pub fn python(self) -> &'static str {
        match self {
            Self::Id => "x",
            Self::Square => "x * x",
            Self::Double => "2 * x",
            Self::Triple => "3 * x",
            Self::Negate => "-x",
            Self::Abs => "abs(x)",
            Self::Succ => "x + 1",
            Self::Pred => "x - 1",
        }
    }

    /// The mapped value.
    pub fn apply(self, x: i64) -> i64 {
        match self {
            Self::Id => x,
            Self::Square => x * x,
            Self::Double => 2 * x,
            Self::Triple => 3 * x,
            Self::Negate => -x,
            Self::Abs => x.abs(),
            Self::Succ => x + 1,
            Self::Pred => x - 1,
        }
    }
}

/// A transformation of a string `s` (letters and spaces).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StrOp {
    /// `e[::-1]`.
    Reverse,
    /// `e.upper()`.
    Upper,
    /// `e.lower()`.
    Lower,
    /// `e.swapcase()`.
    Swapcase,
    /// `e.replace(' ', '')`.
    NoSpaces,
    /// `''.join(c for c in e if c not in 'aeiouAEIOU')`.
    NoVowels,
    /// `''.join(c * 2 for c in e)`.
    DoubleChars,
    /// `e[:3]`.
    First3,
    /// `e[1:]`.
    DropFirst,
    /// `e * 2`.
    Twice,
    /// `''.join(sorted(e))`.
    Sort,
    /// `e.title()`.
    Title,
}

/// The vowels removed by [`StrOp::NoVowels`] and counted by [`StrCount::Vowels`].
const VOWELS: &str = "aeiouAEIOU";

impl StrOp {
    /// Every string operation.
    pub const ALL: [StrOp; 12] = [
        Self::Reverse,
        Self::Upper,
        Self::Lower,
        Self::Swapcase,
        Self::NoSpaces,
        Self::NoVowels,
        Self::DoubleChars,
        Self::First3,
        Self::DropFirst,
        Self::Twice,
        Self::Sort,
        Self::Title,
    ];

    /// The template key part.
    pub fn key(self) -> &'static str {
        match self {
            Self::Reverse => "reverse",
            Self::Upper => "upper",
            Self::Lower => "lower",
            Self::Swapcase => "swapcase",
            Self::NoSpaces => "nospaces",
            Self::NoVowels => "novowels",
            Self::DoubleChars => "doublechars",
            Self::First3 => "first3",
            Self::DropFirst => "dropfirst",
            Self::Twice => "twice",
            Self::Sort => "sort",
            Self::Title => "title",
        }
    }

    /// The imperative phrase applied to `obj` (`"s"` or `"it"`).
    pub fn phrase(self, obj: &str) -> String {
        let poss = if obj == "it" { "its".to_string() } else { format!("the characters of {obj}") };
        match self {
            Self::Reverse => format!("reverse {obj}"),
            Self::Upper => format!("uppercase {obj}"),
            Self::Lower => format!("lowercase {obj}"),
            Self::Swapcase => format!("swap the case of {obj}"),
            Self::NoSpaces => format!("remove the spaces from {obj}"),
            Self::NoVowels => format!("remove the vowels from {obj}"),
            Self::DoubleChars => format!("double each character of {obj}"),
            Self::First3 => format!("keep the first three characters of {obj}"),
            Self::DropFirst => format!("drop the first character of {obj}"),
            Self::Twice => format!("repeat {obj} twice"),
            Self::Sort => format!("sort {poss}"),
            Self::Title => format!("capitalise each word of {obj}"),
        }
    }

    /// The Python expression applying the operation to expression `e`.
    pub fn python(self, e: &str) -> String {
        match self {
            Self::Reverse => format!("{e}[::-1]"),
            Self::Upper => format!("{e}.upper()"),
            Self::Lower => format!("{e}.lower()"),
            Self::Swapcase => format!("{e}.swapcase()"),
            Self::NoSpaces => format!("{e}.replace(' ', '')"),
            Self::NoVowels => format!("''.join(c for c in {e} if c not in '{VOWELS}')"),
            Self::DoubleChars => format!("''.join(c * 2 for c in {e})"),
            Self::First3 => format!("{e}[:3]"),
            Self::DropFirst => format!("{e}[1:]"),
            Self::Twice => format!("{e} * 2"),
            Self::Sort => format!("''.join(sorted({e}))"),
            Self::Title => format!("{e}.title()"),
        }
    }

    /// True when the Python form must be parenthesised before a postfix operation.
    pub fn is_binary(self) -> bool {
        matches!(self, Self::Twice)
    }

    /// The result on an ASCII string, with Python's semantics.
    pub fn apply(self, s: &str) -> String {
        match self {
            Self::Reverse => s.chars().rev().collect(),
            Self::Upper => s.to_ascii_uppercase(),
            Self::Lower => s.to_ascii_lowercase(),
            Self::Swapcase => s
                .chars()
                .map(|c| {
                    if c.is_ascii_uppercase() {
                        c.to_ascii_lowercase()
                    } else {
                        c.to_ascii_uppercase()
                    }
                })
                .collect(),
            Self::NoSpaces => s.replace(' ', ""),
            Self::NoVowels => s.chars().filter(|c| !VOWELS.contains(*c)).collect(),
            Self::DoubleChars => s.chars().flat_map(|c| [c, c]).collect(),
            Self::First3 => s.chars().take(3).collect(),
            Self::DropFirst => s.chars().skip(1).collect(),
            Self::Twice => s.repeat(2),
            Self::Sort => {
                let mut cs: Vec<char> = s.chars().collect();
                cs.sort_unstable();
                cs.into_iter().collect()
            }
            Self::Title => title(s),
        }
    }
}

/// Python's `str.title` on letters and spaces: a letter after a non-letter is uppercased,
/// every other letter lowercased.
fn title(s: &str) -> String {
    let mut prev_letter = false;
    s.chars()
        .map(|c| {
            let out = if prev_letter { c.to_ascii_lowercase() } else { c.to_ascii_uppercase() };
            prev_letter = c.is_ascii_alphabetic();
            out
        })
        .collect()
}

/// A count over a string `s`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StrCount {
    /// Vowels.
    Vowels,
    /// Spaces.
    Spaces,
    /// Uppercase letters.
    Uppercase,
    /// Words (`len(s.split())`).
    Words,
    /// Characters.
    Length,
    /// Distinct characters.
    Distinct,
}

impl StrCount {
    /// Every count.
    pub const ALL: [StrCount; 6] =
        [Self::Vowels, Self::Spaces, Self::Uppercase, Self::Words, Self::Length, Self::Distinct];

    /// The template key part.
    pub fn key(self) -> &'static str {
        match self {
            Self::Vowels => "vowels",
            Self::Spaces => "spaces",
            Self::Uppercase => "uppercase",
            Self::Words => "words",
            Self::Length => "length",
            Self::Distinct => "distinct",
        }
    }

    /// The noun phrase counted in `e`.
    pub fn phrase(self, e: &str) -> String {
        match self {
            Self::Vowels => format!("the number of vowels in {e}"),
            Self::Spaces => format!("the number of spaces in {e}"),
            Self::Uppercase => format!("the number of uppercase letters in {e}"),
            Self::Words => format!("the number of words in {e}"),
            Self::Length => format!("the length of {e}"),
            Self::Distinct => format!("the number of distinct characters in {e}"),
        }
    }

    /// The Python expression counting in `e`.
    pub fn python(self, e: &str) -> String {
        match self {
            Self::Vowels => format!("sum(c in '{VOWELS}' for c in {e})"),
            Self::Spaces => format!("{e}.count(' ')"),
            Self::Uppercase => format!("sum(c.isupper() for c in {e})"),
            Self::Words => format!("len({e}.split())"),
            Self::Length => format!("len({e})"),
            Self::Distinct => format!("len(set({e}))"),
        }
    }

    /// The count on an ASCII string.
    pub fn apply(self, s: &str) -> i64 {
        let n = match self {
            Self::Vowels => s.chars().filter(|c| VOWELS.contains(*c)).count(),
            Self::Spaces => s.chars().filter(|&c| c == ' ').count(),
            Self::Uppercase => s.chars().filter(|c| c.is_ascii_uppercase()).count(),
            Self::Words => s.split_whitespace().count(),
            Self::Length => s.chars().count(),
            Self::Distinct => s.chars().collect::<std::collections::BTreeSet<_>>().len(),
        };
        n as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_semantics() {
        assert!(Filter::Odd.keep(-3) && !Filter::Even.keep(-3) && Filter::Mult3.keep(-6));
        assert_eq!(StrOp::Title.apply("hELLO wORld x"), "Hello World X");
        assert_eq!(StrOp::Swapcase.apply("aB c"), "Ab C");
        assert_eq!(StrOp::Sort.apply("ba A"), " Aab");
        assert_eq!(StrOp::NoVowels.apply("Education is"), "dctn s");
        assert_eq!(StrOp::First3.apply("ab"), "ab");
        assert_eq!(StrCount::Words.apply("  a  bc "), 2);
        assert_eq!(StrCount::Distinct.apply("aab "), 3);
    }
}
