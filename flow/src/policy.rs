//! What Flow-GRPO and BranchGRPO need of an image model, so one trainer serves the pixel DiT
//! of the shapes world and an SD3 / SD3.5 MMDiT with its VAE.

use std::path::Path;

use candle_core::{Device, Tensor};
use drift_core::train::Optimizer;
use drift_samplers::flow::VelocityField;

use crate::error::Result;

/// A flow-matching image model the trainer samples, scores and trains: a velocity field over
/// latents with tensor conditioning (one row per sample, so samplers and trainers select,
/// repeat and split it along dimension 0), its null conditioning for CFG, the latent shape it
/// samples, and the decoder from latents to images.
pub trait FlowPolicy: VelocityField<Cond = Tensor> {
    /// Where the model's tensors live.
    fn device(&self) -> &Device;
    /// `(C, H, W)` of one latent sample.
    fn latent_shape(&self) -> (usize, usize, usize);
    /// The unconditional conditioning of `n` samples (CFG's null prompt).
    fn null_cond(&self, n: usize) -> Result<Tensor>;
    /// Latents `[B, C, H, W]` → images `[B, 3, H', W']` in `[−1, 1]` (the identity for a
    /// pixel-space model, the VAE decoder for a latent one).
    fn decode(&self, latents: &Tensor) -> Result<Tensor>;
}

/// Saves a trained policy when a run ends: `(model_dir, optimizer)`, the optimizer holding the
/// trained parameters (and their EMA, when configured).
pub type SavePolicy = Box<dyn Fn(&Path, &Optimizer) -> Result<()>>;

/// The models of a Flow-GRPO run over one base: the tracked policy (rollouts and updates), a
/// view of the same weights detached from the graph (evaluation, under the EMA weights when
/// configured), the frozen reference of the KL term, the optimizer over the trained
/// parameters, and how to save the result.
pub struct PolicyModels<M> {
    /// The policy being trained.
    pub policy: M,
    /// The policy's weights, detached (shares their storage).
    pub view: M,
    /// The frozen reference policy.
    pub reference: M,
    /// The optimizer over the trained parameters.
    pub opt: Optimizer,
    /// Writes the trained model into a directory.
    pub save: SavePolicy,
}
