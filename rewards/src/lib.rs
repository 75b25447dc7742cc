//! drift-rewards: rewards, verifiers and the shipped toy worlds (docs/architecture.md §4,
//! docs/algorithms.md §10).
//!
//! - [`reward`]: the [`Reward`] trait, generic over the sample type ([`reward::TextSample`]
//!   for text, [`reward::ImageSample`] or the image module's own type for images), with
//!   per-sample [`Details`] and recorded [`Failure`]s instead of crashes;
//! - [`pool`]: parallel evaluation on a bounded thread pool with per-sample time-outs;
//! - [`combine`]: weighted sums of rewards;
//! - [`http`]: rewards computed by a scoring service over HTTP (models served from Python);
//! - [`sandbox`]: running untrusted programs (rlimits, empty environment, per-run uid, bwrap
//!   when it works);
//! - [`verifiers`]: the verifiers shared across worlds (math final answers, exact rational
//!   expressions, answer tags);
//! - [`image`]: the RGB8 image buffer, JPEG (in)compressibility, PNG, captioned grids;
//! - [`worlds`]: one folder per toy world, each with its seeded generator and train /
//!   held-out split, its verifier or reward and its JSONL — [`worlds::shapes`] (GenEval-style
//!   text-to-image), [`worlds::code`] (with DiffuCoder's code reward: format gate 0.5 +
//!   execution 2.0 in the sandbox), [`worlds::countdown`], [`worlds::sudoku`]; [`jsonl`]:
//!   JSON Lines reading and writing.
//!
//! ```
//! use drift_rewards::reward::{Reward, TextSample};
//! use drift_rewards::worlds::countdown::CountdownReward;
//! use drift_rewards::worlds::countdown::{CountdownConfig, CountdownWorld};
//! use drift_rewards::worlds::{Split, TextItem};
//!
//! let world = CountdownWorld::new(CountdownConfig::default())?;
//! let item = world.item(Split::Train, 0);
//! let good = TextSample::new(item.clone(), item.target());
//! let bad = TextSample::new(item.clone(), "<answer>1 + 1</answer>");
//! let scores: Vec<f64> =
//!     CountdownReward.evaluate_batch(&[good, bad]).iter().map(|o| o.score).collect();
//! assert_eq!(scores, vec![1.0, 0.1]);
//! # Ok::<(), drift_rewards::RewardError>(())
//! ```

pub mod combine;
pub mod error;
pub mod http;
pub mod image;
pub mod jsonl;
pub mod pool;
pub mod reward;
pub mod sandbox;
pub mod verifiers;
pub mod worlds;

pub use error::RewardError;
pub use reward::{Details, Evaluation, Failure, FailureKind, Outcome, Reward};
