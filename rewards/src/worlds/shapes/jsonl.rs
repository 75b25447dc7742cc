//! Prompt sets as JSONL files, so users bring their own: one object per line,
//! `{"prompt": "3 red circles", "category": "counting"}`, the category optional (it follows
//! from the prompt; when given it must agree) and optionally `"split": "train"` or
//! `"held_out"`. Unknown fields, malformed JSON, prompts outside the grammar and a category
//! that is not the prompt's are errors naming the file and the line.

use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::error::{Result, ShapesError};
use super::grammar::{Category, Prompt};
use super::parse::from_text;
use super::split::PromptSplit;
use crate::worlds::split::Split;

/// One line of a prompt-set file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptRecord {
    /// The prompt's text in the shapes grammar.
    pub prompt: String,
    /// Its GenEval category ([`Category::name`]); checked against the prompt when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<Category>,
    /// Which split it belongs to ("train" or "held_out", as in the other toy worlds), when
    /// known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split: Option<Split>,
}

/// Writes `prompts` to `path` as JSONL, tagging each with `split` when given.
pub fn write_jsonl(path: &Path, prompts: &[Prompt], split: Option<Split>) -> Result<()> {
    let mut text = String::new();
    push_records(&mut text, prompts, split, path)?;
    write_text(path, &text)
}

/// Writes a whole train / held-out split to `path` as JSONL: the train prompts tagged
/// `"split": "train"`, then the held-out ones tagged `"held_out"`. Read back (`drift train flow
/// --set prompts=FILE`) it is that same split, so it is the file to start from when editing
/// the world's prompts.
pub fn write_split_jsonl(path: &Path, split: &PromptSplit) -> Result<()> {
    write_text(path, &split_jsonl(split, path)?)
}

/// The JSONL text [`write_split_jsonl`] writes; `path` only names the destination in errors.
pub fn split_jsonl(split: &PromptSplit, path: &Path) -> Result<String> {
    let mut text = String::new();
    push_records(&mut text, &split.train, Some(Split::Train), path)?;
    push_records(&mut text, &split.held_out, Some(Split::HeldOut), path)?;
    Ok(text)
}

fn push_records(
    text: &mut String,
    prompts: &[Prompt],
    split: Option<Split>,
    path: &Path,
) -> Result<()> {
    for p in prompts {
        let record = PromptRecord { prompt: p.to_text(), category: Some(p.category()), split };
        let line = serde_json::to_string(&record).map_err(|e| ShapesError::Jsonl {
            path: path.to_path_buf(),
            line: text.lines().count() + 1,
            message: e.to_string(),
        })?;
        text.push_str(&line);
        text.push('\n');
    }
    Ok(())
}

fn write_text(path: &Path, text: &str) -> Result<()> {
    let io = |source| ShapesError::Io { path: path.to_path_buf(), source };
    let mut file = std::fs::File::create(path).map_err(io)?;
    file.write_all(text.as_bytes()).map_err(io)
}

/// Reads a JSONL prompt set: every non-blank line must be a [`PromptRecord`] whose prompt
/// parses. Returns the prompts with their split tags, in file order.
pub fn read_jsonl(path: &Path) -> Result<Vec<(Prompt, Option<Split>)>> {
    let text = std::fs::read_to_string(path)
        .map_err(|source| ShapesError::Io { path: path.to_path_buf(), source })?;
    parse_jsonl(&text, path)
}

/// Parses JSONL text as [`read_jsonl`] does; `path` only names the source in errors.
pub fn parse_jsonl(text: &str, path: &Path) -> Result<Vec<(Prompt, Option<Split>)>> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let error =
            |message: String| ShapesError::Jsonl { path: path.to_path_buf(), line: i + 1, message };
        let record: PromptRecord = serde_json::from_str(line).map_err(|e| error(e.to_string()))?;
        let prompt = from_text(&record.prompt).map_err(|e| error(e.to_string()))?;
        if let Some(c) = record.category.filter(|&c| c != prompt.category()) {
            return Err(error(format!(
                "category `{c}` does not match the prompt {:?}, whose category is `{}`",
                record.prompt,
                prompt.category()
            )));
        }
        out.push((prompt, record.split));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::worlds::shapes::split::{split, SplitConfig};

    #[test]
    fn round_trip_through_a_file() {
        let s = split(&SplitConfig::default()).unwrap();
        let dir = std::env::temp_dir().join(format!("drift-shapes-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("held_out.jsonl");
        write_jsonl(&path, &s.held_out, Some(Split::HeldOut)).unwrap();
        let back = read_jsonl(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(back.len(), s.held_out.len());
        for ((p, tag), want) in back.iter().zip(&s.held_out) {
            assert_eq!(p, want);
            assert_eq!(*tag, Some(Split::HeldOut));
        }
    }

    #[test]
    fn a_written_split_reads_back_as_the_same_split() {
        let s = split(&SplitConfig::default()).unwrap();
        let text = split_jsonl(&s, Path::new("split.jsonl")).unwrap();
        let back = parse_jsonl(&text, Path::new("split.jsonl")).unwrap();
        assert_eq!(back.len(), 450, "the whole prompt space");
        let side = |tag| -> Vec<Prompt> {
            back.iter().filter(|(_, t)| *t == Some(tag)).map(|(p, _)| p.clone()).collect()
        };
        assert_eq!(side(Split::Train), s.train);
        assert_eq!(side(Split::HeldOut), s.held_out);
    }

    #[test]
    fn errors_name_the_file_and_line() {
        let path = Path::new("prompts.jsonl");
        let ok = "{\"prompt\": \"3 red circles\"}\n\n{\"prompt\": \"a blue square\", \"category\": \"colors\", \"split\": \"train\"}\n";
        let parsed = parse_jsonl(ok, path).unwrap();
        assert_eq!(parsed.len(), 2);
        assert_eq!(parsed[1].1, Some(Split::Train));
        let cases = [
            ("{\"prompt\": \"3 red circles\", \"seed\": 1}", "unknown field `seed`"),
            ("{\"prompt\": \"3 purple circles\"}", "`purple`"),
            ("not json", "expected"),
            ("{\"prompt\": \"3 red circles\", \"split\": \"test\"}", "unknown variant"),
            (
                "{\"prompt\": \"3 red circles\", \"category\": \"colors\"}",
                "category `colors` does not match",
            ),
            ("{\"prompt\": \"3 red circles\", \"category\": \"count\"}", "unknown variant `count`"),
        ];
        for (line, want) in cases {
            let text = format!("{{\"prompt\": \"a red circle\"}}\n{line}\n");
            let err = parse_jsonl(&text, path).unwrap_err().to_string();
            assert!(err.contains("prompts.jsonl, line 2"), "{err}");
            assert!(err.contains(want), "{err}");
        }
        let missing = read_jsonl(Path::new("/nonexistent/p.jsonl")).unwrap_err().to_string();
        assert!(missing.contains("/nonexistent/p.jsonl"), "{missing}");
    }
}
