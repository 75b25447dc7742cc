//! Variance of the per-sequence log-likelihood estimates on the shipped code model, at equal
//! numbers of forward passes (docs/algorithms.md §3; issue 9's measurement). Sequences: held-out
//! items with their reference solutions as completions (the corpus layout). For each
//! estimator, `R` keyed draws per sequence; reported: the mean over sequences of the
//! across-draw variance, the mean estimate, and the variance relative to the baseline of its
//! pass budget. One JSON line per case on stdout.
//!
//! - 2 passes: independent random masks (two draws of `t ~ U(0.2, 0.8)`, mask each token
//!   with probability `t`, weight `1/t`, averaged) vs the coupled pair (`A` and its
//!   complement `Ā`, unbiased weighting);
//! - 3 passes: three independent masks vs coupled with DiffuCoder's full pass (expectation
//!   1.5× the others', so its variance is also shown divided by 1.5²);
//! - 1 pass: one-step (prompt masking only: its variance is the prompt-mask noise);
//! - 2 and 4 passes: ELBO Monte Carlo (1 and 2 draws) vs Gauss–Legendre quadrature (2 nodes;
//!   4 nodes and 2 nodes × 2 draws).
//!
//! Run with `cargo bench -p drift-dllm --bench estimator_variance` (`DRIFT_BENCH_MODEL`
//! overrides the model; `DRIFT_BENCH_DRAWS` the draws per sequence, default 64).

use std::path::PathBuf;

use candle_core::{Device, Tensor};
use drift_core::rng::RngKey;
use drift_dllm::estimate::{
    draw_passes, estimate, estimate_passes, EstimateInput, EstimatorConfig, Pass, QuadratureRule,
};
use drift_dllm::grpo::{CodeTask, TextTask};
use drift_dllm::model::{DiffusionLm, LoadOptions};
use drift_dllm::pretrain_run::eos_filled;
use drift_dllm::tokenizer::{CharTokenizer, EOS_ID, PAD_ID};
use drift_rewards::worlds::TextItem;
use serde_json::json;

const GEN: usize = 106;

fn model_dir() -> PathBuf {
    std::env::var("DRIFT_BENCH_MODEL").map(PathBuf::from).unwrap_or_else(|_| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/checkpoints/dllm-code-v0")
    })
}

struct Data {
    ids: Tensor,
    completion: Vec<Vec<bool>>,
    prompt: Vec<Vec<bool>>,
    /// The EOS fill after the first EOS: masked with each pass's rate, never scored.
    fill: Vec<Vec<bool>>,
}

fn data(n: usize) -> drift_dllm::Result<Data> {
    let task = CodeTask::new()?;
    let tok = CharTokenizer::ascii();
    let items = task.eval_items(n);
    let prompts =
        items.iter().map(|i| task.prompt_ids(i)).collect::<drift_dllm::Result<Vec<_>>>()?;
    let p = prompts.iter().map(Vec::len).max().unwrap_or(0);
    let (mut ids, mut completion, mut prompt, mut fill) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (item, pr) in items.iter().zip(&prompts) {
        let target = tok.encode(&item.target())?;
        let mut row = vec![PAD_ID; p - pr.len()];
        row.extend_from_slice(pr);
        row.extend(eos_filled(&target, GEN)?);
        let first_eos = p + target.len();
        completion.push((0..p + GEN).map(|j| j >= p && j <= first_eos).collect());
        fill.push((0..p + GEN).map(|j| j > first_eos).collect());
        prompt.push((0..p + GEN).map(|j| j > p - pr.len() && j < p).collect());
        ids.push(row);
        debug_assert_eq!(ids.last().map(|r: &Vec<u32>| r[first_eos]), Some(EOS_ID));
    }
    Ok(Data { ids: Tensor::new(ids, &Device::Cpu)?, completion, prompt, fill })
}

#[allow(clippy::needless_range_loop)] // r and j index several parallel arrays
/// `k` independent masks: `t ~ U(0.2, 0.8)` per draw, each completion token masked with
/// probability `t` (and each fill position, unscored), weight `1/(k t)`.
fn independent(d: &Data, rows: &[u64], key: RngKey, k: usize) -> Vec<Pass> {
    let (b, t) = (d.completion.len(), d.completion[0].len());
    (0..k)
        .map(|draw| {
            let mut pass = Pass { masked: vec![vec![false; t]; b], weight: vec![vec![0.0; t]; b] };
            for r in 0..b {
                let key = key.row(rows[r]).draw(draw as u64).stream("bench/independent");
                let tt = 0.2 + 0.6 * key.stream("t").uniform_f64_vec(1)[0];
                let u = key.stream("mask").uniform_f64_vec(t);
                for j in 0..t {
                    if d.completion[r][j] && u[j] < tt {
                        pass.masked[r][j] = true;
                        pass.weight[r][j] = (1.0 / (k as f64 * tt)) as f32;
                    }
                    if d.fill[r][j] && u[j] < tt {
                        pass.masked[r][j] = true;
                    }
                }
            }
            pass
        })
        .collect()
}

fn main() -> drift_dllm::Result<()> {
    let dir = model_dir();
    let model = DiffusionLm::from_dir(&dir, &LoadOptions::frozen())?;
    let draws: usize =
        std::env::var("DRIFT_BENCH_DRAWS").ok().and_then(|s| s.parse().ok()).unwrap_or(64);
    let d = data(16)?;
    let rows: Vec<u64> = (0..d.completion.len() as u64).collect();
    let input = EstimateInput {
        ids: &d.ids,
        completion: &d.completion,
        prompt: &d.prompt,
        fill: &d.fill,
        rows: &rows,
        attention_mask: None,
    };
    eprintln!("model {}, {} sequences, {draws} draws each", dir.display(), rows.len());
    let gl = |nodes| QuadratureRule::GaussLegendre { nodes };
    type Case = (&'static str, usize, Option<EstimatorConfig>, usize);
    // (name, passes, estimator or None for k independent masks, k)
    let cases: [Case; 10] = [
        ("one_step", 1, Some(EstimatorConfig::one_step()), 0),
        ("independent_x2", 2, None, 2),
        (
            "coupled_pair",
            2,
            Some(EstimatorConfig::Coupled {
                t_min: 0.2,
                t_max: 0.8,
                per_row_t: true,
                full_pass: false,
            }),
            0,
        ),
        ("independent_x3", 3, None, 3),
        (
            "coupled_full",
            3,
            Some(EstimatorConfig::Coupled {
                t_min: 0.2,
                t_max: 0.8,
                per_row_t: true,
                full_pass: true,
            }),
            0,
        ),
        ("elbo_mc_1", 2, Some(EstimatorConfig::ElboMc { draws: 1 }), 0),
        ("gauss_legendre_2", 2, Some(EstimatorConfig::Quadrature { rule: gl(2), draws: 1 }), 0),
        ("elbo_mc_2", 4, Some(EstimatorConfig::ElboMc { draws: 2 }), 0),
        ("gauss_legendre_4", 4, Some(EstimatorConfig::Quadrature { rule: gl(4), draws: 1 }), 0),
        ("gauss_legendre_2x2", 4, Some(EstimatorConfig::Quadrature { rule: gl(2), draws: 2 }), 0),
    ];
    for (name, passes, cfg, k) in cases {
        let mut per_draw: Vec<Vec<f64>> = Vec::with_capacity(draws);
        for r in 0..draws as u64 {
            let key = RngKey::new(100 + r);
            let est = match cfg {
                Some(c) => {
                    debug_assert_eq!(draw_passes(&c, &input, key)?.len(), passes);
                    estimate(&model, &c, &input, key, 64)?
                }
                None => estimate_passes(&model, &input, &independent(&d, &rows, key, k), 64)?,
            };
            per_draw.push(est.sequence.to_vec1::<f32>()?.into_iter().map(f64::from).collect());
        }
        let n = rows.len();
        let (mut var, mut mean) = (0.0, 0.0);
        for s in 0..n {
            let xs: Vec<f64> = per_draw.iter().map(|v| v[s]).collect();
            let m = xs.iter().sum::<f64>() / draws as f64;
            var += xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (draws - 1) as f64 / n as f64;
            mean += m / n as f64;
        }
        println!(
            "{}",
            json!({"case": "estimator_variance", "estimator": name, "passes": passes,
                   "draws": draws, "sequences": n, "mean_estimate": mean, "mean_variance": var})
        );
    }
    Ok(())
}
