//! Quadrature rules on `[0, 1]` for GDPO's semi-deterministic ELBO.

use serde::{Deserialize, Serialize};

/// A rule for `∫₀¹ f(t) dt ≈ Σ_n w_n f(t_n)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum QuadratureRule {
    /// Gauss–Legendre with `nodes` (1–5) nodes: exact for polynomials of degree `2n − 1`.
    GaussLegendre {
        /// Number of nodes. GDPO: 2 (3 for Countdown).
        nodes: usize,
    },
    /// Simpson's rule: `t = 0, ½, 1` with weights `1/6, 4/6, 1/6` (the `t = 0` node is
    /// evaluated with one masked position, the limit of `(1/t) E[Σ_masked lp]`).
    Simpson,
}

impl Default for QuadratureRule {
    fn default() -> Self {
        Self::GaussLegendre { nodes: 2 }
    }
}

impl QuadratureRule {
    /// The `(t_n, w_n)` pairs on `[0, 1]`, weights summing to 1.
    pub fn nodes(&self) -> Vec<(f64, f64)> {
        match *self {
            Self::GaussLegendre { nodes } => gauss_legendre(nodes),
            Self::Simpson => simpson(),
        }
    }
}

/// Gauss–Legendre nodes and weights mapped from `[−1, 1]` to `[0, 1]`: `t = (x + 1)/2`,
/// `w/2` (Abramowitz & Stegun 25.4.29). Empty outside 1–5 nodes.
pub fn gauss_legendre(n: usize) -> Vec<(f64, f64)> {
    let on_pm1: Vec<(f64, f64)> = match n {
        1 => vec![(0.0, 2.0)],
        2 => {
            let x = 1.0 / 3f64.sqrt();
            vec![(-x, 1.0), (x, 1.0)]
        }
        3 => {
            let x = (3.0f64 / 5.0).sqrt();
            vec![(-x, 5.0 / 9.0), (0.0, 8.0 / 9.0), (x, 5.0 / 9.0)]
        }
        4 => {
            let a = (3.0 / 7.0 - 2.0 / 7.0 * (6.0f64 / 5.0).sqrt()).sqrt();
            let b = (3.0 / 7.0 + 2.0 / 7.0 * (6.0f64 / 5.0).sqrt()).sqrt();
            let wa = (18.0 + 30f64.sqrt()) / 36.0;
            let wb = (18.0 - 30f64.sqrt()) / 36.0;
            vec![(-b, wb), (-a, wa), (a, wa), (b, wb)]
        }
        5 => {
            let s = 2.0 * (10.0f64 / 7.0).sqrt();
            let a = (5.0 - s).sqrt() / 3.0;
            let b = (5.0 + s).sqrt() / 3.0;
            let wa = (322.0 + 13.0 * 70f64.sqrt()) / 900.0;
            let wb = (322.0 - 13.0 * 70f64.sqrt()) / 900.0;
            vec![(-b, wb), (-a, wa), (0.0, 128.0 / 225.0), (a, wa), (b, wb)]
        }
        _ => Vec::new(),
    };
    on_pm1.into_iter().map(|(x, w)| ((x + 1.0) / 2.0, w / 2.0)).collect()
}

/// Simpson's rule on `[0, 1]`.
pub fn simpson() -> Vec<(f64, f64)> {
    vec![(0.0, 1.0 / 6.0), (0.5, 4.0 / 6.0), (1.0, 1.0 / 6.0)]
}
