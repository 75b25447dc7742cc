//! BranchGRPO (Li et al., "BranchGRPO: Stable and Efficient GRPO with Structured Branching in
//! Diffusion Models", arXiv 2509.06040) on the flow family, run by the Flow-GRPO trainer when
//! the config has a `branch` table: tree rollouts come from `drift_samplers::flow::rollout_tree`;
//! this module turns a tree's leaf rewards into the per-edge rewards and `(prompt, depth)`
//! groups that the core's grouped advantages take ([`fusion`]), chooses the edges that stay in
//! the backward set ([`prune`], with the sliding depth schedule), samples and scores a forest
//! ([`rollout`]), trains on its edges with the core's policy loss ([`update`]) and draws each
//! tree ([`grid`]). BranchGRPO-Mix is a tree whose splits lie inside the rollout's SDE window,
//! ODE after it, so only the split edges are trained ([`FlowGrpoConfig::branch_grpo_mix`]).
//!
//! [`FlowGrpoConfig::branch_grpo_mix`]: crate::grpo::FlowGrpoConfig::branch_grpo_mix

pub mod config;
pub mod fusion;
pub mod grid;
pub mod prune;
pub mod rollout;
#[cfg(test)]
mod tests;
pub mod update;

pub use config::BranchConfig;
pub use fusion::{depth_advantages, edges, fuse_rewards, EdgeBatch, Fusion};
pub use grid::write_tree_grid;
pub use prune::{kept_edges, PruneConfig};
pub use rollout::{sample_tree_batch, TreeBatch};
pub use update::update_edges;
