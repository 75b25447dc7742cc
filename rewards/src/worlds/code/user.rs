//! Users' own code problems as JSONL, the shape of DiffuCoder's and AceCoder's RL data: one
//! `{"prompt": "…", "tests": ["assert f(1) == 2", …]}` per line, optionally with an `"id"`
//! and a `"split"` (`"train"` or `"held_out"`). Other fields (a dataset's `source`, `solution`,
//! …) are ignored. Malformed JSON, a missing or empty prompt, and a missing or empty test list
//! are errors naming the file and the 1-based line.

use std::path::Path;

use serde::Deserialize;

use super::CodeItem;
use crate::worlds::split::Split;
use crate::RewardError;

/// One line of a user's code-problem file.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct CodeRecord {
    /// The problem statement the model is prompted with.
    pub prompt: String,
    /// Python test statements run after the candidate (each an `assert`).
    pub tests: Vec<String>,
    /// An identifier; default `line-<n>`.
    #[serde(default)]
    pub id: Option<String>,
    /// The split the line belongs to; untagged lines are training problems.
    #[serde(default)]
    pub split: Option<Split>,
}

/// Reads a code-problem file: every non-blank line a [`CodeRecord`]. Returns the items (no
/// reference solution, no template) with their split tags, in file order.
pub fn read_code_jsonl(path: &Path) -> Result<Vec<(CodeItem, Option<Split>)>, RewardError> {
    let text = std::fs::read_to_string(path)
        .map_err(|source| RewardError::Io { path: path.to_path_buf(), source })?;
    parse_code_jsonl(&text, path)
}

/// Parses code-problem JSONL `text` as [`read_code_jsonl`] does; `path` only names errors.
pub fn parse_code_jsonl(
    text: &str,
    path: &Path,
) -> Result<Vec<(CodeItem, Option<Split>)>, RewardError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let bad =
            |message: String| RewardError::Jsonl { path: path.to_path_buf(), line: i + 1, message };
        let r: CodeRecord = serde_json::from_str(line).map_err(|e| bad(e.to_string()))?;
        if r.prompt.trim().is_empty() {
            return Err(bad("`prompt` is empty".into()));
        }
        if r.tests.is_empty() {
            return Err(bad("`tests` is empty: a problem needs at least one test".into()));
        }
        if let Some(k) = r.tests.iter().position(|t| t.trim().is_empty()) {
            return Err(bad(format!("`tests[{k}]` is empty")));
        }
        let item = CodeItem {
            id: r.id.unwrap_or_else(|| format!("line-{}", i + 1)),
            template: String::new(),
            prompt: r.prompt,
            solution: String::new(),
            tests: r.tests,
        };
        out.push((item, r.split));
    }
    if out.is_empty() {
        return Err(RewardError::Jsonl {
            path: path.to_path_buf(),
            line: 0,
            message: "no problems: the file has no non-blank line".into(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problems_parse_with_their_split_and_bad_lines_are_named() {
        let path = Path::new("mine.jsonl");
        let text = concat!(
            "{\"prompt\": \"double x\", \"tests\": [\"assert f(2) == 4\"], \"source\": \"x\"}\n",
            "\n",
            "{\"prompt\": \"negate x\", \"tests\": [\"assert f(1) == -1\"], \"id\": \"n\", ",
            "\"split\": \"held_out\"}\n",
        );
        let items = parse_code_jsonl(text, path).unwrap();
        assert_eq!(items.len(), 2);
        assert_eq!(items[0].0.id, "line-1");
        assert_eq!(items[0].0.tests, vec!["assert f(2) == 4"]);
        assert_eq!(items[0].1, None);
        assert_eq!((items[1].0.id.as_str(), items[1].1), ("n", Some(Split::HeldOut)));
        let err = |text: &str| parse_code_jsonl(text, path).unwrap_err().to_string();
        let ok = "{\"prompt\": \"p\", \"tests\": [\"assert 1\"]}\n";
        assert!(err(&format!("{ok}{{\"prompt\": \"p\"}}")).starts_with("mine.jsonl:2:"));
        assert!(err(&format!("{ok}{ok}{{\"prompt\": \"p\"")).contains("mine.jsonl:3"));
        let e = err("{\"prompt\": \" \", \"tests\": [\"assert 1\"]}");
        assert!(e.contains(":1:") && e.contains("`prompt` is empty"), "{e}");
        assert!(err("{\"prompt\": \"p\", \"tests\": []}").contains("`tests` is empty"));
        assert!(err("{\"prompt\": \"p\", \"tests\": [\"assert 1\", \"\"]}").contains("tests[1]"));
        assert!(err("{\"prompt\": \"p\", \"tests\": [\"a\"], \"split\": \"dev\"}").contains("dev"));
        assert!(err("\n\n").contains("no problems"));
    }
}
