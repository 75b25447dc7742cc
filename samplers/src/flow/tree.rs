//! Tree rollouts (BranchGRPO, Li et al., arXiv 2509.06040): one root noise per prompt, and at
//! each split step every live node branches into `b` children that share their parent's model
//! evaluation (the same transition mean) and differ only in their noise. Prefixes are computed
//! once for all their descendants, which is where BranchGRPO's saving over independent
//! Flow-GRPO rollouts comes from.
//!
//! Level `i` holds the `L_i` live nodes of every tree before step `i` (level 0: the roots,
//! level `N`: the leaves). Step `i` is one batched model call over all `L_i` nodes of all
//! prompts; at a split step each node's transition mean is repeated for its `b` children, at
//! any other step every node advances by one transition. Every edge is recorded — parent,
//! depth, step, child latent, mean, std and log-probability — so a trainer can re-score any
//! subset of edges ([`super::transitions_log_prob`] on the recorded latents).
//!
//! The noise of node `n` at step `i` is drawn under `key.iteration(i).row(id(n))`, where a root
//! has its prompt's global row id and child `c` of node `n` at a split has id `id(n)·b + c`: a
//! tree does not depend on its batch-mates, and a tree with no split steps is exactly the
//! [`super::rollout_sde`] rollout of the same rows.

use candle_core::{DType, Tensor};
use drift_core::rng::RngKey;
use serde::{Deserialize, Serialize};

use super::error::{FlowError, Result};
use super::sampler::RolloutConfig;
use super::schedule::Schedule;
use super::step::{gaussian_log_prob, Next, StepKind};
use super::velocity::{evaluations_per_call, guided_velocity, Guidance, VelocityField};

/// Where and how a rollout tree branches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TreeConfig {
    /// Steps whose transition splits every live node into `branching` children, each a
    /// stochastic step of the rollout. Default `[0, 3, 6]` (three splits over a 10-step
    /// schedule: 8 leaves per prompt at `b = 2`).
    pub split_steps: Vec<usize>,
    /// Children per split, `b ≥ 1`. Default 2 (BranchGRPO's binary tree); `b = 1` splits
    /// nothing, so the tree is the flat [`super::rollout_sde`] rollout of its roots.
    pub branching: usize,
    /// Multiplier `s` of the transition's std at split steps: the children are drawn from
    /// `N(μ, (s·std)²)`, and their log-probability is taken under that density. Default 1
    /// (the step's own SDE noise).
    pub split_noise: f64,
}

impl Default for TreeConfig {
    fn default() -> Self {
        Self { split_steps: vec![0, 3, 6], branching: 2, split_noise: 1.0 }
    }
}

impl TreeConfig {
    /// The leaves each root ends with: `b^(number of split steps)`.
    pub fn leaves_per_root(&self) -> usize {
        self.branching.pow(self.split_steps.len() as u32)
    }

    /// Checks the config against a schedule of `steps` steps and the rollout's SDE window.
    pub fn validate(&self, steps: usize, rollout: &RolloutConfig) -> Result<()> {
        let bad =
            |field, value: String, expected| Err(FlowError::Config { field, value, expected });
        if self.branching == 0 {
            return bad("tree.branching", self.branching.to_string(), "at least 1 child");
        }
        if !(self.split_noise > 0.0 && self.split_noise.is_finite()) {
            return bad("tree.split_noise", self.split_noise.to_string(), "a finite number > 0");
        }
        let sorted = self.split_steps.windows(2).all(|w| w[0] < w[1]);
        if !sorted || self.split_steps.iter().any(|&s| s >= steps) {
            return bad(
                "tree.split_steps",
                format!("{:?}", self.split_steps),
                "distinct steps in increasing order, each below the schedule's step count",
            );
        }
        for &s in &self.split_steps {
            if !step_kind_at(rollout, s).is_stochastic() {
                return bad(
                    "tree.split_steps",
                    format!("{:?}", self.split_steps),
                    "split steps where the rollout's step is stochastic (inside its SDE window)",
                );
            }
        }
        Ok(())
    }
}

/// A recorded forest of rollout trees, one per prompt.
#[derive(Debug, Clone)]
pub struct TreeRollout {
    /// `latents[i]`: the live nodes before step `i`, `[L_i, …]`, detached (`latents[0]` the
    /// roots, `latents[N]` the leaves).
    pub latents: Vec<Tensor>,
    /// `parents[i][k]`: the index in level `i` of node `k` of level `i + 1`.
    pub parents: Vec<Vec<usize>>,
    /// `trees[i][k]`: the root (prompt index) of node `k` of level `i`.
    pub trees: Vec<Vec<usize>>,
    /// `depths[i]`: the splits above level `i`.
    pub depths: Vec<usize>,
    /// `means[i]`: the transition mean of each edge of step `i`, `[L_{i+1}, …]` (siblings
    /// share their parent's), detached.
    pub means: Vec<Tensor>,
    /// `log_probs[i]`: `log p(child | parent)` of each edge of step `i`, `[L_{i+1}]` f32 (NaN
    /// at ODE steps).
    pub log_probs: Vec<Tensor>,
    /// The std of each step's transition (scaled by `split_noise` at split steps).
    pub std: Vec<f64>,
    /// The SDE's `σ_t` at each step (0 at ODE steps).
    pub sigma_t: Vec<f64>,
    /// Whether step `i` was stochastic (and so can be trained).
    pub stochastic: Vec<bool>,
    /// Whether step `i` split its nodes.
    pub split: Vec<bool>,
    /// Model evaluations made: `Σ_i L_i` rows, twice under guidance.
    pub evaluations: usize,
}

impl TreeRollout {
    /// The leaves `x_N`, `[L_N, …]`, grouped by tree (tree-major, children in order).
    pub fn leaves(&self) -> &Tensor {
        self.latents.last().expect("a tree rollout has at least its roots")
    }

    /// The ancestor in level `level` of leaf `leaf` (following `parents` up).
    pub fn ancestor(&self, leaf: usize, level: usize) -> usize {
        let mut node = leaf;
        for i in (level..self.parents.len()).rev() {
            node = self.parents[i][node];
        }
        node
    }
}

fn step_kind_at(cfg: &RolloutConfig, i: usize) -> StepKind {
    match cfg.window {
        Some(w) if i < w.start || i >= w.start + w.len => StepKind::Ode,
        _ => cfg.step,
    }
}

fn index(rows: &[usize], device: &candle_core::Device) -> Result<Tensor> {
    let v: Vec<u32> = rows.iter().map(|&r| r as u32).collect();
    Ok(Tensor::from_vec(v, rows.len(), device)?)
}

/// Samples one rollout tree per row of `x_init` (`[P, …]` root noises; `cond` and the
/// guidance's `uncond` hold `P` rows), recording every edge. `rows` are the roots' global row
/// ids (the noise keys).
#[allow(clippy::too_many_arguments)] // each argument is a distinct part of the rollout
pub fn rollout_tree<M: VelocityField<Cond = Tensor>>(
    model: &M,
    x_init: &Tensor,
    cond: &Tensor,
    schedule: &Schedule,
    cfg: &RolloutConfig,
    tree: &TreeConfig,
    guidance: Option<&Guidance<'_, Tensor>>,
    key: RngKey,
    rows: &[u64],
) -> Result<TreeRollout> {
    cfg.step.validate()?;
    tree.validate(schedule.steps(), cfg)?;
    let p = x_init.dim(0)?;
    if rows.len() != p {
        return Err(FlowError::Config {
            field: "rows",
            value: rows.len().to_string(),
            expected: "one global row id per root of x_init",
        });
    }
    let device = x_init.device().clone();
    let sigma_1 = f64::from(schedule.sigmas()[1.min(schedule.steps())]);
    let elems = x_init.elem_count() / p.max(1);
    let b = tree.branching;

    let mut x = x_init.to_dtype(DType::F32)?.detach();
    let mut ids: Vec<u64> = rows.to_vec();
    let mut tree_of: Vec<usize> = (0..p).collect();
    let mut out = TreeRollout {
        latents: vec![x.clone()],
        parents: Vec::new(),
        trees: vec![tree_of.clone()],
        depths: vec![0],
        means: Vec::new(),
        log_probs: Vec::new(),
        std: Vec::new(),
        sigma_t: Vec::new(),
        stochastic: Vec::new(),
        split: Vec::new(),
        evaluations: 0,
    };
    for i in 0..schedule.steps() {
        let kind = step_kind_at(cfg, i);
        let pair = schedule.pair(i)?;
        // One batched model call over every live node of every tree.
        let live = ids.len();
        let idx = index(&tree_of, &device)?;
        let cond_l = cond.index_select(&idx, 0)?;
        let uncond_l = guidance.map(|g| g.uncond.index_select(&idx, 0)).transpose()?;
        let guide_l =
            guidance.zip(uncond_l.as_ref()).map(|(g, u)| Guidance { uncond: u, scale: g.scale });
        let sigma = Tensor::full(pair.0 as f32, live, &device)?;
        let v = guided_velocity(model, &x, &sigma, &cond_l, guide_l.as_ref())?.detach();
        out.evaluations += live * evaluations_per_call(guidance);

        let splits = tree.split_steps.contains(&i);
        let (parents, child_ids): (Vec<usize>, Vec<u64>) = if splits {
            (0..live)
                .flat_map(|k| (0..b).map(move |c| (k, c)))
                .map(|(k, c)| (k, ids[k].wrapping_mul(b as u64).wrapping_add(c as u64)))
                .unzip()
        } else {
            ((0..live).collect(), ids.clone())
        };
        let (xs, vs) = if splits {
            let pidx = index(&parents, &device)?;
            (x.index_select(&pidx, 0)?, v.index_select(&pidx, 0)?)
        } else {
            (x.clone(), v)
        };
        let scale = if splits { tree.split_noise } else { 1.0 };
        let eps = key.iteration(i as u64).normal_rows(&child_ids, elems, DType::F32, &device)?;
        let eps = (eps.reshape(xs.shape())? * scale)?;
        let t = kind.step(&xs, &vs, pair, sigma_1, Next::Noise(&eps), cfg.log_prob)?;
        let std = t.std * scale;
        let log_prob = if splits && scale != 1.0 && std > 0.0 {
            gaussian_log_prob(&t.next, &t.mean, std, cfg.log_prob)?
        } else {
            t.log_prob
        };
        x = t.next;
        tree_of = parents.iter().map(|&k| tree_of[k]).collect();
        ids = child_ids;
        out.latents.push(x.clone());
        out.parents.push(parents);
        out.trees.push(tree_of.clone());
        out.depths.push(out.depths[i] + usize::from(splits));
        out.means.push(t.mean.detach());
        out.log_probs.push(log_prob.detach());
        out.std.push(std);
        out.sigma_t.push(t.sigma_t);
        out.stochastic.push(kind.is_stochastic());
        out.split.push(splits);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use candle_core::Device;

    use super::super::{rollout_sde, transition_log_prob, ScheduleConfig, Window};
    use super::*;

    /// `v = x/2 + c`: a field whose output depends on each row's conditioning, so a node given
    /// another tree's prompt would show.
    struct Shifted;

    impl VelocityField for Shifted {
        type Cond = Tensor;
        fn velocity(&self, x: &Tensor, _: &Tensor, c: &Tensor) -> candle_core::Result<Tensor> {
            (x * 0.5)? + c
        }
    }

    fn schedule(steps: usize) -> Schedule {
        Schedule::new(&ScheduleConfig { steps, shift: 3.0, ..ScheduleConfig::default() }).unwrap()
    }

    fn roots(p: usize) -> (Tensor, Tensor) {
        let dev = Device::Cpu;
        let x = RngKey::new(5).normal((p, 6), DType::F32, &dev).unwrap();
        let c = Tensor::arange(0f32, (p * 6) as f32, &dev).unwrap().reshape((p, 6)).unwrap();
        (x, (c * 0.1).unwrap())
    }

    fn rows2(t: &Tensor) -> Vec<Vec<f32>> {
        t.to_vec2::<f32>().unwrap()
    }

    #[test]
    fn a_tree_without_splits_is_the_flat_rollout() {
        let (x, c) = roots(3);
        let s = schedule(5);
        let cfg = RolloutConfig::default();
        let flat = TreeConfig { split_steps: vec![], ..TreeConfig::default() };
        let key = RngKey::new(9);
        let t = rollout_tree(&Shifted, &x, &c, &s, &cfg, &flat, None, key, &[4, 7, 9]).unwrap();
        let r = rollout_sde(&Shifted, &x, &c, &s, &cfg, None, key, &[4, 7, 9]).unwrap();
        for i in 0..=5 {
            assert_eq!(rows2(&t.latents[i]), rows2(&r.latents[i]), "level {i}");
        }
        let lp: Vec<Vec<f32>> = (0..5).map(|i| t.log_probs[i].to_vec1().unwrap()).collect();
        let flat_lp = r.log_probs.t().unwrap().to_vec2::<f32>().unwrap();
        assert_eq!(lp, flat_lp);
        assert_eq!(t.evaluations, r.evaluations * 3, "one row per live node per step");
    }

    #[test]
    fn siblings_share_their_parents_mean_and_differ_in_noise() {
        let (x, c) = roots(3);
        let s = schedule(4);
        let tree = TreeConfig { split_steps: vec![0, 2], branching: 2, split_noise: 1.0 };
        let t = rollout_tree(
            &Shifted,
            &x,
            &c,
            &s,
            &RolloutConfig::default(),
            &tree,
            None,
            RngKey::new(1),
            &[0, 1, 2],
        )
        .unwrap();
        assert_eq!(tree.leaves_per_root(), 4);
        assert_eq!(t.leaves().dim(0).unwrap(), 12);
        assert_eq!(t.trees[4], vec![0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]);
        assert_eq!(t.depths, vec![0, 1, 1, 2, 2]);
        assert_eq!(t.parents[0], vec![0, 0, 1, 1, 2, 2]);
        assert_eq!(t.parents[1], vec![0, 1, 2, 3, 4, 5]);
        // Live nodes before each step: 3, 6, 6, 12.
        assert_eq!(t.evaluations, 3 + 6 + 6 + 12);
        for i in [0, 2] {
            let means = rows2(&t.means[i]);
            let kids = rows2(&t.latents[i + 1]);
            for pair in (0..means.len()).step_by(2) {
                assert_eq!(means[pair], means[pair + 1], "step {i}: siblings share the mean");
                assert_ne!(kids[pair], kids[pair + 1], "step {i}: siblings differ in noise");
            }
        }
        // Leaf 5 descends from root 1 through node 2 of level 1.
        assert_eq!(t.ancestor(5, 0), 1);
        assert_eq!(t.ancestor(5, 1), 2);
    }

    #[test]
    fn every_recorded_edge_rescores_to_its_log_prob() {
        let (x, c) = roots(2);
        let s = schedule(4);
        for split_noise in [1.0, 1.5] {
            let tree = TreeConfig { split_steps: vec![1], branching: 3, split_noise };
            let cfg = RolloutConfig::default();
            let t = rollout_tree(&Shifted, &x, &c, &s, &cfg, &tree, None, RngKey::new(3), &[5, 6])
                .unwrap();
            for i in 0..4 {
                let pidx = index(&t.parents[i], &Device::Cpu).unwrap();
                let parent = t.latents[i].index_select(&pidx, 0).unwrap();
                let cond =
                    c.index_select(&index(&t.trees[i + 1], &Device::Cpu).unwrap(), 0).unwrap();
                let r = transition_log_prob(
                    &Shifted,
                    &parent,
                    &t.latents[i + 1],
                    i,
                    &s,
                    cfg.step,
                    &cond,
                    None,
                    cfg.log_prob,
                )
                .unwrap();
                let again =
                    gaussian_log_prob(&t.latents[i + 1], &r.mean, t.std[i], cfg.log_prob).unwrap();
                let (a, b): (Vec<f32>, Vec<f32>) =
                    (again.to_vec1().unwrap(), t.log_probs[i].to_vec1().unwrap());
                for (u, v) in a.iter().zip(&b) {
                    assert!(
                        (u - v).abs() < 1e-5,
                        "step {i}, split noise {split_noise}: {u} vs {v}"
                    );
                }
                assert_eq!(rows2(&r.mean), rows2(&t.means[i]), "step {i}");
            }
        }
    }

    #[test]
    fn a_tree_does_not_depend_on_its_batch_mates() {
        let (x, c) = roots(3);
        let s = schedule(4);
        let tree = TreeConfig { split_steps: vec![0, 2], ..TreeConfig::default() };
        let cfg = RolloutConfig::default();
        let all =
            rollout_tree(&Shifted, &x, &c, &s, &cfg, &tree, None, RngKey::new(2), &[10, 11, 12])
                .unwrap();
        let one = rollout_tree(
            &Shifted,
            &x.narrow(0, 2, 1).unwrap(),
            &c.narrow(0, 2, 1).unwrap(),
            &s,
            &cfg,
            &tree,
            None,
            RngKey::new(2),
            &[12],
        )
        .unwrap();
        assert_eq!(rows2(&all.leaves().narrow(0, 8, 4).unwrap()), rows2(one.leaves()));
    }

    #[test]
    fn one_child_per_split_is_the_flat_rollout() {
        let (x, c) = roots(2);
        let s = schedule(4);
        let cfg = RolloutConfig::default();
        let one = TreeConfig { split_steps: vec![0, 2], branching: 1, split_noise: 1.0 };
        let key = RngKey::new(4);
        let t = rollout_tree(&Shifted, &x, &c, &s, &cfg, &one, None, key, &[3, 8]).unwrap();
        let r = rollout_sde(&Shifted, &x, &c, &s, &cfg, None, key, &[3, 8]).unwrap();
        assert_eq!(rows2(t.leaves()), rows2(r.latents.last().unwrap()));
        assert_eq!(t.depths, vec![0, 1, 1, 2, 2], "a split with one child still counts a depth");
    }

    #[test]
    fn bad_trees_are_named() {
        let s = 10;
        let cfg =
            RolloutConfig { window: Some(Window { start: 0, len: 3 }), ..RolloutConfig::default() };
        let err = |t: TreeConfig| t.validate(s, &cfg).unwrap_err().to_string();
        assert!(err(TreeConfig {
            branching: 0,
            ..TreeConfig { split_steps: vec![0], ..TreeConfig::default() }
        })
        .contains("tree.branching"));
        assert!(err(TreeConfig { split_steps: vec![2, 1], ..TreeConfig::default() })
            .contains("increasing"));
        assert!(
            err(TreeConfig { split_steps: vec![0, 10], ..TreeConfig::default() }).contains("below")
        );
        assert!(err(TreeConfig { split_steps: vec![0, 5], ..TreeConfig::default() })
            .contains("SDE window"));
        assert!(err(TreeConfig {
            split_noise: 0.0,
            split_steps: vec![0],
            ..TreeConfig::default()
        })
        .contains("split_noise"));
        assert!(TreeConfig { split_steps: vec![0, 1, 2], ..TreeConfig::default() }
            .validate(s, &cfg)
            .is_ok());
    }
}
