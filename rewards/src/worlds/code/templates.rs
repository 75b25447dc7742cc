//! The spec templates of the code world: compositions of the primitive operations in
//! [`super::ops`] into 3 232 distinct one-line Python functions, in five families with a fixed
//! function name `f` and a fixed argument name per family (`xs`, `n` or `s`). A template's
//! *shape* is the template with its constants forgotten (`reduce/sum/plus/above` for "the sum
//! of the numbers in xs greater than 4, each plus 2"), of which the parametrised
//! ones have several templates that differ only in a constant (534 shapes in all).
//!
//! | family | spec | solution shape | templates | shapes |
//! |---|---|---|---|---|
//! | `reduce` | "the sum / largest / smallest of M(F(xs))", "the count of F(xs)" | `sum(M for x in xs if C)` | 3·18·23 + 23 = 1 265 | 3·6·9 + 9 = 171 |
//! | `select` | "a list / sorted list / reversed list of M(F(xs))" | `[M for x in xs if C]` | 18·23·3 = 1 242 | 6·9·3 = 162 |
//! | `range` | "the sum of M(F(1..n))" | `sum(M for x in range(1, n + 1) if C)` | 18·22 − 1 = 395 (not `negative`, not the constant `plus-1/below2`) | 6·8 = 48 |
//! | `string` | "op₁ s, then op₂ it" | `op₂(op₁(s))` | 18 + 18·17 = 324 | 12 + 12·11 + 3 = 147 |
//! | `count` | "the number of vowels / spaces / … in s" | `sum(c in 'aeiou…' for c in s)` | 6 | 6 |

use super::ops::{Filter, Map, StrCount, StrOp};
use super::value::Value;
use drift_core::rng::SplitMix64;

/// How a `reduce` template folds its selected values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reducer {
    /// `sum(...)`.
    Sum,
    /// `max(..., default=0)`.
    Max,
    /// `min(..., default=0)`.
    Min,
    /// The number of selected elements.
    Count,
}

/// The order of a `select` template's output list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Input order.
    Keep,
    /// Increasing.
    Sorted,
    /// Reversed input order.
    Reversed,
}

/// One spec template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Template {
    /// `f(xs) -> int`.
    Reduce(Reducer, Map, Filter),
    /// `f(xs) -> list`.
    Select(Map, Filter, Order),
    /// `f(n) -> int` over `1..=n`.
    Range(Map, Filter),
    /// `f(s) -> str`: one or two string operations.
    Str(StrOp, Option<StrOp>),
    /// `f(s) -> int`.
    Count(StrCount),
}

/// Every template, in a fixed order.
pub fn all_templates() -> Vec<Template> {
    let (maps, filters, ops) = (Map::all(), Filter::all(), StrOp::all());
    let mut out = Vec::new();
    for r in [Reducer::Sum, Reducer::Max, Reducer::Min] {
        for &m in &maps {
            out.extend(filters.iter().map(|&f| Template::Reduce(r, m, f)));
        }
    }
    out.extend(filters.iter().map(|&f| Template::Reduce(Reducer::Count, Map::Id, f)));
    for o in [Order::Keep, Order::Sorted, Order::Reversed] {
        for &m in &maps {
            out.extend(filters.iter().map(|&f| Template::Select(m, f, o)));
        }
    }
    for &m in &maps {
        // A sum over 1..=n that is the same for every n (nothing selected, or only x = 1
        // mapped to 0) is a constant function, which the tests could not tell apart.
        let varies = |t: &Template| {
            let outs: Vec<Option<Value>> = (0..=20).map(|n| t.eval(&Value::Int(n))).collect();
            outs.windows(2).any(|w| w[0] != w[1])
        };
        out.extend(filters.iter().map(|&f| Template::Range(m, f)).filter(varies));
    }
    for &a in &ops {
        out.push(Template::Str(a, None));
        out.extend(ops.iter().filter(|&&b| b != a).map(|&b| Template::Str(a, Some(b))));
    }
    out.extend(StrCount::ALL.map(Template::Count));
    out
}

/// `M for x in SRC if C` (the generator body shared by the int families).
fn comprehension(m: Map, f: Filter, src: &str) -> String {
    let m = m.python();
    match f.python() {
        Some(c) => format!("{m} for x in {src} if {c}"),
        None => format!("{m} for x in {src}"),
    }
}

impl Template {
    /// The family name (`reduce`, `select`, `range`, `string`, `count`).
    pub fn family(&self) -> &'static str {
        match self {
            Self::Reduce(..) => "reduce",
            Self::Select(..) => "select",
            Self::Range(..) => "range",
            Self::Str(..) => "string",
            Self::Count(..) => "count",
        }
    }

    /// A stable unique key, e.g. `reduce/sum/square/above4`, `string/first3/upper`.
    pub fn key(&self) -> String {
        self.key_with(Filter::key, Map::key, StrOp::key)
    }

    /// The key of the template's shape: the key with every constant left out, e.g.
    /// `reduce/sum/square/above`. Templates of one shape differ only in their constants.
    pub fn shape_key(&self) -> String {
        self.key_with(
            |f| f.kind_key().to_string(),
            |m| m.kind_key().to_string(),
            |op| op.kind_key().to_string(),
        )
    }

    fn key_with(
        &self,
        filter: impl Fn(Filter) -> String,
        map: impl Fn(Map) -> String,
        op: impl Fn(StrOp) -> String,
    ) -> String {
        let r = |r: Reducer| format!("{r:?}").to_lowercase();
        let o = |o: Order| format!("{o:?}").to_lowercase();
        match *self {
            Self::Reduce(red, m, f) => format!("reduce/{}/{}/{}", r(red), map(m), filter(f)),
            Self::Select(m, f, ord) => format!("select/{}/{}/{}", o(ord), map(m), filter(f)),
            Self::Range(m, f) => format!("range/{}/{}", map(m), filter(f)),
            Self::Str(a, None) => format!("string/{}", op(a)),
            Self::Str(a, Some(b)) => format!("string/{}/{}", op(a), op(b)),
            Self::Count(c) => format!("count/{}", c.key()),
        }
    }

    /// The argument name of the family.
    pub fn arg(&self) -> &'static str {
        match self {
            Self::Reduce(..) | Self::Select(..) => "xs",
            Self::Range(..) => "n",
            Self::Str(..) | Self::Count(..) => "s",
        }
    }

    /// The natural-language spec (the prompt).
    pub fn spec(&self) -> String {
        let head = format!("Write a Python function f({})", self.arg());
        match *self {
            Self::Reduce(Reducer::Count, _, f) => {
                format!("{head} that returns the count of {}.", f.phrase("in xs"))
            }
            Self::Reduce(red, m, f) => {
                let what = m.phrase(&f.phrase("in xs"));
                match red {
                    Reducer::Sum => format!("{head} that returns the sum of {what}."),
                    Reducer::Max => format!(
                        "{head} that returns the largest of {what}, or 0 if there are none."
                    ),
                    _ => format!(
                        "{head} that returns the smallest of {what}, or 0 if there are none."
                    ),
                }
            }
            Self::Select(m, f, ord) => {
                let what = m.phrase(&f.phrase("in xs"));
                match ord {
                    Order::Keep => format!("{head} that returns a list of {what} in order."),
                    Order::Sorted => format!("{head} that returns a sorted list of {what}."),
                    Order::Reversed => {
                        format!("{head} that returns a list of {what} in reverse order.")
                    }
                }
            }
            Self::Range(m, f) => {
                format!("{head} that returns the sum of {}.", m.phrase(&f.phrase("from 1 to n")))
            }
            Self::Str(a, None) => format!("{head}: {} and return the result.", a.phrase("s")),
            Self::Str(a, Some(b)) => format!(
                "{head}: {}, then {}, and return the result.",
                a.phrase("s"),
                b.phrase("it")
            ),
            Self::Count(c) => format!("{head} that returns {}.", c.phrase("s")),
        }
    }

    /// The reference solution, two lines: `def f(arg):` and one `return`.
    pub fn solution(&self) -> String {
        let body = match *self {
            Self::Reduce(Reducer::Count, _, Filter::All) => "len(xs)".to_string(),
            Self::Reduce(Reducer::Count, _, f) => {
                format!("sum(1 for x in xs if {})", f.python().unwrap_or_else(|| "True".into()))
            }
            Self::Reduce(Reducer::Sum, m, f) => format!("sum({})", comprehension(m, f, "xs")),
            Self::Reduce(Reducer::Max, m, f) => {
                format!("max(({}), default=0)", comprehension(m, f, "xs"))
            }
            Self::Reduce(Reducer::Min, m, f) => {
                format!("min(({}), default=0)", comprehension(m, f, "xs"))
            }
            Self::Select(m, f, Order::Keep) => format!("[{}]", comprehension(m, f, "xs")),
            Self::Select(m, f, Order::Sorted) => format!("sorted({})", comprehension(m, f, "xs")),
            Self::Select(m, f, Order::Reversed) => format!("[{}][::-1]", comprehension(m, f, "xs")),
            Self::Range(m, f) => format!("sum({})", comprehension(m, f, "range(1, n + 1)")),
            Self::Str(a, None) => a.python("s"),
            Self::Str(a, Some(b)) => {
                let inner = a.python("s");
                let inner = if a.is_binary() { format!("({inner})") } else { inner };
                b.python(&inner)
            }
            Self::Count(c) => c.python("s"),
        };
        format!("def f({}):\n    return {body}\n", self.arg())
    }

    /// A random argument of the family's type.
    pub fn random_input(&self, rng: &mut SplitMix64) -> Value {
        match self {
            Self::Reduce(..) | Self::Select(..) => {
                let len = rng.below32(8);
                Value::List((0..len).map(|_| rng.range32(-9, 9)).collect())
            }
            Self::Range(..) => Value::Int(rng.range32(0, 20)),
            Self::Str(..) | Self::Count(..) => Value::Str(random_text(rng)),
        }
    }

    /// The function's result on `input`, or `None` when `input` has the wrong type.
    pub fn eval(&self, input: &Value) -> Option<Value> {
        match (*self, input) {
            (Self::Reduce(red, m, f), Value::List(xs)) => {
                let ys = xs.iter().filter(|&&x| f.keep(x)).map(|&x| m.apply(x));
                Some(Value::Int(match red {
                    Reducer::Sum => ys.sum(),
                    Reducer::Max => ys.max().unwrap_or(0),
                    Reducer::Min => ys.min().unwrap_or(0),
                    Reducer::Count => ys.count() as i64,
                }))
            }
            (Self::Select(m, f, ord), Value::List(xs)) => {
                let mut ys: Vec<i64> =
                    xs.iter().filter(|&&x| f.keep(x)).map(|&x| m.apply(x)).collect();
                match ord {
                    Order::Keep => {}
                    Order::Sorted => ys.sort_unstable(),
                    Order::Reversed => ys.reverse(),
                }
                Some(Value::List(ys))
            }
            (Self::Range(m, f), Value::Int(n)) => {
                Some(Value::Int((1..=*n).filter(|&x| f.keep(x)).map(|x| m.apply(x)).sum()))
            }
            (Self::Str(a, b), Value::Str(s)) => {
                let once = a.apply(s);
                Some(Value::Str(b.map_or(once.clone(), |b| b.apply(&once))))
            }
            (Self::Count(c), Value::Str(s)) => Some(Value::Int(c.apply(s))),
            _ => None,
        }
    }
}

/// 1 to 12 characters: mostly lowercase letters, some uppercase, some spaces.
fn random_text(rng: &mut SplitMix64) -> String {
    let len = 1 + rng.below32(12);
    (0..len)
        .map(|_| match rng.below32(20) {
            0..=2 => ' ',
            3..=6 => (b'A' + rng.below32(26) as u8) as char,
            _ => (b'a' + rng.below32(26) as u8) as char,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn templates_are_distinct_and_counted() {
        let all = all_templates();
        assert_eq!(all.len(), 3232);
        let keys: BTreeSet<String> = all.iter().map(Template::key).collect();
        let specs: BTreeSet<String> = all.iter().map(Template::spec).collect();
        let sols: BTreeSet<String> = all.iter().map(Template::solution).collect();
        assert_eq!((keys.len(), specs.len(), sols.len()), (3232, 3232, 3232));
        let shapes: BTreeSet<String> = all.iter().map(Template::shape_key).collect();
        assert_eq!(shapes.len(), 171 + 162 + 48 + 147 + 6);
    }

    #[test]
    fn examples() {
        let t = Template::Reduce(Reducer::Sum, Map::Square, Filter::Even);
        assert_eq!(t.spec(), "Write a Python function f(xs) that returns the sum of the squares of the even numbers in xs.");
        assert_eq!(t.solution(), "def f(xs):\n    return sum(x * x for x in xs if x % 2 == 0)\n");
        assert_eq!(t.eval(&Value::List(vec![1, 2, -4])), Some(Value::Int(20)));
        let c = Template::Reduce(Reducer::Count, Map::Id, Filter::Odd);
        assert_eq!(c.solution(), "def f(xs):\n    return sum(1 for x in xs if x % 2 == 1)\n");
        let s = Template::Str(StrOp::Repeat(2), Some(StrOp::Reverse));
        assert_eq!(s.solution(), "def f(s):\n    return (s * 2)[::-1]\n");
        assert_eq!(
            s.spec(),
            "Write a Python function f(s): repeat s 2 times, then reverse it, and return the result."
        );
        let p = Template::Select(Map::Plus(-3), Filter::Above(4), Order::Sorted);
        assert_eq!(p.key(), "select/sorted/plus-3/above4");
        assert_eq!(p.shape_key(), "select/sorted/plus/above");
        assert_eq!(p.solution(), "def f(xs):\n    return sorted(x - 3 for x in xs if x > 4)\n");
        assert_eq!(
            p.spec(),
            "Write a Python function f(xs) that returns a sorted list of the numbers in xs \
             greater than 4, each minus 3,."
        );
        assert_eq!(p.eval(&Value::List(vec![9, 1, 5])), Some(Value::List(vec![2, 6])));
        assert_eq!(s.eval(&Value::Str("ab".into())), Some(Value::Str("baba".into())));
        assert_eq!(s.eval(&Value::Int(1)), None);
    }
}
