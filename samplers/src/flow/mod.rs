//! Flow-matching samplers: SD3 schedules, Euler ODE, Flow-GRPO and DanceGRPO SDEs, CPS,
//! windowed SDE rollouts (docs/algorithms.md §7), and BranchGRPO's tree rollouts.
//!
//! Convention: `x_σ = (1−σ) x₀ + σ ε`, velocity `v = ε − x₀`, `σ` goes from 1 to 0, and step
//! `i` moves from `σ_i` to `σ_{i+1}` with `dt = σ_{i+1} − σ_i < 0`.

mod error;
mod schedule;

pub use error::{FlowError, Result};
pub use schedule::{Schedule, ScheduleConfig};
mod step;
pub use step::{gaussian_log_prob, LogProbReduce, Next, StepKind, Transition};
mod sampler;
#[cfg(test)]
mod tests;
mod tree;
mod velocity;
pub use sampler::{
    rollout_sde, sample_ode, transition_log_prob, transitions_log_prob, Rollout, RolloutConfig,
    Window,
};
pub use tree::{rollout_tree, TreeConfig, TreeRollout};
pub use velocity::{evaluations_per_call, guided_velocity, Guidance, VelocityField};
