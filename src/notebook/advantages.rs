//! The group-advantage core on groups the reader edits (notebook 3): how each baseline and
//! scale turns a group's rewards into advantages, and how each loss aggregation spreads a
//! sequence's advantage over its tokens — measured from the core's own loss by autograd, not
//! re-derived here.
//!
//! At the on-policy point (ratio 1, no clipping, no KL) the gradient of the policy loss with
//! respect to token `t` of sequence `i` is `−A_i · w_{i,t}`; the aggregation sets `w`:
//! `1/Σm` for `token_mean` (DAPO: long sequences weigh more), `1/(N·|o_i|)` for
//! `seq_mean_token_mean` (GRPO: short sequences' tokens weigh more), `1/(N·T_max)` for
//! `seq_mean_token_sum_norm` (Dr. GRPO: every token the same, no length bias).

use candle_core::{DType, Device, Tensor, Var};
use drift_core::advantage::{group_advantages, AdvantageConfig, Scale};
use drift_core::groups::Groups;
use drift_core::loss::{
    policy_loss, Aggregation, PolicyInputs, PolicyLossConfig, RatioKind, Surrogate,
};
use drift_core::metrics::{LineChart, Series};

use super::display::Table;
use super::{Result, StudyError};

/// The advantage settings the notebook compares, by name: GRPO (mean, unbiased group std),
/// Dr. GRPO (mean, no scale), RLOO (leave-one-out), Flow-GRPO (population std, clip 5) and
/// GRPO with the batch std.
pub fn advantage_presets() -> Vec<(String, AdvantageConfig)> {
    vec![
        ("grpo".into(), AdvantageConfig::grpo()),
        ("dr_grpo".into(), AdvantageConfig::mean_centred()),
        ("rloo".into(), AdvantageConfig::leave_one_out()),
        ("flow_grpo".into(), AdvantageConfig::flow_grpo()),
        ("batch_std".into(), AdvantageConfig { scale: Scale::BatchStd, ..AdvantageConfig::grpo() }),
    ]
}

/// The aggregations the notebook compares, by name.
pub fn aggregation_presets() -> Vec<(String, Aggregation)> {
    vec![
        ("token_mean".into(), Aggregation::TokenMean),
        ("seq_mean_token_mean".into(), Aggregation::SeqMeanTokenMean),
        ("seq_mean_token_sum_norm".into(), Aggregation::SeqMeanTokenSumNorm { max_len: None }),
        ("balanced".into(), Aggregation::Balanced),
    ]
}

/// The advantages of every sample of `groups` (one reward list per prompt; ragged groups are
/// fine) under each of `presets`: `[preset][sample]`, samples group-major.
pub fn advantages(
    groups: &[Vec<f64>],
    presets: &[(String, AdvantageConfig)],
) -> Result<Vec<Vec<f64>>> {
    if groups.is_empty() || groups.iter().any(Vec::is_empty) {
        return Err(StudyError::Argument {
            name: "groups",
            value: format!("{groups:?}"),
            expected: "at least one group, each with at least one reward".into(),
        });
    }
    let dev = Device::Cpu;
    let ids: Vec<u32> = groups
        .iter()
        .enumerate()
        .flat_map(|(k, g)| std::iter::repeat_n(k as u32, g.len()))
        .collect();
    let g = Groups::new(&ids, groups.len(), &dev)?;
    let r: Vec<f64> = groups.iter().flatten().copied().collect();
    let rewards = Tensor::from_vec(r.clone(), r.len(), &dev)?;
    presets
        .iter()
        .map(|(_, cfg)| Ok(group_advantages(&rewards, &g, cfg)?.values.to_vec1::<f64>()?))
        .collect()
}

/// [`advantages`] as a table: one row per sample (group, reward, one column per preset).
pub fn advantage_table(
    groups: &[Vec<f64>],
    presets: &[(String, AdvantageConfig)],
) -> Result<Table> {
    let adv = advantages(groups, presets)?;
    let mut header = vec!["group", "sample", "reward"];
    header.extend(presets.iter().map(|(n, _)| n.as_str()));
    let mut t = Table::new("advantages per sample", &header);
    let mut i = 0;
    for (k, g) in groups.iter().enumerate() {
        for (j, r) in g.iter().enumerate() {
            let mut row = vec![k.to_string(), j.to_string(), format!("{r:.3}")];
            row.extend(adv.iter().map(|a| format!("{:+.3}", a[i])));
            t.push(row)?;
            i += 1;
        }
    }
    Ok(t)
}

/// The gradient of the core's policy loss under `aggregation` with respect to every token's
/// log-probability, at ratio 1 (`lp_new = lp_old = 0`), PPO clip 0.2, no KL: `[N][T_max]`
/// for sequences of `lengths` with advantages `advantages` (0 beyond each length).
pub fn token_gradients(
    lengths: &[usize],
    advantages: &[f64],
    aggregation: Aggregation,
) -> Result<Vec<Vec<f64>>> {
    if lengths.is_empty() || lengths.len() != advantages.len() || lengths.contains(&0) {
        return Err(StudyError::Argument {
            name: "lengths / advantages",
            value: format!("{lengths:?} / {advantages:?}"),
            expected: "one positive length per advantage".into(),
        });
    }
    let dev = Device::Cpu;
    let (n, t) = (lengths.len(), *lengths.iter().max().unwrap_or(&1));
    let mask: Vec<f64> =
        lengths.iter().flat_map(|&l| (0..t).map(move |j| f64::from(u8::from(j < l)))).collect();
    let mask = Tensor::from_vec(mask, (n, t), &dev)?;
    let lp = Var::from_tensor(&Tensor::zeros((n, t), DType::F64, &dev)?)?;
    let old = Tensor::zeros((n, t), DType::F64, &dev)?;
    let adv = Tensor::from_vec(advantages.to_vec(), n, &dev)?;
    let cfg = PolicyLossConfig {
        ratio: RatioKind::Token,
        surrogate: Surrogate::PpoClip { eps_low: 0.2, eps_high: 0.2 },
        kl: None,
        aggregation,
    };
    let inputs = PolicyInputs {
        lp_new: lp.as_tensor(),
        lp_old: &old,
        mask: &mask,
        advantages: &adv,
        reference: None,
    };
    let out = policy_loss(&cfg, &inputs)?;
    let grads = out.loss.backward()?;
    let g = grads.get(lp.as_tensor()).ok_or_else(|| StudyError::Argument {
        name: "loss",
        value: "no gradient".into(),
        expected: "a loss differentiable in lp_new".into(),
    })?;
    Ok(g.to_vec2::<f64>()?)
}

/// How each aggregation weighs each sequence: per sequence, the per-token weight `w` (the
/// gradient divided by `−A`) and the sequence's total pull `Σ_t −∂L/∂lp_t = A·Σ_t w`.
pub fn aggregation_table(
    lengths: &[usize],
    advantages: &[f64],
    aggregations: &[(String, Aggregation)],
) -> Result<Table> {
    let mut header = vec!["seq".to_string(), "length".into(), "A".into()];
    for (name, _) in aggregations {
        header.push(format!("{name} w"));
        header.push(format!("{name} pull"));
    }
    let h: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut t = Table::new("per-token weight w and total pull of each sequence", &h);
    let grads: Vec<Vec<Vec<f64>>> = aggregations
        .iter()
        .map(|(_, a)| token_gradients(lengths, advantages, *a))
        .collect::<Result<_>>()?;
    for (i, (&l, &a)) in lengths.iter().zip(advantages).enumerate() {
        let mut row = vec![i.to_string(), l.to_string(), format!("{a:+.3}")];
        for g in &grads {
            let pull: f64 = -g[i].iter().sum::<f64>();
            let w = if a == 0.0 { 0.0 } else { -g[i][0] / a };
            row.push(format!("{w:.4}"));
            row.push(format!("{pull:+.4}"));
        }
        t.push(row)?;
    }
    Ok(t)
}

/// A chart of each sequence's total pull against its length, one line per aggregation, for
/// sequences of `lengths` that all have advantage `advantage`.
pub fn pull_vs_length_chart(
    lengths: &[usize],
    advantage: f64,
    aggregations: &[(String, Aggregation)],
) -> Result<LineChart> {
    let adv = vec![advantage; lengths.len()];
    let mut chart = LineChart::new(
        format!("total pull of a sequence vs its length (all A = {advantage})"),
        "length",
        "pull",
    );
    for (name, a) in aggregations {
        let g = token_gradients(lengths, &adv, *a)?;
        let mut pts: Vec<(f64, f64)> =
            lengths.iter().zip(&g).map(|(&l, gi)| (l as f64, -gi.iter().sum::<f64>())).collect();
        pts.sort_by(|x, y| x.0.total_cmp(&y.0));
        chart = chart.with(Series::new(name.clone(), pts));
    }
    Ok(chart)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn advantages_follow_each_preset_formula_on_ragged_groups() {
        // Group 0: rewards 1, 0, 0.5, 0.5 (mean 0.5, unbiased std √(1/6)); group 1: 2, 0.
        let groups = vec![vec![1.0, 0.0, 0.5, 0.5], vec![2.0, 0.0]];
        let presets = advantage_presets();
        let a = advantages(&groups, &presets).unwrap();
        let sd0 = (0.5f64 / 3.0).sqrt();
        assert!(close(a[0][0], 0.5 / (sd0 + 1e-4)), "grpo {}", a[0][0]);
        assert!(close(a[0][4], 1.0 / (2f64.sqrt() + 1e-4)), "grpo group 1 {}", a[0][4]);
        assert!(close(a[1][0], 0.5) && close(a[1][5], -1.0), "dr_grpo {:?}", a[1]);
        // RLOO: r_i − mean of the others.
        assert!(close(a[2][0], 1.0 - 1.0 / 3.0) && close(a[2][4], 2.0), "rloo {:?}", a[2]);
        // Flow-GRPO: population std (0.5 and 1), so ±1 in group 1.
        assert!(close(a[3][4], 1.0 / (1.0 + 1e-4)), "flow_grpo {:?}", a[3]);
        let t = advantage_table(&groups, &presets).unwrap();
        assert_eq!(t.rows.len(), 6);
        assert_eq!(t.cell(5, "dr_grpo"), Some("-1.000"));
        assert!(advantages(&[vec![]], &presets).is_err());
    }

    #[test]
    fn aggregation_weights_are_the_hand_computed_ones() {
        let (lengths, adv) = ([1usize, 3], [1.0, 1.0]);
        let g = token_gradients(&lengths, &adv, Aggregation::TokenMean).unwrap();
        assert!(close(g[0][0], -0.25) && close(g[1][2], -0.25), "token_mean {g:?}");
        assert!(close(g[0][1], 0.0), "padding gets no gradient");
        let g = token_gradients(&lengths, &adv, Aggregation::SeqMeanTokenMean).unwrap();
        assert!(close(g[0][0], -0.5) && close(g[1][0], -1.0 / 6.0), "seq_mean {g:?}");
        let g = token_gradients(&lengths, &adv, Aggregation::SeqMeanTokenSumNorm { max_len: None })
            .unwrap();
        assert!(close(g[0][0], -1.0 / 6.0) && close(g[1][1], -1.0 / 6.0), "dr_grpo {g:?}");
        let t = aggregation_table(&lengths, &adv, &aggregation_presets()).unwrap();
        assert_eq!(t.cell(1, "seq_mean_token_mean pull"), Some("+0.5000"));
        assert_eq!(t.cell(1, "token_mean pull"), Some("+0.7500"));
        let chart = pull_vs_length_chart(&[1, 2, 4], 1.0, &aggregation_presets()).unwrap();
        assert_eq!(chart.series.len(), 4);
        assert!(close(chart.series[0].points[2].1, 4.0 / 7.0), "{:?}", chart.series[0]);
    }
}
