//! Estimator tests: the coupled pair's partition, unbiasedness under a context-free model
//! (within Monte Carlo error), micro-batch invariance of the masks, quadrature exactness,
//! gradients.

use candle_core::{DType, Device, Tensor};
use drift_core::rng::RngKey;
use drift_samplers::MaskPredictor;

use super::*;
use crate::model::{DiffusionLm, LoadOptions, TinySize};
use crate::tokenizer::CharTokenizer;

const V: usize = 7;
const MASK: u32 = 6;
const T: usize = 16;

/// Logits that depend on the position only: `log p(v | anything)_j` is a fixed table.
struct ContextFree {
    table: Tensor,
}

impl ContextFree {
    fn new() -> Self {
        let table = RngKey::new(99).normal((T, V), DType::F32, &Device::Cpu).unwrap();
        Self { table: (table * 1.5).unwrap() }
    }
    /// `log p(y_j)` at every position, on the host.
    fn log_probs(&self, ids: &[u32]) -> Vec<f64> {
        let lp = drift_core::ops::log_softmax_last_dim(&self.table).unwrap();
        let lp = lp.to_vec2::<f32>().unwrap();
        ids.iter().enumerate().map(|(j, &y)| f64::from(lp[j][y as usize])).collect()
    }
}

impl MaskPredictor for ContextFree {
    fn logits(&self, ids: &Tensor, _: Option<&Tensor>) -> candle_core::Result<Tensor> {
        let (b, t) = ids.dims2()?;
        self.table.narrow(0, 0, t)?.unsqueeze(0)?.broadcast_as((b, t, V))?.contiguous()
    }
    fn mask_id(&self) -> u32 {
        MASK
    }
    fn vocab_size(&self) -> usize {
        V
    }
}

/// Three rows: prompt lengths 4, 6, 3; completion lengths 9, 5, 12; the rest fill.
struct Rows {
    ids: Vec<Vec<u32>>,
    completion: Vec<Vec<bool>>,
    prompt: Vec<Vec<bool>>,
    fill: Vec<Vec<bool>>,
}

fn rows() -> Rows {
    let shape = [(4usize, 9usize), (6, 5), (3, 12)];
    let mut out =
        Rows { ids: Vec::new(), completion: Vec::new(), prompt: Vec::new(), fill: Vec::new() };
    for (r, &(p, l)) in shape.iter().enumerate() {
        out.ids.push((0..T).map(|j| ((j * 3 + r) % 6) as u32).collect());
        out.completion.push((0..T).map(|j| j >= p && j < p + l).collect());
        out.prompt.push((0..T).map(|j| j < p).collect());
        out.fill.push((0..T).map(|j| j >= p + l).collect());
    }
    out
}

/// The estimator input over every row of `r`.
fn whole_input<'a>(r: &'a Rows, ids: &'a Tensor, rows: &'a [u64]) -> EstimateInput<'a> {
    EstimateInput {
        ids,
        completion: &r.completion,
        prompt: &r.prompt,
        fill: &r.fill,
        rows,
        attention_mask: None,
    }
}

fn ids_tensor(r: &Rows) -> Tensor {
    Tensor::new(r.ids.clone(), &Device::Cpu).unwrap()
}

fn configs() -> Vec<(EstimatorConfig, f64)> {
    // (estimator, expectation / exact log-likelihood under a context-free model)
    vec![
        (EstimatorConfig::one_step(), 1.0),
        (EstimatorConfig::coupled(), 1.5),
        (
            EstimatorConfig::Coupled { t_min: 0.2, t_max: 0.8, per_row_t: true, full_pass: false },
            1.0,
        ),
        (EstimatorConfig::elbo_mc(), 1.0),
        (EstimatorConfig::ElboMc { draws: 1 }, 1.0),
        (EstimatorConfig::quadrature(), 1.0),
        (
            EstimatorConfig::Quadrature {
                rule: QuadratureRule::GaussLegendre { nodes: 3 },
                draws: 2,
            },
            1.0,
        ),
        (
            EstimatorConfig::Quadrature {
                rule: QuadratureRule::GaussLegendre { nodes: 5 },
                draws: 1,
            },
            1.0,
        ),
        (EstimatorConfig::Quadrature { rule: QuadratureRule::Simpson, draws: 1 }, 1.0),
    ]
}

/// The estimate of row `r` from its passes and a host log-prob table.
fn host_estimate(passes: &[Pass], r: usize, lp: &[f64]) -> f64 {
    passes
        .iter()
        .map(|p| p.weight[r].iter().zip(lp).map(|(&w, &l)| f64::from(w) * l).sum::<f64>())
        .sum()
}

#[test]
fn coupled_pair_scores_every_completion_token_exactly_once() {
    let r = rows();
    let ids = ids_tensor(&r);
    let input = whole_input(&r, &ids, &[0, 1, 2]);
    for seed in 0..50 {
        let passes = draw_passes(&EstimatorConfig::coupled(), &input, RngKey::new(seed)).unwrap();
        assert_eq!(passes.len(), 3);
        for row in 0..3 {
            for j in 0..T {
                let region = r.completion[row][j] || r.fill[row][j];
                assert_eq!(passes[0].masked[row][j], region, "the full pass masks C and the fill");
                let (a, b) = (passes[1].masked[row][j], passes[2].masked[row][j]);
                assert_eq!(
                    u8::from(a) + u8::from(b),
                    u8::from(region),
                    "seed {seed} row {row} col {j}: the pair splits C and the fill"
                );
                // Scored (weight > 0) exactly where masked in C, never in the fill.
                let c = r.completion[row][j];
                assert_eq!(passes[1].weight[row][j] > 0.0, a && c);
                assert_eq!(passes[2].weight[row][j] > 0.0, b && c);
                assert_eq!(passes[0].weight[row][j] > 0.0, c);
            }
        }
        // One t per call: the A-weight 1/(2t) is the same in every row.
        let w: Vec<f32> = (0..3)
            .filter_map(|row| passes[1].weight[row].iter().copied().find(|&w| w > 0.0))
            .collect();
        assert!(w.windows(2).all(|p| p[0] == p[1]), "{w:?}");
    }
}

#[test]
#[allow(clippy::needless_range_loop)] // `row` indexes the rows, their ids and the exact values
fn expectations_equal_the_exact_log_likelihood_under_a_context_free_model() {
    let model = ContextFree::new();
    let r = rows();
    let ids = ids_tensor(&r);
    let rows_ids = [10u64, 11, 12];
    let input = whole_input(&r, &ids, &rows_ids);
    let exact: Vec<f64> = (0..3)
        .map(|row| {
            let lp = model.log_probs(&r.ids[row]);
            (0..T).filter(|&j| r.completion[row][j]).map(|j| lp[j]).sum()
        })
        .collect();
    let n = 3000;
    for (cfg, factor) in configs() {
        for row in 0..3 {
            let lp = model.log_probs(&r.ids[row]);
            let xs: Vec<f64> = (0..n)
                .map(|s| {
                    host_estimate(
                        &draw_passes(&cfg, &input, RngKey::new(s).iteration(1)).unwrap(),
                        row,
                        &lp,
                    )
                })
                .collect();
            let mean = xs.iter().sum::<f64>() / n as f64;
            let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
            let se = (var / n as f64).sqrt();
            let want = factor * exact[row];
            assert!(
                (mean - want).abs() <= 4.0 * se + 1e-6 * want.abs(),
                "{cfg:?} row {row}: mean {mean} vs {want} (se {se})"
            );
        }
        // The model path (batched passes) computes the same numbers as the host formula.
        let key = RngKey::new(5).iteration(2);
        let est = estimate(&model, &cfg, &input, key, 4).unwrap();
        let passes = draw_passes(&cfg, &input, key).unwrap();
        let seq = est.sequence.to_vec1::<f32>().unwrap();
        for row in 0..3 {
            let want = host_estimate(&passes, row, &model.log_probs(&r.ids[row]));
            assert!(
                (f64::from(seq[row]) - want).abs() < 1e-4 * want.abs().max(1.0),
                "{cfg:?} row {row}"
            );
        }
        assert_eq!(est.forward_rows, 3 * cfg.passes_per_row());
    }
}

#[test]
fn masks_and_estimates_do_not_depend_on_the_micro_batch() {
    let tok = CharTokenizer::ascii();
    let model = DiffusionLm::init(
        TinySize::Nano.spec().llada(tok.vocab_spec()),
        RngKey::new(3),
        &LoadOptions::frozen(),
    )
    .unwrap();
    let r = rows();
    // Real token ids for the real model (below its vocabulary, not its mask id).
    let ids: Vec<Vec<u32>> =
        r.ids.iter().map(|row| row.iter().map(|&x| x + 40).collect()).collect();
    let ids = Tensor::new(ids, &Device::Cpu).unwrap();
    let key = RngKey::new(8).step(4).iteration(1);
    for (cfg, _) in configs() {
        let full_in = whole_input(&r, &ids, &[7, 8, 9]);
        let full = draw_passes(&cfg, &full_in, key).unwrap();
        let whole =
            estimate(&model, &cfg, &full_in, key, 64).unwrap().sequence.to_vec1::<f32>().unwrap();
        for (range, row_ids) in [(0..2, vec![7u64, 8]), (2..3, vec![9])] {
            let sub = ids.narrow(0, range.start, range.len()).unwrap();
            let input = EstimateInput {
                ids: &sub,
                completion: &r.completion[range.clone()],
                prompt: &r.prompt[range.clone()],
                fill: &r.fill[range.clone()],
                rows: &row_ids,
                attention_mask: None,
            };
            let part = draw_passes(&cfg, &input, key).unwrap();
            for (k, pass) in part.iter().enumerate() {
                for (i, row) in range.clone().enumerate() {
                    assert_eq!(pass.masked[i], full[k].masked[row], "{cfg:?} pass {k} row {row}");
                    assert_eq!(pass.weight[i], full[k].weight[row], "{cfg:?} pass {k} row {row}");
                }
            }
            let got =
                estimate(&model, &cfg, &input, key, 5).unwrap().sequence.to_vec1::<f32>().unwrap();
            for (i, row) in range.clone().enumerate() {
                let tol = 1e-5 * whole[row].abs().max(1.0);
                assert!(
                    (got[i] - whole[row]).abs() <= tol,
                    "{cfg:?} row {row}: {} vs {}",
                    got[i],
                    whole[row]
                );
            }
        }
        // Another inner iteration draws other masks (except the deterministic one-step).
        let other = draw_passes(&cfg, &full_in, key.iteration(2)).unwrap();
        if !matches!(cfg, EstimatorConfig::OneStep { .. }) {
            assert_ne!(other, full, "{cfg:?}");
        }
    }
}

#[test]
fn gauss_legendre_is_exact_to_degree_2n_minus_1_and_simpson_to_3() {
    for n in 1..=5 {
        let nodes = gauss_legendre(n);
        assert_eq!(nodes.len(), n);
        for deg in 0..2 * n {
            let q: f64 = nodes.iter().map(|&(t, w)| w * t.powi(deg as i32)).sum();
            assert!((q - 1.0 / (deg as f64 + 1.0)).abs() < 1e-12, "n {n} degree {deg}: {q}");
        }
        let deg = 2 * n;
        let q: f64 = nodes.iter().map(|&(t, w)| w * t.powi(deg as i32)).sum();
        assert!((q - 1.0 / (deg as f64 + 1.0)).abs() > 1e-8, "n {n} is not exact at degree {deg}");
    }
    let g3 = gauss_legendre(3);
    assert!((g3[0].0 - 0.1127016654).abs() < 1e-9 && (g3[0].1 - 5.0 / 18.0).abs() < 1e-12);
    for deg in 0..4 {
        let q: f64 = simpson().iter().map(|&(t, w)| w * t.powi(deg)).sum();
        assert!((q - 1.0 / (deg as f64 + 1.0)).abs() < 1e-12);
    }
    assert!(gauss_legendre(6).is_empty());
}

#[test]
fn estimates_carry_gradients_and_bad_configs_are_named() {
    let tok = CharTokenizer::ascii();
    let model = DiffusionLm::init(
        TinySize::Nano.spec().llada(tok.vocab_spec()),
        RngKey::new(3),
        &LoadOptions::trainable(),
    )
    .unwrap();
    let r = rows();
    let ids: Vec<Vec<u32>> =
        r.ids.iter().map(|row| row.iter().map(|&x| x + 40).collect()).collect();
    let ids = Tensor::new(ids, &Device::Cpu).unwrap();
    let input = whole_input(&r, &ids, &[0, 1, 2]);
    for (cfg, _) in configs() {
        let est = estimate(&model, &cfg, &input, RngKey::new(1), 64).unwrap();
        let seq = est.sequence.to_vec1::<f32>().unwrap();
        assert!(seq.iter().all(|x| x.is_finite() && *x < 0.0), "{cfg:?}: {seq:?}");
        let grads = est.sequence.sum_all().unwrap().backward().unwrap();
        let vars = model.varmap().expect("trainable").all_vars();
        let reached = vars.iter().filter(|v| grads.get(v.as_tensor()).is_some()).count();
        assert_eq!(reached, vars.len(), "{cfg:?}: gradients reach every weight");
    }
    let bad = [
        (EstimatorConfig::OneStep { prompt_mask_prob: 1.5 }, "prompt_mask_prob"),
        (
            EstimatorConfig::Coupled { t_min: 0.9, t_max: 0.8, per_row_t: false, full_pass: true },
            "t_min",
        ),
        (EstimatorConfig::ElboMc { draws: 0 }, "draws"),
        (
            EstimatorConfig::Quadrature {
                rule: QuadratureRule::GaussLegendre { nodes: 6 },
                draws: 1,
            },
            "nodes",
        ),
    ];
    for (cfg, field) in bad {
        let err = estimate(&model, &cfg, &input, RngKey::new(1), 64).unwrap_err().to_string();
        assert!(err.contains(field), "{err}");
    }
}

#[test]
#[allow(clippy::needless_range_loop)] // `row` indexes the rows and their fill
fn the_fill_is_masked_at_each_pass_rate_and_never_scored() {
    let r = rows();
    let ids = ids_tensor(&r);
    let input = whole_input(&r, &ids, &[0, 1, 2]);
    let fill = &r.fill;
    let fill_of = |row: usize| (0..T).filter(move |&j| fill[row][j]);
    // Quadrature node masking rates k/L, and how often the fill was masked, for row 1 (L = 5).
    let gl3 =
        EstimatorConfig::Quadrature { rule: QuadratureRule::GaussLegendre { nodes: 3 }, draws: 1 };
    let (mut masked, mut seen) = ([0usize; 3], [0usize; 3]);
    for seed in 0..400 {
        let key = RngKey::new(seed);
        for (cfg, _) in configs() {
            let passes = draw_passes(&cfg, &input, key).unwrap();
            for row in 0..3 {
                for pass in &passes {
                    assert!(fill_of(row).all(|j| pass.weight[row][j] == 0.0), "{cfg:?}");
                }
                match cfg {
                    EstimatorConfig::OneStep { .. } => {
                        assert!(fill_of(row).all(|j| passes[0].masked[row][j]));
                    }
                    // Each draw's pair splits the fill as it splits the completion.
                    EstimatorConfig::ElboMc { .. } => {
                        for pair in passes.chunks(2) {
                            assert!(fill_of(row)
                                .all(|j| pair[0].masked[row][j] != pair[1].masked[row][j]));
                        }
                    }
                    _ => {}
                }
            }
        }
        let passes = draw_passes(&gl3, &input, key).unwrap();
        for (n, pass) in passes.iter().enumerate() {
            masked[n] += fill_of(1).filter(|&j| pass.masked[1][j]).count();
            seen[n] += fill_of(1).count();
        }
    }
    // Row 1 has L = 5: nodes 0.113, 0.5, 0.887 mask k = round(5 t) = 1, 3 (2.5 rounds away
    // from zero), 4 positions, so the fill is masked at 1/5, 3/5, 4/5.
    for (n, want) in [0.2, 0.6, 0.8].into_iter().enumerate() {
        let got = masked[n] as f64 / seen[n] as f64;
        let se = (want * (1.0 - want) / seen[n] as f64).sqrt();
        assert!((got - want).abs() < 4.0 * se, "node {n}: fill masked at {got}, want {want}");
    }
}
