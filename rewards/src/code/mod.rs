//! Code-execution rewards (DiffuCoder's recipe, docs/algorithms.md §10): extraction of the fenced
//! Python block ([`extract`]), the format gate ([`format`]), sandboxed execution of test
//! cases ([`execute`], [`sandbox`]), and their weighted combination ([`reward`]).

pub mod execute;
pub mod extract;
pub mod format;
pub mod limits;
pub mod reward;
pub mod sandbox;
pub mod supervise;

pub use execute::{CodeTask, ExecutionReward};
pub use format::FormatReward;
pub use reward::{CodeReward, CodeRewardConfig};
pub use sandbox::{ActiveMode, Sandbox, SandboxConfig, SandboxMode};
