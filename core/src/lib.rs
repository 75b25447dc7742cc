//! drift-core: the group-advantage and policy-loss core shared by every algorithm in drift,
//! and keyed randomness.
//!
//! One loop serves both model families (docs/architecture.md §3): rollout → reward → **group advantages**
//! → log-probs of each action under old / current / reference policy → **policy loss** →
//! optimizer step. This crate is the bold part. It only ever sees tensors `[N, T]` of
//! log-probs, advantages and masks, and group ids; it never knows whether an action was a
//! completion token, a whole sequence scored by its ELBO, a denoising transition or a tree edge.
//!
//! ```
//! use candle_core::{Device, Tensor};
//! use drift_core::advantage::{group_advantages, AdvantageConfig};
//! use drift_core::groups::Groups;
//! use drift_core::loss::{policy_loss, PolicyInputs, PolicyLossConfig};
//!
//! let dev = Device::Cpu;
//! let groups = Groups::contiguous(2, 2, &dev)?; // 2 prompts × 2 samples
//! let rewards = Tensor::new(&[1f32, 0., 0.5, 0.5], &dev)?;
//! let adv = group_advantages(&rewards, &groups, &AdvantageConfig::leave_one_out())?;
//! let lp = Tensor::new(&[[-1f32, -2.], [-0.5, -1.], [-1., -1.], [-3., -1.]], &dev)?;
//! let mask = Tensor::ones((4, 2), candle_core::DType::F32, &dev)?;
//! let out = policy_loss(
//!     &PolicyLossConfig::dapo(),
//!     &PolicyInputs { lp_new: &lp, lp_old: &lp, mask: &mask, advantages: &adv.values, reference: None },
//! )?;
//! assert_eq!(out.diagnostics()?.ratio_max, 1.0); // on-policy
//! # Ok::<(), drift_core::CoreError>(())
//! ```

// Config checks are written `!(x > 0.0)` on purpose: unlike `x <= 0.0`, they also reject NaN.
#![allow(clippy::neg_cmp_op_on_partial_ord)]

pub mod advantage;
pub mod alloc;
pub mod bench;
pub mod error;
pub mod font;
pub mod groups;
pub mod loss;
pub mod metrics;
pub mod nn;
pub mod ops;
pub mod rng;
mod sync_ptr;
pub mod train;

pub use error::{CoreError, Result};
