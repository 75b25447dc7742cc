//! Config files plus `--set key=value` overrides, decoded into a typed, `deny_unknown_fields`
//! config so a misspelt key is an error that names it.

use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use serde::de::DeserializeOwned;

/// Reads `path` (TOML; none = all defaults), applies each `key.path=value` override (the value
/// parsed as a TOML literal, else taken as a string), and decodes the result. Returns the
/// config and its final TOML text (stored in checkpoints). Every error is a
/// [`super::UsageError`] (exit status 2).
pub fn load<T: DeserializeOwned + serde::Serialize>(
    path: Option<&Path>,
    sets: &[String],
) -> Result<(T, String)> {
    load_inner(path, sets).map_err(|e| super::usage(format!("{e:#}")))
}

fn load_inner<T: DeserializeOwned + serde::Serialize>(
    path: Option<&Path>,
    sets: &[String],
) -> Result<(T, String)> {
    let mut table: toml::Table = match path {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .with_context(|| format!("cannot read config file {}", p.display()))?;
            text.parse().with_context(|| format!("{} is not valid TOML", p.display()))?
        }
        None => toml::Table::new(),
    };
    for set in sets {
        let (key, raw) =
            set.split_once('=').ok_or_else(|| anyhow!("--set {set:?}: expected key=value"))?;
        let value = parse_value(raw.trim());
        insert(&mut table, key.trim(), value).with_context(|| format!("--set {set:?}"))?;
    }
    let source = path.map_or("the defaults".to_string(), |p| p.display().to_string());
    let cfg: T = toml::Value::Table(table).try_into().map_err(|e: toml::de::Error| {
        anyhow!("invalid config ({source} with --set overrides): {}", e.to_string().trim())
    })?;
    let text = toml::to_string(&cfg).context("config does not serialise back to TOML")?;
    Ok((cfg, text))
}

fn parse_value(raw: &str) -> toml::Value {
    let doc = format!("v = {raw}");
    match doc.parse::<toml::Table>() {
        Ok(mut t) => t.remove("v").unwrap_or_else(|| toml::Value::String(raw.to_string())),
        Err(_) => toml::Value::String(raw.to_string()),
    }
}

fn insert(table: &mut toml::Table, key: &str, value: toml::Value) -> Result<()> {
    let mut parts: Vec<&str> = key.split('.').collect();
    let last = parts.pop().filter(|k| !k.is_empty()).ok_or_else(|| anyhow!("empty key"))?;
    let mut cur = table;
    for p in parts {
        let entry =
            cur.entry(p.to_string()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
        cur = match entry {
            toml::Value::Table(t) => t,
            _ => bail!("`{p}` is a value, not a table"),
        };
    }
    cur.insert(last.to_string(), value);
    Ok(())
}
