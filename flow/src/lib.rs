//! drift-flow: flow-matching image models, their pretraining, Flow-GRPO, and the first pieces of
//! BranchGRPO (tree-reward fusion and depth-wise advantages; its trainer is planned).

pub mod branch;
pub mod error;
pub mod grpo;
pub mod model;

pub use error::{FlowModelError, Result};
pub mod pretrain;
pub mod pretrain_run;
