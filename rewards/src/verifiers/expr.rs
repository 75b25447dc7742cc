//! A parser and exact evaluator for arithmetic expressions over non-negative integer
//! literals with binary `+ - * /` and parentheses (the Countdown answer language). Unary
//! minus and any other character are rejected.
//!
//! Grammar: `expr := term (('+'|'-') term)*`, `term := factor (('*'|'/') factor)*`,
//! `factor := integer | '(' expr ')'`; `×`/`x` are not accepted (only `*`), `÷` is not (only `/`).

use super::rational::Ratio;

/// A parsed expression: its exact value (`None` when it divides by zero or overflows) and
/// the integer literals it uses, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    /// The exact value.
    pub value: Option<Ratio>,
    /// The literals used.
    pub numbers: Vec<u64>,
}

/// Parses and evaluates `text`; `Err` names the first offending character or the position.
pub fn parse(text: &str) -> Result<Parsed, String> {
    let chars: Vec<char> = text.chars().filter(|c| !c.is_whitespace()).collect();
    if chars.is_empty() {
        return Err("empty expression".into());
    }
    let mut p = Parser { chars, pos: 0, numbers: Vec::new() };
    let value = p.expr(0)?;
    if p.pos != p.chars.len() {
        return Err(format!("unexpected `{}` at position {}", p.chars[p.pos], p.pos));
    }
    Ok(Parsed { value, numbers: p.numbers })
}

struct Parser {
    chars: Vec<char>,
    pos: usize,
    numbers: Vec<u64>,
}

/// Deeper nesting than this is rejected (a hostile completion must not blow the stack).
const MAX_DEPTH: usize = 64;

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn expr(&mut self, depth: usize) -> Result<Option<Ratio>, String> {
        let mut acc = self.term(depth)?;
        while let Some(op @ ('+' | '-')) = self.peek() {
            self.pos += 1;
            let rhs = self.term(depth)?;
            acc = match (acc, rhs) {
                (Some(a), Some(b)) => {
                    if op == '+' {
                        a.checked_add(b)
                    } else {
                        a.checked_sub(b)
                    }
                }
                _ => None,
            };
        }
        Ok(acc)
    }

    fn term(&mut self, depth: usize) -> Result<Option<Ratio>, String> {
        let mut acc = self.factor(depth)?;
        while let Some(op @ ('*' | '/')) = self.peek() {
            self.pos += 1;
            let rhs = self.factor(depth)?;
            acc = match (acc, rhs) {
                (Some(a), Some(b)) => {
                    if op == '*' {
                        a.checked_mul(b)
                    } else {
                        a.checked_div(b)
                    }
                }
                _ => None,
            };
        }
        Ok(acc)
    }

    fn factor(&mut self, depth: usize) -> Result<Option<Ratio>, String> {
        match self.peek() {
            Some('(') => {
                if depth >= MAX_DEPTH {
                    return Err(format!("nesting deeper than {MAX_DEPTH}"));
                }
                self.pos += 1;
                let v = self.expr(depth + 1)?;
                if self.peek() != Some(')') {
                    return Err(format!("missing `)` at position {}", self.pos));
                }
                self.pos += 1;
                Ok(v)
            }
            Some(c) if c.is_ascii_digit() => {
                let start = self.pos;
                while self.peek().is_some_and(|c| c.is_ascii_digit()) {
                    self.pos += 1;
                }
                let s: String = self.chars[start..self.pos].iter().collect();
                let n: u64 = s.parse().map_err(|_| format!("number `{s}` is too large"))?;
                self.numbers.push(n);
                Ok(Some(Ratio::int(n as i128)))
            }
            Some(c) => Err(format!("unexpected `{c}` at position {}", self.pos)),
            None => Err("expression ends early".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_with_precedence_and_exact_division() {
        let p = parse("(6 / 4) * 2 + 10 - 1").unwrap();
        assert_eq!(p.value.unwrap().as_integer(), Some(12));
        assert_eq!(p.numbers, vec![6, 4, 2, 10, 1]);
        assert_eq!(parse("2+3*4").unwrap().value.unwrap().as_integer(), Some(14));
        assert_eq!(parse("7/(3-3)").unwrap().value, None);
        for bad in ["", "-3+4", "2^3", "(1+2", "1+", "3 x 4", "1)"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        assert!(parse(&format!("{}1{}", "(".repeat(100), ")".repeat(100))).is_err());
    }
}
