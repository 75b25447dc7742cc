//! The values that code-world functions take and return, and their Python literals.

/// An argument or a result of a code-world function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// A Python `int`.
    Int(i64),
    /// A Python `list` of `int`.
    List(Vec<i64>),
    /// A Python `str` over letters and spaces.
    Str(String),
}

impl Value {
    /// The Python literal: `-3`, `[1, -2]`, `'ab c'` (strings hold only letters and spaces,
    /// so single quotes need no escaping).
    pub fn python(&self) -> String {
        match self {
            Self::Int(v) => v.to_string(),
            Self::List(xs) => {
                let items: Vec<String> = xs.iter().map(i64::to_string).collect();
                format!("[{}]", items.join(", "))
            }
            Self::Str(s) => format!("'{s}'"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals() {
        assert_eq!(Value::List(vec![1, -2]).python(), "[1, -2]");
        assert_eq!(Value::List(vec![]).python(), "[]");
        assert_eq!(Value::Str("a b".into()).python(), "'a b'");
        assert_eq!(Value::Int(-3).python(), "-3");
    }
}
