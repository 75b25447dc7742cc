//! Parity with transformers 4.46.2 and diffusers 0.31.0 on the tiny random SD3 text encoders of
//! `fixtures/sd3-text-tiny` (fixtures/README.md): token ids, each encoder's outputs, and
//! `encode_prompt`'s assembled embeddings.

use std::collections::HashMap;
use std::path::PathBuf;

use candle_core::{DType, Device, Tensor};

use super::*;

fn fixture() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/sd3-text-tiny"))
}

fn case() -> (HashMap<String, Tensor>, Vec<String>, usize) {
    let t =
        candle_core::safetensors::load(fixture().join("case.safetensors"), &Device::Cpu).unwrap();
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture().join("case.json")).unwrap())
            .unwrap();
    let prompts =
        j["prompts"].as_array().unwrap().iter().map(|p| p.as_str().unwrap().to_string()).collect();
    (t, prompts, j["max_sequence_length"].as_u64().unwrap() as usize)
}

fn rel_err(a: &Tensor, b: &Tensor) -> f32 {
    let diff = (a - b).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
    let scale = b.abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
    diff / scale.max(1e-12)
}

fn ids(t: &Tensor) -> Vec<Vec<u32>> {
    t.to_dtype(DType::U32).unwrap().to_vec2().unwrap()
}

#[test]
fn tokens_match_the_transformers_tokenizers() {
    let (c, prompts, len) = case();
    let enc = Sd3TextEncoders::from_dir(&fixture(), DType::F32, &Device::Cpu).unwrap();
    let [l, g, t] = enc.token_ids(&prompts, len).unwrap();
    assert_eq!(ids(&l), ids(&c["ids.clip_l"]), "CLIP-L");
    assert_eq!(ids(&g), ids(&c["ids.clip_g"]), "CLIP-G (pads with \"!\")");
    assert_eq!(ids(&t), ids(&c["ids.t5"]), "T5");
}

#[test]
fn each_encoder_and_the_assembled_embeddings_match_diffusers() {
    let (c, prompts, len) = case();
    let enc = Sd3TextEncoders::from_dir(&fixture(), DType::F32, &Device::Cpu).unwrap();
    for (k, name) in [(0, "clip_l"), (1, "clip_g")] {
        let (pen, pooled) =
            enc.clip[k].1.encode(&c[&format!("ids.{name}")].to_dtype(DType::U32).unwrap()).unwrap();
        let e = rel_err(&pen, &c[&format!("{name}.penultimate")]);
        assert!(e < 1e-5, "{name} penultimate: {e}");
        let e = rel_err(&pooled, &c[&format!("{name}.text_embeds")]);
        assert!(e < 1e-5, "{name} pooled: {e}");
    }
    let t5 = enc.t5.1.borrow_mut().forward(&c["ids.t5"].to_dtype(DType::U32).unwrap()).unwrap();
    let e = rel_err(&t5, &c["t5.last_hidden_state"]);
    assert!(e < 1e-5, "T5: {e}");
    let (text, pooled) = enc.encode(&prompts, len).unwrap();
    let e = rel_err(&text, &c["prompt_embeds"]);
    assert!(e < 1e-5, "prompt_embeds: {e}");
    let e = rel_err(&pooled, &c["pooled_prompt_embeds"]);
    assert!(e < 1e-5, "pooled_prompt_embeds: {e}");
    let (nt, np) = enc.encode(&[String::new()], len).unwrap();
    let e = rel_err(&nt, &c["negative_prompt_embeds"].narrow(0, 0, 1).unwrap());
    assert!(e < 1e-5, "negative_prompt_embeds: {e}");
    let e = rel_err(&np, &c["negative_pooled_prompt_embeds"].narrow(0, 0, 1).unwrap());
    assert!(e < 1e-5, "negative_pooled_prompt_embeds: {e}");
}
