//! drift-flow: flow-matching image models, Flow-GRPO and BranchGRPO.
