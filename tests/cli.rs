//! The `drift` binary: help text, and clear non-zero exits on bad input.

use std::process::Command;

fn drift(args: &[&str]) -> (i32, String) {
    let out =
        Command::new(env!("CARGO_BIN_EXE_drift")).args(args).output().expect("the binary runs");
    let text =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn every_subcommand_has_help() {
    for args in [
        vec!["--help"],
        vec!["pretrain", "--help"],
        vec!["pretrain", "flow", "--help"],
        vec!["pretrain", "dllm", "--help"],
        vec!["eval", "--help"],
        vec!["eval", "flow", "--help"],
        vec!["eval", "dllm", "--help"],
        vec!["train", "--help"],
        vec!["train", "flow", "--help"],
        vec!["train", "dllm", "--help"],
        vec!["presets", "--help"],
    ] {
        let (code, text) = drift(&args);
        assert_eq!(code, 0, "{args:?}: {text}");
        assert!(text.contains("Usage"), "{args:?}: {text}");
    }
    let (_, text) = drift(&["pretrain", "flow", "--help"]);
    assert!(text.contains("Example") && text.contains("--set"), "{text}");
    let (_, text) = drift(&["pretrain", "dllm", "--help"]);
    assert!(text.contains("Example") && text.contains("--set"), "{text}");
    let (_, text) = drift(&["train", "flow", "--help"]);
    assert!(text.contains("Example") && text.contains("--set"), "{text}");
    let (_, text) = drift(&["train", "dllm", "--help"]);
    assert!(text.contains("Example") && text.contains("recipe"), "{text}");
}

#[test]
fn train_dllm_names_a_bad_recipe_a_bad_value_and_a_missing_base() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let out = out.to_str().unwrap();
    let (code, text) = drift(&["train", "dllm", "--out", out, "--set", "recipe=ppo"]);
    assert_ne!(code, 0);
    assert!(text.contains("recipe") && text.contains("ppo"), "{text}");
    let (code, text) = drift(&["train", "dllm", "--out", out, "--set", "group_size=1"]);
    assert_ne!(code, 0);
    assert!(text.contains("group_size"), "{text}");
    let (code, text) = drift(&["train", "dllm", "--out", out, "--set", "base=\"/no/such/dllm\""]);
    assert_ne!(code, 0);
    assert!(text.contains("/no/such/dllm"), "{text}");
}

#[test]
fn train_flow_names_a_bad_key_a_bad_value_and_a_missing_base() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let out = out.to_str().unwrap();
    let (code, text) = drift(&["train", "flow", "--out", out, "--set", "group_sise=4"]);
    assert_ne!(code, 0);
    assert!(text.contains("group_sise"), "{text}");
    let (code, text) = drift(&["train", "flow", "--out", out, "--set", "train_fraction=1.5"]);
    assert_ne!(code, 0);
    assert!(text.contains("train_fraction"), "{text}");
    let (code, text) = drift(&["train", "flow", "--out", out, "--set", "base=\"/no/such/base\""]);
    assert_ne!(code, 0);
    assert!(text.contains("/no/such/base"), "{text}");
    let (code, text) = drift(&["train", "flow", "--out", out, "--config", "/no/such/grpo.toml"]);
    assert_ne!(code, 0);
    assert!(text.contains("/no/such/grpo.toml"), "{text}");
}

#[test]
fn pretrain_dllm_names_a_bad_key_a_bad_value_and_a_short_completion() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let out = out.to_str().unwrap();
    let (code, text) = drift(&["pretrain", "dllm", "--out", out, "--set", "model.d_modle=64"]);
    assert_ne!(code, 0);
    assert!(text.contains("d_modle"), "{text}");
    let (code, text) = drift(&["pretrain", "dllm", "--out", out, "--set", "batch=0"]);
    assert_ne!(code, 0);
    assert!(text.contains("batch"), "{text}");
    let (code, text) = drift(&["pretrain", "dllm", "--out", out, "--set", "completion_len=50"]);
    assert_ne!(code, 0);
    assert!(text.contains("completion_len"), "{text}");
    let (code, text) = drift(&["eval", "dllm", "--model", "/no/such/model"]);
    assert_ne!(code, 0);
    assert!(text.contains("/no/such/model"), "{text}");
}

#[test]
fn bad_config_key_missing_file_and_bad_value_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let out = out.to_str().unwrap();
    let (code, text) = drift(&["pretrain", "flow", "--out", out, "--set", "model.hiddne=64"]);
    assert_ne!(code, 0);
    assert!(text.contains("hiddne"), "{text}");
    let (code, text) = drift(&["pretrain", "flow", "--out", out, "--config", "/no/such/file.toml"]);
    assert_ne!(code, 0);
    assert!(text.contains("/no/such/file.toml"), "{text}");
    let (code, text) = drift(&["pretrain", "flow", "--out", out, "--set", "model.patch=5"]);
    assert_ne!(code, 0);
    assert!(text.contains("model.patch"), "{text}");
    let (code, text) = drift(&["pretrain", "flow", "--out", out, "--set", "steps=many"]);
    assert_ne!(code, 0);
    assert!(text.contains("steps"), "{text}");
    let (code, text) = drift(&["eval", "flow", "--model", "/no/such/model"]);
    assert_ne!(code, 0);
    assert!(text.contains("/no/such/model/config.json"), "{text}");
}

#[test]
fn presets_lists_every_loss_preset() {
    let (code, text) = drift(&["presets"]);
    assert_eq!(code, 0);
    for name in ["grpo", "dr_grpo", "dapo", "gspo", "espo", "gdpo", "stable_drl", "flow_grpo"] {
        assert!(text.contains(&format!("{name}:")), "{name} missing: {text}");
    }
}
