//! Benchmark of the shared core at RL-batch scale: group advantages + policy loss + backward
//! for N = 1024 sequences × T = 512 actions (128 prompts × 8 samples), one JSON line per case.
//!
//! Run: `cargo bench -p drift-core --bench core_loss` (add `--features mkl` for MKL).

use std::time::Instant;

use candle_core::{DType, Device, Tensor, Var};
use drift_core::advantage::{group_advantages, AdvantageConfig};
use drift_core::groups::Groups;
use drift_core::loss::{policy_loss, PolicyInputs, PolicyLossConfig, Reference};
use drift_core::rng::RngKey;

const PROMPTS: usize = 128;
const GROUP: usize = 8;
const T: usize = 512;
const ITERS: usize = 15;

struct Batch {
    rewards: Tensor,
    groups: Groups,
    lp_new: Var,
    lp_old: Tensor,
    lp_ref: Tensor,
    mask: Tensor,
}

fn batch(dev: &Device) -> drift_core::Result<Batch> {
    let n = PROMPTS * GROUP;
    let key = RngKey::new(0).stream("bench");
    let rewards = key.draw(0).uniform(n, DType::F32, dev)?;
    let base = (key.draw(1).uniform((n, T), DType::F32, dev)? * -3.0)?;
    let noise = |d| -> drift_core::Result<Tensor> {
        Ok((key.draw(d).normal((n, T), DType::F32, dev)? * 0.05)?)
    };
    let lp_old = (&base + noise(2)?)?;
    let lp_ref = (&base + noise(3)?)?;
    // Ragged completions: row i has 256 + (i mod 257) valid actions.
    let lens: Vec<u32> = (0..n).map(|i| (256 + i % 257) as u32).collect();
    let lens = Tensor::new(lens.as_slice(), dev)?.unsqueeze(1)?;
    let pos = Tensor::arange(0u32, T as u32, dev)?.unsqueeze(0)?;
    let mask = pos.broadcast_lt(&lens)?.to_dtype(DType::F32)?;
    Ok(Batch {
        rewards,
        groups: Groups::contiguous(PROMPTS, GROUP, dev)?,
        lp_new: Var::from_tensor(&base)?,
        lp_old,
        lp_ref,
        mask,
    })
}

fn step(b: &Batch, loss_cfg: &PolicyLossConfig) -> drift_core::Result<f32> {
    let adv = group_advantages(&b.rewards, &b.groups, &AdvantageConfig::grpo())?;
    let out = policy_loss(
        loss_cfg,
        &PolicyInputs {
            lp_new: b.lp_new.as_tensor(),
            lp_old: &b.lp_old,
            mask: &b.mask,
            advantages: &adv.values,
            reference: Some(Reference::LogProbs(&b.lp_ref)),
        },
    )?;
    let grads = out.loss.backward()?;
    let g = grads.get(b.lp_new.as_tensor()).expect("lp_new gets a gradient");
    // One host read per step, as a trainer does: the diagnostics and a gradient checksum.
    let d = out.diagnostics()?;
    Ok(d.total_loss as f32 + g.sum_all()?.to_scalar::<f32>()?)
}

fn main() -> drift_core::Result<()> {
    let dev = Device::Cpu;
    let b = batch(&dev)?;
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    for (name, cfg) in [
        ("grpo", PolicyLossConfig::grpo()),
        ("dapo", PolicyLossConfig { kl: None, ..PolicyLossConfig::dapo() }),
        ("gspo", PolicyLossConfig::gspo()),
        ("espo", PolicyLossConfig::espo(T)),
        ("stable_drl", PolicyLossConfig::stable_drl()),
    ] {
        step(&b, &cfg)?; // warm-up
        let mut times = Vec::with_capacity(ITERS);
        let mut checksum = 0f32;
        for _ in 0..ITERS {
            let t0 = Instant::now();
            checksum += step(&b, &cfg)?;
            times.push(t0.elapsed().as_secs_f64() * 1e3);
        }
        times.sort_by(f64::total_cmp);
        println!(
            "{{\"bench\":\"core/advantage+loss+backward\",\"preset\":\"{name}\",\"n\":{},\"t\":{T},\
             \"device\":\"cpu\",\"threads\":{threads},\"iters\":{ITERS},\"median_ms\":{:.3},\
             \"min_ms\":{:.3},\"max_ms\":{:.3},\"actions_per_s\":{:.0},\"checksum\":{checksum:.3}}}",
            PROMPTS * GROUP,
            times[ITERS / 2],
            times[0],
            times[ITERS - 1],
            (PROMPTS * GROUP * T) as f64 / (times[ITERS / 2] / 1e3),
        );
    }
    Ok(())
}
