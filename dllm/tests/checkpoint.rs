//! Loading and saving: round trips, shards, the offline hub cache, tokenizers, dtypes, and
//! error messages that name what is wrong.

mod common;

use std::collections::HashMap;
use std::path::Path;

use candle_core::{DType, Device, Tensor};
use common::{cases, fixture, max_diff};
use drift_core::rng::RngKey;
use drift_dllm::model::{DiffusionLm, LoadOptions, TinySpec};
use drift_dllm::tokenizer::{CharTokenizer, Tokenizer};
use serde_json::Value;

fn copy_fixture(name: &str, to: &Path) {
    for f in ["config.json", "model.safetensors"] {
        std::fs::copy(fixture(name).join(f), to.join(f)).unwrap();
    }
}

fn edit_config(dir: &Path, edit: impl FnOnce(&mut Value)) {
    let path = dir.join("config.json");
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut v);
    std::fs::write(path, serde_json::to_string(&v).unwrap()).unwrap();
}

fn err_of(r: drift_dllm::Result<DiffusionLm>) -> String {
    r.expect_err("loading should fail").to_string()
}

fn small() -> TinySpec {
    TinySpec {
        d_model: 32,
        n_layers: 2,
        n_heads: 4,
        n_kv_heads: 2,
        mlp_hidden: 64,
        max_seq_len: 32,
    }
}

#[test]
fn save_then_load_gives_identical_logits_for_both_architectures() {
    let tok = CharTokenizer::ascii();
    let ids = Tensor::new(
        vec![tok.encode("x = 1 + 2").unwrap(), tok.encode("print(x)!").unwrap()],
        &Device::Cpu,
    )
    .unwrap();
    for (i, cfg) in
        [small().llada(tok.vocab_spec()), small().dream(tok.vocab_spec())].into_iter().enumerate()
    {
        for trainable in [false, true] {
            let opts = LoadOptions { trainable, ..LoadOptions::default() };
            let model = DiffusionLm::init(cfg.clone(), RngKey::new(i as u64), &opts)
                .unwrap()
                .with_tokenizer(Tokenizer::Char(tok.clone()));
            let dir = tempfile::tempdir().unwrap();
            model.save_pretrained(dir.path()).unwrap();
            let back = DiffusionLm::from_dir(dir.path(), &opts).unwrap();
            assert_eq!(back.config(), model.config());
            assert_eq!(back.num_parameters(), model.num_parameters());
            let (a, b) =
                (model.raw_logits(&ids, None).unwrap(), back.raw_logits(&ids, None).unwrap());
            assert_eq!(max_diff(&a, &b), 0.0, "round trip changed the logits");
            match back.tokenizer() {
                Some(Tokenizer::Char(t)) => assert_eq!(t, &tok),
                other => panic!("tokenizer not restored: {other:?}"),
            }
        }
    }
}

#[test]
fn a_fresh_initialisation_is_a_pure_function_of_its_key() {
    let cfg = small().llada(CharTokenizer::ascii().vocab_spec());
    let w = |seed| {
        let m = DiffusionLm::init(cfg.clone(), RngKey::new(seed), &LoadOptions::frozen()).unwrap();
        m.weights().iter().find(|(n, _)| n.ends_with("blocks.0.q_proj.weight")).unwrap().1.clone()
    };
    assert_eq!(max_diff(&w(4), &w(4)), 0.0);
    assert!(max_diff(&w(4), &w(5)) > 1e-3);
}

#[test]
fn resaving_a_fixture_keeps_its_config_keys_and_logits() {
    let dir = tempfile::tempdir().unwrap();
    let model = DiffusionLm::from_dir(fixture("llada-tiny"), &LoadOptions::frozen()).unwrap();
    model.save_pretrained(dir.path()).unwrap();
    let saved: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("config.json")).unwrap())
            .unwrap();
    let original: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("llada-tiny/config.json")).unwrap())
            .unwrap();
    for (k, v) in original.as_object().unwrap() {
        assert_eq!(&saved[k], v, "config key {k} changed on save");
    }
    let back = DiffusionLm::from_dir(dir.path(), &LoadOptions::frozen()).unwrap();
    let ids = &cases("llada-tiny")["input_ids"];
    assert_eq!(
        max_diff(&model.raw_logits(ids, None).unwrap(), &back.raw_logits(ids, None).unwrap()),
        0.0
    );
}

#[test]
fn sharded_checkpoints_load() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(fixture("dream-tiny/config.json"), dir.path().join("config.json")).unwrap();
    let all = candle_core::safetensors::load(fixture("dream-tiny/model.safetensors"), &Device::Cpu)
        .unwrap();
    let (mut shards, mut weight_map) = ([HashMap::new(), HashMap::new()], serde_json::Map::new());
    for (i, (name, t)) in all.into_iter().enumerate() {
        let file = format!("model-0000{}-of-00002.safetensors", i % 2 + 1);
        weight_map.insert(name.clone(), Value::String(file));
        shards[i % 2].insert(name, t);
    }
    for (i, shard) in shards.iter().enumerate() {
        candle_core::safetensors::save(
            shard,
            dir.path().join(format!("model-0000{}-of-00002.safetensors", i + 1)),
        )
        .unwrap();
    }
    let index = serde_json::json!({"metadata": {"total_size": 0}, "weight_map": weight_map});
    std::fs::write(dir.path().join("model.safetensors.index.json"), index.to_string()).unwrap();
    let model = DiffusionLm::from_dir(dir.path(), &LoadOptions::frozen()).unwrap();
    let c = cases("dream-tiny");
    assert!(max_diff(&model.raw_logits(&c["input_ids"], None).unwrap(), &c["logits"]) <= 1e-5);
    // A shard listed in the index but absent is named.
    std::fs::remove_file(dir.path().join("model-00002-of-00002.safetensors")).unwrap();
    let err = err_of(DiffusionLm::from_dir(dir.path(), &LoadOptions::frozen()));
    assert!(err.contains("model-00002-of-00002.safetensors"), "{err}");
}

#[test]
fn the_hub_cache_is_read_offline_and_a_missing_repo_names_repo_and_cache() {
    let cache_dir = tempfile::tempdir().unwrap();
    let repo = cache_dir.path().join("models--drift-test--llada-tiny");
    let snapshot = repo.join("snapshots").join("0123abcd");
    std::fs::create_dir_all(&snapshot).unwrap();
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    std::fs::write(repo.join("refs").join("main"), "0123abcd").unwrap();
    copy_fixture("llada-tiny", &snapshot);
    let cache = hf_hub::Cache::new(cache_dir.path().to_path_buf());
    let model = DiffusionLm::from_hf_cache_at(
        &cache,
        "drift-test/llada-tiny",
        None,
        &LoadOptions::frozen(),
    )
    .unwrap();
    let c = cases("llada-tiny");
    assert!(max_diff(&model.raw_logits(&c["input_ids"], None).unwrap(), &c["logits"]) <= 1e-5);

    let err = err_of(DiffusionLm::from_hf_cache_at(
        &cache,
        "nobody/absent-model",
        None,
        &LoadOptions::frozen(),
    ));
    assert!(err.contains("nobody/absent-model"), "{err}");
    assert!(err.contains(&cache_dir.path().display().to_string()), "{err}");
}

#[test]
fn unknown_architecture_is_named() {
    let dir = tempfile::tempdir().unwrap();
    copy_fixture("llada-tiny", dir.path());
    edit_config(dir.path(), |v| {
        v["model_type"] = "gpt2".into();
        v["architectures"] = serde_json::json!(["GPT2LMHeadModel"]);
    });
    let err = err_of(DiffusionLm::from_dir(dir.path(), &LoadOptions::frozen()));
    assert!(
        err.contains("gpt2") && err.contains("GPT2LMHeadModel") && err.contains("config.json"),
        "{err}"
    );
}

#[test]
fn a_missing_tensor_is_named() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(fixture("llada-tiny/config.json"), dir.path().join("config.json")).unwrap();
    let mut all =
        candle_core::safetensors::load(fixture("llada-tiny/model.safetensors"), &Device::Cpu)
            .unwrap();
    all.remove("model.transformer.blocks.1.up_proj.weight").unwrap();
    candle_core::safetensors::save(&all, dir.path().join("model.safetensors")).unwrap();
    for opts in [LoadOptions::frozen(), LoadOptions::trainable()] {
        let err = err_of(DiffusionLm::from_dir(dir.path(), &opts));
        assert!(
            err.contains("`model.transformer.blocks.1.up_proj.weight`") && err.contains("missing"),
            "{err}"
        );
        assert!(err.contains("model.safetensors") && err.contains("[128, 64]"), "{err}");
    }
}

#[test]
fn a_wrong_shape_is_named_with_both_shapes() {
    let dir = tempfile::tempdir().unwrap();
    copy_fixture("dream-tiny", dir.path());
    edit_config(dir.path(), |v| v["intermediate_size"] = 96.into());
    let err = err_of(DiffusionLm::from_dir(dir.path(), &LoadOptions::frozen()));
    assert!(err.contains("`model.layers.0.mlp.gate_proj.weight`"), "{err}");
    assert!(err.contains("[128, 64]") && err.contains("[96, 64]"), "{err}");
}

#[test]
fn unsupported_config_values_and_missing_files_are_named() {
    let dir = tempfile::tempdir().unwrap();
    copy_fixture("llada-tiny", dir.path());
    edit_config(dir.path(), |v| v["alibi"] = true.into());
    assert!(err_of(DiffusionLm::from_dir(dir.path(), &LoadOptions::frozen())).contains("`alibi`"));
    std::fs::remove_file(dir.path().join("model.safetensors")).unwrap();
    let err = err_of(DiffusionLm::from_dir(dir.path(), &LoadOptions::frozen()));
    assert!(
        err.contains("model.safetensors") && err.contains(&dir.path().display().to_string()),
        "{err}"
    );
    let err = err_of(DiffusionLm::from_dir(dir.path().join("nowhere"), &LoadOptions::frozen()));
    assert!(err.contains("config.json"), "{err}");
}

#[test]
fn a_tokenizer_json_beside_the_checkpoint_is_loaded() {
    let dir = tempfile::tempdir().unwrap();
    copy_fixture("dream-tiny", dir.path());
    let json = r#"{"version":"1.0","truncation":null,"padding":null,"added_tokens":[],
        "normalizer":null,"pre_tokenizer":{"type":"Whitespace"},"post_processor":null,"decoder":null,
        "model":{"type":"WordLevel","vocab":{"[UNK]":0,"hello":1,"world":2},"unk_token":"[UNK]"}}"#;
    std::fs::write(dir.path().join("tokenizer.json"), json).unwrap();
    let model = DiffusionLm::from_dir(dir.path(), &LoadOptions::frozen()).unwrap();
    let tok = model.tokenizer().expect("tokenizer.json should be picked up");
    assert!(matches!(tok, Tokenizer::Hf(_)));
    assert_eq!(tok.encode("hello world hello").unwrap(), vec![1, 2, 1]);
    // Saved back as tokenizer.json, which loads again.
    let out = tempfile::tempdir().unwrap();
    model.save_pretrained(out.path()).unwrap();
    let back = DiffusionLm::from_dir(out.path(), &LoadOptions::frozen()).unwrap();
    assert_eq!(back.tokenizer().unwrap().encode("world").unwrap(), vec![2]);
    std::fs::write(dir.path().join("tokenizer.json"), "{not json").unwrap();
    let err = err_of(DiffusionLm::from_dir(dir.path(), &LoadOptions::frozen()));
    assert!(err.contains("tokenizer.json"), "{err}");
}

#[test]
fn half_precision_weights_still_return_f32_logits() {
    let c = cases("llada-tiny");
    let opts = LoadOptions { dtype: DType::BF16, ..LoadOptions::default() };
    let model = DiffusionLm::from_dir(fixture("llada-tiny"), &opts).unwrap();
    assert!(model.weights().iter().all(|(_, t)| t.dtype() == DType::BF16));
    let logits = model.raw_logits(&c["input_ids"], None).unwrap();
    assert_eq!(logits.dtype(), DType::F32);
    let diff = max_diff(&logits, &c["logits"]);
    assert!(diff < 5e-2, "bf16 logits drifted by {diff}");
}
