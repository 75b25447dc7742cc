//! Extraction of the fenced Python block from a completion, and the structural half of the
//! format gate.
//!
//! Rule (DiffuCoder, docs/algorithms.md §10): a completion is well-formed when it contains exactly
//! one fenced Python block (an opening line "```python", "```python3" or "```py", a closing
//! line "```"), and nothing but whitespace follows that block's closing fence. Blocks in
//! other languages before it are allowed. Whether the block *parses* is checked by the
//! interpreter ([`super::format`]).

/// Why a completion fails the structural gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Malformed {
    /// No fenced Python block.
    NoBlock,
    /// A Python fence was opened and never closed.
    Unclosed,
    /// More than one fenced Python block (the count).
    Several(usize),
    /// Non-whitespace text after the closing fence.
    TrailingText,
}

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NoBlock => write!(f, "no fenced python block"),
            Self::Unclosed => write!(f, "unclosed python fence"),
            Self::Several(n) => write!(f, "{n} fenced python blocks, expected exactly one"),
            Self::TrailingText => write!(f, "text after the python block"),
        }
    }
}

/// One fenced block: its language tag (lower-cased first word of the info string), body,
/// and the byte offset just past its closing fence (`None` when unclosed).
struct Block<'a> {
    lang: String,
    body: &'a str,
    end: Option<usize>,
}

fn is_python(lang: &str) -> bool {
    matches!(lang, "python" | "python3" | "py")
}

/// Splits `text` into fenced blocks, line by line.
fn blocks(text: &str) -> Vec<Block<'_>> {
    let mut out = Vec::new();
    let mut open: Option<(String, usize)> = None;
    let mut pos = 0;
    for line in text.split_inclusive('\n') {
        let start = pos;
        pos += line.len();
        let t = line.trim();
        match &open {
            None if t.starts_with("```") => {
                let lang = t[3..].split_whitespace().next().unwrap_or("").to_lowercase();
                open = Some((lang, pos));
            }
            Some((lang, body_start)) if t == "```" => {
                let body = &text[*body_start..start];
                out.push(Block { lang: lang.clone(), body, end: Some(pos) });
                open = None;
            }
            _ => {}
        }
    }
    if let Some((lang, body_start)) = open {
        out.push(Block { lang, body: &text[body_start..], end: None });
    }
    out
}

/// The body of the completion's single, final fenced Python block, or why there is none.
pub fn python_block(text: &str) -> Result<&str, Malformed> {
    let py: Vec<Block<'_>> = blocks(text).into_iter().filter(|b| is_python(&b.lang)).collect();
    match py.as_slice() {
        [] => Err(Malformed::NoBlock),
        [b] => match b.end {
            None => Err(Malformed::Unclosed),
            Some(end) if !text[end..].trim().is_empty() => Err(Malformed::TrailingText),
            Some(_) => Ok(b.body),
        },
        many => Err(Malformed::Several(many.len())),
    }
}

/// The body of the *last* fenced Python block, closed or not, ignoring the gate: a lenient
/// extraction for display and for users who score execution without the format gate.
pub fn last_python_block(text: &str) -> Option<&str> {
    blocks(text).into_iter().rev().find(|b| is_python(&b.lang)).map(|b| b.body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gate_cases() {
        let ok = "Here it is.\n```python\ndef f(x):\n    return x\n```\n  \n";
        assert_eq!(python_block(ok), Ok("def f(x):\n    return x\n"));
        assert_eq!(python_block("```py\nx=1\n```"), Ok("x=1\n"));
        assert_eq!(python_block("no code"), Err(Malformed::NoBlock));
        assert_eq!(python_block("```rust\nfn f(){}\n```"), Err(Malformed::NoBlock));
        assert_eq!(python_block("```python\nx=1\n"), Err(Malformed::Unclosed));
        let two = "```python\nx=1\n```\n```python\ny=2\n```";
        assert_eq!(python_block(two), Err(Malformed::Several(2)));
        assert_eq!(python_block("```python\nx=1\n```\nDone!"), Err(Malformed::TrailingText));
        let other_first = "```text\nin\n```\n```python\nx=1\n```";
        assert_eq!(python_block(other_first), Ok("x=1\n"));
        assert_eq!(last_python_block(two), Some("y=2\n"));
        assert_eq!(last_python_block("```python\nz\n"), Some("z\n"));
    }
}
