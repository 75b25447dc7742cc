//! The metrics file: one JSON object per line, `{"step": s, "time_s": t, "<name>": value, …}`.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::error::{io_err, CoreError, Result};

/// Appends one JSON line per step to a metrics file, and knows its byte length (the cursor a
/// checkpoint stores, so a resumed run truncates what was logged after it and never duplicates
/// a step).
#[derive(Debug)]
pub struct MetricsWriter {
    path: PathBuf,
    file: File,
    cursor: u64,
    started: Instant,
}

impl MetricsWriter {
    /// Creates (or truncates) the file at `path`.
    pub fn create(path: impl Into<PathBuf>) -> Result<Self> {
        Self::open(path, Some(0))
    }

    /// Opens `path` for appending. With `resume_at = Some(n)` the file is first truncated to
    /// `n` bytes (a checkpoint's metrics cursor); `None` appends to what is there.
    pub fn open(path: impl Into<PathBuf>, resume_at: Option<u64>) -> Result<Self> {
        let path = path.into();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        }
        let file =
            OpenOptions::new().create(true).append(true).open(&path).map_err(io_err(&path))?;
        let len = file.metadata().map_err(io_err(&path))?.len();
        let cursor = match resume_at {
            Some(n) if n <= len => {
                file.set_len(n).map_err(io_err(&path))?;
                n
            }
            Some(n) => {
                return Err(CoreError::Mismatch(format!(
                    "{}: the checkpoint's metrics cursor is {n} bytes but the file has only \
                     {len}: it belongs to another run",
                    path.display()
                )))
            }
            None => len,
        };
        Ok(Self { path, file, cursor, started: Instant::now() })
    }

    /// Writes one line for `step`. Non-finite values are written as `null` (JSON has no NaN).
    pub fn log(&mut self, step: u64, values: &[(&str, f64)]) -> Result<()> {
        let mut obj = serde_json::Map::new();
        obj.insert("step".into(), step.into());
        let t = self.started.elapsed().as_secs_f64();
        obj.insert("time_s".into(), serde_json::Value::from((t * 1e3).round() / 1e3));
        for (name, v) in values {
            let v = serde_json::Number::from_f64(*v).map_or(serde_json::Value::Null, Into::into);
            obj.insert((*name).to_string(), v);
        }
        let mut line = serde_json::Value::Object(obj).to_string();
        line.push('\n');
        self.file.write_all(line.as_bytes()).map_err(io_err(&self.path))?;
        self.file.flush().map_err(io_err(&self.path))?;
        self.cursor += line.len() as u64;
        Ok(())
    }

    /// Bytes written so far (store it in a checkpoint).
    pub fn cursor(&self) -> u64 {
        self.cursor
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// One parsed line of a metrics file.
pub type MetricsRow = serde_json::Map<String, serde_json::Value>;

/// Reads a metrics file; errors name the file and line of a malformed entry.
pub fn read_metrics(path: &Path) -> Result<Vec<MetricsRow>> {
    let file = File::open(path).map_err(io_err(path))?;
    let mut rows = Vec::new();
    for (i, line) in BufReader::new(file).lines().enumerate() {
        let line = line.map_err(io_err(path))?;
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<serde_json::Value>(&line) {
            Ok(serde_json::Value::Object(map)) => rows.push(map),
            _ => {
                return Err(CoreError::Mismatch(format!(
                    "{}:{}: expected one JSON object per line",
                    path.display(),
                    i + 1
                )))
            }
        }
    }
    Ok(rows)
}

/// Drops the lines of a per-step JSONL log (each an object with a `step`) written after
/// `last_step`, so a run resumed from an older checkpoint than its newest log line does not
/// log those steps twice. A missing file is left missing; lines without a numeric `step` are
/// kept.
pub fn retain_steps_up_to(path: &Path, last_step: u64) -> Result<()> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_err(path)(e)),
    };
    let kept: String = text
        .lines()
        .filter(|line| {
            let step = serde_json::from_str::<serde_json::Value>(line)
                .ok()
                .and_then(|v| v.get("step").and_then(serde_json::Value::as_u64));
            step.is_none_or(|s| s <= last_step)
        })
        .map(|line| format!("{line}\n"))
        .collect();
    if kept.len() != text.len() {
        std::fs::write(path, kept).map_err(io_err(path))?;
    }
    Ok(())
}
