//! Config files plus `--set key=value` overrides, decoded into a typed, `deny_unknown_fields`
//! config so a misspelt key is an error that names it.

use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use drift_core::train::RUN_KEYS;
use serde::de::DeserializeOwned;

/// Reads `path` (TOML; none = all defaults), applies each `key.path=value` override (the value
/// parsed as a TOML literal, else taken as a string), lays the result over `T::default()`
/// (see [`merge`]: a nested table the user touches keeps the *outer* config's defaults for
/// the keys it leaves out), and decodes it. Returns the config and its final TOML text
/// (stored in checkpoints). Every error is a [`super::UsageError`] (exit status 2).
pub fn load<T: DeserializeOwned + serde::Serialize + Default>(
    path: Option<&Path>,
    sets: &[String],
) -> Result<(T, String)> {
    load_inner(path, sets).map_err(|e| super::usage(format!("{e:#}")))
}

fn load_inner<T: DeserializeOwned + serde::Serialize + Default>(
    path: Option<&Path>,
    sets: &[String],
) -> Result<(T, String)> {
    let mut full = match toml::Value::try_from(T::default()) {
        Ok(toml::Value::Table(t)) => t,
        _ => bail!("the default config does not serialise to a TOML table"),
    };
    let has_run = matches!(full.get("run"), Some(toml::Value::Table(_)));
    let mut table: toml::Table = match path {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .with_context(|| format!("cannot read config file {}", p.display()))?;
            let mut t: toml::Table =
                text.parse().with_context(|| format!("{} is not valid TOML", p.display()))?;
            if has_run {
                lift_run_keys(&mut t).with_context(|| format!("config file {}", p.display()))?;
            }
            t
        }
        None => toml::Table::new(),
    };
    for set in sets {
        let (key, raw) =
            set.split_once('=').ok_or_else(|| anyhow!("--set {set:?}: expected key=value"))?;
        let value = parse_value(raw.trim());
        let key = key.trim();
        let key =
            if has_run && RUN_KEYS.contains(&key) { format!("run.{key}") } else { key.into() };
        insert(&mut table, &key, value).with_context(|| format!("--set {set:?}"))?;
    }
    let source = path.map_or("the defaults".to_string(), |p| p.display().to_string());
    merge(&mut full, table);
    let cfg: T = toml::Value::Table(full).try_into().map_err(|e: toml::de::Error| {
        anyhow!("invalid config ({source} with --set overrides): {}", e.to_string().trim())
    })?;
    let text = toml::to_string(&cfg).context("config does not serialise back to TOML")?;
    Ok((cfg, text))
}

/// Moves the run keys held at the top level of a config (`steps = 40`, as configs had them
/// before the `[run]` table) into its `[run]` table; the same key in both places is an error.
pub fn lift_run_keys(table: &mut toml::Table) -> Result<()> {
    for key in RUN_KEYS {
        let Some(value) = table.remove(key) else { continue };
        let run = table.entry("run").or_insert_with(|| toml::Value::Table(toml::Table::new()));
        let toml::Value::Table(run) = run else { bail!("`run` is a value, not the [run] table") };
        if run.contains_key(key) {
            bail!("`{key}` is given both at the top level and in [run]; keep the one in [run]");
        }
        run.insert(key.to_string(), value);
    }
    Ok(())
}

/// Lays `over` onto `base` key by key, recursing into tables present in both, so that
/// `--set decode.proposal.temperature=0.6` changes that one field and leaves the trainer's
/// default `decode.gen_length` in place (decoding `decode` on its own would fall back to
/// `DecodeConfig::default()`'s). A table whose `kind` (the tag of an internally tagged enum)
/// differs from the base's replaces it whole: another variant has other fields.
fn merge(base: &mut toml::Table, over: toml::Table) {
    for (key, value) in over {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o))
                if o.get("kind").is_none_or(|k| b.get("kind") == Some(k)) =>
            {
                merge(b, o)
            }
            (_, v) => {
                base.insert(key, v);
            }
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde::{Deserialize, Serialize};

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields, default)]
    struct Inner {
        a: u32,
        b: u32,
    }
    impl Default for Inner {
        fn default() -> Self {
            Self { a: 1, b: 2 }
        }
    }

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
    enum Shape {
        Square { side: u32 },
        Circle { radius: u32 },
    }

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields, default)]
    struct Outer {
        inner: Inner,
        shape: Shape,
    }
    impl Default for Outer {
        // The outer default differs from `Inner::default()`: what a trainer's `decode` does.
        fn default() -> Self {
            Self { inner: Inner { a: 10, b: 20 }, shape: Shape::Square { side: 3 } }
        }
    }

    fn sets(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn a_nested_override_keeps_the_outer_defaults_of_its_siblings() {
        let (cfg, _) = load_inner::<Outer>(None, &sets(&["inner.a=5"])).unwrap();
        assert_eq!(cfg.inner, Inner { a: 5, b: 20 });
        assert_eq!(cfg.shape, Shape::Square { side: 3 });
    }

    #[test]
    fn a_tagged_table_of_another_kind_replaces_the_default_whole() {
        let (cfg, _) =
            load_inner::<Outer>(None, &sets(&["shape.kind=\"circle\"", "shape.radius=7"])).unwrap();
        assert_eq!(cfg.shape, Shape::Circle { radius: 7 });
        let (cfg, _) = load_inner::<Outer>(None, &sets(&["shape.side=9"])).unwrap();
        assert_eq!(cfg.shape, Shape::Square { side: 9 });
    }

    /// Laying a shipped config over the defaults must decode to what the file alone decodes
    /// to: the merge may only fill gaps, never change a run that was already specified.
    fn shipped_config_is_unchanged_by_the_merge<T>(name: &str)
    where
        T: DeserializeOwned + serde::Serialize + Default + PartialEq + std::fmt::Debug,
    {
        let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("examples/configs")
            .join(name);
        let alone: T = toml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let (merged, _) = load_inner::<T>(Some(&path), &[]).unwrap();
        assert_eq!(merged, alone, "{name}");
    }

    #[test]
    fn shipped_configs_decode_as_before() {
        shipped_config_is_unchanged_by_the_merge::<drift_flow::grpo::FlowGrpoConfig>(
            "flow_grpo_shapes.toml",
        );
        for flow in
            ["pretrain_flow.toml", "pretrain_flow_text_encoder.toml", "pretrain_flow_weighted.toml"]
        {
            shipped_config_is_unchanged_by_the_merge::<drift_flow::pretrain_run::PretrainFlowConfig>(
                flow,
            );
        }
        shipped_config_is_unchanged_by_the_merge::<drift_dllm::pretrain_run::PretrainDllmConfig>(
            "pretrain_dllm_code.toml",
        );
        shipped_config_is_unchanged_by_the_merge::<drift_dllm::pretrain_run::PretrainDllmConfig>(
            "pretrain_dllm_code_v4.toml",
        );
        shipped_config_is_unchanged_by_the_merge::<drift_dllm::pretrain_run::PretrainDllmConfig>(
            "pretrain_dllm_code_v5.toml",
        );
    }

    /// Each BranchGRPO preset file, laid over the defaults as `drift train flow --config` does,
    /// is its constructor.
    #[test]
    fn the_branch_grpo_preset_files_are_their_constructors() {
        use drift_flow::grpo::FlowGrpoConfig;
        let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/configs");
        for (file, want) in [
            ("flow_grpo_all_steps.toml", FlowGrpoConfig::flow_grpo_all_steps()),
            ("branch_grpo.toml", FlowGrpoConfig::branch_grpo()),
            ("branch_grpo_pruned.toml", FlowGrpoConfig::branch_grpo_pruned()),
            ("branch_grpo_mix.toml", FlowGrpoConfig::branch_grpo_mix()),
        ] {
            let (got, _) = load_inner::<FlowGrpoConfig>(Some(&dir.join(file)), &[]).unwrap();
            assert_eq!(got, want, "{file}");
        }
    }

    /// The diffu-GRPO file is the trainer's defaults with its recipe and the measured lr, and
    /// nothing else: a drift in any other field would change the run the benchmark recorded.
    #[test]
    fn the_diffu_grpo_file_is_the_defaults_with_its_recipe_and_lr() {
        use drift_dllm::grpo::{DllmGrpoConfig, Recipe};
        let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("examples/configs/dllm_diffu_grpo.toml");
        let (got, _) = load_inner::<DllmGrpoConfig>(Some(&path), &[]).unwrap();
        let mut want = DllmGrpoConfig { recipe: Recipe::DiffuGrpo, ..DllmGrpoConfig::default() };
        want.optim.adamw.lr = 2e-4;
        assert_eq!(got, want);
    }

    /// The main job's file says every value is the built-in default: keep the two in step.
    #[test]
    fn the_main_jobs_config_file_is_the_built_in_default() {
        let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("examples/configs/flow_grpo_shapes.toml");
        let file: drift_flow::grpo::FlowGrpoConfig =
            toml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(file, drift_flow::grpo::FlowGrpoConfig::default());
    }

    #[test]
    fn run_keys_at_the_top_level_are_read_into_the_run_table() {
        use drift_flow::grpo::FlowGrpoConfig;
        let (cfg, text) =
            load_inner::<FlowGrpoConfig>(None, &sets(&["steps=3", "run.seed=2", "eval_every=0"]))
                .unwrap();
        let want = drift_core::train::RunSettings {
            steps: 3,
            seed: 2,
            eval_every: 0,
            ..FlowGrpoConfig::default().run
        };
        assert_eq!(cfg.run, want);
        assert!(text.contains("[run]") && !text.starts_with("steps"), "{text}");
        let dir = tempfile::tempdir().unwrap();
        let old = dir.path().join("old.toml");
        std::fs::write(&old, "steps = 5\ncheckpoint_every = 1\n").unwrap();
        let (cfg, _) = load_inner::<FlowGrpoConfig>(Some(&old), &sets(&["steps=7"])).unwrap();
        assert_eq!((cfg.run.steps, cfg.run.checkpoint_every, cfg.run.eval_every), (7, 1, 20));
        std::fs::write(&old, "steps = 5\n[run]\nsteps = 6\n").unwrap();
        let err = load_inner::<FlowGrpoConfig>(Some(&old), &[]).unwrap_err();
        assert!(format!("{err:#}").contains("`steps` is given both"), "{err:#}");
    }

    #[test]
    fn an_unknown_nested_key_is_still_an_error_naming_it() {
        let err = load_inner::<Outer>(None, &sets(&["inner.c=1"])).unwrap_err();
        assert!(format!("{err:#}").contains("unknown field `c`"), "{err:#}");
    }
}
