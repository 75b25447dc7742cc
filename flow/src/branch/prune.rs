//! BranchGRPO's pruning of the backward set (Li et al., arXiv 2509.06040): fewer edges are
//! trained, the forward tree is never cut (its rewards and advantages are computed on every
//! node first).
//!
//! - **Width**: among the edges of the steps after the last split step, keep per tree the
//!   `keep` fraction of nodes with the largest `|advantage|` (the nodes that carry the most
//!   signal), each with all its edges there; the split edges and everything above them are
//!   kept whole. (The reference's mode 2 keeps the best and worst `keep/2` by signed advantage
//!   over the whole batch; its mode 1 keeps the first half of each chain's steps.)
//! - **Depth**: drop every edge whose child lies at one of the listed depths, a node's depth
//!   being the reference's: the transitions from its root (the child of step `i` lies at depth
//!   `i + 1`, whether or not step `i` split). With the sliding schedule the dropped depths move
//!   one level up (towards the root) every `slide_every` iterations, counted from 1 as the
//!   reference counts them, and stop moving once the shallowest of them reaches the last split
//!   step's depth (the reference's `depth_pruning_slide`, whose stop depth is the largest split
//!   point).

use serde::{Deserialize, Serialize};

use super::fusion::EdgeBatch;
use crate::error::{FlowModelError, Result};

/// Which edges leave the backward set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PruneConfig {
    /// Fraction of each tree's last-level nodes (after the last split) whose edges are
    /// trained, those with the largest `|advantage|`; 1 keeps all (the default). The paper's
    /// width pruning keeps half.
    pub width_keep: f64,
    /// Depths whose edges are not trained, a depth being the transitions from the root (the
    /// child of step `i` lies at depth `i + 1`). Default none.
    pub drop_depths: Vec<usize>,
    /// Slide the dropped depths one level towards the root every this many iterations (the
    /// paper's sliding depth schedule), never above the last split step's depth. Default none:
    /// the listed depths every iteration.
    pub slide_every: Option<u64>,
}

impl Default for PruneConfig {
    fn default() -> Self {
        Self { width_keep: 1.0, drop_depths: Vec::new(), slide_every: None }
    }
}

impl PruneConfig {
    /// Checks the fractions and the sliding interval, naming the field at fault.
    pub fn validate(&self) -> Result<()> {
        if !(self.width_keep > 0.0 && self.width_keep <= 1.0) {
            return Err(FlowModelError::Config {
                field: "prune.width_keep",
                value: self.width_keep.to_string(),
                expected: "a fraction in (0, 1]".into(),
            });
        }
        if self.slide_every == Some(0) {
            return Err(FlowModelError::Config {
                field: "prune.slide_every",
                value: "0".into(),
                expected: "at least 1 iteration (or no value for a fixed set of depths)".into(),
            });
        }
        Ok(())
    }

    /// The depths dropped at iteration `iteration` (0-based) of a tree whose last split is step
    /// `last_split`: `drop_depths` shifted up by `⌊(iteration + 1) / slide_every⌋` levels (the
    /// reference counts iterations from 1), the shift capped so the shallowest stays at depth
    /// `last_split` or deeper.
    pub fn dropped_depths(&self, iteration: u64, last_split: usize) -> Vec<usize> {
        let Some(every) = self.slide_every else { return self.drop_depths.clone() };
        let Some(&shallowest) = self.drop_depths.iter().min() else { return Vec::new() };
        let max_shift = shallowest.saturating_sub(last_split);
        let shift =
            usize::try_from((iteration + 1) / every.max(1)).unwrap_or(usize::MAX).min(max_shift);
        self.drop_depths.iter().map(|d| d - shift).collect()
    }
}

/// The indices of `batch`'s edges that stay in the backward set, in order; `advantages[e]` is
/// edge `e`'s advantage and `drop_depths` the depths dropped this iteration
/// ([`PruneConfig::dropped_depths`]). A node's edges at every step below the last split share
/// its advantage, so a kept node keeps all of them.
pub fn kept_edges(
    batch: &EdgeBatch,
    advantages: &[f32],
    cfg: &PruneConfig,
    drop_depths: &[usize],
) -> Result<Vec<usize>> {
    cfg.validate()?;
    let n = batch.steps.len();
    if advantages.len() != n {
        return Err(FlowModelError::Config {
            field: "advantages",
            value: advantages.len().to_string(),
            expected: format!("one per edge ({n})"),
        });
    }
    let trees = &batch.trees;
    // Edges of the steps after the last split; below it a node keeps its index in every level.
    let after = |e: usize| batch.last_split.is_none_or(|s| batch.steps[e] > s);
    // Width: rank each tree's nodes there by |advantage| and keep the top fraction.
    let mut keep_node = std::collections::HashSet::new();
    let mut by_tree: std::collections::BTreeMap<usize, Vec<(usize, f32)>> = Default::default();
    for e in 0..n {
        if after(e) {
            let node = (trees[e], batch.children[e]);
            let entry = by_tree.entry(trees[e]).or_default();
            if !entry.iter().any(|&(c, _)| c == node.1) {
                entry.push((node.1, advantages[e].abs()));
            }
        }
    }
    for (tree, mut nodes) in by_tree {
        nodes.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let k = ((nodes.len() as f64 * cfg.width_keep).ceil() as usize).clamp(1, nodes.len());
        keep_node.extend(nodes[..k].iter().map(|&(child, _)| (tree, child)));
    }
    Ok((0..n)
        .filter(|&e| !drop_depths.contains(&(batch.steps[e] + 1)))
        .filter(|&e| !after(e) || keep_node.contains(&(trees[e], batch.children[e])))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two trees; step 0 splits into depth 1 (2 nodes each), steps 1 and 2 run below the last
    /// split at depth 2 (4 leaves each). Children are indexed per level.
    fn batch() -> (EdgeBatch, Vec<f32>) {
        let mut b = EdgeBatch {
            steps: vec![],
            children: vec![],
            rewards: vec![],
            trees: vec![],
            depths: vec![],
            last_depth: 2,
            last_split: Some(0),
            levels: 4,
            groups: vec![],
            num_groups: 6,
        };
        let mut adv = vec![];
        for (k, a) in [0.5f32, -0.5, 0.1, -0.1].iter().enumerate() {
            b.steps.push(0);
            b.children.push(k);
            adv.push(*a);
            b.trees.push(k / 2);
            b.depths.push(1);
        }
        let leaf_adv = [0.9f32, -0.1, 0.2, -0.8, 0.05, 0.3, -0.3, -0.05];
        for step in [1, 2] {
            for (k, a) in leaf_adv.iter().enumerate() {
                b.steps.push(step);
                b.children.push(k);
                adv.push(*a);
                b.trees.push(k / 4);
                b.depths.push(2);
            }
        }
        for _ in 0..b.steps.len() {
            b.rewards.push(0.0);
            b.groups.push(0);
        }
        (b, adv)
    }

    #[test]
    fn width_keeps_each_trees_largest_advantages_below_the_last_split() {
        let (b, adv) = batch();
        let cfg = PruneConfig { width_keep: 0.5, ..PruneConfig::default() };
        let kept = kept_edges(&b, &adv, &cfg, &[]).unwrap();
        // Depth-1 edges (0..4) all stay; tree 0 keeps leaves 0 (|0.9|) and 3 (|0.8|), tree 1
        // keeps leaves 5 (0.3) and 6 (0.3), at both steps.
        let leaves: Vec<usize> = kept.iter().filter(|&&e| e >= 4).map(|&e| b.children[e]).collect();
        assert_eq!(&kept[..4], &[0, 1, 2, 3]);
        assert_eq!(leaves, vec![0, 3, 5, 6, 0, 3, 5, 6]);
        let all = kept_edges(&b, &adv, &PruneConfig::default(), &[]).unwrap();
        assert_eq!(all, (0..20).collect::<Vec<_>>());
        // A split at step 1 keeps its edges whole: only step 2's are ranked.
        let later = EdgeBatch { last_split: Some(1), ..b.clone() };
        let kept = kept_edges(&later, &adv, &cfg, &[]).unwrap();
        assert_eq!(&kept[..12], &(0..12).collect::<Vec<_>>()[..]);
        let leaves: Vec<usize> = kept[12..].iter().map(|&e| b.children[e]).collect();
        assert_eq!(leaves, vec![0, 3, 5, 6]);
    }

    #[test]
    fn depth_pruning_drops_every_edge_whose_child_lies_at_a_listed_depth() {
        let (b, adv) = batch();
        let cfg = PruneConfig::default();
        // Depth 1: the children of step 0; depth 3: the children of step 2.
        assert_eq!(kept_edges(&b, &adv, &cfg, &[1]).unwrap(), (4..20).collect::<Vec<_>>());
        assert_eq!(kept_edges(&b, &adv, &cfg, &[3]).unwrap(), (0..12).collect::<Vec<_>>());
        let bad = PruneConfig { width_keep: 0.0, ..PruneConfig::default() };
        assert!(kept_edges(&b, &adv, &bad, &[]).unwrap_err().to_string().contains("width_keep"));
        let bad = PruneConfig { slide_every: Some(0), ..PruneConfig::default() };
        assert!(bad.validate().unwrap_err().to_string().contains("slide_every"));
    }

    #[test]
    fn the_sliding_schedule_moves_the_dropped_depths_up_to_the_last_split() {
        // 10 steps, last split at step 6: depths 8..=10 dropped at first, one level up every
        // 5 iterations counted from 1 (index 4 is the reference's 5th iteration), until the
        // shallowest is depth 6.
        let cfg =
            PruneConfig { drop_depths: vec![8, 9, 10], slide_every: Some(5), ..Default::default() };
        assert_eq!(cfg.dropped_depths(0, 6), vec![8, 9, 10]);
        assert_eq!(cfg.dropped_depths(3, 6), vec![8, 9, 10]);
        assert_eq!(cfg.dropped_depths(4, 6), vec![7, 8, 9]);
        assert_eq!(cfg.dropped_depths(9, 6), vec![6, 7, 8]);
        assert_eq!(cfg.dropped_depths(500, 6), vec![6, 7, 8]);
        let fixed = PruneConfig { slide_every: None, ..cfg.clone() };
        assert_eq!(fixed.dropped_depths(500, 6), vec![8, 9, 10]);
    }
}
