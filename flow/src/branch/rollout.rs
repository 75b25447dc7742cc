//! One BranchGRPO rollout batch: `P` prompts × `R` trees, their leaves scored, rewards fused up
//! every tree, depth-wise advantages on every trained edge, and the backward set after pruning.

use std::time::Instant;

use candle_core::{DType, Tensor};
use drift_core::groups::shuffle_within_groups;
use drift_rewards::image::Image;
use drift_rewards::reward::Outcome;
use drift_samplers::flow::{rollout_tree, Guidance, Schedule, TreeRollout};

use super::config::BranchConfig;
use super::fusion::{depth_advantages, edges, fuse_rewards, EdgeBatch};
use super::prune::kept_edges;
use crate::error::Result;
use crate::grpo::rollout::{initial_noise, rollout_key};
use crate::grpo::task::{image_samples, tensor_to_images, ImageReward, ImageTask};
use crate::grpo::update::trained_transitions;
use crate::grpo::FlowGrpoConfig;
use crate::policy::FlowPolicy;

/// A scored forest: `P·R` trees whose `B = P·G` leaves are the batch's images, leaf `b`
/// belonging to prompt `b / G` (trees are prompt-major, leaves tree-major).
#[derive(Debug)]
pub struct TreeBatch<P> {
    /// The prompt of every leaf.
    pub prompts: Vec<P>,
    /// The conditioning of every tree's root, `[P·R, L]`.
    pub cond: Tensor,
    /// The recorded tree rollout (every level's latents, parents, means, log-probs).
    pub tree: TreeRollout,
    /// The leaves as images.
    pub images: Vec<Image>,
    /// The leaves' reward outcomes.
    pub outcomes: Vec<Outcome>,
    /// The task's strict check of every leaf, where it has one.
    pub strict: Vec<Option<bool>>,
    /// Every trained edge (the stochastic steps among the trained ones) with its fused reward
    /// and `(prompt, depth)` group.
    pub edges: EdgeBatch,
    /// The depth-wise advantage of every edge (host copy).
    pub advantages_host: Vec<f32>,
    /// The edges left in the backward set after pruning, in order.
    pub kept: Vec<usize>,
    /// The depths dropped this iteration (the sliding schedule's position).
    pub dropped_depths: Vec<usize>,
    /// Fraction of prompts whose leaves all scored the same (zero advantage everywhere).
    pub degenerate_frac: f64,
    /// Seconds spent sampling and scoring.
    pub rollout_seconds: f64,
    /// Seconds spent in the reward.
    pub reward_seconds: f64,
}

impl<P> TreeBatch<P> {
    /// The reward of every leaf.
    pub fn rewards(&self) -> Vec<f64> {
        self.outcomes.iter().map(|o| o.score).collect()
    }
}

/// Samples iteration `step`'s forest with `model` (the current policy), scores the leaves with
/// `reward`, fuses the rewards up every tree, computes the advantages of every trained edge
/// within its `(prompt, depth)` group and prunes the backward set. Tree `j` of prompt `k`
/// draws its noise under global row `k·R + j`, so with `b = 1` and `R = G` the leaves are
/// exactly Flow-GRPO's samples of the same iteration.
pub fn sample_tree_batch<M: FlowPolicy, T: ImageTask>(
    model: &M,
    task: &T,
    reward: &ImageReward<T::Prompt>,
    cfg: &FlowGrpoConfig,
    branch: &BranchConfig,
    schedule: &Schedule,
    step: u64,
) -> Result<TreeBatch<T::Prompt>> {
    let start = Instant::now();
    let dev = model.device().clone();
    let (p, g, r) = (cfg.prompts_per_step, cfg.group_size, branch.roots_per_prompt);
    let group_prompts: Vec<T::Prompt> =
        (0..p as u64).map(|i| task.train_prompt(cfg.run.seed, step * p as u64 + i)).collect();
    let roots: Vec<T::Prompt> =
        group_prompts.iter().flat_map(|q| std::iter::repeat_n(q.clone(), r)).collect();
    let cond = task.encode(&roots, &dev)?;
    let key = rollout_key(cfg.run.seed, step);
    let rows: Vec<u64> = (0..roots.len() as u64).collect();
    let x = initial_noise(key, &rows, model.latent_shape(), &dev)?;
    let null = model.null_cond(roots.len())?;
    let guide = Guidance { uncond: &null, scale: cfg.guidance };
    let guidance = (cfg.guidance != 1.0).then_some(&guide);
    let tree =
        rollout_tree(model, &x, &cond, schedule, &cfg.rollout, &branch.tree, guidance, key, &rows)?;
    let images = tensor_to_images(&model.decode(tree.leaves())?)?;
    let prompts: Vec<T::Prompt> =
        group_prompts.iter().flat_map(|q| std::iter::repeat_n(q.clone(), g)).collect();
    let reward_start = Instant::now();
    let outcomes = reward.evaluate_batch(&image_samples(&prompts, &images)?);
    let reward_seconds = reward_start.elapsed().as_secs_f64();
    let strict = prompts.iter().zip(&images).map(|(q, im)| task.strict(q, im)).collect();

    let mut scores: Vec<f32> = outcomes.iter().map(|o| o.score as f32).collect();
    if cfg.shuffle_rewards {
        shuffle_within_groups(&mut scores, g, key.stream("shuffle_rewards"));
    }
    let degenerate_frac = degenerate_fraction(&scores, g, cfg.advantage.degenerate_tol);
    let leaf_rewards: Vec<f64> = scores.iter().map(|&s| f64::from(s)).collect();
    let fused = fuse_rewards(&tree, &leaf_rewards, branch.fusion)?;
    let steps = trained_transitions(cfg, &tree.stochastic);
    let mut edge_batch = edges(&tree, &fused, &steps)?;
    edge_batch.group_trees(r);
    let adv = depth_advantages(&edge_batch, &cfg.advantage, &dev)?;
    let advantages_host = adv.values.to_dtype(DType::F32)?.to_vec1::<f32>()?;
    let last_split = branch.tree.split_steps.last().copied().unwrap_or(0);
    let dropped_depths = branch.prune.dropped_depths(step, last_split);
    let kept = kept_edges(&edge_batch, &advantages_host, &branch.prune, &dropped_depths)?;
    Ok(TreeBatch {
        prompts,
        cond,
        tree,
        images,
        outcomes,
        strict,
        edges: edge_batch,
        advantages_host,
        kept,
        dropped_depths,
        degenerate_frac,
        rollout_seconds: start.elapsed().as_secs_f64(),
        reward_seconds,
    })
}

/// Fraction of the `g`-sized groups of `scores` whose population std is at most `tol`.
fn degenerate_fraction(scores: &[f32], g: usize, tol: f64) -> f64 {
    let groups = scores.chunks(g.max(1));
    let n = groups.len().max(1) as f64;
    let flat = groups
        .filter(|c| {
            let m = c.iter().map(|&x| f64::from(x)).sum::<f64>() / c.len() as f64;
            let v = c.iter().map(|&x| (f64::from(x) - m).powi(2)).sum::<f64>() / c.len() as f64;
            v.sqrt() <= tol
        })
        .count();
    flat as f64 / n
}
