//! Resume safety: a run directory continues only the run it holds. Before a trainer starts,
//! the settings of the directory's newest valid checkpoint are compared with the ones asked
//! for; a difference that changes what the run computes refuses the command (exit 2) with the
//! list of differences, unless `--force`.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use drift_core::train::{CheckpointMeta, Checkpointer};

/// Keys that may change between invocations of one run without changing its trajectory: its
/// length, wall-clock budget, and checkpoint and evaluation cadence.
pub const FREE_KEYS: &[&str] =
    &["run.steps", "run.max_seconds", "run.checkpoint_every", "run.keep_last", "run.eval_every"];

/// Creates `out`, refuses to resume its newest checkpoint with other settings than `text`
/// (unless `force`, which only warns), and records `text` as `out/config.toml`.
pub fn prepare_run_dir(out: &Path, text: &str, force: bool) -> Result<()> {
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    if let Some((dir, old)) = newest_checkpoint_config(out)? {
        match differences(&old, text) {
            Some(diffs) if !diffs.is_empty() => {
                let list = diffs.join("\n  ");
                if !force {
                    return Err(super::usage(format!(
                        "{} holds a checkpoint ({}) made with other settings, so resuming would \
                         not continue that run:\n  {list}\nuse another --out, or --force to resume \
                         with the new settings",
                        out.display(),
                        dir.display()
                    )));
                }
                eprintln!("warning: --force: resuming {} with changed settings:\n  {list}", dir.display());
            }
            Some(_) => {}
            None => eprintln!(
                "warning: the settings of {} are not readable TOML; resuming without comparing them",
                dir.display()
            ),
        }
    }
    let path = out.join("config.toml");
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))
}

/// The newest valid checkpoint of `out` and the config text stored in it.
fn newest_checkpoint_config(out: &Path) -> Result<Option<(std::path::PathBuf, String)>> {
    let root = out.join("checkpoints");
    if !root.is_dir() {
        return Ok(None);
    }
    let (latest, _) = Checkpointer::new(&root, 1)?.latest_valid()?;
    let Some(dir) = latest else { return Ok(None) };
    let meta_path = dir.join("meta.json");
    let text = std::fs::read_to_string(&meta_path)
        .with_context(|| format!("cannot read {}", meta_path.display()))?;
    let meta: CheckpointMeta = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a checkpoint's metadata", meta_path.display()))?;
    Ok(Some((dir, meta.config)))
}

/// The settings that differ between two config texts, as `key: old -> new` lines (keys in
/// [`FREE_KEYS`] left out); `None` when either is not a TOML table.
pub fn differences(old: &str, new: &str) -> Option<Vec<String>> {
    let (old, new) = (flatten_text(old)?, flatten_text(new)?);
    let keys: std::collections::BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    let missing = "(unset)".to_string();
    Some(
        keys.into_iter()
            .filter(|k| !FREE_KEYS.contains(&k.as_str()))
            .filter_map(|k| {
                let (a, b) = (old.get(k).unwrap_or(&missing), new.get(k).unwrap_or(&missing));
                (a != b).then(|| format!("{k}: {a} -> {b}"))
            })
            .collect(),
    )
}

fn flatten_text(text: &str) -> Option<BTreeMap<String, String>> {
    let mut table: toml::Table = text.parse().ok()?;
    // Checkpoints written before the [run] table hold its keys at the top level.
    super::config::lift_run_keys(&mut table).ok()?;
    let mut out = BTreeMap::new();
    flatten("", &table, &mut out);
    Some(out)
}

fn flatten(prefix: &str, table: &toml::Table, out: &mut BTreeMap<String, String>) {
    for (k, v) in table {
        let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
        match v {
            toml::Value::Table(t) => flatten(&key, t, out),
            other => {
                out.insert(key, other.to_string());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differences_name_each_changed_key_and_ignore_the_run_length() {
        // The old text as checkpoints before the [run] table stored it.
        let old = "steps = 40\nseed = 0\n[optim.adamw]\nlr = 0.0001\n";
        let new = "[run]\nsteps = 80\nseed = 1\nmax_seconds = 600.0\n[optim.adamw]\nlr = 0.0003\n";
        assert_eq!(
            differences(old, new).unwrap(),
            ["optim.adamw.lr: 0.0001 -> 0.0003", "run.seed: 0 -> 1"]
        );
        assert_eq!(differences(old, old).unwrap(), Vec::<String>::new());
        assert_eq!(differences("x = [", old), None);
        assert_eq!(differences("", "recipe = \"espo\"").unwrap(), ["recipe: (unset) -> \"espo\""]);
    }
}
