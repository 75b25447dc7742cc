//! Training plumbing shared by every trainer: parameter sets, AdamW with checkpointable
//! state, learning-rate schedules, global-norm clipping and accumulation, a non-finite guard,
//! weight EMA, atomic checkpoints with exact resume, gradient accumulation over micro-batches,
//! and the run skeleton ([`Run`]) every training loop is written on.

mod accumulate;
mod adamw;
mod budget;
mod checkpoint;
mod ema;
mod grads;
mod optimizer;
mod params;
mod run;
mod schedule;

pub use accumulate::{Accumulator, UpdateReport};
pub use adamw::{AdamW, AdamWConfig};
pub use budget::{TailMean, TimeBudget};
pub use checkpoint::{verify, CheckpointMeta, Checkpointer, Rejected};
pub use ema::{Ema, EmaConfig};
pub use grads::Grads;
pub use optimizer::{OptimConfig, Optimizer, SkipReason, StepReport};
pub use params::{detached_view, frozen_copy, ParamSet};
pub use run::{write_json, Finished, Resumed, Run, RunSettings, StepEnd, RUN_KEYS};
pub use schedule::LrSchedule;
