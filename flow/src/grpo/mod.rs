//! Flow-GRPO (arXiv 2505.05470): online RL for flow-matching text-to-image models, through the
//! shared core (docs/algorithms.md §8).
//!
//! An iteration samples `P` prompts × `G` images with the SDE at `N_train` steps, scores them
//! with any [`drift_rewards::Reward`] over image samples, computes per-prompt advantages with
//! [`drift_core::advantage::group_advantages`], and trains the first `⌊0.99·N_train⌋`
//! transitions with the per-transition PPO clip and the Gaussian-mean KL to the frozen base
//! ([`drift_core::loss::policy_loss`]). Evaluation samples the held-out prompts with the ODE at
//! `N_eval` steps under the EMA weights.
//!
//! - [`config`]: [`FlowGrpoConfig`] with the reference defaults;
//! - [`task`]: the [`ImageTask`] a run trains on, [`shapes`]: the shipped shapes world;
//! - [`rollout`], [`update`](mod@update), [`eval`]: the three phases; [`trainer`]: the loop.

pub mod config;
pub mod eval;
pub mod rollout;
pub mod shapes;
pub mod task;
#[cfg(test)]
pub(crate) mod tests;
pub mod text_task;
pub mod trainer;
pub mod update;

pub use config::{FlowGrpoConfig, KlStd};
pub use eval::{
    category_scores, diversity, evaluate, mean_pairwise_distance, rms_distance, sample_prompts,
    CategoryScore, EvalReport, EvalSampling,
};
pub use rollout::{sample_batch, RolloutBatch};
pub use shapes::{
    category_weights, shapes_reward, RewardTerm, ShapesTask, EVAL_IMAGES_PER_CATEGORY,
    SHAPES_REWARDS,
};
pub use task::{ImageReward, ImageTask};
pub use text_task::{text_reward, TextPrompt, TextPromptTask, TEXT_REWARDS};
pub use trainer::{train_flow_grpo, train_flow_grpo_with, FlowGrpoReport};
pub use update::{update, UpdateCost, UpdateReport};
