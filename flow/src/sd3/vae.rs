//! The SD3 VAE for decoding latents to images: the diffusers `vae/` folder's decoder, configured
//! from its `config.json`, with SD3's latent scaling and shift.

use std::path::Path;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use serde::Deserialize;

use super::vae_decoder::Decoder;
use crate::error::{file_err, Result};

/// The fields of diffusers' `AutoencoderKL` config the decoder needs (defaults: SD3's VAE).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default)]
pub struct VaeConfig {
    /// Image channels; default 3.
    pub in_channels: usize,
    /// Image channels out; default 3.
    pub out_channels: usize,
    /// Channels per resolution level; default `[128, 256, 512, 512]`.
    pub block_out_channels: Vec<usize>,
    /// ResNet blocks per encoder level (the decoder has one more); default 2.
    pub layers_per_block: usize,
    /// Latent channels; default 16.
    pub latent_channels: usize,
    /// GroupNorm groups; default 32.
    pub norm_num_groups: usize,
    /// `s` of `z = (latent − shift)·s`; the decoder sees `latent / s + shift`. Default 1.5305.
    pub scaling_factor: f64,
    /// The shift; default 0.0609.
    pub shift_factor: f64,
    /// Whether the decoder starts with a 1×1 `post_quant_conv` (SD1/SDXL; not SD3). Default
    /// false.
    pub use_post_quant_conv: bool,
    /// Whether the mid block has its self-attention; default true.
    pub mid_block_add_attention: bool,
}

impl Default for VaeConfig {
    fn default() -> Self {
        Self {
            in_channels: 3,
            out_channels: 3,
            block_out_channels: vec![128, 256, 512, 512],
            layers_per_block: 2,
            latent_channels: 16,
            norm_num_groups: 32,
            scaling_factor: 1.5305,
            shift_factor: 0.0609,
            use_post_quant_conv: false,
            mid_block_add_attention: true,
        }
    }
}

/// The frozen SD3 VAE: `decode(z) = Decoder(z / s + shift)`, images in about `[−1, 1]`.
pub struct Sd3Vae {
    post_quant_conv: Option<candle_nn::Conv2d>,
    decoder: Decoder,
    cfg: VaeConfig,
}

impl Sd3Vae {
    /// Loads `config.json` and `diffusion_pytorch_model.safetensors` from `dir` (a `vae/`
    /// folder, or a pipeline folder holding one) in `dtype`.
    pub fn from_dir(dir: &Path, dtype: DType, device: &Device) -> Result<Self> {
        let dir =
            if dir.join("config.json").is_file() { dir.to_path_buf() } else { dir.join("vae") };
        let path = dir.join("config.json");
        let text = std::fs::read_to_string(&path).map_err(|e| file_err(&path, e))?;
        let cfg: VaeConfig = serde_json::from_str(&text).map_err(|e| file_err(&path, e))?;
        if cfg.block_out_channels.is_empty()
            || cfg.norm_num_groups == 0
            || cfg.block_out_channels.iter().any(|c| c % cfg.norm_num_groups != 0)
        {
            return Err(file_err(
                &path,
                format!(
                    "block_out_channels {:?} must be non-empty multiples of norm_num_groups {}",
                    cfg.block_out_channels, cfg.norm_num_groups
                ),
            ));
        }
        let weights = dir.join("diffusion_pytorch_model.safetensors");
        // SAFETY: the file is memory-mapped read-only and not modified while the model lives.
        let vb = unsafe { VarBuilder::from_mmaped_safetensors(&[&weights], dtype, device) }
            .map_err(|e| file_err(&weights, e))?;
        Self::new(cfg, vb).map_err(|e| file_err(&weights, e))
    }

    /// The VAE of `cfg` from `vb` (diffusers' names; a `VarMap` gives a random one).
    pub fn new(cfg: VaeConfig, vb: VarBuilder) -> Result<Self> {
        let c = cfg.latent_channels;
        let post_quant_conv = if cfg.use_post_quant_conv {
            Some(candle_nn::conv2d(c, c, 1, Default::default(), vb.pp("post_quant_conv"))?)
        } else {
            None
        };
        let decoder = Decoder::new(
            c,
            cfg.out_channels,
            &cfg.block_out_channels,
            cfg.layers_per_block,
            cfg.norm_num_groups,
            cfg.mid_block_add_attention,
            vb.pp("decoder"),
        )?;
        Ok(Self { post_quant_conv, decoder, cfg })
    }

    /// The config.
    #[must_use]
    pub fn config(&self) -> &VaeConfig {
        &self.cfg
    }

    /// Latents `[B, 16, h, w]` (the transformer's space) → images `[B, 3, 8h, 8w]` (for SD3's
    /// four levels) in about `[−1, 1]`.
    pub fn decode(&self, latents: &Tensor) -> Result<Tensor> {
        let z = ((latents / self.cfg.scaling_factor)? + self.cfg.shift_factor)?;
        let z = match &self.post_quant_conv {
            Some(c) => candle_core::Module::forward(c, &z)?,
            None => z,
        };
        self.decoder.forward(&z)
    }
}
