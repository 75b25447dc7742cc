//! drift-flow: flow-matching image models, their pretraining and Flow-GRPO (BranchGRPO is planned).

pub mod error;
pub mod grpo;
pub mod model;

pub use error::{FlowModelError, Result};
pub mod pretrain;
pub mod pretrain_run;
