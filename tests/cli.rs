//! The `drift` binary: help text, and clear non-zero exits on bad input.

use std::path::Path;
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
        vec!["eval", "sudoku", "--help"],
        vec!["train", "--help"],
        vec!["train", "flow", "--help"],
        vec!["train", "dllm", "--help"],
        vec!["train", "sas", "--help"],
        vec!["presets", "--help"],
        vec!["prompts", "--help"],
        vec!["prompts", "flow", "--help"],
        vec!["sample", "--help"],
        vec!["sample", "dllm", "--help"],
        vec!["sample", "flow", "--help"],
        vec!["plot", "--help"],
        vec!["bench", "--help"],
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
    for sub in ["dllm", "flow"] {
        let (_, text) = drift(&["sample", sub, "--help"]);
        assert!(text.contains("Example") && text.contains("--prompt"), "{text}");
    }
    let (_, text) = drift(&["--help"]);
    assert!(text.contains("Exit status") && text.contains("NO_COLOR"), "{text}");
}

#[test]
fn usage_errors_exit_2_and_name_the_problem() {
    let (code, text) = drift(&["no-such-command"]);
    assert_eq!(code, 2, "{text}");
    let (code, text) =
        drift(&["sample", "flow", "--model", "/no/such/dit", "--prompt", "2 red circles"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("/no/such/dit"), "{text}");
    let model = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/checkpoints/flow-shapes-v2");
    let (code, text) = drift(&["sample", "flow", "--model", model, "--prompt", "a purple dragon"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("purple"), "{text}");
    let (code, text) = drift(&[
        "sample",
        "flow",
        "--model",
        model,
        "--prompt",
        "2 red circles",
        "--sampler",
        "sde",
    ]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("--sampler \"sde\""), "{text}");
    let dllm = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/checkpoints/dllm-code-v3");
    let (code, text) =
        drift(&["sample", "dllm", "--model", dllm, "--prompt", "x", "--rule", "best"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("--rule \"best\""), "{text}");
    // Decoding values are checked before the model runs (a NaN temperature used to exit 1).
    let (code, text) =
        drift(&["sample", "dllm", "--model", dllm, "--prompt", "x", "--temperature", "nan"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("temperature") && text.contains("NaN"), "{text}");
    let (code, text) = drift(&["plot", "/no/such/metrics.jsonl"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("/no/such/metrics.jsonl"), "{text}");
    let (code, text) = drift(&["bench", "gpu"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("\"gpu\""), "{text}");
    // --device is global: before or after the subcommand, named when wrong.
    let (code, text) = drift(&["--device", "tpu", "presets"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("--device \"tpu\"") && text.contains("cuda:N"), "{text}");
    let (code, text) = drift(&["presets", "--device", "cuda:x"]);
    assert_eq!(code, 2, "{text}");
    let (code, text) = drift(&["presets", "--device", "cpu"]);
    assert_eq!(code, 0, "{text}");
    // A zero batch is refused before any work (it used to divide by zero).
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("p");
    let (code, text) =
        drift(&["pretrain", "flow", "--set", "batch=0", "--out", out.to_str().unwrap()]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("batch") && text.contains("at least 1"), "{text}");
    assert!(!out.exists(), "nothing written for a refused config");
}

#[test]
fn sample_and_plot_run_on_the_shipped_models() {
    let dir = tempfile::tempdir().unwrap();
    let model = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/checkpoints/flow-shapes-v2");
    let grid = dir.path().join("g.png");
    let args = ["sample", "flow", "--model", model, "--prompt", "2 red circles", "--n", "2"];
    let (code, text) =
        drift(&[&args[..], &["--steps", "4", "--out", grid.to_str().unwrap()]].concat());
    assert_eq!(code, 0, "{text}");
    assert_eq!(text.matches("\"prompt\":\"2 red circles\"").count(), 2, "{text}");
    assert!(grid.is_file());
    let dllm = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/checkpoints/dllm-code-v3");
    let args = ["sample", "dllm", "--model", dllm, "--prompt", "sum of xs", "--gen-length", "8"];
    let (code, text) = drift(&[&args[..], &["--steps", "4", "--n", "3"]].concat());
    assert_eq!(code, 0, "{text}");
    let lines: Vec<serde_json::Value> =
        text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert_eq!(lines[2]["sample"], 2);
    assert_eq!(lines[0]["evaluations"], 4);
    let metrics = dir.path().join("m.jsonl");
    std::fs::write(&metrics, "{\"step\":0,\"a\":1.0}\n{\"step\":1,\"a\":2.0}\n").unwrap();
    let png = dir.path().join("c.png");
    let (code, text) =
        drift(&["plot", metrics.to_str().unwrap(), "--keys", "a", "--out", png.to_str().unwrap()]);
    assert_eq!(code, 0, "{text}");
    assert!(png.is_file());
    let (code, text) = drift(&["plot", metrics.to_str().unwrap(), "--keys", "b"]);
    assert_eq!(code, 2, "a key the file lacks is bad usage: {text}");
    assert!(text.contains("`b`"), "{text}");
    // A file with more metrics than one image holds: refused by name, no panic.
    let fields: Vec<String> = (0..5000).map(|k| format!("\"m{k}\":1")).collect();
    std::fs::write(&metrics, format!("{{\"step\":0,{}}}\n", fields.join(","))).unwrap();
    let (code, text) = drift(&["plot", metrics.to_str().unwrap(), "--out", png.to_str().unwrap()]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("5000 metrics"), "{text}");
}

#[test]
fn sample_dllm_in_bf16_decodes_where_the_cpu_has_amx_and_is_refused_by_flag_elsewhere() {
    let dllm = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/checkpoints/dllm-code-v5");
    let args = ["sample", "dllm", "--model", dllm, "--prompt", "sum of xs", "--steps", "8"];
    let bf16 = [&args[..], &["--gen-length", "8", "--matmul", "bf16"]].concat();
    let (code, text) = drift(&bf16);
    if drift_core::nn::amx::available() {
        assert_eq!(code, 0, "{text}");
        assert!(text.contains("\"evaluations\":8"), "{text}");
    }
    // Without AMX (here forced off) the flag is refused by name, before any decoding.
    let out = Command::new(env!("CARGO_BIN_EXE_drift"))
        .args(&bf16)
        .env("DRIFT_NO_AMX", "1")
        .output()
        .expect("the binary runs");
    let text = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("--matmul bf16") && text.contains("AMX"), "{text}");
    let (code, text) = drift(&[&args[..], &["--matmul", "fp8"]].concat());
    assert_eq!(code, 2, "{text}");
}

#[test]
fn prompts_flow_writes_the_worlds_split_as_a_file_the_trainer_reads() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("shapes.jsonl");
    let (code, text) = drift(&["prompts", "flow", "--out", file.to_str().unwrap()]);
    assert_eq!(code, 0, "{text}");
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 450, "the whole prompt space");
    let held = lines.iter().filter(|l| l["split"] == "held_out").count();
    let train = lines.iter().filter(|l| l["split"] == "train").count();
    assert_eq!((train + held, held > 0), (450, true));
    assert!(text.contains(&format!("{train} train and {held} held-out")), "{text}");
    assert!(lines.iter().all(|l| l["category"].is_string()));
    let missing = dir.path().join("no/such/dir/p.jsonl");
    let (code, text) = drift(&["prompts", "flow", "--out", missing.to_str().unwrap()]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("no/such/dir/p.jsonl"), "{text}");
}

#[test]
fn eval_flow_scores_a_prompt_file_per_category_and_names_a_malformed_line() {
    let dir = tempfile::tempdir().unwrap();
    let model = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/checkpoints/flow-shapes-v2");
    let good = dir.path().join("good.jsonl");
    std::fs::write(
        &good,
        "{\"prompt\": \"3 circles\", \"category\": \"counting\"}\n{\"prompt\": \"a red square\"}\n",
    )
    .unwrap();
    let args = ["eval", "flow", "--model", model, "--steps", "2", "--per-category", "2"];
    let (code, text) = drift(&[&args[..], &["--prompts", good.to_str().unwrap()]].concat());
    assert_eq!(code, 0, "{text}");
    let lines: Vec<serde_json::Value> =
        text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    assert_eq!(lines.len(), 3, "two categories and the overall line: {text}");
    assert_eq!(
        (lines[0]["category"].as_str(), lines[0]["samples"].as_u64()),
        (Some("counting"), Some(2))
    );
    assert_eq!(lines[1]["category"], "colors");
    assert_eq!(
        (lines[2]["samples"].as_u64(), lines[2]["eval"].as_str()),
        (Some(4), Some("flow/prompts"))
    );
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, "{\"prompt\": \"3 circles\"}\n{\"prompt\": \"3 purple circles\"}\n")
        .unwrap();
    let (code, text) = drift(&[&args[..], &["--prompts", bad.to_str().unwrap()]].concat());
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("bad.jsonl, line 2") && text.contains("`purple`"), "{text}");
    // The trainer reads the same files, before any work starts.
    let out = dir.path().join("run");
    let train = |file: &std::path::Path| {
        let set = format!("prompts={:?}", file.to_str().unwrap());
        drift(&["train", "flow", "--out", out.to_str().unwrap(), "--set", &set])
    };
    let (code, text) = train(&bad);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("bad.jsonl, line 2"), "{text}");
    let held = dir.path().join("held.jsonl");
    std::fs::write(&held, "{\"prompt\": \"3 circles\", \"split\": \"held_out\"}\n").unwrap();
    let (code, text) = train(&held);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("no training prompts"), "{text}");
    let wrong = dir.path().join("wrong.jsonl");
    std::fs::write(&wrong, "{\"prompt\": \"3 circles\", \"category\": \"position\"}\n").unwrap();
    let (code, text) = drift(&[&args[..], &["--prompts", wrong.to_str().unwrap()]].concat());
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("line 1") && text.contains("`counting`"), "{text}");
}

#[test]
fn train_dllm_names_a_bad_recipe_a_bad_value_and_a_missing_base() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let out = out.to_str().unwrap();
    let (code, text) = drift(&["train", "dllm", "--out", out, "--set", "recipe=ppo"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("recipe") && text.contains("ppo"), "{text}");
    let (code, text) = drift(&["train", "dllm", "--out", out, "--set", "group_size=1"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("group_size"), "{text}");
    // The code reward's sandbox is configurable, and a bad mode is named with the valid ones.
    let (code, text) = drift(&["train", "dllm", "--out", out, "--set", "sandbox.mode=none"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("sandbox.mode") && text.contains("namespaces"), "{text}");
    let (code, text) = drift(&["train", "dllm", "--out", out, "--set", "base=\"/no/such/dllm\""]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("/no/such/dllm"), "{text}");
}

#[test]
fn train_flow_names_a_bad_key_a_bad_value_and_a_missing_base() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let out = out.to_str().unwrap();
    let (code, text) = drift(&["train", "flow", "--out", out, "--set", "group_sise=4"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("group_sise"), "{text}");
    let (code, text) = drift(&["train", "flow", "--out", out, "--set", "train_fraction=1.5"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("train_fraction"), "{text}");
    let (code, text) = drift(&["train", "flow", "--out", out, "--set", "base=\"/no/such/base\""]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("/no/such/base"), "{text}");
    let (code, text) = drift(&["train", "flow", "--out", out, "--config", "/no/such/grpo.toml"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("/no/such/grpo.toml"), "{text}");
    for (rewards, expected) in [
        (r#"rewards=[{name="http"}]"#, "rewards.http"),
        (r#"rewards=[{name="http", http={url="https://x/"}}]"#, "https is not supported"),
        (r#"rewards=[{name="geneval", http={url="http://x/"}}]"#, "only on a term named"),
    ] {
        let (code, text) = drift(&["train", "flow", "--out", out, "--set", rewards]);
        assert_eq!(code, 2, "{rewards}: {text}");
        assert!(text.contains(expected), "{rewards}: {text}");
    }
}

#[test]
fn pretrain_dllm_names_a_bad_key_a_bad_value_and_a_short_completion() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let out = out.to_str().unwrap();
    let (code, text) = drift(&["pretrain", "dllm", "--out", out, "--set", "model.d_modle=64"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("d_modle"), "{text}");
    let (code, text) = drift(&["pretrain", "dllm", "--out", out, "--set", "batch=0"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("batch"), "{text}");
    let (code, text) = drift(&["pretrain", "dllm", "--out", out, "--set", "completion_len=20"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("completion_len"), "{text}");
    let (code, text) = drift(&["eval", "dllm", "--model", "/no/such/model"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("/no/such/model"), "{text}");
}

#[test]
fn bad_config_key_missing_file_and_bad_value_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let out = out.to_str().unwrap();
    let (code, text) = drift(&["pretrain", "flow", "--out", out, "--set", "model.hiddne=64"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("hiddne"), "{text}");
    let (code, text) = drift(&["pretrain", "flow", "--out", out, "--config", "/no/such/file.toml"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("/no/such/file.toml"), "{text}");
    let (code, text) = drift(&["pretrain", "flow", "--out", out, "--set", "model.patch=5"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("model.patch"), "{text}");
    let (code, text) = drift(&["pretrain", "flow", "--out", out, "--set", "steps=many"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("steps"), "{text}");
    let unknown = "category_weights={postion=2.0}";
    let (code, text) = drift(&["pretrain", "flow", "--out", out, "--set", unknown]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("category_weights") && text.contains("postion"), "{text}");
    assert!(!std::path::Path::new(out).join("metrics.jsonl").exists(), "no work before the check");
    let (code, text) = drift(&["eval", "flow", "--model", "/no/such/model"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("/no/such/model"), "{text}");
}

#[test]
fn presets_lists_every_loss_preset() {
    let (code, text) = drift(&["presets"]);
    assert_eq!(code, 0);
    for name in ["grpo", "dr_grpo", "dapo", "gspo", "espo", "gdpo", "stable_drl", "flow_grpo"] {
        assert!(text.contains(&format!("{name}:")), "{name} missing: {text}");
    }
}

#[test]
fn progress_is_plain_lines_when_stderr_is_not_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/configs/pretrain_dllm_code.toml");
    let sets = [
        "steps=2",
        "optim.schedule.total=2",
        "optim.schedule.warmup=1",
        "batch=2",
        "model.d_model=32",
        "model.mlp_hidden=64",
        "model.n_layers=1",
    ];
    let mut args = vec!["pretrain", "dllm", "--config", config, "--out", out.to_str().unwrap()];
    for s in &sets {
        args.extend(["--set", s]);
    }
    let (code, text) = drift(&args);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("step 2/2: loss"), "one plain line per reported step: {text}");
    assert!(!text.contains('\r') && !text.contains('\x1b'), "no redraws or colours: {text:?}");
}

#[test]
fn resuming_with_other_settings_is_refused_unless_forced() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let out = out.to_str().unwrap();
    let tiny = ["--set", "model.hidden=16", "--set", "model.depth=1", "--set", "batch=2"];
    let run = |extra: &[&str]| {
        let mut args = vec!["pretrain", "flow", "--out", out];
        args.extend_from_slice(&tiny);
        args.extend_from_slice(extra);
        drift(&args)
    };
    let (code, text) = run(&["--set", "steps=2"]);
    assert_eq!(code, 0, "{text}");
    // A longer run of the same settings resumes.
    let (code, text) = run(&["--set", "steps=3"]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("resuming from") && text.contains("(step 2)"), "{text}");
    // Another seed or lr would not continue that run: refused, naming each difference, and
    // the recorded config is left as it was.
    let recorded = std::fs::read_to_string(dir.path().join("run/config.toml")).unwrap();
    let (code, text) = run(&["--set", "steps=4", "--set", "seed=5", "--set", "optim.adamw.lr=0.5"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("seed: 0 -> 5") && text.contains("optim.adamw.lr: "), "{text}");
    assert!(!text.contains("steps:"), "the run length may change: {text}");
    assert_eq!(std::fs::read_to_string(dir.path().join("run/config.toml")).unwrap(), recorded);
    let (code, text) = run(&["--set", "steps=4", "--set", "seed=5", "--force"]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("--force") && text.contains("(step 3)"), "{text}");
}

#[test]
fn invalid_run_and_optimizer_values_exit_2_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let out = out.to_str().unwrap();
    let cases: [(&[&str], &str); 8] = [
        (&["train", "flow", "--set", "optim.adamw.lr=-1"], "optim.adamw.lr"),
        (&["train", "flow", "--set", "optim.adamw.lr=nan"], "optim.adamw.lr"),
        (&["train", "flow", "--set", "steps=0"], "steps"),
        (&["train", "flow", "--set", "max_seconds=0"], "max_seconds"),
        (&["train", "dllm", "--set", "optim.adamw.beta1=2"], "optim.adamw.beta1"),
        (&["train", "dllm", "--set", "max_seconds=-1"], "max_seconds"),
        (&["pretrain", "dllm", "--set", "optim.max_grad_norm=-1"], "optim.max_grad_norm"),
        (&["pretrain", "flow", "--set", "optim.ema={decay=2.0,every=1}"], "optim.ema"),
    ];
    for (args, field) in cases {
        let start = std::time::Instant::now();
        let mut args = args.to_vec();
        args.extend(["--out", out]);
        let (code, text) = drift(&args);
        assert_eq!(code, 2, "{args:?}: {text}");
        assert!(text.contains(field), "{args:?}: {text}");
        assert!(start.elapsed().as_secs_f64() < 2.0, "{args:?} took {:?}", start.elapsed());
    }
}

#[test]
fn dllm_scores_and_trains_on_a_users_problem_file_and_names_a_malformed_line() {
    let dir = tempfile::tempdir().unwrap();
    let dllm = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/checkpoints/dllm-code-v3");
    let data = dir.path().join("mine.jsonl");
    std::fs::write(
        &data,
        concat!(
            "{\"prompt\": \"return x doubled\", \"tests\": [\"assert f(2) == 4\"]}\n",
            "{\"prompt\": \"return x negated\", \"tests\": [\"assert f(1) == -1\"], ",
            "\"split\": \"held_out\"}\n",
        ),
    )
    .unwrap();
    let out = dir.path().join("eval");
    let args = ["eval", "dllm", "--model", dllm, "--data", data.to_str().unwrap()];
    let (code, text) = drift(&[&args[..], &["--out", out.to_str().unwrap()]].concat());
    assert_eq!(code, 0, "{text}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("eval_summary.json")).unwrap())
            .unwrap();
    assert_eq!(summary["samples"], 2, "every line of the file is scored: {summary}");
    assert!(summary["eval"].as_str().unwrap().contains("mine.jsonl"), "{summary}");
    // A malformed second line: exit 2 naming the file and the line, before any decoding.
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, "{\"prompt\": \"p\", \"tests\": [\"assert 1\"]}\n{\"prompt\": \"q\"}\n")
        .unwrap();
    let (code, text) = drift(&["eval", "dllm", "--model", dllm, "--data", bad.to_str().unwrap()]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("bad.jsonl:2") && text.contains("tests"), "{text}");
    let run = dir.path().join("run");
    let set = format!("data=\"{}\"", bad.display());
    let (code, text) = drift(&["train", "dllm", "--out", run.to_str().unwrap(), "--set", &set]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("bad.jsonl:2"), "{text}");
    assert!(!run.join("metrics.jsonl").exists(), "refused before the run started");
    // Two iterations on the file: trains on its train line, evaluates its held-out line.
    let set = format!("data=\"{}\"", data.display());
    let (code, text) = drift(&[
        "train",
        "dllm",
        "--out",
        run.to_str().unwrap(),
        "--set",
        &set,
        "--set",
        "steps=1",
        "--set",
        "prompts_per_step=1",
        "--set",
        "eval_items=8",
    ]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("held-out pass rate (1 items"), "{text}");
}

#[test]
fn dllm_sizes_beyond_the_model_or_the_memory_exit_2_before_any_work() {
    let dllm = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/checkpoints/dllm-code-v3");
    let sample = ["sample", "dllm", "--model", dllm, "--prompt", "x"];
    let (code, text) = drift(&[&sample[..], &["--gen-length", "1000000"]].concat());
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("maximum sequence length 512"), "{text}");
    let (code, text) = drift(&[&sample[..], &["--n", "100000000"]].concat());
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("GiB") && text.contains("--n"), "{text}");
    let (code, text) = drift(&["eval", "dllm", "--model", dllm, "--gen-length", "1000000"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("maximum sequence length"), "{text}");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let train = ["train", "dllm", "--out", out.to_str().unwrap()];
    let base = format!("base=\"{dllm}\"");
    let (code, text) =
        drift(&[&train[..], &["--set", &base, "--set", "prompts_per_step=10000000"]].concat());
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("prompts_per_step") && text.contains("GiB"), "{text}");
    let (code, text) = drift(
        &[&train[..], &["--set", "decode.gen_length=100", "--set", "decode.block_length=33"]]
            .concat(),
    );
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("decode.block_length") && text.contains("33"), "{text}");
    assert!(!out.exists(), "nothing was started");
}

#[test]
fn flow_batches_beyond_the_memory_exit_2_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let out = out.to_str().unwrap();
    let (code, text) = drift(&["pretrain", "flow", "--out", out, "--set", "batch=100000"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("batch = 100000") && text.contains("GiB"), "{text}");
    let (code, text) = drift(&["train", "flow", "--out", out, "--set", "micro_batch=1000000"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("micro_batch = 1000000"), "{text}");
    let flow = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/checkpoints/flow-shapes-v2");
    let png = dir.path().join("g.png");
    let (code, text) = drift(&[
        "sample",
        "flow",
        "--model",
        flow,
        "--prompt",
        "a circle",
        "--n",
        "100000000",
        "--out",
        png.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("--n 100000000"), "{text}");
    assert!(!png.exists() && !dir.path().join("run").exists());
}

#[test]
fn a_run_whose_every_update_blows_up_exits_1_after_saving() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let (code, text) = drift(&[
        "pretrain",
        "flow",
        "--out",
        out.to_str().unwrap(),
        "--set",
        "optim.adamw.lr=1e30",
        "--set",
        "run.steps=2",
        "--set",
        "batch=2",
    ]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("diverged") && text.contains("2 skipped"), "{text}");
    assert!(out.join("model/model.safetensors").exists() && out.join("metrics.jsonl").exists());
    assert!(!text.contains("panicked"), "{text}");
}

#[test]
fn train_dllm_refuses_a_base_without_the_character_tokenizer() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base");
    std::fs::create_dir_all(&base).unwrap();
    let v3 = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/checkpoints/dllm-code-v3");
    for f in ["config.json", "model.safetensors"] {
        std::fs::copy(std::path::Path::new(v3).join(f), base.join(f)).unwrap();
    }
    let out = dir.path().join("run");
    let set = format!("base=\"{}\"", base.display());
    let (code, text) = drift(&["train", "dllm", "--out", out.to_str().unwrap(), "--set", &set]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("drift_char_tokenizer.json"), "{text}");
    assert!(!out.exists(), "refused before the run started");
}

#[test]
fn eval_dllm_reports_sampled_pass_at_k_for_each_k_up_to_the_samples() {
    let dllm = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/checkpoints/dllm-code-v3");
    let args = ["eval", "dllm", "--model", dllm, "--n", "2", "--gen-length", "8", "--samples"];
    let (code, text) = drift(&[&args[..], &["2", "--k", "1,2,5"]].concat());
    assert_eq!(code, 0, "{text}");
    let summary: serde_json::Value =
        serde_json::from_str(text.lines().rev().find(|l| l.starts_with('{')).unwrap()).unwrap();
    let p = summary["pass_at_k"].as_object().unwrap();
    assert_eq!(p.keys().collect::<Vec<_>>(), vec!["1", "2"], "k = 5 exceeds the 2 samples");
    assert!(p.values().all(|v| (0.0..=1.0).contains(&v.as_f64().unwrap())));
    let (code, text) = drift(&[&args[..], &["2", "--temperature", "nan"]].concat());
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("--temperature"), "{text}");
}

#[test]
fn the_sudoku_world_pretrains_evaluates_and_trains_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let pre = dir.path().join("pre");
    let config =
        concat!(env!("CARGO_MANIFEST_DIR"), "/examples/configs/pretrain_dllm_sudoku4.toml");
    let sets = [
        "run.steps=2",
        "optim.schedule.total=2",
        "optim.schedule.warmup=1",
        "batch=2",
        "model.d_model=32",
        "model.mlp_hidden=64",
        "model.n_layers=1",
    ];
    let mut args = vec!["pretrain", "dllm", "--config", config, "--out", pre.to_str().unwrap()];
    for s in &sets {
        args.extend(["--set", s]);
    }
    let (code, text) = drift(&args);
    assert_eq!(code, 0, "{text}");
    let model = pre.join("model");
    assert!(model.join("tokenizer.json").is_file());
    // A completion region shorter than the answer is named before any work.
    let mut short = args.clone();
    short.extend(["--set", "completion_len=10", "--force"]);
    let (code, text) = drift(&short);
    assert_ne!(code, 0);
    assert!(text.contains("completion_len = 10") && text.contains("Sudoku"), "{text}");
    let m = model.to_str().unwrap();
    let (code, text) = drift(&["eval", "sudoku", "--model", m, "--n", "4", "--rule", "margin"]);
    assert_eq!(code, 0, "{text}");
    let line: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(line["puzzles"], 4);
    assert_eq!(line["position"], "margin");
    let (code, text) = drift(&["eval", "sudoku", "--model", m, "--rule", "threshold"]);
    assert_ne!(code, 0);
    assert!(text.contains("--rule threshold"), "{text}");
    let rl = dir.path().join("rl");
    let base = format!("base={m}");
    let (code, text) = drift(&[
        "train",
        "dllm",
        "--out",
        rl.to_str().unwrap(),
        "--set",
        "world=\"sudoku\"",
        "--set",
        &base,
        "--set",
        "recipe=\"diffu_grpo\"",
        "--set",
        "run.steps=1",
        "--set",
        "prompts_per_step=1",
        "--set",
        "group_size=2",
        "--set",
        "inner_iterations=1",
        "--set",
        "eval_items=2",
        "--set",
        "decode.gen_length=28",
        "--set",
        "decode.block_length=28",
        "--set",
        "decode.steps=14",
        "--set",
        "eval_steps=14",
    ]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("held-out puzzles pass rate (2 items"), "{text}");
    // Too short a canvas for the answer is refused by name.
    let (code, text) = drift(&[
        "train",
        "dllm",
        "--out",
        dir.path().join("rl2").to_str().unwrap(),
        "--set",
        "world=\"sudoku\"",
        "--set",
        &base,
        "--set",
        "decode.gen_length=12",
    ]);
    assert_ne!(code, 0);
    assert!(text.contains("decode.gen_length = 12"), "{text}");
}

#[test]
fn train_sas_names_a_missing_base_a_short_canvas_and_a_bad_value() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sas");
    let out = out.to_str().unwrap();
    let (code, text) = drift(&["train", "sas", "--out", out, "--set", "base=\"/no/such/model\""]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("/no/such/model") && text.contains("config.json"), "{text}");
    let (code, text) = drift(&["train", "sas", "--out", out, "--set", "decode.gen_length=10"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("decode.gen_length = 10"), "{text}");
    let (code, text) = drift(&["train", "sas", "--out", out, "--set", "group_size=1"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("group_size"), "{text}");
}

/// `--order-policy` reaches the decoder of `sample dllm` and `eval dllm`: a saved policy whose
/// score is the margin feature alone decodes exactly as `--rule margin`, one on the top-1
/// probability exactly as `--rule low_confidence`, and one on minus the top-1 probability
/// (least confident first) differently.
#[test]
fn sample_and_eval_dllm_decode_with_a_saved_order_policy() {
    use drift::dllm::sas::{SasOrderPolicy, SasPolicyConfig};
    let dir = tempfile::tempdir().unwrap();
    let save = |name: &str, linear: [f64; 6]| {
        let cfg = SasPolicyConfig { init_linear: linear, ..SasPolicyConfig::default() };
        let path = dir.path().join(name);
        SasOrderPolicy::new(cfg, 0, &candle_core::Device::Cpu).unwrap().save(&path).unwrap();
        path.to_str().unwrap().to_string()
    };
    let margin = save("margin", [0.0, 1000.0, 0.0, 0.0, 0.0, 0.0]);
    let top1 = save("top1", [1000.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
    let anti = save("anti", [-1000.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
    let model = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/checkpoints/dllm-sudoku4-v1");
    let puzzles = [
        "Solve this 4x4 sudoku (. is empty):\n1...\n..3.\n.4..\n...2",
        "Solve this 4x4 sudoku (. is empty):\n.2..\n3...\n...1\n..4.",
        "Solve this 4x4 sudoku (. is empty):\n..1.\n4...\n...3\n.2..",
    ];
    let sample = |extra: &[&str]| {
        let mut args = vec!["sample", "dllm", "--model", model, "--gen-length", "28"];
        for p in &puzzles {
            args.extend(["--prompt", p]);
        }
        args.extend(extra);
        let (code, text) = drift(&args);
        assert_eq!(code, 0, "{text}");
        text.lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .map(|v| v["completion"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    let by_margin = sample(&["--rule", "margin"]);
    let by_top1 = sample(&["--rule", "low_confidence"]);
    assert_eq!(by_margin.len(), 3);
    assert_eq!(sample(&["--order-policy", &margin]), by_margin);
    assert_eq!(sample(&["--order-policy", &top1]), by_top1);
    assert_ne!(sample(&["--order-policy", &anti]), by_top1);
    // A sampled order is a different decode from the greedy one.
    let sampled = sample(&["--order-policy", &margin, "--sample-order", "--n", "4"]);
    assert_eq!(sampled.len(), 12);
    let (code, text) =
        drift(&["sample", "dllm", "--model", model, "--prompt", "x", "--order-policy", "/no/such"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("--order-policy /no/such"), "{text}");

    // eval dllm: the code world's greedy decode under the top-1 policy is the plain
    // (low-confidence) decode, completion for completion; least confident first it is not.
    let code_model = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/checkpoints/dllm-code-v5");
    let eval = |name: &str, extra: &[&str]| {
        let out = dir.path().join(name);
        let out = out.to_str().unwrap();
        let mut args =
            vec!["eval", "dllm", "--model", code_model, "--n", "8", "--batch", "8", "--out", out];
        args.extend(extra);
        let (code, text) = drift(&args);
        assert_eq!(code, 0, "{text}");
        let samples = std::fs::read_to_string(dir.path().join(name).join("eval_samples.jsonl"));
        let completions: Vec<String> = samples
            .unwrap()
            .lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["completion"].to_string()
            })
            .collect();
        let summary: serde_json::Value =
            serde_json::from_str(text.lines().find(|l| l.starts_with('{')).unwrap()).unwrap();
        (completions, summary)
    };
    let (plain, _) = eval("plain", &[]);
    let (ordered, summary) = eval("top1", &["--order-policy", &top1]);
    let (reversed, _) = eval("anti", &["--order-policy", &anti]);
    assert_eq!(plain.len(), 8);
    assert_eq!(ordered, plain);
    assert_ne!(reversed, plain);
    assert!(summary["position"].as_str().unwrap().starts_with("sas:"), "{summary}");
}

/// `train flow` with an `http` reward: scored by the reference server on loopback, and, when
/// nobody answers, every image a recorded failure while the run goes on to its end.
#[test]
fn train_flow_scores_with_an_http_reward_and_survives_a_dead_service() {
    use std::io::BufRead;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/reward_server/server.py");
    let mut server = std::process::Command::new("python3")
        .args([script, "--port", "0"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs the reference server");
    let mut line = String::new();
    std::io::BufReader::new(server.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let url = line.trim().strip_prefix("listening on ").unwrap().to_string();
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/score", l.local_addr().unwrap())
    };
    let dir = tempfile::tempdir().unwrap();
    let run = |name: &str, url: &str| {
        let out = dir.path().join(name);
        let rewards = format!(
            "rewards=[{{name=\"http\", weight=1.0, http={{url=\"{url}\", timeout_s=5, retries=0}}}}]"
        );
        let (code, text) = drift(&[
            "train",
            "flow",
            "--out",
            out.to_str().unwrap(),
            "--set",
            &rewards,
            "--set",
            "run.steps=1",
            "--set",
            "prompts_per_step=2",
            "--set",
            "group_size=2",
            "--set",
            "eval_images_per_category=1",
            "--set",
            "eval_steps=2",
            "--set",
            "eval_prompts=2",
            "--set",
            "diversity_prompts=1",
            "--set",
            "diversity_samples=2",
        ]);
        assert_eq!(code, 0, "{text}");
        let metrics = std::fs::read_to_string(out.join("metrics.jsonl")).unwrap();
        let step: serde_json::Value = metrics
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .find(|v| v.get("reward/failures").is_some())
            .expect("an iteration's metrics");
        step
    };
    let live = run("live", &url);
    assert_eq!(live["reward/failures"], 0.0, "{live}");
    let mean = live["reward/mean"].as_f64().unwrap();
    assert!(mean > 0.0 && mean < 1.0, "brightness is in (0, 1): {mean}");
    let gone = run("dead", &dead);
    assert_eq!(gone["reward/failures"], 4.0, "{gone}");
    let _ = server.kill();
    let _ = server.wait();
}

/// `drift train flow` from an SD3.5 pipeline folder (the tiny fixtures): LoRA Flow-GRPO with
/// the prompts of a JSONL file encoded from an embedding cache, the adapter saved in PEFT's
/// layout; without `sd3.embeddings` it exits 2 naming it, and a cache missing a prompt is named.
/// `drift train flow` from an SD3.5 pipeline folder (the tiny fixtures): LoRA Flow-GRPO with
/// the free-text prompts of a JSONL file encoded from an embedding cache, the adapter saved in
/// PEFT's layout; a missing `sd3.embeddings`, a cache missing a prompt and a shapes-world
/// reward each exit 2 naming the problem.
#[test]
fn train_flow_runs_lora_flow_grpo_on_an_sd3_folder() {
    use candle_core::{DType, Device};
    use drift_core::rng::RngKey;
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("sd35");
    let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/sd3-tiny");
    for (sub, from) in [("transformer", "sd35-medium-tiny"), ("vae", "sd3-vae-tiny")] {
        std::fs::create_dir_all(base.join(sub)).unwrap();
        for f in ["config.json", "diffusion_pytorch_model.safetensors"] {
            std::fs::copy(format!("{fixtures}/{from}/{f}"), base.join(sub).join(f)).unwrap();
        }
    }
    std::fs::write(
        base.join("model_index.json"),
        "{\"_class_name\": \"StableDiffusion3Pipeline\"}",
    )
    .unwrap();
    let prompts = dir.path().join("prompts.jsonl");
    let lines = [
        ("a red circle", "colors", "train"),
        ("a blue square", "colors", "train"),
        ("a green triangle", "colors", "held_out"),
    ];
    let text: Vec<String> = lines
        .iter()
        .map(|(p, c, s)| {
            format!("{{\"prompt\": \"{p}\", \"category\": \"{c}\", \"split\": \"{s}\"}}")
        })
        .collect();
    std::fs::write(&prompts, text.join("\n")).unwrap();
    let cache = |n: usize, name: &str| {
        let key = RngKey::new(5);
        let dev = Device::Cpu;
        let t = key.stream("t").normal((n, 7, 32), DType::F32, &dev).unwrap();
        let p = key.stream("p").normal((n, 24), DType::F32, &dev).unwrap();
        let nt = key.stream("nt").normal((1, 7, 32), DType::F32, &dev).unwrap();
        let np = key.stream("np").normal((1, 24), DType::F32, &dev).unwrap();
        let names: Vec<String> = lines[..n].iter().map(|l| l.0.to_string()).collect();
        let out = dir.path().join(name);
        drift_flow::sd3::PromptEmbeddings::save(&out, &names, (&t, &p), (&nt, &np)).unwrap();
        out
    };
    let full = cache(3, "embeds");
    let partial = cache(2, "embeds-partial");
    let run = |name: &str, embeddings: Option<&Path>, reward: &str| {
        let out = dir.path().join(name);
        let mut args =
            vec!["train".to_string(), "flow".into(), "--out".into(), out.to_str().unwrap().into()];
        let mut sets = vec![
            format!("base=\"{}\"", base.display()),
            format!("prompts=\"{}\"", prompts.display()),
            "run.steps=2".into(),
            "prompts_per_step=2".into(),
            "group_size=2".into(),
            "eval_images_per_category=2".into(),
            "eval_steps=2".into(),
            "eval_prompts=1".into(),
            "diversity_prompts=1".into(),
            "diversity_samples=2".into(),
            "guidance=2.0".into(),
            format!("rewards=[{{name=\"{reward}\", weight=1.0}}]"),
        ];
        if let Some(e) = embeddings {
            sets.push(format!(
                "sd3={{embeddings=\"{}\", latent_side=8, lora={{rank=4, alpha=8.0}}}}",
                e.display()
            ));
        }
        for s in &sets {
            args.push("--set".into());
            args.push(s.clone());
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        (drift(&args), out)
    };
    let ((code, text), out) = run("ok", Some(&full), "jpeg_compressibility");
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("held-out"), "{text}");
    let adapter =
        candle_core::safetensors::load(out.join("model/adapter_model.safetensors"), &Device::Cpu)
            .unwrap();
    assert!(adapter.contains_key("base_model.model.transformer_blocks.0.attn.to_q.lora_B.weight"));
    // Without a cache the run encodes with the folder's text encoders, which this one lacks.
    let ((code, text), _) = run("no-cache", None, "jpeg_compressibility");
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("text_encoder") && text.contains("sd3.embeddings"), "{text}");
    let ((code, text), _) = run("partial", Some(&partial), "jpeg_compressibility");
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("a green triangle"), "{text}");
    // DiT-only settings are refused rather than ignored.
    let out = dir.path().join("trainable");
    let sd3 = format!("sd3={{embeddings=\"{}\", latent_side=8}}", full.display());
    let (code, text) = drift(&[
        "train",
        "flow",
        "--out",
        out.to_str().unwrap(),
        "--set",
        &format!("base=\"{}\"", base.display()),
        "--set",
        &format!("prompts=\"{}\"", prompts.display()),
        "--set",
        &sd3,
        "--set",
        "trainable=[\"attn\"]",
    ]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("trainable") && text.contains("target_modules"), "{text}");
    // The shapes verifier does not score a real model's images.
    let ((code, text), _) = run("geneval", Some(&full), "geneval");
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("geneval") && text.contains("http"), "{text}");
    // The same pipeline as a repo id in the Hugging Face cache `HF_HOME` names, read offline.
    let hub = dir.path().join("hf").join("hub").join("models--drift-test--sd35-tiny");
    std::fs::create_dir_all(hub.join("refs")).unwrap();
    std::fs::write(hub.join("refs").join("main"), "abc123").unwrap();
    std::fs::create_dir_all(hub.join("snapshots")).unwrap();
    std::os::unix::fs::symlink(&base, hub.join("snapshots").join("abc123")).unwrap();
    let out = dir.path().join("from-cache");
    let sd3 = format!(
        "sd3={{embeddings=\"{}\", latent_side=8, lora={{rank=4, alpha=8.0}}}}",
        full.display()
    );
    let prompts_set = format!("prompts=\"{}\"", prompts.display());
    let args = [
        "train",
        "flow",
        "--out",
        out.to_str().unwrap(),
        "--set",
        "base=\"drift-test/sd35-tiny\"",
        "--set",
        &prompts_set,
        "--set",
        &sd3,
        "--set",
        "rewards=[{name=\"jpeg_compressibility\", weight=1.0}]",
        "--set",
        "run.steps=1",
        "--set",
        "prompts_per_step=1",
        "--set",
        "group_size=2",
        "--set",
        "eval_images_per_category=1",
        "--set",
        "eval_steps=2",
        "--set",
        "eval_prompts=1",
        "--set",
        "diversity_prompts=1",
        "--set",
        "diversity_samples=2",
    ];
    let o = Command::new(env!("CARGO_BIN_EXE_drift"))
        .args(args)
        .env("HF_HOME", dir.path().join("hf"))
        .output()
        .unwrap();
    let text =
        format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert!(out.join("model/adapter_model.safetensors").is_file(), "{text}");
}

/// An SD3 pipeline folder with its three text encoders and tokenizers (`fixtures/sd3-text-tiny`)
/// and a random transformer of matching widths: `drift train flow` encodes the prompt file once
/// into `embeddings/` of the run, then trains.
#[test]
fn train_flow_encodes_the_prompts_with_the_folders_text_encoders() {
    use candle_core::{DType, Device};
    use candle_nn::{VarBuilder, VarMap};
    use drift_flow::sd3::{ProjLoader, Sd3Config, Sd3Transformer};
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("sd3");
    let text = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/sd3-text-tiny");
    for sub in [
        "text_encoder",
        "text_encoder_2",
        "text_encoder_3",
        "tokenizer",
        "tokenizer_2",
        "tokenizer_3",
    ] {
        std::fs::create_dir_all(base.join(sub)).unwrap();
        for f in std::fs::read_dir(format!("{text}/{sub}")).unwrap() {
            let f = f.unwrap().path();
            std::fs::copy(&f, base.join(sub).join(f.file_name().unwrap())).unwrap();
        }
    }
    // Pooled: CLIP-L ⊕ CLIP-G = 16 + 24; text states: T5's width 96.
    let cfg = Sd3Config {
        sample_size: 8,
        num_layers: 2,
        attention_head_dim: 16,
        num_attention_heads: 2,
        joint_attention_dim: 96,
        caption_projection_dim: 32,
        pooled_projection_dim: 40,
        pos_embed_max_size: 16,
        ..Sd3Config::default()
    };
    let vm = VarMap::new();
    let vb = VarBuilder::from_varmap(&vm, DType::F32, &Device::Cpu);
    Sd3Transformer::new(cfg.clone(), vb, &ProjLoader::plain()).unwrap();
    std::fs::create_dir_all(base.join("transformer")).unwrap();
    vm.save(base.join("transformer/diffusion_pytorch_model.safetensors")).unwrap();
    let mut json = serde_json::to_value(&cfg).unwrap();
    json["_class_name"] = "SD3Transformer2DModel".into();
    std::fs::write(base.join("transformer/config.json"), json.to_string()).unwrap();
    std::fs::write(base.join("model_index.json"), "{}").unwrap();
    let prompts = dir.path().join("prompts.jsonl");
    std::fs::write(
        &prompts,
        "{\"prompt\": \"a red circle\"}\n{\"prompt\": \"a photo of two blue cats\"}\n\
         {\"prompt\": \"the red cat\", \"split\": \"held_out\"}\n",
    )
    .unwrap();
    let out = dir.path().join("run");
    let sets = [
        format!("base=\"{}\"", base.display()),
        format!("prompts=\"{}\"", prompts.display()),
        "sd3={latent_side=8, max_sequence_length=12, lora={rank=4, alpha=8.0}}".into(),
        "rewards=[{name=\"jpeg_compressibility\", weight=1.0}]".into(),
        "run.steps=1".into(),
        "prompts_per_step=1".into(),
        "group_size=2".into(),
        "eval_images_per_category=1".into(),
        "eval_steps=2".into(),
        "eval_prompts=1".into(),
        "diversity_prompts=1".into(),
        "diversity_samples=2".into(),
    ];
    let mut args =
        vec!["train".to_string(), "flow".into(), "--out".into(), out.display().to_string()];
    for s in &sets {
        args.push("--set".into());
        args.push(s.clone());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, text) = drift(&args);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("encoded 3 prompts"), "{text}");
    let cache =
        drift_flow::sd3::PromptEmbeddings::load(&out.join("embeddings"), &Device::Cpu).unwrap();
    assert_eq!(cache.len(), 3);
    // [1, 77 + 12 + 1, 96]: the text states and the packed pooled row.
    assert_eq!(cache.null().dims(), &[1, 90, 96]);
}
