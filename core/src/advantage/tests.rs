//! Advantage tests: hand-computed values for every baseline and scale, ragged groups,
//! degenerate and singleton groups, several rewards.

use candle_core::{Device, Tensor};

use super::*;
use crate::error::Result;
use crate::groups::Groups;

/// Ragged groups of sizes 1, 2 and 7, interleaved (ids not sorted).
fn ragged() -> Result<(Tensor, Groups, Vec<f64>, Vec<u32>)> {
    let ids = vec![2u32, 1, 2, 0, 2, 2, 1, 2, 2, 2];
    let r = vec![0.0, 1.0, 1.0, 5.0, 2.0, 3.0, 3.0, 4.0, 5.0, 6.0];
    let dev = Device::Cpu;
    let groups = Groups::new(&ids, 3, &dev)?;
    assert_eq!(groups.sizes(), &[1, 2, 7]);
    Ok((Tensor::new(r.as_slice(), &dev)?, groups, r, ids))
}

fn close(got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= tol, "index {i}: got {g}, want {w} (all: {got:?})");
    }
}

fn adv(cfg: AdvantageConfig) -> Result<Vec<f64>> {
    let (r, g, _, _) = ragged()?;
    Ok(group_advantages(&r, &g, &cfg)?.values.to_vec1::<f64>()?)
}

#[test]
fn grpo_unbiased_group_std_by_hand() -> Result<()> {
    // group 1 = {1, 3}: μ 2, unbiased std √2. group 2 = {0..6}: μ 3, Σ(r−μ)² = 28, std √(28/6).
    // group 0 = {5}: a singleton, degenerate (std 0) → 0.
    let s1 = 2f64.sqrt() + 1e-4;
    let s2 = (28f64 / 6.0).sqrt() + 1e-4;
    let want = [
        -3.0 / s2,
        -1.0 / s1,
        -2.0 / s2,
        0.0,
        -1.0 / s2,
        0.0,
        1.0 / s1,
        1.0 / s2,
        2.0 / s2,
        3.0 / s2,
    ];
    close(&adv(AdvantageConfig::grpo())?, &want, 1e-12);
    Ok(())
}

#[test]
fn population_std_by_hand() -> Result<()> {
    let cfg = AdvantageConfig { std: StdKind::Population, ..AdvantageConfig::grpo() };
    let s1 = 1.0 + 1e-4; // √(2/2)
    let s2 = 2.0 + 1e-4; // √(28/7)
    let want = [
        -3.0 / s2,
        -1.0 / s1,
        -2.0 / s2,
        0.0,
        -1.0 / s2,
        0.0,
        1.0 / s1,
        1.0 / s2,
        2.0 / s2,
        3.0 / s2,
    ];
    close(&adv(cfg)?, &want, 1e-12);
    Ok(())
}

#[test]
fn leave_one_out_by_hand_and_singleton_zero() -> Result<()> {
    // r=1 in {1,3}: baseline 3 → −2. r=0 in group 2: baseline (21−0)/6 = 3.5 → −3.5.
    let want = [
        -3.5,
        -2.0,
        1.0 - 20.0 / 6.0,
        0.0,
        2.0 - 19.0 / 6.0,
        0.0,
        2.0,
        4.0 - 17.0 / 6.0,
        5.0 - 16.0 / 6.0,
        6.0 - 15.0 / 6.0,
    ];
    close(&adv(AdvantageConfig::leave_one_out())?, &want, 1e-12);
    let (r, g, _, _) = ragged()?;
    let a = group_advantages(&r, &g, &AdvantageConfig::leave_one_out())?;
    assert_eq!(a.informative.to_vec1::<f64>()?[3], 0.0, "the singleton is not informative");
    assert!(a.values.to_vec1::<f64>()?.iter().all(|v| v.is_finite()));
    Ok(())
}

#[test]
fn leave_one_out_singleton_error_names_the_group() -> Result<()> {
    let (r, g, _, _) = ragged()?;
    let cfg = AdvantageConfig { singleton: Singleton::Error, ..AdvantageConfig::leave_one_out() };
    let msg = group_advantages(&r, &g, &cfg).unwrap_err().to_string();
    assert!(msg.contains("group 0") && msg.contains("single sample"), "{msg}");
    Ok(())
}

#[test]
fn mean_centred_no_scale() -> Result<()> {
    let want = [-3.0, -1.0, -2.0, 0.0, -1.0, 0.0, 1.0, 1.0, 2.0, 3.0];
    close(&adv(AdvantageConfig::mean_centred())?, &want, 1e-12);
    Ok(())
}

#[test]
fn batch_std_uses_all_rewards() -> Result<()> {
    let (_, _, r, _) = ragged()?;
    let mu = r.iter().sum::<f64>() / 10.0;
    let pop = (r.iter().map(|x| (x - mu).powi(2)).sum::<f64>() / 10.0).sqrt() + 1e-4;
    let cfg = AdvantageConfig {
        scale: Scale::BatchStd,
        std: StdKind::Population,
        ..AdvantageConfig::grpo()
    };
    let centred = [-3.0, -1.0, -2.0, 0.0, -1.0, 0.0, 1.0, 1.0, 2.0, 3.0];
    let want: Vec<f64> = centred.iter().map(|c| c / pop).collect();
    close(&adv(cfg)?, &want, 1e-12);
    Ok(())
}

#[test]
fn clipping_bounds_advantages() -> Result<()> {
    let cfg = AdvantageConfig { clip: Some(1.5), ..AdvantageConfig::mean_centred() };
    let want = [-1.5, -1.0, -1.5, 0.0, -1.0, 0.0, 1.0, 1.0, 1.5, 1.5];
    close(&adv(cfg)?, &want, 1e-12);
    Ok(())
}

#[test]
fn degenerate_groups_are_zero_and_reported() -> Result<()> {
    let dev = Device::Cpu;
    // Group 0 ties at 0.1 (its float mean is not exactly 0.1), group 1 has signal.
    let r = Tensor::new(&[0.1f32, 0.1, 0.1, 0.0, 1.0, 1.0], &dev)?;
    let g = Groups::contiguous(2, 3, &dev)?;
    let a = group_advantages(&r, &g, &AdvantageConfig::grpo())?;
    let v = a.values.to_vec1::<f32>()?;
    assert_eq!(&v[..3], &[0.0, 0.0, 0.0], "exact zeros for a tied group");
    assert!(v[3] < 0.0 && v[4] > 0.0);
    assert_eq!(a.degenerate_groups()?, vec![true, false]);
    let stats = a.stats(&g)?;
    assert_eq!(stats.degenerate_frac, 0.5);
    assert_eq!(stats.informative_frac, 0.5);
    Ok(())
}

#[test]
fn empty_groups_are_not_degenerate() -> Result<()> {
    let dev = Device::Cpu;
    let g = Groups::new(&[0, 0, 2, 2], 3, &dev)?;
    let r = Tensor::new(&[1f32, 2., 3., 3.], &dev)?;
    let a = group_advantages(&r, &g, &AdvantageConfig::grpo())?;
    assert_eq!(a.degenerate_groups()?, vec![false, false, true]);
    Ok(())
}

#[test]
fn wrong_reward_shape_is_named() -> Result<()> {
    let dev = Device::Cpu;
    let g = Groups::contiguous(2, 2, &dev)?;
    let r = Tensor::new(&[1f32, 2., 3.], &dev)?;
    let msg = group_advantages(&r, &g, &AdvantageConfig::grpo()).unwrap_err().to_string();
    assert!(msg.contains("rewards") && msg.contains("[4]"), "{msg}");
    Ok(())
}

#[test]
fn multi_reward_orders_by_hand() -> Result<()> {
    let dev = Device::Cpu;
    let g = Groups::contiguous(1, 2, &dev)?;
    // Reward a: [0, 2], reward b: [1, 1] → b is degenerate on its own.
    let r = Tensor::new(&[[0f64, 1.0], [2.0, 1.0]], &dev)?;
    let cfg = AdvantageConfig { std: StdKind::Population, ..AdvantageConfig::grpo() };
    // Sum first: weights (0.5, 2): combined [2, 3] → centred ±0.5, pop std 0.5.
    let a = multi_reward_advantages(&r, &[0.5, 2.0], &g, &cfg, CombineOrder::SumThenNormalize)?;
    let s = 0.5 + 1e-4;
    close(&a.values.to_vec1::<f64>()?, &[-0.5 / s, 0.5 / s], 1e-12);
    // Normalise first: a → ±1/(1+1e-4), b → 0; weighted by 0.5.
    let a = multi_reward_advantages(&r, &[0.5, 2.0], &g, &cfg, CombineOrder::NormalizeThenSum)?;
    let s = 1.0 + 1e-4;
    close(&a.values.to_vec1::<f64>()?, &[-0.5 / s, 0.5 / s], 1e-12);
    assert_eq!(a.degenerate_groups()?, vec![false]);
    assert!(multi_reward_advantages(&r, &[1.0], &g, &cfg, CombineOrder::SumThenNormalize).is_err());
    Ok(())
}

#[test]
fn per_action_broadcast_respects_mask() -> Result<()> {
    let dev = Device::Cpu;
    let a = Tensor::new(&[2f32, -1.0], &dev)?;
    let m = Tensor::new(&[[1f32, 1.0, 0.0], [1.0, 0.0, 0.0]], &dev)?;
    let pa = broadcast_to_actions(&a, &m)?.to_vec2::<f32>()?;
    assert_eq!(pa, vec![vec![2.0, 2.0, 0.0], vec![-1.0, 0.0, 0.0]]);
    Ok(())
}

#[test]
fn matches_a_naive_reference_on_random_ragged_groups() -> Result<()> {
    // A plain-loop implementation of the formula, against the tensor one.
    let ids: Vec<u32> = (0..40u32).map(|i| (i * 7 + i / 3) % 6).collect();
    let r: Vec<f64> = (0..40).map(|i| ((i * 37 % 11) as f64) * 0.25).collect();
    let dev = Device::Cpu;
    let g = Groups::new(&ids, 6, &dev)?;
    let cfg = AdvantageConfig { clip: Some(1.2), ..AdvantageConfig::grpo() };
    let got =
        group_advantages(&Tensor::new(r.as_slice(), &dev)?, &g, &cfg)?.values.to_vec1::<f64>()?;
    let mut want = vec![0.0; 40];
    for k in 0..6u32 {
        let members: Vec<usize> = (0..40).filter(|&i| ids[i] == k).collect();
        let n = members.len() as f64;
        let mu = members.iter().map(|&i| r[i]).sum::<f64>() / n;
        let ss = members.iter().map(|&i| (r[i] - mu).powi(2)).sum::<f64>();
        let std = (ss / (n - 1.0).max(1.0)).sqrt();
        let degenerate = (ss / n).sqrt() <= 1e-6;
        for &i in &members {
            want[i] = if degenerate { 0.0 } else { ((r[i] - mu) / (std + 1e-4)).clamp(-1.2, 1.2) };
        }
    }
    close(&got, &want, 1e-12);
    Ok(())
}
