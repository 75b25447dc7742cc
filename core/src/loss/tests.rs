//! Policy-loss tests: hand-computed values for every ratio kind, surrogate and KL, the
//! on-policy identity, finite-difference gradients, and masking.

use candle_core::{DType, Device, Tensor, Var};

use super::*;
use crate::error::Result;

fn t2(v: &[[f64; 3]; 2]) -> Tensor {
    Tensor::new(v, &Device::Cpu).unwrap()
}

/// Two sequences of three actions; the last action of row 1 is padding.
fn batch() -> (Tensor, Tensor, Tensor, Tensor) {
    let lp_new = t2(&[[-1.0, -0.5, -2.0], [-1.2, -0.1, -7.0]]);
    let lp_old = t2(&[[-1.1, -0.9, -1.9], [-1.0, -0.2, -3.0]]);
    let mask = t2(&[[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]]);
    let adv = Tensor::new(&[1.5f64, -0.5], &Device::Cpu).unwrap();
    (lp_new, lp_old, mask, adv)
}

fn run(
    cfg: &PolicyLossConfig,
    lp_new: &Tensor,
    reference: Option<Reference<'_>>,
) -> Result<PolicyLoss> {
    let (_, lp_old, mask, adv) = batch();
    policy_loss(
        cfg,
        &PolicyInputs { lp_new, lp_old: &lp_old, mask: &mask, advantages: &adv, reference },
    )
}

fn scalar(t: &Tensor) -> f64 {
    t.to_scalar::<f64>().unwrap()
}

fn no_kl(surrogate: Surrogate, ratio: RatioKind, aggregation: Aggregation) -> PolicyLossConfig {
    PolicyLossConfig { ratio, surrogate, kl: None, aggregation }
}

#[test]
fn on_policy_ratio_is_exactly_one_and_loss_is_minus_mean_advantage() -> Result<()> {
    let (lp_new, _, mask, _) = batch();
    let adv = Tensor::new(&[[0.3f64, -1.0, 2.0], [0.7, 0.1, 9.0]], &Device::Cpu)?;
    let out = policy_loss(
        &PolicyLossConfig::dapo(),
        &PolicyInputs {
            lp_new: &lp_new,
            lp_old: &lp_new,
            mask: &mask,
            advantages: &adv,
            reference: None,
        },
    )?;
    let d = out.diagnostics()?;
    assert_eq!((d.ratio_min, d.ratio_max, d.ratio_mean), (1.0, 1.0, 1.0));
    assert_eq!(d.clip_frac, 0.0);
    assert_eq!(d.approx_kl, 0.0);
    // −mean(A) over the 5 valid actions: −(0.3 − 1 + 2 + 0.7 + 0.1)/5.
    assert!((scalar(&out.loss) + 2.1 / 5.0).abs() < 1e-12);
    Ok(())
}

#[test]
fn ppo_clip_token_by_hand() -> Result<()> {
    let (lp_new, ..) = batch();
    let cfg = no_kl(
        Surrogate::PpoClip { eps_low: 0.2, eps_high: 0.28 },
        RatioKind::Token,
        Aggregation::TokenMean,
    );
    let out = run(&cfg, &lp_new, None)?;
    // Ratios: e^{0.1}, e^{0.4}, e^{−0.1} for A = 1.5; e^{−0.2}, e^{0.1} for A = −0.5.
    // A>0: e^{0.4} = 1.49 > 1.28 → clipped at 1.28. A<0: e^{−0.2} = 0.819 ≥ 0.8 → not clipped.
    let want = -(1.5 * (0.1f64.exp() + 1.28 + (-0.1f64).exp())
        - 0.5 * ((-0.2f64).exp() + 0.1f64.exp()))
        / 5.0;
    assert!((scalar(&out.loss) - want).abs() < 1e-12, "{} vs {want}", scalar(&out.loss));
    let d = out.diagnostics()?;
    assert!((d.clip_frac_high - 0.2).abs() < 1e-7 && d.clip_frac_low == 0.0);
    assert!((d.ratio_max - 0.4f64.exp()).abs() < 1e-6);
    assert!((d.ratio_min - (-0.2f64).exp()).abs() < 1e-6);
    // With ε_low = 0.1 the A<0 action with ρ = 0.819 is clipped at 0.9 instead.
    let cfg = no_kl(
        Surrogate::PpoClip { eps_low: 0.1, eps_high: 0.28 },
        RatioKind::Token,
        Aggregation::TokenMean,
    );
    let out = run(&cfg, &lp_new, None)?;
    let want = -(1.5 * (0.1f64.exp() + 1.28 + (-0.1f64).exp()) - 0.5 * (0.9 + 0.1f64.exp())) / 5.0;
    assert!((scalar(&out.loss) - want).abs() < 1e-12);
    assert!((out.diagnostics()?.clip_frac_low - 0.2).abs() < 1e-7);
    Ok(())
}

#[test]
fn sequence_ratios_by_hand() -> Result<()> {
    let (lp_new, ..) = batch();
    let wide = Surrogate::PpoClip { eps_low: 0.9, eps_high: 10.0 };
    // GSPO: row 0 mean Δ = (0.1 + 0.4 − 0.1)/3, row 1 = (−0.2 + 0.1)/2; the mean over sequences.
    let out =
        run(&no_kl(wide, RatioKind::SequenceMean, Aggregation::SeqMeanTokenMean), &lp_new, None)?;
    let want = -(1.5 * (0.4f64 / 3.0).exp() - 0.5 * (-0.05f64).exp()) / 2.0;
    assert!((scalar(&out.loss) - want).abs() < 1e-12);
    // ESPO/GDPO: Σ Δ / L with L = 4.
    let kind = RatioKind::SequenceFixed { length: 4.0 };
    let out = run(&no_kl(wide, kind, Aggregation::TokenMean), &lp_new, None)?;
    let want = -(1.5 * 0.1f64.exp() - 0.5 * (-0.025f64).exp()) / 2.0;
    assert!((scalar(&out.loss) - want).abs() < 1e-12);
    // A clipped sequence ratio: ε_high = 0.05 caps e^{0.1} at 1.05 for the A>0 row.
    let tight = Surrogate::PpoClip { eps_low: 0.2, eps_high: 0.05 };
    let out = run(&no_kl(tight, kind, Aggregation::TokenMean), &lp_new, None)?;
    let want = -(1.5 * 1.05 - 0.5 * (-0.025f64).exp()) / 2.0;
    assert!((scalar(&out.loss) - want).abs() < 1e-12);
    assert_eq!(out.diagnostics()?.clip_frac_high, 0.5);
    Ok(())
}

#[test]
fn self_normalized_by_hand() -> Result<()> {
    let (lp_new, ..) = batch();
    // Sequence-mean actions: Δ_0 = 0.4/3, Δ_1 = −0.05; lp_0 = −3.5/3, lp_1 = −0.65.
    // c = 1.1 caps Δ_0 at ln 1.1 (it is 0.133 > 0.0953); Δ_1 is below the cap.
    let cfg = no_kl(
        Surrogate::SelfNormalized { weight_clip: 1.1 },
        RatioKind::SequenceMean,
        Aggregation::TokenMean,
    );
    let out = run(&cfg, &lp_new, None)?;
    let (w0, w1) = (1.1f64, (-0.05f64).exp());
    let (w0, w1) = (w0 / (w0 + w1), w1 / (w0 + w1));
    let want = -(w0 * 1.5 * (-3.5 / 3.0) + w1 * (-0.5) * (-0.65));
    assert!((scalar(&out.loss) - want).abs() < 1e-12, "{} vs {want}", scalar(&out.loss));
    Ok(())
}

#[test]
fn kl_terms_by_hand() -> Result<()> {
    let (lp_new, ..) = batch();
    let lp_ref = t2(&[[-1.0, -1.0, -1.0], [-1.0, -1.0, f64::NAN]]);
    let base = no_kl(
        Surrogate::PpoClip { eps_low: 0.9, eps_high: 10.0 },
        RatioKind::Token,
        Aggregation::TokenMean,
    );
    let pg = scalar(&run(&base, &lp_new, None)?.loss);
    let k3 = |lp: f64, r: f64| (r - lp).exp() - (r - lp) - 1.0;
    let want_kl =
        (k3(-1.0, -1.0) + k3(-0.5, -1.0) + k3(-2.0, -1.0) + k3(-1.2, -1.0) + k3(-0.1, -1.0)) / 5.0;
    let cfg =
        PolicyLossConfig { kl: Some(KlPenalty { estimator: KlEstimator::K3, beta: 0.1 }), ..base };
    let out = run(&cfg, &lp_new, Some(Reference::LogProbs(&lp_ref)))?;
    assert!((scalar(&out.kl) - want_kl).abs() < 1e-12, "the padded NaN must not leak");
    assert!((scalar(&out.loss) - (pg + 0.1 * want_kl)).abs() < 1e-12);
    // A precomputed per-action KL is aggregated like the surrogate.
    let kl = t2(&[[1.0, 2.0, 3.0], [4.0, 5.0, 100.0]]);
    let cfg = PolicyLossConfig {
        kl: Some(KlPenalty { estimator: KlEstimator::Precomputed, beta: 0.5 }),
        ..base
    };
    let out = run(&cfg, &lp_new, Some(Reference::Kl(&kl)))?;
    assert!((scalar(&out.kl) - 3.0).abs() < 1e-12);
    // Mismatched reference kinds are refused with a message.
    let msg = run(&cfg, &lp_new, Some(Reference::LogProbs(&lp_ref))).unwrap_err().to_string();
    assert!(msg.contains("Precomputed") && msg.contains("Reference::Kl"), "{msg}");
    assert!(run(&PolicyLossConfig::grpo(), &lp_new, None).is_err());
    Ok(())
}

#[test]
fn padded_nan_and_inf_never_reach_loss_or_gradient() -> Result<()> {
    let (lp_new, ..) = batch();
    let poisoned =
        lp_new.slice_assign(&[1..2, 2..3], &Tensor::new(&[[f64::NAN]], &Device::Cpu)?)?;
    let var = Var::from_tensor(&poisoned)?;
    for cfg in [PolicyLossConfig::dapo(), PolicyLossConfig::gspo(), PolicyLossConfig::stable_drl()]
    {
        let out = run(&cfg, var.as_tensor(), None)?;
        assert!(scalar(&out.loss).is_finite(), "{cfg:?}");
        let g = out.loss.backward()?.get(var.as_tensor()).unwrap().to_vec2::<f64>()?;
        assert!(g.iter().flatten().all(|x| x.is_finite()), "{cfg:?}: {g:?}");
        assert_eq!(g[1][2], 0.0);
    }
    Ok(())
}

#[test]
fn shape_errors_name_the_argument() -> Result<()> {
    let (lp_new, lp_old, mask, _) = batch();
    let adv = Tensor::new(&[1f64, 2., 3.], &Device::Cpu)?;
    let msg = policy_loss(
        &PolicyLossConfig::dapo(),
        &PolicyInputs {
            lp_new: &lp_new,
            lp_old: &lp_old,
            mask: &mask,
            advantages: &adv,
            reference: None,
        },
    )
    .unwrap_err()
    .to_string();
    assert!(msg.contains("advantages") && msg.contains("[2]"), "{msg}");
    let short = Tensor::zeros((2, 2), DType::F64, &Device::Cpu)?;
    let msg = policy_loss(
        &PolicyLossConfig::dapo(),
        &PolicyInputs {
            lp_new: &lp_new,
            lp_old: &short,
            mask: &mask,
            advantages: &adv,
            reference: None,
        },
    )
    .unwrap_err()
    .to_string();
    assert!(msg.contains("lp_old"), "{msg}");
    Ok(())
}

/// Central differences of the loss w.r.t. every entry of `lp_new`, against autograd.
fn check_gradient(cfg: &PolicyLossConfig, reference: Option<&Tensor>) -> Result<()> {
    let (lp_new, ..) = batch();
    fn reference_of<'a>(cfg: &PolicyLossConfig, r: Option<&'a Tensor>) -> Option<Reference<'a>> {
        r.map(|t| match cfg.kl.map(|k| k.estimator) {
            Some(KlEstimator::Precomputed) => Reference::Kl(t),
            _ => Reference::LogProbs(t),
        })
    }
    let var = Var::from_tensor(&lp_new)?;
    let out = run(cfg, var.as_tensor(), reference_of(cfg, reference))?;
    let grads = out.loss.backward()?;
    let g = grads.get(var.as_tensor()).expect("lp_new must get a gradient").to_vec2::<f64>()?;
    let base = lp_new.to_vec2::<f64>()?;
    let h = 1e-6;
    for i in 0..2 {
        for j in 0..3 {
            let at = |delta: f64| -> Result<f64> {
                let mut v = base.clone();
                v[i][j] += delta;
                let t = Tensor::new(v, &Device::Cpu)?;
                Ok(scalar(&run(cfg, &t, reference_of(cfg, reference))?.loss))
            };
            let fd = (at(h)? - at(-h)?) / (2.0 * h);
            assert!(
                (fd - g[i][j]).abs() < 1e-6,
                "{cfg:?} [{i},{j}]: fd {fd} vs autograd {}",
                g[i][j]
            );
        }
    }
    Ok(())
}

#[test]
fn gradients_match_finite_differences() -> Result<()> {
    let lp_ref = t2(&[[-1.3, -0.7, -1.0], [-0.9, -0.4, -2.0]]);
    let kl = |estimator, beta| Some(KlPenalty { estimator, beta });
    // Clip 0.28 on the high side makes one action constant (zero gradient): it is checked too.
    let ppo = Surrogate::PpoClip { eps_low: 0.2, eps_high: 0.28 };
    for (ratio, aggregation, penalty) in [
        (RatioKind::Token, Aggregation::TokenMean, kl(KlEstimator::K3, 0.2)),
        (RatioKind::Token, Aggregation::SeqMeanTokenMean, kl(KlEstimator::K1, 0.3)),
        (
            RatioKind::Token,
            Aggregation::SeqMeanTokenSumNorm { max_len: Some(5) },
            kl(KlEstimator::K2, 0.7),
        ),
        (RatioKind::Token, Aggregation::Balanced, kl(KlEstimator::K3, 0.1)),
        (RatioKind::SequenceMean, Aggregation::SeqMeanTokenMean, kl(KlEstimator::K3, 0.1)),
        (
            RatioKind::SequenceFixed { length: 3.0 },
            Aggregation::TokenMean,
            kl(KlEstimator::K2, 0.5),
        ),
    ] {
        let cfg = PolicyLossConfig { ratio, surrogate: ppo, kl: penalty, aggregation };
        check_gradient(&cfg, Some(&lp_ref))?;
    }
    // A precomputed KL is a constant w.r.t. lp_new: only the surrogate's gradient remains.
    let kl_t = t2(&[[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]]);
    check_gradient(&PolicyLossConfig::flow_grpo(), Some(&kl_t))?;
    Ok(())
}

#[test]
fn self_normalized_gradient_holds_the_weights_constant() -> Result<()> {
    // The weights are stop-gradient by definition, so the gradient is −w_b A_b ∂lp_b/∂lp_new,
    // with lp_b the sequence's token mean: −w_b A_b m_bt / Σ_t m_bt.
    let (lp_new, ..) = batch();
    let var = Var::from_tensor(&lp_new)?;
    let out = run(&PolicyLossConfig::stable_drl(), var.as_tensor(), None)?;
    let g = out.loss.backward()?.get(var.as_tensor()).unwrap().to_vec2::<f64>()?;
    let (w0, w1) = ((0.4f64 / 3.0).exp(), (-0.05f64).exp()); // both below c = 5
    let (w0, w1) = (w0 / (w0 + w1), w1 / (w0 + w1));
    let want = [[-w0 * 1.5 / 3.0; 3], [w1 * 0.5 / 2.0, w1 * 0.5 / 2.0, 0.0]];
    for (gr, wr) in g.iter().zip(want) {
        for (a, b) in gr.iter().zip(wr) {
            assert!((a - b).abs() < 1e-12, "{g:?} vs {want:?}");
        }
    }
    Ok(())
}
