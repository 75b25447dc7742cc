//! Tests of the decode loop over a hand-computable stand-in model.

use std::cell::RefCell;

use candle_core::{DType, Device, Tensor};
use drift_core::rng::RngKey;

use super::*;
use crate::MaskPredictor;

const V: usize = 8;
const MASK: u32 = 7;

/// The "successor" stand-in: vocabulary 0..=6 plus mask 7 (logit −1e4). At position `i`
/// (counted from the row's first real token when an attention mask is given), token
/// `prior_tok(i)` gets `+prior_h(i)`, and when the left neighbour is a real token `t`, token
/// `(t + 1) mod 7` gets `+2`; every other logit is 0.
struct Successor;

fn prior(i: usize) -> (usize, f32) {
    const TABLE: [(usize, f32); 8] =
        [(0, 0.0), (0, 0.0), (3, 0.5), (4, 1.0), (5, 1.5), (0, 2.5), (2, 0.5), (0, 1.2)];
    TABLE.get(i).copied().unwrap_or(((5 * i) % 7, 0.3 * (i % 5) as f32))
}

impl MaskPredictor for Successor {
    fn logits(&self, ids: &Tensor, mask: Option<&Tensor>) -> candle_core::Result<Tensor> {
        let ids = ids.to_vec2::<u32>()?;
        let att = match mask {
            Some(m) => m.to_dtype(DType::U8)?.to_vec2::<u8>()?,
            None => ids.iter().map(|r| vec![1; r.len()]).collect(),
        };
        let (b, t) = (ids.len(), ids[0].len());
        let mut out = vec![0f32; b * t * V];
        for r in 0..b {
            let pads = att[r].iter().take_while(|&&a| a == 0).count();
            for i in 0..t {
                let o = &mut out[(r * t + i) * V..(r * t + i + 1) * V];
                o[MASK as usize] = -1e4;
                let (tok, h) = prior(i.saturating_sub(pads));
                o[tok] += h;
                if i > pads && ids[r][i - 1] != MASK {
                    o[(ids[r][i - 1] as usize + 1) % 7] += 2.0;
                }
            }
        }
        Tensor::from_vec(out, (b, t, V), &Device::Cpu)
    }
    fn mask_id(&self) -> u32 {
        MASK
    }
    fn vocab_size(&self) -> usize {
        V
    }
}

/// Records every call's inputs.
struct Counting<M> {
    inner: M,
    calls: RefCell<Vec<(Vec<Vec<u32>>, bool)>>,
}

impl<M> Counting<M> {
    fn new(inner: M) -> Self {
        Self { inner, calls: RefCell::new(Vec::new()) }
    }
}

impl<M: MaskPredictor> MaskPredictor for Counting<M> {
    fn logits(&self, ids: &Tensor, mask: Option<&Tensor>) -> candle_core::Result<Tensor> {
        self.calls.borrow_mut().push((ids.to_vec2::<u32>()?, mask.is_some()));
        self.inner.logits(ids, mask)
    }
    fn mask_id(&self) -> u32 {
        self.inner.mask_id()
    }
    fn vocab_size(&self) -> usize {
        self.inner.vocab_size()
    }
}

fn cfg(gen: usize, block: usize, steps: usize) -> DecodeConfig {
    DecodeConfig { gen_length: gen, block_length: block, steps, ..DecodeConfig::default() }
}

fn run(cfg: &DecodeConfig, prompts: &[Vec<u32>], g: usize) -> Trajectory {
    decode(&Successor, cfg, &DecodeBatch::new(prompts, g, 0), RngKey::new(1), &Device::Cpu)
        .expect("decode")
}

fn p(a: f64, others: &[f64]) -> f64 {
    a.exp() / (a.exp() + others.iter().map(|x| x.exp()).sum::<f64>())
}

/// Hand-worked: prompt [1, 2], 6 tokens, blocks of 3, 4 steps (2 per block, quota [2, 1]),
/// greedy, low-confidence. Absolute positions 2..=7 are generated.
///
/// Step 0 (block 2..=4, all masked). Pos 2: left = 2 → token 3 gets +2, prior (3, 0.5) → the
/// same token, logit 2.5 against six zeros: p = e^2.5 / (e^2.5 + 6) = 0.670. Pos 3: left
/// masked, prior (4, 1.0): p = e / (e + 6) = 0.312. Pos 4: prior (5, 1.5): p = e^1.5 /
/// (e^1.5 + 6) = 0.428. Top 2: pos 2 ← 3, pos 4 ← 5.
/// Step 1: pos 3, left = 3 → token 4 +2, prior (4, 1.0) → logit 3: p = e^3 / (e^3 + 6) =
/// 0.770, pos 3 ← 4.
/// Step 2 (block 5..=7). Pos 5: left = 5 → token 6 +2, prior (0, 2.5): argmax 0, p = e^2.5 /
/// (e^2.5 + e^2 + 5) = 0.496. Pos 6: prior (2, 0.5): p = e^.5 / (e^.5 + 6) = 0.216. Pos 7:
/// prior (0, 1.2): p = e^1.2 / (e^1.2 + 6) = 0.356. Top 2: pos 5 ← 0, pos 7 ← 0.
/// Step 3: pos 6, left = 0 → token 1 +2, prior (2, 0.5): argmax 1, p = e^2 / (e^2 + e^.5 + 5)
/// = 0.526, pos 6 ← 1.
/// Tokens [1, 2, 3, 4, 5, 0, 1, 0]; completion commit steps [0, 1, 0, 2, 3, 2].
#[test]
fn hand_worked_low_confidence() -> Result<()> {
    let t = run(&cfg(6, 3, 4), &[vec![1, 2]], 1);
    assert_eq!(t.tokens.to_vec2::<u32>()?, vec![vec![1, 2, 3, 4, 5, 0, 1, 0]]);
    assert_eq!(t.commit_step.to_vec2::<i64>()?, vec![vec![-1, -1, 0, 1, 0, 2, 3, 2]]);
    assert_eq!(t.evaluations, 4);
    assert_eq!(t.prompt_len, 2);
    let want = [
        0.0,
        0.0,
        p(2.5, &[0.0; 6]),
        p(3.0, &[0.0; 6]),
        p(1.5, &[0.0; 6]),
        p(2.5, &[2.0, 0., 0., 0., 0., 0.]),
        p(2.0, &[0.5, 0., 0., 0., 0., 0.]),
        p(1.2, &[0.0; 6]),
    ];
    let got = t.token_log_prob.to_vec2::<f32>()?;
    for (j, w) in want.iter().enumerate() {
        let w = if j < 2 { 0.0 } else { w.ln() };
        assert!((f64::from(got[0][j]) - w).abs() < 1e-5, "pos {j}: {} vs {w}", got[0][j]);
    }
    assert_eq!(t.completion_mask.to_vec2::<f32>()?, vec![vec![0., 0., 1., 1., 1., 1., 1., 1.]]);
    assert!(t.order_log_probs.is_none());
    let path = t.path_log_prob()?.to_vec1::<f32>()?[0];
    let sum: f32 = got[0].iter().sum();
    assert!((path - sum).abs() < 1e-5);
    Ok(())
}

/// Same example with stop token 0: the completion mask ends at the first 0 (position 5). With
/// early stop, the row freezes after step 2 (pos 5 holds 0 and 2..=4 are committed): pos 6
/// is never decoded and gets the stop token.
#[test]
fn stop_tokens_and_early_stop() -> Result<()> {
    let mut c = cfg(6, 3, 4);
    c.stop_tokens = vec![0];
    let t = run(&c, &[vec![1, 2]], 1);
    assert_eq!(t.tokens.to_vec2::<u32>()?, vec![vec![1, 2, 3, 4, 5, 0, 1, 0]]);
    assert_eq!(t.completion_mask.to_vec2::<f32>()?, vec![vec![0., 0., 1., 1., 1., 1., 0., 0.]]);
    assert_eq!(t.evaluations, 4);
    c.early_stop = true;
    let t = run(&c, &[vec![1, 2]], 2);
    assert_eq!(t.evaluations, 3);
    assert_eq!(t.tokens.to_vec2::<u32>()?, vec![vec![1, 2, 3, 4, 5, 0, 0, 0]; 2]);
    let n = NEVER_COMMITTED;
    assert_eq!(t.commit_step.to_vec2::<i64>()?, vec![vec![-1, -1, 0, 1, 0, 2, n, 2]; 2]);
    assert_eq!(t.completion_mask.to_vec2::<f32>()?[1], vec![0., 0., 1., 1., 1., 1., 0., 0.]);
    assert_eq!(t.token_log_prob.to_vec2::<f32>()?[0][6], 0.0);
    // A stop token that is never committed changes nothing.
    c.stop_tokens = vec![6];
    let t = run(&c, &[vec![1, 2]], 1);
    assert_eq!(t.evaluations, 4);
    assert_eq!(t.completion_mask.sum_all()?.to_scalar::<f32>()?, 6.0);
    Ok(())
}

/// [`Successor`] whose mask logit is the largest everywhere (`+9` instead of `−1e4`).
struct LovesMask;

impl MaskPredictor for LovesMask {
    fn logits(&self, ids: &Tensor, mask: Option<&Tensor>) -> candle_core::Result<Tensor> {
        let bump: Vec<f32> =
            (0..V).map(|v| if v == MASK as usize { 1e4 + 9.0 } else { 0.0 }).collect();
        Successor.logits(ids, mask)?.broadcast_add(&Tensor::from_vec(bump, V, &Device::Cpu)?)
    }
    fn mask_id(&self) -> u32 {
        MASK
    }
    fn vocab_size(&self) -> usize {
        V
    }
}

/// The mask id is never proposed, even when the model puts almost all its mass on it, so every
/// decoded position holds the token the reward sees; the recorded `log p(x0)` is still that of
/// the model's own distribution (mask included), as LLaDA's `generate` computes it.
#[test]
fn the_mask_id_is_never_committed_and_scored_tokens_are_the_decoded_ones() -> Result<()> {
    for temperature in [0.0, 1.0] {
        let mut c = cfg(6, 3, 6);
        c.stop_tokens = vec![0];
        c.proposal.temperature = temperature;
        let t = decode(
            &LovesMask,
            &c,
            &DecodeBatch::new(&[vec![1, 2]], 4, 0),
            RngKey::new(3),
            &Device::Cpu,
        )?;
        let tokens = t.tokens.to_vec2::<u32>()?;
        let steps = t.commit_step.to_vec2::<i64>()?;
        let logp = t.token_log_prob.to_vec2::<f32>()?;
        for (r, row) in tokens.iter().enumerate() {
            assert!(!row.contains(&MASK), "T={temperature}, row {r}: {row:?}");
            for j in 2..row.len() {
                assert!(steps[r][j] >= 0, "one step per token: every position is decoded");
                // The mask (logit 9; every other logit ≤ 4.5) takes most of the mass:
                // log p(x0) < 4.5 − 9 in the model's own distribution.
                assert!(logp[r][j] < -4.5, "T={temperature}: log p = {}", logp[r][j]);
            }
        }
    }
    Ok(())
}

#[test]
fn quotas_match_llada() -> Result<()> {
    // LLaDA's evaluation setting: 8 blocks of 32, 16 steps each, 2 tokens per step.
    let c = cfg(256, 32, 128);
    assert_eq!((c.blocks(), c.steps_per_block()), (8, 16));
    assert_eq!(num_transfer_tokens(32, 16), vec![2; 16]);
    // get_num_transfer_tokens: base = n // steps, the first n % steps steps get one more.
    assert_eq!(num_transfer_tokens(10, 4), vec![3, 3, 2, 2]);
    assert_eq!(num_transfer_tokens(7, 3), vec![3, 2, 2]);
    assert_eq!(num_transfer_tokens(5, 3), vec![2, 2, 1]);
    assert_eq!(num_transfer_tokens(3, 5), vec![1, 1, 1, 0, 0]);
    // The decode loop commits exactly that many per step.
    for (gen, block, steps) in [(10, 5, 6), (12, 4, 6), (7, 7, 3), (6, 3, 10)] {
        let c = cfg(gen, block, steps);
        let t = run(&c, &[vec![1], vec![2]], 2);
        let spb = steps / (gen / block);
        assert_eq!(t.evaluations, steps);
        let want: Vec<usize> =
            (0..gen / block).flat_map(|_| num_transfer_tokens(block, spb)).collect();
        for row in t.completion(&t.commit_step)?.to_vec2::<i64>()? {
            let mut hist = vec![0; steps];
            for s in row {
                hist[s as usize] += 1;
            }
            assert_eq!(hist, want, "gen {gen} block {block} steps {steps}");
        }
    }
    Ok(())
}

/// Dream's capped threshold. τ = 1: only each step's first pick passes, the rest of the budget
/// is carried, and the block's last step keeps adding a step: one commit per evaluation, 4 per
/// block of 4 whatever the 2 steps asked. τ = 0: every pick of the budget (4/2 = 2) passes,
/// so each block takes exactly its 2 steps.
#[test]
fn dream_threshold_extremes() -> Result<()> {
    let mut c = cfg(8, 4, 4);
    c.position = PositionRule::DreamThreshold { tau: 1.0 };
    let t = run(&c, &[vec![1, 2], vec![3, 4]], 2);
    assert_eq!(t.evaluations, 8);
    for row in t.completion(&t.commit_step)?.to_vec2::<i64>()? {
        let mut s = row.clone();
        s.sort_unstable();
        assert_eq!(s, (0..8).collect::<Vec<i64>>());
    }
    c.position = PositionRule::DreamThreshold { tau: 0.0 };
    let t = run(&c, &[vec![1, 2], vec![3, 4]], 2);
    assert_eq!(t.evaluations, 4);
    for row in t.completion(&t.commit_step)?.to_vec2::<i64>()? {
        let mut s = row.clone();
        s.sort_unstable();
        assert_eq!(s, vec![0, 0, 1, 1, 2, 2, 3, 3]);
    }
    // Steps per block must divide the block (an equal budget per step).
    let mut bad = cfg(8, 4, 6);
    bad.position = PositionRule::DreamThreshold { tau: 0.5 };
    assert!(bad.validate(16, 15).unwrap_err().to_string().contains("steps"));
    Ok(())
}

#[test]
fn threshold_extremes() -> Result<()> {
    // τ = 1: nothing reaches p = 1, so only the top-1 is committed, one per step.
    let mut c = cfg(8, 4, 1);
    c.position = PositionRule::Threshold { tau: 1.0 };
    let t = run(&c, &[vec![1, 2], vec![3, 4]], 2);
    assert_eq!(t.evaluations, 8);
    for row in t.completion(&t.commit_step)?.to_vec2::<i64>()? {
        let mut s = row.clone();
        s.sort_unstable();
        assert_eq!(s, (0..8).collect::<Vec<i64>>());
    }
    // τ = 0: every masked position passes, one step per block.
    c.position = PositionRule::Threshold { tau: 0.0 };
    let t = run(&c, &[vec![1, 2], vec![3, 4]], 2);
    assert_eq!(t.evaluations, 2);
    for row in t.completion(&t.commit_step)?.to_vec2::<i64>()? {
        assert_eq!(row, vec![0, 0, 0, 0, 1, 1, 1, 1]);
    }
    // The hand example (see `hand_worked_low_confidence`) under τ = 0.6.
    c = cfg(6, 3, 4);
    c.position = PositionRule::Threshold { tau: 0.6 };
    let t = run(&c, &[vec![1, 2]], 1);
    // Step 0: pos 2 (0.670, the top; 0.312 and 0.428 are below τ). Step 1: pos 3 has left = 3
    // → 0.770 (top); pos 4 0.428. Step 2: pos 4, left = 4 → token 5 +2 and prior (5, 1.5) →
    // logit 3.5. Step 3 (block 2): pos 5 0.496 top; pos 6 0.216, pos 7 0.356, all below τ.
    // Step 4: pos 6, left 0 → 0.526 top, pos 7 0.356. Step 5: pos 7, left 1 → token 2 +2
    // beats prior (0, 1.2). One token per step: 6 evaluations.
    assert_eq!(t.commit_step.to_vec2::<i64>()?, vec![vec![-1, -1, 0, 1, 2, 3, 4, 5]]);
    assert_eq!(t.tokens.to_vec2::<u32>()?, vec![vec![1, 2, 3, 4, 5, 0, 1, 2]]);
    assert_eq!(t.evaluations, 6);
    Ok(())
}

/// Random configurations: every completion position is committed exactly once (masked in the
/// input of its step, unmasked in the next and never changed after), prompt columns never
/// change, and `evaluations` equals the calls a counting wrapper saw.
#[test]
fn property_commit_once_prompt_fixed_evaluations_counted() -> Result<()> {
    let dev = Device::Cpu;
    for case in 0..60u64 {
        let u = RngKey::new(case).stream("test/config").uniform_f64_vec(17);
        let pick = |i: usize, n: usize| ((u[i] * n as f64) as usize).min(n - 1);
        let block = [1, 2, 3, 4][pick(0, 4)];
        let blocks = 1 + pick(1, 3);
        let gen = block * blocks;
        let steps = blocks * (1 + pick(2, block + 2));
        let position = match pick(3, 6) {
            0 => PositionRule::LowConfidence,
            1 => PositionRule::Random,
            2 => PositionRule::Margin,
            3 => PositionRule::Entropy,
            4 => PositionRule::Origin { eps: 1e-3 },
            _ => PositionRule::Threshold { tau: u[4] },
        };
        let c = DecodeConfig {
            gen_length: gen,
            block_length: block,
            steps,
            proposal: ProposalConfig {
                temperature: [0.0, 0.7, 1.0][pick(5, 3)],
                top_k: [None, Some(2)][pick(6, 2)],
                top_p: [None, Some(0.8)][pick(7, 2)],
            },
            position,
            schedule: [TransferSchedule::Llada, TransferSchedule::Dream { eps: 1e-3 }][pick(16, 2)],
            kv_cache: KvCacheMode::None,
            alg_temp: [0.0, 0.5][pick(8, 2)],
            guidance: None,
            cfg_scale: [None, Some(0.0), Some(1.5)][pick(9, 3)],
            stop_tokens: [vec![], vec![0], vec![0, 4]][pick(10, 3)].clone(),
            early_stop: pick(11, 2) == 1,
        };
        let use_policy = position.uses_quota() && pick(12, 3) == 0;
        let prompts: Vec<Vec<u32>> =
            [vec![1, 2], vec![3], vec![5, 6, 0]][..1 + pick(13, 3)].to_vec();
        let g = 1 + pick(14, 3);
        let padding = [Padding::Masked, Padding::Visible][pick(15, 2)];
        let batch = DecodeBatch {
            prompts: &prompts,
            group_size: g,
            pad_id: 0,
            padding,
            first_row: 5,
            greedy_per_group: 0,
        };
        let model = Counting::new(Successor);
        let key = RngKey::new(100 + case).step(3);
        let policy =
            LinearOrderPolicy { weights: [1.0, 0.5, 0.2, -1.0, 0.0, 0.0], temperature: 0.5 };
        let t = if use_policy {
            decode_with_policy(&model, &c, &batch, key, &dev, &policy)?
        } else {
            decode(&model, &c, &batch, key, &dev)?
        };
        let calls = model.calls.borrow();
        let ctx = format!("case {case}: {c:?} policy {use_policy}");
        assert_eq!(t.evaluations, calls.len(), "{ctx}");
        let b = prompts.len() * g;
        assert_eq!(t.rows, (5..5 + b as u64).collect::<Vec<_>>());
        let pl = t.prompt_len;
        let tokens = t.tokens.to_vec2::<u32>()?;
        let steps_rec = t.commit_step.to_vec2::<i64>()?;
        let cmask = t.completion_mask.to_vec2::<f32>()?;
        for (r, row) in tokens.iter().enumerate() {
            let prompt = &prompts[r / g];
            let pads = pl - prompt.len();
            assert_eq!(&row[pads..pl], &prompt[..], "{ctx}");
            assert!(row[..pads].iter().all(|&x| x == 0));
            for (s, (input, masked)) in calls.iter().enumerate() {
                // Prompt columns of the conditional rows never change.
                assert_eq!(&input[r][..pl], &row[..pl], "{ctx}");
                assert_eq!(
                    *masked,
                    padding == Padding::Masked && prompts.iter().any(|q| q.len() != pl)
                );
                if c.cfg_scale.is_some() {
                    assert_eq!(input.len(), 2 * b);
                    assert!(input[b + r][..pl].iter().all(|&x| x == MASK), "{ctx}");
                    assert_eq!(&input[b + r][pl..], &input[r][pl..]);
                } else {
                    assert_eq!(input.len(), b);
                }
                let _ = s;
            }
            for j in pl..row.len() {
                assert_ne!(row[j], MASK, "{ctx}");
                let step = steps_rec[r][j];
                // The column's value in the input of every call.
                let seen: Vec<u32> = calls.iter().map(|(i, _)| i[r][j]).collect();
                if step == NEVER_COMMITTED {
                    assert!(c.early_stop, "{ctx}");
                    assert!(seen.iter().all(|&x| x == MASK));
                    assert_eq!(cmask[r][j], 0.0);
                    continue;
                }
                let s = step as usize;
                assert!(s < calls.len(), "{ctx}");
                assert!(seen[..=s].iter().all(|&x| x == MASK), "{ctx} row {r} col {j}");
                assert!(seen[s + 1..].iter().all(|&x| x == row[j]), "{ctx} row {r} col {j}");
            }
            // Completion mask: up to and including the first stop token.
            let first = (pl..row.len()).find(|&j| c.stop_tokens.contains(&row[j]));
            for (j, &m) in cmask[r].iter().enumerate().skip(pl) {
                let want = first.is_none_or(|f| j <= f);
                assert_eq!(m, if want { 1.0 } else { 0.0 }, "{ctx}");
            }
        }
        if use_policy {
            let lp = t.order_log_probs.as_ref().expect("policy log-probs");
            assert_eq!(lp.dims(), &[b, t.evaluations]);
            assert!(lp.to_vec2::<f32>()?.iter().flatten().all(|x| x.is_finite() && *x <= 1e-6));
        }
        // Reproducible from the key.
        let again = if use_policy {
            decode_with_policy(&Successor, &c, &batch, key, &dev, &policy)?
        } else {
            decode(&Successor, &c, &batch, key, &dev)?
        };
        assert_eq!(again.tokens.to_vec2::<u32>()?, tokens, "{ctx}");
        assert_eq!(again.commit_step.to_vec2::<i64>()?, steps_rec);
        assert_eq!(again.token_log_prob.to_vec2::<f32>()?, t.token_log_prob.to_vec2::<f32>()?);
    }
    Ok(())
}

#[test]
fn seeds_change_sampled_rollouts_and_rows_do_not_depend_on_the_batch() -> Result<()> {
    let dev = Device::Cpu;
    let mut c = cfg(8, 8, 8);
    c.proposal.temperature = 1.0;
    c.position = PositionRule::Random;
    let prompts = vec![vec![1, 2], vec![3, 4]];
    let batch = DecodeBatch::new(&prompts, 3, 0);
    let a = decode(&Successor, &c, &batch, RngKey::new(1), &dev)?;
    let b = decode(&Successor, &c, &batch, RngKey::new(2), &dev)?;
    assert_ne!(a.tokens.to_vec2::<u32>()?, b.tokens.to_vec2::<u32>()?);
    assert_ne!(a.commit_step.to_vec2::<i64>()?, b.commit_step.to_vec2::<i64>()?);
    // Samples of one prompt differ from each other.
    let rows = a.tokens.to_vec2::<u32>()?;
    assert!(rows[0] != rows[1] || rows[1] != rows[2]);
    // The second prompt alone, numbered from row 3, decodes as inside the batch.
    let tail = vec![vec![3, 4]];
    let solo = DecodeBatch { first_row: 3, ..DecodeBatch::new(&tail, 3, 0) };
    let s = decode(&Successor, &c, &solo, RngKey::new(1), &dev)?;
    assert_eq!(s.tokens.to_vec2::<u32>()?, rows[3..].to_vec());
    Ok(())
}

#[test]
fn greedy_rows_decode_as_at_temperature_zero_and_the_other_rows_as_without_them() -> Result<()> {
    let dev = Device::Cpu;
    let mut c = cfg(8, 8, 8);
    c.proposal.temperature = 1.0;
    // Random positions: the greedy rows must also keep their own position noise.
    c.position = PositionRule::Random;
    let prompts = vec![vec![1, 2], vec![3, 4]];
    let plain = DecodeBatch::new(&prompts, 3, 0);
    let mixed = DecodeBatch { greedy_per_group: 1, ..DecodeBatch::new(&prompts, 3, 0) };
    let key = RngKey::new(7);
    let sampled = decode(&Successor, &c, &plain, key, &dev)?.tokens.to_vec2::<u32>()?;
    let with_greedy = decode(&Successor, &c, &mixed, key, &dev)?.tokens.to_vec2::<u32>()?;
    let mut zero = c.clone();
    zero.proposal.temperature = 0.0;
    let greedy = decode(&Successor, &zero, &plain, key, &dev)?.tokens.to_vec2::<u32>()?;
    for r in 0..6 {
        let want = if r % 3 == 2 { &greedy[r] } else { &sampled[r] };
        assert_eq!(&with_greedy[r], want, "row {r}");
    }
    // The greedy rows are not what sampling gave them (else this shows nothing).
    assert!(sampled[2] != greedy[2] && sampled[5] != greedy[5]);
    let bad = DecodeBatch { greedy_per_group: 4, ..DecodeBatch::new(&prompts, 3, 0) };
    let bad = decode(&Successor, &c, &bad, key, &dev);
    assert!(matches!(bad, Err(DecodeError::Input { name: "greedy_per_group", .. })));
    Ok(())
}

/// Left padding with an attention mask: the short prompt's row decodes as it does alone
/// (the stand-in counts positions from the first real token, as a relative-position model).
#[test]
fn ragged_prompts_left_padded() -> Result<()> {
    let c = cfg(6, 3, 4);
    let prompts = vec![vec![5, 6, 1, 2], vec![1, 2]];
    let t = run(&c, &prompts, 1);
    assert_eq!(t.prompt_len, 4);
    let rows = t.tokens.to_vec2::<u32>()?;
    assert_eq!(rows[1], vec![0, 0, 1, 2, 3, 4, 5, 0, 1, 0]);
    assert_eq!(t.attention_mask.to_vec2::<u8>()?[1], vec![0, 0, 1, 1, 1, 1, 1, 1, 1, 1]);
    assert_eq!(t.commit_step.to_vec2::<i64>()?[1], vec![-1, -1, -1, -1, 0, 1, 0, 2, 3, 2]);
    Ok(())
}

#[test]
fn cfg_zero_equals_no_cfg_and_guidance_formula() -> Result<()> {
    let dev = Device::Cpu;
    let c0 = DecodeConfig {
        proposal: ProposalConfig { temperature: 1.0, ..Default::default() },
        ..cfg(6, 3, 6)
    };
    let cw = DecodeConfig { cfg_scale: Some(0.0), ..c0.clone() };
    let prompts = vec![vec![1, 2], vec![4]];
    let batch = DecodeBatch::new(&prompts, 2, 0);
    let a = decode(&Successor, &c0, &batch, RngKey::new(4), &dev)?;
    let counted = Counting::new(Successor);
    let b = decode(&counted, &cw, &batch, RngKey::new(4), &dev)?;
    assert_eq!(a.tokens.to_vec2::<u32>()?, b.tokens.to_vec2::<u32>()?);
    assert_eq!(a.commit_step.to_vec2::<i64>()?, b.commit_step.to_vec2::<i64>()?);
    assert_eq!(a.token_log_prob.to_vec2::<f32>()?, b.token_log_prob.to_vec2::<f32>()?);
    assert_eq!(a.evaluations, b.evaluations);
    assert_eq!(counted.calls.borrow()[0].0.len(), 8);
    // u + (w + 1)(c − u) by hand.
    let cond = Tensor::new(&[1f32, -2., 0.5], &dev)?;
    let uncond = Tensor::new(&[0f32, 1., 0.5], &dev)?;
    let g = guide(&cond, &uncond, 2.0)?.to_vec1::<f32>()?;
    assert_eq!(g, vec![3.0, -8.0, 0.5]); // 0 + 3·1, 1 + 3·(−3), 0.5
                                         // Guidance changes the hand example: the first completion position loses its successor
                                         // boost unconditionally (u: logit 0.5 on token 3, c: 2.5), so w = 3 sharpens it:
                                         // guided logit 2.5 + 3 · 2 = 8.5 → p = e^8.5 / (e^8.5 + 6).
    let t = run(&DecodeConfig { cfg_scale: Some(3.0), ..cfg(6, 3, 4) }, &[vec![1, 2]], 1);
    let lp = t.token_log_prob.to_vec2::<f32>()?[0][2];
    assert!((f64::from(lp) - p(8.5, &[0.0; 6]).ln()).abs() < 1e-5, "{lp}");
    // The one convention, diffusers' `u + g(c − u)`: guidance 4 is LLaDA's cfg_scale 3, and
    // guidance 1 is the unguided model.
    let g = run(&DecodeConfig { guidance: Some(4.0), ..cfg(6, 3, 4) }, &[vec![1, 2]], 1);
    assert_eq!(g.token_log_prob.to_vec2::<f32>()?, t.token_log_prob.to_vec2::<f32>()?);
    assert_eq!(g.tokens.to_vec2::<u32>()?, t.tokens.to_vec2::<u32>()?);
    let one = decode(
        &Successor,
        &DecodeConfig { guidance: Some(1.0), ..c0.clone() },
        &batch,
        RngKey::new(4),
        &dev,
    )?;
    assert_eq!(one.token_log_prob.to_vec2::<f32>()?, a.token_log_prob.to_vec2::<f32>()?);
    let both = DecodeConfig { guidance: Some(2.0), cfg_scale: Some(1.0), ..c0.clone() };
    let err = both.validate(16, 15).unwrap_err().to_string();
    assert!(err.contains("guidance") && err.contains("cfg_scale"), "{err}");
    let low = DecodeConfig { guidance: Some(0.5), ..c0 };
    assert!(low.validate(16, 15).unwrap_err().to_string().contains("guidance"));
    Ok(())
}

#[test]
fn order_policy_left_to_right_and_contract() -> Result<()> {
    let dev = Device::Cpu;
    // A policy that strongly prefers the leftmost masked position decodes left to right.
    let policy = LinearOrderPolicy { weights: [0.0, 0.0, 0.0, -1.0, 0.0, 0.0], temperature: 0.001 };
    let prompts = vec![vec![1, 2]];
    let c = cfg(6, 6, 6);
    let batch = DecodeBatch::new(&prompts, 2, 0);
    let t = decode_with_policy(&Successor, &c, &batch, RngKey::new(0), &dev, &policy)?;
    assert_eq!(t.commit_step.to_vec2::<i64>()?, vec![vec![-1, -1, 0, 1, 2, 3, 4, 5]; 2]);
    // Left to right, the successor chain: 2 → 3 → 4 → 5 → 6 → 0 → 1 (boosted with the prior
    // wherever they disagree by less than 2).
    assert_eq!(t.tokens.to_vec2::<u32>()?[0][2..5], [3, 4, 5]);
    let lp = t.order_log_probs.expect("policy").to_vec2::<f32>()?;
    assert!(lp.iter().flatten().all(|x| x.abs() < 1e-3), "{lp:?}");
    // A policy that breaks the contract is reported.
    struct Greedy;
    impl OrderPolicy for Greedy {
        fn choose(&self, input: &OrderInput<'_>) -> Result<OrderDecision> {
            let commit = input.features.eligible()?;
            Ok(OrderDecision { commit, log_prob: input.count.to_dtype(DType::F32)?.zeros_like()? })
        }
    }
    let err = decode_with_policy(&Successor, &cfg(6, 3, 6), &batch, RngKey::new(0), &dev, &Greedy);
    assert!(matches!(err, Err(DecodeError::Policy { .. })), "{err:?}");
    // Policies only replace quota rules.
    let th = DecodeConfig { position: PositionRule::Threshold { tau: 0.9 }, ..c.clone() };
    assert!(decode_with_policy(&Successor, &th, &batch, RngKey::new(0), &dev, &policy).is_err());
    Ok(())
}

#[test]
fn origin_reveals_everything_by_the_last_step_and_inputs_are_checked() -> Result<()> {
    let dev = Device::Cpu;
    let c = DecodeConfig { position: PositionRule::Origin { eps: 1e-3 }, ..cfg(8, 4, 4) };
    let t = run(&c, &[vec![1]], 4);
    assert_eq!(t.evaluations, 4);
    for row in t.completion(&t.commit_step)?.to_vec2::<i64>()? {
        assert!(row[..4].iter().all(|&s| s < 2) && row[4..].iter().all(|&s| (2..4).contains(&s)));
    }
    let prompts = vec![vec![1, MASK]];
    let bad = decode(&Successor, &c, &DecodeBatch::new(&prompts, 1, 0), RngKey::new(0), &dev);
    assert!(matches!(bad, Err(DecodeError::Input { name: "prompts", .. })));
    let ok = vec![vec![1]];
    let bad = decode(&Successor, &c, &DecodeBatch::new(&ok, 0, 0), RngKey::new(0), &dev);
    assert!(matches!(bad, Err(DecodeError::Input { name: "group_size", .. })));
    let bad = decode(&Successor, &c, &DecodeBatch::new(&ok, 1, MASK), RngKey::new(0), &dev);
    assert!(matches!(bad, Err(DecodeError::Input { name: "pad_id", .. })));
    let bad = decode(&Successor, &cfg(6, 4, 4), &DecodeBatch::new(&ok, 1, 0), RngKey::new(0), &dev);
    assert!(matches!(bad, Err(DecodeError::Config { field: "block_length", .. })));
    Ok(())
}
