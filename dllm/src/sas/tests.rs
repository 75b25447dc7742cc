use candle_core::{DType, Device, Tensor};
use drift_core::rng::RngKey;
use drift_samplers::dllm::{
    decode, decode_with_policy, DecodeBatch, DecodeConfig, OrderFeatures, OrderInput, OrderPolicy,
    PositionRule, ProposalConfig,
};

use super::policy::{RecordingPolicy, SasOrderPolicy, SasPolicyConfig};
use crate::model::{DiffusionLm, LoadOptions, TinySize};
use crate::tokenizer::CharTokenizer;

fn model() -> DiffusionLm {
    let tok = CharTokenizer::ascii();
    let cfg = TinySize::Nano.spec().llada(tok.vocab_spec());
    DiffusionLm::init(cfg, RngKey::new(11), &LoadOptions::frozen()).unwrap()
}

fn cfg(position: PositionRule) -> DecodeConfig {
    DecodeConfig {
        gen_length: 12,
        block_length: 6,
        steps: 8,
        position,
        proposal: ProposalConfig { temperature: 0.0, ..ProposalConfig::default() },
        ..DecodeConfig::default()
    }
}

fn prompts() -> Vec<Vec<u32>> {
    vec![vec![2, 40, 41, 42], vec![2, 50, 51, 52, 53, 54]]
}

#[test]
fn a_rollouts_order_log_prob_is_the_sum_of_its_steps_recomputed_from_scratch() {
    replay_equals_rollout(0);
}

/// The same with the MLP also reading a 4-wide projection of the denoiser's log-distribution.
#[test]
fn with_the_output_projection_the_replay_still_equals_the_rollout() {
    replay_equals_rollout(4);
}

fn replay_equals_rollout(projection: usize) {
    let m = model();
    let policy_cfg = SasPolicyConfig {
        init_linear: [2.0, -1.0, 0.5, -0.3, 0.0, 0.0],
        projection,
        vocab_size: if projection > 0 { m.config().logit_width() } else { 0 },
        ..Default::default()
    };
    let policy = SasOrderPolicy::new(policy_cfg, 3, &Device::Cpu).unwrap();
    assert_eq!(policy.varmap().all_vars().len(), 5 + usize::from(projection > 0));
    // A non-zero MLP too, so the hidden path is checked.
    let mut vm = policy.varmap().clone();
    vm.set_one("out.weight", Tensor::full(0.3f32, (1, 32), &Device::Cpu).unwrap()).unwrap();
    let rec = RecordingPolicy::new(&policy);
    let p = prompts();
    let batch = DecodeBatch::new(&p, 3, 0);
    let t = decode_with_policy(
        &m,
        &cfg(PositionRule::LowConfidence),
        &batch,
        RngKey::new(5),
        &Device::Cpu,
        &rec,
    )
    .unwrap();
    let steps = rec.into_steps();
    assert_eq!(steps.len(), 8, "one record per decoding step");
    let rollout = t.order_log_probs.unwrap();
    let replay = policy.replay_log_probs(&steps).unwrap();
    let (a, b) = (rollout.to_vec2::<f32>().unwrap(), replay.to_vec2::<f32>().unwrap());
    // A real choice was made (a step of 2 among 6 positions has log-prob < 0).
    assert!(a.iter().all(|r| r[0] < -0.1), "{a:?}");
    for (ra, rb) in a.iter().zip(&b) {
        let (sa, sb): (f32, f32) = (ra.iter().sum(), rb.iter().sum());
        assert!((sa - sb).abs() < 1e-4, "{sa} vs {sb}");
        for (x, y) in ra.iter().zip(rb) {
            assert!((x - y).abs() < 1e-5 && *x <= 0.0, "{x} vs {y}");
        }
    }
    // And from scratch by hand at step 0: Plackett–Luce over the recorded draw, in f64.
    let st = &steps[0];
    let s = policy
        .scores(&st.features, st.log_probs.as_ref(), &st.eligible)
        .unwrap()
        .to_vec2::<f32>()
        .unwrap();
    let pert = st.perturbed.to_vec2::<f32>().unwrap();
    let count = st.count.to_vec1::<u32>().unwrap();
    for r in 0..s.len() {
        let mut order: Vec<usize> = (0..s[r].len()).filter(|&j| s[r][j].is_finite()).collect();
        order.sort_by(|&i, &j| pert[r][j].total_cmp(&pert[r][i]));
        let mut lp = 0.0f64;
        for k in 0..count[r] as usize {
            let z: f64 = order[k..].iter().map(|&j| f64::from(s[r][j]).exp()).sum();
            lp += f64::from(s[r][order[k]]) - z.ln();
        }
        assert!((lp - f64::from(a[r][0])).abs() < 1e-4, "row {r}: {lp} vs {}", a[r][0]);
    }
    // The replay is differentiable in the policy's weights.
    let grads = replay.sum_all().unwrap().backward().unwrap();
    let vars = policy.varmap().all_vars();
    let moved = vars.iter().filter(|v| {
        grads
            .get(v.as_tensor())
            .is_some_and(|g| g.abs().unwrap().sum_all().unwrap().to_scalar::<f32>().unwrap() > 0.0)
    });
    assert_eq!(moved.count(), vars.len(), "every weight gets a gradient");
}

fn features(l: usize, eligible: usize) -> OrderFeatures {
    let dev = Device::Cpu;
    let ramp: Vec<f32> = (0..l).map(|j| j as f32 / l as f32).collect();
    let row = |v: Vec<f32>| Tensor::from_vec(v, (1, l), &dev).unwrap();
    let masked: Vec<f32> = (0..l).map(|j| f32::from(u8::from(j < eligible))).collect();
    OrderFeatures {
        top1_prob: row(ramp.iter().map(|x| 0.2 + 0.7 * x).collect()),
        margin: row(ramp.iter().map(|x| 0.5 * x).collect()),
        neg_entropy: row(ramp.iter().map(|x| -2.0 + x).collect()),
        rel_position: row(ramp.clone()),
        in_block: row(vec![1.0; l]),
        masked: row(masked),
        log_probs: Tensor::zeros((1, l, 5), DType::F32, &dev).unwrap(),
    }
}

#[test]
fn a_zero_weight_policy_orders_uniformly_at_random() {
    let dev = Device::Cpu;
    let policy = SasOrderPolicy::new(SasPolicyConfig::default(), 0, &dev).unwrap();
    let (l, eligible, draws) = (10, 8, 4000);
    let f = features(l, eligible);
    let mut first = vec![0usize; l];
    for d in 0..draws {
        let u = RngKey::new(9).step(d as u64).uniform((1, l), DType::F32, &dev).unwrap();
        let count = Tensor::new(&[2u32], &dev).unwrap();
        let out = policy.choose(&OrderInput { features: &f, count: &count, uniforms: &u }).unwrap();
        let commit = out.commit.to_vec2::<u8>().unwrap();
        assert_eq!(commit[0].iter().map(|&c| c as usize).sum::<usize>(), 2);
        assert!(commit[0][eligible..].iter().all(|&c| c == 0), "never an ineligible position");
        for (j, &c) in commit[0].iter().enumerate() {
            first[j] += c as usize;
        }
        // Uniform Plackett–Luce: two picks of 8 have log-prob −log 8 − log 7 whatever they are.
        let lp = out.log_prob.to_vec1::<f32>().unwrap()[0];
        assert!((f64::from(lp) + 8f64.ln() + 7f64.ln()).abs() < 1e-5, "{lp}");
    }
    // Each eligible position is picked with probability 2/8: 1000 of 4000, sd ≈ 27.4.
    for (j, &c) in first.iter().take(eligible).enumerate() {
        assert!((c as f64 - 1000.0).abs() < 5.0 * 27.4, "position {j}: {c} of {draws}");
    }
}

#[test]
fn frozen_at_the_top1_probability_the_policy_decodes_as_the_low_confidence_rule() {
    let m = model();
    let p = prompts();
    let batch = DecodeBatch::new(&p, 2, 0);
    let c = cfg(PositionRule::LowConfidence);
    let reference = decode(&m, &c, &batch, RngKey::new(1), &Device::Cpu).unwrap();
    let top1 =
        SasPolicyConfig { init_linear: [1e4, 0.0, 0.0, 0.0, 0.0, 0.0], ..Default::default() };
    let greedy_policy = SasOrderPolicy::new(top1, 0, &Device::Cpu).unwrap();
    // Sampling, with a temperature of 1e-4 on top: the Gumbel noise cannot reorder distinct
    // scores.
    let cold = SasPolicyConfig { temperature: 1e-4, ..top1 };
    let sampled = SasOrderPolicy::new(cold, 0, &Device::Cpu).unwrap();
    let policies: [(&dyn OrderPolicy, bool); 2] =
        [(&greedy_policy.greedy(), true), (&sampled, false)];
    for (policy, greedy) in policies {
        let t = decode_with_policy(&m, &c, &batch, RngKey::new(1), &Device::Cpu, policy).unwrap();
        assert_eq!(t.tokens.to_vec2::<u32>().unwrap(), reference.tokens.to_vec2::<u32>().unwrap());
        assert_eq!(
            t.commit_step.to_vec2::<i64>().unwrap(),
            reference.commit_step.to_vec2::<i64>().unwrap(),
            "greedy {greedy}: the same position at every step"
        );
    }
}

#[test]
fn a_saved_policy_loads_with_equal_scores_and_bad_settings_are_named() {
    let dev = Device::Cpu;
    let dir = tempfile::tempdir().unwrap();
    let cfg = SasPolicyConfig {
        hidden: 8,
        init_linear: [1.0, 2.0, 0.0, -1.0, 0.0, 0.0],
        ..Default::default()
    };
    let policy = SasOrderPolicy::new(cfg, 4, &dev).unwrap();
    policy.save(dir.path()).unwrap();
    let back = SasOrderPolicy::load(dir.path(), &dev).unwrap();
    let f = features(6, 5);
    let x = super::policy::stack_features(&f).unwrap();
    let a = policy.raw_scores(&x, None).unwrap().to_vec2::<f32>().unwrap();
    let b = back.raw_scores(&x, None).unwrap().to_vec2::<f32>().unwrap();
    assert_eq!(a, b);
    assert_eq!(back.config(), &cfg);
    let bad = SasPolicyConfig { temperature: 0.0, ..cfg };
    let e = SasOrderPolicy::new(bad, 0, &dev).err().unwrap().to_string();
    assert!(e.contains("policy.temperature"), "{e}");
    let e = SasOrderPolicy::load(&dir.path().join("nope"), &dev).err().unwrap().to_string();
    assert!(e.contains("sas_policy.json"), "{e}");
}

/// Mean of `key` over the last `n` iterations of a run's metrics.
fn tail_mean(run: &std::path::Path, key: &str, n: usize) -> f64 {
    let rows = drift_core::metrics::read_metrics(&run.join("metrics.jsonl")).unwrap();
    let v: Vec<f64> = rows.iter().filter_map(|r| r.get(key).and_then(|x| x.as_f64())).collect();
    let n = n.min(v.len());
    v[v.len() - n..].iter().sum::<f64>() / n as f64
}

#[test]
fn the_dense_self_aware_reward_is_learned_above_its_null_and_unlearned_when_flipped() {
    use super::config::SasConfig;
    let dir = tempfile::tempdir().unwrap();
    let base = std::path::PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/checkpoints/dllm-sudoku4-v1"
    ));
    // The reward is the dense term alone, the mean log-prob of the committed cells under the
    // shipped Sudoku model: an order that commits the cells the clues determine first raises
    // it, the uniform-random start does not.
    let run = |name: &str, weight: f64, shuffle: bool| {
        let cfg = SasConfig {
            base: base.clone(),
            run: drift_core::train::RunSettings {
                steps: 8,
                checkpoint_every: 8,
                ..SasConfig::default().run
            },
            puzzles_per_step: 2,
            group_size: 8,
            // From the uniform order, which the dense term can improve on.
            policy: SasPolicyConfig::default(),
            task_weight: 0.0,
            dense_weight: weight,
            eval_items: 2,
            shuffle_rewards: shuffle,
            optim: drift_core::train::OptimConfig {
                adamw: drift_core::train::AdamWConfig {
                    lr: 0.1,
                    ..SasConfig::default().optim.adamw
                },
                ..SasConfig::default().optim
            },
            ..SasConfig::default()
        };
        let out = dir.path().join(name);
        super::train_sas(&cfg, "", &out, &Device::Cpu).unwrap();
        (tail_mean(&out, "reward/dense", 3), tail_mean(&out, "reward/dense", 8))
    };
    let (real, real_all) = run("real", 1.0, false);
    let (null, _) = run("null", 1.0, true);
    let (flipped, _) = run("flipped", -1.0, false);
    eprintln!("dense: real {real} (all {real_all}), null {null}, flipped {flipped}");
    assert!(real > null + 0.02, "real {real} vs null {null}");
    assert!(flipped < null - 0.02, "flipped {flipped} vs null {null}");
}

#[test]
fn a_schedule_without_total_decays_over_the_runs_optimizer_steps() {
    use drift_core::train::LrSchedule;
    let mut c = super::config::SasConfig::default();
    c.run.steps = 6;
    c.inner_iterations = 2;
    c.optim.schedule = LrSchedule::Linear { warmup: 1, total: 0 };
    c.validate().unwrap();
    assert_eq!(c.updates(), 12);
    assert_eq!(c.optim.over_run(c.updates()).schedule, LrSchedule::Linear { warmup: 1, total: 12 });
}
