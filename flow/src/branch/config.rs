//! BranchGRPO's settings inside a Flow-GRPO run (`branch = { … }` in the run's TOML), and the
//! presets that compare it with Flow-GRPO on the shipped shapes world.

use drift_core::advantage::AdvantageConfig;
use drift_samplers::flow::{RolloutConfig, TreeConfig, Window};
use serde::{Deserialize, Serialize};

use super::fusion::Fusion;
use super::prune::PruneConfig;
use crate::error::{FlowModelError, Result};
use crate::grpo::FlowGrpoConfig;

/// A tree rollout instead of `G` independent samples per prompt (BranchGRPO, arXiv
/// 2509.06040). Each prompt gets `roots_per_prompt` trees of `b^splits` leaves, and
/// `roots_per_prompt · b^splits` must equal the run's `group_size`: the same number of final
/// images per prompt as Flow-GRPO. The advantage group of an edge is `(prompt, depth)`, all the
/// prompt's trees together.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BranchConfig {
    /// Split steps, children per split, split noise. Default `[0, 3, 6]` of the 10-step
    /// schedule, `b = 2`: 8 leaves per root.
    pub tree: TreeConfig,
    /// Trees per prompt. Default 1 (the reference's one root per prompt). With `b = 1` and
    /// `roots_per_prompt = group_size` the run is exactly Flow-GRPO (tested).
    pub roots_per_prompt: usize,
    /// How a node's reward comes from its children's. Default the mean of its leaves.
    pub fusion: Fusion,
    /// Which edges leave the backward set. Default none pruned.
    pub prune: PruneConfig,
}

impl Default for BranchConfig {
    fn default() -> Self {
        Self {
            tree: TreeConfig::default(),
            roots_per_prompt: 1,
            fusion: Fusion::Mean,
            prune: PruneConfig::default(),
        }
    }
}

fn bad(field: &'static str, value: impl ToString, expected: String) -> FlowModelError {
    FlowModelError::Config { field, value: value.to_string(), expected }
}

impl BranchConfig {
    /// Final images per prompt: `roots_per_prompt · b^splits`.
    pub fn leaves_per_prompt(&self) -> usize {
        self.roots_per_prompt * self.tree.leaves_per_root()
    }

    /// Checks the tree against the run's schedule, SDE window and group size, naming the
    /// field at fault.
    pub fn validate(&self, steps: usize, rollout: &RolloutConfig, group_size: usize) -> Result<()> {
        self.tree.validate(steps, rollout)?;
        self.prune.validate()?;
        if self.roots_per_prompt == 0 {
            return Err(bad("branch.roots_per_prompt", 0, "at least 1".into()));
        }
        if self.leaves_per_prompt() != group_size {
            return Err(bad(
                "group_size",
                group_size,
                format!(
                    "roots_per_prompt × branching^splits = {} × {}^{} = {} (the final images per \
                     prompt of the tree)",
                    self.roots_per_prompt,
                    self.tree.branching,
                    self.tree.split_steps.len(),
                    self.leaves_per_prompt()
                ),
            ));
        }
        if let Fusion::PathWeighted { alpha } = self.fusion {
            if !alpha.is_finite() {
                return Err(bad("branch.fusion.alpha", alpha, "a finite number".into()));
            }
        }
        Ok(())
    }

    /// A one-line picture of a tree: the live nodes per root after each split, e.g.
    /// `1→2→4→8 at steps [0, 3, 6]`.
    pub fn shape(&self) -> String {
        let mut widths = vec![1usize];
        for _ in &self.tree.split_steps {
            widths.push(widths.last().copied().unwrap_or(1) * self.tree.branching);
        }
        let path: Vec<String> = widths.iter().map(ToString::to_string).collect();
        format!(
            "{} per root at steps {:?}, {} root(s) per prompt",
            path.join("→"),
            self.tree.split_steps,
            self.roots_per_prompt
        )
    }
}

/// BranchGRPO's advantage with the main job's clip at 5 (a TOML file over the defaults cannot
/// unset it).
fn branch_advantage() -> AdvantageConfig {
    AdvantageConfig { clip: Some(5.0), ..AdvantageConfig::branch_grpo() }
}

impl FlowGrpoConfig {
    /// Flow-GRPO with the SDE on every step of the 10-step schedule (its paper's setting, and
    /// the baseline BranchGRPO's speed-ups are measured against; the shipped default trains
    /// the first 3 steps only): 8 independent samples per prompt, 9 trained transitions each.
    /// (The window spans the whole schedule rather than being unset so that a TOML file over
    /// the defaults can say it: `window = { start = 0, len = 10 }`.)
    pub fn flow_grpo_all_steps() -> Self {
        let base = Self::default();
        let window = Some(Window { start: 0, len: base.schedule.steps });
        Self { rollout: RolloutConfig { window, ..base.rollout }, ..base }
    }

    /// BranchGRPO (arXiv 2509.06040) on the shipped world: the SDE on every step, one tree per
    /// prompt splitting in two at steps 0, 3 and 6 (8 leaves, Flow-GRPO's 8 images), rewards
    /// fused by the mean of the leaves, advantages per `(prompt, depth)` with the unbiased std
    /// (`AdvantageConfig::branch_grpo`, kept clipped at the main job's 5, which a group of
    /// `n ≤ 8` nodes never reaches: `|A| ≤ (n−1)/√n`), every edge of the first 9 steps trained.
    pub fn branch_grpo() -> Self {
        Self {
            advantage: branch_advantage(),
            branch: Some(BranchConfig::default()),
            ..Self::flow_grpo_all_steps()
        }
    }

    /// [`Self::branch_grpo`] with the backward set pruned: after the last split (steps 7 and
    /// 8, the trained ones) half of each tree's leaves (largest `|advantage|`) keep their
    /// edges, and the edges into depth 9 (step 8's) are dropped, the dropped depth sliding one
    /// level up every 10 iterations down to depth 6 (the last split step's).
    pub fn branch_grpo_pruned() -> Self {
        let mut cfg = Self::branch_grpo();
        let branch = cfg.branch.get_or_insert_with(BranchConfig::default);
        branch.prune = PruneConfig { width_keep: 0.5, drop_depths: vec![9], slide_every: Some(10) };
        cfg
    }

    /// BranchGRPO-Mix: the tree splits at steps 0, 1 and 2 inside a 3-step SDE window and runs
    /// the ODE after it, so only the split edges are stochastic and trained (the shipped
    /// Flow-GRPO default's window, with the 8 images branching from one root).
    pub fn branch_grpo_mix() -> Self {
        let tree = TreeConfig { split_steps: vec![0, 1, 2], ..TreeConfig::default() };
        Self {
            advantage: branch_advantage(),
            rollout: RolloutConfig {
                window: Some(Window { start: 0, len: 3 }),
                ..RolloutConfig::default()
            },
            branch: Some(BranchConfig { tree, ..BranchConfig::default() }),
            ..Self::default()
        }
    }
}
