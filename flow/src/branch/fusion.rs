//! BranchGRPO's reward fusion and depth-wise advantages (Li et al., arXiv 2509.06040) over a
//! recorded [`TreeRollout`].
//!
//! - **Fusion.** The leaves get the reward. Going up, a node whose step split it takes its
//!   children's rewards fused: their mean ([`Fusion::Mean`], so every node holds the mean of
//!   its leaves), or their path-probability-weighted sum with weights `softmax(α · log p(child |
//!   node))` over its children ([`Fusion::PathWeighted`]). A node that did not split has one
//!   child and takes its reward.
//! - **Depth-wise advantages.** Every trained edge (step `i`, child `k` of level `i + 1`)
//!   carries its child's fused reward and the group `(tree, i + 1)`: the nodes of one tree at
//!   one depth, a depth being the transitions from the root (the reference's node depth, one
//!   per step); the core's [`group_advantages`] normalises within those groups. The core sees
//!   group ids and nothing else.

use candle_core::{Device, Tensor};
use drift_core::advantage::{group_advantages, AdvantageConfig, Advantages};
use drift_core::groups::Groups;
use drift_samplers::flow::TreeRollout;
use serde::{Deserialize, Serialize};

use crate::error::{FlowModelError, Result};

/// How the rewards of a node's children make the node's reward.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Fusion {
    /// The children's mean: every node holds the mean reward of its leaves (the default).
    Mean,
    /// `Σ_c w_c r_c` with `w = softmax(α · log p(c | node))` over the children.
    PathWeighted {
        /// The temperature `α` of the path probabilities (0 = the mean).
        alpha: f64,
    },
}

/// The reward of every node of every level: `out[N]` the leaves' (`leaf_rewards`, in leaf
/// order), `out[i]` level `i`'s by [`Fusion`] over its children. Reads each split step's
/// log-probabilities once from the device (path weighting only).
pub fn fuse_rewards(
    tree: &TreeRollout,
    leaf_rewards: &[f64],
    fusion: Fusion,
) -> Result<Vec<Vec<f64>>> {
    let n = tree.parents.len();
    let leaves = tree.trees[n].len();
    if leaf_rewards.len() != leaves {
        return Err(FlowModelError::Config {
            field: "leaf_rewards",
            value: leaf_rewards.len().to_string(),
            expected: format!("one reward per leaf ({leaves})"),
        });
    }
    let mut levels = vec![Vec::new(); n + 1];
    levels[n] = leaf_rewards.to_vec();
    for i in (0..n).rev() {
        let parents = &tree.parents[i];
        let width = tree.trees[i].len();
        let weights: Vec<f64> = match fusion {
            Fusion::PathWeighted { alpha } if tree.split[i] => {
                tree.log_probs[i].to_vec1::<f32>()?.iter().map(|&l| alpha * f64::from(l)).collect()
            }
            _ => vec![0.0; parents.len()],
        };
        // Softmax of the weights within each parent's children, then the weighted sum.
        let mut max = vec![f64::NEG_INFINITY; width];
        for (k, &p) in parents.iter().enumerate() {
            max[p] = max[p].max(weights[k]);
        }
        let (mut num, mut den) = (vec![0.0; width], vec![0.0; width]);
        for (k, &p) in parents.iter().enumerate() {
            let w = (weights[k] - max[p]).exp();
            num[p] += w * levels[i + 1][k];
            den[p] += w;
        }
        levels[i] = num.iter().zip(&den).map(|(a, b)| a / b).collect();
    }
    Ok(levels)
}

/// The trainable edges of a tree rollout, with their rewards and depth-wise groups.
#[derive(Debug, Clone, PartialEq)]
pub struct EdgeBatch {
    /// The step of each edge.
    pub steps: Vec<usize>,
    /// The edge's child: its index in level `step + 1`.
    pub children: Vec<usize>,
    /// The child's fused reward.
    pub rewards: Vec<f32>,
    /// The child's tree (its prompt index).
    pub trees: Vec<usize>,
    /// The splits above the child's level.
    pub depths: Vec<usize>,
    /// The splits above the leaves, `D`.
    pub last_depth: usize,
    /// The last step that split (none for a tree without splits): width pruning ranks the
    /// edges after it.
    pub last_split: Option<usize>,
    /// Levels per tree, `N + 1` (the roots' level 0 to the leaves' level `N`).
    pub levels: usize,
    /// The group `tree · (N + 1) + (step + 1)` of the edge: its tree and its child's level.
    pub groups: Vec<u32>,
    /// `P · (N + 1)` groups in all.
    pub num_groups: usize,
}

impl EdgeBatch {
    /// Regroups the edges so that `trees_per_group` consecutive trees (the several trees of
    /// one prompt) share their level groups: group `⌊tree / r⌋ · (N + 1) + step + 1`.
    pub fn group_trees(&mut self, trees_per_group: usize) {
        let r = trees_per_group.max(1);
        let levels = self.levels;
        self.groups = self
            .trees
            .iter()
            .zip(&self.steps)
            .map(|(&t, &i)| ((t / r) * levels + i + 1) as u32)
            .collect();
        self.num_groups = (self.num_groups / levels).div_ceil(r) * levels;
    }
}

/// Every edge of the steps in `steps` (each a stochastic step of the tree), with its child's
/// reward from `node_rewards` ([`fuse_rewards`]) and its `(tree, child level)` group.
pub fn edges(tree: &TreeRollout, node_rewards: &[Vec<f64>], steps: &[usize]) -> Result<EdgeBatch> {
    let n = tree.parents.len();
    let levels = n + 1;
    let roots = tree.trees[0].len();
    let mut out = EdgeBatch {
        steps: Vec::new(),
        children: Vec::new(),
        rewards: Vec::new(),
        trees: Vec::new(),
        depths: Vec::new(),
        last_depth: tree.depths[n],
        last_split: (0..n).rev().find(|&i| tree.split[i]),
        levels,
        groups: Vec::new(),
        num_groups: roots * levels,
    };
    for &i in steps {
        if i >= n || !tree.stochastic[i] {
            return Err(FlowModelError::Config {
                field: "steps",
                value: i.to_string(),
                expected: format!("a stochastic step of the tree (below {n})"),
            });
        }
        let depth = tree.depths[i + 1];
        for (k, &t) in tree.trees[i + 1].iter().enumerate() {
            out.steps.push(i);
            out.children.push(k);
            out.rewards.push(node_rewards[i + 1][k] as f32);
            out.trees.push(t);
            out.depths.push(depth);
            out.groups.push((t * levels + i + 1) as u32);
        }
    }
    Ok(out)
}

/// Depth-wise advantages of `batch`'s edges: [`group_advantages`] of their rewards within their
/// `(tree, depth)` groups (a depth per step: each group holds a level's nodes once).
pub fn depth_advantages(
    batch: &EdgeBatch,
    cfg: &AdvantageConfig,
    device: &Device,
) -> Result<Advantages> {
    let rewards = Tensor::from_vec(batch.rewards.clone(), batch.rewards.len(), device)?;
    let groups = Groups::new(&batch.groups, batch.num_groups, device)?;
    Ok(group_advantages(&rewards, &groups, cfg)?)
}

#[cfg(test)]
mod tests {
    use drift_core::advantage::{Baseline, Scale};
    use drift_core::rng::RngKey;
    use drift_samplers::flow::{
        rollout_tree, RolloutConfig, Schedule, ScheduleConfig, TreeConfig, VelocityField,
    };

    use super::*;

    struct Still;

    impl VelocityField for Still {
        type Cond = Tensor;
        fn velocity(&self, x: &Tensor, _: &Tensor, c: &Tensor) -> candle_core::Result<Tensor> {
            (x * 0.5)? + c
        }
    }

    /// Two roots, splits at steps 0 and 2 of 3 (b = 2): 4 leaves per root.
    fn forest() -> TreeRollout {
        let dev = Device::Cpu;
        let s =
            Schedule::new(&ScheduleConfig { steps: 3, shift: 3.0, ..ScheduleConfig::default() })
                .unwrap();
        let x = RngKey::new(1).normal((2, 4), candle_core::DType::F32, &dev).unwrap();
        let c = Tensor::zeros((2, 4), candle_core::DType::F32, &dev).unwrap();
        let tree = TreeConfig { split_steps: vec![0, 2], branching: 2, split_noise: 1.0 };
        rollout_tree(
            &Still,
            &x,
            &c,
            &s,
            &RolloutConfig::default(),
            &tree,
            None,
            RngKey::new(2),
            &[0, 1],
        )
        .unwrap()
    }

    #[test]
    fn mean_fusion_gives_every_node_the_mean_of_its_leaves() {
        let t = forest();
        let leaves = [1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0];
        let r = fuse_rewards(&t, &leaves, Fusion::Mean).unwrap();
        assert_eq!(r[3], leaves.to_vec());
        assert_eq!(r[2], vec![0.5, 0.0, 1.0, 0.5]);
        assert_eq!(r[1], r[2], "step 1 does not split");
        assert_eq!(r[0], vec![0.25, 0.75]);
        // α = 0 weights every child equally: the mean again.
        let flat = fuse_rewards(&t, &leaves, Fusion::PathWeighted { alpha: 0.0 }).unwrap();
        assert_eq!(flat, r);
    }

    #[test]
    fn path_weighting_is_a_softmax_over_the_childrens_log_probs() {
        let t = forest();
        let leaves = [1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0];
        let alpha = 0.7;
        let r = fuse_rewards(&t, &leaves, Fusion::PathWeighted { alpha }).unwrap();
        let lp: Vec<f64> =
            t.log_probs[2].to_vec1::<f32>().unwrap().iter().map(|&l| f64::from(l)).collect();
        // Node 0 of level 2: children 0 (reward 1) and 1 (reward 0).
        let (w0, w1) = ((alpha * lp[0]).exp(), (alpha * lp[1]).exp());
        assert!((r[2][0] - w0 / (w0 + w1)).abs() < 1e-12, "{} vs {}", r[2][0], w0 / (w0 + w1));
        assert!(fuse_rewards(&t, &leaves[..3], Fusion::Mean)
            .unwrap_err()
            .to_string()
            .contains("one reward per leaf"));
    }

    #[test]
    fn edges_are_grouped_by_tree_and_depth_and_normalised_there() {
        let t = forest();
        let leaves = [1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0];
        let r = fuse_rewards(&t, &leaves, Fusion::Mean).unwrap();
        let e = edges(&t, &r, &[0, 2]).unwrap();
        // Step 0: 4 children at level 1; step 2: 8 leaves at level 3. Levels 0..=3, 4 per tree.
        assert_eq!(e.num_groups, 8);
        assert_eq!(e.groups, vec![1, 1, 5, 5, 3, 3, 3, 3, 7, 7, 7, 7]);
        assert_eq!(e.last_split, Some(2));
        assert_eq!(e.trees, vec![0, 0, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1]);
        assert_eq!(e.depths, vec![1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2]);
        assert_eq!(e.last_depth, 2);
        assert_eq!(e.rewards, vec![0.5, 0.0, 1.0, 0.5, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0]);
        let cfg = AdvantageConfig {
            baseline: Baseline::Mean,
            scale: Scale::None,
            ..AdvantageConfig::default()
        };
        let a = depth_advantages(&e, &cfg, &Device::Cpu).unwrap().values.to_vec1::<f32>().unwrap();
        // Mean-centred within each (tree, depth): tree 0 depth 1 has mean 0.25, depth 2 0.25.
        let expect = [0.25, -0.25, 0.25, -0.25, 0.75, -0.25, -0.25, -0.25, 0.25, 0.25, -0.75, 0.25];
        for (x, y) in a.iter().zip(expect) {
            assert!((x - y).abs() < 1e-6, "{a:?}");
        }
        assert!(edges(&t, &r, &[3]).unwrap_err().to_string().contains("stochastic step"));
        // Steps 0 and 1 both lie below the first split, but each step's nodes are their own
        // group: tree 0's two nodes (0.5, 0) give ±0.5/0.3536 = ±0.7071 at both steps with
        // the unbiased std (pooling the two steps' four values would give ±0.866).
        let all = edges(&t, &r, &[0, 1, 2]).unwrap();
        let unbiased = AdvantageConfig { eps: 0.0, clip: None, ..AdvantageConfig::branch_grpo() };
        let a = depth_advantages(&all, &unbiased, &Device::Cpu)
            .unwrap()
            .values
            .to_vec1::<f32>()
            .unwrap();
        for k in [0, 4] {
            assert!(
                (a[k] - 0.70710677).abs() < 1e-6 && (a[k + 1] + 0.70710677).abs() < 1e-6,
                "{a:?}"
            );
        }
        // Both trees as one prompt's: a group per depth, the trees' nodes together.
        let mut both = e.clone();
        both.group_trees(2);
        assert_eq!(both.num_groups, 4);
        assert_eq!(both.groups, vec![1, 1, 1, 1, 3, 3, 3, 3, 3, 3, 3, 3]);
    }
}
