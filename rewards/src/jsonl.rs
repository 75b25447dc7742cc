//! JSON Lines reading and writing for prompt sets: one JSON object per line, blank lines
//! skipped, errors naming the file and the 1-based line.

use std::fs;
use std::io::{BufWriter, Write};
use std::path::Path;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::RewardError;

fn io_err(path: &Path, source: std::io::Error) -> RewardError {
    RewardError::Io { path: path.to_path_buf(), source }
}

/// Writes `items` to `path`, one compact JSON object per line.
pub fn write_jsonl<T: Serialize>(path: &Path, items: &[T]) -> Result<(), RewardError> {
    let file = fs::File::create(path).map_err(|e| io_err(path, e))?;
    let mut w = BufWriter::new(file);
    for (i, item) in items.iter().enumerate() {
        let line = serde_json::to_string(item).map_err(|e| RewardError::Jsonl {
            path: path.to_path_buf(),
            line: i + 1,
            message: e.to_string(),
        })?;
        writeln!(w, "{line}").map_err(|e| io_err(path, e))?;
    }
    w.flush().map_err(|e| io_err(path, e))
}

/// Reads every non-blank line of `path` as a `T`.
pub fn read_jsonl<T: DeserializeOwned>(path: &Path) -> Result<Vec<T>, RewardError> {
    let text = fs::read_to_string(path).map_err(|e| io_err(path, e))?;
    parse_jsonl(path, &text)
}

/// Parses JSONL `text` read from `path` (the path only names errors).
pub fn parse_jsonl<T: DeserializeOwned>(path: &Path, text: &str) -> Result<Vec<T>, RewardError> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| RewardError::Jsonl {
                path: path.to_path_buf(),
                line: i + 1,
                message: e.to_string(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Row {
        a: u32,
    }

    #[test]
    fn round_trip_and_errors_name_file_and_line() {
        let dir = std::env::temp_dir().join(format!("drift-jsonl-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("rows.jsonl");
        write_jsonl(&path, &[Row { a: 1 }, Row { a: 2 }]).unwrap();
        assert_eq!(read_jsonl::<Row>(&path).unwrap(), vec![Row { a: 1 }, Row { a: 2 }]);
        fs::write(&path, "{\"a\": 1}\n\n{\"a\": 2, \"b\": 3}\n").unwrap();
        let err = read_jsonl::<Row>(&path).unwrap_err().to_string();
        assert!(err.contains("rows.jsonl:3") && err.contains("`b`"), "{err}");
        let missing = read_jsonl::<Row>(&dir.join("nope.jsonl")).unwrap_err().to_string();
        assert!(missing.contains("nope.jsonl"), "{missing}");
        fs::remove_dir_all(&dir).unwrap();
    }
}
