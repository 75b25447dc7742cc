//! BranchGRPO (Li et al., "BranchGRPO: Stable and Efficient GRPO with Structured Branching in
//! Diffusion Models", arXiv 2509.06040) on the flow family: tree rollouts come from
//! `drift_samplers::flow::rollout_tree`; this module turns a tree's leaf rewards into the
//! per-edge rewards and `(tree, depth)` groups that the core's grouped advantages take
//! ([`fusion`]), and chooses the edges that stay in the backward set ([`prune`]). The trainer,
//! the sliding depth schedule and the Mix schedule are still to come (issue 22).

pub mod fusion;
pub mod prune;

pub use fusion::{depth_advantages, edges, fuse_rewards, EdgeBatch, Fusion};
pub use prune::{kept_edges, PruneConfig};
