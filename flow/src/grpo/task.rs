//! What a text-to-image RL task provides the trainer: prompts, their conditioning and a
//! strict check, with the reward supplied separately as any [`Reward`].

use candle_core::{Device, Tensor};
use drift_rewards::image::Image;
use drift_rewards::reward::{ImageSample, Reward};

use crate::error::{FlowModelError, Result};

/// A text-to-image task: a training prompt stream, a fixed held-out set, the model's
/// conditioning for a prompt, and (where the task has one) a strict correctness check.
pub trait ImageTask {
    /// A prompt in the form the reward needs.
    type Prompt: Clone + Send + Sync + 'static;

    /// Training prompt number `index` of the stream seeded by `seed` (a pure function: a run
    /// resumed at step `s` sees the same prompts).
    fn train_prompt(&self, seed: u64, index: u64) -> Self::Prompt;

    /// The fixed held-out evaluation prompts.
    fn eval_prompts(&self) -> &[Self::Prompt];

    /// The conditioning tensor of a batch of prompts (for the DiT: token ids `[B, L]`).
    fn encode(&self, prompts: &[Self::Prompt], device: &Device) -> Result<Tensor>;

    /// The caption shown under the prompt's image in a grid.
    fn caption(&self, prompt: &Self::Prompt) -> String;

    /// Whether `image` is strictly correct for `prompt`; `None` when the task has no such check.
    fn strict(&self, prompt: &Self::Prompt, image: &Image) -> Option<bool>;

    /// The prompt's category for per-category tables (GenEval's `counting`, `position`, …);
    /// `None` (the default) when the task has none.
    fn category(&self, _prompt: &Self::Prompt) -> Option<&'static str> {
        None
    }

    /// How many objects the task's detector finds in `image`, mentioned by the prompt or not:
    /// a reward-hacking check for verifiers that accept extra objects (GenEval's include
    /// rule), where a policy can raise its score by drawing more of everything. `None` (the
    /// default) when the task has no detector.
    fn objects(&self, _image: &Image) -> Option<usize> {
        None
    }
}

/// The reward a Flow-GRPO run optimises: any reward over image samples of the task's prompts.
pub type ImageReward<P> = dyn Reward<ImageSample<P>>;

/// Images `[B, 3, H, W]` in `[−1, 1]` to host images (one host copy per batch).
pub fn tensor_to_images(x: &Tensor) -> Result<Vec<Image>> {
    let (_, c, h, w) = x.dims4()?;
    if c != 3 {
        return Err(FlowModelError::Config {
            field: "images",
            value: format!("{c} channels"),
            expected: "RGB images [B, 3, H, W]".into(),
        });
    }
    let flat = x.flatten_from(1)?.to_vec2::<f32>()?;
    flat.iter()
        .map(|v| {
            Image::from_chw_f32(w, h, v).map_err(|e| FlowModelError::Config {
                field: "images",
                value: e.to_string(),
                expected: "finite pixel values".into(),
            })
        })
        .collect()
}

/// Pairs images with their prompts as reward samples.
pub fn image_samples<P: Clone>(prompts: &[P], images: &[Image]) -> Result<Vec<ImageSample<P>>> {
    prompts
        .iter()
        .zip(images)
        .map(|(p, im)| {
            ImageSample::new(p.clone(), im.width(), im.height(), im.as_raw().to_vec()).map_err(
                |e| FlowModelError::Config {
                    field: "images",
                    value: e.to_string(),
                    expected: "an RGB image".into(),
                },
            )
        })
        .collect()
}
