//! The primitive operations the code-world templates are composed of. Each has an English
//! phrase, a Python expression and a Rust evaluation with Python's semantics (e.g. `%` is
//! floored: `-3 % 2 == 1`).

/// A predicate on an int `x`, written as a phrase over a collection noun. The parametrised
/// filters carry their constant (`Above(4)` is `x > 4`), so one template shape has several
/// specs that differ only in the constant.
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
    /// `x > k`.
    Above(i64),
    /// `x < k`.
    Below(i64),
    /// `x % k == 0`.
    MultOf(i64),
}

impl Filter {
    /// One filter of each kind (the parametrised ones with their first constant).
    pub const KINDS: [Filter; 9] = [
        Self::All,
        Self::Even,
        Self::Odd,
        Self::Positive,
        Self::Negative,
        Self::Nonzero,
        Self::Above(1),
        Self::Below(2),
        Self::MultOf(3),
    ];

    /// Every instance of this filter's kind: `Above` with `k` in 1..=7, `Below` with `k` in 2..=8
    /// (`Below(1)` would select nothing from `1..=n`), `MultOf` with `k` in 3..=5 (2 is
    /// `Even`); the others alone.
    pub fn instances(self) -> Vec<Filter> {
        match self {
            Self::Above(_) => (1..=7).map(Self::Above).collect(),
            Self::Below(_) => (2..=8).map(Self::Below).collect(),
            Self::MultOf(_) => (3..=5).map(Self::MultOf).collect(),
            f => vec![f],
        }
    }

    /// Every filter instance, kind by kind.
    pub fn all() -> Vec<Filter> {
        Self::KINDS.iter().flat_map(|f| f.instances()).collect()
    }

    /// The kind's key part, without the constant (`above`).
    pub fn kind_key(self) -> &'static str {
        match self {
            Self::All => "all",
            Self::Even => "even",
            Self::Odd => "odd",
            Self::Positive => "positive",
            Self::Negative => "negative",
            Self::Nonzero => "nonzero",
            Self::Above(_) => "above",
            Self::Below(_) => "below",
            Self::MultOf(_) => "mult",
        }
    }

    /// The key part with the constant (`above4`).
    pub fn key(self) -> String {
        match self {
            Self::Above(k) | Self::Below(k) | Self::MultOf(k) => format!("{}{k}", self.kind_key()),
            _ => self.kind_key().to_string(),
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
            Self::Above(k) => format!("the numbers {loc} greater than {k}"),
            Self::Below(k) => format!("the numbers {loc} less than {k}"),
            Self::MultOf(k) => format!("the multiples of {k} {loc}"),
        }
    }

    /// The Python condition on `x`, or `None` for no condition.
    pub fn python(self) -> Option<String> {
        Some(match self {
            Self::All => return None,
            Self::Even => "x % 2 == 0".into(),
            Self::Odd => "x % 2 == 1".into(),
            Self::Positive => "x > 0".into(),
            Self::Negative => "x < 0".into(),
            Self::Nonzero => "x != 0".into(),
            Self::Above(k) => format!("x > {k}"),
            Self::Below(k) => format!("x < {k}"),
            Self::MultOf(k) => format!("x % {k} == 0"),
        })
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
            Self::Above(k) => x > k,
            Self::Below(k) => x < k,
            Self::MultOf(k) => x.rem_euclid(k) == 0,
        }
    }
}

/// A map on an int `x`; `Times` and `Plus` carry their constant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Map {
    /// `x`.
    Id,
    /// `x * x`.
    Square,
    /// `-x`.
    Negate,
    /// `abs(x)`.
    Abs,
    /// `k * x`.
    Times(i64),
    /// `x + k` (`x - |k|` for a negative `k`).
    Plus(i64),
}

impl Map {
    /// One map of each kind (the parametrised ones with their first constant).
    pub const KINDS: [Map; 6] =
        [Self::Id, Self::Square, Self::Negate, Self::Abs, Self::Times(2), Self::Plus(1)];

    /// Every instance of this map's kind: `Times` with `k` in 2..=5, `Plus` with `k` in
    /// ±1..=±5; the others alone.
    pub fn instances(self) -> Vec<Map> {
        match self {
            Self::Times(_) => (2..=5).map(Self::Times).collect(),
            Self::Plus(_) => (1..=5).flat_map(|k| [Self::Plus(k), Self::Plus(-k)]).collect(),
            m => vec![m],
        }
    }

    /// Every map instance, kind by kind.
    pub fn all() -> Vec<Map> {
        Self::KINDS.iter().flat_map(|m| m.instances()).collect()
    }

    /// The kind's key part, without the constant (`plus`).
    pub fn kind_key(self) -> &'static str {
        match self {
            Self::Id => "id",
            Self::Square => "square",
            Self::Negate => "negate",
            Self::Abs => "abs",
            Self::Times(_) => "times",
            Self::Plus(_) => "plus",
        }
    }

    /// The key part with the constant (`plus-2`).
    pub fn key(self) -> String {
        match self {
            Self::Times(k) | Self::Plus(k) => format!("{}{k}", self.kind_key()),
            _ => self.kind_key().to_string(),
        }
    }

    /// The noun phrase for the mapped values of `noun`.
    pub fn phrase(self, noun: &str) -> String {
        let of = |w: &str| format!("the {w} of {noun}");
        match self {
            Self::Id => noun.to_string(),
            Self::Square => of("squares"),
            Self::Negate => of("negations"),
            Self::Abs => of("absolute values"),
            Self::Times(k) => format!("{noun}, each times {k},"),
            Self::Plus(k) if k < 0 => format!("{noun}, each minus {},", -k),
            Self::Plus(k) => format!("{noun}, each plus {k},"),
        }
    }

    /// The Python expression in `x`.
    pub fn python(self) -> String {
        match self {
            Self::Id => "x".into(),
            Self::Square => "x * x".into(),
            Self::Negate => "-x".into(),
            Self::Abs => "abs(x)".into(),
            Self::Times(k) => format!("{k} * x"),
            Self::Plus(k) if k < 0 => format!("x - {}", -k),
            Self::Plus(k) => format!("x + {k}"),
        }
    }

    /// The mapped value.
    pub fn apply(self, x: i64) -> i64 {
        match self {
            Self::Id => x,
            Self::Square => x * x,
            Self::Negate => -x,
            Self::Abs => x.abs(),
            Self::Times(k) => k * x,
            Self::Plus(k) => x + k,
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
    /// `e[:k]`.
    First(usize),
    /// `e[k:]`.
    Drop(usize),
    /// `e * k`.
    Repeat(usize),
    /// `''.join(sorted(e))`.
    Sort,
    /// `e.title()`.
    Title,
}

/// The vowels removed by [`StrOp::NoVowels`] and counted by [`StrCount::Vowels`].
const VOWELS: &str = "aeiouAEIOU";

impl StrOp {
    /// One operation of each kind (the parametrised ones with their first constant).
    pub const KINDS: [StrOp; 12] = [
        Self::Reverse,
        Self::Upper,
        Self::Lower,
        Self::Swapcase,
        Self::NoSpaces,
        Self::NoVowels,
        Self::DoubleChars,
        Self::First(2),
        Self::Drop(1),
        Self::Repeat(2),
        Self::Sort,
        Self::Title,
    ];

    /// Every instance of this operation's kind: `First` with `k` in 2..=5, `Drop` with `k` in
    /// 1..=3, `Repeat` with `k` in 2..=3; the others alone.
    pub fn instances(self) -> Vec<StrOp> {
        match self {
            Self::First(_) => (2..=5).map(Self::First).collect(),
            Self::Drop(_) => (1..=3).map(Self::Drop).collect(),
            Self::Repeat(_) => (2..=3).map(Self::Repeat).collect(),
            op => vec![op],
        }
    }

    /// Every operation instance, kind by kind.
    pub fn all() -> Vec<StrOp> {
        Self::KINDS.iter().flat_map(|op| op.instances()).collect()
    }

    /// The kind's key part, without the constant (`first`).
    pub fn kind_key(self) -> &'static str {
        match self {
            Self::Reverse => "reverse",
            Self::Upper => "upper",
            Self::Lower => "lower",
            Self::Swapcase => "swapcase",
            Self::NoSpaces => "nospaces",
            Self::NoVowels => "novowels",
            Self::DoubleChars => "doublechars",
            Self::First(_) => "first",
            Self::Drop(_) => "drop",
            Self::Repeat(_) => "repeat",
            Self::Sort => "sort",
            Self::Title => "title",
        }
    }

    /// The key part with the constant (`first3`).
    pub fn key(self) -> String {
        match self {
            Self::First(k) | Self::Drop(k) | Self::Repeat(k) => format!("{}{k}", self.kind_key()),
            _ => self.kind_key().to_string(),
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
            Self::First(k) => format!("keep the first {k} characters of {obj}"),
            Self::Drop(1) => format!("drop the first character of {obj}"),
            Self::Drop(k) => format!("drop the first {k} characters of {obj}"),
            Self::Repeat(k) => format!("repeat {obj} {k} times"),
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
            Self::First(k) => format!("{e}[:{k}]"),
            Self::Drop(k) => format!("{e}[{k}:]"),
            Self::Repeat(k) => format!("{e} * {k}"),
            Self::Sort => format!("''.join(sorted({e}))"),
            Self::Title => format!("{e}.title()"),
        }
    }

    /// True when the Python form must be parenthesised before a postfix operation.
    pub fn is_binary(self) -> bool {
        matches!(self, Self::Repeat(_))
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
            Self::First(k) => s.chars().take(k).collect(),
            Self::Drop(k) => s.chars().skip(k).collect(),
            Self::Repeat(k) => s.repeat(k),
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
        assert!(
            Filter::Odd.keep(-3)
                && !Filter::Even.keep(-3)
                && Filter::MultOf(3).keep(-6)
                && !Filter::MultOf(4).keep(-6)
        );
        assert_eq!(StrOp::Title.apply("hELLO wORld x"), "Hello World X");
        assert_eq!(StrOp::Swapcase.apply("aB c"), "Ab C");
        assert_eq!(StrOp::Sort.apply("ba A"), " Aab");
        assert_eq!(StrOp::NoVowels.apply("Education is"), "dctn s");
        assert_eq!(StrOp::First(3).apply("ab"), "ab");
        assert_eq!(StrOp::Drop(2).apply("abc"), "c");
        assert_eq!(StrOp::Repeat(3).apply("ab"), "ababab");
        assert_eq!(Map::Plus(-2).python(), "x - 2");
        assert_eq!(Map::Plus(-2).phrase("the numbers"), "the numbers, each minus 2,");
        assert_eq!(Filter::Above(4).python().unwrap(), "x > 4");
        assert_eq!((Filter::all().len(), Map::all().len(), StrOp::all().len()), (23, 18, 18));
        assert_eq!(StrCount::Words.apply("  a  bc "), 2);
        assert_eq!(StrCount::Distinct.apply("aab "), 3);
    }
}
