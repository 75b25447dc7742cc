//! The keyed masks and weights of every estimator's passes, on the host.

use drift_core::rng::RngKey;

use super::{EstimateInput, EstimatorConfig};
use crate::error::{DllmError, Result};

/// One model pass over every row: which positions are masked and the weight of each
/// position's `log p(y_j | masked sequence)` in the estimate (0 where it does not count).
#[derive(Debug, Clone, PartialEq)]
pub struct Pass {
    /// `[B][T]`: masked positions.
    pub masked: Vec<Vec<bool>>,
    /// `[B][T]`: weights of the per-token log-probs.
    pub weight: Vec<Vec<f32>>,
}

impl Pass {
    fn empty(b: usize, t: usize) -> Self {
        Self { masked: vec![vec![false; t]; b], weight: vec![vec![0.0; t]; b] }
    }
}

/// The passes of `cfg` for `input` under `key` (see the module docs for each estimator).
/// Pure in `(key, rows[b], completion[b], prompt[b])` row by row: a row's masks do not
/// depend on its batch-mates.
pub fn draw_passes(
    cfg: &EstimatorConfig,
    input: &EstimateInput<'_>,
    key: RngKey,
) -> Result<Vec<Pass>> {
    let (b, t) = input.ids.dims2()?;
    if input.completion.len() != b
        || input.rows.len() != b
        || input.completion.iter().any(|r| r.len() != t)
        || !(input.prompt.is_empty() || input.prompt.len() == b)
        || !(input.fill.is_empty() || input.fill.len() == b)
        || input.fill.iter().any(|r| r.len() != t)
    {
        return Err(DllmError::Input {
            name: "completion / prompt / fill / rows",
            got: format!(
                "{} completion rows, {} prompt rows, {} fill rows, {} row ids",
                input.completion.len(),
                input.prompt.len(),
                input.fill.len(),
                input.rows.len()
            ),
            expected: format!("{b} of each ({b} rows of length {t}; prompt and fill may be empty)"),
        });
    }
    let mut passes = vec![Pass::empty(b, t); cfg.passes_per_row()];
    for r in 0..b {
        let row_key = key.row(input.rows[r]);
        let positions: Vec<usize> = (0..t).filter(|&j| input.completion[r][j]).collect();
        let prompt: &[bool] = input.prompt.get(r).map_or(&[], Vec::as_slice);
        let fill: Vec<usize> = input
            .fill
            .get(r)
            .map_or(Vec::new(), |f| (0..t).filter(|&j| f[j] && !input.completion[r][j]).collect());
        let row = RowPasses {
            key: row_key,
            call_key: key,
            positions: &positions,
            fill: &fill,
            prompt,
            t,
        };
        for (k, (masked, weight)) in row.draw(cfg).into_iter().enumerate() {
            passes[k].masked[r] = masked;
            passes[k].weight[r] = weight;
        }
    }
    Ok(passes)
}

/// The passes of one row.
struct RowPasses<'a> {
    key: RngKey,
    /// The call's key without the row (coupled-GRPO's one `t` per call).
    call_key: RngKey,
    /// Completion positions `C` (`L = |C|`).
    positions: &'a [usize],
    /// Fill positions `F` (after the completion): masked at each pass's rate, never scored.
    fill: &'a [usize],
    prompt: &'a [bool],
    t: usize,
}

type RowPass = (Vec<bool>, Vec<f32>);

impl RowPasses<'_> {
    /// A pass that masks and scores `masked` with `weight` and masks (unscored) `fill`.
    fn pass(&self, masked: &[usize], weight: f64, fill: &[usize]) -> RowPass {
        let mut m = vec![false; self.t];
        let mut w = vec![0f32; self.t];
        for &j in masked {
            m[j] = true;
            w[j] = weight as f32;
        }
        for &j in fill {
            m[j] = true;
        }
        (m, w)
    }

    /// The fill split by a keyed coin of probability `rate` per position: (masked, kept).
    fn split_fill(&self, key: RngKey, rate: f64) -> (Vec<usize>, Vec<usize>) {
        let u = key.uniform_f64_vec(self.t);
        self.fill.iter().partition(|&&j| u[j] < rate)
    }

    /// `C` in a random order keyed by `key`.
    fn shuffled(&self, key: RngKey) -> Vec<usize> {
        let perm = key.permutation_vec(self.positions.len());
        perm.into_iter().map(|i| self.positions[i as usize]).collect()
    }

    fn draw(&self, cfg: &EstimatorConfig) -> Vec<RowPass> {
        let l = self.positions.len();
        match *cfg {
            EstimatorConfig::OneStep { prompt_mask_prob } => {
                let mut pass = self.pass(self.positions, 1.0, self.fill);
                let u = self.key.stream("estimate/one_step_prompt").uniform_f64_vec(self.t);
                for (j, &real) in self.prompt.iter().enumerate() {
                    if real && u[j] < prompt_mask_prob {
                        pass.0[j] = true;
                    }
                }
                vec![pass]
            }
            EstimatorConfig::Coupled { t_min, t_max, per_row_t, full_pass } => {
                let t_key = if per_row_t { self.key } else { self.call_key.row(u64::MAX) };
                let u = t_key.stream("estimate/coupled_t").uniform_f64_vec(1)[0];
                let t = t_min + (t_max - t_min) * u;
                let r = self.key.stream("estimate/coupled_mask").uniform_f64_vec(self.t);
                let (a, not_a): (Vec<usize>, Vec<usize>) =
                    self.positions.iter().partition(|&&j| r[j] < t);
                // DiffuCoder draws one matrix over the whole generated region.
                let (fill_a, fill_not_a): (Vec<usize>, Vec<usize>) =
                    self.fill.iter().partition(|&&j| r[j] < t);
                let mut out = Vec::new();
                if full_pass {
                    out.push(self.pass(self.positions, 0.5, self.fill));
                }
                out.push(self.pass(&a, 0.5 / t, &fill_a));
                out.push(self.pass(&not_a, 0.5 / (1.0 - t), &fill_not_a));
                out
            }
            EstimatorConfig::ElboMc { draws } => {
                let k0 = self.key.stream("estimate/elbo_k0").uniform_f64_vec(1)[0] * (l + 1) as f64;
                let mut out = Vec::new();
                for d in 0..draws {
                    // Stratified counts: x_d = ⌊k0 + d(L+1)/D⌋ mod (L+1), uniform on 0..=L.
                    let x =
                        (k0 + d as f64 * (l + 1) as f64 / draws as f64).floor() as usize % (l + 1);
                    let order = self.shuffled(self.key.stream("estimate/elbo_perm").draw(d as u64));
                    let scale = 0.5 / draws as f64 * (l + 1) as f64;
                    let w_in = if x > 0 { scale / x as f64 } else { 0.0 };
                    let w_out = if x < l { scale / (l - x) as f64 } else { 0.0 };
                    let rate = if l > 0 { x as f64 / l as f64 } else { 0.0 };
                    let fill_key = self.key.stream("estimate/elbo_fill").draw(d as u64);
                    let (fill_in, fill_out) = self.split_fill(fill_key, rate);
                    out.push(self.pass(&order[..x], w_in, &fill_in));
                    out.push(self.pass(&order[x..], w_out, &fill_out));
                }
                out
            }
            EstimatorConfig::Quadrature { rule, draws } => {
                let mut out = Vec::new();
                for (n, (t_n, w_n)) in rule.nodes().into_iter().enumerate() {
                    for d in 0..draws {
                        if l == 0 {
                            out.push(self.pass(&[], 0.0, &[]));
                            continue;
                        }
                        // k = round(t_n L) in 1..=L; weight 1/t̂ with the realised t̂ = k/L.
                        let k = ((t_n * l as f64).round() as usize).clamp(1, l);
                        let draw = (n * draws + d) as u64;
                        let order = self.shuffled(self.key.stream("estimate/gdpo_perm").draw(draw));
                        let w = w_n / draws as f64 * l as f64 / k as f64;
                        let fill_key = self.key.stream("estimate/gdpo_fill").draw(draw);
                        let (fill_in, _) = self.split_fill(fill_key, k as f64 / l as f64);
                        out.push(self.pass(&order[..k], w, &fill_in));
                    }
                }
                out
            }
        }
    }
}
