//! Decoding parity with the original Python code on tiny checkpoints: LLaDA's `generate`
//! (low-confidence, semi-AR blocks, LLaDA's quota and Fast-dLLM's threshold) on `llada-tiny`, and
//! Dream's `diffusion_generate` (maskgit_plus, topk_margin, entropy with Dream's transfer
//! schedule) and Fast-dLLM's cached block decoding of Dream on a sharpened `dream-tiny`, token
//! for token (`fixtures/fast-dllm-decoding`, NVlabs/Fast-dLLM 24cc59e, greedy).

mod common;

use candle_core::Device;
use drift_core::rng::RngKey;
use drift_dllm::model::{DiffusionLm, LoadOptions};
use drift_samplers::dllm::{
    decode, DecodeBatch, DecodeConfig, KvCacheMode, PositionRule, TransferSchedule,
};
use serde_json::Value;

fn cases(file: &str) -> Vec<Value> {
    let path = common::fixture("fast-dllm-decoding").join(file);
    let v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    v["cases"].as_array().unwrap().clone()
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect()
}

/// The completion drift decodes for `prompt` under `cfg`.
fn drift_output(model: &DiffusionLm, prompt: Vec<u32>, cfg: &DecodeConfig) -> Vec<u32> {
    let prompts = vec![prompt];
    let batch = DecodeBatch::new(&prompts, 1, 127);
    let t = decode(model, cfg, &batch, RngKey::new(0), &Device::Cpu).unwrap();
    t.tokens.get(0).unwrap().to_vec1::<u32>().unwrap()
}

/// LLaDA's three decoders: plain `generate`, and Fast-dLLM's `generate_with_prefix_cache` and
/// `generate_with_dual_cache` (outputs and forward passes), each with LLaDA's quota and with
/// the threshold rule.
#[test]
fn llada_generate_and_its_cached_variants_are_reproduced_token_for_token() {
    let model =
        DiffusionLm::from_dir(common::fixture("llada-tiny"), &LoadOptions::frozen()).unwrap();
    let mut checked = 0;
    for c in cases("llada.json") {
        let kv_cache = match c["function"].as_str().unwrap() {
            "generate" => KvCacheMode::None,
            "generate_with_prefix_cache" => KvCacheMode::Prefix,
            _ => KvCacheMode::Dual,
        };
        let position = match c["threshold"].as_f64() {
            None => PositionRule::LowConfidence,
            Some(tau) => PositionRule::Threshold { tau },
        };
        let cfg = DecodeConfig {
            gen_length: c["gen_length"].as_u64().unwrap() as usize,
            block_length: c["block_length"].as_u64().unwrap() as usize,
            steps: c["steps"].as_u64().unwrap() as usize,
            position,
            kv_cache,
            ..DecodeConfig::default()
        };
        let prompts = vec![ids(&c["prompt"])];
        let batch = DecodeBatch::new(&prompts, 1, 127);
        let t = decode(&model, &cfg, &batch, RngKey::new(0), &Device::Cpu).unwrap();
        assert_eq!(t.tokens.get(0).unwrap().to_vec1::<u32>().unwrap(), ids(&c["output"]), "{c}");
        assert_eq!(t.evaluations, c["nfe"].as_u64().unwrap() as usize, "{c}");
        checked += 1;
    }
    assert_eq!(checked, 36);
}

#[test]
fn dream_diffusion_generate_is_reproduced_token_for_token() {
    let dir = common::fixture("fast-dllm-decoding").join("dream-sharp");
    let model = DiffusionLm::from_dir(dir, &LoadOptions::frozen()).unwrap();
    let mut checked = 0;
    for c in cases("dream.json") {
        // A selection decided by less than 1e-5 of confidence flips under float rounding (the
        // reference's own recomputation records the smallest gap of each case).
        if c["min_selection_gap"].as_f64().is_none_or(|g| g < 1e-5) {
            continue;
        }
        let position = match c["alg"].as_str().unwrap() {
            "maskgit_plus" => PositionRule::LowConfidence,
            "topk_margin" => PositionRule::Margin,
            "entropy" => PositionRule::Entropy,
            _ => continue,
        };
        let n = c["max_new_tokens"].as_u64().unwrap() as usize;
        let cfg = DecodeConfig {
            gen_length: n,
            block_length: n,
            steps: c["steps"].as_u64().unwrap() as usize,
            position,
            schedule: TransferSchedule::Dream { eps: c["eps"].as_f64().unwrap() },
            ..DecodeConfig::default()
        };
        let out = drift_output(&model, ids(&c["prompt"]), &cfg);
        assert_eq!(out, ids(&c["output"]), "{c}");
        checked += 1;
    }
    assert_eq!(checked, 11);
}

/// Dream's `confidence_threshold`: the per-step budget, the carried declines and the added
/// steps (the cases' `used_steps`: 8, 10, 7 … of 8 or 4 asked).
#[test]
fn dream_confidence_threshold_is_reproduced_token_for_token() {
    let dir = common::fixture("fast-dllm-decoding").join("dream-sharp");
    let model = DiffusionLm::from_dir(dir, &LoadOptions::frozen()).unwrap();
    let mut checked = 0;
    for c in cases("dream.json").iter().filter(|c| c["alg"] == "confidence_threshold") {
        let n = c["max_new_tokens"].as_u64().unwrap() as usize;
        let cfg = DecodeConfig {
            gen_length: n,
            block_length: n,
            steps: c["steps"].as_u64().unwrap() as usize,
            position: PositionRule::DreamThreshold { tau: c["threshold"].as_f64().unwrap() },
            ..DecodeConfig::default()
        };
        let prompts = vec![ids(&c["prompt"])];
        let batch = DecodeBatch::new(&prompts, 1, 127);
        let t = decode(&model, &cfg, &batch, RngKey::new(0), &Device::Cpu).unwrap();
        assert_eq!(t.tokens.get(0).unwrap().to_vec1::<u32>().unwrap(), ids(&c["output"]), "{c}");
        assert_eq!(t.evaluations, c["used_steps"].as_u64().unwrap() as usize, "{c}");
        checked += 1;
    }
    assert_eq!(checked, 6);
}

/// Fast-dLLM's cached block decoding of Dream (`dream/model/generation_utils_block.py`, prefix
/// and dual cache): each block's recording pass commits the block's first position, then Dream's
/// schedule from its second step on, ranked by negative entropy (what that loop computes for
/// every non-threshold `alg`), or the uncapped threshold rule until the block is full. Outputs
/// and forward passes, 2 blocks of 8 or 1 of 16, 6 to 16 steps, thresholds 0.3 and 0.9.
#[test]
fn dream_cached_block_decoding_is_reproduced_token_for_token() {
    let dir = common::fixture("fast-dllm-decoding").join("dream-sharp");
    let model = DiffusionLm::from_dir(dir, &LoadOptions::frozen()).unwrap();
    let mut checked = 0;
    for c in cases("dream_cache.json") {
        // The smallest gap between two confidences the reference ranked (over every step):
        // under 1e-5 a ranking may flip under float rounding.
        if c["min_confidence_gap"].as_f64().is_none_or(|g| g < 1e-5) {
            continue;
        }
        let (position, schedule) = match c["threshold"].as_f64() {
            None => {
                (PositionRule::Entropy, TransferSchedule::Dream { eps: c["eps"].as_f64().unwrap() })
            }
            Some(tau) => (PositionRule::Threshold { tau }, TransferSchedule::Llada),
        };
        let cfg = DecodeConfig {
            gen_length: c["max_new_tokens"].as_u64().unwrap() as usize,
            block_length: c["block_length"].as_u64().unwrap() as usize,
            steps: c["steps"].as_u64().unwrap() as usize,
            position,
            schedule,
            kv_cache: if c["dual_cache"].as_bool().unwrap() {
                KvCacheMode::Dual
            } else {
                KvCacheMode::Prefix
            },
            ..DecodeConfig::default()
        };
        let prompts = vec![ids(&c["prompt"])];
        let batch = DecodeBatch::new(&prompts, 1, 127);
        let t = decode(&model, &cfg, &batch, RngKey::new(0), &Device::Cpu).unwrap();
        assert_eq!(t.tokens.get(0).unwrap().to_vec1::<u32>().unwrap(), ids(&c["output"]), "{c}");
        assert_eq!(t.evaluations, c["forward_passes"].as_u64().unwrap() as usize, "{c}");
        checked += 1;
    }
    assert_eq!(checked, 34);
}

/// The cached Dream loop has no capped threshold, no origin rule and nothing to do after its
/// recording pass at one step per block: each is refused before any forward, naming the field.
#[test]
fn dream_cached_decoding_refuses_what_its_reference_loop_does_not_define() {
    let dir = common::fixture("fast-dllm-decoding").join("dream-sharp");
    let model = DiffusionLm::from_dir(dir, &LoadOptions::frozen()).unwrap();
    let prompts = vec![vec![1u32, 2, 3]];
    let batch = DecodeBatch::new(&prompts, 1, 127);
    let base = DecodeConfig {
        gen_length: 8,
        block_length: 4,
        steps: 4,
        kv_cache: KvCacheMode::Prefix,
        ..DecodeConfig::default()
    };
    for (cfg, field) in [
        (
            DecodeConfig { position: PositionRule::DreamThreshold { tau: 0.9 }, ..base.clone() },
            "position",
        ),
        (DecodeConfig { position: PositionRule::Origin { eps: 1e-3 }, ..base.clone() }, "position"),
        (DecodeConfig { steps: 2, ..base.clone() }, "steps"),
    ] {
        let err = decode(&model, &cfg, &batch, RngKey::new(0), &Device::Cpu).unwrap_err();
        assert!(err.to_string().contains(field), "{field}: {err}");
    }
    // The same rules without the cache decode.
    let plain = DecodeConfig { kv_cache: KvCacheMode::None, steps: 2, ..base };
    decode(&model, &plain, &batch, RngKey::new(0), &Device::Cpu).unwrap();
}

/// Left-padded prompts of several lengths, padding hidden, under Fast-dLLM's prefix and dual
/// caches: each row decodes to the tokens its prompt gives alone under the same cache (every
/// cached forward attends over the whole sequence's keys with the padding masked, as the plain
/// forward does), and the cached forwards' logits match the lone prompt's to float rounding.
#[test]
fn cached_decoding_of_ragged_prompts_matches_each_prompt_alone() {
    let model =
        DiffusionLm::from_dir(common::fixture("llada-tiny"), &LoadOptions::frozen()).unwrap();
    let c = &cases("llada.json")[0];
    let long = ids(&c["prompt"]);
    assert!(long.len() >= 6, "the fixture's prompt is long enough to cut");
    let short = long[long.len() - 3..].to_vec();
    let prompts = vec![long.clone(), short.clone()];
    for kv_cache in [KvCacheMode::Prefix, KvCacheMode::Dual] {
        let cfg = DecodeConfig {
            gen_length: 16,
            block_length: 4,
            steps: 16,
            kv_cache,
            ..DecodeConfig::default()
        };
        let batch = DecodeBatch::new(&prompts, 1, 127);
        let t = decode(&model, &cfg, &batch, RngKey::new(0), &Device::Cpu).unwrap();
        let rows = t.tokens.to_vec2::<u32>().unwrap();
        let pad = long.len() - short.len();
        assert_eq!(rows[0][long.len()..], drift_output(&model, long.clone(), &cfg)[long.len()..]);
        assert_eq!(
            rows[1][long.len()..],
            drift_output(&model, short.clone(), &cfg)[short.len()..],
            "{kv_cache:?}: the padded row decodes as its prompt alone"
        );
        assert!(rows[1][..pad].iter().all(|&x| x == 127));
    }
    // The logits themselves, op by op: a padded row against its prompt alone.
    use drift_samplers::dllm::{CacheOp, KvCache};
    use drift_samplers::MaskPredictor;
    let (p, l) = (long.len(), 8);
    let mask_id = model.mask_id();
    let row = |prompt: &[u32], pad: usize| {
        let mut v = vec![127; pad];
        v.extend_from_slice(prompt);
        v.extend(std::iter::repeat_n(mask_id, l));
        v
    };
    let pad = p - short.len();
    let padded =
        candle_core::Tensor::new(vec![row(&long, 0), row(&short, pad)], &Device::Cpu).unwrap();
    let att: Vec<Vec<u8>> = vec![vec![1; p + l], (0..p + l).map(|i| u8::from(i >= pad)).collect()];
    let att = candle_core::Tensor::new(att, &Device::Cpu).unwrap();
    let alone = candle_core::Tensor::new(vec![row(&short, 0)], &Device::Cpu).unwrap();
    let (mut c_pad, mut c_alone) = (KvCache::default(), KvCache::default());
    let max_diff = |a: &candle_core::Tensor, b: &candle_core::Tensor| {
        (a - b).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap()
    };
    let close = |a: &candle_core::Tensor, b: &candle_core::Tensor| {
        let d = max_diff(a, b);
        assert!(d < 1e-4, "max |Δlogit| {d}");
    };
    let full = model.cached_logits(&padded, CacheOp::Record, &mut c_pad, Some(&att)).unwrap();
    let solo = model.cached_logits(&alone, CacheOp::Record, &mut c_alone, None).unwrap();
    close(&full.get(1).unwrap().narrow(0, pad, short.len() + l).unwrap(), &solo.get(0).unwrap());
    // Without the mask the padding is attended to and the row differs: the test can fail.
    let mut c_vis = KvCache::default();
    let vis = model.cached_logits(&padded, CacheOp::Record, &mut c_vis, None).unwrap();
    let d = max_diff(
        &vis.get(1).unwrap().narrow(0, pad, short.len() + l).unwrap(),
        &solo.get(0).unwrap(),
    );
    assert!(d > 1e-3, "visible padding changes the row ({d})");
    // Prefix from the completion's third position, dual on a 4-wide block there.
    let s = 2;
    // Runs `width` positions from completion column `s` of the padded batch and of the lone
    // prompt under the op `op(start)`, against each one's record.
    let mut both = |width: usize, op: fn(usize) -> CacheOp| {
        let padded_out = model
            .cached_logits(
                &padded.narrow(1, p + s, width).unwrap(),
                op(p + s),
                &mut c_pad,
                Some(&att),
            )
            .unwrap();
        let q = short.len() + s;
        let alone_out = model
            .cached_logits(&alone.narrow(1, q, width).unwrap(), op(q), &mut c_alone, None)
            .unwrap();
        (padded_out.get(1).unwrap(), alone_out.get(0).unwrap())
    };
    let (pre, pre_solo) = both(l - s, |start| CacheOp::Prefix { start });
    close(&pre, &pre_solo);
    let (dual, dual_solo) = both(4, |start| CacheOp::Dual { start });
    close(&dual, &dual_solo);
}

/// Dream under both caches, left-padded prompts of two lengths, padding hidden: each row decodes
/// to what its prompt gives alone (RoPE is relative, so the shift of every position by the
/// padding leaves the scores unchanged up to rounding).
#[test]
fn dream_cached_decoding_of_ragged_prompts_matches_each_prompt_alone() {
    let dir = common::fixture("fast-dllm-decoding").join("dream-sharp");
    let model = DiffusionLm::from_dir(dir, &LoadOptions::frozen()).unwrap();
    let long = ids(&cases("dream_cache.json")[1]["prompt"]);
    let short = long[long.len() - 3..].to_vec();
    let prompts = vec![long.clone(), short.clone()];
    for kv_cache in [KvCacheMode::Prefix, KvCacheMode::Dual] {
        let cfg = DecodeConfig {
            gen_length: 16,
            block_length: 8,
            steps: 8,
            position: PositionRule::Entropy,
            schedule: TransferSchedule::Dream { eps: 1e-3 },
            kv_cache,
            ..DecodeConfig::default()
        };
        let batch = DecodeBatch::new(&prompts, 1, 127);
        let t = decode(&model, &cfg, &batch, RngKey::new(0), &Device::Cpu).unwrap();
        let rows = t.tokens.to_vec2::<u32>().unwrap();
        assert_eq!(rows[0][long.len()..], drift_output(&model, long.clone(), &cfg)[long.len()..]);
        assert_eq!(
            rows[1][long.len()..],
            drift_output(&model, short.clone(), &cfg)[short.len()..],
            "{kv_cache:?}: the padded row decodes as its prompt alone"
        );
    }
}
