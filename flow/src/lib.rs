//! drift-flow: flow-matching image models, their pretraining, Flow-GRPO, and BranchGRPO (tree
//! rollouts through the Flow-GRPO trainer: reward fusion, depth-wise advantages, pruning, Mix).

pub mod branch;
pub mod error;
pub mod grpo;
pub mod model;
pub mod policy;
pub mod sd3;

pub use error::{FlowModelError, Result};
pub mod pretrain;
pub mod pretrain_run;
